"""Answer events: validate and append one, read them back, count them.

Events are append-only (the migrations add triggers that refuse updates and deletes); the state
of a session is derived from them (:mod:`app.store.derive`). :func:`record_event` checks who
may write what before anything is written, so the CLI and the UI cannot disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Select, func, insert, select
from sqlalchemy.orm import Session, aliased

from app.store.checks import check_choice, check_int, check_name, describe_row
from app.store.derive import EventRecord
from app.store.errors import InvalidRecord, RecordNotFound, RequestRefused
from app.store.models import (
    EVENT_KINDS,
    LABELLED_KINDS,
    Annotator,
    AnswerEvent,
    Dataset,
    Instance,
    LabellingSession,
    decode_candidate_masks,
    utcnow,
)
from app.store.records import dataset_of, get_labelling_session, get_or_create_annotator
from app.store.users import check_event_permission

__all__ = [
    "IDEMPOTENCY_KEY_MAX",
    "BATCH_EVENT_KINDS",
    "EventRequest",
    "record_event",
    "record_events",
    "session_events",
    "events_after",
    "event_log",
    "count_events",
    "instance_position",
]

#: Longest idempotency key (the column holds 128 characters).
IDEMPOTENCY_KEY_MAX = 128


def record_event(
    session: Session,
    *,
    session_id: int,
    annotator: str,
    kind: str,
    instance_position: int | None = None,
    instance_id: int | None = None,
    label: int | str | None = None,
    idempotency_key: str | None = None,
) -> AnswerEvent:
    """Validate and append one answer event (once per idempotency key).

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
    idempotency_key : str, optional
        Chosen by a client that may retry a request whose reply it lost (at most
        :data:`IDEMPOTENCY_KEY_MAX` characters). The first request with a key records the event;
        a later one with the same key in the same session records nothing and returns the event
        already recorded, provided it asks for the same thing (annotator, kind, instance and
        label; a retried ``undo`` that named no instance matches any instance).

    Returns
    -------
    AnswerEvent
        Flushed (it has its ``id``). The caller commits.

    Raises
    ------
    InvalidRecord, RecordNotFound
        With a message naming the instance row and the valid choices; also when
        ``idempotency_key`` was already used in this session for a different request.
    PermissionDenied
        Team mode (the store has users): ``annotator`` is not an active user, is not
        assigned to the session (answers), or is not a reviewer or admin (``resolve``).
    """
    kind = check_choice(kind, "kind", EVENT_KINDS)
    labelling = get_labelling_session(session, session_id)
    dataset = dataset_of(session, labelling)
    names = list(dataset.label_names)
    instance = _find_instance(session, dataset, kind, instance_position, instance_id)
    if kind in LABELLED_KINDS and label is None:
        raise InvalidRecord(f"kind={kind!r} needs a label")
    if kind not in LABELLED_KINDS and label is not None:
        raise InvalidRecord(f"kind={kind!r} takes no label, got label={label!r}")

    # Look the annotator up, but create it only with the event: a rejected event adds nothing.
    annotator = check_name(annotator, "annotator")
    # Team mode: who may write what is decided here, for the CLI and the app alike.
    check_event_permission(session, labelling, annotator, kind)
    who = session.scalar(select(Annotator).where(Annotator.name == annotator))
    if idempotency_key is not None:
        # Before the checks that depend on the log: a retried undo must find its first reply,
        # not the annotator's next event to undo.
        idempotency_key = check_name(idempotency_key, "idempotency_key", max_length=IDEMPOTENCY_KEY_MAX)
        earlier = session.scalar(
            select(AnswerEvent).where(
                AnswerEvent.session_id == labelling.id, AnswerEvent.idempotency_key == idempotency_key
            )
        )
        if earlier is not None:
            _check_same_request(session, earlier, labelling, names, annotator, kind, instance, label)
            return earlier
    label_index: int | None = None
    undoes: int | None = None
    if kind in LABELLED_KINDS:
        checked = _require(instance)
        label_index = _check_label(
            kind, label, names, checked.position, checked.external_id, checked.candidate_set(len(names))
        )
    elif kind == "undo":
        target = _event_to_undo(session, labelling, annotator, who, instance)
        undoes = target.id
        instance = session.get(Instance, target.instance_id)

    instance = _require(instance)
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
            idempotency_key=idempotency_key,
        )
        session.add(event)
        labelling.updated_at = now
        session.flush()
    return event


#: The kinds :func:`record_events` records: a file of answers settles or skips items; undoing
#: and resolving stay one at a time (:func:`record_event`).
BATCH_EVENT_KINDS: tuple[str, ...] = ("answer", "other_label", "none_of_these", "skip")

#: Item ids looked up per query (below SQLite's smallest limit of bound parameters, 999).
_IDS_PER_QUERY = 900
#: Events inserted per statement by :func:`record_events`.
_EVENTS_PER_INSERT = 10_000


@dataclass(frozen=True)
class EventRequest:
    """One event of a batch (:func:`record_events`): who, what kind, which item (its external
    id) and, for ``answer`` / ``other_label``, which label (name or index)."""

    annotator: str
    kind: str
    external_id: str
    label: int | str | None = None


def record_events(session: Session, *, session_id: int, requests: Sequence[EventRequest]) -> int:
    """Validate every request, then append them all (a file of answers); returns how many.

    The checks are :func:`record_event`'s, request by request (kind, label given or not, the
    label inside the item's original set for ``answer`` and outside it for ``other_label``,
    the annotator's name, who may write in team mode), but what every request shares (the
    session, its dataset, each annotator's permission) is looked up once and the items in a
    few queries, so a 60,000-answer file holds the write lock for seconds rather than minutes.
    Nothing is written unless every request passes.

    Parameters
    ----------
    session_id : int
        The labelling session.
    requests : sequence of EventRequest
        Kinds among :data:`BATCH_EVENT_KINDS`.

    Returns
    -------
    int
        The number of events appended. The caller commits.

    Raises
    ------
    RequestRefused
        The first refused request: its :attr:`~RequestRefused.index` in ``requests`` and the
        reason, worded as :func:`record_event` words it.
    """
    labelling = get_labelling_session(session, session_id)
    dataset = dataset_of(session, labelling)
    names = list(dataset.label_names)
    wanted = sorted({request.external_id for request in requests if "\x00" not in request.external_id})
    # Plain rows, not ORM objects: a file of a million answers must not hold a million instances.
    items: dict[str, tuple[int, int, str]] = {}
    for start in range(0, len(wanted), _IDS_PER_QUERY):
        chunk = wanted[start : start + _IDS_PER_QUERY]
        for instance_id, external_id, position, mask in session.execute(
            select(Instance.id, Instance.external_id, Instance.position, Instance.candidate_mask).where(
                Instance.dataset_id == dataset.id, Instance.external_id.in_(chunk)
            )
        ):
            items[external_id] = (instance_id, position, mask)
    allowed: dict[tuple[str, str], None] = {}
    annotators: dict[str, Annotator | None] = {}
    rows: list[tuple[int, str, str, int | None]] = []
    for index, request in enumerate(requests):
        try:
            kind = check_choice(request.kind, "kind", BATCH_EVENT_KINDS)
            found = items.get(request.external_id)
            if found is None:
                raise RecordNotFound(f"no item with id {request.external_id!r} in this session's dataset")
            instance_id, position, mask = found
            if kind in LABELLED_KINDS and request.label is None:
                raise InvalidRecord(f"kind={kind!r} needs a label")
            if kind not in LABELLED_KINDS and request.label is not None:
                raise InvalidRecord(f"kind={kind!r} takes no label, got label={request.label!r}")
            annotator = check_name(request.annotator, "annotator")
            if (annotator, kind) not in allowed:
                check_event_permission(session, labelling, annotator, kind)
                allowed[(annotator, kind)] = None
            if annotator not in annotators:
                annotators[annotator] = session.scalar(select(Annotator).where(Annotator.name == annotator))
            label_index = None
            if kind in LABELLED_KINDS:
                candidates = decode_candidate_masks([mask], len(names))[0]
                label_index = _check_label(kind, request.label, names, position, request.external_id, candidates)
        except (InvalidRecord, TypeError) as exc:
            raise RequestRefused(str(exc), index=index) from None
        rows.append((instance_id, annotator, kind, label_index))
    now = utcnow()
    with session.begin_nested():
        ids = {
            name: (who if who is not None else get_or_create_annotator(session, name)).id
            for name, who in annotators.items()
        }
        # One transaction, inserted a slice at a time: the statement's parameters stay small.
        for start in range(0, len(rows), _EVENTS_PER_INSERT):
            session.execute(
                insert(AnswerEvent),
                [
                    {
                        "session_id": labelling.id,
                        "instance_id": instance_id,
                        "annotator_id": ids[annotator],
                        "kind": kind,
                        "label": label_index,
                        "created_at": now,
                    }
                    for instance_id, annotator, kind, label_index in rows[start : start + _EVENTS_PER_INSERT]
                ],
            )
        if rows:
            labelling.updated_at = now
        session.flush()
    return len(rows)


def session_events(session: Session, session_id: int) -> list[EventRecord]:
    """Every event of a session, oldest first, as :class:`EventRecord` (for ``derive_state``).

    Cheap compared with :func:`app.store.sessions.load_state` (no instance rows), so a
    long-lived view can re-read the events and re-derive its state after other tabs or
    processes answered.
    """
    return events_after(session, session_id, 0)


def events_after(session: Session, session_id: int, after_id: int, *, position: int | None = None) -> list[EventRecord]:
    """The events of a session whose id is greater than ``after_id``, oldest first.

    What a long-lived view reads to catch up (:class:`app.store.IncrementalDerivation`): a
    range scan of the index on ``(session_id, id)``, so the cost follows the number of new
    events, not the length of the log. With ``position``, only the events about that item
    (the index on ``instance_id``): what an answer's write re-reads to see whether its item
    changed since the page looked.

    Ids are given in insertion order, which is the commit order of writers that hold the
    store's write lock (:func:`app.store.write_transaction`); a caller that must not miss a
    transaction committing a lower id late reads again from a little below the largest id it
    saw and ignores the ids it already has.

    Parameters
    ----------
    session_id : int
        The labelling session.
    after_id : int
        Only events with a larger id (``0``, or any negative number: every event).
    position : int, optional
        Only the events about the item at this position of the session's dataset.

    Returns
    -------
    list of EventRecord

    Raises
    ------
    RecordNotFound
        No session ``session_id``.
    TypeError
        ``after_id`` or ``position`` is not an int.
    """
    after_id = check_int(after_id, "after_id")
    labelling = get_labelling_session(session, session_id)
    columns: tuple[Any, ...] = (
        AnswerEvent.id,
        Instance.position,
        Annotator.name,
        AnswerEvent.kind,
        AnswerEvent.label,
        AnswerEvent.undoes_event_id,
        AnswerEvent.created_at,
    )
    query: Select[Any]
    if position is None:
        query = _events_of(labelling.id, *columns).where(AnswerEvent.id > after_id)
    else:
        instance_id = (
            select(Instance.id)
            .where(Instance.dataset_id == labelling.dataset_id, Instance.position == check_int(position, "position"))
            .scalar_subquery()
        )
        # "+ 0" keeps SQLite's planner off the (session_id, id) index, which would scan the
        # whole session; the instance's own index holds the item's few events.
        query = (
            select(*columns)
            .join(Instance, Instance.id == AnswerEvent.instance_id)
            .join(Annotator, Annotator.id == AnswerEvent.annotator_id)
            .where(
                AnswerEvent.instance_id == instance_id,
                (AnswerEvent.session_id + 0) == labelling.id,
                AnswerEvent.id > after_id,
            )
            .order_by(AnswerEvent.id)
        )
    return [EventRecord(*row) for row in session.execute(query)]


def event_log(session: Session, session_id: int) -> list[dict[str, Any]]:
    """Every event of a session, oldest first, as plain dicts for export.

    Keys: ``event_id``, ``created_at`` (UTC datetime), ``annotator``, ``kind``, ``position``,
    ``external_id``, ``label`` (index or None), ``label_name``, ``undoes_event_id``,
    ``undone_by_event_id`` (the undo that cancelled this event, or None).
    """
    labelling = get_labelling_session(session, session_id)
    names = list(dataset_of(session, labelling).label_names)
    undo = aliased(AnswerEvent)
    rows = session.execute(
        _events_of(
            labelling.id,
            AnswerEvent.id,
            AnswerEvent.created_at,
            Annotator.name,
            AnswerEvent.kind,
            Instance.position,
            Instance.external_id,
            AnswerEvent.label,
            AnswerEvent.undoes_event_id,
            undo.id,
        ).outerjoin(undo, undo.undoes_event_id == AnswerEvent.id)
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
        for event_id, created_at, annotator, kind, position, external_id, label, undoes_event_id, undone_by in rows
    ]


def count_events(session: Session, session_id: int) -> int:
    """How many events a session has (the log is append-only: any new event changes it)."""
    return int(session.scalar(select(func.count(AnswerEvent.id)).where(AnswerEvent.session_id == session_id)) or 0)


def instance_position(session: Session, session_id: int, external_id: str) -> int:
    """The position of the item ``external_id`` in the dataset of session ``session_id``."""
    labelling = get_labelling_session(session, session_id)
    position = (
        session.scalar(
            select(Instance.position).where(
                Instance.dataset_id == labelling.dataset_id, Instance.external_id == external_id
            )
        )
        if "\x00" not in external_id
        else None
    )
    if position is None:
        raise RecordNotFound(f"no item with id {external_id!r} in this session's dataset")
    return int(position)


def _events_of(session_id: int, *columns: Any) -> Select[Any]:
    """``SELECT columns`` over a session's events joined with their instance and annotator,
    oldest first."""
    return (
        select(*columns)
        .join(Instance, Instance.id == AnswerEvent.instance_id)
        .join(Annotator, Annotator.id == AnswerEvent.annotator_id)
        .where(AnswerEvent.session_id == session_id)
        .order_by(AnswerEvent.id)
    )


# --------------------------------------------------------------------------------------------
# Steps of record_event


def _require(instance: Instance | None) -> Instance:
    if instance is None:  # record_event resolves an instance for every kind before it writes
        raise RecordNotFound("the event's instance is not in the store")
    return instance


def _find_instance(
    session: Session, dataset: Dataset, kind: str, instance_position: Any, instance_id: Any
) -> Instance | None:
    """The instance an event is about (``None`` only for an undo that names none)."""
    if instance_position is not None and instance_id is not None:
        raise InvalidRecord("give instance_position or instance_id, not both")
    if instance_position is not None:
        position = check_int(instance_position, "instance_position")
        instance = session.scalar(
            select(Instance).where(Instance.dataset_id == dataset.id, Instance.position == position)
        )
        if instance is None:
            raise RecordNotFound(
                f"instance_position {position} is not in [0, {dataset.n_instances}) of dataset {dataset.name!r}",
                row=position,
            )
        return instance
    if instance_id is not None:
        instance = session.get(Instance, check_int(instance_id, "instance_id"))
        if instance is None or instance.dataset_id != dataset.id:
            raise RecordNotFound(f"instance_id {instance_id} is not an instance of dataset {dataset.name!r}")
        return instance
    if kind != "undo":
        raise InvalidRecord(f"kind={kind!r} needs instance_position or instance_id")
    return None


def _label_index(label: Any, names: Sequence[str]) -> int:
    if isinstance(label, str):
        try:
            return list(names).index(label)
        except ValueError:
            raise InvalidRecord(f"label {label!r} is not in the label vocabulary {list(names)}") from None
    index = check_int(label, "label")
    if not 0 <= index < len(names):
        raise InvalidRecord(f"label {index} is not a label index in [0, {len(names)})")
    return index


def _check_label(
    kind: str, label: Any, names: Sequence[str], position: int, external_id: str, candidates: np.ndarray
) -> int:
    """The label index of an ``answer`` / ``other_label`` / ``resolve`` on the instance at
    ``position`` whose original candidate set is ``candidates`` (bool, one per label)."""
    index = _label_index(label, names)
    where = f"instance at {describe_row(position, None)} (external id {external_id!r})"
    original = set(np.flatnonzero(candidates).tolist())
    if kind == "answer" and index not in original:
        raise InvalidRecord(
            f"{where}: label {names[index]!r} is not in its candidate set "
            f"{{{', '.join(repr(names[j]) for j in sorted(original))}}}; "
            "record kind='other_label' to give a label outside the set",
            row=position,
        )
    if kind == "other_label" and index in original:
        raise InvalidRecord(
            f"{where}: label {names[index]!r} is in its candidate set; record kind='answer' for it",
            row=position,
        )
    return index


def _check_same_request(
    session: Session,
    earlier: AnswerEvent,
    labelling: LabellingSession,
    names: Sequence[str],
    annotator: str,
    kind: str,
    instance: Instance | None,
    label: Any,
) -> None:
    """Raise unless a request repeats the one that recorded ``earlier`` under the same key."""
    earlier_annotator = session.get(Annotator, earlier.annotator_id)
    earlier_instance = _require(session.get(Instance, earlier.instance_id))
    differences = []
    if earlier_annotator is None or earlier_annotator.name != annotator:
        differences.append(f"annotator {earlier_annotator.name if earlier_annotator else None!r}, not {annotator!r}")
    if earlier.kind != kind:
        differences.append(f"kind {earlier.kind!r}, not {kind!r}")
    if instance is not None and instance.id != earlier_instance.id:
        differences.append(f"item {earlier_instance.external_id!r}, not {instance.external_id!r}")
    label_index = _label_index(label, names) if label is not None else None
    if label_index != earlier.label:

        def shown(j: int | None) -> str:
            return repr(names[j]) if j is not None else "no label"

        differences.append(f"label {shown(earlier.label)}, not {shown(label_index)}")
    if differences:
        raise InvalidRecord(
            f"idempotency_key {earlier.idempotency_key!r} was already used in session {labelling.name!r} "
            f"for another request (event {earlier.id}: {'; '.join(differences)}); use a new key for a new request",
            row=earlier_instance.position,
        )


def _event_to_undo(
    session: Session,
    labelling: LabellingSession,
    annotator: str,
    who: Annotator | None,
    instance: Instance | None,
) -> AnswerEvent:
    """The annotator's most recent event of the session (on ``instance``, if given) not yet undone."""
    target = None
    if who is not None:
        undone = aliased(AnswerEvent)
        query = (
            select(AnswerEvent)
            .where(
                AnswerEvent.session_id == labelling.id,
                AnswerEvent.annotator_id == who.id,
                AnswerEvent.kind != "undo",
                ~select(undone.id).where(undone.undoes_event_id == AnswerEvent.id).exists(),
            )
            .order_by(AnswerEvent.id.desc())
            .limit(1)
        )
        if instance is not None:
            query = query.where(AnswerEvent.instance_id == instance.id)
        target = session.scalar(query)
    if target is None:
        scope = f" on item {instance.external_id!r}" if instance is not None else ""
        raise InvalidRecord(
            f"undo: annotator {annotator!r} has no event left to undo in session {labelling.name!r}{scope}",
            row=instance.position if instance is not None else None,
        )
    return target
