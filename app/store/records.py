"""Look-ups that several store modules share: sessions and datasets by id (each raises
:class:`RecordNotFound`), annotators by name (created on first use), user accounts and their
session assignments (what :mod:`app.store.policies` and :mod:`app.store.users` both read)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.store.checks import check_int, check_name
from app.store.errors import RecordNotFound
from app.store.models import Annotator, Dataset, LabellingSession, SessionAssignment, User

__all__ = [
    "get_labelling_session",
    "dataset_of",
    "get_or_create_annotator",
    "users_exist",
    "find_user",
    "is_assigned",
    "assigned_session_ids",
]


def get_labelling_session(session: Session, session_id: Any) -> LabellingSession:
    """The labelling session with id ``session_id``."""
    session_id = check_int(session_id, "session_id")
    labelling = session.get(LabellingSession, session_id)
    if labelling is None:
        raise RecordNotFound(f"session_id {session_id} is not a labelling session")
    return labelling


def dataset_of(session: Session, labelling: LabellingSession) -> Dataset:
    """The dataset a labelling session works on."""
    dataset = session.get(Dataset, labelling.dataset_id)
    if dataset is None:  # the foreign key forbids it; a store edited by hand could still lack it
        raise RecordNotFound(
            f"labelling session {labelling.name!r} names dataset_id {labelling.dataset_id}, which the store does not hold"
        )
    return dataset


def get_or_create_annotator(session: Session, name: str) -> Annotator:
    """The annotator called ``name``, created (flushed) if new. Safe under concurrent callers."""
    name = check_name(name, "annotator")
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


def users_exist(session: Session) -> bool:
    """True once the store has any user account (team mode)."""
    return session.scalar(select(User.id).limit(1)) is not None


def find_user(session: Session, name: str) -> User | None:
    """The account called ``name``, or ``None`` (a NUL byte matches no name on any backend)."""
    return session.scalar(select(User).where(User.name == name)) if "\x00" not in name else None


def is_assigned(session: Session, session_id: int, user_id: int) -> bool:
    """True when the user may answer in the labelling session (``winnow session assign``)."""
    return session.get(SessionAssignment, (session_id, user_id)) is not None


def assigned_session_ids(session: Session, user_id: int) -> set[int]:
    """The labelling sessions a user is assigned to."""
    return set(session.scalars(select(SessionAssignment.session_id).where(SessionAssignment.user_id == user_id)))
