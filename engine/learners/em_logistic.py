"""EM logistic regression for partial labels: a linear model of the features that disambiguates.

The classifier is a multinomial logistic regression ``p(y | x) = softmax(W x + b)``. Its
training rows carry candidate sets, not labels, so it is fitted by expectation-maximisation
(Jin & Ghahramani, 2002): the E-step spreads each row over its candidates in proportion to the
current model, ``q(y | x) ∝ p(y | x) · [y ∈ S]``; the M-step fits ``W`` to those soft labels
(cross-entropy plus an L2 penalty, L-BFGS warm-started from the last step). A row with one
candidate is a plain labelled example. Features are standardised on the training rows.

Unlike the neighbour vote, the model sees the whole feature space at once, so it labels alike
items that are far apart (the segments of one recording, whose neighbours all carry the same
candidate set, say): winnow uses where it agrees with DST-PLL to find the items to certify
first (:class:`engine.lot_model.LotModel`).

Complexity: each M-step costs O(iterations · n · d · M) for n rows, d features and M labels.

References
----------
.. [1] R. Jin and Z. Ghahramani, "Learning with multiple labels", Advances in Neural
   Information Processing Systems 15 (NIPS 2002), 897-904.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
from scipy.optimize import minimize

from engine._validation import check_scalar, check_training_data
from engine.exceptions import NotFittedError

__all__ = ["EmLogisticPllClassifier", "project_on_principal_axes"]


class EmLogisticPllClassifier:
    """Multinomial logistic regression fitted to candidate sets by EM (Jin & Ghahramani, 2002).

    Not a scikit-learn ``BaseEstimator``: importing scikit-learn costs about a second, and a
    command that freezes a lot fits this model (:class:`engine.lot_model.LotModel`); the interface is the
    same (``fit``, ``predict_proba``, learned attributes ending in ``_``).

    Parameters
    ----------
    n_em_steps : int, default=5
        E-step / M-step rounds after the first fit to uniform soft labels.
    penalty : float, default=0.01
        L2 penalty on the weights (not the intercepts), per training row.
    max_iter : int, default=100
        L-BFGS iterations per M-step.

    Attributes
    ----------
    coef_ : float array of shape (n_features, n_labels)
        Weights on the standardised features.
    intercept_ : float array of shape (n_labels,)
    candidate_proba_ : float array of shape (n_instances, n_labels)
        The last E-step: each training row's probabilities restricted to its candidates.

    Examples
    --------
    Three clusters, one per label; every item but the first five of each cluster also carries
    one of the other labels, drawn at random. EM finds which candidate the features explain
    (all but one item of the third cluster, which lies among the first):

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(centre, 1.0, (40, 2)) for centre in ([-3, 0], [3, 0], [0, 4])])
    >>> truth = np.repeat([0, 1, 2], 40)
    >>> Y = np.zeros((120, 3), bool); Y[np.arange(120), truth] = True
    >>> ambiguous = np.arange(120) % 40 >= 5
    >>> Y[ambiguous, (truth[ambiguous] + rng.integers(1, 3, ambiguous.sum())) % 3] = True
    >>> model = EmLogisticPllClassifier().fit(X, Y)
    >>> np.flatnonzero(model.candidate_proba_.argmax(axis=1) != truth)
    array([119])
    >>> model.predict_proba(np.array([[3.0, 0.0]])).argmax(axis=1)
    array([1])
    """

    def __init__(self, n_em_steps: int = 5, penalty: float = 0.01, max_iter: int = 100) -> None:
        self.n_em_steps = n_em_steps
        self.penalty = penalty
        self.max_iter = max_iter

    def fit(self, X: Any, Y: Any) -> EmLogisticPllClassifier:
        """Fit to features ``X`` (n_instances, n_features) and candidate sets ``Y`` (bool,
        (n_instances, n_labels), every row at least one candidate)."""
        X, Y = check_training_data(X, Y)
        check_scalar(self.n_em_steps, "n_em_steps", kind=Integral, min_value=0)
        check_scalar(self.penalty, "penalty", kind=Real, min_value=0.0)
        check_scalar(self.max_iter, "max_iter", kind=Integral, min_value=1)
        self.mean_ = X.mean(axis=0)
        scale = X.std(axis=0)
        self.scale_ = np.where(scale > 0, scale, 1.0)
        Xb = self._design(X)
        n, n_labels = Xb.shape[0], Y.shape[1]
        soft = Y / Y.sum(axis=1, keepdims=True)
        weights = np.zeros((Xb.shape[1], n_labels))
        for _ in range(int(self.n_em_steps) + 1):
            weights = self._m_step(Xb, soft, weights, n)
            proba = _softmax(Xb @ weights) * Y
            soft = proba / np.maximum(proba.sum(axis=1, keepdims=True), np.finfo(np.float64).tiny)
        self.coef_, self.intercept_ = weights[:-1], weights[-1]
        self.candidate_proba_ = soft
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        """``p(y | x)`` for every label, rows of ``X``."""
        if not hasattr(self, "coef_"):
            raise NotFittedError("EmLogisticPllClassifier is not fitted yet: call fit first")
        weights = np.vstack([self.coef_, self.intercept_])
        return _softmax(self._design(np.asarray(X, dtype=np.float64)) @ weights)

    def _design(self, X: np.ndarray) -> np.ndarray:
        return np.hstack([(X - self.mean_) / self.scale_, np.ones((X.shape[0], 1))])

    def _m_step(self, Xb: np.ndarray, soft: np.ndarray, start: np.ndarray, n: int) -> np.ndarray:
        shape, penalty = start.shape, float(self.penalty)

        def loss_and_gradient(flat: np.ndarray) -> tuple[float, np.ndarray]:
            weights = flat.reshape(shape)
            proba, log_p = _softmax_and_log(Xb @ weights)
            loss = -(soft * log_p).sum() / n + penalty * (weights[:-1] ** 2).sum()
            gradient = Xb.T @ (proba - soft) / n
            gradient[:-1] += 2.0 * penalty * weights[:-1]
            return float(loss), gradient.ravel()

        result = minimize(
            loss_and_gradient, start.ravel(), jac=True, method="L-BFGS-B", options={"maxiter": int(self.max_iter)}
        )
        return np.asarray(result.x).reshape(shape)


def project_on_principal_axes(
    fit_on: np.ndarray, predict_on: np.ndarray, n_components: int
) -> tuple[np.ndarray, np.ndarray]:
    """Both feature arrays on the first ``n_components`` principal axes of ``fit_on`` (centred
    on its mean), or unchanged when they have no more columns than that.

    What keeps a fit of this model about a second at 100,000 items and many features
    (:class:`engine.lot_model.LotModel`, :func:`engine.suspicion.feature_evidence`). The axes
    read the features only, never a label.

    Examples
    --------
    >>> X = np.array([[0.0, 0.0, 1.0], [2.0, 0.0, 1.0], [4.0, 0.0, 1.0]])
    >>> fit, new = project_on_principal_axes(X, X[:1], 1)
    >>> np.abs(fit).round(3).ravel().tolist(), np.abs(new).round(3).ravel().tolist()
    ([2.0, 0.0, 2.0], [2.0])
    """
    if fit_on.shape[1] <= n_components:
        return fit_on, predict_on
    centre = fit_on.mean(axis=0)
    _, _, components = np.linalg.svd(fit_on - centre, full_matrices=False)
    basis = components[:n_components].T
    return (fit_on - centre) @ basis, (predict_on - centre) @ basis


def _softmax(z: np.ndarray) -> np.ndarray:
    return _softmax_and_log(z)[0]


def _softmax_and_log(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise softmax of ``z`` and its log, shifted by each row's maximum so that nothing
    overflows. Written out rather than with ``scipy.special.logsumexp``, whose checks cost two
    thirds of a fit's time on lost (the loss is evaluated about 300 times per fit)."""
    shifted = z - z.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    total = exp.sum(axis=1, keepdims=True)
    return exp / total, shifted - np.log(total)
