"""The session policy at the command line (issue 23), through the installed entry point: the
events export of a session holds no sign-in and no other session's audit rows, and the whole
audit log is ``winnow user audit``, where a typed name that is no account never appears."""

from __future__ import annotations

import json

from app.service import SignInRefused
from app.service.auth import open_sign_in
from app.store import close_stores, open_store
from tests.cli.test_users_cli import SECRET, add_user

TYPED = "pa55word-typed-as-a-name"


def test_the_events_export_holds_no_sign_in_rows(winnow, small_csv, tmp_path):
    db = tmp_path / "team.db"
    winnow("import", small_csv, "--db", db, "--session", "s1")
    winnow("session", "new", "s2", "--dataset", "small", "--db", db)
    assert add_user(db, "ada", "admin").returncode == 0
    assert add_user(db, "ann", "annotator").returncode == 0
    winnow("session", "assign", "s1", "ann", "--db", db)
    winnow("session", "assign", "s2", "ada", "--db", db)
    winnow("answer", "s1", "d0000", "--kind", "skip", "--annotator", "ann", "--db", db)
    Session = open_store(str(db))
    try:
        assert open_sign_in(Session, "ann", SECRET)[0].name == "ann"
        for name in ("ann", TYPED):
            try:
                open_sign_in(Session, name, "not the password")
            except SignInRefused as exc:
                assert str(exc) == "wrong user name or password"
            else:
                raise AssertionError(f"{name!r} signed in with a wrong password")
    finally:
        close_stores()

    events = tmp_path / "events.json"
    winnow("export", "s1", "--what", "events", "-o", events, "--db", db)
    rows = json.loads(events.read_text())
    assert [(r["kind"], r["annotator"]) for r in rows] == [("assigned", "ann"), ("skip", "ann")]
    assert TYPED not in events.read_text()

    audit = winnow("user", "audit", "--db", db).stdout
    assert "sign_in_failed" in audit and "(unknown name #" in audit and TYPED not in audit
    saved = tmp_path / "audit.json"
    winnow("user", "audit", "-o", saved, "--db", db)
    kinds = [(r["kind"], r["user"]) for r in json.loads(saved.read_text())]
    assert ("sign_in", "ann") in kinds and ("sign_in_failed", "ann") in kinds and ("assigned", "ada") in kinds
    assert TYPED not in saved.read_text()


def test_user_audit_usage_error_is_one_line(winnow, tmp_path):
    result = winnow("user", "audit", "--db", tmp_path / "missing" / "x.db", "--bogus", check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
