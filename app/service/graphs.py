"""A dataset's k-NN graph, built once and then loaded by every tab, process and command.

:func:`dataset_graph` hashes the features together with the graph's parameters
(:func:`graph_key`), loads the graph stored under that hash (:mod:`app.store.graphs`) or builds
it with :func:`engine.neighbors.knn_graph`, reporting progress, and stores it in one
transaction. Items that change change the hash, so a stale graph is never used; saving the
new one deletes the old.

Two processes that open the same new session at once may both build (neither sees the
other's graph until it is committed); the store keeps the first and the second's is
dropped. Within one process the app's :class:`~app.service.tasks.BuildRegistry` runs one
build per session.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from dataclasses import dataclass
from importlib.util import find_spec
from typing import Literal

import numpy as np
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from app.service.tasks import ProgressTracker
from app.store import (
    LazyFeatures,
    SessionState,
    StoreUnavailable,
    find_graph,
    find_graph_key,
    save_graph,
    save_graph_key,
    session_dataset_size,
    write_transaction,
)
from engine import check_choice
from engine.choices import WEIGHTINGS
from engine.neighbors import APPROX_THRESHOLD, Weights, approx_parameters, knn_graph

__all__ = [
    "GraphResult",
    "graph_key",
    "graph_parameters",
    "graph_algorithm",
    "dataset_graph",
    "graph_with_k",
    "graph_builds",
    "session_dataset",
]

log = logging.getLogger("winnow.graphs")

#: Bumped whenever the way a graph is computed changes, so old stored graphs miss
#: (2: exact search breaks ties by training row).
GRAPH_FORMAT = 2

_builds_lock = threading.Lock()
_builds = 0


def graph_builds() -> int:
    """How many graphs this process has built (not loaded) so far."""
    return _builds


@dataclass(frozen=True)
class GraphResult:
    """A dataset's graph over all its instances, each left out of its own neighbourhood."""

    key: str
    idx: np.ndarray  # int array of shape (n_instances, k), read-only
    w: np.ndarray  # float array of shape (n_instances, k), read-only
    algorithm: str
    #: True when this call built the graph, False when it was loaded from the store.
    built: bool
    #: Seconds the build took (when it was loaded: what the build had cost).
    build_seconds: float


def graph_algorithm(n_instances: int) -> Literal["exact", "approx"]:
    """The search :func:`engine.neighbors.knn_graph` runs with ``algorithm="auto"``."""
    return "approx" if n_instances >= APPROX_THRESHOLD and find_spec("faiss") is not None else "exact"


def graph_key(X: np.ndarray, *, k: int, weighting: str, algorithm: str) -> str:
    """Hex SHA-256 of the features (shape, dtype and bytes) and the graph's parameters.

    Hashing 1M x 64 float64 features takes about half a second here; the approximate
    search's parameters are part of the key, so retuning them rebuilds.

    Examples
    --------
    >>> X = np.zeros((3, 2))
    >>> key = graph_key(X, k=1, weighting="uniform", algorithm="exact")
    >>> key == graph_key(X.copy(), k=1, weighting="uniform", algorithm="exact")
    True
    >>> key == graph_key(X, k=2, weighting="uniform", algorithm="exact")
    False
    """
    X = np.ascontiguousarray(X, dtype="<f8")
    digest = hashlib.sha256(graph_parameters(X.shape, k=k, weighting=weighting, algorithm=algorithm).encode())
    digest.update(X.data.cast("B"))
    return digest.hexdigest()


def graph_parameters(shape: tuple[int, ...], *, k: int, weighting: str, algorithm: str) -> str:
    """What :func:`graph_key` hashes besides the features' bytes: their shape and the
    graph's parameters (those of the approximate search included).

    >>> graph_parameters((3, 2), k=1, weighting="uniform", algorithm="exact")
    'winnow-graph/2;shape=(3, 2);k=1;weighting=uniform;algorithm=exact'
    """
    params = f"winnow-graph/{GRAPH_FORMAT};shape={tuple(shape)};k={k};weighting={weighting};algorithm={algorithm}"
    if algorithm == "approx":
        params += f";{approx_parameters(shape[0])}"
    return params


def dataset_graph(
    session_factory: sessionmaker[Session],
    *,
    dataset_id: int,
    X: np.ndarray | LazyFeatures,
    k: int,
    weighting: str,
    progress: ProgressTracker | None = None,
    item_columns_token: str | None = None,
) -> GraphResult:
    """The k-NN graph of every instance of a dataset: loaded when stored, else built and stored.

    Parameters
    ----------
    session_factory : sessionmaker
        From :func:`app.store.open_store`.
    dataset_id : int
    X : array of shape (n_instances, n_features), or FeatureMatrix
        The dataset's features, as :func:`app.store.load_state` returns them
        (:attr:`app.store.SessionState.features`: read only if the key is not kept or the
        graph must be built).
    k : int
    weighting : str
        One of :data:`engine.choices.WEIGHTINGS`.
    progress : ProgressTracker, optional
        Told about hashing, and when building about the ``index`` / ``search`` / ``save``
        stages.
    item_columns_token : str, optional
        The token of the dataset's item columns read in the same transaction as ``X``
        (:attr:`app.store.SessionState.item_columns_token`): the key hashed from ``X`` is
        stored under it, and read back instead of hashing ``X`` again while it is current
        (:mod:`app.store.item_columns`).
    """
    report = progress if progress is not None else ProgressTracker(None)
    n = X.shape[0]
    algorithm = graph_algorithm(n)
    report("hash", 0, n)
    params = graph_parameters(X.shape, k=k, weighting=weighting, algorithm=algorithm)
    key = None
    if item_columns_token is not None:
        with session_factory() as s:
            key = find_graph_key(s, dataset_id, item_columns_token, params)
    if key is None:
        X = _matrix(X)
        key = graph_key(X, k=k, weighting=weighting, algorithm=algorithm)
        if item_columns_token is not None:
            _remember_key(session_factory, dataset_id, item_columns_token, params, key)
    report("hash", n, n)
    with session_factory() as s:
        stored = find_graph(s, key)
    if stored is not None:
        log.info("loaded neighbour graph %s of dataset %d (%d x %d)", key[:12], dataset_id, n, k)
        return GraphResult(key, stored.idx, stored.w, stored.algorithm, False, stored.build_seconds)

    global _builds
    with _builds_lock:
        _builds += 1
    log.info("building neighbour graph %s of dataset %d (%d x %d, %s)", key[:12], dataset_id, n, k, algorithm)
    started = time.perf_counter()
    weights: Weights = check_choice(weighting, "weighting", WEIGHTINGS)
    idx, w = knn_graph(_matrix(X), k=k, weights=weights, exclude_self=True, algorithm=algorithm, progress=report)
    seconds = time.perf_counter() - started
    report("save", 0, 1)
    write_transaction(
        session_factory,
        lambda s: save_graph(
            s,
            dataset_id=dataset_id,
            content_hash=key,
            k=k,
            weighting=weighting,
            algorithm=algorithm,
            idx=idx,
            w=w,
            build_seconds=seconds,
        ),
    )
    report("save", 1, 1)
    idx.flags.writeable = False
    w.flags.writeable = False
    return GraphResult(key, idx, w, algorithm, True, seconds)


def graph_with_k(
    session_factory: sessionmaker[Session], state: SessionState, session_graph: GraphResult, k: int
) -> GraphResult:
    """The dataset's graph with ``k`` neighbours: the session's own (``session_graph``) when ``k``
    is its ``k`` (any weighting: only the neighbours are used), otherwise the uniform one
    :func:`dataset_graph` loads or builds and stores."""
    if k == state.config.k:
        return session_graph
    return dataset_graph(
        session_factory,
        dataset_id=state.config.dataset_id,
        X=state.features,
        k=k,
        weighting="uniform",
        item_columns_token=state.item_columns_token,
    )


def _matrix(X: np.ndarray | LazyFeatures) -> np.ndarray:
    return X if isinstance(X, np.ndarray) else X.array()


def _remember_key(session_factory: sessionmaker[Session], dataset_id: int, token: str, params: str, key: str) -> None:
    """Store a graph key for the next open; a store that refuses (read-only, busy) costs
    that open a hash only."""
    try:
        write_transaction(session_factory, lambda s: save_graph_key(s, dataset_id, token, params, key))
    except (SQLAlchemyError, StoreUnavailable) as error:
        log.warning("graph key of dataset %d not kept (%s)", dataset_id, error)


def session_dataset(session_factory: sessionmaker[Session], session_id: int) -> tuple[int, int]:
    """``(dataset id, number of items)`` of a session's dataset (one cheap read).

    The app keys its shared in-memory copy of a session's arrays by this, so items added
    to the dataset make the next rerun load afresh.
    """
    with session_factory() as s:
        return session_dataset_size(s, session_id)
