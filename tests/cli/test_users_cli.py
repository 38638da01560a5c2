"""`winnow user …`, `winnow session assign|overlap` and `winnow answer` in team mode, through the
installed entry point."""

from __future__ import annotations

import json
import sqlite3
import subprocess

from tests.cli.conftest import WINNOW

SECRET = "s3cret-pass-word"


def add_user(db, name, role, password=SECRET):
    return subprocess.run(
        [str(WINNOW), "user", "add", name, "--role", role, "--password-stdin", "--db", str(db)],
        input=password + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_user_commands_and_answers_in_team_mode(winnow, small_csv, tmp_path):
    db = tmp_path / "team.db"
    winnow("import", small_csv, "--db", db, "--session", "s1")
    # Before any user exists, any name may answer (single-user mode).
    winnow("answer", "s1", "d0000", "--kind", "skip", "--annotator", "whoever", "--db", db)

    assert add_user(db, "ada", "admin").returncode == 0
    for name in ("ann", "bob"):
        assert add_user(db, name, "annotator").returncode == 0
    assert add_user(db, "rev", "reviewer").returncode == 0
    bad = add_user(db, "eve", "boss")
    assert (
        bad.returncode == 2
        and bad.stderr.strip() == "error: --role must be one of admin, annotator, reviewer; got 'boss'"
    )
    short = add_user(db, "eve", "annotator", password="short")
    assert short.returncode == 2 and "password must be 8 to 1024 characters long, got 5" in short.stderr
    assert "short" not in short.stderr.replace("password must", "")

    # Once users exist, an answer needs an active user assigned to the session.
    refused = winnow("answer", "s1", "d0001", "--kind", "skip", "--annotator", "ann", "--db", db, check=False)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "error: annotator 'ann' is not assigned to session 's1' (winnow session assign s1 ann)"
    ]
    unknown = winnow("answer", "s1", "d0001", "--kind", "skip", "--annotator", "whoever", "--db", db, check=False)
    assert unknown.returncode == 2 and "'whoever' is not a user of this store" in unknown.stderr
    assert "Assigned ann, bob" in winnow("session", "assign", "s1", "ann", "bob", "--db", db).stdout
    winnow("answer", "s1", "d0001", "--kind", "skip", "--annotator", "ann", "--db", db)
    winnow("session", "overlap", "s1", "2", "--db", db)

    winnow("user", "disable", "bob", "--db", db)
    gone = winnow("answer", "s1", "d0001", "--kind", "skip", "--annotator", "bob", "--db", db, check=False)
    assert gone.returncode == 2 and gone.stderr.strip() == "error: annotator 'bob' is disabled"

    listing = winnow("user", "list", "--db", db).stdout
    assert "ada" in listing and "reviewer" in listing and SECRET not in listing
    changed = subprocess.run(
        [str(WINNOW), "user", "passwd", "ann", "--password-stdin", "--db", str(db)],
        input="another-long-secret\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert changed.returncode == 0, changed.stderr
    no_tty = subprocess.run(
        [str(WINNOW), "user", "passwd", "ann", "--db", str(db)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert no_tty.returncode == 2 and "--password-stdin" in no_tty.stderr

    with sqlite3.connect(db) as conn:
        stored = " ".join(map(str, conn.execute("SELECT * FROM users").fetchall()))
        audit = conn.execute("SELECT kind, user_name FROM audit_events ORDER BY id").fetchall()
    assert SECRET not in stored and "another-long-secret" not in stored and "$argon2id$" in stored
    assert ("user_disabled", "bob") in audit and ("password_changed", "ann") in audit

    status = json.loads(winnow("session", "status", "s1", "--json", "--db", db).stdout)
    assert status["overlap"] == 2
    assert {row["annotator"]: row["skipped"] for row in status["annotators"]} == {"whoever": 1, "ann": 1}
    events = tmp_path / "events.json"
    winnow("export", "s1", "--what", "events", "-o", events, "--db", db)
    kinds = [row["kind"] for row in json.loads(events.read_text())]
    # The session's own audit rows (assignments, overlap) only: never the account changes or
    # sign-ins of the global audit log (issue 23).
    assert kinds.count("skip") == 2 and "assigned" in kinds and "overlap_changed" in kinds
    assert "user_added" not in kinds and "user_disabled" not in kinds


def test_status_shows_per_annotator_progress_and_agreement(winnow, small_csv, tmp_path):
    db = tmp_path / "agree.db"
    winnow("import", small_csv, "--db", db, "--session", "s1")
    # d0000: both say "none of these"; d0001 (candidates {2}): ann "none of these", bob 2.
    for who, item, kind, label in (
        ("ann", "d0000", "none_of_these", None),
        ("bob", "d0000", "none_of_these", None),
        ("ann", "d0001", "none_of_these", None),
        ("bob", "d0001", "answer", "2"),
    ):
        winnow("answer", "s1", item, *([label] if label else []), "--kind", kind, "--annotator", who, "--db", db)
    status = json.loads(winnow("session", "status", "s1", "--json", "--db", db).stdout)
    assert status["items_shared"] == 2 and status["raw_agreement"] == 0.5 and status["conflicts"] == 1
    assert status["pairs"] == [
        {"annotator_a": "ann", "annotator_b": "bob", "items": 2, "raw_agreement": 0.5, "cohen_kappa": 0.0}
    ]
    assert {row["annotator"]: row["answered"] for row in status["annotators"]} == {"ann": 2, "bob": 2}
    text = winnow("session", "status", "s1", "--db", db).stdout
    assert "raw agreement: 0.500 over 2 shared items" in text and "ann / bob" in text
