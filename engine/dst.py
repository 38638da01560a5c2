"""DST-PLL: a k-nearest-neighbour partial-label classifier with a reject option.

Every neighbour is a piece of evidence (a basic probability assignment, bpa) about an
instance's label; Yager's rule combines the evidence, the prediction is the label with the
largest singleton belief, and it is *accepted* only when that belief exceeds the
plausibility of every other label (Fuchs, Kalinke & Böhm, Algorithm 1 and Section 4.2).

What is computed
----------------
For an instance with own set ``S`` (its candidate set when it is a training instance being
disambiguated, all labels for a new instance) and a neighbour with candidate set ``N``:

* the neighbour is skipped when ``S ∩ N`` is empty or equal to ``S`` (bpa ``m(S) = 1``);
* otherwise it contributes ``m(S ∩ N) = 1/2`` and ``m(S) = 1/2``.

Yager's rule combines all ``m`` active neighbours conjunctively (products of masses go to
the intersection of the focal sets; conflict gathers on the empty set and stays there);
only after the last neighbour is the empty-set mass moved to ``S``; focal sets with mass
below ``1e-10`` are then dropped and the rest renormalised. Belief of ``y`` is ``m({y})``,
plausibility of ``y`` the total mass of the focal sets holding ``y``.

How it is computed
------------------
Before the conflict move, the combined focal set of every subset ``T`` of the active
neighbours is ``S ∩ (∩_{j∈T} N_j)`` with mass ``2**-m``, so the combination is an
enumeration of ``2**m`` intersections, not a sequence of hash-map merges. Candidate sets are
packed into 64-bit words (``ceil(M / 64)`` words per set, so any number of labels works) and
the intersections of all rows with the same ``m`` are built at once by doubling
(``inter = [inter, inter & A_j]``). Singleton beliefs count the single-bit intersections;
plausibility needs no enumeration: ``pl(y) = 2**(c_y - m) + m(∅)`` for ``y ∈ S``, where
``c_y`` counts the active neighbours whose set holds ``y``. All masses are multiples of
``2**-m`` and therefore exact in floating point; with ``m ≤ 16`` no mass can fall below the
``1e-10`` pruning threshold, so pruning is a no-op on this path. Rows with more than 16
active neighbours use a sequential combination that groups equal focal sets in a hash map
(the paper's formulation) and does prune.

Complexity: the neighbour search, plus ``O(n · 2**m · ceil(M/64))`` for the combination
with ``m ≤ k`` (the paper bounds the focal sets by ``min(2**k, 2**M)``); for the default
``k = 10`` the search dominates.

Random tie-breaking (one ``rng.random((n_rows, 2))`` per batch; see ``_decide``) makes a
prediction a *guess*; guesses are never accepted.

References
----------
.. [1] T. Fuchs, F. Kalinke and K. Böhm, "Partial-Label Learning with a Reject Option",
       Transactions on Machine Learning Research, 2025. arXiv:2402.00592.
.. [2] R. R. Yager, "On the Dempster-Shafer framework and new combination rules",
       Information Sciences 41(2), 93-137, 1987.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.neighbors import NearestNeighbors

from engine._kernels import pack_sets
from engine._validation import (
    check_candidates,
    check_is_fitted,
    check_query,
    check_scalar,
    check_training_data,
)
from engine.dst_evidence import (
    ENUMERATION_MAX_ACTIVE,
    PRUNE_BELOW,
    Evidence,
    FixedDraws,
    active_sets,
    check_rows,
    check_training_graph,
    combine,
    decide,
    decisions,
    labels_of_key,
    new_instance_sets,
    popcount,
    predict_from_neighbors,
    sequential_mass,
    set_key,
    transductive_decisions,
    transductive_evidence,
)
from engine.exceptions import InvalidInput
from engine.neighbors import ReverseIndex

# The kernels and the two functions that need no classifier live in engine.dst_evidence (no
# scikit-learn import); they are re-exported here, where they were first defined.
__all__ = ["DstPllClassifier", "transductive_decisions", "predict_from_neighbors", "PRUNE_BELOW"]


class DstPllClassifier(BaseEstimator):
    """Dempster-Shafer k-NN partial-label classifier with a reject option (DST-PLL [1]_).

    Parameters
    ----------
    n_neighbors : int, default=10
        Number of Euclidean nearest neighbours whose candidate sets are combined.
    random_state : None, int or numpy.random.Generator, default=None
        Seed of the random tie-breaking. Each ``fit`` and each prediction call starts a new
        ``numpy.random.default_rng(random_state)``, so an integer seed gives the same
        labels for the same input every time.

    Attributes
    ----------
    n_features_in_ : int
        Number of features seen in ``fit``.
    n_labels_ : int
        Number of labels ``M`` (columns of the candidate matrix).
    classes_ : ndarray of shape (n_labels,)
        The labels ``0..M-1``.
    candidates_ : ndarray of shape (n_instances, n_labels)
        The training candidate matrix.
    disambiguate_ : ndarray of shape (n_instances,)
        Transductive label of every training instance: its own candidate set combined with
        the evidence of its ``n_neighbors`` nearest *other* training instances.
    disambiguate_accepted_ : ndarray of shape (n_instances,)
        Whether each of those labels passes the reject option (and is not a guess).
    disambiguate_guess_ : ndarray of shape (n_instances,)
        Whether each of those labels was drawn at random among ties.
    disambiguate_belief_, disambiguate_plausibility_ : ndarray of shape (n_instances, n_labels)
        Singleton belief and plausibility behind each transductive label.
    train_neighbors_ : ndarray of shape (n_instances, n_neighbors)
        Each training instance's nearest other training instances.
    disambiguate_margin_ : ndarray of shape (n_instances,)
        ``bel(t) - max_{y≠t} pl(y)`` of each transductive label (see :meth:`decision_margin`).

    Notes
    -----
    A prediction is a *guess* when it was drawn at random: several labels tie for the
    largest singleton belief, or no singleton has any mass and the label was drawn from the
    heaviest focal set. Guesses are never accepted (Theorem 4.2 (i) of [1]_ shows their
    margin is not positive). An accepted label ``ŷ`` has ``bel(ŷ) > pl(y)`` for every
    ``y ≠ ŷ``, so every probability distribution in the credal set of the combined mass
    puts more probability on ``ŷ`` than on any other label (Theorem 4.2 (ii)).

    References
    ----------
    .. [1] T. Fuchs, F. Kalinke and K. Böhm, "Partial-Label Learning with a Reject Option",
           Transactions on Machine Learning Research, 2025.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0], [0.1], [0.2], [5.0], [5.1], [5.2]])
    >>> Y = np.array([[1, 0, 0], [1, 1, 0], [1, 0, 1], [0, 1, 1], [0, 1, 0], [0, 1, 0]], dtype=bool)
    >>> clf = DstPllClassifier(n_neighbors=3, random_state=0).fit(X, Y)
    >>> clf.predict_with_reject([[0.05], [5.05]])
    (array([0, 1]), array([ True,  True]))
    >>> bel, pl = clf.belief_plausibility([[0.05]])
    >>> bel.tolist(), pl.tolist()
    ([[0.625, 0.0, 0.0]], [[1.0, 0.25, 0.25]])
    """

    def __init__(self, n_neighbors: int = 10, *, random_state: Any = None) -> None:
        self.n_neighbors = n_neighbors
        self.random_state = random_state

    def fit(self, X: Any, Y: Any, *, neighbors: Any = None) -> DstPllClassifier:
        """Index the training set and disambiguate every training instance.

        Parameters
        ----------
        X : array-like of shape (n_instances, n_features)
            Finite training features.
        Y : array-like of shape (n_instances, n_labels)
            Boolean (or 0/1) candidate matrix; every row holds at least one candidate.
        neighbors : int array-like of shape (n_instances, n_neighbors), optional
            Each training instance's nearest *other* training instances, when they are known
            already (e.g. a graph from :func:`engine.neighbors.knn_graph` with
            ``exclude_self=True`` that was stored): the training set is then disambiguated on
            them and no neighbour search runs. By default they are searched exactly.

        Returns
        -------
        self : DstPllClassifier
        """
        X, Y = check_training_data(X, Y)
        check_scalar(self.n_neighbors, "n_neighbors", kind=Integral, min_value=1)
        if self.n_neighbors >= X.shape[0]:
            raise InvalidInput(
                f"n_neighbors={self.n_neighbors} must be smaller than the number of training instances "
                f"({X.shape[0]}): each instance is combined with its n_neighbors nearest other instances"
            )
        if neighbors is not None:
            neighbors = check_training_graph(neighbors, X.shape[0], int(self.n_neighbors))
        # The index serves predictions for new instances; fitting it searches nothing.
        self.nn_ = NearestNeighbors(n_neighbors=int(self.n_neighbors)).fit(X)
        self.candidates_ = Y
        self.n_features_in_ = X.shape[1]
        self.n_labels_ = Y.shape[1]
        self.classes_ = np.arange(Y.shape[1])
        # Without a query, scikit-learn leaves every row out of its own neighbourhood by index
        # (not by distance), so exact duplicates stay neighbours of each other.
        self.train_neighbors_ = self.nn_.kneighbors(return_distance=False) if neighbors is None else neighbors
        self._reverse_neighbors: ReverseIndex | None = None  # built on the first update_candidates
        n = Y.shape[0]
        self.disambiguate_ = np.empty(n, dtype=np.intp)
        self.disambiguate_guess_ = np.empty(n, dtype=bool)
        self.disambiguate_accepted_ = np.empty(n, dtype=bool)
        # Kept for the expert's reject queue, which shows why a training label is refused.
        self.disambiguate_belief_ = np.empty(Y.shape)
        self.disambiguate_plausibility_ = np.empty(Y.shape)
        self.disambiguate_margin_ = np.empty(n)
        self._disambiguate(np.arange(n))
        return self

    def _disambiguate(self, rows: np.ndarray) -> None:
        """Recompute the ``disambiguate_*`` attributes of training rows ``rows``."""
        evidence = transductive_evidence(self.candidates_, self.train_neighbors_, rows)
        labels, guess, accepted, margin = decisions(evidence, np.random.default_rng(self.random_state))
        self.disambiguate_[rows] = labels
        self.disambiguate_guess_[rows] = guess
        self.disambiguate_accepted_[rows] = accepted
        self.disambiguate_belief_[rows] = evidence.belief
        self.disambiguate_plausibility_[rows] = evidence.plausibility
        self.disambiguate_margin_[rows] = margin

    def update_candidates(self, rows: Any, candidates: Any) -> np.ndarray:
        """Change some training candidate sets and redo only the disambiguations they touch.

        After an expert settles instances, only those instances and the ones that have them
        among their neighbours can change, so this costs O(affected · k · M) instead of a
        refit. Beliefs, plausibilities, margins and accepted labels then equal a refit on the
        new sets exactly; a *guess* (a tie drawn at random) may be drawn differently.

        Parameters
        ----------
        rows : array-like of int, shape (r,)
            Training rows to change.
        candidates : array-like of shape (r, n_labels), bool
            Their new candidate sets.

        Returns
        -------
        affected : ndarray of int
            The training rows whose ``disambiguate_*`` values were recomputed.
        """
        self.check_fitted()
        rows = check_rows(rows, self.candidates_.shape[0])
        new = check_candidates(np.atleast_2d(candidates), name="candidates", n_rows=rows.size)
        if new.shape[1] != self.n_labels_:
            raise InvalidInput(
                f"candidates has {new.shape[1]} label columns but the classifier was fitted with {self.n_labels_}"
            )
        Y = self.candidates_.copy()  # never write into the array the caller passed to fit
        Y[rows] = new
        self.candidates_ = Y
        if self._reverse_neighbors is None:
            self._reverse_neighbors = ReverseIndex(self.train_neighbors_, Y.shape[0])
        affected = np.union1d(rows, self._reverse_neighbors.rows_holding_any(rows))
        self._disambiguate(affected)
        return affected

    # -- prediction ---------------------------------------------------------------------

    def check_fitted(self) -> None:
        """Raise :class:`~engine.exceptions.NotFittedError` unless :meth:`fit` has run."""
        check_is_fitted(self, "nn_")

    def _query_sets(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """Own sets and neighbour sets of new instances (validated here)."""
        X = check_query(self, X, attribute="nn_")
        return new_instance_sets(self.candidates_, self.nn_.kneighbors(X, return_distance=False))

    def _evidence(self, X: Any) -> Evidence:
        return combine(*self._query_sets(X))

    def decide_with_draws(self, X: Any, draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``predict_with_reject`` with the tie-breaking uniforms given instead of drawn.

        ``predict_with_reject(X)`` equals ``decide_with_draws(X, rng.random((len(X), 2)))``
        with ``rng = numpy.random.default_rng(random_state)``; splitting ``X`` into chunks
        and the draws alike gives the same labels, which is how
        :func:`engine.distributed.distributed_predict_with_reject` reproduces the
        single-process stream on workers.

        Parameters
        ----------
        X : array-like of shape (n_targets, n_features)
        draws : float array of shape (n_targets, 2)
            Uniforms in [0, 1): column 0 picks among tied labels or focal sets, column 1 a
            label inside a focal set.

        Returns
        -------
        labels : ndarray of shape (n_targets,)
        accepted : ndarray of shape (n_targets,)
        """
        evidence = self._evidence(X)
        draws = np.asarray(draws, dtype=np.float64)
        if draws.shape != (evidence.belief.shape[0], 2):
            raise InvalidInput(f"draws must have shape ({evidence.belief.shape[0]}, 2), got {draws.shape}")
        labels, _, accepted, _ = decisions(evidence, FixedDraws(draws))
        return labels, accepted

    def predict_with_reject(
        self, X: Any, *, return_guess: bool = False
    ) -> tuple[np.ndarray, np.ndarray] | tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Predict labels and whether each prediction is accepted by the reject option.

        Parameters
        ----------
        X : array-like of shape (n_targets, n_features)
            New instances.
        return_guess : bool, default=False
            Also return which labels were drawn at random among ties.

        Returns
        -------
        labels : ndarray of shape (n_targets,)
            Predicted labels.
        accepted : ndarray of shape (n_targets,)
            True when ``bel(ŷ) - max_{y≠ŷ} pl(y) > 0`` and ``ŷ`` is not a guess.
        guess : ndarray of shape (n_targets,), only with ``return_guess=True``
            True when ``ŷ`` was drawn at random among tied labels or focal sets.
        """
        labels, guess, accepted, _ = decisions(self._evidence(X), np.random.default_rng(self.random_state))
        return (labels, accepted, guess) if return_guess else (labels, accepted)

    def predict(self, X: Any) -> np.ndarray:
        """Predict a label for every row of ``X`` (rejected ones included).

        Parameters
        ----------
        X : array-like of shape (n_targets, n_features)

        Returns
        -------
        labels : ndarray of shape (n_targets,)
        """
        return self.predict_with_reject(X)[0]

    def belief_plausibility(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """Singleton belief ``m({y})`` and plausibility of every label.

        Parameters
        ----------
        X : array-like of shape (n_targets, n_features)

        Returns
        -------
        belief : ndarray of shape (n_targets, n_labels)
        plausibility : ndarray of shape (n_targets, n_labels)
        """
        evidence = self._evidence(X)
        return evidence.belief, evidence.plausibility

    def decision_margin(self, X: Any) -> np.ndarray:
        """``bel(t) - max_{y≠t} pl(y)`` for ``t`` the label of largest belief (lowest index on ties).

        Positive exactly when the prediction is accepted, except for guesses, which are
        never accepted. The value does not depend on random tie-breaking.

        Parameters
        ----------
        X : array-like of shape (n_targets, n_features)

        Returns
        -------
        margin : ndarray of shape (n_targets,)
        """
        return decide(self._evidence(X), np.random.default_rng(0))[2]

    def mass_functions(self, X: Any = None) -> list[dict[frozenset[int], float]]:
        """The combined mass function of every row, as ``{focal set: mass}``.

        For inspection and tests; slow (one dict per row).

        Parameters
        ----------
        X : array-like of shape (n_targets, n_features), optional
            New instances; ``None`` gives the training instances as disambiguated by ``fit``.

        Returns
        -------
        masses : list of dict
            One dict per row mapping a frozenset of labels to its mass (only focal sets).
        """
        if X is None:
            self.check_fitted()
            own, neighbour_sets = self.candidates_, self.candidates_[self.train_neighbors_]
        else:
            own, neighbour_sets = self._query_sets(X)
        meet, active = active_sets(own, neighbour_sets)
        n_words = (self.n_labels_ + 63) // 64
        out = []
        for row in range(own.shape[0]):
            sets = meet[row][active[row]]
            if sets.shape[0] > ENUMERATION_MAX_ACTIVE:
                mass = sequential_mass(own[row], sets)
            else:
                inter = pack_sets(own[row], n_words)[None, :]
                for word in pack_sets(sets, n_words):
                    inter = np.concatenate([inter, inter & word], axis=0)
                inter[popcount(inter) == 0] = pack_sets(own[row], n_words)
                focal, count = np.unique(inter, axis=0, return_counts=True)
                mass = {set_key(f): float(np.ldexp(c, -sets.shape[0])) for f, c in zip(focal, count, strict=True)}
            out.append({frozenset(labels_of_key(key).tolist()): value for key, value in mass.items()})
        return out
