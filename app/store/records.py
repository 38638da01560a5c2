"""Look-ups that several store modules share: sessions and datasets by id (each raises
:class:`RecordNotFound`), annotators by name (created on first use)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.store.checks import check_int, check_name
from app.store.errors import RecordNotFound
from app.store.models import Annotator, Dataset, LabellingSession

__all__ = ["get_labelling_session", "dataset_of", "get_or_create_annotator"]


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
            f"labelling session {labelling.name!r} names dataset_id {labelling.dataset_id}, "
            "which the store does not hold"
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
