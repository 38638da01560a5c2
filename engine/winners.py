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
and always ``NL ⊆ PL ⊆ APL``. A target is *ambiguous* when ``NL ≠ PL``
(:func:`ambiguous_targets`) and *open* when ``NL ≠ APL`` (:func:`open_targets`, the cheap
superset). Bounds, NL and APL cost ``O(T·K·M)`` and are vectorised over
all targets, processed in chunks of targets so memory stays linear in the data.
Exact ``PL`` is a max-flow problem for equal weights and NP-hard for unequal weights
(a bin-packing feasibility, solved with OR-Tools CP-SAT); see :func:`possible_labels`.

The kernels behind these functions live in :mod:`engine._kernels`: vote totals are summed in
neighbour order (bit-identical wherever they are compared) and float weights compared
exactly, ties counting as wins.

References
----------
V.-L. Nguyen, S. Destercke, M.-H. Masson. Possible and necessary labels in K-nn procedures
to query partially labelled data. DA2PL 2016.
"""

from __future__ import annotations

from numbers import Integral
from typing import Literal, overload

import numpy as np

from engine import _kernels
from engine._kernels import CHUNK_TARGETS
from engine._possible import exact_pair, possible_from_graph, witness_for_row
from engine._validation import check_candidates, check_neighbors, check_scalar
from engine.choices import PL_METHODS
from engine.exceptions import InvalidInput

__all__ = [
    "CHUNK_TARGETS",
    "PL_METHODS",
    "vote_bounds",
    "necessary_labels",
    "approx_possible_labels",
    "label_sets",
    "possible_labels",
    "witness",
    "open_targets",
    "ambiguous_targets",
    "possible_by_cpsat_alone",
]


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

    Examples
    --------
    One target whose neighbours hold ``{a}``, ``{b}`` and ``{a, b}``:

    >>> import numpy as np
    >>> Y = np.array([[1, 0], [0, 1], [1, 1]], dtype=bool)
    >>> smin, smax = vote_bounds(np.array([[0, 1, 2]]), np.ones((1, 3)), Y)
    >>> smin.tolist(), smax.tolist()
    ([[1.0, 1.0]], [[2.0, 2.0]])
    """
    Y = check_candidates(Y)
    idx, w = check_neighbors(idx, w, Y)
    return _kernels.bounds(idx, w, Y)


def necessary_labels(idx: np.ndarray, w: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Labels that win (ties included) under every completion: bool array (n_targets, n_labels).

    Parameters
    ----------
    idx, w, Y
        As in :func:`vote_bounds`.

    Returns
    -------
    necessary : bool array of shape (n_targets, n_labels)

    Examples
    --------
    Neighbours ``{a}``, ``{a}``, ``{a, b}``: ``a`` wins whatever the third one votes; with
    ``{a}``, ``{b}``, ``{a, b}`` the third neighbour decides, so nothing is necessary.

    >>> import numpy as np
    >>> Y = np.array([[1, 0], [1, 0], [0, 1], [1, 1]], dtype=bool)
    >>> necessary_labels(np.array([[0, 1, 3], [0, 2, 3]]), np.ones((2, 3)), Y).tolist()
    [[True, False], [False, False]]
    """
    nl, _ = label_sets(idx, w, Y)
    return nl


def approx_possible_labels(idx: np.ndarray, w: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """The cheap superset ``APL ⊇ PL``: bool array of shape (n_targets, n_labels).

    ``λ ∈ APL ⟺ Smax(λ) ≥ max_{λ'≠λ} Smin(λ')``; ``idx``, ``w``, ``Y`` as in
    :func:`vote_bounds`.
    """
    _, apl = label_sets(idx, w, Y)
    return apl


def label_sets(idx: np.ndarray, w: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Necessary and approximately possible labels of every target, from one bounds pass.

    Equal to ``(necessary_labels(idx, w, Y), approx_possible_labels(idx, w, Y))`` at the
    cost of one of them. When the targets use fewer training rows than ``Y`` has (one
    target, or the targets an answer touches), only those rows are encoded, so the cost is
    ``O(T·K·M)`` plus one validation pass over ``Y``.

    Parameters
    ----------
    idx, w, Y
        The neighbour graph and the candidate sets, as in :func:`vote_bounds`.

    Returns
    -------
    necessary, approx_possible : bool arrays of shape (n_targets, n_labels)
        ``NL`` and ``APL``; ``NL ⊆ APL`` row by row.

    See Also
    --------
    open_targets : the targets where the two differ.

    Examples
    --------
    The target sees ``{a}``, ``{b}`` and ``{a, b}``: neither label is necessary, both are
    possible.

    >>> import numpy as np
    >>> Y = np.array([[1, 0], [0, 1], [1, 1]], dtype=bool)
    >>> nl, apl = label_sets(np.array([[0, 1, 2]]), np.ones((1, 3)), Y)
    >>> nl.tolist(), apl.tolist()
    ([[False, False]], [[True, True]])
    >>> open_targets(nl, apl).tolist()
    [True]
    """
    Y = check_candidates(Y)
    idx, w = check_neighbors(idx, w, Y)
    if idx.size < Y.shape[0]:
        local_idx, sets = _kernels.local_graph(idx, Y)
        return _kernels.label_sets(local_idx, w, sets)
    return _kernels.label_sets(idx, w, Y)


def _check_label_set_pair(
    first: np.ndarray, second: np.ndarray, names: tuple[str, str]
) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(first, dtype=bool), np.asarray(second, dtype=bool)
    if a.ndim != 2 or a.shape != b.shape:
        raise InvalidInput(
            f"{names[0]} and {names[1]} must be bool arrays of the same shape (n_targets, n_labels); "
            f"got shapes {a.shape} and {b.shape}"
        )
    return a, b


def open_targets(necessary: np.ndarray, approx_possible: np.ndarray) -> np.ndarray:
    """Targets an answer could still move by the cheap test ``NL ≠ APL``: bool (n_targets,).

    An *open* target is a superset of an *ambiguous* one (``NL ≠ PL``, see
    :func:`ambiguous_targets`), since ``NL ⊆ PL ⊆ APL``; it is what the ``"apl"`` criterion
    works with.

    Parameters
    ----------
    necessary, approx_possible : bool arrays of shape (n_targets, n_labels)
        As returned by :func:`label_sets`.

    Returns
    -------
    open : bool array of shape (n_targets,)
    """
    nl, apl = _check_label_set_pair(necessary, approx_possible, ("necessary", "approx_possible"))
    return _kernels.open_rows(nl, apl)


def ambiguous_targets(necessary: np.ndarray, possible: np.ndarray) -> np.ndarray:
    """Targets whose decision the candidate sets leave undecided (``NL ≠ PL``): bool (n_targets,).

    Parameters
    ----------
    necessary, possible : bool arrays of shape (n_targets, n_labels)
        ``NL`` (:func:`necessary_labels`) and exact ``PL`` (:func:`possible_labels`).

    Returns
    -------
    ambiguous : bool array of shape (n_targets,)
    """
    nl, pl = _check_label_set_pair(necessary, possible, ("necessary", "possible"))
    return _kernels.open_rows(nl, pl)


@overload
def possible_labels(
    idx: np.ndarray,
    w: np.ndarray,
    Y: np.ndarray,
    *,
    method: Literal["auto", "flow", "cpsat"] = ...,
    time_limit: float = ...,
    return_stats: Literal[False] = ...,
) -> np.ndarray: ...


@overload
def possible_labels(
    idx: np.ndarray,
    w: np.ndarray,
    Y: np.ndarray,
    *,
    method: Literal["auto", "flow", "cpsat"] = ...,
    time_limit: float = ...,
    return_stats: Literal[True],
) -> tuple[np.ndarray, dict[str, float]]: ...


def possible_labels(
    idx: np.ndarray,
    w: np.ndarray,
    Y: np.ndarray,
    *,
    method: Literal["auto", "flow", "cpsat"] = "auto",
    time_limit: float = 10.0,
    return_stats: bool = False,
) -> np.ndarray | tuple[np.ndarray, dict[str, float]]:
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
    Y = check_candidates(Y)
    idx_2d, w_2d = check_neighbors(np.atleast_2d(idx_row), np.atleast_2d(w_row), Y)
    if idx_2d.shape[0] != 1:
        raise InvalidInput(f"witness explains one target: idx_row must be 1-D, got shape {np.shape(idx_row)}")
    check_scalar(label, "label", kind=Integral, min_value=0, max_value=Y.shape[1] - 1)
    return witness_for_row(idx_2d[0], w_2d[0], Y, int(label), time_limit=time_limit)


def possible_by_cpsat_alone(
    idx_row: np.ndarray, w_row: np.ndarray, Y: np.ndarray, label: int, *, time_limit: float = 10.0
) -> bool:
    """Whether ``label`` is possible for one target, decided by CP-SAT with no shortcut.

    The baseline :func:`possible_labels` is measured against (``benchmarks/bench_exact_pl.py``):
    no bounds, no greedy witness and no reduction of the neighbours, one CP-SAT model per call.
    """
    Y = check_candidates(Y)
    idx_2d, w_2d = check_neighbors(np.atleast_2d(idx_row), np.atleast_2d(w_row), Y)
    if idx_2d.shape[0] != 1:
        raise InvalidInput(
            f"possible_by_cpsat_alone decides one target: idx_row must be 1-D, got shape {np.shape(idx_row)}"
        )
    check_scalar(label, "label", kind=Integral, min_value=0, max_value=Y.shape[1] - 1)
    holders = Y[idx_2d[0], int(label)]
    smax = float(np.sum(w_2d[0] * holders))
    found, _ = exact_pair(idx_2d[0], w_2d[0], Y, int(label), smax, "cpsat", time_limit, target=0, reduce=False)
    return found is not None
