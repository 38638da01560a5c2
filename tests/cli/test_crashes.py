"""kill -9 at the worst moment: an import shows nothing or everything, an export leaves no
half file and no temporary file (issue 13, items 3 and 8).

The ``winnow`` entry point runs as a subprocess with ``WINNOW_CRASH_AT`` naming a crash point
(:mod:`app.crash_points`): the process sends itself SIGKILL there, as the kernel's OOM killer or
a ``kill -9`` would.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess

import pytest

from tests.cli.conftest import WINNOW


def run_until_killed(*args, point: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "WINNOW_CRASH_AT": point, "NO_COLOR": "1"}
    result = subprocess.run([str(WINNOW), *map(str, args)], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == -signal.SIGKILL, (result.returncode, result.stderr)
    return result


def rows(db, sql):
    with sqlite3.connect(db) as con:
        return con.execute(sql).fetchall()


@pytest.mark.parametrize("point", ["import-after-first-batch", "import-before-publish"])
def test_an_import_killed_half_way_shows_nothing_then_succeeds(winnow, small_csv, tmp_path, point):
    db = tmp_path / "w.db"
    run_until_killed("import", small_csv, "--db", db, "--name", "d", "--session", "s", "-k", "5", point=point)
    # Killed between staging and publishing: the rows are there, unpublished, no session.
    assert rows(db, "select name, published from datasets") == [("d", 0)]
    assert rows(db, "select count(*) from instances") == [(120,)]
    assert rows(db, "select count(*) from labelling_sessions") == [(0,)]
    # Nobody sees it, and a command that only reads leaves it alone (it could be running).
    listing = winnow("session", "list", "--db", db)
    assert " s " not in listing.stdout
    assert rows(db, "select name, published from datasets") == [("d", 0)]
    # The next import finds its lock free (the process died), removes it, and may take its name.
    winnow("import", small_csv, "--db", db, "--name", "d", "--session", "s", "-k", "5")
    assert rows(db, "select count(*) from instances") == [(120,)]
    assert rows(db, "select name, published from datasets") == [("d", 1)]
    assert rows(db, "select name, k from labelling_sessions") == [("s", 5)]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--weighting", "bogus"], "--weighting must be one of uniform, distance; got 'bogus'"),
        (["--criterion", "bogus"], "--criterion must be one of"),
        (["-k", "0"], "-k must be >= 1, got 0"),
        (["-k", "500"], "has 120 data rows but at least 501 are needed"),
        (["--session", "taken"], "a labelling session called 'taken' already exists"),
    ],
)
def test_import_with_a_session_is_all_or_nothing(winnow, small_csv, tmp_path, options, message):
    db = tmp_path / "w.db"
    winnow("import", small_csv, "--db", db, "--name", "first", "--session", "taken", "-k", "5")
    args = ["import", small_csv, "--db", db, "--name", "second", "--session", "new", *options]
    result = winnow(*args, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert rows(db, "select name from datasets") == [("first",)]
    assert rows(db, "select name from labelling_sessions") == [("taken",)]
    # Corrected, the command works at once: no half-written dataset holds the name.
    winnow("import", small_csv, "--db", db, "--name", "second", "--session", "new", "-k", "5")
    assert rows(db, "select name from datasets order by id") == [("first",), ("second",)]


def test_an_export_killed_before_its_rename_leaves_no_trace(winnow, small_csv, tmp_path):
    db = tmp_path / "w.db"
    winnow("import", small_csv, "--db", db, "--name", "d", "--session", "s", "-k", "5")
    out = tmp_path / "exports"
    out.mkdir()
    target = out / "labelled.csv"
    target.write_text("the previous export\n")
    run_until_killed("export", "s", "--what", "labelled", "-o", target, "--db", db, point="export-before-rename")
    assert sorted(p.name for p in out.iterdir()) == ["labelled.csv"]  # no .tmp file
    assert target.read_text() == "the previous export\n"
    winnow("export", "s", "--what", "labelled", "-o", target, "--db", db)
    assert target.read_text().startswith("id,")
    assert sorted(p.name for p in out.iterdir()) == ["labelled.csv"]
