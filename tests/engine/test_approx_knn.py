import builtins

import numpy as np
import pytest

from engine import InvalidInput, knn_graph, neighbors


def clustered(n=600, d=8, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=4.0, size=(6, d))
    return centers[rng.integers(0, 6, n)] + rng.normal(size=(n, d))


def test_approx_self_graph_excludes_self_and_matches_exact_on_small_data():
    X = clustered()
    idx, w = knn_graph(X, k=5, algorithm="approx")
    ref, _ = knn_graph(X, k=5, algorithm="exact")
    assert idx.shape == w.shape == (600, 5)
    assert not (idx == np.arange(600)[:, None]).any()
    assert all(len(set(row)) == 5 for row in idx)
    recall = np.mean([len(set(a) & set(b)) / 5 for a, b in zip(idx, ref, strict=True)])
    assert recall > 0.95


def test_approx_with_duplicates_drops_self_by_identity():
    X = np.repeat(clustered(50, 3), 4, axis=0)  # every point four times
    idx, w = knn_graph(X, k=3, weights="distance", algorithm="approx")
    assert not (idx == np.arange(len(X))[:, None]).any()
    np.testing.assert_array_equal(w, 1.0)  # the three other copies, at distance 0


def test_approx_separate_targets_distance_weights_nearest_first():
    X = np.arange(40, dtype=float)[:, None]
    idx, w = knn_graph(X, np.array([[2.2]]), k=3, weights="distance", algorithm="approx")
    np.testing.assert_array_equal(idx, [[2, 3, 1]])
    np.testing.assert_allclose(w, 1 / np.array([[0.2, 0.8, 1.2]]), rtol=1e-5)


def test_auto_switches_at_the_threshold(monkeypatch):
    calls = []
    real = neighbors._approx_search
    monkeypatch.setattr(neighbors, "_approx_search", lambda *a: calls.append(1) or real(*a))
    X = clustered(100, 3)
    knn_graph(X, k=3)
    assert not calls
    monkeypatch.setattr(neighbors, "APPROX_THRESHOLD", 100)
    knn_graph(X, k=3)
    assert calls


def test_without_faiss_auto_is_exact_and_approx_says_how_to_install(monkeypatch):
    real_import = builtins.__import__

    def no_faiss(name, *args, **kwargs):
        if name == "faiss":
            raise ImportError("No module named 'faiss'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_faiss)
    monkeypatch.setattr(neighbors, "_faiss_installed", lambda: False)
    monkeypatch.setattr(neighbors, "APPROX_THRESHOLD", 10)
    X = clustered(60, 3)
    idx, _ = knn_graph(X, k=3)
    np.testing.assert_array_equal(idx, knn_graph(X, k=3, algorithm="exact")[0])
    with pytest.raises(InvalidInput, match=r"pip install winnow\[scale\]"):
        knn_graph(X, k=3, algorithm="approx")


def test_bad_algorithm():
    with pytest.raises(InvalidInput, match="algorithm must be one of auto, exact, approx; got 'hnsw'"):
        knn_graph(np.ones((5, 2)), k=2, algorithm="hnsw")
