"""Persisted neighbour graphs on both backends: round trip, one graph per hash, stale ones go."""

from __future__ import annotations

import numpy as np
import pytest

from app.service import Workbench, dataset_graph
from app.store import InvalidRecord, find_graph, graph_hashes, save_graph, session_dataset_size, write_transaction
from engine.neighbors import knn_graph


def test_a_workbench_stores_its_graph_and_a_second_one_loads_it(small):
    first = Workbench.open(small.Session, small.session_id)
    second = Workbench.open(small.Session, small.session_id)
    assert first.graph.built and not second.graph.built
    idx, w = knn_graph(first.state.X, k=2, exclude_self=True)
    np.testing.assert_array_equal(second.graph.idx, idx)
    np.testing.assert_array_equal(second.graph.w, w)
    with small.Session() as s:
        assert graph_hashes(s, small.dataset_id) == [first.graph.key]
        assert session_dataset_size(s, small.session_id) == (small.dataset_id, first.state.n_instances)


def test_distance_weights_round_trip_and_new_features_replace_the_graph(small):
    X = Workbench.open(small.Session, small.session_id).state.X
    built = dataset_graph(small.Session, dataset_id=small.dataset_id, X=X, k=2, weighting="distance")
    loaded = dataset_graph(small.Session, dataset_id=small.dataset_id, X=X, k=2, weighting="distance")
    assert built.built and not loaded.built
    np.testing.assert_array_equal(loaded.w, built.w)
    moved = dataset_graph(small.Session, dataset_id=small.dataset_id, X=X + 1.0, k=2, weighting="distance")
    assert moved.built and moved.key != built.key
    with small.Session() as s:
        assert find_graph(s, built.key) is None
        hashes = graph_hashes(s, small.dataset_id)
    assert moved.key in hashes and built.key not in hashes


def test_a_second_save_of_the_same_hash_is_a_no_op_and_bad_rows_are_refused(small):
    def save(idx):
        return lambda s: save_graph(
            s,
            dataset_id=small.dataset_id,
            content_hash="a" * 64,
            k=1,
            weighting="uniform",
            algorithm="exact",
            idx=idx,
            w=np.ones_like(idx, dtype=float),
            build_seconds=0.0,
        )

    assert write_transaction(small.Session, save(np.array([[1], [0]])))
    assert not write_transaction(small.Session, save(np.array([[1], [0]])))
    with pytest.raises(InvalidRecord, match="outside 0"):
        write_transaction(small.Session, save(np.array([[-1], [0]])))
