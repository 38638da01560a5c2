"""Answer recording: which answers a page may still give, and the write of one event.

One seam of :class:`app.service.workbench.Workbench`. A key press can arrive after the page
moved on (a double press), or after another tab or annotator settled the item: the checks
here refuse such an answer with :class:`StaleAnswer` before anything is written. What an
undo cancels and which events count is the store's one undo rule
(:func:`app.store.event_to_undo`, :func:`app.store.active_events`).

The checks concern the item on screen only: an answer is refused when *its* item changed
(another event about it, or for an undo another latest event of this annotator) or is no
longer offered to this annotator, never because someone answered another item meanwhile. The
checks read the workbench's state; the write then looks again, inside its transaction, at the
events of that item (:class:`CheckedItem`), so two processes cannot both record a verdict from
the same stale view (writers hold the store's write lock, :func:`app.store.write_transaction`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from app.store import (
    VERDICT_KINDS,
    EventRecord,
    IncrementalDerivation,
    SessionState,
    active_events,
    events_after,
    lease_holders,
    record_event,
)
from engine import check_choice
from engine.exceptions import InvalidInput

__all__ = [
    "OFFERS",
    "StaleAnswer",
    "CheckedItem",
    "has_verdict",
    "check_undo",
    "check_displayed",
    "check_answer",
    "read_lease_holders",
    "event_writer",
]

#: Where an item can be on screen when it is answered (:meth:`Workbench.record`'s ``displayed``).
OFFERS: tuple[str, ...] = ("query", "lease", "rejects", "conflicts")


class StaleAnswer(InvalidInput):
    """An answer about an item that is no longer the one on screen; nothing was written.

    Raised by :meth:`Workbench.record` when a key press arrives after the page moved on (a
    double press), or after another tab or annotator settled the item. The message is meant
    for the annotator as it is.
    """


@dataclass(frozen=True, slots=True)
class CheckedItem:
    """What the checks of an answer saw, for its write to look again inside the transaction.

    Attributes
    ----------
    position : int or None
        The item answered; ``None`` for an undo (its item is the one of the event it cancels).
    event_ids : frozenset of int
        Ids of the events about ``position`` the checks saw: any other one found by the write
        refuses the answer.
    undoes : int or None
        For an undo: the event it must cancel; another latest event of the annotator refuses it.
    lease_holder : str or None
        For an answer about an item a lease offered (team mode): the annotator who must still
        hold that lease when the event is written (it may have expired and gone to another).
    """

    position: int | None
    event_ids: frozenset[int] = frozenset()
    undoes: int | None = None
    lease_holder: str | None = None


def has_verdict(events: Sequence[EventRecord], annotator: str, position: int) -> bool:
    """Whether ``annotator`` has an active verdict (answer, other label, none of these) on the
    item at ``position``."""
    return any(
        e.position == position and e.annotator == annotator and e.kind in VERDICT_KINDS for e in active_events(events)
    )


def check_undo(latest: int | None, undoes: int | None) -> None:
    """Refuse an undo from a page when ``undoes`` is no longer the annotator's latest event
    (``latest``, the id of :func:`app.store.event_to_undo`'s event, or ``None``)."""
    if undoes is not None and latest != undoes:
        raise StaleAnswer("Your latest answer is no longer the one the page offered to undo; nothing was undone.")


def check_displayed(
    item_events: Sequence[EventRecord],
    state: SessionState,
    annotator: str,
    kind: str,
    position: int | None,
    displayed: str | None,
    *,
    query_offers: Callable[[int], bool],
    lease_holders: Callable[[], dict[int, list[str]]],
) -> None:
    """Refuse an answer about an item the page ``displayed`` no longer offers.

    ``item_events`` are the events about ``position`` (at least; others are ignored).
    ``query_offers`` says whether the Query page without leases may still be showing an item
    (:meth:`app.service.workbench.Workbench.record` defines it) and ``lease_holders`` gives
    who holds each reserved item; both are called only when needed.
    """
    if displayed is None or position is None:
        raise InvalidInput(f"kind={kind!r} from a page needs the displayed item's position and page")
    check_choice(displayed, "displayed", OFFERS)
    item = state.external_ids[position]
    if kind in VERDICT_KINDS and has_verdict(item_events, annotator, position):
        raise StaleAnswer(f"You already answered item {item!r}; nothing was recorded.")
    if displayed == "query":
        offered = query_offers(position)
    elif displayed == "lease":
        # Team mode: the item offered is the one the store reserved for this annotator
        # (with overlap it may already be settled by someone else, and still theirs to answer).
        offered = annotator in lease_holders().get(position, [])
    elif displayed == "rejects":
        # The Rejects page lists the open items and those flagged "none of these" (both are
        # undecided: app.service.delivery); conflicts it settles with a resolve instead.
        offered = bool(state.open_items[position]) or bool(
            state.none_of_these[position] and not state.in_conflict[position]
        )
    else:
        offered = bool(state.in_conflict[position])
    if not offered:
        raise StaleAnswer(
            f"Item {item!r} is no longer the one to answer (the page moved on, or someone settled it); "
            "nothing was recorded."
        )


def check_answer(
    log: IncrementalDerivation,
    state: SessionState,
    annotator: str,
    kind: str,
    *,
    position: int | None,
    displayed: str | None,
    undoes: int | None,
    query_offers: Callable[[int], bool],
    lease_holders: Callable[[], dict[int, list[str]]],
) -> CheckedItem:
    """Refuse an event from a page that no longer offers it (:func:`check_undo` for an undo,
    :func:`check_displayed` otherwise), judged on the events seen so far (``log``) and
    ``state``; returns what the checks saw, for the write to look again inside its transaction."""
    if kind == "undo":
        latest = log.latest_event(annotator)
        check_undo(None if latest is None else latest.id, undoes)
        return CheckedItem(None, undoes=undoes)
    item_events = log.item_events(position) if position is not None else ()
    check_displayed(
        item_events,
        state,
        annotator,
        kind,
        position,
        displayed,
        query_offers=query_offers,
        lease_holders=lease_holders,
    )
    return CheckedItem(
        position,
        frozenset(e.id for e in item_events),
        lease_holder=annotator if displayed == "lease" else None,
    )


def read_lease_holders(session_factory: sessionmaker[Session], session_id: int) -> dict[int, list[str]]:
    """Who holds each item reserved in the session now (:func:`app.store.lease_holders`)."""
    with session_factory() as s:
        return lease_holders(s, session_id)


def event_writer(
    session_id: int,
    *,
    annotator: str,
    kind: str,
    position: int | None,
    label: int | str | None,
    checked: CheckedItem | None,
) -> Callable[[Session], int]:
    """The unit of work that appends one event and returns its id, for one transaction
    (:func:`app.store.write_transaction`).

    With ``checked`` (what the checks above saw), it looks again inside its transaction and
    refuses the event with :class:`StaleAnswer` when the item got an event the checks did not
    see, or when an undo would cancel another event than the one the page offered. Events
    about other items do not matter.
    """

    def work(s: Session) -> int:
        if checked is not None and checked.position is not None:
            # One indexed read of the item's few events, not of the log; every id is compared
            # (not only the larger ones), so an event committed out of id order counts too.
            item_events = events_after(s, session_id, 0, position=checked.position)
            arrived = [e for e in item_events if e.id not in checked.event_ids]
            if checked.lease_holder is not None:
                # Under a lease, other annotators' answers about the item are no reason: with an
                # overlap of two or more, each gives their own (and with one, the lease below
                # says whether the item is still this annotator's). One of their own, from
                # another tab, still is.
                arrived = [e for e in arrived if e.annotator == checked.lease_holder]
            if arrived:
                raise StaleAnswer(
                    "Another answer about this item arrived at the same moment; nothing was recorded. "
                    "Look at the item again and answer."
                )
            if checked.lease_holder is not None and checked.lease_holder not in lease_holders(s, session_id).get(
                checked.position, []
            ):
                raise StaleAnswer(
                    "This item is no longer reserved for you (the reservation lapsed); nothing was recorded."
                )
        event = record_event(
            s, session_id=session_id, annotator=annotator, kind=kind, instance_position=position, label=label
        )
        s.flush()
        if checked is not None and checked.undoes is not None and event.undoes_event_id != checked.undoes:
            # Raised inside the transaction: the undo is rolled back, nothing is written.
            raise StaleAnswer("Your latest answer is no longer the one the page offered to undo; nothing was undone.")
        return int(event.id)

    return work
