import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.neighbors import NearestNeighbors

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


def _oracle_graph(X, targets, k, exclude_self):
    """The first k training rows of every target by (squared distance, row), in integers."""
    Xi = X.astype(np.int64)
    queries = Xi if targets is None else targets.astype(np.int64)
    idx, sq = [], []
    for t, q in enumerate(queries):
        ranked = sorted(
            (int(((Xi[j] - q) ** 2).sum()), j)
            for j in range(len(Xi))
            if not (targets is None and exclude_self and j == t)
        )[:k]
        sq.append([d for d, _ in ranked])
        idx.append([j for _, j in ranked])
    return np.array(idx, dtype=np.intp).reshape(-1, k), np.array(sq, dtype=float).reshape(-1, k)


@st.composite
def tied_points(draw):
    """Integer points from a few values (exact duplicates and equal distances everywhere),
    in 1-3 dimensions (scikit-learn's trees) or 16-20 (its brute force)."""
    d = draw(st.sampled_from([1, 2, 3, 16, 20]))
    n = draw(st.integers(2, 40))
    values = draw(st.integers(1, 4))
    flat = draw(st.lists(st.integers(0, values - 1), min_size=n * d, max_size=n * d))
    X = np.array(flat, dtype=float).reshape(n, d)
    separate = draw(st.booleans())
    targets = None
    if separate:
        m = draw(st.integers(1, 8))
        targets = np.array(draw(st.lists(st.integers(0, values - 1), min_size=m * d, max_size=m * d)), dtype=float)
        targets = targets.reshape(m, d)
    exclude_self = draw(st.booleans())
    leave_out = targets is None and exclude_self
    k = draw(st.integers(1, n - 1 if leave_out else n))
    return X, targets, k, exclude_self


@settings(max_examples=300, deadline=None)
@given(tied_points())
def test_exact_ties_are_broken_by_row_as_a_brute_force_oracle_does(case):
    X, targets, k, exclude_self = case
    idx, w = knn_graph(X, targets, k=k, weights="distance", exclude_self=exclude_self, algorithm="exact")
    expected_idx, expected_sq = _oracle_graph(X, targets, k, exclude_self)
    np.testing.assert_array_equal(idx, expected_idx)
    uniform, _ = knn_graph(X, targets, k=k, exclude_self=exclude_self, algorithm="exact")
    np.testing.assert_array_equal(uniform, expected_idx)
    dist = np.sqrt(expected_sq)
    zero = (dist == 0).any(axis=1)
    expected_w = np.where(zero[:, None], (dist == 0).astype(float), 1 / np.where(dist == 0, 1, dist))
    np.testing.assert_array_equal(w, expected_w)


def test_ties_do_not_depend_on_how_the_targets_are_chunked(monkeypatch):
    from engine import neighbors

    X = np.random.default_rng(1).integers(0, 3, size=(300, 17)).astype(float)
    whole, _ = knn_graph(X, k=7, algorithm="exact")
    monkeypatch.setattr(neighbors, "SEARCH_CHUNK", 11)
    monkeypatch.setattr(neighbors, "_TIE_PAIRS", 40)  # a few targets per search for ties
    chunked, _ = knn_graph(X, k=7, algorithm="exact")
    np.testing.assert_array_equal(chunked, whole)
    np.testing.assert_array_equal(whole, _oracle_graph(X, None, 7, True)[0])


def test_a_radius_search_that_finds_too_few_rows_falls_back_to_every_row(monkeypatch):
    from sklearn.neighbors import NearestNeighbors

    # scikit-learn's rounding stays within the bound the search relies on; were it not to,
    # the rows of that query are all examined rather than trusted.
    monkeypatch.setattr(
        NearestNeighbors,
        "radius_neighbors",
        lambda self, X, radius, return_distance: [np.zeros(0, dtype=np.intp)] * len(X),
    )
    X = np.repeat(np.arange(6, dtype=float), 5)[:, None]  # six values, five copies each
    idx, _ = knn_graph(X, k=7, algorithm="exact")
    np.testing.assert_array_equal(idx, _oracle_graph(X, None, 7, True)[0])
