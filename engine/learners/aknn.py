"""PL A-kNN: adaptive nearest neighbours for partial labels (Errandonea et al., 2026).

For a query ``x`` the neighbourhood grows one neighbour at a time, ``k = 1, 2, ..., T``.
After adding the k-th neighbour, ``tau[y]`` counts the neighbours whose bag holds ``y`` and
every surviving label whose count trails the surviving leader by at least

    Delta(n, k, delta) = c1 * sqrt((log n + log(M / delta)) / k)

in frequency, i.e. ``(max_{y' in s} tau[y'] - tau[y]) / k >= Delta``, is eliminated. The
search stops as soon as a single label survives (Algorithm 1). If several labels survive
``T`` steps, the disambiguation criterion of Algorithm 2 (Appendix D.3) picks

    argmin_{y in s, k <= T}  sqrt(k) * (Delta_k - (tau_k[y] - m2_k) / k),

with ``m2_k`` the second largest count among the labels surviving at step k (equal to the
largest count when the lead is shared): the label that came closest to eliminating all
others. Logarithms are natural; ``T`` is capped at the number of training instances.

Guarantee (Theorem 3.1 of the paper): Bayes consistent under the label-aligned condition
for suitable ``delta_n`` and ``T_n``; the leader is never eliminated, so at least one label
always survives.

Complexity: one exact neighbour search for ``T`` neighbours, then O(m T M) time for m
queries; memory O(c T M) for a chunk of c queries (chunked to bound memory).

References
----------
.. [1] N. A. Errandonea, S. Mazuelas, J. A. Lozano and S. Dasgupta, "Learnability with
   Partial Labels and Adaptive Nearest Neighbors", arXiv:2603.15781, 2026, Algorithms 1-2.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator

from engine._kernels import top_two
from engine._validation import check_query, check_scalar, check_training_data
from engine.neighbors import knn_graph

__all__ = ["PlAknnClassifier", "aknn_threshold_constant"]

_CHUNK_ENTRIES = 4_000_000  # bound on chunk_size * T * M counts held at once


def aknn_threshold_constant(n: int, n_labels: int, c1: float, delta: float) -> float:
    """Return ``A = c1 * sqrt(log n + log(M / delta))``, so that ``Delta_k = A / sqrt(k)``."""
    return float(c1 * np.sqrt(np.log(n) + np.log(n_labels / delta)))


class PlAknnClassifier(BaseEstimator):
    """Adaptive-k nearest neighbours with label elimination (PL A-kNN).

    Parameters
    ----------
    c1 : float, default=0.5
        Scale of the elimination threshold (the paper uses 0.5).
    delta : float in (0, 1), default=0.1
        Confidence parameter (the paper uses 0.1).
    max_iter : int, default=50
        ``T``, the largest neighbourhood considered (50 for the paper's small real datasets,
        400 for its vision datasets).

    Attributes
    ----------
    X_ : array of shape (n_instances, n_features)
    Y_ : bool array of shape (n_instances, n_labels)
    n_labels_ : int
    n_features_in_ : int
    threshold_constant_ : float
        ``A`` of Algorithm 1; the threshold at step k is ``A / sqrt(k)``.
    max_neighbors_ : int
        ``min(max_iter, n_instances)``, the effective ``T``.
    """

    def __init__(self, c1: float = 0.5, delta: float = 0.1, max_iter: int = 50) -> None:
        self.c1 = c1
        self.delta = delta
        self.max_iter = max_iter

    def fit(self, X: Any, Y: Any) -> PlAknnClassifier:
        """Store the training data and the threshold constant.

        Parameters
        ----------
        X : array of shape (n_instances, n_features)
        Y : bool array of shape (n_instances, n_labels)

        Returns
        -------
        self : PlAknnClassifier
        """
        check_scalar(self.c1, "c1", kind=Real, min_value=0.0, include_min=False)
        check_scalar(self.delta, "delta", kind=Real, min_value=0.0, max_value=1.0, include_min=False, include_max=False)
        check_scalar(self.max_iter, "max_iter", kind=Integral, min_value=1)
        X, Y = check_training_data(X, Y)
        self.X_ = X
        self.Y_ = Y
        self.n_labels_ = Y.shape[1]
        self.n_features_in_ = X.shape[1]
        self.max_neighbors_ = min(int(self.max_iter), X.shape[0])
        self.threshold_constant_ = aknn_threshold_constant(X.shape[0], Y.shape[1], self.c1, self.delta)
        return self

    def _run(self, X: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        X = check_query(self, X, attribute="Y_")
        T = self.max_neighbors_
        idx, _ = knn_graph(self.X_, X, k=T)
        m = X.shape[0]
        labels = np.empty(m, dtype=np.intp)
        k_used = np.empty(m, dtype=np.intp)
        survivors = np.empty((m, self.n_labels_), dtype=bool)
        chunk = max(1, _CHUNK_ENTRIES // (T * self.n_labels_))
        for start in range(0, m, chunk):
            stop = min(start + chunk, m)
            lab, k, surv = _aknn_kernel(idx[start:stop], self.Y_, self.threshold_constant_)
            labels[start:stop], k_used[start:stop], survivors[start:stop] = lab, k, surv
        return labels, k_used, survivors

    def predict(self, X: Any, *, return_k: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """Predict one label per query with the adaptive neighbourhood.

        Parameters
        ----------
        X : array of shape (n_targets, n_features)
        return_k : bool, default=False
            Also return the neighbourhood size used for each query.

        Returns
        -------
        labels : int array of shape (n_targets,)
        k_used : int array of shape (n_targets,)
            Only with ``return_k``; see :meth:`predict_with_k`.
        """
        labels, k_used, _ = self._run(X)
        return (labels, k_used) if return_k else labels

    def predict_with_k(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """Predict and report the neighbourhood size each prediction used.

        Returns
        -------
        labels : int array of shape (n_targets,)
        k_used : int array of shape (n_targets,)
            Number of neighbours examined: the step at which one label was left, or
            ``max_neighbors_`` when the disambiguation criterion decided (0 when there is
            a single label and nothing to decide).
        """
        labels, k_used, _ = self._run(X)
        return labels, k_used

    def surviving_labels(self, X: Any) -> np.ndarray:
        """The label set ``s`` left when the elimination stopped (Algorithm 1's raw output).

        Returns
        -------
        survivors : bool array of shape (n_targets, n_labels)
            Never empty; more than one label means the disambiguation criterion decided.
        """
        return self._run(X)[2]


def _aknn_kernel(idx: np.ndarray, Y: np.ndarray, A: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Algorithms 1-2 vectorised over the queries of a chunk; ``idx`` (c, T) nearest first."""
    c, T = idx.shape
    M = Y.shape[1]
    counts = np.cumsum(Y[idx], axis=1, dtype=np.int64)  # (c, T, M): tau after k = 1..T
    active = np.ones((c, M), dtype=bool)
    k_used = np.zeros(c, dtype=np.intp)
    closeness = np.full((c, T, M), np.inf)  # M(k, y) of Algorithm 2; inf where not set
    rows = np.arange(c)
    for k in range(1, T + 1):
        running = active.sum(axis=1) > 1
        if not running.any():
            break
        r = rows[running]
        tau = counts[r, k - 1]  # (r, M)
        act = active[r]
        masked = np.where(act, tau, -1)
        _, m1, m2 = top_two(masked)  # running rows have >= 2 active labels
        m1, m2 = m1[:, None], m2[:, None]
        delta_k = A / np.sqrt(k)
        closeness[r, k - 1] = np.where(act, np.sqrt(k) * (delta_k - (tau - m2) / k), np.inf)
        eliminate = act & ((m1 - tau) / k >= delta_k)
        active[r] = act & ~eliminate
        k_used[r] = k
    single = active.sum(axis=1) == 1
    labels = np.empty(c, dtype=np.intp)
    labels[single] = active[single].argmax(axis=1)
    multi = ~single
    if multi.any():
        score = np.where(active[multi][:, None, :], closeness[multi], np.inf).min(axis=1)  # (r, M)
        labels[multi] = score.argmin(axis=1)  # ties: lowest label index
    return labels, k_used, active
