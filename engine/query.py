"""Which partially labelled instance should an expert settle first.

Querying training instance ``x_n`` replaces its candidate set ``y_n`` by one of its labels.
For a target ``t`` the local score ``f_n(t)`` is 1 when some answer ``λ ∈ y_n`` would change
``NL_t`` or ``APL_t`` (criterion ``"apl"``) or ``NL_t`` or ``PL_t`` (criterion ``"pl"``);
the global score is ``f_n = Σ_t f_n(t)`` (Nguyen et al. 2016, eq. 4). Only targets that
have ``x_n`` among their neighbours can change, and a precise ``x_n`` scores 0.

Baselines a user compares against: ``"participation"`` (weighted number of target
neighbourhoods the item sits in), ``"most_partial"`` (candidate-set size) and ``"random"``.

How ``"apl"`` stays cheap
-------------------------
An answer ``λ`` at a neighbour of weight ``a`` whose set is ``S`` adds ``a`` to ``Smin(λ)``
and removes ``a`` from ``Smax(μ)`` for ``μ ∈ S \\ {λ}``; nothing else moves, so the new
bounds are an O(M) update of the target's bounds, never a recomputation. Two facts keep the
work small:

* answers only raise ``Smin`` and lower ``Smax``, so ``NL`` can only grow and ``APL`` only
  shrink: ``NL ⊆ NL' ⊆ APL' ⊆ APL``. Only *open* targets (``NL ≠ APL``) can change; the
  others are skipped (likewise only *ambiguous* ones, ``NL ≠ PL``, for ``"pl"``);
* ``APL = {μ : Smax(μ) ≥ max Smin}`` and ``NL`` is ``{μ : Smin(μ) ≥ max Smax}`` plus the
  unique arg-max of ``Smax`` when its ``Smin`` reaches the second largest ``Smax``; both are
  thresholds, tested for all (target, neighbour, answer) triples at once with numpy.

The per-(target, neighbour) flags are kept by :class:`IncrementalRanker`, so after an answer
only the targets whose neighbourhoods contain the answered item are recomputed.

The order in which items are asked is :func:`ranking_order` (deferred items last, then by
score, then by row), the one order every query list in winnow uses.

References
----------
V.-L. Nguyen, S. Destercke, M.-H. Masson. Possible and necessary labels in K-nn procedures
to query partially labelled data. DA2PL 2016.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Integral
from typing import Literal

import numpy as np

from engine import _kernels
from engine._kernels import CHUNK_TARGETS, CandidateSets
from engine._possible import possible_from_graph
from engine._validation import check_candidates, check_choice, check_neighbors, check_scalar
from engine.choices import AMBIGUITY_CRITERIA, CRITERIA
from engine.exceptions import InvalidInput
from engine.neighbors import ReverseIndex

__all__ = [
    "CRITERIA",
    "AMBIGUITY_CRITERIA",
    "query_scores",
    "changed_pairs",
    "open_neighbourhoods",
    "ranking_order",
    "IncrementalRanker",
]

Criterion = Literal["apl", "pl", "participation", "most_partial", "random", "decision_change"]


def query_scores(
    idx: np.ndarray,
    w: np.ndarray,
    Y: np.ndarray,
    *,
    criterion: Criterion = "apl",
    random_state: int | np.random.Generator | None = None,
    time_limit: float = 10.0,
) -> np.ndarray:
    """Score every training instance by how much settling it could change the targets.

    Parameters
    ----------
    idx : int array of shape (n_targets, k)
        Neighbours (training rows) of each target. By default the targets are the training
        instances themselves, each left out of its own neighbourhood (see ``knn_graph``).
    w : float array of shape (n_targets, k)
        Vote weights.
    Y : bool array of shape (n_instances, n_labels)
        Candidate sets.
    criterion : {"apl", "pl", "participation", "most_partial", "random", "decision_change"}
        ``"apl"``/``"pl"``: number of targets whose NL or APL/PL some answer changes.
        ``"decision_change"``: :func:`engine.decision_change.decision_change_scores` (then
        row ``i`` of ``idx`` must be the neighbourhood of instance ``i``).
    random_state : int or Generator, optional
        Seed of the ``"random"`` baseline.
    time_limit : float
        Seconds per exact-solver call for ``"pl"``.

    Returns
    -------
    scores : float array of shape (n_instances,)
        Higher is more useful to query; precise instances score 0.

    Examples
    --------
    The target sees ``{a}``, ``{b}`` and ``{a, b}``: answering the third neighbour with
    ``a`` makes ``a`` necessary, so it scores 1; precise items score 0.

    >>> import numpy as np
    >>> Y = np.array([[1, 0], [0, 1], [1, 1]], dtype=bool)
    >>> query_scores(np.array([[0, 1, 2]]), np.ones((1, 3)), Y).tolist()
    [0.0, 0.0, 1.0]
    """
    Y = check_candidates(Y)
    idx, w = check_neighbors(idx, w, Y)
    check_choice(criterion, "criterion", CRITERIA)
    partial = Y.sum(axis=1) >= 2
    n = Y.shape[0]
    if criterion == "most_partial":
        return np.where(partial, Y.sum(axis=1), 0).astype(np.float64)
    if criterion == "random":
        rng = np.random.default_rng(random_state)
        return np.where(partial, rng.random(n), 0.0)
    if criterion == "participation":
        scores = np.bincount(idx.ravel(), weights=w.ravel(), minlength=n)
        return np.where(partial, scores, 0.0)
    if criterion == "decision_change":
        # Imported here: engine.decision_change imports ranking_order from this module.
        from engine.decision_change import decision_change_scores

        return decision_change_scores(idx, w, Y)
    flags = changed_pairs(idx, w, Y, criterion=criterion, time_limit=time_limit, validate=False)
    return np.bincount(idx[flags], minlength=n).astype(np.float64)


def open_neighbourhoods(idx: np.ndarray, open_targets: np.ndarray, n_instances: int) -> np.ndarray:
    """For every training instance, in how many open targets' neighbourhoods it sits.

    Parameters
    ----------
    idx : int array of shape (n_targets, k)
        The neighbour graph.
    open_targets : bool array of shape (n_targets,)
        The open targets, ``NL ≠ APL`` (:func:`engine.winners.open_targets`).
    n_instances : int
        Number of training rows.

    Returns
    -------
    touched : int array of shape (n_instances,)
        The ranked list's ``open_targets_touched`` column; a target that holds an instance
        twice counts twice.
    """
    return np.bincount(np.asarray(idx)[np.asarray(open_targets, dtype=bool)].ravel(), minlength=n_instances)


def ranking_order(
    scores: np.ndarray,
    askable: np.ndarray,
    *,
    deferred: np.ndarray | None = None,
    tiebreak: np.ndarray | None = None,
    top: int | None = None,
) -> np.ndarray:
    """The one order of the query list: which rows to ask about, best first.

    Rows where ``askable`` is True, sorted by

    1. deferred rows last (e.g. skipped items),
    2. score, highest first,
    3. ``tiebreak`` key, lowest first (when given),
    4. row index, lowest first.

    Every list of items to ask (the incremental ranker, the simulated campaigns, the
    annotation queue, the ranked export) is ordered by this function, so they agree.

    Parameters
    ----------
    scores : float array of shape (n,)
        Usefulness of asking each row; NaN is refused.
    askable : bool array of shape (n,)
        Rows that may be asked (e.g. still partially labelled).
    deferred : bool array of shape (n,), optional
        Rows to put after every non-deferred row.
    tiebreak : float array of shape (n,), optional
        Keys that order rows of equal score (e.g. seeded random draws).
    top : int, optional
        Keep the first ``top`` rows only. Selects them in ``O(n)`` (a partition) before
        sorting the few that can be among them; the result equals the full order's prefix.

    Returns
    -------
    order : int array of shape (min(top, n_askable),)
        Row indices, best first.

    Examples
    --------
    >>> import numpy as np
    >>> scores = np.array([3.0, 5.0, 5.0, 1.0, 9.0])
    >>> askable = np.array([True, True, True, True, False])
    >>> ranking_order(scores, askable).tolist()
    [1, 2, 0, 3]
    >>> ranking_order(scores, askable, deferred=np.array([False, True, False, False, False])).tolist()
    [2, 0, 3, 1]
    >>> ranking_order(scores, askable, tiebreak=np.array([0.0, 0.7, 0.2, 0.0, 0.0]), top=2).tolist()
    [2, 1]
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 1:
        raise InvalidInput(f"scores must be 1-D (n,), got shape {scores.shape}")
    n = scores.shape[0]
    askable = _row_flags(askable, "askable", n)
    deferred = np.zeros(n, dtype=bool) if deferred is None else _row_flags(deferred, "deferred", n)
    if tiebreak is not None:
        tiebreak = np.asarray(tiebreak, dtype=np.float64)
        if tiebreak.shape != (n,):
            raise InvalidInput(f"tiebreak must have shape ({n},) like scores, got {tiebreak.shape}")
    nan = np.isnan(scores) & askable
    if nan.any():
        raise InvalidInput(f"scores row {int(np.flatnonzero(nan)[0])} is NaN; every askable row needs a score")
    if top is not None:
        check_scalar(top, "top", kind=Integral, min_value=0)
    rows = np.flatnonzero(askable)
    first, later = rows[~deferred[rows]], rows[deferred[rows]]
    if top is None:
        return np.concatenate([_sorted_rows(first, scores, tiebreak), _sorted_rows(later, scores, tiebreak)])
    best = _best_rows(first, scores, tiebreak, top)
    if best.size < top:
        best = np.concatenate([best, _best_rows(later, scores, tiebreak, top - best.size)])
    return best


def _row_flags(flags: np.ndarray, name: str, n: int) -> np.ndarray:
    arr = np.asarray(flags)
    if arr.shape != (n,) or arr.dtype != bool:
        raise InvalidInput(f"{name} must be a bool array of shape ({n},) like scores, got {arr.dtype} {arr.shape}")
    return arr


def _sorted_rows(rows: np.ndarray, scores: np.ndarray, tiebreak: np.ndarray | None) -> np.ndarray:
    # np.lexsort: last key first; rows are ascending, and lexsort is stable, so the row
    # index breaks the remaining ties.
    keys = (-scores[rows],) if tiebreak is None else (tiebreak[rows], -scores[rows])
    return rows[np.lexsort(keys)]


def _best_rows(rows: np.ndarray, scores: np.ndarray, tiebreak: np.ndarray | None, top: int) -> np.ndarray:
    """The first ``top`` of ``_sorted_rows(rows, ...)`` without sorting all of them."""
    if top == 0:
        return rows[:0]
    if top < rows.size:
        # Every row scoring at least the top-th best can be among the first ``top`` (ties
        # with the cut-off are decided by the sort below); the rest cannot.
        values = scores[rows]
        cutoff = np.partition(values, rows.size - top)[rows.size - top]
        rows = rows[values >= cutoff]
    return _sorted_rows(rows, scores, tiebreak)[:top]


def changed_pairs(
    idx: np.ndarray,
    w: np.ndarray,
    Y: np.ndarray | CandidateSets,
    *,
    criterion: Literal["apl", "pl"] = "apl",
    targets: np.ndarray | None = None,
    time_limit: float = 10.0,
    validate: bool = True,
) -> np.ndarray:
    """``flags[t, j]``: some answer for neighbour ``j`` of target ``t`` changes its decision.

    Returns a bool array of shape (len(targets), k); ``query_scores`` is its sum per
    training row. ``targets`` restricts the work to some rows of ``idx`` (all by default).
    With ``validate=False`` the inputs are trusted, and ``Y`` may also be the engine's
    internal encoding of the candidate sets (built once and shared by chunked callers).
    """
    if validate:
        Y = check_candidates(Y)
        idx, w = check_neighbors(idx, w, Y)
        check_choice(criterion, "criterion", AMBIGUITY_CRITERIA)
    if targets is None:
        targets = np.arange(idx.shape[0])
    kernel = _apl_changed if criterion == "apl" else _pl_changed
    sets = _kernels.encode(Y)
    out = np.zeros((len(targets), idx.shape[1]), dtype=bool)
    for start in range(0, len(targets), CHUNK_TARGETS):
        chunk = targets[start : start + CHUNK_TARGETS]
        out[start : start + len(chunk)] = kernel(idx[chunk], w[chunk], sets, time_limit=time_limit)
    return out


# --------------------------------------------------------------------------- kernels


def _answer_triples(idx: np.ndarray, w: np.ndarray, sets: CandidateSets, rows: np.ndarray):
    """Every (target row, neighbour position, answer label) that could move a decision.

    Only partial neighbours of positive weight, in the given target rows.
    Returns (row, position, label) int arrays of equal length.
    """
    sub_idx = idx[rows]
    movable = (sets.sizes[sub_idx] >= 2) & (w[rows] > 0)
    pair_row, pair_pos = np.nonzero(movable)
    pair_item = sub_idx[pair_row, pair_pos]
    pair_id, label = np.nonzero(sets.dense[pair_item])
    return rows[pair_row[pair_id]], pair_pos[pair_id], label


def _apl_changed(idx: np.ndarray, w: np.ndarray, sets: CandidateSets, *, time_limit: float) -> np.ndarray:
    smin, smax, nl, apl, open_rows = _kernels.label_sets_and_open_bounds(idx, w, sets)
    flags = np.zeros(idx.shape, dtype=bool)
    if open_rows.size == 0:
        return flags
    t, j, lam = _answer_triples(idx, w, sets, open_rows)
    if t.size == 0:
        return flags
    a = w[t, j]
    tri = np.arange(t.size)
    moved = sets.dense[idx[t, j]]  # candidate rows of the answered neighbours

    answer = np.zeros_like(moved)
    answer[tri, lam] = True
    dropped = moved & ~answer
    # Smax' = Smax − a·[μ ∈ S \ {λ}],  Smin' = Smin + a·[μ = λ]
    smax_new = smax[t] - a[:, None] * dropped
    smin_new = smin[t]
    smin_new[tri, lam] += a
    changed = _apl_decisions_moved(smin_new, smax_new, nl[t], apl[t])

    if not _kernels.sums_are_exact(w):
        # Subtracting a weight from a float total can differ in the last bit from summing the
        # remaining weights afresh; decisions are defined on fresh neighbour-order sums, so
        # triples whose comparisons are that close are recomputed exactly.
        near = np.flatnonzero(_near_tie(smin_new, smax_new, scale=w[t].sum(axis=1)))
        if near.size:
            smin_exact, smax_exact = _answered_bounds(idx, w, sets, t[near], j[near], lam[near])
            changed[near] = _apl_decisions_moved(smin_exact, smax_exact, nl[t[near]], apl[t[near]])

    flags[t[changed], j[changed]] = True
    return flags


def _apl_decisions_moved(smin: np.ndarray, smax: np.ndarray, nl_old: np.ndarray, apl_old: np.ndarray) -> np.ndarray:
    """Whether NL or APL differ from ``nl_old`` / ``apl_old`` under the bounds (smin, smax)."""
    rows = np.arange(smin.shape[0])
    # APL' = {μ : Smax'(μ) ≥ max Smin'}; an answer can only remove labels from it.
    apl_lost = (apl_old & (smax < smin.max(axis=1)[:, None])).any(axis=1)
    # NL' = {μ : Smin'(μ) ≥ max Smax'} ∪ {unique arg-max μ* if Smin'(μ*) ≥ 2nd max Smax'};
    # an answer can only add labels to it.
    arg, first, second = _kernels.top_two(smax)
    gained_tie = ((smin >= first[:, None]) & ~nl_old).any(axis=1)
    gained_unique = (second < first) & (smin[rows, arg] >= second) & ~nl_old[rows, arg]
    return apl_lost | gained_tie | gained_unique


def _near_tie(smin: np.ndarray, smax: np.ndarray, *, scale: np.ndarray) -> np.ndarray:
    """Rows where one of the comparisons NL and APL make is within rounding distance.

    Those comparisons are: every Smax' against max Smin' (APL), every Smin' against the
    largest Smax', the largest against the second largest Smax', and the arg-max's Smin'
    against the second largest (NL). When each is farther apart than the tolerance, last-bit
    differences between updated and fresh sums cannot flip a decision.
    """
    tol = 1e-9 * np.maximum(scale, np.finfo(float).tiny)
    rows = np.arange(smin.shape[0])
    top_min = smin.max(axis=1)
    arg, first, second = _kernels.top_two(smax)
    return (
        (np.abs(smax - top_min[:, None]) <= tol[:, None]).any(axis=1)
        | (np.abs(smin - first[:, None]) <= tol[:, None]).any(axis=1)
        | (first - second <= tol)
        | (np.abs(smin[rows, arg] - second) <= tol)
    )


def _answered_bounds(idx, w, sets: CandidateSets, t: np.ndarray, j: np.ndarray, lam: np.ndarray):
    """Fresh neighbour-order bounds of targets ``t`` with neighbour ``j`` answered ``λ``."""
    n_labels = sets.dense.shape[1]
    rows = np.arange(t.size)
    smin = np.zeros((t.size, n_labels))
    smax = np.zeros((t.size, n_labels))
    for position in range(idx.shape[1]):
        members = sets.dense[idx[t, position]].copy()
        answered = j == position
        members[answered] = False
        members[rows[answered], lam[answered]] = True
        weight = w[t, position][:, None]
        precise = members.sum(axis=1, keepdims=True) == 1
        smax += np.where(members, weight, 0.0)
        smin += np.where(members & precise, weight, 0.0)
    return smin, smax


def _pl_changed(idx: np.ndarray, w: np.ndarray, sets: CandidateSets, *, time_limit: float) -> np.ndarray:
    Y = sets.dense
    _, _, nl, apl, open_rows = _kernels.label_sets_and_open_bounds(idx, w, sets)
    flags = np.zeros(idx.shape, dtype=bool)
    if open_rows.size == 0:
        return flags
    pl_open, _ = possible_from_graph(idx[open_rows], w[open_rows], Y, method="auto", time_limit=time_limit)
    pl = apl.copy()
    pl[open_rows] = pl_open
    # NL ⊆ NL' ⊆ PL' ⊆ PL: targets with NL = PL cannot change.
    open_rows = open_rows[(nl[open_rows] != pl_open).any(axis=1)]
    if open_rows.size == 0:
        return flags
    t, j, lam = _answer_triples(idx, w, sets, open_rows)
    if t.size == 0:
        return flags
    # Each hypothetical answer becomes its own neighbourhood in which neighbour j points at
    # an extra precise row {λ}: one batched exact-PL call decides them all.
    n, n_labels = Y.shape
    Y_ext = np.vstack([Y, np.eye(n_labels, dtype=bool)])
    idx_ext = idx[t].copy()
    idx_ext[np.arange(t.size), j] = n + lam
    w_ext = w[t]
    smin_new, smax_new = _kernels.bounds(idx_ext, w_ext, Y_ext)
    nl_new = _kernels.necessary(smin_new, smax_new)
    pl_new, _ = possible_from_graph(idx_ext, w_ext, Y_ext, method="auto", time_limit=time_limit)
    changed = (nl_new != nl[t]).any(axis=1) | (pl_new != pl[t]).any(axis=1)
    flags[t[changed], j[changed]] = True
    return flags


@dataclass
class IncrementalRanker:
    """Query scores kept up to date as candidate sets are settled one by one.

    After instance ``n`` changes, only the targets that have ``n`` among their neighbours can
    change; their per-neighbour flags are recomputed and the scores patched, so an answer
    costs O(affected targets · K · M) instead of a full recomputation.

    Parameters
    ----------
    idx, w : arrays of shape (n_targets, k)
        The neighbour graph (fixed for the session).
    Y : bool array of shape (n_instances, n_labels)
        Candidate sets at the start; copied, then owned by the ranker.
    criterion : {"apl", "pl"}
    time_limit : float
        Seconds per exact-solver call (``"pl"``).

    Attributes
    ----------
    flags : bool array of shape (n_targets, k)
        :func:`changed_pairs` of the current sets.
    scores : float array of shape (n_instances,)
        :func:`query_scores` of the current sets.
    necessary, approx_possible : bool arrays of shape (n_targets, n_labels)
        ``NL`` and ``APL`` of the current sets.
    reverse : engine.neighbors.ReverseIndex
        The targets holding each training row.
    """

    idx: np.ndarray
    w: np.ndarray
    Y: np.ndarray
    criterion: Literal["apl", "pl"] = "apl"
    time_limit: float = 10.0
    flags: np.ndarray = field(init=False, repr=False)
    scores: np.ndarray = field(init=False, repr=False)
    necessary: np.ndarray = field(init=False, repr=False)
    approx_possible: np.ndarray = field(init=False, repr=False)
    reverse: ReverseIndex = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.Y = check_candidates(self.Y).copy()
        self.idx, self.w = check_neighbors(self.idx, self.w, self.Y)
        check_choice(self.criterion, "criterion", AMBIGUITY_CRITERIA)
        n = self.Y.shape[0]
        self.reverse = ReverseIndex(self.idx, n)
        self.flags = changed_pairs(self.idx, self.w, self.Y, criterion=self.criterion, time_limit=self.time_limit, validate=False)
        self.scores = np.bincount(self.idx[self.flags], minlength=n).astype(np.float64)
        self.necessary, self.approx_possible = _kernels.label_sets(self.idx, self.w, self.Y)

    def targets_of(self, instance: int) -> np.ndarray:
        """Target rows whose neighbourhood contains training row ``instance``."""
        return self.reverse.rows_holding(instance)

    def update(self, instance: int, candidates: np.ndarray) -> np.ndarray:
        """Set the candidate row of ``instance`` and patch the scores; returns the affected targets."""
        row = np.asarray(candidates, dtype=bool)
        if row.shape != (self.Y.shape[1],) or not row.any():
            raise InvalidInput(f"candidates for instance {instance} must be a non-empty bool row of length {self.Y.shape[1]}")
        self.Y[instance] = row
        affected = self.targets_of(instance)
        if affected.size == 0:
            return affected
        # Work on the affected targets' neighbours only, renumbered 0..m-1, so an answer
        # costs O(affected · K · M) whatever the size of the dataset.
        local_idx, sets = _kernels.local_graph(self.idx[affected], self.Y)
        local_w = self.w[affected]
        kernel = _apl_changed if self.criterion == "apl" else _pl_changed
        new = kernel(local_idx, local_w, sets, time_limit=self.time_limit)
        old = self.flags[affected]
        np.subtract.at(self.scores, self.idx[affected][old], 1.0)
        np.add.at(self.scores, self.idx[affected][new], 1.0)
        self.flags[affected] = new
        self.necessary[affected], self.approx_possible[affected] = _kernels.label_sets(local_idx, local_w, sets)
        return affected

    def ranking(self, exclude: np.ndarray | None = None, top: int | None = None) -> np.ndarray:
        """Partially labelled instances, best query first (ties: lower row first).

        The order of :func:`ranking_order`; ``exclude`` lists rows to leave out, ``top``
        keeps only the first ``top`` (an O(n) selection instead of a full sort).
        """
        askable = self.Y.sum(axis=1) >= 2
        if exclude is not None and len(exclude):
            askable &= ~np.isin(np.arange(askable.size), exclude)
        return ranking_order(self.scores, askable, top=top)

    @property
    def n_open(self) -> int:
        """Open targets: ``NL ≠ APL`` (the cheap superset of the ambiguous ones)."""
        return int(_kernels.open_rows(self.necessary, self.approx_possible).sum())
