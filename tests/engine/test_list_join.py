"""The join of inverted lists that builds large graphs (issue 32: the first graph at 1M in a
minute), forced on small generated sets by lowering ``IVF_THRESHOLD``, against brute force."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import neighbors
from engine.neighbors import knn_graph


@st.composite
def join_problems(draw):
    """(X, targets or None, k): clustered, uniform or integer-valued rows (the last with
    duplicates and equidistant points), few enough that every query is a check row."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n = draw(st.integers(30, 600))
    d = draw(st.integers(1, 12))
    kind = draw(st.sampled_from(["clustered", "uniform", "integer"]))
    if kind == "clustered":
        centres = rng.normal(scale=4.0, size=(draw(st.integers(1, 12)), d))
        X = centres[rng.integers(0, centres.shape[0], n)] + rng.normal(size=(n, d))
    elif kind == "uniform":
        X = rng.random((n, d))
    else:
        X = rng.integers(0, 4, size=(n, d)).astype(float)
    targets = None
    if draw(st.booleans()):
        targets = X[rng.integers(0, n, draw(st.integers(1, 80)))] + rng.normal(scale=0.3, size=(1, d))
    k = draw(st.integers(1, min(25, n - 1)))
    return X, targets, k


def exact_distances(X, queries, idx):
    diff = X[idx] - queries[:, None, :]
    return np.sqrt(np.einsum("tkd,tkd->tk", diff, diff))


def graph_with_distances(X, targets, k, **options):
    """``knn_graph``'s rows and the distances it weighs them by (seen through a weights callable)."""
    seen = []
    idx, _ = knn_graph(X, targets, k=k, weights=lambda dist: seen.append(dist) or np.ones_like(dist), **options)
    return idx, seen[0]


def join(X, targets, k, **options):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(neighbors, "IVF_THRESHOLD", 0)
        return graph_with_distances(X, targets, k, algorithm="approx", **options)


def recall_by_distance(X, queries, idx, k, exact_kth):
    """Share of the found neighbours no farther than the exact k-th (so that which of several
    equidistant points is found does not count)."""
    found = exact_distances(X, queries, idx)
    return float((found <= exact_kth[:, None] * (1 + 1e-6) + 1e-12).mean())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(join_problems())
def test_the_join_finds_99_percent_of_the_exact_neighbours_with_exact_distances(problem):
    X, targets, k = problem
    queries = X if targets is None else targets
    stages = []
    idx, dist = join(X, targets, k, progress=lambda *call: stages.append(call))
    exact_idx, exact_dist = graph_with_distances(X, targets, k, algorithm="exact")

    assert idx.shape == dist.shape == (queries.shape[0], k)
    if targets is None:
        assert not (idx == np.arange(X.shape[0])[:, None]).any()
    assert all(len(set(row)) == k for row in idx.tolist())
    # The distances are the exact ones of the rows returned (float64 sums of squared
    # differences: duplicates at exactly 0), nearest first, ties by row.
    np.testing.assert_allclose(dist, exact_distances(X, queries, idx), rtol=1e-12, atol=0)
    order = np.lexsort((idx, dist), axis=1)
    np.testing.assert_array_equal(order, np.broadcast_to(np.arange(k), idx.shape))
    # Every query is a check row here (fewer than IVF_CHECK_ROWS): the promised recall holds.
    assert recall_by_distance(X, queries, idx, k, exact_dist[:, -1]) >= neighbors.IVF_RECALL

    names = [stage for stage, _, _ in stages]
    assert names == sorted(names, key=["train", "index", "check", "search"].index)
    for stage in ("train", "index", "check", "search"):
        done = [d for s, d, _ in stages if s == stage]
        totals = {t for s, _, t in stages if s == stage}
        assert len(totals) == 1 and done[0] == 0 and done[-1] == totals.pop() and done == sorted(done)

    again, again_dist = join(X, targets, k)
    np.testing.assert_array_equal(again, idx)
    np.testing.assert_array_equal(again_dist, dist)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(join_problems())
def test_asked_for_every_exact_neighbour_the_join_finds_them_all(problem):
    """With the recall set to 1, each block joins every list that holds an exact neighbour of
    one of its (check) rows, so the graph's distances are the exact search's: the number of
    lists is read off the ranks of those lists correctly."""
    X, targets, k = problem
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(neighbors, "IVF_RECALL", 1.0)
        _, dist = join(X, targets, k)
    _, exact_dist = graph_with_distances(X, targets, k, algorithm="exact")
    np.testing.assert_allclose(dist, exact_dist, rtol=1e-6, atol=1e-6)


def test_a_block_whose_nearest_lists_hold_too_few_rows_takes_more_lists():
    """Sixty rows make eight lists of about eight rows; forty neighbours need most of them,
    whatever the tuned number of lists."""
    X = np.random.default_rng(7).normal(size=(60, 3))
    idx, dist = join(X, None, 40)
    _, exact_dist = graph_with_distances(X, None, 40, algorithm="exact")
    assert not (idx == np.arange(60)[:, None]).any()
    assert recall_by_distance(X, X, idx, 40, exact_dist[:, -1]) >= neighbors.IVF_RECALL


def test_the_check_sample_is_a_stage_of_its_own_in_about_ten_reports(monkeypatch):
    monkeypatch.setattr(neighbors, "IVF_THRESHOLD", 0)
    X = np.random.default_rng(8).normal(size=(2_000, 4))
    stages = []
    knn_graph(X, k=5, algorithm="approx", progress=lambda *call: stages.append(call))
    check = [(done, total) for stage, done, total in stages if stage == "check"]
    assert check[0] == (0, neighbors.IVF_CHECK_ROWS) and check[-1] == (neighbors.IVF_CHECK_ROWS,) * 2
    assert len(check) == 1 + neighbors.IVF_CHECK_STEPS


def test_without_clusters_the_check_falls_back_to_every_row_and_stays_exact(monkeypatch):
    """Uniform rows in 24 dimensions: the lists' radii prune nothing, so the check sample is
    searched against every row; asked for recall 1 with every row in the sample, the graph is
    still the exact one."""
    monkeypatch.setattr(neighbors, "IVF_RECALL", 1.0)
    X = np.random.default_rng(4).random((neighbors.IVF_CHECK_ROWS, 24))
    _, dist = join(X, None, 10)
    _, exact_dist = graph_with_distances(X, None, 10, algorithm="exact")
    np.testing.assert_allclose(dist, exact_dist, rtol=1e-6, atol=1e-6)
