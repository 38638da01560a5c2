"""Fixtures for the store tests: a migrated SQLite file per test and a small dataset."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.store import (
    AnswerEvent,
    Annotator,
    Dataset,
    Instance,
    LabellingSession,
    close_stores,
    create_dataset,
    create_labelling_session,
    open_store,
    write_transaction,
)

LABELS = ["cat", "dog", "bird", "fish"]
# position: candidate set
CANDIDATES = np.array(
    [
        [1, 1, 0, 0],  # 0: {cat, dog}
        [0, 1, 1, 0],  # 1: {dog, bird}
        [1, 0, 0, 0],  # 2: {cat}
        [1, 1, 1, 0],  # 3: {cat, dog, bird}
        [0, 0, 1, 1],  # 4: {bird, fish}
    ],
    dtype=bool,
)
TRUE_LABELS = np.array([0, 2, 0, -1, 3])


@dataclass(frozen=True)
class SmallStore:
    Session: sessionmaker[Session]
    url: str
    dataset_id: int
    session_id: int


@pytest.fixture
def db_path(tmp_path):
    yield tmp_path / "winnow.db"
    close_stores()


@pytest.fixture
def store(db_path):
    return open_store(db_path)


@pytest.fixture
def small(store, db_path) -> SmallStore:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(len(CANDIDATES), 3))

    def work(s: Session) -> tuple[int, int]:
        ds = create_dataset(
            s,
            name="toy",
            X=X,
            candidates=CANDIDATES,
            label_names=LABELS,
            external_ids=[f"item-{i}" for i in range(len(CANDIDATES))],
            true_labels=TRUE_LABELS,
        )
        ls = create_labelling_session(s, dataset_id=ds.id, name="first", k=2)
        return ds.id, ls.id

    dataset_id, session_id = write_transaction(store, work)
    return SmallStore(store, str(db_path), dataset_id, session_id)


def row_counts(Session: sessionmaker[Session]) -> dict[str, int]:
    with Session() as s:
        return {
            model.__tablename__: s.scalar(select(func.count()).select_from(model))
            for model in (Dataset, Instance, LabellingSession, Annotator, AnswerEvent)
        }
