"""A check for readers that keep a state derived from a session's events up to some event
(the Progress page's replay, :mod:`app.service.progress`) and read only the later ones
(:func:`app.store.events_after`): did they see every event up to that one?

A module of its own, beside :mod:`app.store.events`: it reads what that module writes and
changes nothing there.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.store.models import AnswerEvent

__all__ = ["count_events_up_to"]


def count_events_up_to(session: Session, session_id: int, event_id: int) -> int:
    """How many events of session ``session_id`` have an id of at most ``event_id``: a reader
    that saw that many up to that id has seen every one of them (none committed late)."""
    return int(
        session.scalar(
            select(func.count(AnswerEvent.id)).where(AnswerEvent.session_id == session_id, AnswerEvent.id <= event_id)
        )
        or 0
    )
