"""Real processes migrating and writing one SQLite file at the same time."""

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
    database_url,
    make_engine,
    open_store,
    write_transaction,
)

from .concurrency_worker import record_answers

N_ANSWERS = 200
ANNOTATORS = ("alice", "bob")


def test_processes_open_a_new_store_and_record_answers_concurrently(db_path):
    url = database_url(db_path)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(ANNOTATORS) + 1)  # the workers and this process
    results = ctx.Queue()
    workers = [
        ctx.Process(target=record_answers, args=(url, "shared", name, N_ANSWERS, barrier, results))
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

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            total = conn.execute(select(func.count()).select_from(AnswerEvent)).scalar()
            assert total == len(ANNOTATORS) * N_ANSWERS
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
            assert conn.exec_driver_sql("PRAGMA foreign_key_check").all() == []
            per_annotator = conn.exec_driver_sql(
                "SELECT a.name, count(*) FROM answer_events e JOIN annotators a"
                " ON a.id = e.annotator_id GROUP BY a.name ORDER BY a.name"
            ).all()
            assert per_annotator == [(name, N_ANSWERS) for name in ANNOTATORS]
    finally:
        engine.dispose()
