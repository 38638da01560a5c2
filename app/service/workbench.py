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
* :mod:`app.service.audits`: which served slots are audits and which item each one draws;
* :mod:`app.service.delivery`: the labelled dataset handed back (a final label per item, its
  source) and what is stated about the model labels' error.

The scores are kept up to date as answers arrive (its own or another process's:
:meth:`Workbench.refresh` re-derives the state from the event log and patches only the rows
whose candidate sets changed), and every answer is written as an event in its own
transaction.

A workbench may be shared by several threads (the browser app keeps one per session and
process, for all tabs): :meth:`Workbench.refresh` and :meth:`Workbench.record` hold its
``lock``, and its large arrays (features, graph) are read-only.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy.orm import Session, sessionmaker

from app.service import answers, audits, delivery, explanations, session_tables
from app.service.answers import OFFERS, StaleAnswer
from app.service.delivery import DeliveredLabels
from app.service.explanations import AnswerEffect, Neighbour, QueryExplanation, TargetExplanation
from app.service.graphs import GraphResult, dataset_graph
from app.service.item_content import ContentReader, ItemContent
from app.service.model_view import ModelView, RejectQueue
from app.service.ranking_state import RankingState
from app.service.tasks import ProgressCallback, ProgressTracker
from app.store import (
    ACTION_KEYS,
    EventRecord,
    LabelSettings,
    SessionConfig,
    SessionState,
    audit_draws,
    count_events,
    default_hotkeys,
    derive_state,
    feature_matrix_stored,
    label_settings,
    lease_holders,
    load_state,
    save_audit_draws,
    save_feature_matrix,
    session_events,
    set_session_hotkeys,
    write_transaction,
)
from engine.ranking import Ranker

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
]


@dataclass
class Workbench:
    """Load with :meth:`open`; everything a page or command needs hangs off it."""

    session_factory: sessionmaker[Session]
    session_id: int
    state: SessionState = field(init=False)
    #: The targets, their neighbourhoods and the ranker (:mod:`app.service.ranking_state`).
    ranking: RankingState = field(init=False, repr=False)
    lock: threading.RLock = field(init=False, default_factory=threading.RLock, repr=False)
    _model: ModelView = field(init=False, repr=False)
    _content: ContentReader = field(init=False, repr=False)
    #: The events the state was last derived from (for the checks of :meth:`record`).
    _events: list[EventRecord] | None = field(init=False, default=None, repr=False)
    #: The session's label settings and its stored audit draws (slot -> position), read
    #: again by :meth:`refresh`.
    _settings: LabelSettings = field(init=False, repr=False)
    _draws: dict[int, int] = field(init=False, default_factory=dict, repr=False)
    #: The last :meth:`labels`, with the number of events and draws it was computed from.
    _labels: tuple[int, int, LabelSettings, DeliveredLabels] | None = field(init=False, default=None, repr=False)

    @classmethod
    def open(
        cls, session_factory: sessionmaker[Session], session_id: int, *, progress: ProgressCallback | None = None
    ) -> Workbench:
        """Read session ``session_id``, load (or build once) its neighbour graph, rank its items.

        ``progress`` is told about each stage: ``load`` (items read from the store),
        ``hash``, then ``index``/``search``/``save`` when the graph is built, and ``score``.
        """
        bench = cls(session_factory, session_id)
        bench._build(ProgressTracker(progress))
        return bench

    # ------------------------------------------------------------------ set-up

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
        with self.session_factory() as s:
            self.state = load_state(s, self.session_id)
            blocks_missing = not feature_matrix_stored(s, self.state.config.dataset_id)
            self._settings = label_settings(s, self.session_id)
            self._draws = audit_draws(s, self.session_id)
        cfg = self.state.config
        n = self.state.n_instances
        if blocks_missing and n:
            # Read from the rows this time (a dataset that got new items, or one published by
            # an older winnow): store the matrix in blocks for the next open, as a graph is
            # stored after its first build. Refused by the store if items came in meanwhile.
            write_transaction(self.session_factory, lambda s: save_feature_matrix(s, cfg.dataset_id, self.state.X))
        report("load", n, n)
        # The graph is built on all instances (each left out of its own neighbourhood);
        # "unlabelled" keeps as targets only the items whose original set is partial.
        graph = dataset_graph(
            self.session_factory,
            dataset_id=cfg.dataset_id,
            X=self.state.X,
            k=cfg.k,
            weighting=cfg.weighting,
            progress=report,
        )
        n_targets = (
            n if cfg.target_set != "unlabelled" else int((self.state.original_candidates.sum(axis=1) >= 2).sum())
        )
        report("score", 0, n_targets)
        self.ranking = RankingState.build(cfg, graph, self.state.original_candidates, np.array(self.state.candidates))
        report("score", n_targets, n_targets)
        self._model = ModelView(self._graph_of)
        self._content = ContentReader(self.session_factory, cfg.dataset_id, cfg.dataset_name)

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
        """Re-derive the state from the event log (other tabs or processes may have answered).

        Returns the positions whose candidate sets changed; only their targets are re-scored.
        """
        with self.lock:
            return self._refresh()

    def _refresh(self) -> np.ndarray:
        with self.session_factory() as s:
            events = session_events(s, self.session_id)
            self._settings = label_settings(s, self.session_id)
            self._draws = audit_draws(s, self.session_id)
        self._events = events
        derived = derive_state(events, self.state.original_candidates)
        changed = np.flatnonzero((derived.candidates != self.state.candidates).any(axis=1))
        self.state = replace(self.state, derived=derived)
        self.ranking.apply(changed, np.asarray(derived.candidates))
        return changed

    @property
    def scores(self) -> np.ndarray:
        """Query score of every instance (float array of shape (n_instances,))."""
        return self.ranking.scores

    def queue(self, top: int | None = None) -> np.ndarray:
        """Positions to serve, first first: the ranked queue with the audits interleaved.

        The ranked queue is :func:`engine.ranking.ranking_order` over the open items, skipped
        ones last; the slots that are audits (about ``audit_share`` of them, chosen by the
        session's seeded stream) serve an item drawn at random among those the model would
        label, drawn once and stored (:mod:`app.service.audits`). The Query page, ``winnow
        session status`` and the ranked export (:meth:`ranked_table`) all serve this order.
        """
        return self._served(top).positions

    def next_items(self, n: int) -> np.ndarray:
        """The first ``n`` items of :meth:`queue` (audits interleaved, unmarked)."""
        return self.queue(top=n)

    def ranked_queue(self, top: int | None = None) -> np.ndarray:
        """The ranked queue alone (no audits): open items by score, skipped ones last."""
        return self.ranking.queue(self.state.open_items, np.asarray(self.state.skipped), top=top)

    def is_audit(self, position: int) -> bool:
        """Whether the item at ``position`` was drawn as an audit (for tests: nothing shows it)."""
        return int(position) in set(self._draws.values())

    @property
    def label_settings(self) -> LabelSettings:
        """The session's target error, confidence and audit share (as last read)."""
        return self._settings

    def _served(self, top: int | None) -> audits.ServedOrder:
        with self.lock:
            st = self.state
            eligible = np.asarray(st.open_items) & ~np.asarray(st.skipped)
            base = audits.served_base(st.answered_by)
            for _ in range(3):  # a draw another process stored first wins: serve its item
                order = audits.served_order(
                    self.ranked_queue(),
                    eligible,
                    self._draws,
                    base=base,
                    audit_share=self._settings.audit_share,
                    session_id=self.session_id,
                    top=top,
                )
                if not order.new_draws:
                    return order
                wanted = order.new_draws
                # partial binds this pass's draws now (a lambda would read the loop variable).
                self._draws = write_transaction(
                    self.session_factory, functools.partial(save_audit_draws, session_id=self.session_id, draws=wanted)
                )
                if all(self._draws.get(slot) == pos for slot, pos in wanted.items()):
                    return order
            return order

    def label_sets(self) -> tuple[np.ndarray, np.ndarray]:
        """``NL`` and ``APL`` of every target under the current candidate sets.

        Kept up to date by :meth:`refresh` (read them, do not keep them: they change in place).
        """
        with self.lock:
            return self.ranking.label_sets(np.asarray(self.state.candidates))

    @property
    def n_open(self) -> int:
        """Open targets: their necessary and approximately possible labels differ (NL ≠ APL)."""
        with self.lock:
            return self.ranking.n_open(np.asarray(self.state.candidates))

    def summary(self) -> dict[str, int]:
        """Counts for ``winnow session status`` and the Query page: instances, events, answered,
        partial and open items, conflicts, none-of-these flags and open targets."""
        st = self.state
        return {
            "instances": st.n_instances,
            "events": st.n_events,
            "answered": len(st.answered_by) - st.answered_by.count(None),
            "partial": int((np.asarray(st.candidates).sum(axis=1) >= 2).sum()),
            "open": int(st.open_items.sum()),
            "conflicts": len(st.conflicts),
            "none_of_these": int(st.none_of_these.sum()),
            "open_targets": self.n_open,
        }

    def next_queries(self, top: int) -> list[dict[str, Any]]:
        """The first ``top`` items of :meth:`queue`: id, score, candidate names and the true
        label's name (``None`` when unknown)."""
        st = self.state
        names = self.label_names
        truth = st.true_labels
        return [
            {
                "id": st.external_ids[p],
                "score": float(self.scores[p]),
                "candidates": [names[m] for m in np.flatnonzero(st.candidates[p])],
                "true_label": names[truth[p]] if truth is not None and truth[p] >= 0 else None,
            }
            for p in self.queue(top=top)
        ]

    def touched(self) -> np.ndarray:
        """For every instance: how many open targets have it among their neighbours."""
        with self.lock:
            return self.ranking.touched(np.asarray(self.state.candidates))

    def explain(self, position: int) -> QueryExplanation:
        """Why ``position`` is worth asking: the targets it can change, one of them in detail
        (:func:`app.service.explanations.explain`)."""
        return explanations.explain(self.ranking, self.state, position)

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
        the workbench's lock (tabs share it).
        """
        with self.lock:
            k = n_neighbors or self.config.k
            flagged = np.asarray(self.state.none_of_these) & ~self.state.in_conflict
            listed = np.asarray(self.state.open_items) | flagged
            queue = self._model.rejects(self.state.X, self.state.candidates, listed, k)
            if k != self.config.k:
                return queue
            kept = self.labels().table["label_source"].to_numpy() == "model"
            return replace(queue, accepted=kept[queue.positions])

    def dst_view(self, positions: np.ndarray | list[int]) -> RejectQueue:
        """DST-PLL's label, acceptance, margin, belief and plausibility for given items (in the
        order given), e.g. items in conflict, which :meth:`rejects` leaves out as not open.
        Read under the workbench's lock, like :meth:`rejects` (tabs share the classifier)."""
        with self.lock:
            return self._model.view(self.state.X, self.state.candidates, positions, self.config.k)

    def _graph_of(self, k: int) -> GraphResult:
        """The dataset's graph with ``k`` neighbours: the session's own when ``k`` is its ``k``
        (any weighting: only the neighbours are used)."""
        if k == self.config.k:
            return self.graph
        return dataset_graph(
            self.session_factory, dataset_id=self.config.dataset_id, X=self.state.X, k=k, weighting="uniform"
        )

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
        """Append one event in its own transaction, then refresh; returns the event id.

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
            The page that showed ``position``. The state is refreshed first (other tabs may
            have answered) and the event is refused with :class:`StaleAnswer`, nothing
            written, when the item is no longer the one that page offers: not the first of
            :meth:`queue` (``"query"``), no longer reserved for ``annotator`` (``"lease"``,
            the Query page in team mode), no longer open nor flagged "none of these" (``"rejects"``), no longer in
            conflict (``"conflicts"``), or when this annotator already gave a verdict on it.
        undoes : int, optional
            For an ``undo`` from a page: the event the page offered to undo. Refused with
            :class:`StaleAnswer` when it is no longer this annotator's latest event.

        Raises
        ------
        StaleAnswer
            As above; nothing is written.
        InvalidInput
            The store refuses the event (:func:`app.store.record_event`).
        """
        # The check, the write and the refresh hold the lock together, so two presses handled
        # at once by this process (one tab's quick double press, or two tabs) are judged one
        # after the other; the write re-counts the log inside its transaction, so an event
        # that another process wrote after the check refuses this one too.
        with self.lock:
            checked_events: int | None = None
            if displayed is not None or undoes is not None:
                self._catch_up()
                events = self._current_events()
                if kind == "undo":
                    answers.check_undo(events, annotator, undoes)
                else:
                    answers.check_displayed(
                        events,
                        self.state,
                        annotator,
                        kind,
                        position,
                        displayed,
                        queue_head=self._queue_head,
                        lease_holders=self._lease_holders,
                    )
                checked_events = self.state.n_events
            work = answers.event_writer(
                self.session_id,
                annotator=annotator,
                kind=kind,
                position=position,
                label=label,
                checked_events=checked_events,
            )
            event_id = write_transaction(self.session_factory, work)
            self._refresh()
        return event_id

    def set_hotkeys(self, mapping: dict[str, str | None] | None) -> dict[str, str]:
        """Store the session's keyboard keys (``None``: back to the default keys).

        Validated by :func:`app.store.set_session_hotkeys` (one letter or digit per label, no
        key twice, none of the action keys); returns the mapping now in force. Other tabs
        that have the session open see the new keys when they open it again.
        """
        stored = write_transaction(self.session_factory, lambda s: set_session_hotkeys(s, self.session_id, mapping))
        config = replace(self.config, hotkeys=None if mapping is None else dict(stored))
        self.state = replace(self.state, config=config)
        return stored

    def latest_event(self, annotator: str) -> int | None:
        """The id of ``annotator``'s latest event that an undo would cancel, or ``None``."""
        return answers.latest_event(self._current_events(), annotator)

    def has_verdict(self, annotator: str, position: int) -> bool:
        """Whether ``annotator`` has an active verdict (answer, other label, none of these) on
        the item at ``position``."""
        return answers.has_verdict(self._current_events(), annotator, position)

    def _catch_up(self) -> None:
        """Refresh when another tab or process recorded events since the state was derived
        (one ``COUNT``; the events are read again only then)."""
        with self.session_factory() as s:
            stored = count_events(s, self.session_id)
        if stored != self.state.n_events:
            self.refresh()

    def _current_events(self) -> list[EventRecord]:
        if self._events is None or len(self._events) != self.state.n_events:
            with self.session_factory() as s:
                self._events = session_events(s, self.session_id)
        return self._events

    def _queue_head(self) -> int | None:
        top = self.queue(top=1)
        return int(top[0]) if top.size else None

    def _lease_holders(self) -> dict[int, list[str]]:
        with self.session_factory() as s:
            return lease_holders(s, self.session_id)

    # ------------------------------------------------------------------ exports

    def params(self) -> dict[str, Any]:
        """The session's scoring parameters, as the ranked export records them."""
        return session_tables.scoring_params(self.config)

    def ranked_table(self) -> pd.DataFrame:
        """The ranked query list of the open items (conflicts and flagged items set aside),
        in the order of :meth:`queue`: skipped items last, the audits in their slots (no
        column says which rows they are)."""
        with self.lock:
            table = session_tables.ranked_table(self.state, self.scores, self.touched(), self._content.export_content())
            return session_tables.in_served_order(table, self.ranked_queue(), self.queue())

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
        with self.lock:
            key = (self.state.n_events, len(self._draws), self._settings)
            if self._labels is not None and self._labels[:3] == key:
                return self._labels[3]
            st = self.state
            model = self._model.fitted(st.X, st.candidates, self.config.k)
            drawn = np.fromiter(self._draws.values(), dtype=np.int64, count=len(self._draws))
            _, audit_margin, audit_correct = delivery.audited_answers(st, drawn, self.graph.idx)
            decision = delivery.decide_labels(
                st, model.disambiguate_, model.disambiguate_margin_, audit_margin, audit_correct, self._settings
            )
            counts = decision.counts()
            base = session_tables.labelled_table(st, self._content.export_content())
            labels = DeliveredLabels(
                table=delivery.delivered_table(base, decision, self.label_names),
                counts=counts,
                calibration=decision.calibration,
                settings=self._settings,
                n_audited=decision.n_audited,
                statement=delivery.label_statement(counts, decision.calibration, decision.n_audited),
            )
            labels.table.attrs["metadata"] = delivery.statement_metadata(labels)
            self._labels = (*key, labels)
            return labels
