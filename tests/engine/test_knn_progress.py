"""knn_graph's progress callback: reports every chunk, ends at the total, changes nothing."""

from __future__ import annotations

import numpy as np
import pytest

from engine import neighbors
from engine.neighbors import knn_graph


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(neighbors, "SEARCH_CHUNK", 7)


@pytest.mark.parametrize("algorithm", ["exact", "approx"])
def test_progress_reaches_the_total_and_the_graph_does_not_depend_on_it(small_chunks, algorithm):
    X = np.random.default_rng(0).normal(size=(30, 3))
    calls = []
    idx, w = knn_graph(X, k=4, algorithm=algorithm, progress=lambda *call: calls.append(call))
    stages = ["search"] if algorithm == "exact" else ["index", "search"]
    assert [stage for stage, _, _ in calls] == [s for s in stages for _ in range(6)]
    for stage in stages:
        done = [d for s, d, total in calls if s == stage]
        assert done == [0, 7, 14, 21, 28, 30]
        assert {total for s, _, total in calls if s == stage} == {30}
    if algorithm == "exact":
        ref_idx, ref_w = knn_graph(X, k=4, algorithm="exact")
        np.testing.assert_array_equal(idx, ref_idx)
        np.testing.assert_array_equal(w, ref_w)


def test_separate_targets_report_the_targets_searched(small_chunks):
    X = np.random.default_rng(1).normal(size=(20, 2))
    calls = []
    idx, _ = knn_graph(X, X[:10] + 0.01, k=3, algorithm="exact", progress=lambda *call: calls.append(call))
    assert calls == [("search", 0, 10), ("search", 7, 10), ("search", 10, 10)]
    assert idx.shape == (10, 3)


def test_a_stage_below_the_chunk_size_is_still_reported_in_about_a_hundred_steps(monkeypatch):
    """An exact search of 20,000 rows is one SEARCH_CHUNK, yet takes up to a minute: its bar
    must move (and give a time left) long before the end."""
    monkeypatch.setattr(neighbors, "MIN_SEARCH_CHUNK", 10)
    X = np.random.default_rng(2).normal(size=(2_000, 3))
    calls = []
    idx, w = knn_graph(X, k=3, algorithm="exact", progress=lambda *call: calls.append(call))
    done = [d for _, d, _ in calls]
    assert done[0] == 0 and done[-1] == 2_000 and len(done) == 1 + 100
    assert done == sorted(done) and {t for _, _, t in calls} == {2_000}
    ref_idx, ref_w = knn_graph(X, k=3, algorithm="exact")
    np.testing.assert_array_equal(idx, ref_idx)
    np.testing.assert_array_equal(w, ref_w)
