"""Names on the command line that are not UTF-8 (issue 44, item 1).

On POSIX, Python hands a program the bytes of an argument that are not UTF-8 as lone
surrogates (``$'s\\xff'`` arrives as ``"s\\udcff"``); a session, item, user or label name like
that reached the database driver and ended in a ``UnicodeEncodeError`` traceback, exit 1. Every
name argument (and ``--db``, a store's path or URL) is now refused as one line on stderr,
exit 2, the store unchanged, while a data or output file whose name is not UTF-8 (a file the
system can open) is still accepted.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.cli.conftest import SAMPLE, WINNOW, run_winnow
from tests.cli.test_usage_errors import one_line_error

#: What Python makes of the byte 0xff in an argument (``os.fsdecode(b"\xff")``).
FF = "\udcff"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("non-utf8")
    lines = SAMPLE.read_text().splitlines()
    data = folder / "small.csv"
    data.write_text("\n".join(lines[:41]) + "\n")
    db = folder / "w.db"
    run_winnow("import", data, "--db", db, "--name", "small", "--session", "s", "-k", "3")
    return db


def dump(db: Path) -> list[str]:
    with sqlite3.connect(db) as con:
        return list(con.iterdump())


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["export", f"s{FF}", "-o", "out.csv"], "SESSION 's\\xff'"),
        (["session", "status", f"s{FF}"], "NAME 's\\xff'"),
        (["session", "settings", f"s{FF}"], "NAME 's\\xff'"),
        (["session", "settings", f"s{FF}", "--audit", "0.1"], "NAME 's\\xff'"),
        (["answer", f"s{FF}", "d0001", "2"], "SESSION 's\\xff'"),
        (["answer", "s", f"d{FF}", "2"], "ITEM 'd\\xff'"),
        (["answer", "s", "d0001", f"2{FF}"], "LABEL '2\\xff'"),
        (["answer", "s", "d0001", "2", "--annotator", f"a{FF}"], "--annotator 'a\\xff'"),
        (["session", "overlap", f"s{FF}", "2"], "NAME 's\\xff'"),
        (["session", "new", "t", "--dataset", f"small{FF}"], "--dataset 'small\\xff'"),
        (["session", "new", f"t{FF}", "--dataset", "small"], "NAME 't\\xff'"),
        (["session", "assign", "s", "ada", f"b{FF}"], "USERS 'b\\xff'"),
        (["rank", "--session", f"s{FF}", "-o", "r.csv"], "--session 's\\xff'"),
        (["user", "add", f"a{FF}", "--role", "annotator"], "NAME 'a\\xff'"),
        # Bytes around the undecodable one are shown escaped too, never sent to the terminal.
        (["session", "status", f"s\x1b[31m{FF}"], "NAME 's\\x1b[31m\\xff'"),
    ],
)
def test_a_name_that_is_not_utf8_is_one_line_exit_2(store, tmp_path, args, named):
    before = dump(store)
    line = one_line_error(run_winnow(*args, "--db", store, cwd=tmp_path, check=False))
    assert named + " is not UTF-8 text" in line, line
    assert line.endswith(" --help')")
    assert dump(store) == before
    assert not any(tmp_path.iterdir()), "nothing written"


def winnow_bytes(*args: object) -> subprocess.CompletedProcess[str]:
    """``winnow`` with its output read as the bytes it is: the paths it names are not UTF-8."""
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [str(WINNOW), *map(str, args)],
        capture_output=True,
        env=env,
        timeout=300,
        encoding="utf-8",
        errors="surrogateescape",
    )


def test_a_file_name_that_is_not_utf8_is_still_a_file(tmp_path):
    """Paths are not names: a data file or store called ``d\\xff.csv`` opens as before."""
    data = tmp_path / f"d{FF}.csv"
    data.write_bytes(SAMPLE.read_bytes())
    db = tmp_path / "w.db"
    result = winnow_bytes("import", data, "--db", db, "--name", "digits", "--session", "s")
    assert result.returncode == 0 and "Imported 800 instances" in result.stdout, result.stderr
    out = tmp_path / f"o{FF}.csv"
    assert winnow_bytes("export", "s", "-o", out, "--db", db).returncode == 0
    assert out.exists()
    # The dataset name it would take from the file is a name, and refused as one.
    line = one_line_error(winnow_bytes("import", data, "--db", db))
    assert "holds a lone surrogate" in line


def test_a_store_path_that_is_not_utf8_is_refused(tmp_path):
    """A store's path is kept as a URL, which is text: refused before anything is made."""
    line = one_line_error(run_winnow("init", "--db", tmp_path / f"w{FF}.db", check=False))
    assert "--db '" in line and "w\\xff.db' is not UTF-8 text" in line
    assert not any(tmp_path.iterdir())
