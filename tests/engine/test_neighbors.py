import numpy as np
import pytest
from sklearn.neighbors import NearestNeighbors

from hypothesis import given, settings
from hypothesis import strategies as st

from engine import InvalidInput, ReverseIndex, knn_graph


def test_self_is_left_out_and_matches_sklearn():
    X = np.random.default_rng(0).normal(size=(50, 3))
    idx, w = knn_graph(X, k=4)
    assert idx.shape == w.shape == (50, 4)
    assert not (idx == np.arange(50)[:, None]).any()
    _, ref = NearestNeighbors(n_neighbors=5).fit(X).kneighbors(X)
    np.testing.assert_array_equal(idx, ref[:, 1:])
    np.testing.assert_array_equal(w, 1.0)


def test_exact_duplicates_drop_self_by_identity_and_weigh_without_division_by_zero():
    X = np.array([[0.0], [0.0], [0.0], [5.0]])
    idx, w = knn_graph(X, k=2, weights="distance")
    for row in range(3):
        assert row not in idx[row]
        np.testing.assert_array_equal(w[row], [1.0, 1.0])  # two duplicates at distance 0
    assert np.isfinite(w).all()
    np.testing.assert_allclose(w[3], [1 / 5, 1 / 5])


def test_separate_targets_and_callable_weights():
    X = np.arange(10, dtype=float)[:, None]
    idx, w = knn_graph(X, np.array([[2.2]]), k=3, weights=lambda d: np.exp(-d))
    np.testing.assert_array_equal(idx, [[2, 3, 1]])
    np.testing.assert_allclose(w, np.exp(-np.array([[0.2, 0.8, 1.2]])))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(X=np.ones((3, 2)), k=3), "k=3 must be smaller than the number of instances"),
        (dict(X=np.ones((3, 2)), targets=np.ones((1, 2)), k=4), "k=4 is larger than"),
        (dict(X=np.array([[1.0, np.nan], [0.0, 0.0]]), k=1), "X row 0 column 1 is nan"),
        (dict(X=np.ones((3, 2)), targets=np.ones((1, 3)), k=1), "targets has 3 features"),
        (dict(X=np.ones((3, 2)), k=1, weights="gaussian"), "weights must be one of uniform, distance; got 'gaussian'"),
        (dict(X=np.ones((3, 2)), k=1, weights=lambda d: -d - 1), "negative or non-finite weight in row 0"),
        (dict(X=np.ones((3, 2)), k=0), "k must be >= 1"),
    ],
)
def test_bad_input(kwargs, message):
    with pytest.raises(InvalidInput, match=message):
        knn_graph(**kwargs)


def test_non_integer_k_is_a_type_error():
    with pytest.raises(TypeError, match="k must be an integer"):
        knn_graph(np.ones((3, 2)), k=2.5)


@st.composite
def graphs(draw):
    n = draw(st.integers(1, 12))
    k = draw(st.integers(1, 4))
    n_targets = draw(st.integers(0, 10))
    flat = draw(st.lists(st.integers(0, n - 1), min_size=n_targets * k, max_size=n_targets * k))
    return np.array(flat, dtype=np.intp).reshape(n_targets, k), n


@settings(max_examples=200, deadline=None)
@given(graphs(), st.data())
def test_reverse_index_matches_a_scan_of_the_graph(graph, data):
    idx, n = graph
    index = ReverseIndex(idx, n)
    for item in range(n):
        expected = sorted({t for t in range(idx.shape[0]) if item in idx[t]})
        assert index.rows_holding(item).tolist() == expected
    items = data.draw(st.lists(st.integers(0, n - 1), max_size=5))
    expected = sorted({t for t in range(idx.shape[0]) if set(idx[t]) & set(items)})
    assert index.rows_holding_any(np.array(items, dtype=np.intp)).tolist() == expected


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: ReverseIndex(np.array([[0, 3]]), 3), r"idx row 0 refers to a training row outside 0..2: \[0, 3\]"),
        (lambda: ReverseIndex(np.array([0, 1]), 3), "idx must be 2-D"),
        (lambda: ReverseIndex(np.array([[0, 1]]), 3).rows_holding(5), "item 5 is not a training row in 0..2"),
        (lambda: ReverseIndex(np.array([[0, 1]]), 3).rows_holding_any([0, -1]), "item -1 is not a training row"),
        (lambda: ReverseIndex(np.array([[0, 1]]), 3).rows_holding_any([0.5]), "items must be integer training rows"),
    ],
)
def test_reverse_index_rejects_bad_input(call, match):
    with pytest.raises(InvalidInput, match=match):
        call()
