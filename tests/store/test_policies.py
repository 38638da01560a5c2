"""One access policy per resource, reads included (issue 23), through the service layer on
SQLite and PostgreSQL: the permission table of ``docs/deployment.md``, checked against what
the store lets each role do; answer keys for admins only, audited; a typed sign-in name that
is no account never stored or logged."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from app.service import (
    Workbench,
    audit_table,
    check_session_action,
    create_session,
    create_user,
    creation_rights,
    events_table,
    record_answer,
    session_progress,
    session_rights,
    session_summaries,
    session_table,
    set_session_keys,
    set_session_overlap,
    team_figures,
)
from app.store import (
    PermissionDenied,
    add_user,
    assign_users,
    audit_log,
    default_hotkeys,
    set_active,
    sign_in,
    unknown_name_tag,
    write_transaction,
)
from app.store import users as store_users
from app.store.models import utcnow
from app.store.users import MAX_FAILED_SIGN_INS
from tests.store.conftest import LABELS

PASSWORD = "correct horse battery"
DEPLOYMENT = Path(__file__).resolve().parents[2] / "docs" / "deployment.md"
#: The table's columns: who asks (``None``: the command line).
ACTORS: dict[str, str | None] = {
    "annotator, assigned": "ann",
    "annotator, not assigned": "cid",
    "reviewer, not assigned": "rev",
    "admin, not assigned": "ada",
    "command line": None,
}
#: The permission table: action -> one cell per actor ("–": not asked of that actor).
EXPECTED: dict[str, tuple[str, ...]] = {
    "see the session in the list": ("yes", "no", "yes", "yes", "yes"),
    "open it (Query, Rejects)": ("yes", "no", "yes", "yes", "yes"),
    "see its progress": ("yes", "no", "yes", "yes", "yes"),
    "export its ranked list": ("yes", "no", "yes", "yes", "yes"),
    "export its labelled data": ("no", "no", "yes", "yes", "yes"),
    "export its events log": ("no", "no", "yes", "yes", "yes"),
    "get the session's audit rows in that log": ("no", "no", "no", "yes", "yes"),
    "answer or skip an item": ("yes", "no", "no", "no", "–"),
    "resolve a conflict": ("no", "no", "yes", "yes", "–"),
    "change its answer keys": ("no", "no", "no", "yes", "yes"),
    "change its settings (overlap, assignments)": ("no", "no", "no", "yes", "yes"),
    "create a session": ("no", "no", "no", "yes", "yes"),
    "upload a file": ("no", "no", "no", "yes", "yes"),
    "read the audit log": ("no", "no", "no", "yes", "yes"),
    "add, change or disable accounts": ("no", "no", "no", "yes", "yes"),
}


def run(small, work):
    return write_transaction(small.Session, work)


@pytest.fixture
def team(small):
    """admin 'ada', annotators 'ann' (assigned to session 'first') and 'cid' (not assigned),
    reviewer 'rev' (not assigned); one good and one failed sign-in are in the audit log."""

    def work(s):
        add_user(s, name="ada", role="admin", password=PASSWORD)
        for name, role in (("ann", "annotator"), ("cid", "annotator"), ("rev", "reviewer")):
            add_user(s, name=name, role=role, password=PASSWORD, actor="ada")
        assign_users(s, session_id=small.session_id, names=["ann"], actor="ada")

    run(small, work)
    run(small, lambda s: sign_in(s, name="ann", password=PASSWORD))
    run(small, lambda s: sign_in(s, name="my secret password", password=PASSWORD))
    return small


def _actions(small, bench: Workbench) -> dict[str, Callable[[str | None, int], bool | None]]:
    """Each action of the table as a call of the service layer: True when done, False when
    refused (any other error fails the test)."""
    Session, session_id = small.Session, small.session_id

    def listed(who, n):
        return "first" in [x.name for x in session_summaries(Session, actor=who)]

    def events_with_audit(who, n):
        table = events_table(Session, session_id, actor=who)
        return "audit_id" in table.columns and bool((table["kind"] == "assigned").any())

    return {
        "see the session in the list": listed,
        "open it (Query, Rejects)": lambda who, n: check_session_action(Session, session_id, "open", actor=who),
        "see its progress": lambda who, n: (session_progress(bench, actor=who), team_figures(bench, actor=who)),
        "export its ranked list": lambda who, n: session_table(bench, "ranked", actor=who),
        "export its labelled data": lambda who, n: session_table(bench, "labelled", actor=who),
        "export its events log": lambda who, n: events_table(Session, session_id, actor=who),
        "get the session's audit rows in that log": events_with_audit,
        "answer or skip an item": lambda who, n: record_answer(
            Session, "first", annotator=who, kind="skip", item="item-1"
        ),
        "resolve a conflict": lambda who, n: record_answer(
            Session, "first", annotator=who, kind="resolve", item="item-0", label="cat"
        ),
        "change its answer keys": lambda who, n: set_session_keys(bench, {"cat": "9"}, actor=who),
        "change its settings (overlap, assignments)": lambda who, n: set_session_overlap(
            Session, "first", 2, actor=who
        ),
        "create a session": lambda who, n: create_session(
            Session, dataset_id=small.dataset_id, name=f"new{n}", k=2, weighting="uniform", target_set="all", actor=who
        ),
        "upload a file": lambda who, n: "upload" in creation_rights(Session, actor=who),
        "read the audit log": lambda who, n: audit_table(Session, actor=who),
        "add, change or disable accounts": lambda who, n: create_user(
            Session, f"new{n}", role="annotator", password=PASSWORD, actor=who
        ),
    }


def _outcome(action: Callable[[str | None, int], object], who: str | None, n: int) -> str:
    try:
        result = action(who, n)
    except PermissionDenied:
        return "no"
    return "no" if result is False else "yes"


def _documented_table() -> dict[str, tuple[str, ...]]:
    lines = DEPLOYMENT.read_text(encoding="utf-8").splitlines()
    header = "| action | " + " | ".join(ACTORS) + " |"
    start = lines.index(header)
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0]] = tuple(cells[1:])
    return rows


def test_the_permission_table_is_what_the_store_enforces(team):
    bench = Workbench.open(team.Session, team.session_id)
    actions = _actions(team, bench)
    assert set(actions) == set(EXPECTED)
    found = {}
    for n, (name, action) in enumerate(actions.items()):
        found[name] = tuple(
            "–" if expected == "–" else _outcome(action, who, 10 * n + i)
            for i, (who, expected) in enumerate(zip(ACTORS.values(), EXPECTED[name], strict=True))
        )
    assert found == EXPECTED


def test_the_documented_table_is_the_tested_one():
    assert _documented_table() == EXPECTED


def test_the_pages_ask_for_the_same_rights(team):
    """:func:`app.service.session_rights` (what the pages draw) agrees with the table."""
    rights = {who: session_rights(team.Session, team.session_id, actor=who) for who in ACTORS.values()}
    assert {"open", "progress", "export_ranked", "answer"} <= rights["ann"]
    assert not {"export_labelled", "export_events", "change_keys", "resolve"} & rights["ann"]
    assert rights["cid"] == {"undo"}  # an account, but no read of a session not assigned to them
    assert "export_events" in rights["rev"] and "export_audit" not in rights["rev"]
    assert {"export_audit", "change_keys", "change_settings"} <= rights["ada"] and "answer" not in rights["ada"]
    assert rights[None] == rights["ada"] | {"answer"}
    run(team, lambda s: set_active(s, name="ann", active=False, actor="ada"))
    assert session_rights(team.Session, team.session_id, actor="ann") == frozenset()
    assert session_summaries(team.Session, actor="ann") == []
    with pytest.raises(PermissionDenied, match="'ann' is disabled"):
        events_table(team.Session, team.session_id, actor="ann")
    with pytest.raises(PermissionDenied, match="'mallory' is not a user of this store"):
        check_session_action(team.Session, team.session_id, "open", actor="mallory")


def test_a_refusal_says_who_may(team):
    with pytest.raises(
        PermissionDenied,
        match=r"open: 'cid' \(annotator\) is not assigned to session 'first'.*"
        r"winnow session assign first cid",
    ):
        check_session_action(team.Session, team.session_id, "open", actor="cid")
    with pytest.raises(
        PermissionDenied, match="export events: only a reviewer or an admin may do this, and 'ann' has role 'annotator'"
    ):
        events_table(team.Session, team.session_id, actor="ann")
    with pytest.raises(PermissionDenied, match="audit log: only an active admin may do this, and 'rev' is not one"):
        audit_table(team.Session, actor="rev")


def test_without_users_everyone_reads_everything(small):
    assert [x.name for x in session_summaries(small.Session, actor="anyone")] == ["first"]
    assert session_rights(small.Session, small.session_id, actor="anyone") == session_rights(
        small.Session, small.session_id, actor=None
    )
    assert events_table(small.Session, small.session_id, actor="anyone").empty


def test_the_events_export_holds_the_sessions_audit_rows_never_a_sign_in(team):
    bench = Workbench.open(team.Session, team.session_id)
    set_session_keys(bench, {"cat": "9"}, actor="ada")
    other = create_session(
        team.Session, dataset_id=team.dataset_id, name="other", k=2, weighting="uniform", target_set="all", actor="ada"
    )
    run(team, lambda s: assign_users(s, session_id=other, names=["cid"], actor="ada"))
    for who in ("ada", None):
        table = events_table(team.Session, team.session_id, actor=who)
        audit = table.dropna(subset=["audit_id"])
        assert sorted(audit["kind"]) == ["assigned", "hotkeys_changed"]
        assert not table["kind"].str.startswith("sign_in").any()
        assert "my secret password" not in table.to_csv()
    whole = audit_table(team.Session, actor="ada")
    assert {"sign_in", "sign_in_failed", "user_added"} <= set(whole["kind"])
    assert "my secret password" not in whole.to_csv()


def test_only_an_admin_changes_the_answer_keys_and_every_change_is_audited(team):
    bench = Workbench.open(team.Session, team.session_id)
    before = dict(bench.hotkeys)
    for who in ("ann", "cid", "rev"):
        with pytest.raises(PermissionDenied, match=f"session keys: only an active admin may do this, and '{who}'"):
            set_session_keys(bench, {"cat": "3", "dog": "8"}, actor=who)
    assert bench.hotkeys == before == Workbench.open(team.Session, team.session_id).hotkeys
    swapped = {**before, "cat": before["dog"], "dog": before["cat"]}
    assert set_session_keys(bench, swapped, actor="ada")["cat"] == before["dog"]
    assert bench.hotkeys["cat"] == before["dog"]
    set_session_keys(bench, None, actor=None)
    assert bench.hotkeys == default_hotkeys(LABELS)
    with team.Session() as s:
        rows = [r for r in audit_log(s, session_id=team.session_id) if r["kind"] == "hotkeys_changed"]
    assert [(r["actor"], r["session_id"]) for r in rows] == [("ada", team.session_id), (None, team.session_id)]
    assert rows[0]["detail"] == f"'cat' {before['cat']} -> {before['dog']}; 'dog' {before['dog']} -> {before['cat']}"
    assert rows[1]["detail"].startswith("default keys: 'cat' ")


def test_a_typed_name_that_is_no_account_is_never_stored_or_logged(team, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG)
    typed = "hunter2-typed-as-a-name"
    checked = []
    verify = store_users._verify

    def spy(hashed, password):
        checked.append(hashed)
        return verify(hashed, password)

    # The dummy hash is still verified for an unknown name: it takes as long as a wrong password.
    monkeypatch.setattr(store_users, "_verify", spy)
    now = utcnow()
    for i in range(MAX_FAILED_SIGN_INS):
        result = run(team, lambda s, i=i: sign_in(s, name=typed, password=f"guess {i}", now=now))
        assert result.user is None and result.reason == "wrong user name or password"
    assert len(checked) == MAX_FAILED_SIGN_INS
    locked = run(team, lambda s: sign_in(s, name=typed, password="guess", now=now + timedelta(seconds=1)))
    assert locked.user is None and "too many failed sign-ins" in locked.reason
    with team.Session() as s:
        tag = unknown_name_tag(s, typed)
        dump = " ".join(
            str(row)
            for table in ("audit_events", "annotators", "users")
            for row in s.execute(text(f"SELECT * FROM {table}")).all()
        )
    assert re.fullmatch(r"\(unknown name #[0-9a-f]{4}\)", tag)
    assert typed not in dump and typed not in caplog.text
    assert "my secret password" not in dump and "my secret password" not in caplog.text
    assert dump.count(tag) == MAX_FAILED_SIGN_INS + 1 and f"failed sign-in for {tag!r}" in caplog.text
    # An account's own name is still recorded as itself, and its lock is its own.
    assert (
        run(team, lambda s: sign_in(s, name="ann", password="wrong", now=now)).reason == "wrong user name or password"
    )
    assert "failed sign-in for 'ann'" in caplog.text
    assert run(team, lambda s: sign_in(s, name="ann", password=PASSWORD, now=now)).user.name == "ann"
