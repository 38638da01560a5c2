"""RkNN: k-nearest neighbours with a one-sided correction for random label flips.

Binary labels ``y in {0, 1}`` are observed through random classification noise with
``tau_pos = P(observed 0 | true 1)`` and ``tau_neg = P(observed 1 | true 0)``, so the
observed posterior is ``eta_hat(x) = (1 - tau_pos - tau_neg) eta(x) + tau_neg``. The
k-NN decision ``I[eta_hat >= 1/2]`` is wrong exactly where the noise pushes ``eta_hat``
across 1/2, a band of width ``|tau_neg - tau_pos| / 2`` on one side of 1/2. Algorithm 1:

1. ``eta_hat(x_j) = (y_j + sum of the k' nearest other labels) / (k' + 1)`` on the
   training set (``k'`` = ``n_neighbors_noise``).
2. Noise proportions ``tau_neg_ = min_j eta_hat(x_j)`` and ``tau_pos_ = min_j (1 - eta_hat(x_j))``.
3. For a query, ``eta_hat(x)`` = fraction of positive labels among its k nearest neighbours;
   predict ``I[eta_hat >= 1/2]``, then
4. if ``tau_neg_ > tau_pos_`` and ``eta_hat - 1/2`` lies in ``(0, (tau_neg_ - tau_pos_)/2)``,
   predict 0; if ``tau_neg_ < tau_pos_`` and it lies in ``((tau_neg_ - tau_pos_)/2, 0)``,
   predict 1.

Note on step 2: Eq. (5) of the paper prints ``tau_pos = min eta_hat`` and
``tau_neg = min (1 - eta_hat)``. Under the paper's own noise model (its Eq. (1)) the
minimum of ``eta_hat`` is reached where ``eta = 0`` and equals ``tau_neg`` (and
``min(1 - eta_hat) = tau_pos``), which is also the assignment its Table 4 reports
(estimates follow the true ordering of (tau_pos, tau_neg)) and the one under which steps
4-5 correct towards the truth. We use that consistent assignment; with the printed one the
correction would push predictions the wrong way.

Complexity: ``fit`` is one k'-NN search over the training set, O(n log n)-ish with a tree
plus O(n k'); ``predict`` one k-NN search plus O(m k).

References
----------
.. [1] W. Gao, B.-B. Yang and Z.-H. Zhou, "On the Resistance of Nearest Neighbor to Random
   Noisy Labels", arXiv:1607.07526, Section 4 and Algorithm 1.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator

from engine._validation import check_features, check_query, check_scalar
from engine.exceptions import InvalidInput
from engine.neighbors import knn_graph

__all__ = ["RkNNClassifier"]


def _check_binary_labels(y: Any, n_rows: int) -> np.ndarray:
    """Accept binary labels of shape (n,) in {0, 1} or a one-hot bool matrix of shape (n, 2)."""
    arr = np.asarray(y)
    if arr.ndim == 2:
        if arr.shape[1] != 2:
            raise InvalidInput(f"y as a matrix must be one-hot of shape (n, 2), got shape {arr.shape}")
        if arr.dtype != bool and (arr.dtype.kind not in "iuf" or not np.isin(arr, (0, 1)).all()):
            raise InvalidInput(f"y as a matrix must be boolean (or 0/1), got dtype {arr.dtype}")
        arr = arr.astype(bool)
        not_one_hot = arr.sum(axis=1) != 1
        if not_one_hot.any():
            row = int(np.flatnonzero(not_one_hot)[0])
            raise InvalidInput(f"y row {row} is {arr[row].tolist()}; RkNN needs exactly one label per row (one-hot)")
        arr = arr[:, 1].astype(np.intp)
    elif arr.ndim == 1:
        if arr.dtype == bool:
            arr = arr.astype(np.intp)
        elif arr.dtype.kind not in "iuf" or not np.isin(arr, (0, 1)).all():
            bad = np.flatnonzero(~np.isin(arr, (0, 1)))[0] if arr.dtype.kind in "iuf" else 0
            raise InvalidInput(f"y must hold binary labels 0/1; y[{int(bad)}] = {arr[bad]!r}")
        arr = arr.astype(np.intp)
    else:
        raise InvalidInput(f"y must be 1-D (n,) or one-hot (n, 2), got shape {arr.shape}")
    if arr.shape[0] != n_rows:
        raise InvalidInput(f"y has {arr.shape[0]} rows but X has {n_rows}")
    return arr


class RkNNClassifier(BaseEstimator):
    """Robust k-NN for binary labels with random flips (Gao, Yang & Zhou, Algorithm 1).

    Parameters
    ----------
    n_neighbors : int, default=20
        ``k``, the predictive parameter.
    n_neighbors_noise : int, default=20
        ``k'``, the noise parameter used to estimate the flip rates (the paper advises
        not less than 20).

    Attributes
    ----------
    X_ : array of shape (n_instances, n_features)
    y_ : int array of shape (n_instances,)
        Observed (noisy) labels in {0, 1}.
    tau_pos_ : float
        Estimated ``P(observed 0 | true 1)``.
    tau_neg_ : float
        Estimated ``P(observed 1 | true 0)``.
    noisy_posterior_train_ : float array of shape (n_instances,)
        The k'-NN estimates ``eta_hat(x_j)`` the rates come from.
    n_features_in_ : int
    classes_ : int array ``[0, 1]``
    """

    def __init__(self, n_neighbors: int = 20, *, n_neighbors_noise: int = 20) -> None:
        self.n_neighbors = n_neighbors
        self.n_neighbors_noise = n_neighbors_noise

    def fit(self, X: Any, y: Any) -> RkNNClassifier:
        """Store the data and estimate the noise proportions with the k'-NN.

        Parameters
        ----------
        X : array of shape (n_instances, n_features)
        y : array of shape (n_instances,) in {0, 1}, or bool one-hot of shape (n_instances, 2)
            Observed labels; column 1 of a one-hot matrix is the positive class.

        Returns
        -------
        self : RkNNClassifier
        """
        check_scalar(self.n_neighbors, "n_neighbors", kind=Integral, min_value=1)
        check_scalar(self.n_neighbors_noise, "n_neighbors_noise", kind=Integral, min_value=1)
        X = check_features(X, name="X")
        y = _check_binary_labels(y, X.shape[0])
        n = X.shape[0]
        if self.n_neighbors > n:
            raise InvalidInput(f"n_neighbors={self.n_neighbors} is larger than the number of training instances ({n})")
        if self.n_neighbors_noise >= n:
            raise InvalidInput(
                f"n_neighbors_noise={self.n_neighbors_noise} must be smaller than "
                f"the number of training instances ({n})"
            )
        idx, _ = knn_graph(X, k=self.n_neighbors_noise, exclude_self=True)
        eta_train = (y + y[idx].sum(axis=1)) / (self.n_neighbors_noise + 1)
        self.X_ = X
        self.y_ = y
        self.noisy_posterior_train_ = eta_train
        self.tau_neg_ = float(eta_train.min())
        self.tau_pos_ = float((1.0 - eta_train).min())
        self.n_features_in_ = X.shape[1]
        self.classes_ = np.array([0, 1])
        return self

    def noisy_posterior(self, X: Any) -> np.ndarray:
        """``eta_hat(x)``: fraction of observed positives among the k nearest training rows.

        Parameters
        ----------
        X : array of shape (n_targets, n_features)

        Returns
        -------
        eta_hat : float array of shape (n_targets,)
        """
        X = check_query(self, X, attribute="y_")
        idx, _ = knn_graph(self.X_, X, k=self.n_neighbors)
        eta_hat: np.ndarray = self.y_[idx].mean(axis=1)
        return eta_hat

    def predict(self, X: Any) -> np.ndarray:
        """k-NN decision with the one-sided noise correction.

        Parameters
        ----------
        X : array of shape (n_targets, n_features)

        Returns
        -------
        labels : int array of shape (n_targets,) in {0, 1}
        """
        eta_hat = self.noisy_posterior(X)
        return _rknn_decision(eta_hat, self.tau_pos_, self.tau_neg_)


def _rknn_decision(eta_hat: np.ndarray, tau_pos: float, tau_neg: float) -> np.ndarray:
    """Steps 4-10 of Algorithm 1 on noisy posteriors ``eta_hat``."""
    labels = (eta_hat >= 0.5).astype(np.intp)
    margin = eta_hat - 0.5
    half_gap = (tau_neg - tau_pos) / 2.0
    if tau_neg > tau_pos:
        labels[(margin > 0) & (margin < half_gap)] = 0
    elif tau_neg < tau_pos:
        labels[(margin > half_gap) & (margin < 0)] = 1
    return labels
