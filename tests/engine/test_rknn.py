"""RkNN: noise-rate estimates and the one-sided correction on a hand-built set, validation."""

import numpy as np
import pytest

from engine.exceptions import InvalidInput, NotFittedError
from engine.learners import RkNNClassifier
from engine.learners.rknn import _rknn_decision
from engine.noise import binary_flips


def _clusters(positives_per_cluster):
    """Three tight clusters of 10 points (at 0, 100, 200), with the given number of 1-labels each."""
    X = np.concatenate([c * 100.0 + 0.01 * np.arange(10) for c in range(3)])[:, None]
    y = np.concatenate([[1] * p + [0] * (10 - p) for p in positives_per_cluster])
    return X, y


def test_noise_estimates_and_correction_flip_a_positive_vote():
    # Cluster 0: 4/10 positive (a negative region whose labels were flipped at rate 0.4),
    # cluster 1: 10/10 positive, cluster 2: 6/10 positive.  With k' = 9 every training
    # point's estimate is its own cluster's fraction: eta_hat in {0.4, 1.0, 0.6}.
    X, y = _clusters([4, 10, 6])
    clf = RkNNClassifier(n_neighbors=10, n_neighbors_noise=9).fit(X, y)
    np.testing.assert_allclose(clf.noisy_posterior_train_, np.repeat([0.4, 1.0, 0.6], 10))
    assert clf.tau_neg_ == pytest.approx(0.4)  # min eta_hat
    assert clf.tau_pos_ == pytest.approx(0.0)  # min (1 - eta_hat)
    Q = np.array([[0.05], [100.05], [200.05]])
    np.testing.assert_allclose(clf.noisy_posterior(Q), [0.4, 1.0, 0.6])
    # Plain k-NN says (0, 1, 1). eta_hat - 1/2 = 0.1 for cluster 2 lies in (0, (0.4 - 0)/2)
    # -> corrected to 0; cluster 1 (margin 0.5) is outside the band and stays 1.
    assert clf.predict(Q).tolist() == [0, 1, 0]


def test_correction_towards_one_when_positives_are_flipped_more():
    # Mirror image: cluster 0 is 6/10 positive (1 - eta_hat = 0.4 -> tau_pos), cluster 1 all
    # negative (tau_neg = 0), cluster 2 4/10 positive: margin -0.1 in (-0.2, 0) -> predict 1.
    X, y = _clusters([6, 0, 4])
    clf = RkNNClassifier(n_neighbors=10, n_neighbors_noise=9).fit(X, y)
    assert clf.tau_pos_ == pytest.approx(0.4) and clf.tau_neg_ == pytest.approx(0.0)
    assert clf.predict([[0.05], [100.05], [200.05]]).tolist() == [1, 0, 1]


def test_decision_rule_boundaries():
    # Dyadic values, so the open band ends are hit exactly.
    eta = np.array([0.5, 0.5625, 0.6875, 0.75, 0.8125, 0.4375, 0.25])
    # tau_neg > tau_pos: the open band (0, 0.25) above 1/2 flips to 0; margins 0 and 0.25 stay 1.
    assert _rknn_decision(eta, 0.0, 0.5).tolist() == [1, 0, 0, 1, 1, 0, 0]
    # tau_neg < tau_pos: the open band (-0.25, 0) below 1/2 flips to 1; margin -0.25 stays 0.
    assert _rknn_decision(eta, 0.5, 0.0).tolist() == [1, 1, 1, 1, 1, 1, 0]
    # Equal rates: plain k-NN.
    assert _rknn_decision(eta, 0.2, 0.2).tolist() == [1, 1, 1, 1, 1, 0, 0]


def test_one_hot_input_is_equivalent():
    X, y = _clusters([4, 10, 6])
    one_hot = np.stack([y == 0, y == 1], axis=1)
    a = RkNNClassifier(10, n_neighbors_noise=9).fit(X, y)
    b = RkNNClassifier(10, n_neighbors_noise=9).fit(X, one_hot)
    assert (a.tau_pos_, a.tau_neg_) == (b.tau_pos_, b.tau_neg_)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


def test_estimated_rates_follow_the_true_asymmetry():
    # Two well separated Gaussian classes, flips tau_pos=0.35, tau_neg=0.05: the estimate of
    # tau_pos must exceed that of tau_neg (the assignment of Eq. (1), not Eq. (5) as printed).
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 400)
    X = rng.normal(size=(800, 2)) + 6.0 * y[:, None]
    noisy = binary_flips(y, tau_pos=0.35, tau_neg=0.05, seed=1)
    clf = RkNNClassifier(n_neighbors=30, n_neighbors_noise=60).fit(X, noisy)
    # The minimum-based estimates are rough (the paper's Table 4 says so too); only the
    # ordering and the sign of the correction matter for the decision.
    assert clf.tau_pos_ > clf.tau_neg_ + 0.1
    Xte = rng.normal(size=(400, 2)) + 6.0 * np.repeat([0, 1], 200)[:, None]
    assert (clf.predict(Xte) == np.repeat([0, 1], 200)).mean() > 0.95


@pytest.mark.parametrize("method", ["predict", "noisy_posterior"])
def test_not_fitted(method):
    with pytest.raises(NotFittedError):
        getattr(RkNNClassifier(), method)([[0.0]])


@pytest.mark.parametrize(
    ("params", "y", "exc", "match"),
    [
        ({}, np.array([0, 1, 2] * 10), InvalidInput, "binary labels 0/1"),
        ({}, np.ones((30, 3), dtype=bool), InvalidInput, "one-hot of shape"),
        ({}, np.ones((30, 2), dtype=bool), InvalidInput, "exactly one label per row"),
        ({}, np.zeros(29, dtype=int), InvalidInput, "29 rows but X has 30"),
        ({"n_neighbors": 31}, np.zeros(30, dtype=int), InvalidInput, "n_neighbors=31 is larger"),
        ({"n_neighbors_noise": 30}, np.zeros(30, dtype=int), InvalidInput, "n_neighbors_noise=30 must be smaller"),
        ({"n_neighbors": 0}, np.zeros(30, dtype=int), InvalidInput, "n_neighbors must be >= 1"),
        ({"n_neighbors_noise": 2.5}, np.zeros(30, dtype=int), TypeError, "n_neighbors_noise must be an integer"),
    ],
)
def test_invalid_input(params, y, exc, match):
    X, _ = _clusters([4, 10, 6])
    with pytest.raises(exc, match=match):
        RkNNClassifier(**{"n_neighbors": 5, "n_neighbors_noise": 5, **params}).fit(X, y)
