"""PL-kNN: the k-nearest-neighbour vote with partially labelled neighbours.

Every one of the ``k`` nearest training instances adds its vote weight to *every* label of
its candidate set; the prediction is the label with the largest total (ties broken at
random with ``random_state``). The normalised totals (:meth:`PlKnnClassifier.vote_scores`)
serve as class-membership scores for uncertainty-based active learning.

Complexity: ``fit`` stores the data (O(n d)); ``predict`` for m targets costs one exact
Euclidean neighbour search (scikit-learn ``NearestNeighbors``) plus O(m k M) for the vote.

References
----------
.. [1] E. Hüllermeier and J. Beringer, "Learning from ambiguously labeled examples",
   Intelligent Data Analysis 10(5), 419-439, 2006.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator

from engine._validation import check_candidates, check_features, check_scalar
from engine.exceptions import InvalidInput, NotFittedError
from engine.neighbors import knn_graph

__all__ = ["PlKnnClassifier"]


def _check_is_fitted(estimator: BaseEstimator, attribute: str) -> None:
    if not hasattr(estimator, attribute):
        raise NotFittedError(
            f"This {type(estimator).__name__} instance is not fitted yet; call 'fit' before using it."
        )


def _check_training_data(X: Any, Y: Any) -> tuple[np.ndarray, np.ndarray]:
    """Validate a training pair: finite X (n, d) and a candidate matrix Y (n, M)."""
    X = check_features(X, name="X")
    Y = check_candidates(Y, name="Y", n_rows=X.shape[0])
    return X, Y


def _check_query(X: Any, n_features: int) -> np.ndarray:
    X = check_features(X, name="X")
    if X.shape[1] != n_features:
        raise InvalidInput(f"X has {X.shape[1]} features but the estimator was fitted with {n_features}")
    return X


def _argmax_random_ties(scores: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Row-wise argmax; among exactly tied maxima pick one uniformly at random."""
    is_max = scores == scores.max(axis=1, keepdims=True)
    keys = np.where(is_max, rng.random(scores.shape), -1.0)
    return keys.argmax(axis=1)


class PlKnnClassifier(BaseEstimator):
    """Weighted k-NN vote over candidate sets (Hüllermeier & Beringer, 2006).

    Parameters
    ----------
    n_neighbors : int, default=10
        Number of neighbours that vote.
    weights : {"uniform", "distance"} or callable, default="uniform"
        Vote weight of a neighbour, see :func:`engine.neighbors.neighbor_weights`.
    random_state : int, Generator or None, default=None
        Seed of the tie-breaking in :meth:`predict`. An int gives the same predictions on
        every call.

    Attributes
    ----------
    X_ : array of shape (n_instances, n_features)
        Training features.
    Y_ : bool array of shape (n_instances, n_labels)
        Training candidate sets.
    n_labels_ : int
        Number of labels M.
    n_features_in_ : int
        Number of features.
    """

    def __init__(self, n_neighbors: int = 10, *, weights: Any = "uniform", random_state: Any = None) -> None:
        self.n_neighbors = n_neighbors
        self.weights = weights
        self.random_state = random_state

    def fit(self, X: Any, Y: Any) -> "PlKnnClassifier":
        """Store the training data.

        Parameters
        ----------
        X : array of shape (n_instances, n_features)
            Training features.
        Y : bool array of shape (n_instances, n_labels)
            Candidate sets, every row non-empty.

        Returns
        -------
        self : PlKnnClassifier
        """
        check_scalar(self.n_neighbors, "n_neighbors", kind=Integral, min_value=1)
        if not (self.weights in ("uniform", "distance") or callable(self.weights)):
            raise InvalidInput(f"weights must be 'uniform', 'distance' or a callable, got {self.weights!r}")
        X, Y = _check_training_data(X, Y)
        if self.n_neighbors > X.shape[0]:
            raise InvalidInput(f"n_neighbors={self.n_neighbors} is larger than the number of training instances ({X.shape[0]})")
        self.X_ = X
        self.Y_ = Y
        self.n_labels_ = Y.shape[1]
        self.n_features_in_ = X.shape[1]
        return self

    def votes(self, X: Any) -> np.ndarray:
        """Weighted vote totals: ``votes[t, l]`` sums the weights of neighbours holding ``l``.

        Parameters
        ----------
        X : array of shape (n_targets, n_features)

        Returns
        -------
        votes : float array of shape (n_targets, n_labels)
        """
        _check_is_fitted(self, "Y_")
        X = _check_query(X, self.n_features_in_)
        idx, w = knn_graph(self.X_, X, k=self.n_neighbors, weights=self.weights)
        return np.einsum("tk,tkm->tm", w, self.Y_[idx].astype(np.float64))

    def vote_scores(self, X: Any) -> np.ndarray:
        """Vote totals normalised to sum to one per target (a ``predict_proba`` analogue).

        A target whose neighbours all carry weight zero gets uniform scores.

        Parameters
        ----------
        X : array of shape (n_targets, n_features)

        Returns
        -------
        scores : float array of shape (n_targets, n_labels)
            Non-negative, every row sums to 1.
        """
        votes = self.votes(X)
        total = votes.sum(axis=1, keepdims=True)
        uniform = np.full_like(votes, 1.0 / votes.shape[1])
        return np.where(total > 0, votes / np.where(total > 0, total, 1.0), uniform)

    def predict(self, X: Any) -> np.ndarray:
        """Label with the largest weighted vote; ties broken at random with ``random_state``.

        Parameters
        ----------
        X : array of shape (n_targets, n_features)

        Returns
        -------
        labels : int array of shape (n_targets,)
        """
        votes = self.votes(X)
        return _argmax_random_ties(votes, np.random.default_rng(self.random_state))
