"""Online linear learners for partial labels: Avg/Max Perceptron and Avg/Max Pegasos.

A linear model ``W`` (here ``coef_`` of shape (n_labels, n_features), the transpose of the
paper's d x K matrix) scores label ``i`` as ``w_i . x``. Examples arrive one at a time; with
candidate set ``Y`` and its complement ``Ybar`` the surrogate losses are

- average prediction hinge (APH, ``loss="avg"``):
  ``[1 - mean_{i in Y} w_i.x + max_{j in Ybar} w_j.x]_+``
- max prediction hinge (MPH, ``loss="max"``):
  ``[1 - max_{i in Y} w_i.x + max_{j in Ybar} w_j.x]_+``

and an update happens only when the loss is positive. With ``j* = argmax_{Ybar}``:

- Avg Perceptron (Algorithm 1): ``w_i += eta x / |Y|`` for every ``i in Y`` and
  ``w_{j*} -= eta x``. Algorithm 1 as printed writes ``1/|Ybar|`` for the candidate labels;
  we use ``1/|Y|``, which is what the sub-gradient (Eq. 4), the stated update
  ``w - eta grad L`` and the mistake-bound proof (Appendix A, ``sum tau^2 = 1/|Y| + 1``)
  all use - the printed ``|Ybar|`` is a typo.
- Max Perceptron (Algorithm 2): ``w_{i*} += eta x`` for ``i* = argmax_{Y}`` and
  ``w_{j*} -= eta x``.
- Avg/Max Pegasos (Algorithms 3-4): at round t (counting every example, updated or not)
  ``eta_t = 1/(lam t)``; if the loss is positive,
  ``W <- (1 - eta_t lam) W - eta_t grad L`` followed by the projection
  ``W <- min(1, (1/sqrt(lam)) / ||W||_F) W`` onto the ball of radius ``1/sqrt(lam)``;
  otherwise ``W`` is left unchanged (as in the paper's algorithms, no shrinkage then).

``W`` starts at zero. Ties in an argmax go to the lowest label index. When ``Y`` holds every
label, ``Ybar`` is empty, the maximum over it is minus infinity and the loss is zero, so
there is no update.

Guarantees (paper): Avg Perceptron makes at most ``2/gamma^2 + (1/c + 1) R^2/gamma^2``
mistakes on average-separable data (Theorem 1); Avg Pegasos has ``O(log T / T)`` average
regret (Theorem 3). Max variants have no proven bound (non-convex loss).

Complexity: O(d M) time per example (scores, update, and for Pegasos the scaling and the
Frobenius norm), O(d M) memory; ``partial_fit`` after each answer of a labelling session is
therefore cheap.

References
----------
.. [1] R. Bhattacharjee and N. Manwani, "Online Algorithms for Multiclass Classification
   using Partial Labels", PAKDD 2020 (arXiv:1912.11367), Algorithms 1-4.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator

from engine._validation import check_choice, check_n_features, check_query, check_scalar, check_training_data
from engine.exceptions import InvalidInput

__all__ = ["LOSSES", "OnlinePartialLabelPerceptron", "OnlinePartialLabelPegasos"]

#: The surrogate losses: average (``"avg"``) and maximum (``"max"``) prediction hinge.
LOSSES: tuple[str, ...] = ("avg", "max")


def _violators(scores: np.ndarray, cand: np.ndarray, loss: str) -> tuple[float, np.ndarray | int, int]:
    """Return (hinge loss, index or mask of the promoted labels, demoted label j*) for one example.

    ``loss == "avg"``: the promoted labels are the whole candidate mask.
    ``loss == "max"``: the promoted label is ``argmax_{i in Y} score``.
    When the complement is empty the loss is 0 and ``j*`` is -1.
    """
    outside = ~cand
    if not outside.any():
        return 0.0, cand, -1
    out_scores = np.where(outside, scores, -np.inf)
    j_star = int(out_scores.argmax())
    if loss == "avg":
        margin = scores[cand].mean() - scores[j_star]
        return max(0.0, 1.0 - margin), cand, j_star
    in_scores = np.where(cand, scores, -np.inf)
    i_star = int(in_scores.argmax())
    margin = scores[i_star] - scores[j_star]
    return max(0.0, 1.0 - margin), i_star, j_star


def _loss_gradient_step(W: np.ndarray, x: np.ndarray, promoted: np.ndarray | int, j_star: int, step: float) -> None:
    """In place ``W <- W - step * grad L`` for the APH (mask) or MPH (index) sub-gradient."""
    if isinstance(promoted, np.ndarray):
        W[promoted] += (step / promoted.sum()) * x
    else:
        W[promoted] += step * x
    W[j_star] -= step * x


class _OnlinePartialLabelBase(BaseEstimator):
    """Shared fit / partial_fit / decision_function / predict of the online learners."""

    def _check_params(self) -> None:
        check_choice(self.loss, "loss", LOSSES)
        check_scalar(self.n_epochs, "n_epochs", kind=Integral, min_value=1)
        if not isinstance(self.shuffle, (bool, np.bool_)):
            raise TypeError(f"shuffle must be a bool, got {self.shuffle!r}")
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise TypeError(f"fit_intercept must be a bool, got {self.fit_intercept!r}")

    def _augment(self, X: np.ndarray) -> np.ndarray:
        if self.fit_intercept:
            return np.hstack([X, np.ones((X.shape[0], 1))])
        return X

    def _reset(self, n_features: int, n_labels: int) -> None:
        self.coef_ = np.zeros((n_labels, n_features + bool(self.fit_intercept)))
        self.n_features_in_ = n_features
        self.n_labels_ = n_labels
        self.t_ = 0
        self.n_updates_ = 0

    def fit(self, X: Any, Y: Any) -> _OnlinePartialLabelBase:
        """Start from ``W = 0`` and make ``n_epochs`` passes over the examples.

        With the defaults (one epoch, no shuffling) this equals a fresh model updated by
        :meth:`partial_fit` on the rows of ``X`` in order, in any batching.

        Parameters
        ----------
        X : array of shape (n_instances, n_features)
        Y : bool array of shape (n_instances, n_labels)
            Candidate sets.

        Returns
        -------
        self
        """
        self._check_params()
        X, Y = check_training_data(X, Y)
        self._reset(X.shape[1], Y.shape[1])
        rng = np.random.default_rng(self.random_state)
        Xa = self._augment(X)
        for _ in range(self.n_epochs):
            order = rng.permutation(X.shape[0]) if self.shuffle else np.arange(X.shape[0])
            self._update_stream(Xa[order], Y[order])
        return self

    def partial_fit(self, X: Any, Y: Any, *, n_labels: int | None = None) -> _OnlinePartialLabelBase:
        """Update the model with the examples of ``X`` in row order, one at a time.

        Parameters
        ----------
        X : array of shape (n_instances, n_features)
        Y : bool array of shape (n_instances, n_labels)
            Candidate sets; its column count fixes the label space on the first call.
        n_labels : int, optional
            Expected number of labels; checked against ``Y`` (and the fitted model).

        Returns
        -------
        self
        """
        self._check_params()
        X, Y = check_training_data(X, Y)
        if n_labels is not None:
            check_scalar(n_labels, "n_labels", kind=Integral, min_value=1)
            if n_labels != Y.shape[1]:
                raise InvalidInput(f"Y has {Y.shape[1]} label columns but n_labels={n_labels}")
        if not hasattr(self, "coef_"):
            self._reset(X.shape[1], Y.shape[1])
        else:
            check_n_features(self, X)
            if Y.shape[1] != self.n_labels_:
                raise InvalidInput(
                    f"Y has {Y.shape[1]} label columns but {type(self).__name__} was fitted with {self.n_labels_}"
                )
        self._update_stream(self._augment(X), Y)
        return self

    def decision_function(self, X: Any) -> np.ndarray:
        """Linear scores ``w_i . x``.

        Parameters
        ----------
        X : array of shape (n_targets, n_features)

        Returns
        -------
        scores : float array of shape (n_targets, n_labels)
        """
        X = check_query(self, X, attribute="coef_")
        return self._augment(X) @ self.coef_.T

    def predict(self, X: Any) -> np.ndarray:
        """``argmax_i w_i . x`` (ties to the lowest label index).

        Parameters
        ----------
        X : array of shape (n_targets, n_features)

        Returns
        -------
        labels : int array of shape (n_targets,)
        """
        labels: np.ndarray = self.decision_function(X).argmax(axis=1)
        return labels

    def _update_stream(self, X: np.ndarray, Y: np.ndarray) -> None:
        for x, cand in zip(X, Y, strict=True):
            self._update_one(x, cand)


class OnlinePartialLabelPerceptron(_OnlinePartialLabelBase):
    """Avg Perceptron (``loss="avg"``) or Max Perceptron (``loss="max"``).

    Parameters
    ----------
    loss : {"avg", "max"}, default="avg"
        Average (APH, Algorithm 1) or max (MPH, Algorithm 2) prediction hinge loss.
    eta : float > 0, default=1.0
        Step size.
    n_epochs : int, default=1
        Passes over the data in :meth:`fit`.
    shuffle : bool, default=False
        Shuffle the examples before every epoch of :meth:`fit`.
    fit_intercept : bool, default=False
        Append a constant feature 1 (the paper's model has no bias).
    random_state : int, Generator or None
        Seed of the shuffling.

    Attributes
    ----------
    coef_ : array of shape (n_labels, n_features [+ 1])
        Row ``i`` is ``w_i``; the last column is the bias with ``fit_intercept``.
    n_labels_, n_features_in_ : int
    t_ : int
        Examples seen.
    n_updates_ : int
        Examples with positive loss (updates made).
    """

    def __init__(
        self,
        loss: str = "avg",
        *,
        eta: float = 1.0,
        n_epochs: int = 1,
        shuffle: bool = False,
        fit_intercept: bool = False,
        random_state: Any = None,
    ) -> None:
        self.loss = loss
        self.eta = eta
        self.n_epochs = n_epochs
        self.shuffle = shuffle
        self.fit_intercept = fit_intercept
        self.random_state = random_state

    def _check_params(self) -> None:
        super()._check_params()
        check_scalar(self.eta, "eta", kind=Real, min_value=0.0, include_min=False)

    def _update_one(self, x: np.ndarray, cand: np.ndarray) -> None:
        self.t_ += 1
        W = self.coef_
        value, promoted, j_star = _violators(W @ x, cand, self.loss)
        if value > 0.0:
            _loss_gradient_step(W, x, promoted, j_star, float(self.eta))
            self.n_updates_ += 1


class OnlinePartialLabelPegasos(_OnlinePartialLabelBase):
    """Avg Pegasos (``loss="avg"``) or Max Pegasos (``loss="max"``).

    Parameters
    ----------
    loss : {"avg", "max"}, default="avg"
        Average (APH, Algorithm 3) or max (MPH, Algorithm 4) prediction hinge loss.
    lam : float > 0, default=1e-2
        Regularisation constant λ; step ``1/(λ t)``, weights kept in ``||W|| <= 1/sqrt(λ)``.
    n_epochs, shuffle, fit_intercept, random_state
        As for :class:`OnlinePartialLabelPerceptron`; the round counter ``t`` keeps running
        across epochs and :meth:`partial_fit` calls.

    Attributes
    ----------
    coef_ : array of shape (n_labels, n_features [+ 1])
    n_labels_, n_features_in_ : int
    t_ : int
        Rounds so far (the ``t`` of the step size).
    n_updates_ : int
        Rounds with positive loss.
    """

    def __init__(
        self,
        loss: str = "avg",
        *,
        lam: float = 1e-2,
        n_epochs: int = 1,
        shuffle: bool = False,
        fit_intercept: bool = False,
        random_state: Any = None,
    ) -> None:
        self.loss = loss
        self.lam = lam
        self.n_epochs = n_epochs
        self.shuffle = shuffle
        self.fit_intercept = fit_intercept
        self.random_state = random_state

    def _check_params(self) -> None:
        super()._check_params()
        check_scalar(self.lam, "lam", kind=Real, min_value=0.0, include_min=False)

    def _update_one(self, x: np.ndarray, cand: np.ndarray) -> None:
        self.t_ += 1
        lam = float(self.lam)
        W = self.coef_
        value, promoted, j_star = _violators(W @ x, cand, self.loss)
        if value <= 0.0:
            return
        eta_t = 1.0 / (lam * self.t_)
        W *= 1.0 - eta_t * lam
        _loss_gradient_step(W, x, promoted, j_star, eta_t)
        norm = np.linalg.norm(W)
        radius = 1.0 / np.sqrt(lam)
        if norm > radius:
            W *= radius / norm
        self.n_updates_ += 1
