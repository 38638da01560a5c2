"""Noise protocols: true label kept (except the documented cases), rates, seeding, validation."""

import numpy as np
import pytest
from sklearn.datasets import load_digits

from engine.exceptions import InvalidInput
from engine.noise import (
    _instance_flip_probabilities,
    binary_flips,
    class_dependent_candidates,
    cluster_candidates,
    instance_dependent_candidates,
    uniform_candidates,
)

N = 20_000
Y_TRUE = np.random.default_rng(123).integers(0, 10, N)
ROWS = np.arange(N)


def _digits(n=600):
    X, y = load_digits(return_X_y=True)
    return X[:n] / 16.0, y[:n]


def test_uniform_candidates_rates():
    Y = uniform_candidates(Y_TRUE, 10, seed=0)
    assert Y.dtype == bool and Y.shape == (N, 10)
    assert Y[ROWS, Y_TRUE].all()
    sizes = Y.sum(axis=1)
    assert set(np.unique(sizes).tolist()) == {1, 3}  # precise, or true + exactly two false labels
    # Fraction made partial ~ 0.5 (sd 0.0035).
    assert abs((sizes == 3).mean() - 0.5) < 0.02
    # False labels are uniform: for true label 0, each other label appears in 2/9 of partial rows.
    amb0 = (sizes == 3) & (Y_TRUE == 0)
    freq = Y[amb0][:, 1:].mean(axis=0)
    np.testing.assert_allclose(freq, 2 / 9, atol=0.04)


def test_uniform_candidates_parameters_and_seed():
    Y = uniform_candidates(Y_TRUE[:500], 10, n_false=3, fraction=1.0, seed=5)
    assert (Y.sum(axis=1) == 4).all()
    np.testing.assert_array_equal(Y, uniform_candidates(Y_TRUE[:500], 10, n_false=3, fraction=1.0, seed=5))
    assert not np.array_equal(Y, uniform_candidates(Y_TRUE[:500], 10, n_false=3, fraction=1.0, seed=6))
    assert (uniform_candidates(Y_TRUE[:500], 10, fraction=0.0, seed=1).sum(axis=1) == 1).all()
    assert uniform_candidates([0, 1, 2], seed=0).shape == (3, 3)  # n_labels from max(y) + 1


def test_class_dependent_candidates_rates():
    Y, partners = class_dependent_candidates(Y_TRUE, 10, seed=0, return_partners=True)
    assert Y[ROWS, Y_TRUE].all()
    # Pairing: an involution without fixed points for even M.
    np.testing.assert_array_equal(partners[partners], np.arange(10))
    assert (partners != np.arange(10)).all()
    sizes = Y.sum(axis=1)
    assert set(np.unique(sizes).tolist()) == {1, 2}
    amb = sizes == 2
    assert abs(amb.mean() - 0.7) < 0.02
    partner_added = Y[ROWS, partners[Y_TRUE]]
    assert abs(partner_added[amb].mean() - 0.7) < 0.02
    # The other 30% go uniformly to the 8 remaining false labels.
    other = Y[amb & ~partner_added & (Y_TRUE == 3)].copy()
    other[:, [3, partners[3]]] = False
    np.testing.assert_allclose(other.mean(axis=0)[np.setdiff1d(np.arange(10), [3, partners[3]])], 1 / 8, atol=0.05)


def test_class_dependent_odd_labels_and_two_labels():
    y = np.random.default_rng(1).integers(0, 5, 5000)
    Y, partners = class_dependent_candidates(y, 5, fraction=1.0, seed=2, return_partners=True)
    assert (partners == -1).sum() == 1
    lone = int(np.flatnonzero(partners == -1)[0])
    assert Y[np.arange(5000), y].all() and (Y.sum(axis=1) == 2).all()
    # The unpaired label gets uniform false labels over the other four.
    np.testing.assert_allclose(Y[y == lone].mean(axis=0)[np.arange(5) != lone], 0.25, atol=0.05)
    # M = 2: the partner is the only false label, whatever partner_prob says.
    Y2 = class_dependent_candidates(np.array([0, 1] * 50), 2, fraction=1.0, partner_prob=0.0, seed=0)
    assert Y2.all()


def test_class_dependent_seed():
    a = class_dependent_candidates(Y_TRUE[:1000], 10, seed=9)
    np.testing.assert_array_equal(a, class_dependent_candidates(Y_TRUE[:1000], 10, seed=9))
    assert not np.array_equal(a, class_dependent_candidates(Y_TRUE[:1000], 10, seed=10))


def test_instance_flip_probabilities_rescale_to_mean():
    proba = np.array([[0.7, 0.2, 0.05, 0.05], [0.1, 0.1, 0.1, 0.7], [1.0, 0.0, 0.0, 0.0]])
    y = np.array([0, 3, 0])
    p = _instance_flip_probabilities(proba, y, 0.3)
    assert (p[np.arange(3), y] == 0).all()
    # Row 0: false probs (0.2, 0.05, 0.05) with mean 0.1 -> (0.6, 0.15, 0.15).
    np.testing.assert_allclose(p[0], [0, 0.6, 0.15, 0.15])
    np.testing.assert_allclose(p[1], [0.3, 0.3, 0.3, 0])
    # Classifier certain of the true label: the rate is spread uniformly.
    np.testing.assert_allclose(p[2], [0, 0.3, 0.3, 0.3])
    # Large rates are clipped at 1.
    q = _instance_flip_probabilities(np.array([[0.5, 0.5, 0.0, 0.0]]), np.array([0]), 0.9)
    np.testing.assert_allclose(q, [[0, 1.0, 0, 0]])


def test_instance_dependent_candidates():
    X, y = _digits()
    Y = instance_dependent_candidates(X, y, 10, seed=0)
    assert Y.shape == (600, 10) and Y[np.arange(600), y].all()
    n_false = Y.sum(axis=1) - 1
    # Mean rate 0.3 over 9 false labels, reduced by clipping: between 1 and 2.7 false labels on average.
    assert 1.0 < n_false.mean() <= 2.7 + 0.2
    np.testing.assert_array_equal(Y, instance_dependent_candidates(X, y, 10, seed=0))
    assert not np.array_equal(Y, instance_dependent_candidates(X, y, 10, seed=1))


def test_cluster_candidates_without_noise_keep_the_true_label():
    X, y = _digits()
    Y, info = cluster_candidates(X, y, 10, seed=0, return_details=True)
    assert Y[np.arange(600), y].all()
    assert not info["corrupted"].any()
    assert info["alpha"].shape == (5, 10) and (info["alpha"] <= 0.8).all() and (info["alpha"] >= 0).all()
    assert set(np.unique(info["cluster"]).tolist()) == set(range(5))
    # Each incorrect label is added with the rate of (cluster, label): compare to alpha in aggregate.
    expected = info["alpha"][info["cluster"], y] * 9  # expected number of false labels per row
    observed = Y.sum(axis=1) - 1
    assert abs(observed.mean() - expected.mean()) < 0.15


def test_cluster_candidates_rate_per_cluster_and_label():
    X = np.repeat(np.eye(2) * 50.0, 4000, axis=0)  # two obvious clusters
    y = np.tile([0, 1, 2, 3], 2000)
    Y, info = cluster_candidates(X, y, 4, n_clusters=2, seed=3, return_details=True)
    for c in range(2):
        for label in range(4):
            rows = (info["cluster"] == c) & (y == label)
            others = np.arange(4) != label
            rate = Y[rows][:, others].mean()
            assert abs(rate - info["alpha"][c, label]) < 0.04


def test_cluster_candidates_noise_removes_the_true_label():
    X, y = _digits()
    X = np.tile(X, (10, 1))
    y = np.tile(y, 10)
    nu = 0.4
    Y, info = cluster_candidates(X, y, 10, noise_rate=nu, seed=1, return_details=True)
    n = y.shape[0]
    assert Y[np.arange(n), info["bag_label"]].all()  # the bag's label is always there
    # Replaced by a uniformly drawn label -> corrupted w.p. nu * 9/10 = 0.36 (sd 0.006).
    assert abs(info["corrupted"].mean() - nu * 0.9) < 0.025
    missing = ~Y[np.arange(n), y]
    assert missing.any() and not (missing & ~info["corrupted"]).any()
    np.testing.assert_array_equal(Y, cluster_candidates(X, y, 10, noise_rate=nu, seed=1))


def test_binary_flips_rates_and_seed():
    y = np.repeat([0, 1], 10_000)
    noisy = binary_flips(y, 0.3, 0.1, seed=0)
    assert noisy.dtype.kind == "i" and set(np.unique(noisy).tolist()) == {0, 1}
    assert abs((noisy[y == 1] == 0).mean() - 0.3) < 0.02
    assert abs((noisy[y == 0] == 1).mean() - 0.1) < 0.02
    np.testing.assert_array_equal(noisy, binary_flips(y, 0.3, 0.1, seed=0))
    np.testing.assert_array_equal(binary_flips(y.astype(bool), 0.0, 0.0, seed=0), y)


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (lambda: uniform_candidates(np.zeros((3, 2), dtype=int)), InvalidInput, "1-D array"),
        (lambda: uniform_candidates([0, -1, 2]), InvalidInput, r"y\[1\] = -1 is not a known label in 0..2"),
        (lambda: uniform_candidates([0, 5], 3), InvalidInput, r"y\[1\] = 5 is not a known label in 0..2"),
        (lambda: uniform_candidates([0.5, 1.0]), InvalidInput, "integer labels"),
        (lambda: uniform_candidates([], 3), InvalidInput, "empty"),
        (lambda: uniform_candidates([0, 1, 2], 3, n_false=3), InvalidInput, "n_false=3 exceeds the 2 false labels"),
        (lambda: uniform_candidates([0, 1], 3, fraction=1.5), InvalidInput, "fraction must be <= 1"),
        (lambda: uniform_candidates([0, 1], 3, n_false=1.0), TypeError, "n_false must be an integer"),
        (lambda: class_dependent_candidates([0, 0], 1), InvalidInput, "n_labels >= 2"),
        (lambda: class_dependent_candidates([0, 1], partner_prob=-0.1), InvalidInput, "partner_prob must be >= 0"),
        (lambda: instance_dependent_candidates(np.ones((3, 2)), [0, 1], 2), InvalidInput, "3 rows but y has 2"),
        (lambda: cluster_candidates(np.ones((3, 2)), [0, 1, 2], n_clusters=4), InvalidInput, "n_clusters=4 exceeds"),
        (
            lambda: cluster_candidates(np.ones((3, 2)), [0, 1, 2], noise_rate=2.0),
            InvalidInput,
            "noise_rate must be <= 1",
        ),
        (lambda: cluster_candidates([[np.inf, 0.0]], [0]), InvalidInput, "must be finite"),
        (lambda: binary_flips([0, 1], 0.6, 0.5), InvalidInput, "tau_pos \\+ tau_neg must be < 1"),
        (lambda: binary_flips([0, 2], 0.1, 0.1), InvalidInput, r"y\[1\] = 2 is not a known label in 0..1"),
        (lambda: binary_flips([0, 1], 1.0, 0.0), InvalidInput, "tau_pos must be < 1"),
    ],
)
def test_invalid_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
