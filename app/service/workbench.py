"""A labelling session at work: its neighbour graph, query ranking and reject queue.

The CLI and the Streamlit pages share this one object so they add no logic of their own.
Its query list is ordered by :func:`engine.query.ranking_order` (skipped items last), the
one order the ranked export uses too.
It reads a session from the store, loads the dataset's k-NN graph (built and persisted on
first use by :func:`app.service.graphs.dataset_graph`, then read by every process), keeps the
query scores up to date with :class:`engine.decision_change.DecisionChangeRanker` (criterion
``"decision_change"``, the default) or :class:`engine.query.IncrementalRanker` (``"apl"``,
``"pl"``) as answers arrive (its own or another process's: :meth:`Workbench.refresh` re-derives the state from the event log and patches
only the rows whose candidate sets changed), and writes every answer as an event in its own
transaction.

A workbench may be shared by several threads (the browser app keeps one per session and
process, for all tabs): :meth:`Workbench.refresh` and :meth:`Workbench.record` hold its
``lock``, and its large arrays (features, graph) are read-only.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy.orm import Session, sessionmaker

from app.io.writers import labelled_dataset_table, ranked_query_table
from app.service.graphs import GraphResult, dataset_graph
from app.service.tasks import ProgressCallback, ProgressTracker
from app.store import ACTION_KEYS, DatasetContent, EventRecord, SessionConfig, SessionState, count_events, dataset_content
from app.store import default_hotkeys, derive_state, derived_fields, load_state, record_event, session_events
from app.store import feature_matrix_stored, lease_holders, save_feature_matrix, set_session_hotkeys, write_transaction
from app.store.derive import VERDICT_KINDS
from engine import check_choice
from engine.decision_change import DecisionChangeRanker
from engine.dst import DstPllClassifier
from engine.exceptions import InvalidInput
from engine.neighbors import ReverseIndex
from engine.query import AMBIGUITY_CRITERIA, IncrementalRanker, open_neighbourhoods, query_scores, ranking_order
from engine.winners import label_sets, open_targets, possible_labels, witness

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
]

#: Where an item can be on screen when it is answered (:meth:`Workbench.record`'s ``displayed``).
OFFERS: tuple[str, ...] = ("query", "lease", "rejects", "conflicts")


class StaleAnswer(InvalidInput):
    """An answer about an item that is no longer the one on screen; nothing was written.

    Raised by :meth:`Workbench.record` when a key press arrives after the page moved on (a
    double press), or after another tab or annotator settled the item. The message is meant
    for the annotator as it is.
    """


@dataclass(frozen=True)
class ItemContent:
    """What a person looks at for one item; every field ``None`` when the item has none.

    Attributes
    ----------
    text : str or None
        The item's text, as imported (show it as text, never as Markdown or HTML).
    image_path, audio_path : pathlib.Path or None
        Absolute path of the item's image or audio clip, inside the dataset's media root
        (checked again when read from the store). The file may have been moved or deleted
        since the import: the caller opens it and handles the error.
    link : str or None
        An http(s) URL to the item elsewhere (never fetched by winnow).
    """

    text: str | None
    image_path: Path | None
    audio_path: Path | None
    link: str | None


_NO_CONTENT = ItemContent(text=None, image_path=None, audio_path=None, link=None)


@dataclass(frozen=True)
class TargetExplanation:
    """Why one target's decision is open, in label names."""

    target: int  # position of the target instance
    target_id: str
    necessary: list[str]
    possible: list[str]
    #: A label that is possible but not necessary, with a completion that makes it win.
    witness_label: str | None
    #: (neighbour id, label that neighbour takes in the witness completion, its candidates)
    witness: list[tuple[str, str, str]]
    #: For each answer about the queried item: the target's necessary labels afterwards.
    necessary_after: dict[str, list[str]]


@dataclass(frozen=True)
class Neighbour:
    """One of an item's nearest neighbours: the items whose labels decide its own."""

    position: int
    item_id: str
    #: Its current candidate labels, by name.
    candidates: tuple[str, ...]
    #: Its vote weight for the item (1 for uniform weighting).
    weight: float


@dataclass(frozen=True)
class AnswerEffect:
    """What answering an item with one of its candidate labels would do to the items nearby.

    Counted over the targets that have the item among their neighbours, with their necessary
    (NL) and approximately possible (APL) labels before and after the answer.
    """

    label: str
    label_index: int
    #: Targets whose decision becomes certain (NL ≠ APL before, NL = APL after).
    settled: int
    #: Targets whose NL or APL changes at all (the settled ones included).
    changed: int

    @property
    def outcome(self) -> str:
        """The effect in plain words, without the label: ``"12 nearby items become certain"``.

        >>> AnswerEffect("cat", 0, settled=1, changed=3).outcome
        '1 nearby item becomes certain and 2 more narrow down'
        >>> AnswerEffect("cat", 0, settled=0, changed=0).outcome
        'no nearby item changes'
        """
        def items(n: int) -> str:
            return f"{n} nearby item" + ("" if n == 1 else "s")

        more = self.changed - self.settled
        if self.settled and more:
            verb = "becomes" if self.settled == 1 else "become"
            return f"{items(self.settled)} {verb} certain and {more} more narrow down"
        if self.settled:
            return f"{items(self.settled)} " + ("becomes" if self.settled == 1 else "become") + " certain"
        if more:
            return f"{items(more)} " + ("narrows" if more == 1 else "narrow") + " down"
        return "no nearby item changes"


@dataclass(frozen=True)
class QueryExplanation:
    """Why an item is worth asking about: the targets an answer could change."""

    position: int
    item_id: str
    score: float
    n_targets_changed: int
    #: Positions of the targets an answer could change (those the score counts).
    targets: list[int]
    example: TargetExplanation | None
    #: The item's own nearest neighbours, nearest first.
    neighbours: list[Neighbour] = field(default_factory=list)
    #: One entry per candidate label of the item, in label order.
    effects: list[AnswerEffect] = field(default_factory=list)


@dataclass(frozen=True)
class RejectQueue:
    """DST-PLL's view of the still-partial items: the labels it refuses to commit to."""

    positions: np.ndarray  # open items, smallest margin first (rejected ones first)
    labels: np.ndarray  # DST-PLL's label per position
    accepted: np.ndarray
    margin: np.ndarray
    belief: np.ndarray  # (len(positions), M)
    plausibility: np.ndarray

    @property
    def n_rejected(self) -> int:
        return int((~self.accepted).sum())


@dataclass
class Workbench:
    """Load with :meth:`open`; everything a page or command needs hangs off it."""

    Session: sessionmaker[Session]
    session_id: int
    state: SessionState = field(init=False)
    targets: np.ndarray = field(init=False)
    idx: np.ndarray = field(init=False)
    w: np.ndarray = field(init=False)
    ranker: IncrementalRanker | DecisionChangeRanker | None = field(init=False, default=None)
    static_scores: np.ndarray | None = field(init=False, default=None)
    #: The dataset's graph over all instances (``idx``/``w`` are its rows of the targets).
    graph: GraphResult = field(init=False, repr=False)
    lock: threading.RLock = field(init=False, default_factory=threading.RLock, repr=False)
    _dst: DstPllClassifier | None = field(init=False, default=None, repr=False)
    _content: DatasetContent | None = field(init=False, default=None, repr=False)
    #: The events the state was last derived from (for the checks of :meth:`record`).
    _events: list[EventRecord] | None = field(init=False, default=None, repr=False)
    _media_root: Path | None = field(init=False, default=None, repr=False)
    #: NL and APL of every target, kept up to date by :meth:`refresh` when the ranker does
    #: not keep them (decision_change and the baselines); computed on first use.
    _sets: tuple[np.ndarray, np.ndarray] | None = field(init=False, default=None, repr=False)
    #: Which targets hold each item, for the baselines' rankers (the others keep their own).
    _holders: ReverseIndex | None = field(init=False, default=None, repr=False)

    @classmethod
    def open(cls, Session: sessionmaker[Session], session_id: int, *, progress: ProgressCallback | None = None) -> "Workbench":
        """Read session ``session_id``, load (or build once) its neighbour graph, rank its items.

        ``progress`` is told about each stage: ``load`` (items read from the store),
        ``hash``, then ``index``/``search``/``save`` when the graph is built, and ``score``.
        """
        bench = cls(Session, session_id)
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

    def _build(self, report: ProgressTracker) -> None:
        report("load", 0, None)
        with self.Session() as s:
            self.state = load_state(s, self.session_id)
            blocks_missing = not feature_matrix_stored(s, self.state.config.dataset_id)
        cfg = self.state.config
        n = self.state.n_instances
        if blocks_missing and n:
            # Read from the rows this time (a dataset that got new items, or one published by
            # an older winnow): store the matrix in blocks for the next open, as a graph is
            # stored after its first build. Refused by the store if items came in meanwhile.
            write_transaction(self.Session, lambda s: save_feature_matrix(s, cfg.dataset_id, self.state.X))
        report("load", n, n)
        # The graph is built on all instances (each left out of its own neighbourhood);
        # "unlabelled" keeps as targets only the items whose original set is partial.
        self.graph = dataset_graph(
            self.Session, dataset_id=cfg.dataset_id, X=self.state.X, k=cfg.k, weighting=cfg.weighting, progress=report
        )
        idx, w = self.graph.idx, self.graph.w
        if cfg.target_set == "unlabelled":
            self.targets = np.flatnonzero(self.state.original_candidates.sum(axis=1) >= 2)
        else:
            self.targets = np.arange(n)
        # All targets: the graph itself, not a copy.
        self.idx, self.w = (idx, w) if self.targets.size == n else (idx[self.targets], w[self.targets])
        candidates = np.array(self.state.candidates)
        report("score", 0, self.targets.size)
        if cfg.criterion == "decision_change":
            # The session id seeds the tie-breaking keys, as it seeds the "random" baseline.
            self.ranker = DecisionChangeRanker(
                self.idx, self.w, candidates, targets=self.targets, random_state=cfg.session_id
            )
        elif cfg.criterion in AMBIGUITY_CRITERIA:
            self.ranker = IncrementalRanker(self.idx, self.w, candidates, criterion=cfg.criterion)
        else:
            self.static_scores = query_scores(self.idx, self.w, candidates, criterion=cfg.criterion, random_state=cfg.session_id)
        report("score", self.targets.size, self.targets.size)

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
        IndexError
            ``position`` is out of range.
        InvalidInput
            The stored media path leads outside the media root (a store edited by hand, or a
            symbolic link inside the root that now points elsewhere).
        """
        if isinstance(position, (bool, np.bool_)) or not isinstance(position, (int, np.integer)):
            raise TypeError(f"position must be an int, got {type(position).__name__}")
        n = self.state.n_instances
        if not 0 <= position < n:
            raise IndexError(f"position must be in [0, {n}), got {position}")
        content = self._dataset_content()
        if not content.has_content:
            return _NO_CONTENT
        position = int(position)
        media = content.media_paths[position]
        kind = content.media_kinds[position]
        path = self._resolve_media(media) if media is not None else None
        return ItemContent(
            text=content.texts[position],
            image_path=path if kind == "image" else None,
            audio_path=path if kind == "audio" else None,
            link=content.links[position],
        )

    def _dataset_content(self) -> DatasetContent:
        if self._content is None:
            with self.Session() as s:
                self._content = dataset_content(s, self.config.dataset_id)
            if self._content.media_root is not None:
                self._media_root = Path(self._content.media_root).resolve()
        return self._content

    def _resolve_media(self, relative: str) -> Path:
        """``relative`` under the media root, symbolic links followed, checked to stay inside."""
        root = self._media_root
        if root is None:
            raise InvalidInput(f"dataset {self.config.dataset_name!r} has media paths but no media root")
        path = (root / relative).resolve()
        if not path.is_relative_to(root):
            raise InvalidInput(
                f"the stored media path {relative!r} of dataset {self.config.dataset_name!r} leads outside "
                "its media root; the file is not shown"
            )
        return path

    def refresh(self) -> np.ndarray:
        """Re-derive the state from the event log (other tabs or processes may have answered).

        Returns the positions whose candidate sets changed; only their targets are re-scored.
        """
        with self.lock:
            return self._refresh()

    def _refresh(self) -> np.ndarray:
        with self.Session() as s:
            events = session_events(s, self.session_id)
        self._events = events
        derived = derive_state(events, self.state.original_candidates)
        changed = np.flatnonzero((derived.candidates != self.state.candidates).any(axis=1))
        self.state = replace(self.state, **derived_fields(derived))
        if self.ranker is not None:
            for position in changed:
                self.ranker.update(int(position), derived.candidates[position])
        if self._sets is not None and changed.size:
            # A target's NL and APL read only its neighbours' sets: redo the targets that hold
            # a changed item (a few dozen per answer), not all of them.
            rows = self._rows_holding(changed)
            items, local = _local_graph(self.idx[rows])
            necessary, possible = self._sets
            necessary[rows], possible[rows] = label_sets(local, self.w[rows], np.asarray(derived.candidates)[items])
        return changed

    def _rows_holding(self, items: np.ndarray | int) -> np.ndarray:
        """Target rows whose neighbourhood holds one of ``items`` (sorted, distinct), from the
        ranker's reverse index (built once for the baselines): no scan of the graph."""
        items = np.atleast_1d(np.asarray(items, dtype=np.intp))
        if isinstance(self.ranker, DecisionChangeRanker):
            return self.ranker.targets_of(items)
        if isinstance(self.ranker, IncrementalRanker):
            return self.ranker.reverse.rows_holding_any(items)
        if self._holders is None:
            self._holders = ReverseIndex(self.idx, self.state.n_instances)
        return self._holders.rows_holding_any(items)

    @property
    def scores(self) -> np.ndarray:
        """Query score of every instance (float array of shape (n_instances,))."""
        if self.ranker is not None:
            return self.ranker.scores
        if self.static_scores is None:
            raise RuntimeError("a Workbench is built by Workbench.open")
        # Baseline scores are fixed; items settled since the session started drop out of the
        # queue because they are no longer open.
        return self.static_scores

    def queue(self, top: int | None = None) -> np.ndarray:
        """Positions to ask about, best first: open items by score, skipped ones last.

        :func:`engine.query.ranking_order` with the skipped items deferred: the order of the
        ranked export (:meth:`ranked_table`) and of ``winnow session status``.
        """
        return ranking_order(self.scores, self.state.open_items, deferred=np.asarray(self.state.skipped), top=top)

    def label_sets(self) -> tuple[np.ndarray, np.ndarray]:
        """``NL`` and ``APL`` of every target under the current candidate sets.

        Kept up to date by :meth:`refresh` (read them, do not keep them: they change in place).
        """
        if isinstance(self.ranker, IncrementalRanker):  # it keeps them up to date already
            return self.ranker.necessary, self.ranker.approx_possible
        with self.lock:
            if self._sets is None:
                self._sets = label_sets(self.idx, self.w, np.asarray(self.state.candidates))
            return self._sets

    @property
    def n_open(self) -> int:
        """Open targets: their necessary and approximately possible labels differ (NL ≠ APL)."""
        return int(open_targets(*self.label_sets()).sum())

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
        return open_neighbourhoods(self.idx, open_targets(*self.label_sets()), self.state.n_instances)

    def explain(self, position: int) -> QueryExplanation:
        """Why ``position`` is worth asking: the targets it can change, one of them in detail.

        For ``"apl"``/``"pl"`` these are the targets whose NL or APL/PL some answer changes;
        for ``"decision_change"`` the targets whose k-NN decision some answer changes (a
        positive expected change), the one it moves most first.
        """
        if isinstance(self.ranker, DecisionChangeRanker):
            holding = self._rows_holding(position)
            change = np.where(self.idx[holding] == position, self.ranker.terms[holding], 0.0).max(axis=1)
            rows = holding[change > 0]
            rows = rows[np.argsort(-change[change > 0], kind="stable")]
        elif self.ranker is not None:
            # Only the targets holding the item can flag it: O(K · their number), not a scan
            # of the whole graph (10M entries at 1M items).
            holding = self.ranker.reverse.rows_holding(position)
            rows = holding[(self.ranker.flags[holding] & (self.idx[holding] == position)).any(axis=1)]
        else:
            rows = np.array([], dtype=int)
        targets = [int(self.targets[r]) for r in rows]
        example = self._explain_target(int(rows[0]), position) if rows.size else None
        return QueryExplanation(
            position=position,
            item_id=self.state.external_ids[position],
            score=float(self.scores[position]),
            n_targets_changed=len(targets),
            targets=targets,
            example=example,
            neighbours=self.neighbours(position),
            effects=self.answer_effects(position),
        )

    def neighbours(self, position: int) -> list[Neighbour]:
        """The ``k`` nearest neighbours of the item at ``position``, nearest first.

        They are the items whose candidate sets vote on the item's own label. Read from the
        session's graph when the item is a target; otherwise found with one k-NN search.
        """
        names = self.label_names
        row = int(np.searchsorted(self.targets, position))
        if row < self.targets.size and self.targets[row] == position:
            idx_row, w_row = self.idx[row], self.w[row]
        else:
            # The item is not a target (target_set="unlabelled"): its row of the dataset's
            # graph, which covers every item (itself left out), so no search runs here.
            idx_row, w_row = self.graph.idx[position], self.graph.w[position]
        Y = self.state.candidates
        return [
            Neighbour(
                position=int(n),
                item_id=self.state.external_ids[int(n)],
                candidates=tuple(names[m] for m in np.flatnonzero(Y[int(n)])),
                weight=float(weight),
            )
            for n, weight in zip(idx_row, w_row)
        ]

    def answer_effects(self, position: int) -> list[AnswerEffect]:
        """For each candidate label of the item: how many nearby items an answer settles.

        The targets that have the item among their neighbours are the only ones an answer can
        change; their ``NL`` and ``APL`` are recomputed with the item's set replaced by the one
        label (``O(T·K·M)`` for those ``T`` targets, a few dozen on a k-NN graph).
        """
        labels = np.flatnonzero(self.state.candidates[position])
        rows = self._rows_holding(position)
        if rows.size == 0:
            return [AnswerEffect(self.label_names[m], int(m), settled=0, changed=0) for m in labels]
        # Only the sets of these targets' neighbours are read: copy those, not every item's.
        items, idx_rows = _local_graph(self.idx[rows])
        Y = np.array(self.state.candidates[items])
        slot = int(np.searchsorted(items, position))
        w_rows = self.w[rows]
        necessary, possible = label_sets(idx_rows, w_rows, Y)
        was_open = (necessary != possible).any(axis=1)
        effects = []
        for label in labels:
            Y[slot] = False
            Y[slot, label] = True
            after_necessary, after_possible = label_sets(idx_rows, w_rows, Y)
            now_open = (after_necessary != after_possible).any(axis=1)
            changed = ((after_necessary != necessary) | (after_possible != possible)).any(axis=1)
            effects.append(
                AnswerEffect(
                    self.label_names[label],
                    int(label),
                    settled=int((was_open & ~now_open).sum()),
                    changed=int(changed.sum()),
                )
            )
        return effects

    def _explain_target(self, row: int, position: int) -> TargetExplanation:
        names = self.label_names
        candidates = self.state.candidates
        idx_row, w_row = self.idx[row], self.w[row]
        # A target's vote reads only its K neighbours' sets: work on those K rows (neighbour
        # j is local row j), never on a copy of every item's set.
        Y = np.array(candidates[idx_row], dtype=bool)
        local = np.arange(idx_row.size)
        necessary = _necessary_of_target(local, w_row, Y)
        possible = possible_labels(local[None], w_row[None], Y)[0]
        open_labels = np.flatnonzero(possible & ~necessary)
        witness_label, completion = None, []
        if open_labels.size:
            label = int(open_labels[0])
            chosen = witness(local, w_row, Y, label)
            witness_label = names[label]
            completion = [
                (self.state.external_ids[n], names[c], "|".join(names[m] for m in np.flatnonzero(Y[j])))
                for j, (n, c) in enumerate(zip(idx_row, chosen))
            ]
        after = {}
        slots = np.flatnonzero(idx_row == position)
        for label in np.flatnonzero(candidates[position]):
            answered = Y.copy()
            answered[slots] = False
            answered[slots, label] = True
            nl_after = _necessary_of_target(local, w_row, answered)
            after[names[label]] = [names[m] for m in np.flatnonzero(nl_after)]
        return TargetExplanation(
            target=int(self.targets[row]),
            target_id=self.state.external_ids[int(self.targets[row])],
            necessary=[names[m] for m in np.flatnonzero(necessary)],
            possible=[names[m] for m in np.flatnonzero(possible)],
            witness_label=witness_label,
            witness=completion,
            necessary_after=after,
        )

    def rejects(self, *, n_neighbors: int | None = None) -> RejectQueue:
        """DST-PLL on the current candidate sets; open items whose label it will not commit to.

        The classifier is fitted once per workbench, on the dataset's persisted graph (the
        session's own, or for another ``n_neighbors`` the one :func:`~app.service.graphs.
        dataset_graph` loads or builds and stores): no neighbour search of its own. After
        answers only the disambiguations the changed sets touch are recomputed
        (:meth:`DstPllClassifier.update_candidates`). The classifier is updated and read under
        the workbench's lock (tabs share it).
        """
        k = n_neighbors or self.config.k
        with self.lock:
            Y = np.array(self.state.candidates)
            model = self._dst
            if model is None or model.n_neighbors != k:
                model = self._dst = DstPllClassifier(n_neighbors=k, random_state=0).fit(
                    self.state.X, Y, neighbors=self._graph_of(k).idx
                )
            else:
                changed = np.flatnonzero((model.candidates_ != Y).any(axis=1))
                if changed.size:
                    model.update_candidates(changed, Y[changed])
            positions = np.flatnonzero(self.state.open_items)
            if positions.size == 0:
                empty = np.zeros((0, Y.shape[1]))
                return RejectQueue(positions, positions, positions.astype(bool), positions.astype(float), empty, empty)
            margin = model.disambiguate_margin_[positions]
            order = np.argsort(margin, kind="stable")
            return RejectQueue(
                positions=positions[order],
                labels=model.disambiguate_[positions][order],
                accepted=model.disambiguate_accepted_[positions][order],
                margin=margin[order],
                belief=model.disambiguate_belief_[positions][order],
                plausibility=model.disambiguate_plausibility_[positions][order],
            )

    def dst_view(self, positions: np.ndarray | list[int]) -> RejectQueue:
        """DST-PLL's label, acceptance, margin, belief and plausibility for given items (in the
        order given), e.g. items in conflict, which :meth:`rejects` leaves out as not open.
        Read under the workbench's lock, like :meth:`rejects` (tabs share the classifier)."""
        with self.lock:
            self.rejects()  # fits the classifier or brings it up to date with the current sets
            model = self._dst
            if model is None:  # pragma: no cover - rejects() always sets it
                raise RuntimeError("DST-PLL was not fitted")
            rows = np.asarray(positions, dtype=int)
            return RejectQueue(
                positions=rows,
                labels=model.disambiguate_[rows],
                accepted=model.disambiguate_accepted_[rows],
                margin=model.disambiguate_margin_[rows],
                belief=model.disambiguate_belief_[rows],
                plausibility=model.disambiguate_plausibility_[rows],
            )

    def _graph_of(self, k: int) -> GraphResult:
        """The dataset's graph with ``k`` neighbours: the session's own when ``k`` is its ``k``
        (any weighting: only the neighbours are used)."""
        if k == self.config.k:
            return self.graph
        return dataset_graph(self.Session, dataset_id=self.config.dataset_id, X=self.state.X, k=k, weighting="uniform")

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
            the Query page in team mode), no longer open (``"rejects"``), no longer in
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
                if kind == "undo":
                    self._check_undo(annotator, undoes)
                else:
                    self._check_displayed(annotator, kind, position, displayed)
                checked_events = self.state.n_events

            def work(s: Session) -> int:
                if checked_events is not None and count_events(s, self.session_id) != checked_events:
                    raise StaleAnswer("Another answer arrived at the same moment; nothing was recorded. "
                                      "Look at the item again and answer.")
                event = record_event(
                    s, session_id=self.session_id, annotator=annotator, kind=kind, instance_position=position,
                    label=label,
                )
                s.flush()
                return int(event.id)

            event_id = write_transaction(self.Session, work)
            self._refresh()
        return event_id

    def set_hotkeys(self, mapping: dict[str, str | None] | None) -> dict[str, str]:
        """Store the session's keyboard keys (``None``: back to the default keys).

        Validated by :func:`app.store.set_session_hotkeys` (one letter or digit per label, no
        key twice, none of the action keys); returns the mapping now in force. Other tabs
        that have the session open see the new keys when they open it again.
        """
        stored = write_transaction(self.Session, lambda s: set_session_hotkeys(s, self.session_id, mapping))
        config = replace(self.config, hotkeys=None if mapping is None else dict(stored))
        self.state = replace(self.state, config=config)
        return stored

    def latest_event(self, annotator: str) -> int | None:
        """The id of ``annotator``'s latest event that an undo would cancel, or ``None``."""
        events = self._current_events()
        undone = {e.undoes_event_id for e in events if e.kind == "undo"}
        mine = [e.id for e in events if e.annotator == annotator and e.kind != "undo" and e.id not in undone]
        return mine[-1] if mine else None

    def has_verdict(self, annotator: str, position: int) -> bool:
        """Whether ``annotator`` has an active verdict (answer, other label, none of these) on
        the item at ``position``."""
        events = self._current_events()
        undone = {e.undoes_event_id for e in events if e.kind == "undo"}
        return any(
            e.position == position and e.annotator == annotator and e.kind in VERDICT_KINDS and e.id not in undone
            for e in events
        )

    def _catch_up(self) -> None:
        """Refresh when another tab or process recorded events since the state was derived
        (one ``COUNT``; the events are read again only then)."""
        with self.Session() as s:
            stored = count_events(s, self.session_id)
        if stored != self.state.n_events:
            self.refresh()

    def _current_events(self) -> list[EventRecord]:
        if self._events is None or len(self._events) != self.state.n_events:
            with self.Session() as s:
                self._events = session_events(s, self.session_id)
        return self._events

    def _check_undo(self, annotator: str, undoes: int | None) -> None:
        if undoes is not None and self.latest_event(annotator) != undoes:
            raise StaleAnswer("Your latest answer is no longer the one the page offered to undo; nothing was undone.")

    def _check_displayed(self, annotator: str, kind: str, position: int | None, displayed: str | None) -> None:
        if displayed is None or position is None:
            raise InvalidInput(f"kind={kind!r} from a page needs the displayed item's position and page")
        check_choice(displayed, "displayed", OFFERS)
        item = self.state.external_ids[position]
        if kind in VERDICT_KINDS and self.has_verdict(annotator, position):
            raise StaleAnswer(f"You already answered item {item!r}; nothing was recorded.")
        if displayed == "query":
            top = self.queue(top=1)
            offered = top.size > 0 and int(top[0]) == position
        elif displayed == "lease":
            # Team mode: the item offered is the one the store reserved for this annotator
            # (with overlap it may already be settled by someone else, and still theirs to answer).
            with self.Session() as s:
                offered = annotator in lease_holders(s, self.session_id).get(position, [])
        elif displayed == "rejects":
            offered = bool(self.state.open_items[position])
        else:
            offered = bool(self.state.in_conflict[position])
        if not offered:
            raise StaleAnswer(
                f"Item {item!r} is no longer the one to answer (the page moved on, or someone settled it); "
                "nothing was recorded."
            )

    # ------------------------------------------------------------------ exports

    def params(self) -> dict[str, Any]:
        """The session's scoring parameters, as the ranked export records them."""
        cfg = self.config
        return {"k": cfg.k, "weighting": cfg.weighting, "target_set": cfg.target_set, "session": cfg.name}

    def ranked_table(self) -> pd.DataFrame:
        """The ranked query list of the open items (conflicts and flagged items set aside),
        in the order of :meth:`queue`: skipped items last."""
        return ranked_query_table(
            self.scores,
            np.asarray(self.state.candidates),
            list(self.label_names),
            list(self.state.external_ids),
            self.touched(),
            criterion=self.config.criterion,
            params=self.params(),
            include=self.state.open_items,
            deferred=self.state.skipped,
            content=self._export_content(),
        )

    def _export_content(self) -> dict[str, tuple[str | None, ...]]:
        """The content reference of every item as the exports write it (stored form: media
        paths relative to the media root, never a server path)."""
        content = self._dataset_content()
        return {"text": content.texts, "media_path": content.media_paths, "link": content.links}

    def labelled_table(self) -> pd.DataFrame:
        """Every item with its current set, label, "none of these" flag, content reference, who
        answered and when."""
        s = self.state
        return labelled_dataset_table(
            list(s.external_ids),
            list(s.label_names),
            np.array(s.candidates),
            np.array(s.resolved),
            list(s.answered_by),
            list(s.answered_at),
            true_labels=None if s.true_labels is None else np.array(s.true_labels),
            none_of_these=np.asarray(s.none_of_these),
            content=self._export_content(),
        )


def _local_graph(idx_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The items a few targets' neighbourhoods hold (sorted) and the neighbourhoods as rows of
    that list, so the votes read a copy of those items' sets only."""
    items, local = np.unique(idx_rows, return_inverse=True)
    return items, local.reshape(idx_rows.shape)


def _necessary_of_target(idx_row: np.ndarray, w_row: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """``NL`` of one target (bool array of shape (n_labels,))."""
    necessary, _ = label_sets(idx_row[None], w_row[None], Y)
    return necessary[0]
