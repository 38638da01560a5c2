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

The order in which items are asked is :func:`engine.ranking.ranking_order` (deferred items
last, then by score, then by row), the one order every query list in winnow uses; it is
re-exported here. :class:`IncrementalRanker` keeps the :class:`engine.ranking.Ranker`
contract, as do the decision-change ranker and the baselines' :class:`engine.ranking.StaticRanker`.

References
----------
V.-L. Nguyen, S. Destercke, M.-H. Masson. Possible and necessary labels in K-nn procedures
to query partially labelled data. DA2PL 2016.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine import _kernels
from engine._kernels import CHUNK_TARGETS, CandidateSets
from engine._possible import possible_from_graph
from engine._validation import check_candidates, check_choice, check_neighbors
from engine.choices import AMBIGUITY_CRITERIA, CRITERIA, AmbiguityCriterion, Criterion
from engine.decision_change import decision_change_scores
from engine.neighbors import ReverseIndex
from engine.ranking import baseline_scores, check_state, check_update, ranking_order

__all__ = [
    "CRITERIA",
    "AMBIGUITY_CRITERIA",
    "query_scores",
    "changed_pairs",
    "open_neighbourhoods",
    "ranking_order",
    "IncrementalRanker",
]


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
    n = Y.shape[0]
    if criterion == "decision_change":
        return decision_change_scores(idx, w, Y)
    if criterion not in AMBIGUITY_CRITERIA:
        return baseline_scores(idx, w, Y, criterion, np.random.default_rng(random_state))
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


def changed_pairs(
    idx: np.ndarray,
    w: np.ndarray,
    Y: np.ndarray | CandidateSets,
    *,
    criterion: AmbiguityCriterion = "apl",
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


def _answer_triples(
    idx: np.ndarray, w: np.ndarray, sets: CandidateSets, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
    moved: np.ndarray = apl_lost | gained_tie | gained_unique
    return moved


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
    near: np.ndarray = (
        (np.abs(smax - top_min[:, None]) <= tol[:, None]).any(axis=1)
        | (np.abs(smin - first[:, None]) <= tol[:, None]).any(axis=1)
        | (first - second <= tol)
        | (np.abs(smin[rows, arg] - second) <= tol)
    )
    return near


def _answered_bounds(
    idx: np.ndarray, w: np.ndarray, sets: CandidateSets, t: np.ndarray, j: np.ndarray, lam: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
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
    costs O(affected targets · K · M) instead of a full recomputation. Keeps the
    :class:`engine.ranking.Ranker` contract.

    Parameters
    ----------
    idx, w : arrays of shape (n_targets, k)
        The neighbour graph (fixed for the session).
    Y : bool array of shape (n_instances, n_labels)
        Candidate sets at the start; copied, then owned by the ranker.
    criterion : {"apl", "pl"}
    time_limit : float
        Seconds per exact-solver call (``"pl"``).
    random_state : int, Generator or None
        Seeds the tie-breaking keys of :meth:`ranking` and :meth:`select`; ``None`` (the
        default) breaks ties by row.

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
    criterion: AmbiguityCriterion = "apl"
    time_limit: float = 10.0
    random_state: int | np.random.Generator | None = field(default=None, repr=False)
    flags: np.ndarray = field(init=False, repr=False)
    scores: np.ndarray = field(init=False, repr=False)
    necessary: np.ndarray = field(init=False, repr=False)
    approx_possible: np.ndarray = field(init=False, repr=False)
    reverse: ReverseIndex = field(init=False, repr=False)
    _keys: np.ndarray | None = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        self.Y = check_candidates(self.Y).copy()
        self.idx, self.w = check_neighbors(self.idx, self.w, self.Y)
        check_choice(self.criterion, "criterion", AMBIGUITY_CRITERIA)
        n = int(self.Y.shape[0])
        self.reverse = ReverseIndex(self.idx, n)
        self.flags = changed_pairs(
            self.idx, self.w, self.Y, criterion=self.criterion, time_limit=self.time_limit, validate=False
        )
        self.scores = np.bincount(self.idx[self.flags], minlength=n).astype(np.float64)
        self.necessary, self.approx_possible = _kernels.label_sets(self.idx, self.w, self.Y)
        if self.random_state is not None:
            self._keys = np.random.default_rng(self.random_state).random(n)

    def state_arrays(self) -> dict[str, np.ndarray]:
        """The sets, flags, scores, ``NL`` and ``APL``, by name (what :meth:`from_state` takes back)."""
        return {
            "Y": self.Y,
            "flags": self.flags,
            "scores": self.scores,
            "necessary": self.necessary,
            "approx_possible": self.approx_possible,
        }

    @classmethod
    def from_state(
        cls,
        idx: np.ndarray,
        w: np.ndarray,
        state: dict[str, np.ndarray],
        *,
        criterion: AmbiguityCriterion = "apl",
        time_limit: float = 10.0,
        random_state: int | np.random.Generator | None = None,
    ) -> IncrementalRanker:
        """The ranker whose :meth:`state_arrays` were ``state``, on the same graph and
        parameters: no scoring pass. The arrays are checked for shape and kind."""
        Y = check_candidates(state.get("Y"))
        idx, w = check_neighbors(idx, w, Y)
        check_choice(criterion, "criterion", AMBIGUITY_CRITERIA)
        (n, n_labels), (n_targets, k) = Y.shape, idx.shape
        arrays = check_state(
            state,
            {
                "flags": ((n_targets, k), "b"),
                "scores": ((n,), "f"),
                "necessary": ((n_targets, n_labels), "b"),
                "approx_possible": ((n_targets, n_labels), "b"),
            },
        )
        ranker = cls.__new__(cls)
        ranker.idx, ranker.w, ranker.Y = idx, w, np.require(Y, requirements=["C", "W"])
        ranker.criterion, ranker.time_limit, ranker.random_state = criterion, time_limit, random_state
        ranker.reverse = ReverseIndex(idx, n)
        ranker.flags, ranker.scores = arrays["flags"], arrays["scores"]
        ranker.necessary, ranker.approx_possible = arrays["necessary"], arrays["approx_possible"]
        ranker._keys = None if random_state is None else np.random.default_rng(random_state).random(int(n))
        return ranker

    def targets_of(self, items: Any) -> np.ndarray:
        """Target rows whose neighbourhood holds one of ``items`` (sorted, distinct)."""
        return self.reverse.rows_holding_any(np.atleast_1d(np.asarray(items, dtype=np.intp)))

    def update(self, items: Any, candidates: Any) -> np.ndarray:
        """Set the candidate rows of ``items`` and patch the scores; returns the re-scored items.

        ``items`` is one row (with one candidate row) or several (with one row each).
        """
        rows, sets = check_update(items, candidates, *self.Y.shape)
        self.Y[rows] = sets
        affected = self.targets_of(rows)
        if affected.size == 0:
            return affected
        # Work on the affected targets' neighbours only, renumbered 0..m-1, so an answer
        # costs O(affected · K · M) whatever the size of the dataset.
        local_idx, local_sets = _kernels.local_graph(self.idx[affected], self.Y)
        local_w = self.w[affected]
        kernel = _apl_changed if self.criterion == "apl" else _pl_changed
        new = kernel(local_idx, local_w, local_sets, time_limit=self.time_limit)
        old = self.flags[affected]
        np.subtract.at(self.scores, self.idx[affected][old], 1.0)
        np.add.at(self.scores, self.idx[affected][new], 1.0)
        self.flags[affected] = new
        self.necessary[affected], self.approx_possible[affected] = _kernels.label_sets(local_idx, local_w, local_sets)
        return np.unique(self.idx[affected])

    def moved_targets(self, item: int) -> np.ndarray:
        """Target rows whose NL or APL/PL some answer about ``item`` changes (sorted)."""
        # Only the targets holding the item can flag it: O(K · their number), not a scan of
        # the whole graph (10M entries at 1M items).
        holding = self.targets_of(item)
        moved: np.ndarray = holding[(self.flags[holding] & (self.idx[holding] == item)).any(axis=1)]
        return moved

    def label_sets(self) -> tuple[np.ndarray, np.ndarray]:
        """``NL`` and ``APL`` of every target, kept up to date by :meth:`update`."""
        return self.necessary, self.approx_possible

    def ranking(self, exclude: np.ndarray | None = None, top: int | None = None) -> np.ndarray:
        """Partially labelled instances, best query first (ties: the seeded keys, then lower row).

        The order of :func:`ranking_order`; ``exclude`` lists rows to leave out, ``top``
        keeps only the first ``top`` (an O(n) selection instead of a full sort).
        """
        askable = self.Y.sum(axis=1) >= 2
        if exclude is not None and len(exclude):
            askable[np.asarray(exclude, dtype=np.intp)] = False
        return ranking_order(self.scores, askable, tiebreak=self._keys, top=top)

    def select(self, batch: int, exclude: np.ndarray | None = None) -> np.ndarray:
        """The first ``batch`` items of :meth:`ranking`."""
        return self.ranking(exclude, top=int(batch))

    @property
    def n_open(self) -> int:
        """Open targets: ``NL ≠ APL`` (the cheap superset of the ambiguous ones)."""
        return int(_kernels.open_rows(self.necessary, self.approx_possible).sum())
