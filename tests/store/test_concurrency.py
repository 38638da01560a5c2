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

from .concurrency_worker import SHARED_ANNOTATOR, open_new_store, record_answers

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
                s,
                name="d",
                X=rng.normal(size=(n, 4)),
                candidates=Y,
                label_names=[f"l{j}" for j in range(m)],
                external_ids=[f"e{i}" for i in range(n)],
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
                + [(SHARED_ANNOTATOR, "answer", n_shared_events // 2), (SHARED_ANNOTATOR, "undo", n_shared_events // 2)]
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


N_OPENERS = 6


def test_many_processes_open_one_new_store_at_once_and_it_gets_one_audit_key(store_url):
    """Six openers of a new store race through its migration and the making of its audit key
    (before that key was made under the write lock, 5 of 8 such races on SQLite ended in
    "is busy" for one of them)."""
    from app.store import open_store, stored_audit_secret

    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(N_OPENERS)
    results = ctx.Queue()
    openers = [ctx.Process(target=open_new_store, args=(store_url, barrier, results)) for _ in range(N_OPENERS)]
    for opener in openers:
        opener.start()
    outcomes = [results.get(timeout=300) for _ in openers]
    for opener in openers:
        opener.join(timeout=60)
    assert outcomes == ["ok"] * N_OPENERS, "\n".join(o for o in outcomes if o != "ok")
    with open_store(store_url, create=False)() as s:
        key = stored_audit_secret(s)
    assert key is not None and len(key) == 32


def test_a_writer_waits_for_the_open_write_transaction(small):
    """Writers queue (SQLite's write lock, PostgreSQL's advisory lock), so an undo started
    while another write is open sees that write's event once it may go on."""
    from app.store import record_event

    def work(who, kind, **kwargs):
        return lambda s: record_event(s, session_id=small.session_id, annotator=who, kind=kind, **kwargs)

    first = write_transaction(small.Session, work("ann", "skip", instance_position=4))
    holding, release = threading.Event(), threading.Event()
    outcome = {}

    def hold():
        def slow(s):
            event = work("ann", "answer", instance_position=0, label=0)(s)
            holding.set()
            release.wait(timeout=60)
            return event

        outcome["held"] = write_transaction(small.Session, slow)

    def undo():
        outcome["undo"] = write_transaction(small.Session, work("ann", "undo"))

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(timeout=60)
    waiter = threading.Thread(target=undo)
    waiter.start()
    waiter.join(timeout=1.0)
    still_waiting = waiter.is_alive()
    release.set()
    holder.join(timeout=60)
    waiter.join(timeout=60)
    assert still_waiting, "a second writer went ahead while a write transaction was open"
    assert outcome["undo"].undoes_event_id == outcome["held"].id != first.id


def test_transient_lock_errors_are_retried():
    from sqlalchemy.exc import IntegrityError, OperationalError

    from app.store import is_locked_error

    class DriverError(Exception):
        def __init__(self, message, sqlstate=None):
            super().__init__(message)
            self.sqlstate = sqlstate

    def error(message, sqlstate=None, kind=OperationalError):
        return kind("SELECT 1", {}, DriverError(message, sqlstate))

    assert is_locked_error(error("database is locked"))
    for sqlstate in ("55P03", "40001", "40P01"):  # lock timeout, serialisation, deadlock
        assert is_locked_error(error("could not obtain lock", sqlstate))
    assert not is_locked_error(error("connection refused", "08006"))
    assert not is_locked_error(error("duplicate key", "23505", kind=IntegrityError))
    assert not is_locked_error(RuntimeError("database is locked"))
