"""Crowd votes: checked with their dataset, written with its instances, read per item or per dataset.

A dataset made from votes keeps them (:class:`~app.store.models.Vote`): the import writes each
batch of instances together with their votes (:func:`write_votes`, called by
:func:`app.store.datasets.write_instances`), so the votes are published with the dataset or
discarded with it, never one without the other. The annotators are names as the source gives
them, not winnow users: nobody signs in as a crowd worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from app.store.checks import check_name
from app.store.errors import InvalidRecord
from app.store.models import Instance, Vote

__all__ = [
    "VoteSpec",
    "CheckedVotes",
    "StoredVote",
    "check_votes",
    "write_votes",
    "votes_of_item",
    "dataset_votes",
    "dataset_vote_counts",
    "dataset_has_votes",
]

#: Votes inserted per bulk INSERT.
_VOTE_CHUNK = 20_000


@dataclass(frozen=True, eq=False)
class VoteSpec:
    """The votes of a dataset as a caller hands them to the store, one entry per vote.

    Attributes
    ----------
    positions : int array of shape (n_votes,)
        Position of the voted item in the dataset.
    annotators : sequence of str
        Who voted (a name as the source gives it).
    labels : int array of shape (n_votes,)
        The label voted for, an index into the dataset's label names.
    times : sequence of (datetime or None)
        When each vote was cast (timezone-aware), ``None`` when unknown.
    source : str
        Where the votes come from (e.g. the votes file's name).
    """

    positions: Any
    annotators: Sequence[str]
    labels: Any
    times: Sequence[datetime | None]
    source: str


@dataclass(frozen=True, eq=False)
class CheckedVotes:
    """Votes that passed :func:`check_votes`, sorted by item position (then file order)."""

    positions: np.ndarray
    annotators: list[str]
    labels: np.ndarray
    times: list[datetime | None]
    source: str

    def __len__(self) -> int:
        return int(self.positions.size)


@dataclass(frozen=True)
class StoredVote:
    """One stored vote, as the export lists it."""

    position: int
    external_id: str
    annotator: str
    label: int
    voted_at: datetime | None
    source: str


def check_votes(spec: VoteSpec, *, n_instances: int, n_labels: int) -> CheckedVotes:
    """Check votes against the size of their dataset, without touching the database.

    Raises
    ------
    InvalidRecord
        Lengths that differ, a position or label out of range, an empty or over-long annotator
        or source, a naive time.
    TypeError
        Values of the wrong type.
    """
    if not isinstance(spec, VoteSpec):
        raise TypeError(f"votes must be a VoteSpec, got {type(spec).__name__}")
    positions = np.asarray(spec.positions)
    labels = np.asarray(spec.labels)
    n = positions.shape[0] if positions.ndim == 1 else -1
    if positions.ndim != 1 or labels.shape != (n,) or len(spec.annotators) != n or len(spec.times) != n:
        raise InvalidRecord("votes: positions, annotators, labels and times need one entry per vote")
    if n and not (np.issubdtype(positions.dtype, np.integer) and np.issubdtype(labels.dtype, np.integer)):
        raise TypeError("votes: positions and labels must be integer arrays")
    positions = positions.astype(np.int64)
    labels = labels.astype(np.int64)
    bad = np.flatnonzero((positions < 0) | (positions >= n_instances))
    if bad.size:
        raise InvalidRecord(
            f"votes: vote {int(bad[0]) + 1} is for position {positions[bad[0]]}, not in [0, {n_instances})"
        )
    bad = np.flatnonzero((labels < 0) | (labels >= n_labels))
    if bad.size:
        raise InvalidRecord(f"votes: vote {int(bad[0]) + 1} has label {labels[bad[0]]}, not in [0, {n_labels})")
    annotators = [check_name(a, f"votes: annotator of vote {i + 1}") for i, a in enumerate(spec.annotators)]
    for i, time in enumerate(spec.times):
        if time is not None and (not isinstance(time, datetime) or time.tzinfo is None):
            raise InvalidRecord(f"votes: the time of vote {i + 1} must be a timezone-aware datetime or None")
    source = check_name(spec.source, "votes: source")
    order = np.argsort(positions, kind="stable")
    return CheckedVotes(
        positions[order],
        [annotators[i] for i in order],
        labels[order],
        [spec.times[i] for i in order],
        source,
    )


def write_votes(session: Session, dataset_id: int, votes: CheckedVotes, start: int, stop: int) -> None:
    """Insert the votes of the items at positions ``start .. stop - 1`` (already inserted)."""
    lo, hi = np.searchsorted(votes.positions, [start, stop])
    if lo == hi:
        return
    instance_of = dict(
        session.execute(
            select(Instance.position, Instance.id).where(
                Instance.dataset_id == dataset_id, Instance.position >= start, Instance.position < stop
            )
        ).all()
    )
    for chunk in range(int(lo), int(hi), _VOTE_CHUNK):
        rows = [
            {
                "instance_id": instance_of[int(votes.positions[i])],
                "annotator": votes.annotators[i],
                "label": int(votes.labels[i]),
                "voted_at": votes.times[i],
                "source": votes.source,
            }
            for i in range(chunk, min(chunk + _VOTE_CHUNK, int(hi)))
        ]
        session.execute(insert(Vote), rows)


def votes_of_item(session: Session, dataset_id: int, position: int) -> list[tuple[str, int]]:
    """``(annotator, label)`` of every vote on the item at ``position``, in the order stored
    (two indexed look-ups: the instance, then its votes)."""
    instance_id = session.scalar(
        select(Instance.id).where(Instance.dataset_id == dataset_id, Instance.position == int(position))
    )
    if instance_id is None:
        return []
    rows = session.execute(select(Vote.annotator, Vote.label).where(Vote.instance_id == instance_id).order_by(Vote.id))
    return [(annotator, int(label)) for annotator, label in rows.all()]


def dataset_votes(session: Session, dataset_id: int) -> list[StoredVote]:
    """Every vote of dataset ``dataset_id``, by item position then in the order stored."""
    rows = session.execute(
        select(Instance.position, Instance.external_id, Vote.annotator, Vote.label, Vote.voted_at, Vote.source)
        .join(Instance, Vote.instance_id == Instance.id)
        .where(Instance.dataset_id == dataset_id)
        .order_by(Instance.position, Vote.id)
    )
    return [StoredVote(int(p), e, a, int(lab), t, src) for p, e, a, lab, t, src in rows.all()]


def dataset_vote_counts(session: Session, dataset_id: int, n_instances: int, n_labels: int) -> np.ndarray:
    """How many votes each label received for each item of the dataset.

    Returns
    -------
    int array of shape (n_instances, n_labels)
    """
    counts = np.zeros((n_instances, n_labels), dtype=np.int64)
    rows = session.execute(
        select(Instance.position, Vote.label, func.count())
        .join(Instance, Vote.instance_id == Instance.id)
        .where(Instance.dataset_id == dataset_id)
        .group_by(Instance.position, Vote.label)
    )
    for position, label, count in rows.all():
        counts[int(position), int(label)] = int(count)
    return counts


def dataset_has_votes(session: Session, dataset_id: int) -> bool:
    """Whether any item of the dataset has a stored vote."""
    found = session.scalar(
        select(Vote.id)
        .join(Instance, Vote.instance_id == Instance.id)
        .where(Instance.dataset_id == dataset_id)
        .limit(1)
    )
    return found is not None
