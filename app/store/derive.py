"""The pure derivation of labelling state from a session's events (no database, no clock).

Answers are append-only events. The current candidate sets, flags and conflicts of a session
are *derived* from its events by the pure functions :func:`derive_state` (all items) and
:func:`derive_item` (one item, for incremental updates);
:func:`app.store.sessions.load_state` reads a session and its dataset and returns a
:class:`SessionState` made of plain numpy arrays and tuples.

Derivation rules
----------------
* An ``undo`` cancels the event it names; cancelled events count for nothing. Undo events
  themselves cannot be undone. A new undo points at the annotator's most recent event of the
  session that is not yet undone. These two sentences are *the undo rule*, and it is written
  once: :func:`active_events` (what counts) and :func:`event_to_undo` (what a new undo
  cancels). The derivation, the leases (:func:`app.store.leases.item_progress`) and the
  workbench's checks call them; :func:`app.store.events.record_event` finds the event to undo
  with the SQL form of :func:`event_to_undo`, which a test checks against it on random logs.
* Each annotator's *verdict* on an item is their latest ``answer`` / ``other_label`` /
  ``none_of_these``; a later verdict by the same annotator replaces the earlier one.
* The latest ``resolve`` on an item settles everything before it and counts as a verdict for
  its label; only verdicts given after it are compared with it.
* If the verdicts name exactly one label, the current set is that label. If they name two or
  more labels, or a label and "none of these", the item is in **conflict**: its current set is
  the union of the disputed labels until a ``resolve``.
* With no labelled verdict the current set is the original one; ``none_of_these`` flags the
  item (its true label is missing from its set) and keeps the set.
* ``wrong_set``: the current set holds a label outside the original set (an ``other_label``).
* ``resolved``: the item has an active ``resolve`` and no verdict given after it disagrees.
* ``skipped``: the item has a ``skip`` that is not undone.
"""

from __future__ import annotations

import bisect
import functools
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from app.store.models import EVENT_KINDS, LABELLED_KINDS
from engine import check_choice
from engine.exceptions import InvalidInput


class LazyFeatures(Protocol):
    """What reads a feature matrix on first use (:class:`app.store.features.FeatureMatrix`;
    named by its shape here, so that this module imports no other store module)."""

    shape: tuple[int, int]

    def array(self) -> np.ndarray: ...


__all__ = [
    "VERDICT_KINDS",
    "EventRecord",
    "Conflict",
    "ItemState",
    "DerivedState",
    "SessionConfig",
    "SessionState",
    "active_events",
    "event_to_undo",
    "derive_item",
    "derive_state",
    "derived_fields",
    "IncrementalDerivation",
    "readonly",
]

#: Kinds that are an annotator's verdict on an item (the latest one per annotator counts).
VERDICT_KINDS: tuple[str, ...] = ("answer", "other_label", "none_of_these")


@dataclass(frozen=True, slots=True)
class EventRecord:
    """One answer event as the derivation sees it (no database objects)."""

    id: int
    position: int
    annotator: str
    kind: str
    label: int | None = None
    undoes_event_id: int | None = None
    created_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Conflict:
    """Annotators disagree about an item and no later ``resolve`` settled it."""

    position: int
    #: The disputed label indices, sorted; the item's current set is exactly these.
    labels: tuple[int, ...]
    #: Everyone whose current verdict takes part (a resolver appears under their own name).
    annotators: tuple[str, ...]
    #: Someone's verdict is "none of these" while someone else named a label.
    none_of_these: bool = False


@dataclass(frozen=True, slots=True, eq=False)
class ItemState:
    """The derived state of one item; see the module docstring for the rules."""

    candidates: np.ndarray  # bool (M,)
    resolved: bool = False
    none_of_these: bool = False
    wrong_set: bool = False
    skipped: bool = False
    conflict: Conflict | None = None
    answered_by: str | None = None
    answered_at: datetime | None = None


@dataclass(frozen=True, slots=True, eq=False)
class DerivedState:
    """What the events of a session say about every item. Arrays are read-only.

    Attributes
    ----------
    candidates : array of shape (n_instances, n_labels), bool
        Current candidate sets.
    resolved, none_of_these, wrong_set, skipped : array of shape (n_instances,), bool
    answered : array of shape (n_instances,), bool
        The item has an active verdict or resolve (``answered_by`` names someone).
    conflicts : tuple of Conflict, sorted by position
    answered_by : tuple of (str or None), length n_instances
        Who gave the item's latest active verdict or resolve.
    answered_at : tuple of (datetime or None), length n_instances
    n_events : int
        Every event, undos and undone ones included.
    """

    candidates: np.ndarray
    resolved: np.ndarray
    none_of_these: np.ndarray
    wrong_set: np.ndarray
    skipped: np.ndarray
    answered: np.ndarray
    conflicts: tuple[Conflict, ...]
    answered_by: tuple[str | None, ...]
    answered_at: tuple[datetime | None, ...]
    n_events: int


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """A labelling session's identity and query configuration."""

    session_id: int
    name: str
    dataset_id: int
    dataset_name: str
    k: int
    weighting: str
    criterion: str
    target_set: str
    created_at: datetime
    updated_at: datetime
    #: Label name -> keyboard key as the session stored it; ``None``: the default keys
    #: (:func:`app.store.hotkeys.default_hotkeys`).
    hotkeys: dict[str, str] | None = None


#: :meth:`SessionState.changed_since` follows at most this many :meth:`SessionState.with_derived` steps.
CHANGED_STEPS = 32
_CHANGED_FROM = "changed_from"


# Not slots: the masks below are cached per state (a new event log gives a new state); at 1M
# items each is a pass over the candidate sets that a page run asked for several times.
@dataclass(frozen=True, eq=False)
class SessionState:
    """A labelling session as pure data, for the engine, the CLI and the UI.

    Every array is read-only (``.copy()`` it to modify). Row ``i`` of every array is the
    instance at position ``i`` of the dataset.

    Attributes
    ----------
    config : SessionConfig
    label_names : tuple of str, length n_labels
    feature_names : tuple of str or None
    layout : str or None
        E.g. ``"image:8x8"``.
    external_ids : tuple of str, length n_instances
    instance_ids : array of shape (n_instances,), int64
        Database ids, for :func:`app.store.events.record_event` (``instance_id=``).
    features : array of shape (n_instances, n_features), float64, or FeatureMatrix
        Read through :attr:`X`: a state loaded with the dataset's item columns reads its
        features only when they are used (:class:`app.store.features.FeatureMatrix`).
    true_labels : array of shape (n_instances,), int64, or None
        ``-1`` where unknown; ``None`` when no instance has one.
    original_candidates : array of shape (n_instances, n_labels), bool
    derived : DerivedState
        What the events say (:func:`derive_state`); its fields ``candidates``, ``resolved``,
        ``none_of_these``, ``wrong_set``, ``skipped``, ``conflicts``, ``answered_by``,
        ``answered_at`` and ``n_events`` are read through as attributes of the state itself
        (``state.candidates``), never copied. A new event log gives a new state with
        ``dataclasses.replace(state, derived=derive_state(events, state.original_candidates))``.
    """

    config: SessionConfig
    label_names: tuple[str, ...]
    feature_names: tuple[str, ...] | None
    layout: str | None
    external_ids: tuple[str, ...]
    instance_ids: np.ndarray
    #: The feature matrix, or what reads it when :attr:`X` is first used.
    features: np.ndarray | LazyFeatures
    true_labels: np.ndarray | None
    original_candidates: np.ndarray
    derived: DerivedState
    #: The token of the item columns the state was read from, or that were stored from it
    #: (:mod:`app.store.item_columns`); ``None`` when there are none.
    item_columns_token: str | None = None

    @property
    def candidates(self) -> np.ndarray:
        """Current sets derived from the events that are not undone (see :class:`DerivedState`)."""
        return self.derived.candidates

    @property
    def resolved(self) -> np.ndarray:
        return self.derived.resolved

    @property
    def none_of_these(self) -> np.ndarray:
        return self.derived.none_of_these

    @property
    def wrong_set(self) -> np.ndarray:
        return self.derived.wrong_set

    @property
    def skipped(self) -> np.ndarray:
        return self.derived.skipped

    @property
    def conflicts(self) -> tuple[Conflict, ...]:
        return self.derived.conflicts

    @property
    def answered_by(self) -> tuple[str | None, ...]:
        return self.derived.answered_by

    @property
    def answered_at(self) -> tuple[datetime | None, ...]:
        return self.derived.answered_at

    @property
    def n_events(self) -> int:
        return self.derived.n_events

    @property
    def X(self) -> np.ndarray:
        """The feature matrix (array of shape (n_instances, n_features), float64, read-only);
        read from the store on first use when the state was loaded without it."""
        features = self.features
        return features if isinstance(features, np.ndarray) else features.array()

    @property
    def n_instances(self) -> int:
        return int(self.instance_ids.shape[0])

    @property
    def n_labels(self) -> int:
        return len(self.label_names)

    @functools.cached_property
    def in_conflict(self) -> np.ndarray:
        """Bool mask of shape (n_instances,): the item has an unresolved conflict (read-only)."""
        mask = np.zeros(self.n_instances, dtype=bool)
        mask[[c.position for c in self.conflicts]] = True
        return readonly(mask)

    @property
    def answered(self) -> np.ndarray:
        """Bool mask of shape (n_instances,): the item has an active verdict or resolve
        (``answered_by`` names someone)."""
        return self.derived.answered

    @functools.cached_property
    def set_sizes(self) -> np.ndarray:
        """Int array of shape (n_instances,): the size of every current candidate set (read-only)."""
        return readonly(self.candidates.sum(axis=1))

    @functools.cached_property
    def original_sizes(self) -> np.ndarray:
        """Int array of shape (n_instances,): the size of every original candidate set (read-only)."""
        return readonly(self.original_candidates.sum(axis=1))

    @property
    def labelled(self) -> np.ndarray:
        """Bool mask of shape (n_instances,): the current set is a single label."""
        return self.set_sizes == 1

    def with_derived(self, derived: DerivedState, changed: np.ndarray) -> SessionState:
        """This state with what newer events say (``derived``), whose candidate sets differ
        from this state's only at the positions ``changed`` (int array).

        The same as ``dataclasses.replace(self, derived=derived)``, but the set sizes are
        carried over (the original ones as they are, the current ones patched at
        ``changed``) instead of summed again over every item by the new state: a pass over
        all candidate sets per answer at 1M items.
        """
        state = replace(self, derived=derived)
        # cached_property keeps its value in the instance's __dict__: seeding it is what it
        # would compute. Only values this state already computed are carried.
        kept = self.__dict__
        if "original_sizes" in kept:
            state.__dict__["original_sizes"] = kept["original_sizes"]
        changed = np.asarray(changed, dtype=np.intp)
        if "set_sizes" in kept:
            sizes = kept["set_sizes"].copy()
            sizes[changed] = derived.candidates[changed].sum(axis=1)
            state.__dict__["set_sizes"] = readonly(sizes)
        # A weak link: a chain of states must not keep every earlier one's arrays alive.
        state.__dict__[_CHANGED_FROM] = (weakref.ref(self), readonly(np.unique(changed)))
        return state

    def changed_since(self, earlier: SessionState) -> np.ndarray | None:
        """Positions whose candidate set differs between ``earlier`` and this state (sorted int
        array), when this state was made from ``earlier`` by a few :meth:`with_derived` steps
        (:data:`CHANGED_STEPS` at most) that are still in memory; otherwise ``None`` (compare
        the sets instead). Positions may be listed whose set changed and changed back."""
        state: SessionState = self
        parts: list[np.ndarray] = []
        for _ in range(CHANGED_STEPS):
            if state is earlier:
                return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.intp)
            link = state.__dict__.get(_CHANGED_FROM)
            if link is None:
                return None
            before = link[0]()
            if before is None:
                return None
            parts.append(link[1])
            state = before
        return None

    @functools.cached_property
    def open_items(self) -> np.ndarray:
        """Bool mask: still partial (two or more candidates) and not set aside (no conflict, no
        none-of-these flag).

        These are the items a query strategy may still ask about; conflicts go to a
        ``resolve`` instead.
        """
        return readonly((self.set_sizes > 1) & ~self.none_of_these & ~self.in_conflict)


def active_events(events: Iterable[EventRecord]) -> list[EventRecord]:
    """The events that count, in the order given: neither an undo nor cancelled by one.

    The one home of the undo rule's first half (an ``undo`` cancels the event it names, and
    only that event; undos count for nothing themselves).

    Examples
    --------
    >>> log = [EventRecord(1, 0, "ann", "answer", 0), EventRecord(2, 0, "ann", "undo", undoes_event_id=1),
    ...        EventRecord(3, 0, "ann", "skip")]
    >>> [e.id for e in active_events(log)]
    [3]
    """
    events = list(events)
    undone = {e.undoes_event_id for e in events if e.kind == "undo"}
    return [e for e in events if e.kind != "undo" and e.id not in undone]


def event_to_undo(events: Iterable[EventRecord], annotator: str, position: int | None = None) -> EventRecord | None:
    """The event a new ``undo`` by ``annotator`` cancels, or ``None`` when none is left.

    The one home of the undo rule's second half: the annotator's most recent (highest id)
    event of the session that counts (:func:`active_events`), on the item at ``position``
    when one is given.

    Examples
    --------
    >>> log = [EventRecord(1, 0, "ann", "answer", 0), EventRecord(2, 1, "ann", "skip"),
    ...        EventRecord(3, 1, "ann", "undo", undoes_event_id=2), EventRecord(4, 2, "bob", "skip")]
    >>> event_to_undo(log, "ann").id
    1
    >>> event_to_undo(log, "ann", position=1) is None
    True
    """
    mine = [
        e for e in active_events(events) if e.annotator == annotator and (position is None or e.position == position)
    ]
    return max(mine, key=lambda e: e.id) if mine else None


def readonly(array: np.ndarray) -> np.ndarray:
    """``array`` itself, made read-only (derived state is never edited in place)."""
    array.setflags(write=False)
    return array


def derive_item(events: Iterable[EventRecord], original_candidates: np.ndarray) -> ItemState:
    """Derive one item's state from all of its events (undos included).

    Parameters
    ----------
    events : iterable of EventRecord
        Every event of one item in one session, in any order (they are sorted by ``id``). An
        undo must name an earlier, non-undo event of the same list.
    original_candidates : array of shape (n_labels,), bool
        The item's original candidate set.

    Returns
    -------
    ItemState
    """
    original = np.asarray(original_candidates, dtype=bool)
    ordered = sorted(events, key=lambda e: e.id)
    by_id = {e.id: e for e in ordered}
    undone: set[int] = set()
    for e in ordered:
        check_choice(e.kind, f"event {e.id}: kind", EVENT_KINDS)
        if e.kind == "undo":
            target = by_id.get(e.undoes_event_id)  # type: ignore[arg-type]
            if target is None or target.id >= e.id or target.kind == "undo":
                raise InvalidInput(
                    f"event {e.id}: undoes_event_id {e.undoes_event_id!r} is not an earlier "
                    "non-undo event of the same item"
                )
            if target.id in undone:
                raise InvalidInput(f"event {e.id}: event {target.id} is already undone")
            undone.add(target.id)
        elif e.kind in LABELLED_KINDS and (e.label is None or not 0 <= e.label < original.size):
            raise InvalidInput(f"event {e.id}: label {e.label!r} is not a label index in [0, {original.size})")

    active = active_events(ordered)
    skipped = any(e.kind == "skip" for e in active)
    resolves = [e for e in active if e.kind == "resolve"]
    last_resolve = resolves[-1] if resolves else None
    after = last_resolve.id if last_resolve is not None else -1

    verdicts: dict[str, EventRecord] = {}
    for e in active:
        if e.kind in VERDICT_KINDS and e.id > after:
            verdicts[e.annotator] = e  # a later verdict of the same annotator replaces it
    labelled = [e for e in verdicts.values() if e.kind != "none_of_these"]
    if last_resolve is not None:
        labelled.append(last_resolve)
    refusers = [e for e in verdicts.values() if e.kind == "none_of_these"]

    labels = sorted({int(e.label) for e in labelled})  # type: ignore[arg-type]
    if labels:
        candidates = np.zeros(original.size, dtype=bool)
        candidates[labels] = True
    else:
        candidates = original.copy()

    conflict = None
    if len(labels) >= 2 or (labels and refusers):
        conflict = Conflict(
            position=ordered[0].position,
            labels=tuple(labels),
            annotators=tuple(sorted({e.annotator for e in [*labelled, *refusers]})),
            none_of_these=bool(refusers),
        )
    deciding = [*verdicts.values(), *([last_resolve] if last_resolve is not None else [])]
    latest = max(deciding, key=lambda e: e.id) if deciding else None
    return ItemState(
        candidates=candidates,
        resolved=last_resolve is not None and conflict is None,
        none_of_these=bool(refusers),
        wrong_set=bool(labels) and not bool(original[labels].all()),
        skipped=skipped,
        conflict=conflict,
        answered_by=latest.annotator if latest is not None else None,
        answered_at=latest.created_at if latest is not None else None,
    )


def derive_state(events: Iterable[EventRecord], original_candidates: np.ndarray) -> DerivedState:
    """Derive the current state of every item from a session's events.

    Pure: no database, no clock. :func:`app.store.sessions.load_state` calls it; a replay
    can call :func:`derive_item` for the one item an event touched.

    Parameters
    ----------
    events : iterable of EventRecord
        Every event of the session (undos included), in any order.
    original_candidates : array of shape (n_instances, n_labels), bool
        The dataset's original candidate sets; row ``i`` is the instance at position ``i``.

    Returns
    -------
    DerivedState
    """
    original = np.asarray(original_candidates, dtype=bool)
    if original.ndim != 2:
        raise InvalidInput(f"original_candidates must be 2-D (n_instances, n_labels), got shape {original.shape}")
    n = original.shape[0]
    per_item: dict[int, list[EventRecord]] = {}
    n_events = 0
    for e in events:
        n_events += 1
        if not 0 <= e.position < n:
            raise InvalidInput(f"event {e.id}: position {e.position} is not in [0, {n})")
        per_item.setdefault(e.position, []).append(e)
    # An undo must sit with the event it cancels: derive_item checks that per item.

    candidates = original.copy()
    resolved = np.zeros(n, dtype=bool)
    none_of_these = np.zeros(n, dtype=bool)
    wrong_set = np.zeros(n, dtype=bool)
    skipped = np.zeros(n, dtype=bool)
    answered = np.zeros(n, dtype=bool)
    answered_by: list[str | None] = [None] * n
    answered_at: list[datetime | None] = [None] * n
    conflicts: list[Conflict] = []
    for position in sorted(per_item):
        item = derive_item(per_item[position], original[position])
        candidates[position] = item.candidates
        resolved[position] = item.resolved
        none_of_these[position] = item.none_of_these
        wrong_set[position] = item.wrong_set
        skipped[position] = item.skipped
        answered[position] = item.answered_by is not None
        answered_by[position] = item.answered_by
        answered_at[position] = item.answered_at
        if item.conflict is not None:
            conflicts.append(item.conflict)
    return DerivedState(
        candidates=readonly(candidates),
        resolved=readonly(resolved),
        none_of_these=readonly(none_of_these),
        wrong_set=readonly(wrong_set),
        skipped=readonly(skipped),
        answered=readonly(answered),
        conflicts=tuple(conflicts),
        answered_by=tuple(answered_by),
        answered_at=tuple(answered_at),
        n_events=n_events,
    )


def derived_fields(derived: DerivedState) -> dict[str, Any]:
    """The fields of ``derived`` by name (a :class:`SessionState` holds the object itself:
    ``dataclasses.replace(state, derived=derived)``)."""
    return {f.name: getattr(derived, f.name) for f in fields(DerivedState)}


class IncrementalDerivation:
    """The state derived from a session's events, patched as new events arrive.

    :meth:`add` takes events in any order and any number of times (each id counts once), and
    re-derives only the items they are about: after any sequence of :meth:`add` calls,
    :attr:`derived` equals :func:`derive_state` of every event added so far. That holds
    because every rule of the derivation is per item (an ``undo`` is stored with the item of
    the event it cancels, :func:`app.store.events.record_event`), so re-running
    :func:`derive_item` on the whole (short) history of each touched item is exact. A test
    checks the equality on random logs delivered in random chunks, out of id order and with
    repeats.

    It also keeps, per annotator, the event a new ``undo`` would cancel (:meth:`latest_event`,
    equal to :func:`event_to_undo` on the whole log) and, per item, its events
    (:meth:`item_events`), so the checks of an answer read a few events, not the log.

    Not thread-safe for writers: one thread at a time calls :meth:`add`. Readers of
    :attr:`derived`, :meth:`item_events` and :meth:`latest_event` get objects that are never
    changed afterwards (each :meth:`add` publishes new ones), so they may run alongside.

    Parameters
    ----------
    original_candidates : array of shape (n_instances, n_labels), bool
        The dataset's original candidate sets.

    Notes
    -----
    An :meth:`add` of ``e`` events about ``p`` items costs ``O(e log e + Σ item histories)``
    plus one copy of the state's arrays (``O(n_instances · n_labels)`` bytes, a memory copy),
    whatever the length of the log.
    """

    def __init__(self, original_candidates: np.ndarray) -> None:
        original = np.asarray(original_candidates, dtype=bool)
        self._original = original
        self._derived = derive_state([], original)
        self._by_id: dict[int, EventRecord] = {}
        self._items: dict[int, tuple[EventRecord, ...]] = {}
        #: Ids of each annotator's non-undo events, sorted; with ``_undone``, the undo rule.
        self._mine: dict[str, list[int]] = {}
        self._undone: set[int] = set()
        self._latest: dict[str, EventRecord] = {}
        self._conflicts: dict[int, Conflict] = {}
        self._max_id = 0

    @property
    def derived(self) -> DerivedState:
        """:func:`derive_state` of every event added so far (read-only arrays)."""
        return self._derived

    @property
    def max_id(self) -> int:
        """The largest event id added so far (0 before any)."""
        return self._max_id

    @property
    def n_events(self) -> int:
        """How many distinct events were added."""
        return len(self._by_id)

    def events(self) -> list[EventRecord]:
        """Every event added so far, oldest (lowest id) first."""
        return sorted(self._by_id.values(), key=lambda e: e.id)

    def item_events(self, position: int) -> tuple[EventRecord, ...]:
        """Every event about the item at ``position`` added so far, oldest (lowest id) first."""
        return self._items.get(int(position), ())

    def latest_event(self, annotator: str) -> EventRecord | None:
        """:func:`event_to_undo` ``(events, annotator)`` over every event added so far."""
        return self._latest.get(annotator)

    def candidates_after(self, n_events: int) -> tuple[int, np.ndarray]:
        """The candidate sets as the first ``n_events`` events (lowest ids) left them.

        The same as ``derive_state(events()[:n_events], original).candidates``, but only the
        items of the later events are derived again (from the part of their history up to
        the cut): a few items when the cut is close to the end of the log.

        Parameters
        ----------
        n_events : int
            ``0 <= n_events <=`` :attr:`n_events`.

        Returns
        -------
        last_id : int
            The id of the last event counted (0 when ``n_events`` is 0).
        candidates : bool array of shape (n_instances, n_labels), read-only

        Raises
        ------
        ValueError
            ``n_events`` is negative or more than the events added so far.
        """
        ids = sorted(self._by_id)
        if not 0 <= n_events <= len(ids):
            raise ValueError(f"n_events must be in [0, {len(ids)}], got {n_events}")
        last_id = ids[n_events - 1] if n_events else 0
        later = {self._by_id[i].position for i in ids[n_events:]}
        current = self._derived.candidates
        if not later:
            return last_id, current
        candidates = np.array(current)
        for position in sorted(later):
            before = [e for e in self._items.get(position, ()) if e.id <= last_id]
            candidates[position] = derive_item(before, self._original[position]).candidates
        return last_id, readonly(candidates)

    def add(self, events: Iterable[EventRecord]) -> np.ndarray:
        """Take in new events (those already added are ignored) and re-derive their items.

        Parameters
        ----------
        events : iterable of EventRecord
            Any events of the session, in any order. Ids already added are skipped, so a
            caller may read an overlapping window of the log again.

        Returns
        -------
        int array of shape (n_touched,)
            Sorted positions of the items that got a new event (their state may or may not
            have changed).

        Raises
        ------
        InvalidInput
            An event's position is out of range, its kind or label is invalid, or an undo
            does not name an earlier non-undo event of its item (as :func:`derive_state`).
            Nothing is taken in then.
        """
        fresh: dict[int, EventRecord] = {}
        n = self._original.shape[0]
        for e in events:
            if e.id in self._by_id or e.id in fresh:
                continue
            if not 0 <= e.position < n:
                raise InvalidInput(f"event {e.id}: position {e.position} is not in [0, {n})")
            fresh[e.id] = e
        if not fresh:
            return np.zeros(0, dtype=np.intp)
        per_item: dict[int, list[EventRecord]] = {}
        for e in fresh.values():
            per_item.setdefault(e.position, []).append(e)
        # Derive every touched item before changing anything, so a bad event leaves no trace.
        histories = {
            p: tuple(sorted((*self._items.get(p, ()), *new), key=lambda e: e.id)) for p, new in per_item.items()
        }
        states = {p: derive_item(history, self._original[p]) for p, history in histories.items()}

        self._items.update(histories)
        self._by_id.update(fresh)
        self._max_id = max(self._max_id, max(fresh))
        touched_annotators = set()
        for e in fresh.values():
            touched_annotators.add(e.annotator)
            if e.kind == "undo":
                self._undone.add(int(e.undoes_event_id))  # type: ignore[arg-type]
            else:
                bisect.insort(self._mine.setdefault(e.annotator, []), e.id)
        for annotator in touched_annotators:
            mine = self._mine.get(annotator, [])
            latest = next((i for i in reversed(mine) if i not in self._undone), None)
            if latest is None:
                self._latest.pop(annotator, None)
            else:
                self._latest[annotator] = self._by_id[latest]

        old = self._derived
        positions = np.fromiter(sorted(states), dtype=np.intp, count=len(states))
        arrays = {
            name: np.array(getattr(old, name))
            for name in ("candidates", "resolved", "none_of_these", "wrong_set", "skipped", "answered")
        }
        answered_by, answered_at = list(old.answered_by), list(old.answered_at)
        for p in positions.tolist():
            item = states[p]
            arrays["candidates"][p] = item.candidates
            arrays["resolved"][p] = item.resolved
            arrays["none_of_these"][p] = item.none_of_these
            arrays["wrong_set"][p] = item.wrong_set
            arrays["skipped"][p] = item.skipped
            arrays["answered"][p] = item.answered_by is not None
            answered_by[p], answered_at[p] = item.answered_by, item.answered_at
            if item.conflict is None:
                self._conflicts.pop(p, None)
            else:
                self._conflicts[p] = item.conflict
        self._derived = DerivedState(
            **{name: readonly(array) for name, array in arrays.items()},
            conflicts=tuple(self._conflicts[p] for p in sorted(self._conflicts)),
            answered_by=tuple(answered_by),
            answered_at=tuple(answered_at),
            n_events=len(self._by_id),
        )
        return positions
