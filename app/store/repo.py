"""Every read and write of a winnow store, and the pure derivation of labelling state.

Writes take an ORM :class:`~sqlalchemy.orm.Session` and run inside a SAVEPOINT of it: a
write that fails (bad input, a crash half-way through an import) leaves nothing behind, even
if the caller goes on to commit the session. The caller owns the outer transaction; use
``with Session.begin() as s:`` or :func:`app.store.db.write_transaction`.

Answers are append-only events. The current candidate sets, flags and conflicts of a session
are *derived* from its events by the pure functions :func:`derive_state` (all items) and
:func:`derive_item` (one item, for incremental updates); :func:`load_state` reads a session
and its dataset and returns a :class:`SessionState` made of plain numpy arrays and tuples.

Derivation rules
----------------
* An ``undo`` cancels the event it names; cancelled events count for nothing. Undo events
  themselves cannot be undone. :func:`record_event` points a new undo at the annotator's most
  recent event of the session that is not yet undone.
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

import numbers
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, aliased

from app.store.models import (
    CRITERIA,
    EVENT_KINDS,
    LABELLED_KINDS,
    MAX_LABELS,
    TARGET_SETS,
    WEIGHTINGS,
    Annotator,
    AnswerEvent,
    Dataset,
    Instance,
    LabellingSession,
    decode_candidate_masks,
    encode_candidate_masks,
    utcnow,
)
from engine.exceptions import InvalidInput

__all__ = [
    "InvalidRecord",
    "RecordNotFound",
    "EventRecord",
    "Conflict",
    "ItemState",
    "DerivedState",
    "SessionConfig",
    "SessionState",
    "create_dataset",
    "list_datasets",
    "get_dataset_by_name",
    "create_labelling_session",
    "list_sessions",
    "get_session_by_name",
    "get_or_create_annotator",
    "record_event",
    "load_state",
    "event_log",
    "session_events",
    "derive_state",
    "derive_item",
    "derived_fields",
]

#: Kinds that are an annotator's verdict on an item (the latest one per annotator counts).
VERDICT_KINDS: tuple[str, ...] = ("answer", "other_label", "none_of_these")
_NAME_MAX = 200
_LAYOUT_MAX = 100
#: Instances are inserted in chunks of this many rows (one executemany each).
_INSERT_CHUNK = 20_000
_IMAGE_LAYOUT = re.compile(r"^image:(\d+)x(\d+)$")


# --------------------------------------------------------------------------------------------
# Errors


class InvalidRecord(InvalidInput):
    """Bad input to a store write: the message names the parameter and, for rows, the row.

    Attributes
    ----------
    row : int or None
        Position (0-based row) of the offending instance, when there is one.
    """

    def __init__(self, message: str, *, row: int | None = None) -> None:
        super().__init__(message)
        self.row = row


class RecordNotFound(InvalidRecord, LookupError):
    """A dataset, labelling session or instance that the store does not hold."""


# --------------------------------------------------------------------------------------------
# Pure data


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


@dataclass(frozen=True, slots=True, eq=False)
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
        Database ids, for :func:`record_event` (``instance_id=``).
    X : array of shape (n_instances, n_features), float64
    true_labels : array of shape (n_instances,), int64, or None
        ``-1`` where unknown; ``None`` when no instance has one.
    original_candidates : array of shape (n_instances, n_labels), bool
    candidates : array of shape (n_instances, n_labels), bool
        Current sets derived from the events that are not undone.
    resolved, none_of_these, wrong_set, skipped : array of shape (n_instances,), bool
    conflicts : tuple of Conflict
    answered_by : tuple of (str or None)
    answered_at : tuple of (datetime or None)
    n_events : int
    """

    config: SessionConfig
    label_names: tuple[str, ...]
    feature_names: tuple[str, ...] | None
    layout: str | None
    external_ids: tuple[str, ...]
    instance_ids: np.ndarray
    X: np.ndarray
    true_labels: np.ndarray | None
    original_candidates: np.ndarray
    candidates: np.ndarray
    resolved: np.ndarray
    none_of_these: np.ndarray
    wrong_set: np.ndarray
    skipped: np.ndarray
    conflicts: tuple[Conflict, ...]
    answered_by: tuple[str | None, ...]
    answered_at: tuple[datetime | None, ...]
    n_events: int

    @property
    def n_instances(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_labels(self) -> int:
        return len(self.label_names)

    @property
    def in_conflict(self) -> np.ndarray:
        """Bool mask of shape (n_instances,): the item has an unresolved conflict."""
        mask = np.zeros(self.n_instances, dtype=bool)
        mask[[c.position for c in self.conflicts]] = True
        return mask

    @property
    def labelled(self) -> np.ndarray:
        """Bool mask of shape (n_instances,): the current set is a single label."""
        return self.candidates.sum(axis=1) == 1

    @property
    def open_items(self) -> np.ndarray:
        """Bool mask: still ambiguous and not set aside (no conflict, no none-of-these flag).

        These are the items a query strategy may still ask about; conflicts go to a
        ``resolve`` instead.
        """
        return (self.candidates.sum(axis=1) > 1) & ~self.none_of_these & ~self.in_conflict


def _readonly(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


# --------------------------------------------------------------------------------------------
# Derivation (pure)


def derive_item(
    events: Iterable[EventRecord], original_candidates: np.ndarray
) -> ItemState:
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
        if e.kind not in EVENT_KINDS:
            raise InvalidInput(f"event {e.id}: kind {e.kind!r} is not one of {EVENT_KINDS}")
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
            raise InvalidInput(
                f"event {e.id}: label {e.label!r} is not a label index in [0, {original.size})"
            )

    active = [e for e in ordered if e.kind != "undo" and e.id not in undone]
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


def derive_state(
    events: Iterable[EventRecord], original_candidates: np.ndarray
) -> DerivedState:
    """Derive the current state of every item from a session's events.

    Pure: no database, no clock. :func:`load_state` calls it; the UI can call
    :func:`derive_item` for the one item an answer touched.

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
        raise InvalidInput(
            f"original_candidates must be 2-D (n_instances, n_labels), got shape {original.shape}"
        )
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
        answered_by[position] = item.answered_by
        answered_at[position] = item.answered_at
        if item.conflict is not None:
            conflicts.append(item.conflict)
    return DerivedState(
        candidates=_readonly(candidates),
        resolved=_readonly(resolved),
        none_of_these=_readonly(none_of_these),
        wrong_set=_readonly(wrong_set),
        skipped=_readonly(skipped),
        conflicts=tuple(conflicts),
        answered_by=tuple(answered_by),
        answered_at=tuple(answered_at),
        n_events=n_events,
    )


# --------------------------------------------------------------------------------------------
# Validation helpers


def _check_name(value: Any, parameter: str, *, max_length: int = _NAME_MAX) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{parameter} must be a str, got {type(value).__name__}")
    text = value.strip()
    if not text:
        raise InvalidRecord(f"{parameter} is empty")
    if "\x00" in text:  # PostgreSQL text cannot hold it: refuse it on every backend
        raise InvalidRecord(f"{parameter} holds a NUL character: {text[:40]!r}")
    if len(text) > max_length:
        raise InvalidRecord(f"{parameter} {text[:40]!r}... is longer than {max_length} characters")
    return text


def _check_choice(value: Any, parameter: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise InvalidRecord(f"{parameter}={value!r} is not one of {', '.join(map(repr, choices))}")
    return str(value)


def _check_int(value: Any, parameter: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{parameter} must be an int, got {type(value).__name__} {value!r}")
    return int(value)


def _row_name(position: int, external_ids: Sequence[str] | None) -> str:
    if external_ids is not None and 0 <= position < len(external_ids):
        return f"row {position} (external id {external_ids[position]!r})"
    return f"row {position}"


def _label_set(names: Sequence[str], mask: np.ndarray) -> str:
    return "{" + ", ".join(repr(names[j]) for j in np.flatnonzero(mask)) + "}"


# --------------------------------------------------------------------------------------------
# Datasets


def create_dataset(
    session: Session,
    *,
    name: str,
    X: np.ndarray,
    candidates: np.ndarray,
    label_names: Sequence[str],
    external_ids: Sequence[str],
    true_labels: np.ndarray | None = None,
    feature_names: Sequence[str] | None = None,
    layout: str | None = None,
) -> Dataset:
    """Validate a dataset and write it with all its instances, all or nothing.

    Parameters
    ----------
    session : Session
        The caller commits (or uses :func:`app.store.db.write_transaction`). The write runs in
        a SAVEPOINT, so a failure leaves no dataset and no instance behind.
    name : str
        Unique dataset name.
    X : array of shape (n_instances, n_features)
        Finite float features.
    candidates : array of shape (n_instances, n_labels), bool
        Candidate sets; every row needs at least one ``True``. 0/1 integers are accepted.
    label_names : sequence of str, length n_labels
        Distinct label names; label index ``j`` is ``label_names[j]``.
    external_ids : sequence of str, length n_instances
        Distinct, non-empty instance identifiers (file names, row keys...).
    true_labels : array of shape (n_instances,), int, optional
        For simulations only; ``-1`` where unknown. A known true label must be a candidate.
    feature_names : sequence of str, length n_features, optional
    layout : str, optional
        How to draw a feature row, e.g. ``"image:8x8"`` (then ``8 * 8 == n_features``).

    Returns
    -------
    Dataset
        Flushed (it has its ``id``).

    Raises
    ------
    InvalidRecord
        On any bad value; ``.row`` names the offending row when there is one.
    """
    name = _check_name(name, "name")
    X_arr = np.asarray(X)
    if X_arr.ndim != 2:
        raise InvalidRecord(f"X must be 2-D (n_instances, n_features), got shape {X_arr.shape}")
    if not (np.issubdtype(X_arr.dtype, np.number) or X_arr.dtype == bool):
        raise TypeError(f"X must hold numbers, got dtype {X_arr.dtype}")
    X_arr = np.ascontiguousarray(X_arr, dtype="<f8")
    n, d = X_arr.shape
    if n == 0 or d == 0:
        raise InvalidRecord(f"X must have at least one row and one column, got shape {X_arr.shape}")

    if not isinstance(external_ids, Sequence) or isinstance(external_ids, str):
        external_ids = list(external_ids)  # numpy arrays, pandas Index, ...
    ids = [str(e) if isinstance(e, (np.str_, np.integer)) else e for e in external_ids]
    if len(ids) != n:
        raise InvalidRecord(f"external_ids has {len(ids)} entries but X has {n} rows")
    seen: dict[str, int] = {}
    for position, ext in enumerate(ids):
        if not isinstance(ext, str):
            raise TypeError(
                f"external_ids[{position}] must be a str, got {type(ext).__name__} {ext!r}"
            )
        if not ext.strip():
            raise InvalidRecord(f"external_ids: row {position} has an empty external id", row=position)
        if "\x00" in ext:
            raise InvalidRecord(
                f"external_ids: row {position} has an external id holding a NUL character "
                f"({ext[:40]!r})",
                row=position,
            )
        if len(ext) > _NAME_MAX:
            raise InvalidRecord(
                f"external_ids: row {position} has an external id longer than {_NAME_MAX} "
                "characters",
                row=position,
            )
        if ext in seen:
            raise InvalidRecord(
                f"external_ids: row {position} repeats external id {ext!r} of row {seen[ext]}",
                row=position,
            )
        seen[ext] = position

    bad_rows = np.flatnonzero(~np.isfinite(X_arr).all(axis=1))
    if bad_rows.size:
        row = int(bad_rows[0])
        raise InvalidRecord(
            f"X: {_row_name(row, ids)} holds a NaN or infinite value "
            f"({bad_rows.size} such rows)",
            row=row,
        )

    if isinstance(label_names, str) or not isinstance(label_names, Iterable):
        raise TypeError("label_names must be a sequence of str")
    labels = list(label_names)
    if not labels:
        raise InvalidRecord("label_names is empty")
    for j, label in enumerate(labels):
        _check_name(label, f"label_names[{j}]")
    if len(set(labels)) != len(labels):
        dupes = sorted({x for x in labels if labels.count(x) > 1})
        raise InvalidRecord(f"label_names repeats {dupes}")
    m = len(labels)
    if m > MAX_LABELS:
        raise InvalidRecord(f"label_names has {m} labels; at most {MAX_LABELS} are supported")

    Y = np.asarray(candidates)
    if Y.dtype != bool:
        if not np.issubdtype(Y.dtype, np.integer) or not np.isin(Y, (0, 1)).all():
            raise TypeError(f"candidates must be a bool (or 0/1) array, got dtype {Y.dtype}")
        Y = Y.astype(bool)
    if Y.shape != (n, m):
        raise InvalidRecord(
            f"candidates has shape {Y.shape}; expected (n_instances, n_labels) = ({n}, {m})"
        )
    empty = np.flatnonzero(~Y.any(axis=1))
    if empty.size:
        row = int(empty[0])
        raise InvalidRecord(
            f"candidates: {_row_name(row, ids)} has an empty candidate set "
            f"({empty.size} such rows); every instance needs at least one candidate label",
            row=row,
        )

    truth: np.ndarray | None = None
    if true_labels is not None:
        truth = np.asarray(true_labels)
        if truth.shape != (n,):
            raise InvalidRecord(f"true_labels has shape {truth.shape}; expected ({n},)")
        if not np.issubdtype(truth.dtype, np.integer):
            raise TypeError(f"true_labels must be integers (-1 = unknown), got dtype {truth.dtype}")
        truth = truth.astype(np.int64)
        out = np.flatnonzero((truth < -1) | (truth >= m))
        if out.size:
            row = int(out[0])
            raise InvalidRecord(
                f"true_labels: {_row_name(row, ids)} has label {truth[row]}, "
                f"not -1 or an index in [0, {m})",
                row=row,
            )
        known = truth >= 0
        missing = np.flatnonzero(known & ~Y[np.arange(n), np.where(known, truth, 0)])
        if missing.size:
            row = int(missing[0])
            raise InvalidRecord(
                f"true_labels: {_row_name(row, ids)} has true label {labels[truth[row]]!r} "
                f"outside its candidate set {_label_set(labels, Y[row])}",
                row=row,
            )
        if not known.any():
            truth = None

    features_meta: list[str] | None = None
    if feature_names is not None:
        features_meta = list(feature_names)
        if len(features_meta) != d:
            raise InvalidRecord(f"feature_names has {len(features_meta)} names but X has {d} columns")
        for j, fname in enumerate(features_meta):
            _check_name(fname, f"feature_names[{j}]")
        if len(set(features_meta)) != d:
            raise InvalidRecord("feature_names holds duplicates")
    if layout is not None:
        layout = _check_name(layout, "layout", max_length=_LAYOUT_MAX)
        match = _IMAGE_LAYOUT.match(layout)
        if layout.startswith("image:") and (
            match is None or int(match[1]) * int(match[2]) != d
        ):
            raise InvalidRecord(
                f"layout {layout!r} does not fit {d} features; expected 'image:HxW' with H*W = {d}"
            )

    if session.scalar(select(Dataset.id).where(Dataset.name == name)) is not None:
        raise InvalidRecord(f"name: a dataset called {name!r} already exists")

    with session.begin_nested():
        dataset = Dataset(
            name=name,
            label_names=labels,
            n_instances=n,
            n_features=d,
            feature_names=features_meta,
            layout=layout,
        )
        session.add(dataset)
        session.flush()
        masks = encode_candidate_masks(Y)
        features = [X_arr[i].tobytes() for i in range(n)]
        truth_values = (
            [int(t) if t >= 0 else None for t in truth] if truth is not None else [None] * n
        )
        for start in range(0, n, _INSERT_CHUNK):
            stop = min(start + _INSERT_CHUNK, n)
            rows = [
                {
                    "dataset_id": dataset.id,
                    "position": i,
                    "external_id": ids[i],
                    "features": features[i],
                    "candidate_mask": masks[i],
                    "true_label": truth_values[i],
                }
                for i in range(start, stop)
            ]
            _insert_instances(session, rows)
    return dataset


def _insert_instances(session: Session, rows: list[dict[str, Any]]) -> None:
    """One bulk INSERT (a Core executemany: the ORM bulk path is about twice as slow)."""
    session.connection().execute(insert(Instance.__table__), rows)


def list_datasets(session: Session) -> list[Dataset]:
    """Every dataset, oldest first."""
    return list(session.scalars(select(Dataset).order_by(Dataset.id)))


def get_dataset_by_name(session: Session, name: str) -> Dataset:
    """The dataset called ``name``; :class:`RecordNotFound` lists the known ones otherwise."""
    # No stored name holds a NUL (and PostgreSQL cannot even compare with one).
    dataset = (
        session.scalar(select(Dataset).where(Dataset.name == name)) if "\x00" not in name else None
    )
    if dataset is None:
        known = session.scalars(select(Dataset.name).order_by(Dataset.id)).all()
        raise RecordNotFound(f"no dataset called {name!r}; known datasets: {known}")
    return dataset


# --------------------------------------------------------------------------------------------
# Labelling sessions and annotators


def create_labelling_session(
    session: Session,
    *,
    dataset_id: int,
    name: str,
    k: int = 10,
    weighting: str = "uniform",
    criterion: str = "apl",
    target_set: str = "all",
) -> LabellingSession:
    """Create a labelling session on a dataset.

    Parameters
    ----------
    dataset_id : int
    name : str
        Unique session name.
    k : int, default=10
        Neighbours per target (>= 1).
    weighting : {"uniform", "distance"}
    criterion : {"apl", "pl", "participation", "most_partial", "random"}
    target_set : {"all", "unlabelled"}

    Returns
    -------
    LabellingSession
        Flushed (it has its ``id``).
    """
    name = _check_name(name, "name")
    dataset_id = _check_int(dataset_id, "dataset_id")
    k = _check_int(k, "k")
    if k < 1:
        raise InvalidRecord(f"k must be >= 1, got {k}")
    weighting = _check_choice(weighting, "weighting", WEIGHTINGS)
    criterion = _check_choice(criterion, "criterion", CRITERIA)
    target_set = _check_choice(target_set, "target_set", TARGET_SETS)
    if session.get(Dataset, dataset_id) is None:
        raise RecordNotFound(f"dataset_id {dataset_id} does not exist")
    if session.scalar(select(LabellingSession.id).where(LabellingSession.name == name)) is not None:
        raise InvalidRecord(f"name: a labelling session called {name!r} already exists")
    with session.begin_nested():
        now = utcnow()
        labelling = LabellingSession(
            name=name,
            dataset_id=dataset_id,
            k=k,
            weighting=weighting,
            criterion=criterion,
            target_set=target_set,
            created_at=now,
            updated_at=now,
        )
        session.add(labelling)
        session.flush()
    return labelling


def list_sessions(session: Session) -> list[LabellingSession]:
    """Every labelling session, oldest first."""
    return list(session.scalars(select(LabellingSession).order_by(LabellingSession.id)))


def get_session_by_name(session: Session, name: str) -> LabellingSession:
    """The labelling session called ``name``; :class:`RecordNotFound` otherwise."""
    found = (
        session.scalar(select(LabellingSession).where(LabellingSession.name == name))
        if "\x00" not in name
        else None
    )
    if found is None:
        known = session.scalars(select(LabellingSession.name).order_by(LabellingSession.id)).all()
        raise RecordNotFound(f"no labelling session called {name!r}; known sessions: {known}")
    return found


def get_or_create_annotator(session: Session, name: str) -> Annotator:
    """The annotator called ``name``, created (flushed) if new. Safe under concurrent callers."""
    name = _check_name(name, "annotator")
    found = session.scalar(select(Annotator).where(Annotator.name == name))
    if found is not None:
        return found
    try:
        with session.begin_nested():
            annotator = Annotator(name=name)
            session.add(annotator)
            session.flush()
        return annotator
    except IntegrityError:  # another process created it between our SELECT and INSERT
        found = session.scalar(select(Annotator).where(Annotator.name == name))
        if found is None:
            raise
        return found


# --------------------------------------------------------------------------------------------
# Events


def _get_labelling_session(session: Session, session_id: Any) -> LabellingSession:
    session_id = _check_int(session_id, "session_id")
    labelling = session.get(LabellingSession, session_id)
    if labelling is None:
        raise RecordNotFound(f"session_id {session_id} is not a labelling session")
    return labelling


def _label_index(label: Any, names: Sequence[str]) -> int:
    if isinstance(label, str):
        try:
            return list(names).index(label)
        except ValueError:
            raise InvalidRecord(
                f"label {label!r} is not in the label vocabulary {list(names)}"
            ) from None
    index = _check_int(label, "label")
    if not 0 <= index < len(names):
        raise InvalidRecord(f"label {index} is not a label index in [0, {len(names)})")
    return index


def record_event(
    session: Session,
    *,
    session_id: int,
    annotator: str,
    kind: str,
    instance_position: int | None = None,
    instance_id: int | None = None,
    label: int | str | None = None,
) -> AnswerEvent:
    """Validate and append one answer event.

    Parameters
    ----------
    session_id : int
        The labelling session.
    annotator : str
        Annotator name; created on first use.
    kind : {"answer", "none_of_these", "other_label", "skip", "undo", "resolve"}
        * ``answer``: ``label`` must be in the instance's *original* candidate set.
        * ``other_label``: ``label`` must be a vocabulary label *outside* the original set.
        * ``resolve``: an expert settles the item (a conflict) with any vocabulary label.
        * ``none_of_these`` / ``skip``: no label.
        * ``undo``: no label; cancels this annotator's most recent event of this session
          that is not yet undone (restricted to the given instance, if one is given).
    instance_position, instance_id : int, optional
        Exactly one of them, except for ``undo`` where both may be omitted.
    label : int or str, optional
        Label index or label name.

    Returns
    -------
    AnswerEvent
        Flushed (it has its ``id``). The caller commits.

    Raises
    ------
    InvalidRecord, RecordNotFound
        With a message naming the instance row and the valid choices.
    """
    kind = _check_choice(kind, "kind", EVENT_KINDS)
    labelling = _get_labelling_session(session, session_id)
    dataset = session.get(Dataset, labelling.dataset_id)
    assert dataset is not None  # foreign key
    names = list(dataset.label_names)

    if instance_position is not None and instance_id is not None:
        raise InvalidRecord("give instance_position or instance_id, not both")
    instance: Instance | None = None
    if instance_position is not None:
        position = _check_int(instance_position, "instance_position")
        instance = session.scalar(
            select(Instance).where(
                Instance.dataset_id == dataset.id, Instance.position == position
            )
        )
        if instance is None:
            raise RecordNotFound(
                f"instance_position {position} is not in [0, {dataset.n_instances}) "
                f"of dataset {dataset.name!r}",
                row=position,
            )
    elif instance_id is not None:
        instance = session.get(Instance, _check_int(instance_id, "instance_id"))
        if instance is None or instance.dataset_id != dataset.id:
            raise RecordNotFound(
                f"instance_id {instance_id} is not an instance of dataset {dataset.name!r}"
            )
    elif kind != "undo":
        raise InvalidRecord(f"kind={kind!r} needs instance_position or instance_id")

    if kind in LABELLED_KINDS:
        if label is None:
            raise InvalidRecord(f"kind={kind!r} needs a label")
    elif label is not None:
        raise InvalidRecord(f"kind={kind!r} takes no label, got label={label!r}")

    # Look the annotator up, but create it only with the event: a rejected event adds nothing.
    annotator = _check_name(annotator, "annotator")
    who = session.scalar(select(Annotator).where(Annotator.name == annotator))
    label_index: int | None = None
    undoes: int | None = None
    if kind in LABELLED_KINDS:
        assert instance is not None
        label_index = _label_index(label, names)
        where = f"instance at row {instance.position} (external id {instance.external_id!r})"
        original = set(np.flatnonzero(instance.candidate_set(len(names))).tolist())
        if kind == "answer" and label_index not in original:
            raise InvalidRecord(
                f"{where}: label {names[label_index]!r} is not in its candidate set "
                f"{{{', '.join(repr(names[j]) for j in sorted(original))}}}; "
                "record kind='other_label' to give a label outside the set",
                row=instance.position,
            )
        if kind == "other_label" and label_index in original:
            raise InvalidRecord(
                f"{where}: label {names[label_index]!r} is in its candidate set; "
                "record kind='answer' for it",
                row=instance.position,
            )
    elif kind == "undo":
        undone = aliased(AnswerEvent)
        query = (
            select(AnswerEvent)
            .where(
                AnswerEvent.session_id == labelling.id,
                AnswerEvent.annotator_id == (who.id if who is not None else -1),
                AnswerEvent.kind != "undo",
                ~select(undone.id).where(undone.undoes_event_id == AnswerEvent.id).exists(),
            )
            .order_by(AnswerEvent.id.desc())
            .limit(1)
        )
        if instance is not None:
            query = query.where(AnswerEvent.instance_id == instance.id)
        target = session.scalar(query) if who is not None else None
        if target is None:
            scope = f" on instance {instance.position}" if instance is not None else ""
            raise InvalidRecord(
                f"undo: annotator {annotator!r} has no event left to undo in session "
                f"{labelling.name!r}{scope}",
                row=instance.position if instance is not None else None,
            )
        undoes = target.id
        instance = session.get(Instance, target.instance_id)
        assert instance is not None

    assert instance is not None
    with session.begin_nested():
        if who is None:
            who = get_or_create_annotator(session, annotator)
        now = utcnow()
        event = AnswerEvent(
            session_id=labelling.id,
            instance_id=instance.id,
            annotator_id=who.id,
            kind=kind,
            label=label_index,
            undoes_event_id=undoes,
            created_at=now,
        )
        session.add(event)
        labelling.updated_at = now
        session.flush()
    return event


# --------------------------------------------------------------------------------------------
# Reading a session


def _session_config(labelling: LabellingSession, dataset: Dataset) -> SessionConfig:
    return SessionConfig(
        session_id=labelling.id,
        name=labelling.name,
        dataset_id=dataset.id,
        dataset_name=dataset.name,
        k=labelling.k,
        weighting=labelling.weighting,
        criterion=labelling.criterion,
        target_set=labelling.target_set,
        created_at=labelling.created_at,
        updated_at=labelling.updated_at,
    )


def session_events(session: Session, session_id: int) -> list[EventRecord]:
    """Every event of a session, oldest first, as :class:`EventRecord` (for :func:`derive_state`).

    Cheap compared with :func:`load_state` (no instance rows), so a long-lived view can re-read
    the events and re-derive its state after other tabs or processes answered.
    """
    _get_labelling_session(session, session_id)
    return _session_events(session, session_id)


def _session_events(session: Session, session_id: int) -> list[EventRecord]:
    rows = session.execute(
        select(
            AnswerEvent.id,
            Instance.position,
            Annotator.name,
            AnswerEvent.kind,
            AnswerEvent.label,
            AnswerEvent.undoes_event_id,
            AnswerEvent.created_at,
        )
        .join(Instance, Instance.id == AnswerEvent.instance_id)
        .join(Annotator, Annotator.id == AnswerEvent.annotator_id)
        .where(AnswerEvent.session_id == session_id)
        .order_by(AnswerEvent.id)
    )
    return [EventRecord(*row) for row in rows]


def load_state(session: Session, session_id: int) -> SessionState:
    """Read a labelling session, its dataset and its events into a :class:`SessionState`.

    One ordered ``SELECT`` of the instances (features are joined into one buffer and viewed
    as float64, so 100k x 64 loads in well under a second) and one of the events, then
    :func:`derive_state`.
    """
    labelling = _get_labelling_session(session, session_id)
    dataset = session.get(Dataset, labelling.dataset_id)
    assert dataset is not None
    n, d, m = dataset.n_instances, dataset.n_features, len(dataset.label_names)

    rows = (
        session.connection()
        .execute(
            select(
                Instance.id,
                Instance.external_id,
                Instance.features,
                Instance.candidate_mask,
                Instance.true_label,
            )
            .where(Instance.dataset_id == dataset.id)
            .order_by(Instance.position)
        )
        .all()
    )
    if len(rows) != n:  # pragma: no cover - create_dataset writes all rows or none
        raise InvalidRecord(f"dataset {dataset.name!r} holds {len(rows)} instances, expected {n}")
    ids_col, external_col, features_col, masks_col, truth_col = (
        zip(*rows) if rows else ((), (), (), (), ())
    )
    instance_ids = np.fromiter(ids_col, dtype=np.int64, count=n)
    external_ids = tuple(external_col)
    X = np.frombuffer(b"".join(features_col), dtype="<f8").reshape(n, d)
    X = X.astype(np.float64, copy=False)
    original = decode_candidate_masks(masks_col, m)
    true_labels = None
    if any(t is not None for t in truth_col):
        true_labels = np.array([-1 if t is None else t for t in truth_col], dtype=np.int64)

    derived = derive_state(_session_events(session, labelling.id), original)
    return SessionState(
        config=_session_config(labelling, dataset),
        label_names=tuple(dataset.label_names),
        feature_names=tuple(dataset.feature_names) if dataset.feature_names is not None else None,
        layout=dataset.layout,
        external_ids=external_ids,
        instance_ids=_readonly(instance_ids),
        X=_readonly(X) if X.flags.writeable else X,
        true_labels=_readonly(true_labels) if true_labels is not None else None,
        original_candidates=_readonly(original),
        **derived_fields(derived),
    )


def derived_fields(derived: DerivedState) -> dict[str, Any]:
    """The fields of a :class:`SessionState` that come from its events, e.g. for
    ``dataclasses.replace(state, **derived_fields(derive_state(events, ...)))``."""
    return {f.name: getattr(derived, f.name) for f in fields(DerivedState)}


def event_log(session: Session, session_id: int) -> list[dict[str, Any]]:
    """Every event of a session, oldest first, as plain dicts for export.

    Keys: ``event_id``, ``created_at`` (UTC datetime), ``annotator``, ``kind``, ``position``,
    ``external_id``, ``label`` (index or None), ``label_name``, ``undoes_event_id``,
    ``undone_by_event_id`` (the undo that cancelled this event, or None).
    """
    labelling = _get_labelling_session(session, session_id)
    dataset = session.get(Dataset, labelling.dataset_id)
    assert dataset is not None
    names = list(dataset.label_names)
    undo = aliased(AnswerEvent)
    rows = session.execute(
        select(
            AnswerEvent.id,
            AnswerEvent.created_at,
            Annotator.name,
            AnswerEvent.kind,
            Instance.position,
            Instance.external_id,
            AnswerEvent.label,
            AnswerEvent.undoes_event_id,
            undo.id,
        )
        .join(Instance, Instance.id == AnswerEvent.instance_id)
        .join(Annotator, Annotator.id == AnswerEvent.annotator_id)
        .outerjoin(undo, undo.undoes_event_id == AnswerEvent.id)
        .where(AnswerEvent.session_id == labelling.id)
        .order_by(AnswerEvent.id)
    )
    return [
        {
            "event_id": event_id,
            "created_at": created_at,
            "annotator": annotator,
            "kind": kind,
            "position": position,
            "external_id": external_id,
            "label": label,
            "label_name": names[label] if label is not None else None,
            "undoes_event_id": undoes_event_id,
            "undone_by_event_id": undone_by,
        }
        for (
            event_id,
            created_at,
            annotator,
            kind,
            position,
            external_id,
            label,
            undoes_event_id,
            undone_by,
        ) in rows
    ]
