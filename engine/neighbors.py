"""The k-nearest-neighbour graph every other engine module votes on.

Neighbours come from scikit-learn's :class:`~sklearn.neighbors.NearestNeighbors` (exact
Euclidean search). The graph is returned as two dense arrays so that the vote kernels can
be vectorised over all targets: ``idx`` (rows of the training set) and ``w`` (vote weights).
"""

from __future__ import annotations

from numbers import Integral
from typing import Callable, Literal

import numpy as np

from engine._validation import check_features, check_scalar
from engine.exceptions import InvalidInput

__all__ = ["knn_graph", "neighbor_weights"]

Weights = Literal["uniform", "distance"] | Callable[[np.ndarray], np.ndarray]


def neighbor_weights(dist: np.ndarray, weights: Weights) -> np.ndarray:
    """Turn neighbour distances of shape (n_targets, k) into non-negative vote weights.

    ``"distance"`` is inverse distance. A target that has exact duplicates among its
    neighbours (distance 0) gives those duplicates weight 1 and every other neighbour
    weight 0, as scikit-learn's ``KNeighborsClassifier`` does: an infinitely close
    neighbour outvotes any finite one, and no division by zero happens.
    """
    if weights == "uniform":
        return np.ones_like(dist, dtype=np.float64)
    if weights == "distance":
        with np.errstate(divide="ignore"):
            w = 1.0 / dist
        has_duplicate = (dist == 0).any(axis=1)
        if has_duplicate.any():
            w[has_duplicate] = (dist[has_duplicate] == 0).astype(np.float64)
        return w
    if callable(weights):
        w = np.asarray(weights(dist), dtype=np.float64)
        if w.shape != dist.shape:
            raise InvalidInput(f"weights callable returned shape {w.shape}, expected {dist.shape}")
        bad = (~np.isfinite(w) | (w < 0)).any(axis=1)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise InvalidInput(f"weights callable returned a negative or non-finite weight in row {row}: {w[row].tolist()}")
        return w
    raise InvalidInput(f"weights must be 'uniform', 'distance' or a callable, got {weights!r}")


def knn_graph(
    X: np.ndarray,
    targets: np.ndarray | None = None,
    *,
    k: int = 10,
    weights: Weights = "uniform",
    exclude_self: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Return the ``k`` nearest training rows of every target and their vote weights.

    Parameters
    ----------
    X : array of shape (n_instances, n_features)
        Training features.
    targets : array of shape (n_targets, n_features), optional
        Points to find neighbours for. ``None`` means the training rows themselves.
    k : int
        Number of neighbours.
    weights : {"uniform", "distance"} or callable
        Vote weights; a callable maps distances (n_targets, k) to weights of the same shape.
    exclude_self : bool
        When ``targets`` is None, leave every instance out of its own neighbourhood.

    Returns
    -------
    idx : int array of shape (n_targets, k)
        Training rows, nearest first.
    w : float array of shape (n_targets, k)
        Non-negative vote weights.
    """
    X = check_features(X, name="X")
    check_scalar(k, "k", kind=Integral, min_value=1)
    n = X.shape[0]
    self_targets = targets is None
    leave_out = self_targets and exclude_self
    if leave_out and k >= n:
        raise InvalidInput(f"k={k} must be smaller than the number of instances ({n}) when each instance is left out of its own neighbourhood")
    if not leave_out and k > n:
        raise InvalidInput(f"k={k} is larger than the number of training instances ({n})")
    if not self_targets:
        targets = check_features(targets, name="targets")
        if targets.shape[1] != X.shape[1]:
            raise InvalidInput(f"targets has {targets.shape[1]} features but X has {X.shape[1]}")
    if not (weights in ("uniform", "distance") or callable(weights)):
        raise InvalidInput(f"weights must be 'uniform', 'distance' or a callable, got {weights!r}")

    from sklearn.neighbors import NearestNeighbors  # imported here: scikit-learn is slow to import

    search = NearestNeighbors(n_neighbors=k + leave_out).fit(X)
    dist, idx = search.kneighbors(X if self_targets else targets)
    if leave_out:
        dist, idx = _drop_self(dist, idx, k)
    return idx.astype(np.intp), neighbor_weights(dist, weights)


def _drop_self(dist: np.ndarray, idx: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    # With exact duplicates the row itself need not come first, so remove it by identity;
    # a row missing from its own k+1 list (many duplicates) drops its farthest neighbour.
    rows = np.arange(idx.shape[0])[:, None]
    is_self = idx == rows
    drop = np.where(is_self.any(axis=1), is_self.argmax(axis=1), k)
    keep = np.ones_like(is_self)
    keep[np.arange(idx.shape[0]), drop] = False
    return dist[keep].reshape(-1, k), idx[keep].reshape(-1, k)
