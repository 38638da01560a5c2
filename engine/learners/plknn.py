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

from engine._kernels import argmax_random_ties, candidate_votes, normalise_rows
from engine._validation import check_choice, check_query, check_scalar, check_training_data
from engine.choices import WEIGHTINGS
from engine.exceptions import InvalidInput
from engine.neighbors import knn_graph

__all__ = ["PlKnnClassifier"]


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

    def fit(self, X: Any, Y: Any) -> PlKnnClassifier:
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
        if not callable(self.weights):
            check_choice(self.weights, "weights", WEIGHTINGS)
        X, Y = check_training_data(X, Y)
        if self.n_neighbors > X.shape[0]:
            raise InvalidInput(
                f"n_neighbors={self.n_neighbors} is larger than the number of training instances ({X.shape[0]})"
            )
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
        X = check_query(self, X, attribute="Y_")
        idx, w = knn_graph(self.X_, X, k=self.n_neighbors, weights=self.weights)
        return candidate_votes(idx, w, self.Y_)

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
        return normalise_rows(votes, np.full_like(votes, 1.0 / votes.shape[1]))

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
        return argmax_random_ties(votes, np.random.default_rng(self.random_state))
