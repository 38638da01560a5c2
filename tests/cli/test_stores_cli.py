"""`--db` names a winnow store or nothing is touched; stores and exports are 0600; `winnow ui`
refuses a bad or busy port in one line (issue 23, items 7 and 8). Through the installed entry
point, as a user meets it."""

from __future__ import annotations

import csv
import os
import socket
import sqlite3
import stat
import subprocess

import pytest

from tests.cli.conftest import WINNOW, run_winnow
from tests.cli.test_usage_errors import one_line_error


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listing(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def foreign_sqlite(path) -> None:
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        con.execute("INSERT INTO notes (body) VALUES ('mine')")
    con.close()


@pytest.mark.parametrize(
    "args",
    [
        ["session", "list"],
        ["session", "status", "s"],
        ["user", "list"],
        ["user", "disable", "bob"],
        ["session", "new", "s", "--dataset", "d"],
        ["export", "s", "-o", "out.csv"],
        ["answer", "s", "--kind", "undo"],
        ["rank", "--session", "s", "-o", "out.csv"],
        ["ui", "--port", "{port}", "--headless"],
    ],
)
def test_a_missing_store_is_not_created_by_a_command_that_only_uses_one(tmp_path, args):
    db = tmp_path / "mistyped.db"
    args = [a.format(port=free_port()) for a in args]
    line = one_line_error(run_winnow(*args, "--db", db, cwd=tmp_path, check=False))
    assert line == (
        f"error: no winnow store at {db} (create one with `winnow import FILE --db {db}` or `winnow init --db {db}`)"
    )
    assert list(tmp_path.iterdir()) == []


def test_user_add_needs_a_store_too(tmp_path):
    db = tmp_path / "team.db"
    result = subprocess.run(
        [str(WINNOW), "user", "add", "ada", "--role", "admin", "--password-stdin", "--db", str(db)],
        input="s3cret-pass-word\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "no winnow store at" in one_line_error(result)
    assert not db.exists()


def test_an_empty_file_is_refused_and_left_empty(tmp_path):
    db = tmp_path / "empty.db"
    db.touch()
    line = one_line_error(run_winnow("session", "list", "--db", db, check=False))
    assert line.startswith(f"error: no winnow store at {db}") and line.endswith("the file is empty")
    assert listing(tmp_path) == {"empty.db": b""}


@pytest.mark.parametrize(
    "args", [["session", "list"], ["init"], ["import", "{csv}"], ["ui", "--sample", "--port", "{port}", "--headless"]]
)
def test_someone_elses_sqlite_file_is_refused_and_left_as_it_was(tmp_path, small_csv, args):
    """Even the commands that create stores: no table added, no switch to WAL, no -wal file."""
    folder = tmp_path / "theirs"
    folder.mkdir()
    db = folder / "foreign.db"
    foreign_sqlite(db)
    before = listing(folder)
    args = [a.format(csv=small_csv, port=free_port()) for a in args]
    line = one_line_error(run_winnow(*args, "--db", db, check=False))
    assert line == f"error: {db} is not a winnow store (a SQLite database without winnow's tables); give another --db"
    assert listing(folder) == before
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        assert con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall() == [("notes",)]
    con.close()


def test_a_file_that_is_not_sqlite_is_refused_even_by_import(tmp_path, small_csv):
    db = tmp_path / "notes.txt"
    db.write_text("my notes\n" * 50)
    line = one_line_error(run_winnow("import", small_csv, "--db", db, check=False))
    assert line == f"error: {db} is not a winnow store (not a SQLite database); give another --db"
    assert db.read_text() == "my notes\n" * 50


def _umask_000(args: list[str]) -> subprocess.CompletedProcess:
    """Run winnow under umask 000: what it creates gets exactly the mode it asks for."""
    return subprocess.run(
        [str(WINNOW), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=lambda: os.umask(0),
        env={**os.environ, "NO_COLOR": "1"},
    )


def test_init_creates_a_0600_store_and_import_and_export_keep_files_0600(tmp_path, small_csv):
    db = tmp_path / "w.db"
    result = _umask_000(["init", "--db", db])
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    result = _umask_000(["import", small_csv, "--db", db, "--name", "d", "--session", "s", "-k", "5"])
    assert result.returncode == 0, result.stderr
    side_files = [p for p in tmp_path.iterdir() if p.name.startswith("w.db")]
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in side_files} == {p.name: 0o600 for p in side_files}
    out = tmp_path / "labelled.csv"
    out.write_text("old")
    out.chmod(0o644)
    result = _umask_000(["export", "s", "--what", "labelled", "-o", out, "--db", db])
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and out.read_text() != "old"
    # A store made by import alone is 0600 too.
    other = tmp_path / "other.db"
    assert _umask_000(["import", small_csv, "--db", other, "--name", "d"]).returncode == 0
    assert stat.S_IMODE(other.stat().st_mode) == 0o600


def test_init_on_an_existing_store_keeps_its_data(tmp_path, small_csv):
    db = tmp_path / "w.db"
    run_winnow("import", small_csv, "--db", db, "--name", "d", "--session", "s", "-k", "5")
    assert "is a winnow store" in run_winnow("init", "--db", db).stdout
    assert " s " in run_winnow("session", "list", "--db", db).stdout


# ---------------------------------------------------------------------------- ports


@pytest.mark.parametrize("port", ["99999", "-1", "65536"])
def test_a_port_out_of_range_is_one_line(tmp_path, port):
    line = one_line_error(run_winnow("ui", "--port", port, "--headless", cwd=tmp_path, check=False))
    assert line == f"error: --port must be between 1 and 65535, got {port}"


def test_a_busy_port_is_one_line_and_never_announces_a_server(tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_winnow(
            "ui", "--port", port, "--address", "127.0.0.1", "--headless", "--db", tmp_path / "w.db", check=False
        )
    line = one_line_error(result)
    assert line.startswith(f"error: port {port} is in use")
    assert "winnow is running" not in result.stdout


# ---------------------------------------------------------------------------- columns


@pytest.mark.parametrize("command", ["import", "rank"])
def test_ignoring_a_column_that_has_a_role_is_one_line(tmp_path, small_csv, command):
    args = [command, small_csv, "--ignore-columns", "id,candidates"]
    args += ["--db", tmp_path / "w.db"] if command == "import" else ["-o", tmp_path / "r.csv"]
    line = one_line_error(run_winnow(*args, check=False))
    assert "ignore_columns names columns that cannot be ignored: " in line
    assert "'candidates' (holds the candidate sets)" in line and "'id' (holds the ids)" in line
    assert "small.csv" in line
    assert not (tmp_path / "r.csv").exists()


def test_a_command_closes_its_store_before_its_quick_exit(tmp_path, small_csv):
    # The installed command skips the interpreter's last collections (app.cli.run): the stores
    # are closed first, so SQLite checkpoints the answers into the file and removes its WAL,
    # and another process reading the file alone (no -wal beside it) sees them.
    db = tmp_path / "s.db"
    run_winnow("import", small_csv, "--db", db, "--name", "d")
    run_winnow("session", "new", "s", "--dataset", "d", "--db", db)
    first = run_winnow("export", "s", "--db", db, "--what", "ranked", "-o", tmp_path / "r.csv")
    assert "Wrote" in first.stdout
    with open(tmp_path / "r.csv", newline="") as ranked:
        item = next(csv.DictReader(ranked))["id"]
    run_winnow("answer", "s", item, "--db", db, "--kind", "skip")
    assert not [p.name for p in tmp_path.iterdir() if p.name in ("s.db-wal", "s.db-shm")]
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        assert con.execute("SELECT count(*) FROM answer_events").fetchone() == (1,)
    con.close()
