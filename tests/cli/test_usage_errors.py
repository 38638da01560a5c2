"""Every usage error of the installed ``winnow`` ends in one line on stderr, exit status 2 and
no traceback (issue 13, item 1).

typer 0.26-0.29 parse the command line with their own copy of click (``typer._click``), whose
exceptions the standalone ``click`` classes never matched: every usage error printed a
traceback (winnow now pins typer 0.25, which uses the standalone ``click``; both are
handled). These tests run the entry point as a subprocess, the way a user meets it, so a
dependency that moves its exceptions again fails here first.
"""

from __future__ import annotations

import socket

import pytest

from app.cli import click_exception_classes
from tests.cli.conftest import run_winnow


def one_line_error(result) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["answer"], "Missing argument 'SESSION'. (see 'winnow answer --help')"),
        (["session", "new"], "Missing argument 'NAME'. (see 'winnow session new --help')"),
        (["import", "--bogus", "x.csv"], "No such option '--bogus'. (see 'winnow import --help')"),
        (["frobnicate"], "No such command 'frobnicate'."),
        (["rank", "--top", "many", "x.csv", "-o", "r.csv"], "Invalid value for '--top'"),
        (["export", "s", "--what"], "Option '--what' requires an argument."),
        (["answer", "week1", "-d0042", "3"], "an id or label starting with '-' goes after '--'"),
    ],
)
def test_usage_errors_are_one_line_exit_2(tmp_path, args, message):
    line = one_line_error(run_winnow(*args, cwd=tmp_path, check=False))
    assert message in line


def test_an_id_starting_with_a_dash_names_the_way_to_pass_it(tmp_path):
    line = one_line_error(run_winnow("answer", "week1", "-d0042", "3", cwd=tmp_path, check=False))
    assert line.endswith("winnow answer [OPTIONS] -- ... -d0042 (see 'winnow answer --help')")
    # ... and that way works: the command goes on to look for the session.
    db = tmp_path / "w.db"
    run_winnow("init", "--db", db)
    line = one_line_error(run_winnow("answer", "--db", db, "--", "week1", "-d0042", "3", check=False))
    assert line == "error: no labelling session called 'week1'; known sessions: []"


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the block ends: nothing listens


@pytest.mark.parametrize(
    ("db", "message"),
    [
        ("{tmp}", "is a folder; give a SQLite file inside it"),
        ("/etc/passwd", "/etc/passwd is not a winnow store (not a SQLite database)"),
        ("{tmp}/random.bin", "random.bin is not a winnow store (not a SQLite database)"),
        ("postgresql+psycopg://winnow@127.0.0.1:{port}/winnow", "cannot be opened as a winnow store"),
        ("sqlite:////nonexistent/dir/x.db", "folder '/nonexistent/dir' does not exist"),
        ("", "path_or_url is empty"),
    ],
)
def test_unusable_databases_are_one_line_exit_2(tmp_path, db, message):
    (tmp_path / "random.bin").write_bytes(bytes(range(256)) * 64)
    before = sorted(p.name for p in tmp_path.iterdir())
    line = one_line_error(
        run_winnow("session", "list", "--db", db.format(tmp=tmp_path, port=_closed_port()), check=False)
    )
    assert message in line
    assert sorted(p.name for p in tmp_path.iterdir()) == before, "a failed open must create nothing"


def test_etc_passwd_is_left_untouched():
    before = open("/etc/passwd", "rb").read()
    one_line_error(run_winnow("session", "list", "--db", "/etc/passwd", check=False))
    assert open("/etc/passwd", "rb").read() == before


@pytest.mark.parametrize("args", [[], ["session"]])
def test_no_arguments_show_the_help(args):
    result = run_winnow(*args)
    assert "Usage" in result.stdout and result.stderr == ""


def test_the_click_of_the_installed_typer_is_found():
    """Whichever click typer parses with, its usage-error class is among those caught."""
    import typer.main

    click_module = getattr(typer.main, "click", None) or getattr(typer.main, "_click", None)
    assert click_module is not None, "typer.main imports neither click nor typer._click"
    assert click_module.exceptions.ClickException in click_exception_classes("ClickException")


def test_a_trusted_proxy_that_is_not_an_address_is_one_line_exit_2(tmp_path, monkeypatch):
    """Issue 44: ``*`` (uvicorn's "believe everyone") or a name is refused before a server starts."""
    for value in ("*", "proxy.example.org", "127.0.0.1, 10.0.0.300"):
        monkeypatch.setenv("WINNOW_TRUSTED_PROXIES", value)
        line = one_line_error(run_winnow("ui", "--db", tmp_path / "w.db", "--port", str(_closed_port()), check=False))
        assert "$WINNOW_TRUSTED_PROXIES lists" in line and "is not an IP address or network" in line
    assert not any(tmp_path.iterdir())
