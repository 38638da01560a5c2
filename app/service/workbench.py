"""A labelling session at work: the one object the CLI and the Streamlit pages call.

:class:`Workbench` is a facade over the seams of a session at work, each in its own module
and small enough to read at once:

* :mod:`app.service.ranking_state`: the targets, their neighbourhoods of the dataset's
  k-NN graph (built and persisted on first use by :func:`app.service.graphs.dataset_graph`,
  then read by every process), the session criterion's :class:`engine.ranking.Ranker` and the
  query list (:func:`engine.ranking.ranking_order`, skipped items last, the order the ranked
  export uses too);
* :mod:`app.service.explanations`: why an item is worth asking;
* :mod:`app.service.model_view`: DST-PLL's view of the items, and its rejects;
* :mod:`app.service.answers`: which answers a page may still give, and the write of one;
* :mod:`app.service.item_content` and :mod:`app.service.session_tables`: what a person looks
  at, and the export tables;
* :mod:`app.service.lots`: the lots of model labels frozen for certification
  (:mod:`engine.labelling_loop`), read from the answers alone (:meth:`Workbench.loop`);
* :mod:`app.service.serving`: the order items are served in, which served slots are audits
  and which lot item each one serves (:meth:`Workbench.queue`);
* :mod:`app.service.delivery`: the labelled dataset handed back (a final label per item, its
  source) and what is stated about the model labels' error;
* :mod:`app.service.completion`: whether the work is done, and about how many answers are left.

The lots, the served order, the label decision and the estimates are kept per snapshot (and
settings history) by those modules; the workbench hands them the snapshot a reader took.

The scores are kept up to date as answers arrive (its own or another process's:
:meth:`Workbench.refresh` reads only the events after the last one it saw
(:func:`app.store.events_after`), re-derives only the items they are about
(:class:`app.store.IncrementalDerivation`) and patches only the rows whose candidate sets
changed), and every answer is written as an event in its own transaction.

A workbench may be shared by several threads (the browser app keeps one per session and
process, for all tabs). Readers never wait for a write:

* everything a page reads (the state, the scores, NL/APL) comes from one immutable snapshot
  that the thread applying new events replaces with a new object once it is complete
  (:attr:`Workbench.state`, :class:`app.service.ranking_state.SessionView`); a reader takes
  the reference once and works on it, whatever is written meanwhile;
* :meth:`Workbench.record` holds ``lock`` across its check and its write transaction (two
  presses of one tab are judged one after the other); no reader takes ``lock``;
* applying new events (``_apply_lock``) holds no write transaction; the explanations, which
  read the ranker's own arrays, and the DST-PLL model take short locks of their own, held
  while memory is patched, never while the store is written. Reading the lots
  (:meth:`Workbench.loop`) writes nothing: they are a function of the answers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from app.service import answers, completion, explanations, hotkeys, model_view, session_tables, working_state
from app.service.answers import OFFERS, CheckedItem, StaleAnswer
from app.service.completion import AnswersEstimates, WorkStatus
from app.service.delivery import DecidedLabels, DeliveredLabels, KeptLabels, LabelStatement
from app.service.explanations import AnswerEffect, Neighbour, QueryExplanation, TargetExplanation
from app.service.graphs import GraphResult, dataset_graph, graph_with_k
from app.service.item_content import ContentReader, ItemContent
from app.service.lots import SessionLots, SettingsHistory, settings_in_force
from app.service.model_view import ModelView, RejectQueue
from app.service.ranking_state import RankingState, SessionView
from app.service.serving import ServedQueue
from app.service.tasks import ProgressCallback, ProgressTracker
from app.store import (
    ACTION_KEYS,
    DerivedState,
    EventRecord,
    IncrementalDerivation,
    LabelSettings,
    SessionConfig,
    SessionState,
    StoreUnavailable,
    audit_secret,
    dataset_has_votes,
    dataset_votes,
    default_hotkeys,
    events_after,
    feature_matrix_stored,
    label_settings_history,
    load_state,
    save_feature_matrix,
    save_item_columns,
    stored_audit_secret,
    write_transaction,
)
from engine.estimates import AnswersEstimate
from engine.labelling_loop import Loop, ServedOrder
from engine.lot_model import LotModel
from engine.ranking import Ranker

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "Workbench",
    "QueryExplanation",
    "TargetExplanation",
    "RejectQueue",
    "ItemContent",
    "Neighbour",
    "AnswerEffect",
    "StaleAnswer",
    "OFFERS",
    "ACTION_KEYS",
    "DeliveredLabels",
    "LabelStatement",
]


#: How far below the largest event id it saw a workbench reads again when it catches up.
#: Writers of events hold the store's write lock (BEGIN IMMEDIATE on SQLite, an advisory lock
#: on PostgreSQL, :func:`app.store.write_transaction`), so ids are committed in increasing
#: order and ``id > last`` alone would miss nothing. A PostgreSQL writer that did not take the
#: lock (a script inserting events in its own transaction) could commit an id lower than one
#: already committed; reading a window of recent ids again and ignoring those already seen
#: (:meth:`app.store.IncrementalDerivation.add` skips them) catches such an event as long as
#: fewer than this many ids were handed out while its transaction was open. A window, rather
#: than tracking the gaps between the ids seen, because ids are shared by all sessions: a
#: gap is usually another session's event. The cost is a range scan of at most this many
#: rows per catch-up.
REREAD_WINDOW = 64


logger = logging.getLogger(__name__)


def _saved_item_columns(session_factory: sessionmaker[Session], state: SessionState) -> str | None:
    """Store the item columns ``state`` was read with (:func:`app.store.save_item_columns`);
    their token, or ``None`` when the store refused them (its rows changed meanwhile, or it
    is read-only or busy: the next open reads the rows again)."""
    try:
        return write_transaction(session_factory, lambda s: save_item_columns(s, state))
    except (SQLAlchemyError, StoreUnavailable) as error:
        logger.warning("dataset %d: item columns not kept (%s)", state.config.dataset_id, error)
        return None


@dataclass
class Workbench:
    """Load with :meth:`open`; everything a page or command needs hangs off it."""

    session_factory: sessionmaker[Session]
    session_id: int
    #: Read the session's saved working state at open, and save it (:mod:`app.service.working_state`).
    use_snapshot: bool = True
    #: How :meth:`open` got the ranking (from the snapshot or scored afresh).
    opened: working_state.OpenedRanking = field(init=False, repr=False)
    #: The targets, their neighbourhoods and the ranker (:mod:`app.service.ranking_state`);
    #: the ranker is patched in place by the thread applying new events: readers use
    #: :attr:`state` and the snapshot's view instead.
    ranking: RankingState = field(init=False, repr=False)
    #: Held by :meth:`record` across its checks and its write (never by readers).
    lock: threading.RLock = field(init=False, default_factory=threading.RLock, repr=False)
    _snapshot: SessionView = field(init=False, repr=False)
    #: The events seen so far and the state derived from them (patched by ``_catch_up``).
    _log: IncrementalDerivation = field(init=False, repr=False)
    #: One thread at a time reads new events and patches the log, ranker and snapshot.
    _apply_lock: threading.Lock = field(init=False, default_factory=threading.Lock, repr=False)
    #: Held while the ranker is patched and while an explanation reads its arrays.
    _ranker_lock: threading.Lock = field(init=False, default_factory=threading.Lock, repr=False)
    #: The DST-PLL model is updated in place when read: one reader at a time. The label
    #: decision kept beside it (``_kept_labels``) is read under it too.
    _model_lock: threading.RLock = field(init=False, default_factory=threading.RLock, repr=False)
    _model: ModelView = field(init=False, repr=False)
    _content: ContentReader = field(init=False, repr=False)
    #: Every change of the session's label settings (:func:`app.store.label_settings_history`),
    #: read again by :meth:`refresh`; replaced whole, never changed in place.
    _settings_history: SettingsHistory = field(init=False, default=(), repr=False)
    #: The lots, read from the answers and kept per snapshot and settings history.
    _lots: SessionLots = field(init=False, repr=False)
    #: The answers estimates made, by checkpoint, lot being checked, audit share and settings history.
    _estimates: AnswersEstimates = field(init=False, repr=False)
    #: The served order, kept per snapshot and settings history, and the items drawn as its first.
    _serving: ServedQueue = field(init=False, repr=False)
    #: The label decision, its statement and the labelled table, kept until the next event
    #: or settings change.
    _kept_labels: KeptLabels = field(init=False, repr=False)
    #: The dataset's crowd votes (:meth:`vote_arrays`), read on first use.
    _votes: tuple[np.ndarray, np.ndarray] | None = field(init=False, repr=False)

    @classmethod
    def open(
        cls,
        session_factory: sessionmaker[Session],
        session_id: int,
        *,
        progress: ProgressCallback | None = None,
        use_snapshot: bool = True,
    ) -> Workbench:
        """Read session ``session_id``, load (or build once) its neighbour graph, rank its items.

        ``progress`` is told about each stage: ``load`` (items read from the store),
        ``hash``, then ``index``/``search``/``save`` when the graph is built, and ``score``.
        The ranking starts from the session's saved working state when it matches, brought up
        to date with the event log (:mod:`app.service.working_state`); ``use_snapshot=False``
        scores afresh and saves nothing.
        """
        bench = cls(session_factory, session_id, use_snapshot)
        bench._build(ProgressTracker(progress))
        return bench

    # ------------------------------------------------------------------ set-up

    @property
    def state(self) -> SessionState:
        """The session as pure data, derived from every event seen so far.

        Never changed in place: each new event gives a new object, so a reader that keeps the
        object it read sees one consistent moment.
        """
        return self._snapshot.state

    @state.setter
    def state(self, value: SessionState) -> None:
        # For a change of the session's configuration (its keys): the derived part stays the
        # one of the events seen, even if an event was applied since ``value`` was made.
        with self._apply_lock:
            current = self._snapshot
            self._snapshot = replace(current, state=replace(value, derived=current.state.derived))

    @property
    def config(self) -> SessionConfig:
        return self.state.config

    @property
    def label_names(self) -> tuple[str, ...]:
        return self.state.label_names

    @property
    def hotkeys(self) -> dict[str, str]:
        """Label name -> keyboard key: the session's own keys, or the default ones
        (:func:`app.store.default_hotkeys`). Labels without a key are left out."""
        if self.config.hotkeys is not None:
            return dict(self.config.hotkeys)
        return default_hotkeys(self.label_names)

    @property
    def graph(self) -> GraphResult:
        """The dataset's graph over all instances (``idx``/``w`` are its rows of the targets)."""
        return self.ranking.graph

    @property
    def targets(self) -> np.ndarray:
        """Positions of the target items (int array of shape (n_targets,))."""
        return self.ranking.targets

    @property
    def idx(self) -> np.ndarray:
        """Neighbours of every target (int array of shape (n_targets, k))."""
        return self.ranking.idx

    @property
    def w(self) -> np.ndarray:
        """Vote weights of every target's neighbours (float array of shape (n_targets, k))."""
        return self.ranking.w

    @property
    def ranker(self) -> Ranker:
        """The session criterion's ranker (:class:`engine.ranking.Ranker`)."""
        return self.ranking.ranker

    @property
    def reads_votes(self) -> bool:
        """Whether the criterion reads the neighbours' votes (a baseline's does not)."""
        return self.ranking.reads_votes

    def _build(self, report: ProgressTracker) -> None:
        report("load", 0, None)

        def derive(events: Sequence[EventRecord], original: np.ndarray) -> DerivedState:
            # The log is read and derived once, here; from now on only the events after the
            # last one seen are read (_catch_up).
            self._log = IncrementalDerivation(original)
            self._log.add(events)
            return self._log.derived

        with self.session_factory() as s:
            loaded = load_state(s, self.session_id, derive=derive)
            blocks_missing = not feature_matrix_stored(s, loaded.config.dataset_id)
            self._settings_history = tuple(label_settings_history(s, self.session_id))
            from_votes = dataset_has_votes(s, loaded.config.dataset_id)
            stored_secret = stored_audit_secret(s)
        if loaded.item_columns_token is None and loaded.n_instances:
            # Read from the rows this time: keep them in one piece for the next open.
            loaded = replace(loaded, item_columns_token=_saved_item_columns(self.session_factory, loaded))
        # The audit key is made with the store (migration 0021); a store that lost it gets one.
        secret = stored_secret if stored_secret is not None else write_transaction(self.session_factory, audit_secret)
        cfg = loaded.config
        n = loaded.n_instances
        if blocks_missing and n:
            # Read from the rows this time (a dataset that got new items, or one published by
            # an older winnow): store the matrix in blocks for the next open, as a graph is
            # stored after its first build. Refused by the store if items came in meanwhile.
            write_transaction(self.session_factory, lambda s: save_feature_matrix(s, cfg.dataset_id, loaded.X))
        report("load", n, n)
        # The graph is built on all instances (each left out of its own neighbourhood);
        # "unlabelled" keeps as targets only the items whose original set is partial.
        graph = dataset_graph(
            self.session_factory,
            dataset_id=cfg.dataset_id,
            X=loaded.features,
            k=cfg.k,
            weighting=cfg.weighting,
            progress=report,
            item_columns_token=loaded.item_columns_token,
        )
        n_targets = n if cfg.target_set != "unlabelled" else int((loaded.original_candidates.sum(axis=1) >= 2).sum())
        report("score", 0, n_targets)
        # From the session's saved working state when it matches (app.service.working_state).
        self.opened = working_state.open_ranking(
            self.session_factory, loaded, graph, self._log.max_id, report=report, use_snapshot=self.use_snapshot
        )
        self.ranking = self.opened.ranking
        self._snapshot = SessionView(loaded, self.ranking.view(np.asarray(loaded.candidates)), self._log.max_id)
        # DST-PLL's decisions from the snapshot, when it had them: freezing a lot then fits nothing.
        self._model = ModelView(self._graph_of, self.opened.decisions)
        self._content = ContentReader(self.session_factory, cfg.dataset_id, cfg.dataset_name)
        self._lots = SessionLots(self._log, self._model_decisions, key=secret, session_id=self.session_id)
        self._serving = ServedQueue(self.graph, self._log, self._lots, key=secret, session_id=self.session_id)
        self._kept_labels = KeptLabels(self._model_lock, from_votes=from_votes)
        self._estimates = AnswersEstimates(self._lots, seed=self.session_id)

    # ------------------------------------------------------------------ reading

    def item_content(self, position: int) -> ItemContent:
        """The content of the item at ``position``: its text, image or audio file, and link.

        The dataset's content is read from the store once per workbench (one ``SELECT``) and
        kept; each call then only resolves one path. Items of a dataset without content get
        an :class:`ItemContent` whose fields are all ``None``.

        Parameters
        ----------
        position : int
            Row of the item in the dataset, ``0 <= position < n_instances``.

        Returns
        -------
        ItemContent

        Raises
        ------
        TypeError
            ``position`` is not an int.
        IndexError
            ``position`` is out of range.
        InvalidInput
            The stored media path leads outside the media root (a store edited by hand, or a
            symbolic link inside the root that now points elsewhere).
        """
        return self._content.item_content(position, self.state.n_instances)

    def refresh(self) -> np.ndarray:
        """Catch up with events other tabs or processes recorded, and re-read the session's
        label settings.

        Reads only the events after the last one seen (and a short window below it:
        :data:`REREAD_WINDOW`), re-derives only their items and re-scores only the targets
        whose neighbours' sets changed. Readers keep reading the previous snapshot meanwhile.
        Returns the positions whose candidate sets changed.
        """
        with self.session_factory() as s:
            self._settings_history = tuple(label_settings_history(s, self.session_id))
        return self._catch_up()

    def _catch_up(self) -> np.ndarray:
        """Read the events after the last one seen, apply them, publish a new snapshot."""
        with self._apply_lock:
            with self.session_factory() as s:
                events = events_after(s, self.session_id, max(0, self._log.max_id - REREAD_WINDOW))
            touched = self._log.add(events)
            if touched.size == 0:
                return touched
            derived = self._log.derived
            before = self._snapshot.state
            changed = touched[(derived.candidates[touched] != before.candidates[touched]).any(axis=1)]
            state = before.with_derived(derived, changed)
            with self._ranker_lock:
                candidates = np.asarray(derived.candidates)
                self.ranking.apply(changed, candidates)
                previous = self._snapshot.ranking
                view = self.ranking.view(candidates, previous=previous, changed=changed) if changed.size else previous
                # One assignment: a reader sees the old snapshot or the new one, never a mix.
                self._snapshot = SessionView(state, view, self._log.max_id)
            return changed

    @property
    def scores(self) -> np.ndarray:
        """Query score of every instance (float array of shape (n_instances,), read-only)."""
        return self._snapshot.ranking.scores

    def queue(self, top: int | None = None) -> np.ndarray:
        """Positions to serve, first first: the ranked queue with the audits interleaved.

        The ranked queue is :func:`engine.ranking.ranking_order` over the open items, skipped
        ones last; the slots that are audits (chosen by a stream seeded by the store's secret)
        serve the active lot's items in its random audit order
        (:func:`engine.labelling_loop.served_order`). The Query page, ``winnow
        session status`` and the ranked export (:meth:`ranked_table`) all serve this order
        (:mod:`app.service.serving`).
        """
        return self._served(self._snapshot, top).positions

    def ranked_queue(self, top: int | None = None) -> np.ndarray:
        """The ranked queue alone (no audits): open items by score, skipped ones last, and one
        slot in :data:`~app.service.suspects.SUSPECT_EVERY` for the suspect items still to ask
        (:func:`~app.service.suspects.interleave_suspects`)."""
        return self._serving.ranked(self._snapshot, self._settings_history, top)

    @property
    def label_settings(self) -> LabelSettings:
        """The session's settings in force: target error, promise, confidence, audit share."""
        return settings_in_force(self._settings_history)

    def _served(self, snap: SessionView, top: int | None) -> ServedOrder:
        return self._serving.served(snap, self._settings_history, top)

    def loop(self) -> Loop:
        """The session's lots of model labels and what their audits say
        (:func:`engine.labelling_loop.run_loop`), from the answers seen so far. Writes nothing."""
        return self._loop_at(self._snapshot)

    def _loop_at(self, snap: SessionView) -> Loop:
        return self._lots.at(snap, self._settings_history)

    def answers_estimate(self, audit_share: float | None = None) -> AnswersEstimate | None:
        """About how many answers the session needs until it is done, simulated from the lot
        being checked at the last checkpoint (:func:`engine.estimates.estimate_answers`);
        None when no lot is being checked. ``audit_share``: another share than the session's
        (the Sessions page's field before it is saved). Kept per checkpoint and share."""
        return self._estimates.estimate(self._snapshot, self._settings_history, audit_share)

    def work_status(self, *, with_estimate: bool = False) -> WorkStatus:
        """Where the work stands: done or not (:func:`app.service.completion.work_is_done`, the
        one definition), the labels by source, the statement's summary and, with
        ``with_estimate``, about how many answers are left (a simulation: a few tenths of a
        second once per checkpoint, plus the model's held-out error once per lot)."""
        snap = self._snapshot
        return completion.work_status(
            self._decided(snap).statement,
            self._loop_at(snap),
            len(snap.state.conflicts),
            estimate=self.answers_estimate,
            with_estimate=with_estimate,
        )

    def event_number(self, event_id: int) -> int:
        """The event's number within this session (1 for its first event), as the pages name it:
        event ids run across every session of the store."""
        return sum(1 for e in self._log.events() if e.id <= event_id)

    def candidates_after(self, n_events: int) -> tuple[int, np.ndarray]:
        """The candidate sets as the session's first ``n_events`` events left them, and the id
        of the last of them (:meth:`app.store.IncrementalDerivation.candidates_after`): what
        the suspicion's models of the features are fitted to (:func:`app.service.suspects.session_suspicion`).

        Takes no lock: the log publishes an event's item history before the event itself, so
        an event arriving meanwhile is either not seen or seen with its history, and either
        way every set after the first ``n_events`` comes out the same.
        """
        return self._log.candidates_after(n_events)

    def vote_arrays(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The dataset's crowd votes as ``(items, labels)`` int arrays (positions and label
        indices, by position then as stored), or ``None`` when it was not made from votes;
        read from the store once per workbench (votes are the dataset's, fixed)."""
        if not hasattr(self, "_votes"):
            with self.session_factory() as s:
                stored = dataset_votes(s, self.config.dataset_id)
            items = np.array([v.position for v in stored], dtype=np.intp)
            labels = np.array([v.label for v in stored], dtype=np.intp)
            self._votes = (items, labels) if stored else None
        return self._votes

    def undo_target(self, annotator: str) -> EventRecord | None:
        """The event an undo by ``annotator`` would cancel now (its item and kind), or None."""
        return self._log.latest_event(annotator)

    def _model_decisions(self, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every item's label, score and DST-PLL margin given ``candidates``: what a lot freezes
        (:class:`engine.lot_model.LotModel`; the features are read only now)."""
        return LotModel(self.graph.idx, self._snapshot.state.X)(candidates)

    def label_sets(self) -> tuple[np.ndarray, np.ndarray]:
        """``NL`` and ``APL`` of every target under the current candidate sets.

        Read-only arrays of one moment: later answers give new arrays, these stay as they are.
        """
        view = self._snapshot.ranking
        return view.necessary, view.approx_possible

    @property
    def n_open(self) -> int:
        """Open targets: their necessary and approximately possible labels differ (NL ≠ APL)."""
        return self._snapshot.ranking.n_open

    def summary(self) -> dict[str, int]:
        """Counts for ``winnow session status`` and the Query page: instances, events, answered,
        partial and open items, conflicts, none-of-these flags, open targets and the suspect
        items still to ask (:mod:`app.service.suspects`)."""
        snap = self._snapshot
        st = snap.state
        return {
            "instances": st.n_instances,
            "events": st.n_events,
            "answered": int(st.answered.sum()),
            "partial": int((st.set_sizes >= 2).sum()),
            "open": int(st.open_items.sum()),
            "conflicts": len(st.conflicts),
            "none_of_these": int(st.none_of_these.sum()),
            "open_targets": snap.ranking.n_open,
            "suspects": int(self._serving.suspects_to_ask(snap).size),
        }

    def next_queries(self, top: int) -> list[dict[str, Any]]:
        """The first ``top`` items of :meth:`queue`: id, score, candidate names and the true
        label's name (``None`` when unknown). The score is ``None`` on every item while audits
        are interleaved (as in :meth:`ranked_table`)."""
        snap = self._snapshot
        return session_tables.next_queries(snap, self._served(snap, None), top)

    def touched(self) -> np.ndarray:
        """For every instance: how many open targets have it among their neighbours (read-only)."""
        return self._snapshot.ranking.touched

    def lot_audits_served(self) -> bool:
        """Whether the served order holds audits of a lot now: items the model is sure of, which
        would stand out by why they were chosen (the targets an answer moves, what each answer
        would change), so :meth:`explain` says none of it, for every item alike."""
        return self._lots.audits_served(self._snapshot, self._settings_history)

    def explain(self, position: int, *, while_auditing: bool = False) -> QueryExplanation:
        """Why ``position`` is worth asking: the targets it can change, one of them in detail
        (:func:`app.service.explanations.explain`). While audits are served
        (:meth:`lot_audits_served`) only its neighbours, unless ``while_auditing`` (for a
        reader who answers no audit, e.g. ``winnow demo`` on its own temporary store)."""
        if not while_auditing and self.lot_audits_served():
            return explanations.neighbours_only(self.ranking, self._snapshot.state, position)
        # The ranker's own arrays say which targets an answer moves: read them while no new
        # event is being applied (a memory patch, not a write), with the snapshot they match.
        with self._ranker_lock:
            return explanations.explain(self.ranking, self._snapshot.state, position)

    def neighbours(self, position: int) -> list[Neighbour]:
        """The ``k`` nearest neighbours of the item at ``position``, nearest first."""
        return explanations.neighbours(self.ranking, self.state, position)

    def answer_effects(self, position: int) -> list[AnswerEffect]:
        """For each candidate label of the item: how many nearby items an answer settles."""
        return explanations.answer_effects(self.ranking, self.state, position)

    def rejects(self, *, n_neighbors: int | None = None) -> RejectQueue:
        """The items without a label that the Rejects page lists, with DST-PLL's view of them.

        ``positions`` are the open items and the items flagged "none of these" (smallest
        margin first); ``accepted`` is True exactly where :meth:`labels` keeps the model's
        label (``label_source == "model"``), so the rejected ones, with the conflicts the page
        lists beside them, are exactly the ``undecided`` items. With another ``n_neighbors``
        than the session's ``k``, ``accepted`` is that model's own reject option instead.

        The classifier is fitted once per workbench, on the dataset's persisted graph (the
        session's own, or for another ``n_neighbors`` the one :func:`~app.service.graphs.
        dataset_graph` loads or builds and stores): no neighbour search of its own. After
        answers only the disambiguations the changed sets touch are recomputed
        (:meth:`DstPllClassifier.update_candidates`). The classifier is updated and read under
        a lock of its own (tabs share it), never the one :meth:`record` holds while it writes.
        """
        with self._model_lock:
            return model_view.reject_queue(
                self._model,
                self.state,
                n_neighbors or self.config.k,
                session_k=self.config.k,
                model_kept=lambda: self._decided(self._snapshot).decision.model_kept,
                being_audited=self.items_being_audited,
            )

    def items_being_audited(self) -> np.ndarray:
        """The items of the lot being audited (bool array of shape (n_instances,)): any of them
        may be an audit, so no page shows the model's guess for them."""
        return self._lots.items_being_audited(self._snapshot, self._settings_history)

    def dst_view(self, positions: np.ndarray | list[int]) -> RejectQueue:
        """DST-PLL's label, acceptance, margin, belief and plausibility for given items (in the
        order given), e.g. items in conflict, which :meth:`rejects` leaves out as not open.
        Read under the model's lock, like :meth:`rejects` (tabs share the classifier);
        ``guess_hidden`` marks the items of the lot being audited."""
        with self._model_lock:
            st = self.state
            view = self._model.view(st.X, st.candidates, positions, self.config.k)
        return replace(view, guess_hidden=self.items_being_audited()[np.asarray(positions, dtype=np.int64)])

    def _graph_of(self, k: int) -> GraphResult:
        """The dataset's graph with ``k`` neighbours: the session's own when ``k`` is its ``k``
        (any weighting: only the neighbours are used)."""
        return graph_with_k(self.session_factory, self.state, self.graph, k)

    # ------------------------------------------------------------------ writing

    def record(
        self,
        annotator: str,
        kind: str,
        *,
        position: int | None = None,
        label: int | str | None = None,
        displayed: str | None = None,
        undoes: int | None = None,
    ) -> int:
        """Append one event in its own transaction, then catch up with the log; returns the event id.

        Parameters
        ----------
        annotator : str
            Who answers.
        kind : str
            One of :data:`app.store.EVENT_KINDS`.
        position : int, optional
            The item: the one on screen when ``displayed`` is given.
        label : int or str, optional
            For ``answer``, ``other_label`` and ``resolve``.
        displayed : {"query", "lease", "rejects", "conflicts"}, optional
            The page that showed ``position``. The workbench catches up first (other tabs may
            have answered) and the event is refused with :class:`StaleAnswer`, nothing
            written, when this annotator already gave a verdict on the item, or when the item
            is no longer one that page offers: for ``"query"`` (the Query page without
            leases) the item is neither the first of :meth:`queue` nor an item that was drawn
            as the first of :meth:`queue` and got no event since (so a second press about an
            item just answered or skipped is refused, while an answer about another item,
            which moves the queue, is not a reason); for ``"lease"`` (the Query page in team
            mode) no longer reserved for ``annotator``; for ``"rejects"`` no longer open nor
            flagged "none of these"; for ``"conflicts"`` no longer in conflict. The write
            then looks at the item's events again inside its transaction and refuses the
            event when one arrived that the check did not see; events about other items do
            not matter.
        undoes : int, optional
            For an ``undo`` from a page: the event the page offered to undo. Refused with
            :class:`StaleAnswer` when it is no longer this annotator's latest event (checked
            before and inside the write transaction).

        Raises
        ------
        StaleAnswer
            As above; nothing is written.
        InvalidInput
            The store refuses the event (:func:`app.store.record_event`).
        """
        # The check and the write hold ``lock`` together, so two presses handled at once by
        # this process (one tab's quick double press, or two tabs) are judged one after the
        # other; readers never take it. The write re-reads the item's events inside its
        # transaction, so an event about this item that another process wrote after the check
        # refuses this one too.
        with self.lock:
            checked: CheckedItem | None = None
            if displayed is not None or undoes is not None:
                self._catch_up()
                checked = answers.check_answer(
                    self._log,
                    self.state,
                    annotator,
                    kind,
                    position=position,
                    displayed=displayed,
                    undoes=undoes,
                    query_offers=self._query_offers,
                    lease_holders=self._lease_holders,
                )
            work = answers.event_writer(
                self.session_id, annotator=annotator, kind=kind, position=position, label=label, checked=checked
            )
            event_id = write_transaction(self.session_factory, work)
            self._catch_up()
        return event_id

    def set_hotkeys(self, mapping: dict[str, str | None] | None) -> dict[str, str]:
        """Store the session's keyboard keys (``None``: back to the default keys).

        Validated by :func:`app.store.set_session_hotkeys` (one letter or digit per label, no
        key twice, none of the action keys); returns the mapping now in force. Other tabs
        that have the session open see the new keys when they open it again. The command
        line's change (:func:`app.service.hotkeys.set_session_keys` with no actor).
        """
        return hotkeys.set_session_keys(self, mapping, actor=None)

    def latest_event(self, annotator: str) -> int | None:
        """The id of ``annotator``'s latest event that an undo would cancel, or ``None``
        (among the events seen so far)."""
        event = self._log.latest_event(annotator)
        return None if event is None else event.id

    def has_verdict(self, annotator: str, position: int) -> bool:
        """Whether ``annotator`` has an active verdict (answer, other label, none of these) on
        the item at ``position``."""
        return answers.has_verdict(self._log.item_events(position), annotator, position)

    def _query_offers(self, position: int) -> bool:
        """Whether the Query page without leases may still show ``position``: it is the first
        of the queue now, or it was drawn as the first and has had no event since."""
        return self._serving.offers(position, self._snapshot, self._settings_history)

    def _lease_holders(self) -> dict[int, list[str]]:
        return answers.read_lease_holders(self.session_factory, self.session_id)

    # ------------------------------------------------------------------ exports

    def ranked_table(self) -> pd.DataFrame:
        """The ranked query list of the open items (conflicts and flagged items set aside) and
        of the suspect items to ask, in the order of :meth:`queue`: skipped items last, the
        audits and suspects in their slots (no column says which rows they are: while audits
        are interleaved, ``score`` and ``open_targets_touched`` are left empty on every row)."""
        snap = self._snapshot
        return session_tables.served_ranked_table(
            snap,
            self._content.export_content(),
            asked=self._serving.suspects_to_ask(snap),
            served=self._served(snap, None),
        )

    def labelled_table(self) -> pd.DataFrame:
        """:attr:`labels` ``().table``: every item with its current set, final label, label
        source and confidence, "none of these" flag, content reference, who answered and when."""
        return self.labels().table

    def labels(self) -> DeliveredLabels:
        """The labelled dataset handed back and what is stated about its model labels.

        See :mod:`app.service.delivery`: every item's final label and its source (expert,
        given, model, undecided), model labels kept only where the audited answers back the
        session's target error, and the statement line. DST-PLL is updated incrementally
        (only the items an answer touches); the result is kept until the next event, draw or
        settings change.
        """
        snap = self._snapshot
        return self._kept_labels.delivered(snap.state, self._decided(snap), self._content.export_content)

    def label_statement(self) -> LabelStatement:
        """What :meth:`labels` states, without its table: the items per label source, the
        summary, the settings and the statement line (what ``winnow session status`` prints).

        Equal to the same fields of :meth:`labels` (both come from one decision, kept until the
        next event, draw or settings change); the table, which reads every item's content
        reference, is only made by :meth:`labels`.
        """
        return self._decided(self._snapshot).statement

    def _decided(self, snap: SessionView) -> DecidedLabels:
        return self._kept_labels.decided(snap.state, self._loop_at(snap), self._settings_history)
