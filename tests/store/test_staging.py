"""Imports stage their rows in batches and publish dataset + session in one short transaction
(issue 13, items 3 and 7); a running import is known by the lock it holds, not by host and pid
(issue 23, item 7). Both backends."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator

import numpy as np
import pytest
from sqlalchemy import select

from app.store import (
    Dataset,
    InvalidRecord,
    RecordNotFound,
    SessionSpec,
    StoreBusy,
    check_dataset,
    close_stores,
    get_dataset_by_name,
    import_dataset,
    list_datasets,
    open_store,
    record_event,
    remove_abandoned_imports,
    session_configs,
    staging,
    write_transaction,
)
from app.store import datasets as datasets_module
from app.store.datasets import write_instances
from app.store.models import utcnow
from app.store.staging import importer_name
from tests.cli.conftest import WINNOW
from tests.deadlines import wait_for

from .conftest import PostgresServer, SmallStore, row_counts, small_store

N = 50


def raw(name="big", n=N):
    rng = np.random.default_rng(1)
    Y = rng.random((n, 4)) < 0.4
    Y[np.arange(n), rng.integers(0, 4, n)] = True
    return dict(
        name=name,
        X=rng.normal(size=(n, 3)),
        candidates=Y,
        label_names=["a", "b", "c", "d"],
        external_ids=[f"r{i}" for i in range(n)],
    )


def data(name="big", n=N):
    return check_dataset(**raw(name, n))


def visible(Session):
    with Session() as s:
        return [d.name for d in list_datasets(s)], [c.name for c in session_configs(s)]


def test_dataset_and_session_are_published_together(small):
    result = import_dataset(small.Session, data(), labelling=SessionSpec("week1", k=5), batch_rows=7)
    assert result.n_instances == N and result.session_id is not None
    assert visible(small.Session) == (["toy", "big"], ["first", "week1"])
    with small.Session() as s:
        dataset = get_dataset_by_name(s, "big")
        assert dataset.published and dataset.staged_by is None and dataset.staged_at is None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (SessionSpec("s", k=N), rf"k={N} must be smaller than the number of items of dataset 'big' \({N}\)"),
        (SessionSpec("s", k=0), "k must be >= 1"),
        (SessionSpec("s", weighting="bogus"), "weighting must be one of uniform, distance; got 'bogus'"),
        (SessionSpec("s", criterion="bogus"), "criterion must be one of apl, .*; got 'bogus'"),
        (SessionSpec("first"), "a labelling session called 'first' already exists"),
        (SessionSpec(" "), "name is empty"),
    ],
)
def test_a_bad_session_writes_no_dataset(small, spec, message):
    before = row_counts(small.Session)
    with pytest.raises(InvalidRecord, match=message):
        import_dataset(small.Session, data(), labelling=spec, batch_rows=7)
    assert row_counts(small.Session) == before


def test_a_taken_dataset_name_writes_nothing(small):
    before = row_counts(small.Session)
    with pytest.raises(InvalidRecord, match="a dataset called 'toy' already exists"):
        import_dataset(small.Session, data("toy"))
    assert row_counts(small.Session) == before


def test_a_failure_half_way_leaves_nothing_and_frees_the_name(small, monkeypatch):
    before = row_counts(small.Session)
    real = datasets_module.insert_instances
    calls = []

    def fail_on_third(session, rows):
        calls.append(len(rows))
        if len(calls) == 3:
            raise OSError("disk full")
        real(session, rows)

    monkeypatch.setattr(datasets_module, "insert_instances", fail_on_third)
    with pytest.raises(OSError, match="disk full"):
        import_dataset(small.Session, data(), labelling=SessionSpec("s", k=3), batch_rows=10)
    assert row_counts(small.Session) == before
    monkeypatch.setattr(datasets_module, "insert_instances", real)
    import_dataset(small.Session, data(), labelling=SessionSpec("s", k=3), batch_rows=10)


def test_a_session_name_taken_during_the_import_leaves_nothing(small):
    before = row_counts(small.Session)

    def take_the_name(done, n):
        if done == 10:
            from app.store import create_labelling_session

            write_transaction(
                small.Session, lambda s: create_labelling_session(s, dataset_id=small.dataset_id, name="s", k=2)
            )

    with pytest.raises(InvalidRecord, match="a labelling session called 's' already exists"):
        import_dataset(small.Session, data(), labelling=SessionSpec("s", k=3), batch_rows=10, on_batch=take_the_name)
    after = row_counts(small.Session)
    assert after["datasets"] == before["datasets"] and after["instances"] == before["instances"]


def test_an_answer_commits_while_an_import_is_in_progress(small):
    """The import pauses after its first staging transaction until an answer of another
    session has committed: were the write lock held for the whole load, the answer would wait
    for the import and the import for the answer, and neither would finish."""
    staged, answered = threading.Event(), threading.Event()
    outcome: dict[str, object] = {}

    def pause(done, n):
        if done == 10:
            staged.set()
            outcome["waited"] = answered.wait(timeout=120)

    def run():
        try:
            outcome["result"] = import_dataset(
                small.Session, data(), labelling=SessionSpec("s", k=3), batch_rows=10, on_batch=pause
            )
        except BaseException as exc:  # handed to the test thread
            outcome["error"] = exc

    importer = threading.Thread(target=run)
    importer.start()
    try:
        assert staged.wait(timeout=120), outcome.get("error")
        event = write_transaction(
            small.Session,
            lambda s: record_event(s, session_id=small.session_id, annotator="ann", kind="skip", instance_position=0),
        )
        # Committed while the import is half-way, and the half-imported dataset is nowhere.
        assert importer.is_alive()
        assert visible(small.Session) == (["toy"], ["first"])
        with small.Session() as s:
            with pytest.raises(RecordNotFound, match=r"no dataset called 'big'; known datasets: \['toy'\]"):
                get_dataset_by_name(s, "big")
            staged_row = s.scalar(select(Dataset).where(Dataset.name == "big"))
            assert staged_row is not None and not staged_row.published and staged_row.staged_by == importer_name()
    finally:
        answered.set()
        importer.join(timeout=300)
    assert "error" not in outcome and outcome["waited"] is True
    assert event.id is not None
    assert visible(small.Session) == (["toy", "big"], ["first", "s"])


def _stage_by_hand(Session, name, staged_by, staged_at):
    """An unpublished dataset as an importer leaves it when it dies after staging."""
    checked = data(name, n=5)

    def work(s):
        row = checked.new_row(published=False)
        row.staged_by, row.staged_at = staged_by, staged_at
        s.add(row)
        s.flush()
        write_instances(s, row.id, checked)

    write_transaction(Session, work)


def _dead_pid() -> int:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(child.stdout)


def _unpublished(Session) -> list[str]:
    with Session() as s:
        return sorted(s.scalars(select(Dataset.name).where(~Dataset.published)))


def test_an_import_is_abandoned_when_nobody_holds_its_lock_whatever_its_host_and_pid(small):
    """Rows left by a dead importer are removed, even when they name this very process (a
    recycled pid, or a pid of another PID namespace); a running import is kept even when its
    row names a dead process on this host."""
    host = importer_name().rpartition(":")[0]
    before = row_counts(small.Session)
    staged, release = threading.Event(), threading.Event()
    outcome: dict[str, object] = {}

    def pause(done, n):
        if done == 10:
            staged.set()
            release.wait(timeout=120)

    def run():
        try:
            outcome["result"] = import_dataset(small.Session, data("running"), batch_rows=10, on_batch=pause)
        except BaseException as exc:  # handed to the test thread
            outcome["error"] = exc

    importer = threading.Thread(target=run)
    importer.start()
    try:
        assert staged.wait(timeout=120), outcome.get("error")
        # What a command in another PID namespace saw: a pid that is not running here.
        write_transaction(
            small.Session,
            lambda s: s.execute(
                Dataset.__table__.update().where(Dataset.name == "running").values(staged_by=f"{host}:{_dead_pid()}")
            ),
        )
        # Left by importers that died (staged after the import above started: an import's start
        # removes abandoned ones).
        _stage_by_hand(small.Session, "dead-here", f"{host}:{_dead_pid()}", utcnow())
        _stage_by_hand(small.Session, "names-this-process", importer_name(), utcnow())
        _stage_by_hand(small.Session, "elsewhere", "other-host:1", utcnow())
        assert visible(small.Session) == (["toy"], ["first"])
        removed = remove_abandoned_imports(small.Session)
        assert sorted(removed) == ["dead-here", "elsewhere", "names-this-process"]
        assert _unpublished(small.Session) == ["running"]
        # A name held by a running import is refused with who holds it.
        with pytest.raises(InvalidRecord, match=r"'running' is being imported \(by .*\)"):
            import_dataset(small.Session, data("running"))
    finally:
        release.set()
        importer.join(timeout=300)
    assert "error" not in outcome, outcome.get("error")
    assert visible(small.Session) == (["toy", "running"], ["first"])
    after = row_counts(small.Session)
    assert after["instances"] == before["instances"] + N


_IMPORTER = textwrap.dedent("""
    import os, sys, threading
    import numpy as np
    from app.store import check_dataset, import_dataset, open_store

    rng = np.random.default_rng(1)
    n = 50
    Y = rng.random((n, 4)) < 0.4
    Y[np.arange(n), rng.integers(0, 4, n)] = True
    checked = check_dataset(name="child", X=rng.normal(size=(n, 3)), candidates=Y, label_names=list("abcd"),
                            external_ids=[f"r{i}" for i in range(n)])

    def pause(done, total):
        if done == 10:
            # "linger": a child keeps this process's descriptors, the lock's connection among
            # them, so that its server session outlives this process.
            heir = os.fork() if sys.argv[2:] == ["linger"] else None
            if heir != 0:
                print("staged", heir or "", flush=True)
            threading.Event().wait()  # until killed

    import_dataset(open_store(sys.argv[1]), checked, batch_rows=10, on_batch=pause)
""")


def start_importer(url: str, *args: str) -> tuple[subprocess.Popen[str], list[str]]:
    """A process importing dataset ``child``, paused after its first batch until killed; also
    returns what it printed once paused (``staged`` and, with ``linger``, its child's pid)."""
    child = subprocess.Popen(
        [sys.executable, "-c", _IMPORTER, url, *args],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert child.stdout is not None
    try:
        said = child.stdout.readline().split()
        assert said[:1] == ["staged"], (said, child.poll())
    except BaseException:
        kill(child)  # not left waiting for ever
        raise
    return child, said[1:]


def kill(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)


def test_an_import_in_another_process_is_kept_while_it_runs_and_removed_once_killed(small, store_url):
    """The lock dies with the process: kill -9 frees it, and the next import removes the rows."""
    before = row_counts(small.Session)
    child, _ = start_importer(store_url)
    try:
        assert remove_abandoned_imports(small.Session) == []
        assert _unpublished(small.Session) == ["child"]
        import_dataset(small.Session, data("other"))  # an import starting meanwhile leaves it alone
        assert _unpublished(small.Session) == ["child"]
    finally:
        kill(child)
    # The next import removes the dead one's rows and may take its name at once, even when
    # PostgreSQL has not noticed yet that the dead process's connection is gone (issue 43).
    import_dataset(small.Session, data("child"))
    assert _unpublished(small.Session) == []
    assert visible(small.Session)[0] == ["toy", "other", "child"]
    assert row_counts(small.Session)["instances"] == before["instances"] + 2 * N


@pytest.fixture
def postgresql_store(postgres_server: PostgresServer) -> Iterator[SmallStore]:
    """A store on the session's PostgreSQL server alone, for what only PostgreSQL does."""
    name = postgres_server.acquire_database()
    url = postgres_server.url(name)
    try:
        yield small_store(open_store(url), url)
    finally:
        close_stores()
        postgres_server.release_database(name)


@contextlib.contextmanager
def dead_importer_with_a_live_connection(url: str) -> Iterator[int]:
    """An importer killed while its lock's connection stays open in a child of its own, so that
    PostgreSQL keeps its session and lock as if it had not noticed the death; yields the dead
    importer's pid."""
    importer, (heir,) = start_importer(url, "linger")
    try:
        kill(importer)
        yield importer.pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(heir), signal.SIGKILL)


@pytest.mark.postgresql
def test_an_import_ends_the_server_session_of_a_dead_importer_and_takes_its_name(postgresql_store, tmp_path):
    """Through the installed ``winnow``: the lock's holder is a process of this host that no
    longer runs, so its server session is ended and the import goes on (issue 43)."""
    csv = tmp_path / "child.csv"
    rows = [f"r{i},{i},{i % 3},{'a|b' if i % 2 else 'b'}" for i in range(12)]
    csv.write_text("\n".join(["id,f1,f2,candidates", *rows]) + "\n")
    with dead_importer_with_a_live_connection(postgresql_store.url):
        assert _unpublished(postgresql_store.Session) == ["child"]
        result = subprocess.run(
            [str(WINNOW), "import", csv, "--db", postgresql_store.url],
            capture_output=True,
            text=True,
            env={**os.environ, "NO_COLOR": "1"},
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr
    assert _unpublished(postgresql_store.Session) == []
    assert visible(postgresql_store.Session)[0] == ["toy", "child"]


@pytest.mark.postgresql
def test_a_dead_importers_lock_that_postgresql_keeps_is_waited_for_with_a_deadline(
    postgresql_store, monkeypatch, caplog
):
    """Where the server session cannot be ended (no right to), the import says what it waits
    for, for how long, and then gives up in one line naming the server process."""
    monkeypatch.setattr(staging, "_terminate_backend", lambda engine, backend: None)
    monkeypatch.setattr(staging, "IMPORT_TAKEOVER_SECONDS", 3.0)
    with dead_importer_with_a_live_connection(postgresql_store.url) as pid:
        with pytest.raises(StoreBusy) as raised:
            import_dataset(postgresql_store.Session, data("child"))
        message = str(raised.value)
        assert "\n" not in message
        assert re.fullmatch(
            rf"the import of dataset 'child' by .*:{pid} has ended \(its process is gone\), but PostgreSQL "
            r"still holds its lock \(server process (\d+)\) after 3 s; try again later, or have the "
            r"database's owner run SELECT pg_terminate_backend\(\1\)",
            message,
        ), message
        assert any("waiting up to 3 s for PostgreSQL to end its server process" in r.message for r in caplog.records)
        assert _unpublished(postgresql_store.Session) == ["child"]
    # Once the session is gone, so are the rows.
    wait_for(lambda: remove_abandoned_imports(postgresql_store.Session) == ["child"], what="the lock to go")
