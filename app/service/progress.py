"""A session's progress: its events replayed one by one, and the candidate-set sizes.

:func:`replay_progress` measures the session after every event: answered and open items,
open targets (``NL ≠ APL``), DST-PLL's rejects, the items an expert labelled or that were
given one label, and, when true labels are known, DST-PLL's accuracy. It is incremental: each
event changes at most one item, so only the targets that hold that item among their neighbours
are re-examined (:class:`engine.neighbors.ReverseIndex`, :func:`engine.winners.label_sets`,
:func:`engine.dst.transductive_decisions`).

:func:`session_progress` (the Progress page) keeps the replay of each session in the process
(:class:`ProgressReplay`) and feeds it only the events written since the last visit, so a visit
after a few new answers costs those answers, not the whole log.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from sqlalchemy.orm import Session, sessionmaker

from app.store import EventRecord, SessionState, authorize_session, derive_item, events_after
from app.store.event_tail import count_events_up_to
from engine.dst_evidence import transductive_decisions
from engine.neighbors import ReverseIndex, knn_graph
from engine.winners import label_sets, open_targets

if TYPE_CHECKING:
    from app.service.workbench import Workbench

__all__ = ["PROGRESS_COLUMNS", "ProgressReplay", "replay_progress", "session_progress", "candidate_set_sizes"]

#: Columns of :func:`replay_progress` (plus ``dst_accuracy`` and ``accepted_accuracy`` when
#: true labels are known).
PROGRESS_COLUMNS: tuple[str, ...] = (
    "step",
    "event_id",
    "time",
    "kind",
    "answered",
    "open",
    "open_targets",
    "rejects",
    "expert_or_given",
)


def replay_progress(
    *,
    X: np.ndarray,
    original: np.ndarray,
    targets: np.ndarray,
    idx: np.ndarray,
    w: np.ndarray,
    k: int,
    events: Sequence[EventRecord],
    true_labels: np.ndarray | None,
    dst_idx: np.ndarray | None = None,
) -> pd.DataFrame:
    """Replay a session's events and measure it after each one.

    Each event changes at most one item; the item is re-derived from its own events
    (:func:`app.store.derive_item`), and only the targets that have it among their
    neighbours are re-examined: their ``NL``/``APL``, and DST-PLL's transductive decision for
    the item and every instance whose neighbourhood holds it. So the replay costs
    O(events · affected targets · K · M) after one full pass. (:class:`ProgressReplay` is the
    same replay, kept and extended with later events.)

    Parameters
    ----------
    X : array of shape (n_instances, n_features)
    original : bool array of shape (n_instances, n_labels)
        Original candidate sets.
    targets : int array of shape (n_targets,)
        The session's targets; ``idx``/``w`` are their neighbourhoods.
    idx, w : arrays of shape (n_targets, k)
    k : int
        Neighbours of DST-PLL (its graph covers every instance).
    events : sequence of EventRecord
        The session's events, oldest first.
    true_labels : int array of shape (n_instances,) or None
        ``-1`` where unknown.
    dst_idx : int array of shape (n_instances, k), optional
        DST-PLL's ``k``-NN neighbours of every instance, when the caller has them (the
        persisted graph); by default ``idx`` when it is that graph, else searched here.

    Returns
    -------
    pandas.DataFrame
        One row before any event (``step`` 0) and one after each event, with the columns
        :data:`PROGRESS_COLUMNS` (``open_targets``: targets whose ``NL ≠ APL``; ``rejects``: open
        items whose DST-PLL label is not accepted; ``expert_or_given``: items left with one
        label and not set aside, the ``expert`` and ``given`` label sources together; the model's
        labels are not replayed, since their calibration reads the audits as they are now) and,
        when true labels are known,
        ``dst_accuracy`` (DST-PLL's label of every instance with a known truth) and
        ``accepted_accuracy`` (the same, over the labels DST-PLL accepts).
    """
    replay = ProgressReplay(
        X=X, original=original, targets=targets, idx=idx, w=w, k=k, true_labels=true_labels, dst_idx=dst_idx
    )
    replay.extend(events)
    return replay.frame()


class ProgressReplay:
    """:func:`replay_progress` as a state: the session after the events fed so far, and one
    row of measures per event. :meth:`extend` feeds the next events, so a page that shows the
    history again after a few new answers replays only those.

    Parameters are those of :func:`replay_progress`, without ``events``. The arrays are kept
    (not copied): the caller must not change them.
    """

    def __init__(
        self,
        *,
        X: np.ndarray,
        original: np.ndarray,
        targets: np.ndarray,
        idx: np.ndarray,
        w: np.ndarray,
        k: int,
        true_labels: np.ndarray | None,
        dst_idx: np.ndarray | None = None,
    ) -> None:
        self._inputs: dict[str, Any] = {
            "original": original,
            "targets": targets,
            "idx": idx,
            "w": w,
            "k": k,
            "true_labels": true_labels,
            "dst_idx": dst_idx,
        }
        if dst_idx is None:
            self._inputs["X"] = X  # only then does the replay read X (to search DST-PLL's graph)
        n = original.shape[0]
        self._idx, self._w, self._original = idx, w, original
        self._Y = np.array(original, dtype=bool)
        self._votes = ReverseIndex(idx, n)
        if dst_idx is None and targets.size == n and np.array_equal(targets, np.arange(n)) and w.shape[1] == k:
            dst_idx = idx
        elif dst_idx is None:
            dst_idx, _ = knn_graph(X, k=k, weights="uniform", exclude_self=True)
        self._dst_idx = dst_idx
        self._dst = ReverseIndex(dst_idx, n)
        self._is_open = open_targets(*label_sets(idx, w, self._Y))
        self._labels, self._accepted, _ = transductive_decisions(self._Y, dst_idx)
        self._answered = np.zeros(n, dtype=bool)
        self._set_aside = np.zeros(n, dtype=bool)  # conflicts and none-of-these
        known = None if true_labels is None else np.asarray(true_labels) >= 0
        self._known = None if known is None or not known.any() else known
        self._true_labels = true_labels
        self._per_item: dict[int, list[EventRecord]] = {}
        columns = list(PROGRESS_COLUMNS)
        if self._known is not None:
            columns += ["dst_accuracy", "accepted_accuracy"]
        self._columns: dict[str, list[object]] = {c: [] for c in columns}
        #: Held by :func:`session_progress` while it brings the replay up to date.
        self.lock = threading.Lock()
        self._last_event_id = 0
        # The measures are counts over all items, kept up to date item by item: an event
        # changes the counts of the items it touches only (a pass over all items per event
        # was most of a long replay's time).
        self._sizes = self._Y.sum(axis=1)
        self._right = (
            np.zeros(n, dtype=bool) if self._known is None else self._known & (self._labels == np.asarray(true_labels))
        )
        self._counts = self._item_counts(np.arange(n))
        self._open_targets = int(self._is_open.sum())
        self._measure(None)

    @property
    def n_events(self) -> int:
        """How many events were fed."""
        return len(self._columns["step"]) - 1

    @property
    def last_event_id(self) -> int:
        """The id of the last event fed (0 before any)."""
        return self._last_event_id

    def same_inputs(self, **inputs: Any) -> bool:
        """Whether this replay was made from these parameters (those of :class:`ProgressReplay`)."""
        if inputs.get("dst_idx") is not None:
            inputs.pop("X", None)
        if inputs.keys() != self._inputs.keys():
            return False
        for name, value in inputs.items():
            mine = self._inputs[name]
            if value is mine:
                continue
            if value is None or mine is None or not np.array_equal(np.asarray(value), np.asarray(mine)):
                return False
        return True

    def extend(self, events: Iterable[EventRecord]) -> None:
        """Feed the next events (oldest first, after those fed already) and measure after each."""
        Y, idx, w, dst_idx = self._Y, self._idx, self._w, self._dst_idx
        for event in events:
            item = event.position
            self._per_item.setdefault(item, []).append(event)
            derived = derive_item(self._per_item[item], self._original[item])
            changed = not np.array_equal(derived.candidates, Y[item])
            # The items whose counts may move: the item, and when its set changed, those
            # whose DST-PLL decision reads it.
            touched = np.union1d(self._dst.rows_holding(item), [item]) if changed else np.array([item])
            self._counts -= self._item_counts(touched)
            self._answered[item] = derived.answered_by is not None
            self._set_aside[item] = derived.none_of_these or derived.conflict is not None
            if changed:
                Y[item] = derived.candidates
                self._sizes[item] = int(derived.candidates.sum())
                rows = self._votes.rows_holding(item)
                if rows.size:
                    # Only the rows of Y these targets read: the engine checks every row it is given.
                    local_idx, local_Y = _local(idx[rows], Y)
                    was = int(self._is_open[rows].sum())
                    self._is_open[rows] = open_targets(*label_sets(local_idx, w[rows], local_Y))
                    self._open_targets += int(self._is_open[rows].sum()) - was
                self._labels[touched], self._accepted[touched] = _decide(Y, dst_idx, touched)
                if self._known is not None:
                    truth = np.asarray(self._true_labels)[touched]
                    self._right[touched] = self._known[touched] & (self._labels[touched] == truth)
            self._counts += self._item_counts(touched)
            self._last_event_id = event.id
            self._measure(event)

    def frame(self, n_events: int | None = None) -> pd.DataFrame:
        """The rows of :func:`replay_progress` up to the first ``n_events`` events (all by default)."""
        stop = None if n_events is None else n_events + 1
        return pd.DataFrame({name: values[:stop] for name, values in self._columns.items()})

    def _item_counts(self, items: np.ndarray) -> np.ndarray:
        """The contribution of ``items`` to the counts: answered, open, rejects, expert or
        given, and (items with a known truth) DST-PLL right, accepted, accepted and right."""
        sizes, set_aside = self._sizes[items], self._set_aside[items]
        open_items = (sizes > 1) & ~set_aside
        accepted = self._accepted[items]
        known = self._known[items] if self._known is not None else np.zeros(items.size, dtype=bool)
        right = self._right[items]
        return np.array(
            [
                self._answered[items].sum(),
                open_items.sum(),
                (open_items & ~accepted).sum(),
                ((sizes == 1) & ~set_aside).sum(),
                right.sum(),
                (known & accepted).sum(),
                (right & accepted).sum(),
            ],
            dtype=np.int64,
        )

    def _measure(self, event: EventRecord | None) -> None:
        answered, n_open, rejects, expert_or_given, right, kept, kept_right = (int(c) for c in self._counts)
        row: dict[str, object] = {
            "step": len(self._columns["step"]),
            "event_id": None if event is None else event.id,
            "time": None if event is None else event.created_at,
            "kind": None if event is None else event.kind,
            "answered": answered,
            "open": n_open,
            "open_targets": self._open_targets,
            "rejects": rejects,
            "expert_or_given": expert_or_given,
        }
        if self._known is not None:
            row["dst_accuracy"] = right / int(self._known.sum())
            row["accepted_accuracy"] = kept_right / kept if kept else np.nan
        for name, value in row.items():
            self._columns[name].append(value)


def _local(idx: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``idx`` renumbered over the rows of ``Y`` it names, and those rows."""
    used, local_idx = np.unique(idx, return_inverse=True)
    return local_idx.reshape(idx.shape), Y[used]


def _decide(Y: np.ndarray, dst_idx: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`engine.dst.transductive_decisions` of ``rows`` (their labels and whether each
    is accepted), given only the rows of ``Y`` they read: the rows and their neighbours."""
    used = np.union1d(rows, dst_idx[rows].ravel())
    local = np.searchsorted(used, rows)
    # Rows of the sub-problem that are only neighbours are not decided; their own
    # neighbours are never read, so any row number in range does.
    local_idx = np.zeros((used.size, dst_idx.shape[1]), dtype=np.intp)
    local_idx[local] = np.searchsorted(used, dst_idx[rows])
    labels, accepted, _ = transductive_decisions(Y[used], local_idx, local)
    return labels, accepted


#: Replays kept per store (its session factory) and session: the Progress page of a session
#: replays only the events that arrived since its last visit. A few sessions per store, the
#: most recently used.
_REPLAYS: weakref.WeakKeyDictionary[sessionmaker[Session], OrderedDict[int, ProgressReplay]] = (
    weakref.WeakKeyDictionary()
)
_REPLAYS_PER_STORE = 4
_REPLAYS_LOCK = threading.Lock()


def session_progress(bench: Workbench, n_events: int | None = None, *, actor: str | None) -> pd.DataFrame:
    """:func:`replay_progress` of a workbench's session over its first ``n_events`` events
    (all by default), read from the store.

    ``actor`` must be allowed the session's ``progress`` (:mod:`app.store.policies.sessions`:
    an annotator only on a session assigned to them); ``None`` is the command line.

    The replay is kept in the process (:class:`ProgressReplay`, per store and session) and
    extended with the events written since the last call; it is made again from the start when
    the workbench's inputs changed (another weighting, ``k`` or target set) or when an event
    appeared among those it had seen (one committed after a later one).
    """
    state = bench.state
    inputs: dict[str, Any] = {
        "X": state.X,
        "original": np.asarray(state.original_candidates),
        "targets": bench.targets,
        "idx": bench.idx,
        "w": bench.w,
        "k": bench.config.k,
        "true_labels": None if state.true_labels is None else np.asarray(state.true_labels),
        # DST-PLL's neighbours of every instance: the session's persisted graph (the
        # weighting changes weights, not neighbours), so no search runs here.
        "dst_idx": bench.graph.idx,
    }
    factory, session_id = bench.session_factory, bench.session_id
    with bench.session_factory() as s:
        authorize_session(s, actor, "progress", session_id)
    with _REPLAYS_LOCK:
        kept = _REPLAYS.setdefault(factory, OrderedDict())
        replay = kept.get(session_id)
        if replay is None or not replay.same_inputs(**inputs):
            replay = kept[session_id] = ProgressReplay(**inputs)
        kept.move_to_end(session_id)
        while len(kept) > _REPLAYS_PER_STORE:
            kept.popitem(last=False)
    with replay.lock:
        with factory() as s:
            if count_events_up_to(s, session_id, replay.last_event_id) == replay.n_events:
                replay.extend(events_after(s, session_id, replay.last_event_id))
                return replay.frame(n_events)
            fresh = ProgressReplay(**inputs)
            fresh.extend(events_after(s, session_id, 0))
    with _REPLAYS_LOCK:
        _REPLAYS.setdefault(factory, OrderedDict())[session_id] = fresh
    return fresh.frame(n_events)


def candidate_set_sizes(state: SessionState) -> pd.DataFrame:
    """How many items have 1, 2, ... labels in their set, originally and now.

    Returns
    -------
    pandas.DataFrame
        Index ``labels in the set`` (1 .. n_labels), columns ``original`` and ``now``.
    """
    m = state.n_labels
    return pd.DataFrame(
        {
            "original": np.bincount(np.asarray(state.original_candidates).sum(axis=1), minlength=m + 1)[1:],
            "now": np.bincount(np.asarray(state.candidates).sum(axis=1), minlength=m + 1)[1:],
        },
        index=pd.Index(range(1, m + 1), name="labels in the set"),
    )
