"""A real second process holds the store's write lock while the installed ``winnow`` runs
(issue 29): commands that only read succeed, because opening a store whose schema is current
takes no lock, and a write waits the busy timeout (``WINNOW_BUSY_TIMEOUT_MS``, short here) and
ends in one line naming the process that holds the store, exit 2 -- never a traceback. On both
backends: ``BEGIN IMMEDIATE`` on SQLite, winnow's advisory lock on PostgreSQL.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.engine import make_url

from app.store.db import PG_WRITE_LOCK
from tests.cli.conftest import WINNOW
from tests.deadlines import wait_for

from .conftest import row_counts

BUSY = {"WINNOW_BUSY_TIMEOUT_MS": "1500"}

SQLITE_HOLDER = """
import sqlite3, sys
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.read()
"""

POSTGRESQL_HOLDER = """
import psycopg, sys
connection = psycopg.connect(sys.argv[1], application_name="long-writer")
connection.execute(f"SELECT pg_advisory_xact_lock({int(sys.argv[2])})")
print("held", flush=True)
sys.stdin.read()
"""


def winnow(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(WINNOW), *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1", **(env or {})},
        timeout=300,
    )


@contextmanager
def lock_held(url: str) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the write lock until the block ends."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        args = ["-c", SQLITE_HOLDER, str(parsed.database)]
    else:
        plain = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
        args = ["-c", POSTGRESQL_HOLDER, plain, str(PG_WRITE_LOCK)]
    holder = subprocess.Popen([sys.executable, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.communicate(timeout=60)  # closing stdin ends it; its transaction rolls back
        if parsed.get_backend_name() != "sqlite":
            # The kernel frees a dead process's SQLite lock at once; PostgreSQL ends its session
            # (and the advisory lock) only once it notices the client has gone.
            wait_for(lambda: not holder_sessions(plain), what="PostgreSQL to end the holder's session")


def holder_sessions(url: str) -> list[int]:
    """Server processes of the holder's connections that PostgreSQL still keeps."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        rows = connection.execute("SELECT pid FROM pg_stat_activity WHERE application_name = 'long-writer'")
        return [pid for (pid,) in rows.fetchall()]


def one_line_busy(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and " is busy: " in lines[0], result.stderr
    assert "WINNOW_BUSY_TIMEOUT_MS" in lines[0]
    return lines[0]


def test_reads_succeed_and_writes_fail_in_one_line_naming_the_holder(small, tmp_path):
    url = small.url
    assert winnow("session", "status", "first", "--db", url).returncode == 0  # the graph is stored
    answers = tmp_path / "answers.csv"
    answers.write_text("id,label\nitem-0,cat\nitem-1,dog\n")
    before = row_counts(small.Session)
    with lock_held(url) as holder:
        for command in (
            ("session", "list"),
            ("session", "status", "first"),
            ("export", "first", "--what", "labelled", "-o", tmp_path / "labelled.csv"),
        ):
            result = winnow(*command, "--db", url, env=BUSY)
            assert result.returncode == 0 and not result.stderr.strip(), (command, result.stderr)
        assert (tmp_path / "labelled.csv").read_text().count("\n") == 6
        message = one_line_busy(winnow("answer", "first", "item-0", "cat", "--db", url, env=BUSY))
        if make_url(url).get_backend_name() == "sqlite":
            assert f"pid {holder.pid} (python" in message and "BEGIN IMMEDIATE" not in message
        else:
            assert "long-writer" in message and "pg_advisory_xact_lock" in message
        one_line_busy(winnow("answer", "first", "--from", answers, "--db", url, env=BUSY))
    assert row_counts(small.Session) == before
    result = winnow("answer", "first", "--from", answers, "--db", url, env=BUSY)
    assert result.returncode == 0, result.stderr
    assert row_counts(small.Session)["answer_events"] == before["answer_events"] + 2


def test_a_bad_busy_timeout_is_one_line(small):
    result = winnow("session", "list", "--db", small.url, env={"WINNOW_BUSY_TIMEOUT_MS": "soon"})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        "error: $WINNOW_BUSY_TIMEOUT_MS must be a whole number of milliseconds (at most 9 digits), got 'soon'"
    )


def test_a_store_behind_the_schema_migrates_under_the_lock_or_says_who_holds_it(store_url, monkeypatch):
    from app.store import StoreBusy, close_stores, downgrade_database, open_store
    from app.store.db import check_store, head_revision

    open_store(store_url)
    close_stores()
    downgrade_database(store_url, "-1")
    behind = check_store(store_url)
    assert behind != head_revision()
    monkeypatch.setenv("WINNOW_BUSY_TIMEOUT_MS", "500")
    with lock_held(store_url) as holder:
        try:
            open_store(store_url, create=False)
        except StoreBusy as exc:
            message = str(exc)
        else:
            raise AssertionError("a store behind the schema was opened without the write lock")
        assert " is busy: " in message
        assert f"pid {holder.pid} (python" in message or "long-writer" in message
        assert check_store(store_url) == behind  # nothing migrated
    open_store(store_url, create=False)
    assert check_store(store_url) == head_revision()
    close_stores()
