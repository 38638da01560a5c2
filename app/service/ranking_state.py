"""A session's ranking state: its targets, their neighbourhoods, the ranker and NL/APL.

One seam of :class:`app.service.workbench.Workbench`. The ranker is whichever
:class:`engine.ranking.Ranker` the session's criterion names (:func:`make_ranker`); this
module talks to it through that contract only. The query list is ordered by
:func:`engine.ranking.ranking_order` (skipped items last), the one order the ranked export
uses too.

Readers and the writer do not share mutable arrays: the ranker is patched in place by the one
thread that applies new events (:meth:`RankingState.apply`), and readers use a
:class:`RankingView`, read-only copies of the scores and label sets that
:meth:`RankingState.view` makes after each patch (copy-on-write: a patch never touches an
array a view holds).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from app.service.graphs import GraphResult
from app.store import SessionConfig, SessionState, readonly
from engine.decision_change import DecisionChangeRanker
from engine.exceptions import InvalidInput
from engine.query import AMBIGUITY_CRITERIA, IncrementalRanker, open_neighbourhoods
from engine.ranking import BASELINE_CRITERIA, Ranker, StaticRanker, ranking_order
from engine.winners import label_sets, open_targets

__all__ = ["RankingState", "RankingView", "SessionView", "make_ranker", "restore_ranker", "local_graph"]


def make_ranker(
    config: SessionConfig, idx: np.ndarray, w: np.ndarray, candidates: np.ndarray, targets: np.ndarray
) -> Ranker:
    """The ranker of the session's criterion on its targets' neighbourhoods.

    The session id seeds the tie-breaking keys of ``"decision_change"`` and the ``"random"``
    baseline's order.
    """
    if config.criterion == "decision_change":
        return DecisionChangeRanker(idx, w, candidates, targets=targets, random_state=config.session_id)
    if config.criterion in AMBIGUITY_CRITERIA:
        return IncrementalRanker(idx, w, candidates, criterion=config.criterion)
    return StaticRanker(idx, w, candidates, config.criterion, random_state=config.session_id)


def restore_ranker(
    config: SessionConfig, idx: np.ndarray, w: np.ndarray, state: dict[str, np.ndarray], targets: np.ndarray
) -> Ranker:
    """The ranker :func:`make_ranker` would give, from its ``state_arrays()`` instead of a scoring
    pass (same seeds), for a criterion that reads the votes. Raises
    :class:`engine.exceptions.InvalidInput` when an array is malformed."""
    if config.criterion == "decision_change":
        return DecisionChangeRanker.from_state(idx, w, state, targets=targets, random_state=config.session_id)
    if config.criterion in AMBIGUITY_CRITERIA:
        return IncrementalRanker.from_state(idx, w, state, criterion=config.criterion)
    raise ValueError(f"a {config.criterion!r} ranker is built afresh, not restored")


def local_graph(idx_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The items a few targets' neighbourhoods hold (sorted) and the neighbourhoods as rows of
    that list, so the votes read a copy of those items' sets only."""
    items, local = np.unique(idx_rows, return_inverse=True)
    return items, local.reshape(idx_rows.shape)


def _target_rows(
    config: SessionConfig, graph: GraphResult, original: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The session's targets (all items, or for ``"unlabelled"`` those whose original set is
    partial) and their rows of the graph (the graph itself when every item is a target)."""
    n = original.shape[0]
    targets = np.flatnonzero(original.sum(axis=1) >= 2) if config.target_set == "unlabelled" else np.arange(n)
    if targets.size == n:
        return targets, graph.idx, graph.w
    return targets, graph.idx[targets], graph.w[targets]


@dataclass(frozen=True, eq=False)
class RankingView:
    """What readers need of the ranking at one moment, never changed once made.

    Attributes
    ----------
    scores : float array of shape (n_instances,)
        Query score of every instance (read-only).
    necessary, approx_possible : bool arrays of shape (n_targets, n_labels)
        ``NL`` and ``APL`` of every target (read-only).
    idx : int array of shape (n_targets, k)
        The targets' neighbourhoods (the graph's, never changed).
    """

    scores: np.ndarray
    necessary: np.ndarray
    approx_possible: np.ndarray
    idx: np.ndarray

    @cached_property
    def open_rows(self) -> np.ndarray:
        """Bool mask of the open targets (``NL ≠ APL``), computed once per view."""
        return readonly(open_targets(self.necessary, self.approx_possible))

    @cached_property
    def n_open(self) -> int:
        """Open targets: their necessary and approximately possible labels differ (NL ≠ APL)."""
        return int(self.open_rows.sum())

    @cached_property
    def touched(self) -> np.ndarray:
        """For every instance: how many open targets have it among their neighbours."""
        return readonly(open_neighbourhoods(self.idx, self.open_rows, self.scores.shape[0]))

    def queue(self, open_items: np.ndarray, skipped: np.ndarray, top: int | None = None) -> np.ndarray:
        """Open items by score, skipped ones last (:func:`engine.ranking.ranking_order`)."""
        return ranking_order(self.scores, open_items, deferred=skipped, top=top)


@dataclass(frozen=True, slots=True, eq=False)
class SessionView:
    """Everything a reader of a session at work needs, at one moment: replaced whole, never changed.

    The workbench publishes a new one after each batch of events
    (:attr:`app.service.workbench.Workbench.state`); the seams that keep results per moment
    (the lots, the served order) compare views by identity.

    Attributes
    ----------
    state : SessionState
        The session as derived from its events up to ``last_event_id``.
    ranking : RankingView
        The scores and label sets of those candidate sets.
    last_event_id : int
        The largest event id the state is derived from.
    """

    state: SessionState
    ranking: RankingView
    last_event_id: int


@dataclass
class RankingState:
    """The targets of a session, their rows of the dataset's graph and the ranker over them.

    Attributes
    ----------
    graph : GraphResult
        The dataset's graph over all instances.
    targets : int array of shape (n_targets,)
        The items whose decisions count (all, or those whose original set is partial).
    idx, w : arrays of shape (n_targets, k)
        The targets' rows of the graph (the graph itself when every item is a target).
    ranker : engine.ranking.Ranker
        Scores every item; patched by :meth:`apply`.
    criterion : str
        The session's criterion (:data:`engine.choices.CRITERIA`).
    """

    graph: GraphResult
    targets: np.ndarray
    idx: np.ndarray
    w: np.ndarray
    ranker: Ranker
    criterion: str
    #: NL and APL of every target when the ranker does not keep them; computed on first use,
    #: then replaced (never changed in place) by :meth:`apply`, so views may hold them.
    _sets: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)

    @classmethod
    def build(
        cls, config: SessionConfig, graph: GraphResult, original: np.ndarray, candidates: np.ndarray
    ) -> RankingState:
        """Targets from the session's ``target_set``, and its criterion's ranker on them."""
        targets, idx, w = _target_rows(config, graph, original)
        return cls(graph, targets, idx, w, make_ranker(config, idx, w, candidates, targets), config.criterion)

    @classmethod
    def restore(
        cls,
        config: SessionConfig,
        graph: GraphResult,
        original: np.ndarray,
        arrays: dict[str, np.ndarray],
        candidates: np.ndarray,
    ) -> RankingState:
        """The state :meth:`build` gives for ``candidates``, from the arrays :meth:`state_arrays`
        returned for the sets ``arrays["ranker.Y"]``: the items whose set differs are applied
        as one incremental update (:meth:`apply`) instead of a scoring pass.

        A baseline's ranker is built afresh (its scores are those of the sets it is built on,
        and cheap); its NL/APL come from the arrays. Raises
        :class:`engine.exceptions.InvalidInput` when an array is missing or malformed.
        """
        targets, idx, w = _target_rows(config, graph, original)
        then = arrays.get("ranker.Y")
        if then is None or then.shape != candidates.shape or then.dtype != bool:
            raise InvalidInput(f"the snapshot's candidate sets must be a bool array of shape {candidates.shape}")
        # Taken before the ranker owns (and patches) the snapshot's sets.
        changed = np.flatnonzero((then != candidates).any(axis=1))
        if config.criterion in BASELINE_CRITERIA:
            ranker = make_ranker(config, idx, w, candidates, targets)
        else:
            ranker_state = {name.removeprefix("ranker."): a for name, a in arrays.items() if name.startswith("ranker.")}
            ranker = restore_ranker(config, idx, w, ranker_state, targets)
            if changed.size:
                ranker.update(changed, candidates[changed])
        state = cls(graph, targets, idx, w, ranker, config.criterion)
        if "necessary" in arrays and "approx_possible" in arrays:
            shape = (idx.shape[0], original.shape[1])
            necessary, possible = arrays["necessary"], arrays["approx_possible"]
            if necessary.shape != shape or possible.shape != shape or necessary.dtype != bool or possible.dtype != bool:
                raise InvalidInput(f"NL and APL must be bool arrays of shape {shape}")
            if changed.size:
                rows = ranker.targets_of(changed)
                items, local = local_graph(idx[rows])
                necessary[rows], possible[rows] = label_sets(local, w[rows], candidates[items])
            state._sets = readonly(necessary), readonly(possible)
        return state

    def state_arrays(self) -> dict[str, np.ndarray]:
        """The ranker's arrays (names prefixed ``ranker.``, its candidate sets ``ranker.Y``
        among them) and the NL/APL this state keeps for it: what :meth:`restore` takes."""
        arrays = {f"ranker.{name}": a for name, a in self.ranker.state_arrays().items()}
        if self._sets is not None:
            arrays["necessary"], arrays["approx_possible"] = self._sets
        return arrays

    @property
    def reads_votes(self) -> bool:
        """Whether the criterion's scores read the neighbours' votes (a baseline's do not)."""
        return self.criterion not in BASELINE_CRITERIA

    def apply(self, changed: np.ndarray, candidates: np.ndarray) -> None:
        """Tell the ranker the items ``changed`` now have the sets ``candidates[changed]``."""
        if changed.size == 0:
            return
        self.ranker.update(changed, candidates[changed])
        if self._sets is not None:
            # A target's NL and APL read only its neighbours' sets: redo the targets that hold
            # a changed item (a few dozen per answer), not all of them, in copies (a view may
            # hold the arrays).
            rows = self.ranker.targets_of(changed)
            items, local = local_graph(self.idx[rows])
            necessary, possible = (np.array(a) for a in self._sets)
            necessary[rows], possible[rows] = label_sets(local, self.w[rows], candidates[items])
            self._sets = readonly(necessary), readonly(possible)

    @property
    def scores(self) -> np.ndarray:
        """Query score of every instance (float array of shape (n_instances,)), the ranker's own
        array, patched in place by :meth:`apply` (readers use a :meth:`view`)."""
        return self.ranker.scores

    def label_sets(self, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``NL`` and ``APL`` of every target: the ranker's own when it keeps them, otherwise
        computed once from ``candidates`` and patched by :meth:`apply`."""
        kept = self.ranker.label_sets()
        if kept is not None:
            return kept
        if self._sets is None:
            necessary, possible = label_sets(self.idx, self.w, candidates)
            self._sets = readonly(necessary), readonly(possible)
        return self._sets

    def view(
        self, candidates: np.ndarray, *, previous: RankingView | None = None, changed: np.ndarray | None = None
    ) -> RankingView:
        """Read-only copies of the scores and label sets as they are now, for readers.

        Costs a copy of the scores (and of ``NL``/``APL`` when the ranker keeps and patches
        them itself): memory copies, ``O(n_instances + n_targets · n_labels)`` bytes. With the
        ``previous`` view and the items ``changed`` since it (those :meth:`apply` was told
        of), the open targets are the previous ones redone at the targets holding a changed
        item (the only ones whose ``NL``/``APL`` can differ) instead of a pass over every
        target's label sets.
        """
        kept = self.ranker.label_sets()
        if kept is not None:
            necessary, possible = (readonly(np.array(a)) for a in kept)
        else:
            necessary, possible = self.label_sets(candidates)
        view = RankingView(readonly(np.array(self.ranker.scores)), necessary, possible, self.idx)
        if previous is not None and changed is not None and "open_rows" in previous.__dict__:
            rows = self.ranker.targets_of(changed)
            open_rows = np.array(previous.open_rows)
            open_rows[rows] = open_targets(necessary[rows], possible[rows])
            # cached_property keeps its value in the instance's __dict__: seeded with what
            # it would compute.
            view.__dict__["open_rows"] = readonly(open_rows)
        return view

    def row_of(self, position: int) -> int | None:
        """The target row of the item at ``position``, or ``None`` when it is not a target."""
        row = int(np.searchsorted(self.targets, position))
        return row if row < self.targets.size and self.targets[row] == position else None
