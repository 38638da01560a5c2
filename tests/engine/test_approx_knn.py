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


def test_past_its_threshold_the_inverted_file_index_finds_99_percent_of_the_exact_neighbours(monkeypatch):
    """The inverted-file path (issue 32: the first graph at 1M), forced on a small generated
    set: recall@10 >= 0.99 against brute force, self left out, nearest first, the same graph
    when built again (seeded training sample, k-means and tuning sample)."""
    monkeypatch.setattr(neighbors, "IVF_THRESHOLD", 1_000)
    rng = np.random.default_rng(3)
    centres = rng.normal(scale=4.0, size=(40, 16))
    X = centres[rng.integers(0, 40, 5_000)] + rng.normal(size=(5_000, 16))
    stages = []
    idx, w = knn_graph(X, k=10, weights="distance", algorithm="approx", progress=lambda *a: stages.append(a))
    exact, _ = knn_graph(X, k=10, algorithm="exact")
    recall = (idx[:, :, None] == exact[:, None, :]).any(axis=2).mean()
    assert recall >= 0.99
    assert not (idx == np.arange(len(X))[:, None]).any()
    dist = 1 / w
    assert (np.diff(dist, axis=1) >= 0).all()
    np.testing.assert_allclose(dist, np.linalg.norm(X[idx] - X[:, None, :], axis=2), rtol=1e-4)
    trained = stages[1][2]
    assert (
        stages[:3] == [("train", 0, trained), ("train", trained, trained), ("index", 0, 5_000)]
        and ("index", 5_000, 5_000) in stages
        and stages[-1] == ("search", 5_000, 5_000)
    )
    again, _ = knn_graph(X, k=10, weights="distance", algorithm="approx")
    np.testing.assert_array_equal(again, idx)
    assert neighbors.approx_parameters(5_000).startswith("ivf-join=")
    assert neighbors.approx_parameters(999) == "hnsw=32,80,128"


def test_the_inverted_file_index_probes_more_lists_until_the_sample_reaches_the_recall(monkeypatch):
    """Uniform data in 24 dimensions has no clusters for the lists to follow: the fewest lists
    probed miss neighbours, so the tuning probes more (up to every list) rather than give a
    graph below the recall on its sample."""
    monkeypatch.setattr(neighbors, "IVF_THRESHOLD", 1_000)
    X = np.random.default_rng(4).random((3_000, 24))
    idx, _ = knn_graph(X, k=10, algorithm="approx")
    exact, _ = knn_graph(X, k=10, algorithm="exact")
    assert (idx[:, :, None] == exact[:, None, :]).any(axis=2).mean() >= 0.98
