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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.store.derive import VERDICT_KINDS, EventRecord, active_events
from app.store.events import session_events
from app.store.models import Instance, ItemLease, User, utcnow
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


def next_item(
    session: Session,
    *,
    session_id: int,
    user: str,
    preferred: Sequence[int],
    ttl: timedelta = LEASE_TTL,
    now: datetime | None = None,
) -> int | None:
    """Reserve the next item for ``user`` and return its position (``None``: nothing left).

    Parameters
    ----------
    session_id : int
    user : str
        An active user assigned to the session (the same check as an answer).
    preferred : sequence of int
        Positions in the order they should be asked (the query ranking). Items that other
        annotators already answered but that need more answers (overlap >= 2) come first.
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
    progress = item_progress(session_events(session, labelling.id))
    leases = session.execute(
        select(ItemLease.id, Instance.position, ItemLease.user_id, ItemLease.slot, User.name)
        .join(Instance, Instance.id == ItemLease.instance_id)
        .join(User, User.id == ItemLease.user_id)
        .where(ItemLease.session_id == labelling.id)
    ).all()

    def done_by_user(position: int) -> bool:
        item = progress.get(position)
        return item is not None and (user in item.verdicts or user in item.skipped_by)

    own = next((lease for lease in leases if lease.user_id == who.id), None)
    if own is not None:
        if not done_by_user(own.position) and not _settled(progress.get(own.position)):
            session.get(ItemLease, own.id).expires_at = now + ttl  # type: ignore[union-attr]
            session.flush()
            return int(own.position)
        session.execute(delete(ItemLease).where(ItemLease.id == own.id))
        leases = [lease for lease in leases if lease.id != own.id]

    held: dict[int, list[tuple[str, int]]] = {}
    for lease in leases:
        held.setdefault(int(lease.position), []).append((lease.name, lease.slot))
    started = [p for p, item in progress.items() if 0 < len(item.verdicts) < overlap and not _settled(item)]
    order = list(dict.fromkeys([*started, *map(int, preferred)]))
    for position in order:
        item = progress.get(position)
        if done_by_user(position) or _settled(item):
            continue
        answered = set(item.verdicts) if item is not None else set()
        if item is not None and len(answered) >= overlap:
            continue
        # Someone who answered may still hold their lease on it: count people, not rows.
        taken = {slot for _, slot in held.get(position, [])}
        if len(answered | {name for name, _ in held.get(position, [])}) >= overlap:
            continue
        slot = min(set(range(overlap)) - taken)
        instance_id = session.scalar(
            select(Instance.id).where(Instance.dataset_id == labelling.dataset_id, Instance.position == position)
        )
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
