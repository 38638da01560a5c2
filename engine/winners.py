"""Which labels win a k-NN vote whose ballots are candidate sets.

A target's K neighbours vote with weights ``w``; a partially labelled neighbour is a ballot
with several candidates. Over all *completions* (one label chosen from every neighbour's
set), a label is

* **necessary** (``NL``) when it wins, ties included, in every completion;
* **possible** (``PL``) when it wins, ties included, in at least one completion;
* **approximately possible** (``APL``) when ``Smax(λ) ≥ max_{λ'≠λ} Smin(λ')``, a cheap
  superset of ``PL``.

``Smin(λ)`` sums the weights of the neighbours whose set is exactly ``{λ}`` and ``Smax(λ)``
those whose set contains ``λ``; then ``λ ∈ NL ⟺ Smin(λ) ≥ Smax(λ')`` for every ``λ' ≠ λ``
and always ``NL ⊆ PL ⊆ APL``. Bounds, NL and APL cost ``O(T·K·M)`` and are vectorised over
all targets, processed in chunks of targets so memory stays linear in the data.
Exact ``PL`` is a max-flow problem for equal weights and NP-hard for unequal weights
(a bin-packing feasibility, solved with OR-Tools CP-SAT); see :func:`possible_labels`.

Vote totals are always summed in neighbour order, so that the same multiset of weights in
the same order gives bit-identical totals wherever they are compared; float weights are
compared exactly (ties count as wins).

References
----------
V.-L. Nguyen, S. Destercke, M.-H. Masson. Possible and necessary labels in K-nn procedures
to query partially labelled data. DA2PL 2016.
"""

from __future__ import annotations

from numbers import Integral
from typing import Literal

import numpy as np

from engine._validation import check_candidates, check_neighbors, check_scalar
from engine.exceptions import InvalidInput

__all__ = [
    "vote_bounds",
    "necessary_labels",
    "approx_possible_labels",
    "possible_labels",
    "witness",
    "ambiguous_targets",
]

#: Targets per chunk in the vectorised kernels: large enough to amortise numpy's
#: per-call overhead, small enough that the per-chunk temporaries stay in cache-sized MBs.
CHUNK_TARGETS = 32_768


def vote_bounds(idx: np.ndarray, w: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lowest and highest total vote every label can get over all completions.

    Parameters
    ----------
    idx : int array of shape (n_targets, k)
        Training rows of each target's neighbours.
    w : float array of shape (n_targets, k)
        Non-negative vote weights.
    Y : bool array of shape (n_instances, n_labels)
        Candidate sets.

    Returns
    -------
    smin, smax : float arrays of shape (n_targets, n_labels)
    """
    Y = check_candidates(Y)
    idx, w = check_neighbors(idx, w, Y)
    return _bounds(idx, w, Y)


def necessary_labels(idx: np.ndarray, w: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Labels that win (ties included) under every completion: bool array (n_targets, n_labels)."""
    smin, smax = vote_bounds(idx, w, Y)
    return _necessary(smin, smax)


def approx_possible_labels(idx: np.ndarray, w: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """The cheap superset ``APL ⊇ PL``: bool array of shape (n_targets, n_labels)."""
    smin, smax = vote_bounds(idx, w, Y)
    return _approx_possible(smin, smax)


def ambiguous_targets(necessary: np.ndarray, possible: np.ndarray) -> np.ndarray:
    """Targets whose decision the candidate sets leave open (``NL ≠ PL``): bool (n_targets,)."""
    return (necessary != possible).any(axis=1)


# --------------------------------------------------------------------------- kernels
# The kernels below trust their input (validated by the public functions above).


def _bounds(idx: np.ndarray, w: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n_targets, k = idx.shape
    y_max = Y.astype(np.float64)
    y_min = y_max * (Y.sum(axis=1) == 1)[:, None]
    smin = np.zeros((n_targets, Y.shape[1]))
    smax = np.zeros((n_targets, Y.shape[1]))
    for start in range(0, n_targets, CHUNK_TARGETS):
        rows = slice(start, start + CHUNK_TARGETS)
        _accumulate(idx[rows], w[rows], y_min, smin[rows])
        _accumulate(idx[rows], w[rows], y_max, smax[rows])
    return smin, smax


def _accumulate(idx: np.ndarray, w: np.ndarray, table: np.ndarray, out: np.ndarray) -> None:
    # One gather per neighbour position (a loop over K, never over targets); adding in
    # neighbour order keeps totals bit-identical wherever the same weights are summed.
    for j in range(idx.shape[1]):
        out += w[:, j, None] * table[idx[:, j]]


def _max_excluding_self(scores: np.ndarray) -> np.ndarray:
    """For each (t, λ): ``max_{λ' ≠ λ} scores[t, λ']`` (−inf when there is a single label)."""
    n_labels = scores.shape[1]
    if n_labels == 1:
        return np.full_like(scores, -np.inf)
    top2 = np.partition(scores, n_labels - 2, axis=1)[:, -2:]
    second, first = top2[:, 0], top2[:, 1]
    argmax = scores.argmax(axis=1)
    out = np.repeat(first[:, None], n_labels, axis=1)
    out[np.arange(scores.shape[0]), argmax] = second
    return out


def _necessary(smin: np.ndarray, smax: np.ndarray) -> np.ndarray:
    return smin >= _max_excluding_self(smax)


def _approx_possible(smin: np.ndarray, smax: np.ndarray) -> np.ndarray:
    return smax >= _max_excluding_self(smin)


def possible_labels(
    idx: np.ndarray,
    w: np.ndarray,
    Y: np.ndarray,
    *,
    method: Literal["auto", "flow", "cpsat"] = "auto",
    time_limit: float = 10.0,
    return_stats: bool = False,
):
    """Exact possible labels: those that win (ties included) in at least one completion.

    Cheap decisions come first (``NL ⊆ PL ⊆ APL``, then a greedy completion as a witness);
    only the (target, label) pairs still open go to an exact solver: a max-flow when the
    target's positive weights are all equal (polynomial), OR-Tools CP-SAT otherwise.

    Parameters
    ----------
    idx, w, Y
        As in :func:`vote_bounds`.
    method : {"auto", "flow", "cpsat"}
        ``"auto"`` uses max-flow for equal-weight targets and CP-SAT for the rest;
        ``"flow"`` requires equal weights; ``"cpsat"`` sends every open pair to CP-SAT.
    time_limit : float
        Seconds allowed for one CP-SAT call; hitting it raises :class:`SolverError`.
    return_stats : bool
        Also return a dict counting how each (target, label) pair was decided:
        ``bounds``, ``greedy``, ``flow``, ``cpsat``.

    Returns
    -------
    possible : bool array of shape (n_targets, n_labels)
    stats : dict, only when ``return_stats`` is True
    """
    from engine._possible import possible_from_graph

    Y = check_candidates(Y)
    idx, w = check_neighbors(idx, w, Y)
    possible, stats = possible_from_graph(idx, w, Y, method=method, time_limit=time_limit)
    return (possible, stats) if return_stats else possible


def witness(
    idx_row: np.ndarray, w_row: np.ndarray, Y: np.ndarray, label: int, *, time_limit: float = 10.0
) -> np.ndarray | None:
    """A completion under which ``label`` wins the vote of one target, or None if impossible.

    Returns an int array of shape (k,): the label each neighbour takes. Neighbours whose set
    holds ``label`` vote for it; the others are spread so that no label outscores it.
    """
    from engine._possible import witness_for_row

    Y = check_candidates(Y)
    idx_2d, w_2d = check_neighbors(np.atleast_2d(idx_row), np.atleast_2d(w_row), Y)
    if idx_2d.shape[0] != 1:
        raise InvalidInput(f"witness explains one target: idx_row must be 1-D, got shape {np.shape(idx_row)}")
    check_scalar(label, "label", kind=Integral, min_value=0, max_value=Y.shape[1] - 1)
    return witness_for_row(idx_2d[0], w_2d[0], Y, int(label), time_limit=time_limit)
