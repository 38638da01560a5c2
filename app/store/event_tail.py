"""The newest events of a session: those after a given event, for readers that keep a state
derived from the events before it (the Progress page's replay, :mod:`app.service.progress`).

A module of its own, beside :mod:`app.store.events`: it reads what that module writes and
changes nothing there.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.store.derive import EventRecord
from app.store.models import Annotator, AnswerEvent, Instance

__all__ = ["events_after", "count_events_up_to"]


def events_after(session: Session, session_id: int, after_event_id: int) -> list[EventRecord]:
    """The events of session ``session_id`` with an id above ``after_event_id``, oldest first
    (as :func:`app.store.session_events` returns them; index ``(session_id, id)``)."""
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
        .where(AnswerEvent.session_id == session_id, AnswerEvent.id > after_event_id)
        .order_by(AnswerEvent.id)
    )
    return [EventRecord(*row) for row in rows]


def count_events_up_to(session: Session, session_id: int, event_id: int) -> int:
    """How many events of session ``session_id`` have an id of at most ``event_id``: a reader
    that saw that many up to that id has seen every one of them (none committed late)."""
    return int(
        session.scalar(
            select(func.count(AnswerEvent.id)).where(AnswerEvent.session_id == session_id, AnswerEvent.id <= event_id)
        )
        or 0
    )
