"""The k-NN graph is built once, persisted, reused by other workbenches and processes, and
rebuilt only when the features change; its progress reports reach 100 %."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from app.service import (
    BuildRegistry,
    ProgressTracker,
    ProgressUpdate,
    Workbench,
    create_session,
    dataset_graph,
    graph_builds,
    graph_key,
    import_file,
)
from app.store import find_graph, graph_hashes, open_store, save_graph, write_transaction
from engine.neighbors import knn_graph
from tests.ui.conftest import small_csv_bytes

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def store(tmp_path):
    """A store with the 90-item clustered dataset and two sessions on it (uniform, distance)."""
    csv = tmp_path / "small.csv"
    csv.write_bytes(small_csv_bytes())
    db = tmp_path / "g.db"
    Session = open_store(db)
    dataset_id, _ = import_file(Session, csv, name="small", min_rows=6)
    ids = {
        weighting: create_session(
            Session, dataset_id=dataset_id, name=weighting, k=5, weighting=weighting, criterion="apl", target_set="all"
        )
        for weighting in ("uniform", "distance")
    }
    return db, Session, dataset_id, ids


@pytest.mark.parametrize("weighting", ["uniform", "distance"])
def test_the_persisted_graph_equals_a_fresh_build(store, weighting):
    _, Session, _, ids = store
    bench = Workbench.open(Session, ids[weighting])
    with Session() as s:
        stored = find_graph(s, bench.graph.key)
    assert stored is not None
    fresh_idx, fresh_w = knn_graph(bench.state.X, k=5, weights=weighting, exclude_self=True)
    np.testing.assert_array_equal(stored.idx, fresh_idx)
    np.testing.assert_array_equal(stored.w, fresh_w)
    assert stored.idx.dtype == fresh_idx.dtype and not stored.idx.flags.writeable
    # A workbench that loads it ranks exactly as one that built it.
    again = Workbench.open(Session, ids[weighting])
    assert again.graph.built is False and bench.graph.built is True
    np.testing.assert_array_equal(again.scores, bench.scores)
    np.testing.assert_array_equal(again.queue(), bench.queue())


def test_reopening_does_not_rebuild_and_sessions_on_one_dataset_share_a_graph(store):
    _, Session, dataset_id, ids = store
    before = graph_builds()
    Workbench.open(Session, ids["uniform"])
    assert graph_builds() == before + 1
    for _ in range(2):
        assert Workbench.open(Session, ids["uniform"]).graph.built is False
    other = create_session(
        Session,
        dataset_id=dataset_id,
        name="uniform-pl",
        k=5,
        weighting="uniform",
        criterion="pl",
        target_set="unlabelled",
    )
    bench = Workbench.open(Session, other)
    assert bench.graph.built is False
    assert graph_builds() == before + 1
    with Session() as s:
        assert graph_hashes(s, dataset_id) == [bench.graph.key]


def test_a_second_process_loads_the_graph_instead_of_building_it(store):
    db, Session, _, ids = store
    Workbench.open(Session, ids["uniform"])
    script = (
        "import json, sys\n"
        "from app.service import Workbench, graph_builds\n"
        "from app.store import open_store\n"
        f"bench = Workbench.open(open_store(sys.argv[1]), {ids['uniform']})\n"
        "print(json.dumps([graph_builds(), bench.graph.built]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script, str(db)], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[0, false]"


def test_changed_features_miss_the_stored_graph_and_replace_it(store):
    _, Session, dataset_id, ids = store
    bench = Workbench.open(Session, ids["uniform"])
    X = np.array(bench.state.X)
    key = graph_key(X, k=5, weighting="uniform", algorithm="exact")
    assert key == bench.graph.key
    X[0, 0] += 1e-9
    changed = graph_key(X, k=5, weighting="uniform", algorithm="exact")
    assert changed != key
    for other in (
        graph_key(X, k=6, weighting="uniform", algorithm="exact"),
        graph_key(X, k=5, weighting="distance", algorithm="exact"),
        graph_key(X, k=5, weighting="uniform", algorithm="approx"),
    ):
        assert other not in (key, changed)
    before = graph_builds()
    result = dataset_graph(Session, dataset_id=dataset_id, X=X, k=5, weighting="uniform")
    assert result.built and graph_builds() == before + 1
    with Session() as s:
        # The graph of the old features is gone; the new one is the dataset's only graph.
        assert graph_hashes(s, dataset_id) == [changed]
        assert find_graph(s, key) is None


def test_saving_a_graph_twice_keeps_the_first(store):
    _, Session, dataset_id, _ = store
    idx = np.array([[1], [0]])
    w = np.array([[0.5], [2.0]])

    def save(s):
        return save_graph(
            s,
            dataset_id=dataset_id,
            content_hash="h" * 64,
            k=1,
            weighting="distance",
            algorithm="exact",
            idx=idx,
            w=w,
            build_seconds=0.1,
        )

    assert write_transaction(Session, save) is True
    assert write_transaction(Session, save) is False
    with Session() as s:
        stored = find_graph(s, "h" * 64)
    np.testing.assert_array_equal(stored.idx, idx)
    np.testing.assert_array_equal(stored.w, w)


def test_a_graph_of_the_wrong_shape_is_refused(store):
    from app.store import InvalidRecord

    _, Session, dataset_id, _ = store
    with pytest.raises(InvalidRecord, match=r"shape \(n_targets, k=2\)"):
        write_transaction(
            Session,
            lambda s: save_graph(
                s,
                dataset_id=dataset_id,
                content_hash="x" * 64,
                k=2,
                weighting="uniform",
                algorithm="exact",
                idx=np.zeros((3, 1), dtype=int),
                w=np.ones((3, 1)),
                build_seconds=0.0,
            ),
        )


def test_progress_of_opening_a_session_reaches_100_percent_in_every_stage(store):
    _, Session, _, ids = store
    updates = []
    Workbench.open(Session, ids["distance"], progress=updates.append)
    stages = [u.stage for u in updates]
    assert set(stages) == {"load", "hash", "search", "save", "score"}
    for stage in set(stages):
        last = [u for u in updates if u.stage == stage][-1]
        assert last.fraction == 1.0 and last.done == last.total, last
    searched = [u.done for u in updates if u.stage == "search"]
    assert searched == sorted(searched) and searched[-1] == 90
    # Reopening loads the graph: no search, no save.
    updates.clear()
    Workbench.open(Session, ids["distance"], progress=updates.append)
    assert {u.stage for u in updates} == {"load", "hash", "score"}


def test_import_reports_rows_read_and_stored(tmp_path):
    csv = tmp_path / "rows.csv"
    csv.write_bytes(small_csv_bytes(n=40))
    updates = []
    import_file(open_store(tmp_path / "i.db"), csv, name="rows", min_rows=6, progress=updates.append)
    assert [(u.stage, u.done, u.total) for u in updates] == [
        ("read", 0, None),
        ("read", 40, 40),
        ("store", 0, 40),
        ("store", 40, 40),
    ]
    assert "rows stored: 40 of 40 (100 %)" == updates[-1].describe()


def test_progress_updates_describe_rate_and_time_left():
    seen = []
    report = ProgressTracker(seen.append)
    report("search", 0, 1000)
    report("search", 250, 1000)
    update = seen[-1]
    assert update.fraction == 0.25 and update.label == "neighbours found"
    assert update.eta == pytest.approx(3 * update.elapsed)
    assert update.describe().startswith("neighbours found: 250 of 1,000 (25 %)")
    report("save", 0, None)
    assert seen[-1].fraction is None and seen[-1].eta is None and seen[-1].describe() == "graph saved: 0"


def test_the_registry_runs_one_build_per_key_and_restarts_a_failed_one():
    registry = BuildRegistry()
    gate = threading.Event()
    calls = []

    def work(report):
        calls.append(1)
        report(ProgressUpdate("search", 1, 2, 0.1))
        gate.wait(30)
        return "graph"

    first = registry.start("a", work)
    joined = registry.start("a", work)
    assert joined is first and first.running and registry.started == 1
    gate.set()
    assert first.wait(30) and first.result == "graph" and len(calls) == 1
    assert registry.start("a", work) is first  # finished jobs are kept for later callers

    def broken(report):
        raise ValueError("bad features")

    failed = registry.start("b", broken)
    assert failed.wait(30) and isinstance(failed.error, ValueError)
    retried = registry.start("b", work)
    assert retried is not failed and retried.wait(30) and retried.result == "graph"
    # A new key of the same group drops the old one (the dataset got new items).
    registry.start(("s", 2), work, group="s")
    registry.start(("s", 3), work, group="s")
    assert registry.get(("s", 2)) is None and registry.get(("s", 3)) is not None


def test_explanations_computed_on_the_neighbour_rows_equal_the_whole_set(store):
    from engine.winners import label_sets, possible_labels, witness

    _, Session, _, ids = store
    bench = Workbench.open(Session, ids["distance"])
    Y = np.array(bench.state.candidates)
    names = bench.label_names
    checked = 0
    for position in bench.queue(top=15):
        why = bench.explain(int(position))
        flagged = np.flatnonzero((bench.ranker.flags & (bench.idx == position)).any(axis=1))
        assert why.targets == [int(bench.targets[r]) for r in flagged]
        ex = why.example
        if ex is None:
            continue
        row = int(flagged[0])
        idx_row, w_row = bench.idx[row], bench.w[row]
        necessary, _ = label_sets(idx_row[None], w_row[None], Y)
        possible = possible_labels(idx_row[None], w_row[None], Y)[0]
        assert ex.necessary == [names[m] for m in np.flatnonzero(necessary[0])]
        assert ex.possible == [names[m] for m in np.flatnonzero(possible)]
        if ex.witness_label is not None:
            chosen = witness(idx_row, w_row, Y, names.index(ex.witness_label))
            assert [vote for _, vote, _ in ex.witness] == [names[c] for c in chosen]
        for label, nl_after in ex.necessary_after.items():
            answered = Y.copy()
            answered[position] = False
            answered[position, names.index(label)] = True
            after, _ = label_sets(idx_row[None], w_row[None], answered)
            assert nl_after == [names[m] for m in np.flatnonzero(after[0])]
        checked += 1
    assert checked > 0


def test_opening_a_session_whose_matrix_has_no_blocks_stores_them(store):
    """A dataset read from its rows (no blocks: published by an older winnow, or given new
    items) gets its blocks back at the first open; the next open reads them."""
    from sqlalchemy import text

    from app.store import feature_matrix_stored, load_feature_matrix

    _, Session, dataset_id, ids = store
    with Session() as s:
        assert feature_matrix_stored(s, dataset_id)  # written by the import
    write_transaction(Session, lambda s: s.execute(text("DELETE FROM feature_blocks")))
    bench = Workbench.open(Session, ids["uniform"])
    with Session() as s:
        assert feature_matrix_stored(s, dataset_id)
        np.testing.assert_array_equal(load_feature_matrix(s, dataset_id, 90, 4), bench.state.X)
    again = Workbench.open(Session, ids["uniform"])
    assert again.graph.key == bench.graph.key and again.graph.built is False


def test_rejects_vote_on_the_persisted_graph_and_store_the_one_of_another_k(store):
    from engine.dst import transductive_decisions

    _, Session, dataset_id, ids = store
    bench = Workbench.open(Session, ids["distance"])
    other = Workbench.open(Session, ids["uniform"])
    before = graph_builds()
    queue = bench.rejects()
    assert graph_builds() == before  # the session's own graph (its weights play no part)
    labels, _, margin = transductive_decisions(np.array(bench.state.candidates), bench.graph.idx, random_state=0)
    np.testing.assert_array_equal(queue.labels, labels[queue.positions])
    np.testing.assert_array_equal(queue.margin, margin[queue.positions])
    # Another number of neighbours: its graph is built once, stored, and loaded by the next workbench.
    bench.rejects(n_neighbors=3)
    assert graph_builds() == before + 1
    other.rejects(n_neighbors=3)
    assert graph_builds() == before + 1
    with Session() as s:
        assert len(graph_hashes(s, dataset_id)) == 3  # k=5 uniform, k=5 distance, k=3 uniform
