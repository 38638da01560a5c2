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
from typing import Literal, NamedTuple

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


class CandidateSets(NamedTuple):
    """Candidate sets in the layouts the kernels need, built once per ``Y``."""

    dense: np.ndarray  # bool (n, M)
    sizes: np.ndarray  # int (n,)
    labels: np.ndarray  # int (Σ sizes,): the labels of row 0, then row 1, ...
    start: np.ndarray  # int (n,): where row i's labels begin in ``labels``
    members: np.ndarray  # uint8 (n, 2M): [y_i | y_i if precise else 0], for counting votes

    @classmethod
    def from_dense(cls, Y: np.ndarray) -> "CandidateSets":
        sizes = Y.sum(axis=1)
        members = np.concatenate([Y, Y & (sizes == 1)[:, None]], axis=1).view(np.uint8)
        return cls(Y, sizes, np.nonzero(Y)[1], np.concatenate([[0], np.cumsum(sizes)[:-1]]), members)


def _sums_are_exact(w: np.ndarray) -> bool:
    """True when every partial sum of a row's weights is exact in float64.

    Then any summation order, and adding or removing a weight, gives bit for bit the
    neighbour-order sum. Holds for equal weights, small integers and dyadic fractions: all
    weights are multiples of 2**-30 and a row's total stays below 2**52 of those units.
    """
    units = w * 2.0**30
    return bool(np.all(units == np.round(units)) and np.all(units.sum(axis=1) < 2.0**52))


def _counts_suffice(w: np.ndarray) -> bool:
    """Each row's weights are equal and exact, so a bound is (vote count) x (row weight)."""
    return w.shape[1] < 2**15 and bool(np.all(w == w[:, :1])) and _sums_are_exact(w)


def _vote_counts(idx: np.ndarray, table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per target, how many neighbours can vote each label (cmax) and must vote it (cmin).

    One gather of small uint8 rows per neighbour position: the cheapest pass over the data.
    """
    n_labels = table.shape[1] // 2
    dtype = np.uint8 if idx.shape[1] < 256 else np.uint16
    counts = table[idx[:, 0]].astype(dtype)
    for j in range(1, idx.shape[1]):
        counts += table[idx[:, j]]
    return counts[:, n_labels:].astype(np.int16), counts[:, :n_labels].astype(np.int16)


def _bounds(idx: np.ndarray, w: np.ndarray, Y: np.ndarray | CandidateSets) -> tuple[np.ndarray, np.ndarray]:
    # Scatter-add with np.bincount: a precise neighbour adds its weight to one (target,
    # label) cell of Smin and Smax, a partial one to one cell of Smax per label of its set.
    # bincount sums each cell in input order, i.e. in neighbour order, so totals are
    # bit-identical to a left-to-right sum (adding 0.0 for non-members changes nothing).
    sets = Y if isinstance(Y, CandidateSets) else CandidateSets.from_dense(Y)
    sizes, set_labels, set_start = sets.sizes, sets.labels, sets.start
    n_targets, k = idx.shape
    n_labels = sets.dense.shape[1]
    smin = np.empty((n_targets, n_labels))
    smax = np.empty((n_targets, n_labels))
    if _counts_suffice(w):
        # Equal exact weights: count votes in uint8 and scale; same values, a third the time.
        for start in range(0, n_targets, CHUNK_TARGETS):
            rows = slice(start, start + CHUNK_TARGETS)
            cmin, cmax = _vote_counts(idx[rows], sets.members)
            np.multiply(cmin, w[rows, :1], out=smin[rows])
            np.multiply(cmax, w[rows, :1], out=smax[rows])
        return smin, smax
    for start in range(0, n_targets, CHUNK_TARGETS):
        rows = slice(start, start + CHUNK_TARGETS)
        items, weights = idx[rows].ravel(), w[rows].ravel()
        cell_base = np.repeat(np.arange(items.size // k) * n_labels, k)
        n_cells = (items.size // k) * n_labels

        precise = sizes[items] == 1
        first_label = set_labels[set_start[items]]
        cells = cell_base[precise] + first_label[precise]
        smin[rows] = np.bincount(cells, weights[precise], minlength=n_cells).reshape(-1, n_labels)

        counts = sizes[items]
        offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        labels = set_labels[np.repeat(set_start[items], counts) + offsets]
        cells = np.repeat(cell_base, counts) + labels
        smax[rows] = np.bincount(cells, np.repeat(weights, counts), minlength=n_cells).reshape(-1, n_labels)
    return smin, smax


def _necessary(smin: np.ndarray, smax: np.ndarray) -> np.ndarray:
    # λ ∈ NL ⟺ Smin(λ) ≥ max_{λ'≠λ} Smax(λ'). Since Smin ≤ Smax, that is: Smin(λ) reaches
    # the largest Smax (then λ ties for it), or λ is the unique arg-max of Smax and Smin(λ)
    # reaches the second largest Smax.
    rows = np.arange(smax.shape[0])
    arg = smax.argmax(axis=1)
    first = smax[rows, arg]
    masked = smax.copy()
    masked[rows, arg] = np.iinfo(smax.dtype).min if smax.dtype.kind == "i" else -np.inf
    second = masked.max(axis=1)
    necessary = smin >= first[:, None]
    unique = (second < first) & (smin[rows, arg] >= second)
    necessary[rows[unique], arg[unique]] = True
    return necessary


def _approx_possible(smin: np.ndarray, smax: np.ndarray) -> np.ndarray:
    # λ ∈ APL ⟺ Smax(λ) ≥ max_{λ'≠λ} Smin(λ'), which (as Smax ≥ Smin) equals
    # Smax(λ) ≥ max_λ' Smin(λ'): the label holding the largest Smin passes either way.
    return smax >= smin.max(axis=1, keepdims=True)


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
