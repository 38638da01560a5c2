"""EM logistic regression for partial labels (engine.learners.EmLogisticPllClassifier) against
oracles: with one candidate per row it is plain L2-penalised multinomial logistic regression
(scikit-learn's, at the matching C), and every E-step keeps each row inside its candidate set."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import softmax
from sklearn.linear_model import LogisticRegression

from engine.exceptions import InvalidInput, NotFittedError
from engine.learners import EmLogisticPllClassifier


def problem(seed: int, n: int, d: int, n_labels: int, extra: float):
    rng = np.random.default_rng(seed)
    centres = rng.normal(0.0, 2.0, (n_labels, d))
    truth = np.r_[np.arange(n_labels), rng.integers(0, n_labels, n - n_labels)]
    X = centres[truth] + rng.normal(0.0, 1.0, (n, d))
    Y = np.zeros((n, n_labels), dtype=bool)
    Y[np.arange(n), truth] = True
    Y |= rng.random((n, n_labels)) < extra
    return X, Y, truth


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(30, 120),
    d=st.integers(1, 5),
    n_labels=st.integers(2, 4),
    penalty=st.sampled_from([0.01, 0.1]),
)
def test_with_one_candidate_per_row_it_is_multinomial_logistic_regression(seed, n, d, n_labels, penalty):
    X, Y, truth = problem(seed, n, d, n_labels, extra=0.0)
    ours = EmLogisticPllClassifier(penalty=penalty, max_iter=500).fit(X, Y)
    Xs = (X - X.mean(axis=0)) / np.where(X.std(axis=0) > 0, X.std(axis=0), 1.0)
    # scikit-learn minimises ½‖W‖² + C·Σ loss, ours Σ loss / n + penalty·‖W‖²: C = 1 / (2·penalty·n).
    # With two labels it fits one weight vector w = w₁ − w₀, and ours settles at w₀ = −w₁, where
    # ‖w₀‖² + ‖w₁‖² = ½‖w‖²: C = 1 / (penalty·n).
    C = 1.0 / (2.0 * penalty * n) if n_labels > 2 else 1.0 / (penalty * n)
    oracle = LogisticRegression(C=C, tol=1e-10, max_iter=5_000).fit(Xs, truth)
    expected = np.zeros((n, n_labels))
    expected[:, oracle.classes_] = oracle.predict_proba(Xs)
    np.testing.assert_allclose(ours.predict_proba(X), expected, atol=2e-3)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(20, 80), n_labels=st.integers(2, 5), extra=st.floats(0.1, 0.8))
def test_the_e_step_stays_in_each_candidate_set_and_sums_to_one(seed, n, n_labels, extra):
    X, Y, _ = problem(seed, n, 3, n_labels, extra)
    model = EmLogisticPllClassifier().fit(X, Y)
    q = model.candidate_proba_
    assert (q[~Y] == 0.0).all()
    np.testing.assert_allclose(q.sum(axis=1), 1.0)
    p = model.predict_proba(X)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    # The last E-step is the model's probabilities renormalised over each set.
    np.testing.assert_allclose(q, (p * Y) / (p * Y).sum(axis=1, keepdims=True), atol=1e-12)


def test_em_recovers_labels_that_the_features_explain_and_is_deterministic():
    X, Y, truth = problem(3, 600, 4, 5, extra=0.35)
    first = EmLogisticPllClassifier().fit(X, Y)
    again = EmLogisticPllClassifier().fit(X, Y)
    np.testing.assert_array_equal(first.coef_, again.coef_)
    ambiguous = Y.sum(axis=1) > 1
    by_em = first.candidate_proba_.argmax(axis=1)[ambiguous] == truth[ambiguous]
    by_chance = (1.0 / Y[ambiguous].sum(axis=1)).mean()
    assert by_em.mean() > 0.9 > by_chance + 0.3


def test_misuse_is_refused_with_a_clear_error():
    with pytest.raises(NotFittedError):
        EmLogisticPllClassifier().predict_proba(np.zeros((1, 2)))
    with pytest.raises(InvalidInput, match="penalty"):
        EmLogisticPllClassifier(penalty=-1.0).fit(np.zeros((2, 1)), np.eye(2, dtype=bool))
    with pytest.raises(InvalidInput, match="empty candidate set"):
        EmLogisticPllClassifier().fit(np.zeros((2, 1)), np.array([[True, False], [False, False]]))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n_labels=st.integers(2, 5), scale=st.sampled_from([1.0, 1e3, 1e6]))
def test_probabilities_are_the_softmax_of_the_linear_scores_even_far_from_the_data(seed, n_labels, scale):
    """The softmax is written out in the engine; scipy's (log-sum-exp) is the oracle, on points far
    enough out that an unshifted exponential would overflow."""
    X, Y, _ = problem(seed, 60, 3, n_labels, extra=0.3)
    model = EmLogisticPllClassifier().fit(X, Y)
    far = np.random.default_rng(seed).normal(0.0, scale, (20, 3))
    scores = ((far - X.mean(axis=0)) / X.std(axis=0)) @ model.coef_ + model.intercept_
    proba = model.predict_proba(far)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba, softmax(scores, axis=1), rtol=1e-9, atol=1e-12)
