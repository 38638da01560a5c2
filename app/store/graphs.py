"""Persisted k-NN graphs: find one by content hash, save one, drop the stale ones.

Why a table and not cache files beside the store: one mechanism serves SQLite and
PostgreSQL alike, a graph is visible to every process that can open the store (the app's
server, the CLI, a second machine on PostgreSQL) with no shared folder to agree on, it is
written in the same kind of transaction as everything else (a half-written graph is never
read), and it goes with the database when the file is copied. The cost is a blob copy on
load: ``idx`` as int32 is 40 MB for 1M items with ``k = 10`` and loads in well under a
second; uniform weights are not stored at all.

A graph is keyed by the content hash the service layer computes over the features and the
graph's parameters (:func:`app.service.graphs.graph_key`), so changed items simply miss; when
a graph is saved, the other graphs of the same dataset and parameters (which hashed
different features) are deleted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.store.checks import check_int
from app.store.errors import InvalidRecord
from app.store.models import Dataset, NeighbourGraph
from app.store.records import get_labelling_session

__all__ = ["StoredGraph", "find_graph", "save_graph", "graph_hashes", "session_dataset_size"]


@dataclass(frozen=True)
class StoredGraph:
    """A graph read back from the store (read-only arrays)."""

    content_hash: str
    idx: np.ndarray  # int array of shape (n_targets, k), intp
    w: np.ndarray  # float array of shape (n_targets, k)
    algorithm: str
    build_seconds: float


def find_graph(session: Session, content_hash: str) -> StoredGraph | None:
    """The graph stored under ``content_hash``, or ``None``.

    The blobs become arrays without parsing (``numpy.frombuffer``); ``idx`` is widened to
    the platform's index type once, since every kernel indexes with it.
    """
    row = session.execute(
        select(
            NeighbourGraph.idx,
            NeighbourGraph.w,
            NeighbourGraph.k,
            NeighbourGraph.n_targets,
            NeighbourGraph.algorithm,
            NeighbourGraph.build_seconds,
        ).where(NeighbourGraph.content_hash == content_hash)
    ).first()
    if row is None:
        return None
    idx_bytes, w_bytes, k, n_targets, algorithm, build_seconds = row
    if len(idx_bytes) != n_targets * k * 4 or (w_bytes is not None and len(w_bytes) != n_targets * k * 8):
        raise InvalidRecord(f"stored neighbour graph {content_hash[:12]} does not hold {n_targets} x {k} neighbours")
    idx = np.frombuffer(idx_bytes, dtype="<i4").reshape(n_targets, k).astype(np.intp)
    if w_bytes is None:
        w = np.ones((n_targets, k))
    else:
        w = np.frombuffer(w_bytes, dtype="<f8").reshape(n_targets, k).copy()
    idx.flags.writeable = False
    w.flags.writeable = False
    return StoredGraph(content_hash, idx, w, algorithm, float(build_seconds))


def save_graph(
    session: Session,
    *,
    dataset_id: int,
    content_hash: str,
    k: int,
    weighting: str,
    algorithm: str,
    idx: np.ndarray,
    w: np.ndarray,
    build_seconds: float,
) -> bool:
    """Store a graph unless one with ``content_hash`` is there; returns whether it was added.

    Graphs of the same dataset, ``k``, weighting and algorithm under another hash were built
    on other features (the dataset's items changed) and are deleted. Run inside
    :func:`app.store.write_transaction`, which takes the write lock before this reads, so two
    processes that finish the same build store it once.
    """
    dataset_id = check_int(dataset_id, "dataset_id")
    idx = np.asarray(idx)
    w = np.asarray(w, dtype=np.float64)
    if idx.ndim != 2 or idx.shape != w.shape or idx.shape[1] != k:
        raise InvalidRecord(f"idx {idx.shape} and w {w.shape} must both have shape (n_targets, k={k})")
    if idx.size and (idx.min() < 0 or idx.max() >= 2**31):
        raise InvalidRecord("idx holds neighbour rows outside 0 .. 2**31 - 1")
    if session.scalar(select(NeighbourGraph.id).where(NeighbourGraph.content_hash == content_hash)) is not None:
        return False
    session.execute(
        delete(NeighbourGraph).where(
            NeighbourGraph.dataset_id == dataset_id,
            NeighbourGraph.k == k,
            NeighbourGraph.weighting == weighting,
            NeighbourGraph.algorithm == algorithm,
        )
    )
    uniform = bool((w == 1.0).all())
    session.add(
        NeighbourGraph(
            dataset_id=dataset_id,
            content_hash=content_hash,
            k=k,
            weighting=weighting,
            algorithm=algorithm,
            n_targets=idx.shape[0],
            idx=np.ascontiguousarray(idx, dtype="<i4").tobytes(),
            w=None if uniform else np.ascontiguousarray(w, dtype="<f8").tobytes(),
            build_seconds=float(build_seconds),
        )
    )
    return True


def graph_hashes(session: Session, dataset_id: int) -> list[str]:
    """Content hashes of the graphs stored for a dataset, oldest first."""
    dataset_id = check_int(dataset_id, "dataset_id")
    return list(
        session.scalars(
            select(NeighbourGraph.content_hash)
            .where(NeighbourGraph.dataset_id == dataset_id)
            .order_by(NeighbourGraph.id)
        )
    )


def session_dataset_size(session: Session, session_id: int) -> tuple[int, int]:
    """``(dataset id, number of instances)`` of a labelling session's dataset.

    Two primary-key look-ups, cheap enough for every rerun of a page: a process that keeps
    a session's arrays in memory compares it with what it loaded to notice new items.
    """
    labelling = get_labelling_session(session, session_id)
    n_instances = session.scalar(select(Dataset.n_instances).where(Dataset.id == labelling.dataset_id))
    return labelling.dataset_id, int(n_instances or 0)
