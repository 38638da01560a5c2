"""PL A-kNN: the threshold and elimination step by step, Algorithm 2's criterion, and an oracle."""

import math

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from engine.exceptions import InvalidInput, NotFittedError
from engine.learners import PlAknnClassifier, PlKnnClassifier
from engine.learners.aknn import aknn_threshold_constant
from engine.noise import uniform_candidates

# Eight training points at x = 1..8; the query is x = 0, so the k-th neighbour is x = k.
X_LINE = np.arange(1.0, 9.0)[:, None]
BAGS = [{0, 1}, {0, 1}, {1}, {0, 1}, {1, 2}, {0}, {0}, {0}]
Y_LINE = np.array([[label in bag for label in range(3)] for bag in BAGS])
C1 = 0.3  # with n = 8, M = 3, delta = 0.1: A = 0.3 * sqrt(log 8 + log 30) = 0.70232...
A = 0.3 * math.sqrt(math.log(8) + math.log(3 / 0.1))


def test_threshold_constant():
    clf = PlAknnClassifier(c1=C1, delta=0.1, max_iter=8).fit(X_LINE, Y_LINE)
    assert clf.threshold_constant_ == pytest.approx(A)
    assert A == pytest.approx(0.70232, abs=1e-5)
    assert aknn_threshold_constant(8, 3, 0.5, 0.1) == pytest.approx(0.5 * math.sqrt(math.log(8) + math.log(30)))
    assert clf.max_neighbors_ == 8


def test_elimination_step_by_step():
    # Threshold Delta_k = A / sqrt(k); label y leaves when (m1 - tau_y) / k >= Delta_k.
    # k=1 bag {0,1}: tau=(1,1,0); label 2: (1-0)/1 = 1    >= Delta_1 = 0.702 -> eliminated.
    # k=2 bag {0,1}: tau=(2,2,0); no gap.
    # k=3 bag {1}:   tau=(2,3,0); label 0: 1/3 = 0.333   <  Delta_3 = 0.405 -> stays.
    # k=4 bag {0,1}: tau=(3,4,0); label 0: 1/4 = 0.25    <  Delta_4 = 0.351 -> stays.
    # k=5 bag {1,2}: tau=(3,5,1); label 0: 2/5 = 0.4     >= Delta_5 = 0.314 -> eliminated.
    assert 1 >= A and 1 / 3 < A / math.sqrt(3) and 1 / 4 < A / 2 and 2 / 5 >= A / math.sqrt(5)
    clf = PlAknnClassifier(c1=C1, delta=0.1, max_iter=8).fit(X_LINE, Y_LINE)
    labels, k_used = clf.predict_with_k([[0.0]])
    assert labels.tolist() == [1] and k_used.tolist() == [5]
    np.testing.assert_array_equal(clf.surviving_labels([[0.0]]), [[False, True, False]])
    labels2, k2 = clf.predict([[0.0]], return_k=True)
    assert labels2.tolist() == [1] and k2.tolist() == [5]
    # The fixed 8-NN vote reads the later {0} bags and says 0 (label 0: 6 votes, label 1: 5).
    assert PlKnnClassifier(8).fit(X_LINE, Y_LINE).predict([[0.0]]).tolist() == [0]


def test_first_step_only_removes_label_two():
    clf = PlAknnClassifier(c1=C1, delta=0.1, max_iter=1).fit(X_LINE, Y_LINE)
    np.testing.assert_array_equal(clf.surviving_labels([[0.0]]), [[True, True, False]])


def test_disambiguation_criterion_after_T_steps():
    # Stop at T = 4 with {0, 1} left. M(k, y) = sqrt(k) (Delta_k - (tau_y - m2)/k) = A - (tau_y - m2)/sqrt(k):
    # k=1: tau=(1,1,0), m2=1 -> M=A for both.      k=2: tau=(2,2), m2=2 -> M=A for both.
    # k=3: tau=(2,3), m2=2 -> M(3,0)=A, M(3,1)=A-1/sqrt(3)=0.125.
    # k=4: tau=(3,4), m2=3 -> M(4,0)=A, M(4,1)=A-1/2=0.202.   argmin -> label 1 (at k=3).
    clf = PlAknnClassifier(c1=C1, delta=0.1, max_iter=4).fit(X_LINE, Y_LINE)
    labels, k_used = clf.predict_with_k([[0.0]])
    assert labels.tolist() == [1] and k_used.tolist() == [4]
    np.testing.assert_array_equal(clf.surviving_labels([[0.0]]), [[True, True, False]])


def test_disambiguation_can_prefer_the_label_that_led_earlier():
    # Bags (nearest first): {0}, {1}, {1}, {0}; T = 4 keeps both (gaps never reach A sqrt(k)).
    # k=1: tau=(1,0,0), m2=0 -> M(1,0)=A-1, M(1,1)=A.   k=2: tau=(1,1), m2=1 -> A, A.
    # k=3: tau=(1,2), m2=1 -> M(3,1)=A-1/sqrt(3).       k=4: tau=(2,2) -> A, A.
    # min is A - 1 for label 0, although the 4-NN vote ties.
    X = np.arange(1.0, 5.0)[:, None]
    Y = np.array([[1, 0, 0], [0, 1, 0], [0, 1, 0], [1, 0, 0]], dtype=bool)
    clf = PlAknnClassifier(c1=1.0, delta=0.1, max_iter=4).fit(X, Y)
    A4 = 1.0 * math.sqrt(math.log(4) + math.log(30))
    assert 1 < A4  # so no elimination at k = 1 (gap 1), nor later (gaps <= 1 < A sqrt(k))
    labels, k_used = clf.predict_with_k([[0.0]])
    assert labels.tolist() == [0] and k_used.tolist() == [4]


def _reference_aknn(bags_in_order, n, M, c1, delta, T):
    """Algorithm 2 transcribed line by line for one query (bags nearest first)."""
    A = c1 * math.sqrt(math.log(n) + math.log(M / delta))
    s = set(range(M))
    k = 0
    tau = [0] * M
    Mtab = {}
    while len(s) > 1 and k < T:
        k += 1
        delta_k = A / math.sqrt(k)
        for y in range(M):
            tau[y] += int(y in bags_in_order[k - 1])
        vals = sorted((tau[y] for y in s), reverse=True)
        m1, m2 = vals[0], vals[1]
        for y in list(s):
            Mtab[(k, y)] = math.sqrt(k) * (delta_k - (tau[y] - m2) / k)
            if (m1 - tau[y]) / k >= delta_k:
                s.discard(y)
    if len(s) == 1:
        return next(iter(s)), k
    best = min((Mtab[(kk, y)], y) for y in s for kk in range(1, k + 1))
    return best[1], k


@pytest.mark.parametrize("seed", range(4))
def test_matches_line_by_line_reference(seed):
    rng = np.random.default_rng(seed)
    n, M, d = 40, 4, 2
    X = rng.normal(size=(n, d))
    Y = rng.random((n, M)) < 0.45
    Y[np.arange(n), rng.integers(0, M, n)] = True
    Q = rng.normal(size=(30, d))
    clf = PlAknnClassifier(c1=0.5, delta=0.1, max_iter=12).fit(X, Y)
    labels, k_used = clf.predict_with_k(Q)
    order = np.argsort(((Q[:, None, :] - X[None, :, :]) ** 2).sum(-1), axis=1, kind="stable")
    for t in range(Q.shape[0]):
        bags = [set(np.flatnonzero(Y[j]).tolist()) for j in order[t]]
        assert (labels[t], k_used[t]) == _reference_aknn(bags, n, M, 0.5, 0.1, 12)


def test_single_label_and_T_capped_by_n():
    X = np.arange(5.0)[:, None]
    clf = PlAknnClassifier(max_iter=50).fit(X, np.ones((5, 1), dtype=bool))
    assert clf.max_neighbors_ == 5
    labels, k_used = clf.predict_with_k([[0.5], [3.0]])
    assert labels.tolist() == [0, 0] and k_used.tolist() == [0, 0]


@pytest.mark.parametrize("method", ["predict", "predict_with_k", "surviving_labels"])
def test_not_fitted(method):
    with pytest.raises(NotFittedError):
        getattr(PlAknnClassifier(), method)([[0.0]])


@pytest.mark.parametrize(
    ("params", "exc", "match"),
    [
        ({"c1": 0.0}, InvalidInput, "c1 must be > 0"),
        ({"delta": 0.0}, InvalidInput, "delta must be > 0"),
        ({"delta": 1.0}, InvalidInput, "delta must be < 1"),
        ({"max_iter": 0}, InvalidInput, "max_iter must be >= 1"),
        ({"max_iter": 2.0}, TypeError, "max_iter must be an integer"),
        ({"c1": "big"}, TypeError, "c1 must be a number"),
    ],
)
def test_invalid_parameters(params, exc, match):
    with pytest.raises(exc, match=match):
        PlAknnClassifier(**params).fit(X_LINE, Y_LINE)


def test_invalid_data():
    with pytest.raises(InvalidInput, match="empty candidate set"):
        PlAknnClassifier().fit(X_LINE, np.zeros((8, 3), dtype=bool))
    clf = PlAknnClassifier().fit(X_LINE, Y_LINE)
    with pytest.raises(InvalidInput, match="2 features"):
        clf.predict([[0.0, 0.0]])


def test_digits_uniform_candidates_accuracy_floor():
    # Measured 0.970-0.980 over three splits (mean neighbourhood ~7.7); chance is 0.1.
    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X / 16.0, y, test_size=0.3, random_state=0, stratify=y)
    Y = uniform_candidates(ytr, 10, seed=0)
    labels, k_used = PlAknnClassifier().fit(Xtr, Y).predict_with_k(Xte)
    assert (labels == yte).mean() > 0.9
    assert 1 <= k_used.min() and k_used.max() <= 50
