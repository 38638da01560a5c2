"""Leases: the next item a team member sees is reserved for them for a while.

:func:`next_item` picks, for one user of a session, the first item of a preferred order (the
workbench's query ranking) that still needs an answer from someone, and reserves it with a
row in ``item_leases`` that expires after ``ttl`` (default :data:`LEASE_TTL`). An item takes at
most *overlap* annotators (:func:`app.store.users.session_overlap`): those who gave it a verdict
plus those holding a lease on it. So with overlap 1 two annotators are never shown the same
item, and with overlap 2 each item is answered twice (items someone already answered come
first, so that pairs get finished).

Atomic on both backends: :func:`next_item` runs in the store's write transaction (one writer
at a time, :func:`app.store.write_transaction`), and ``(session, instance, slot)`` is unique
with ``slot < overlap``, so even a writer outside that lock cannot put a third annotator on an
item of overlap 2: its insert fails and it tries the next place.

Cost: a reservation never reads the event log. It reads the session's leases (one per user at
most), then walks the preferred order a few items at a time and reads the events of those
items only (index ``(session_id, instance_id)``), stopping at the first item it can reserve.
The items that already have a verdict and want another annotator (overlap >= 2) come from
``lease_open_items``, a digest of the events that :func:`next_item` itself brings up to date
with the events written since its last call (``lease_cursors``): the work is proportional to
the new events, not to the log. The digest only orders the walk; whether an item may be
reserved is always decided from that item's own events. (Under the write lock events are
committed in id order, so the cursor misses none; an event written outside the lock could at
worst leave an item out of the "answered first" order, never put too many annotators on it.)
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.store.derive import VERDICT_KINDS, EventRecord, active_events
from app.store.models import (
    Annotator,
    AnswerEvent,
    Instance,
    ItemLease,
    LeaseCursor,
    LeaseOpenItem,
    User,
    utcnow,
)
from app.store.records import get_labelling_session
from app.store.users import PermissionDenied, check_event_permission, session_overlap

__all__ = ["LEASE_TTL", "ItemProgress", "item_progress", "next_item", "release_lease", "lease_holders"]

#: How long an item stays reserved for the user it was shown to.
LEASE_TTL = timedelta(minutes=10)


@dataclass(frozen=True)
class ItemProgress:
    """Who has acted on one item, from the active (not undone) events of a session."""

    #: annotator -> label index of their latest verdict (``None`` for "none of these").
    verdicts: dict[str, int | None]
    #: Annotators with an active ``skip`` of the item.
    skipped_by: frozenset[str]
    #: The item has an active ``resolve``.
    resolved: bool

    @property
    def in_conflict(self) -> bool:
        """Two verdicts differ (a reviewer settles it; nobody else is asked)."""
        return len(set(self.verdicts.values())) > 1 and not self.resolved


def item_progress(events: Sequence[EventRecord]) -> dict[int, ItemProgress]:
    """Who answered, skipped or resolved each item, by position (pure; events oldest first)."""
    verdicts: dict[int, dict[str, int | None]] = {}
    skipped: dict[int, set[str]] = {}
    resolved: set[int] = set()
    for e in active_events(events):
        if e.kind in VERDICT_KINDS:
            verdicts.setdefault(e.position, {})[e.annotator] = None if e.kind == "none_of_these" else e.label
        elif e.kind == "skip":
            skipped.setdefault(e.position, set()).add(e.annotator)
        elif e.kind == "resolve":
            resolved.add(e.position)
    positions = set(verdicts) | set(skipped) | resolved
    return {
        p: ItemProgress(verdicts.get(p, {}), frozenset(skipped.get(p, ())), p in resolved) for p in sorted(positions)
    }


def _user(session: Session, name: str) -> User:
    user = session.scalar(select(User).where(User.name == name))
    if user is None:
        raise PermissionDenied(f"user {name!r} does not exist; leases are for the users of a team store")
    return user


#: How many preferred items :func:`next_item` considers per query, growing while it finds
#: nothing (the first item is nearly always free; a long walk costs few queries).
_FIRST_CHUNK, _LARGEST_CHUNK = 8, 512


def next_item(
    session: Session,
    *,
    session_id: int,
    user: str,
    preferred: Iterable[int],
    ttl: timedelta = LEASE_TTL,
    now: datetime | None = None,
) -> int | None:
    """Reserve the next item for ``user`` and return its position (``None``: nothing left).

    Parameters
    ----------
    session_id : int
    user : str
        An active user assigned to the session (the same check as an answer).
    preferred : iterable of int
        Positions in the order they should be asked (the query ranking), read lazily: only as
        far as the first item that can be reserved. Items that other annotators already
        answered but that need more answers (overlap >= 2) come first.
    ttl : timedelta
        How long the reservation holds; asking again before it expires keeps the same item
        (and extends it) until the user has answered or skipped it.

    Returns
    -------
    int or None
        The reserved position. Run it in :func:`app.store.write_transaction`.
    """
    labelling = get_labelling_session(session, session_id)
    check_event_permission(session, labelling, user, "answer")
    who = _user(session, user)
    now = now or utcnow()
    overlap = session_overlap(session, labelling.id)
    session.execute(delete(ItemLease).where(ItemLease.session_id == labelling.id, ItemLease.expires_at <= now))
    leases = session.execute(
        select(ItemLease.id, ItemLease.instance_id, Instance.position, ItemLease.user_id, ItemLease.slot, User.name)
        .join(Instance, Instance.id == ItemLease.instance_id)
        .join(User, User.id == ItemLease.user_id)
        .where(ItemLease.session_id == labelling.id)
    ).all()

    def done_by_user(item: ItemProgress | None) -> bool:
        return item is not None and (user in item.verdicts or user in item.skipped_by)

    own = next((lease for lease in leases if lease.user_id == who.id), None)
    if own is not None:
        item = _progress_of(session, labelling.id, {int(own.position): int(own.instance_id)}).get(int(own.position))
        if not done_by_user(item) and not _settled(item):
            session.get(ItemLease, own.id).expires_at = now + ttl  # type: ignore[union-attr]
            session.flush()
            return int(own.position)
        session.execute(delete(ItemLease).where(ItemLease.id == own.id))
        leases = [lease for lease in leases if lease.id != own.id]

    held: dict[int, list[tuple[str, int]]] = {}
    for lease in leases:
        held.setdefault(int(lease.position), []).append((lease.name, lease.slot))
    started = _started_positions(session, labelling.id, overlap) if overlap > 1 else iter(())
    for chunk in _chunks(_unique(itertools.chain(started, preferred))):
        instance_ids = _instance_ids(session, labelling.dataset_id, chunk)
        progress = _progress_of(session, labelling.id, instance_ids)
        for position in chunk:
            item = progress.get(position)
            if done_by_user(item) or _settled(item):
                continue
            answered = set(item.verdicts) if item is not None else set()
            if item is not None and len(answered) >= overlap:
                continue
            # Someone who answered may still hold their lease on it: count people, not rows.
            taken = {slot for _, slot in held.get(position, [])}
            if len(answered | {name for name, _ in held.get(position, [])}) >= overlap:
                continue
            slot = min(set(range(overlap)) - taken)
            instance_id = instance_ids.get(position)
            if instance_id is None:
                continue
            try:
                with session.begin_nested():
                    session.add(
                        ItemLease(
                            session_id=labelling.id,
                            instance_id=instance_id,
                            user_id=who.id,
                            slot=slot,
                            expires_at=now + ttl,
                        )
                    )
                    session.flush()
            except IntegrityError:  # another writer took this place first: try the next item
                continue
            return position
    return None


def _settled(item: ItemProgress | None) -> bool:
    """Resolved or in conflict: the item goes to a reviewer, not to more annotators."""
    return item is not None and (item.resolved or item.in_conflict)


def _unique(positions: Iterable[int]) -> Iterator[int]:
    """``positions`` as ints, each once, in their first order."""
    seen: set[int] = set()
    for p in positions:
        p = int(p)
        if p not in seen:
            seen.add(p)
            yield p


def _chunks(positions: Iterator[int]) -> Iterator[list[int]]:
    size = _FIRST_CHUNK
    while chunk := list(itertools.islice(positions, size)):
        yield chunk
        size = min(4 * size, _LARGEST_CHUNK)


def _instance_ids(session: Session, dataset_id: int, positions: Sequence[int]) -> dict[int, int]:
    """Position -> instance id, for the ``positions`` that are in the dataset."""
    rows = session.execute(
        select(Instance.position, Instance.id).where(
            Instance.dataset_id == dataset_id, Instance.position.in_(positions)
        )
    )
    return {int(position): int(instance_id) for position, instance_id in rows}


def _progress_of(session: Session, session_id: int, instance_ids: dict[int, int]) -> dict[int, ItemProgress]:
    """:func:`item_progress` of the items ``{position: instance id}``, from their events only.

    An undo names an event of its own item, so an item's events are enough to tell which of
    them count.
    """
    if not instance_ids:
        return {}
    position_of = {instance_id: position for position, instance_id in instance_ids.items()}
    rows = session.execute(
        select(
            AnswerEvent.id,
            AnswerEvent.instance_id,
            Annotator.name,
            AnswerEvent.kind,
            AnswerEvent.label,
            AnswerEvent.undoes_event_id,
        )
        .join(Annotator, Annotator.id == AnswerEvent.annotator_id)
        .where(AnswerEvent.session_id == session_id, AnswerEvent.instance_id.in_(list(position_of)))
    )
    # Sorted here, not by the query: an ORDER BY id leads SQLite to walk the session's events
    # in id order (index (session_id, id)) instead of looking up these items' events.
    events = sorted(
        (
            EventRecord(event_id, position_of[instance_id], name, kind, label, undoes)
            for event_id, instance_id, name, kind, label, undoes in rows
        ),
        key=lambda e: e.id,
    )
    return item_progress(events)


def _started_positions(session: Session, session_id: int, overlap: int) -> Iterator[int]:
    """Positions of the items with a verdict from fewer than ``overlap`` annotators and not
    settled, in position order (after bringing ``lease_open_items`` up to date)."""
    _catch_up(session, session_id)
    after = -1
    while True:
        positions = session.scalars(
            select(LeaseOpenItem.position)
            .where(
                LeaseOpenItem.session_id == session_id,
                LeaseOpenItem.annotators < overlap,
                LeaseOpenItem.position > after,
            )
            .order_by(LeaseOpenItem.position)
            .limit(_FIRST_CHUNK * 8)
        ).all()
        if not positions:
            return
        yield from positions
        after = positions[-1]


def _catch_up(session: Session, session_id: int) -> None:
    """Bring ``lease_open_items`` up to date with the session's events after ``lease_cursors``:
    each item that an event since then is about is re-derived from its own events."""
    cursor = session.get(LeaseCursor, session_id)
    last = cursor.last_event_id if cursor is not None else 0
    rows = session.execute(
        select(AnswerEvent.id, AnswerEvent.instance_id, Instance.position)
        .join(Instance, Instance.id == AnswerEvent.instance_id)
        .where(AnswerEvent.session_id == session_id, AnswerEvent.id > last)
        .order_by(AnswerEvent.id)
    ).all()
    if not rows:
        return
    touched = {int(instance_id): int(position) for _, instance_id, position in rows}
    items = list(touched.items())
    for start in range(0, len(items), _LARGEST_CHUNK):
        part = dict((position, instance_id) for instance_id, position in items[start : start + _LARGEST_CHUNK])
        progress = _progress_of(session, session_id, part)
        session.execute(
            delete(LeaseOpenItem).where(
                LeaseOpenItem.session_id == session_id, LeaseOpenItem.instance_id.in_(list(part.values()))
            )
        )
        rows_now = [
            {
                "session_id": session_id,
                "instance_id": instance_id,
                "position": position,
                "annotators": len(item.verdicts),
            }
            for position, instance_id in part.items()
            if (item := progress.get(position)) is not None and item.verdicts and not _settled(item)
        ]
        if rows_now:
            session.execute(insert(LeaseOpenItem), rows_now)
    if cursor is None:
        session.add(LeaseCursor(session_id=session_id, last_event_id=int(rows[-1].id)))
    else:
        cursor.last_event_id = int(rows[-1].id)
    session.flush()


def release_lease(session: Session, *, session_id: int, user: str) -> None:
    """Give back ``user``'s reservation in a session (e.g. when they sign out)."""
    labelling = get_labelling_session(session, session_id)
    who = session.scalar(select(User.id).where(User.name == user))
    if who is not None:
        session.execute(delete(ItemLease).where(ItemLease.session_id == labelling.id, ItemLease.user_id == who))


def lease_holders(session: Session, session_id: int, *, now: datetime | None = None) -> dict[int, list[str]]:
    """Position -> names of the users holding an unexpired lease on it."""
    now = now or utcnow()
    rows = session.execute(
        select(Instance.position, User.name)
        .select_from(ItemLease)
        .join(Instance, Instance.id == ItemLease.instance_id)
        .join(User, User.id == ItemLease.user_id)
        .where(ItemLease.session_id == session_id, ItemLease.expires_at > now)
        .order_by(Instance.position, ItemLease.slot)
    )
    holders: dict[int, list[str]] = {}
    for position, name in rows:
        holders.setdefault(int(position), []).append(name)
    return holders
