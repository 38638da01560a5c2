"""Real processes migrating and writing one new store at the same time, on both backends."""

from __future__ import annotations

import multiprocessing
import queue
import threading

import numpy as np
from sqlalchemy import func, select

from app.store import (
    AnswerEvent,
    create_dataset,
    create_labelling_session,
    make_engine,
    open_store,
    write_transaction,
)

from .concurrency_worker import SHARED_ANNOTATOR, record_answers

N_ANSWERS = 150
N_SHARED = 25
ANNOTATORS = ("alice", "bob")


def test_processes_open_a_new_store_and_record_answers_concurrently(store_url):
    url = store_url
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(ANNOTATORS) + 1)  # the workers and this process
    results = ctx.Queue()
    workers = [
        ctx.Process(
            target=record_answers,
            args=(url, "shared", name, N_ANSWERS, N_SHARED, barrier, results),
        )
        for name in ANNOTATORS
    ]
    for worker in workers:
        worker.start()
    try:
        # 1. everyone opens (and so migrates) the new store at the same moment
        barrier.wait(timeout=180)
        Session = open_store(url)
        barrier.wait(timeout=180)
        # 2. this process creates the data, 3. the workers record concurrently
        rng = np.random.default_rng(0)
        n, m = 50, 6
        Y = rng.random((n, m)) < 0.4
        Y[np.arange(n), rng.integers(0, m, n)] = True

        def work(s):
            ds = create_dataset(
                s, name="d", X=rng.normal(size=(n, 4)), candidates=Y,
                label_names=[f"l{j}" for j in range(m)], external_ids=[f"e{i}" for i in range(n)],
            )
            create_labelling_session(s, dataset_id=ds.id, name="shared")

        write_transaction(Session, work)
        barrier.wait(timeout=180)
    except threading.BrokenBarrierError:
        pass  # a worker failed: its traceback is on the queue
    collected = []
    try:
        for _ in workers:
            collected.append(results.get(timeout=300))
    except queue.Empty:
        pass
    for worker in workers:
        worker.join(timeout=60)
        if worker.is_alive():
            worker.terminate()
            worker.join()

    errors = [r for r in collected if r[1] != "ok"]
    assert not errors, "\n".join(r[2] for r in errors)
    assert sorted(r[0] for r in collected) == list(ANNOTATORS)
    assert [w.exitcode for w in workers] == [0, 0]

    n_shared_events = len(ANNOTATORS) * N_SHARED * 2
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            total = conn.execute(select(func.count()).select_from(AnswerEvent)).scalar()
            assert total == len(ANNOTATORS) * N_ANSWERS + n_shared_events
            if conn.dialect.name == "sqlite":
                assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
                assert conn.exec_driver_sql("PRAGMA foreign_key_check").all() == []
            per_annotator = conn.exec_driver_sql(
                "SELECT a.name, e.kind, count(*) FROM answer_events e JOIN annotators a"
                " ON a.id = e.annotator_id GROUP BY a.name, e.kind ORDER BY a.name, e.kind"
            ).all()
            assert per_annotator == sorted(
                [(name, "answer", N_ANSWERS) for name in ANNOTATORS]
                + [(SHARED_ANNOTATOR, "answer", n_shared_events // 2),
                   (SHARED_ANNOTATOR, "undo", n_shared_events // 2)]
            )
            # Every shared answer was undone exactly once, and only by a later event.
            undone = conn.exec_driver_sql(
                "SELECT count(*) FROM answer_events e JOIN answer_events u"
                " ON u.undoes_event_id = e.id WHERE e.kind = 'answer' AND u.id > e.id"
                " AND e.annotator_id = u.annotator_id AND e.instance_id = u.instance_id"
            ).scalar()
            assert undone == n_shared_events // 2
    finally:
        engine.dispose()
