"""Long steps show progress on stderr (issue 29: the first command after an import ran 78 s
printing nothing): through the installed entry point, asked for with ``WINNOW_PROGRESS=always``
(stderr a pipe), drawn as a live bar on a terminal, and never on standard output."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli.conftest import SAMPLE, WINNOW, run_winnow


def winnow_env(*args, progress: str | None, cwd=None) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "WINNOW_PROGRESS"}
    env.update({"COLUMNS": "200", "NO_COLOR": "1"})
    if progress is not None:
        env["WINNOW_PROGRESS"] = progress
    return subprocess.run([str(WINNOW), *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    """The sample digits imported with a session ``s`` whose graph is not built yet."""
    db = tmp_path_factory.mktemp("progress") / "imported.db"
    run_winnow("import", SAMPLE, "--db", db, "--session", "s")
    return db


@pytest.fixture
def db(imported, tmp_path) -> Path:
    """A copy of :func:`imported` for one test (each opens the session for the first time)."""
    copy = tmp_path / "w.db"
    shutil.copyfile(imported, copy)
    return copy


def stage_lines(stderr: str, stage: str) -> list[str]:
    return [line for line in stderr.splitlines() if f": {stage}: " in line]


def test_the_first_open_reports_every_stage_on_stderr_and_stdout_stays_json(db):
    first = winnow_env("session", "status", "s", "--db", db, "--json", progress="always")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["instances"] == 800  # nothing but the JSON on stdout
    for stage in ("items loaded", "features hashed", "neighbours found", "graph saved", "targets scored"):
        lines = stage_lines(first.stderr, stage)
        assert lines and all(line.startswith("session s: ") for line in lines), (stage, first.stderr)
    # Each stage from its start to its end, with counts and percentages.
    searched = stage_lines(first.stderr, "neighbours found")
    assert searched[0] == "session s: neighbours found: 0 of 800 (0 %)"
    assert searched[-1] == "session s: neighbours found: 800 of 800 (100 %)"
    assert stage_lines(first.stderr, "targets scored")[-1].endswith(" of 800 (100 %)")


def test_a_pipe_gets_no_progress_unless_asked_and_a_bad_setting_is_one_line(db, tmp_path):
    result = winnow_env("export", "s", "--what", "ranked", "-o", tmp_path / "r.csv", "--db", db, progress=None)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    bad = winnow_env("session", "status", "s", "--db", db, progress="loud")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == ["error: $WINNOW_PROGRESS must be one of auto, always, never, not 'loud'"]


def test_ranking_a_file_reports_reading_the_graph_and_the_scores(tmp_path, small_csv):
    out = tmp_path / "ranked.csv"
    result = winnow_env("rank", small_csv, "-o", out, progress="always")
    assert result.returncode == 0, result.stderr
    assert stage_lines(result.stderr, "rows read")[-1] == "rank small.csv: rows read: 120 of 120 (100 %)"
    assert stage_lines(result.stderr, "neighbours found")[-1].endswith("120 of 120 (100 %)")
    assert stage_lines(result.stderr, "targets scored")[-1].endswith("120 of 120 (100 %)")
    assert "Wrote" in result.stdout and "neighbours found" not in result.stdout and out.exists()


def test_on_a_terminal_the_bar_shows_the_stage_and_the_time_left_and_stdout_stays_json(db):
    """stderr a terminal (a pty), stdout a pipe: the live bar goes to the terminal only."""
    env = {key: value for key, value in os.environ.items() if key != "WINNOW_PROGRESS"}
    env.update({"COLUMNS": "200", "TERM": "xterm"})
    terminal, child_end = pty.openpty()
    process = subprocess.Popen(
        [str(WINNOW), "session", "status", "s", "--db", str(db), "--json"],
        stdout=subprocess.PIPE,
        stderr=child_end,
        env=env,
    )
    os.close(child_end)
    drawn = b""
    while True:
        ready, _, _ = select.select([terminal], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(terminal, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        drawn += chunk
    stdout, _ = process.communicate(timeout=120)
    os.close(terminal)
    assert process.returncode == 0
    assert json.loads(stdout)["instances"] == 800
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", drawn.decode("utf-8", "replace"))
    assert "session s: neighbours found" in text and "session s: targets scored" in text
    assert "eta" in text and "800/800" in text


@pytest.mark.parametrize(
    ("setting", "terminal", "mode"),
    [
        (None, True, "bar"),
        (None, False, "off"),
        ("auto", True, "bar"),
        ("auto", False, "off"),
        ("always", True, "bar"),
        ("always", False, "lines"),
        ("never", True, "off"),
        ("never", False, "off"),
        (" Always ", False, "lines"),
    ],
)
def test_the_progress_mode_follows_the_setting_and_the_terminal(monkeypatch, setting, terminal, mode):
    from app.cli import console

    if setting is None:
        monkeypatch.delenv("WINNOW_PROGRESS", raising=False)
    else:
        monkeypatch.setenv("WINNOW_PROGRESS", setting)
    monkeypatch.setattr(type(console.err), "is_terminal", property(lambda _self: terminal))
    assert console.progress_mode() == mode


def test_plain_lines_give_each_stage_its_start_its_end_and_one_line_per_interval(monkeypatch, capsys):
    from types import SimpleNamespace

    from app.cli import console
    from app.service.tasks import ProgressUpdate

    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(console, "time", SimpleNamespace(monotonic=lambda: clock.now))
    monkeypatch.setenv("WINNOW_PROGRESS", "always")
    monkeypatch.setattr(type(console.err), "is_terminal", property(lambda _self: False))
    with console.progress_bar("session s") as report:
        for second, done in ((0, 0), (0.5, 100), (1.0, 200), (2.5, 500), (3.0, 600), (3.1, 1000), (3.2, 1000)):
            clock.now = second
            report(ProgressUpdate("search", done, 1000, second))
        report(ProgressUpdate("score", 0, 10, 0.0))
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "session s: neighbours found: 0 of 1,000 (0 %)",
        "session s: neighbours found: 500 of 1,000 (50 %), about 2 s left",
        "session s: neighbours found: 1,000 of 1,000 (100 %)",
        "session s: targets scored: 0 of 10 (0 %)",
    ]
