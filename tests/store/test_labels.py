"""A session's label settings and audit draws in the store (issue 20), on SQLite and PostgreSQL:
defaults, checks, admins only and audited; draws stored once per slot and per item."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import func, inspect, select, text
from sqlalchemy.exc import DatabaseError, IntegrityError

from app.store import (
    InvalidRecord,
    LabelSettings,
    PermissionDenied,
    add_user,
    assign_users,
    audit_draws,
    audit_log,
    downgrade_database,
    label_settings,
    make_engine,
    save_audit_draws,
    set_label_settings,
    upgrade_database,
    write_transaction,
)
from app.store.models import AuditDraw, SessionLabelSettings

PASSWORD = "correct horse battery"


def test_defaults_until_set_then_what_was_set(small):
    with small.Session() as s:
        assert label_settings(s, small.session_id) == LabelSettings(0.05, 0.90, 0.05)
    chosen = LabelSettings(max_error=0.02, confidence=0.95, audit_share=0.1)
    assert (
        write_transaction(small.Session, lambda s: set_label_settings(s, session_id=small.session_id, settings=chosen))
        == chosen
    )
    with small.Session() as s:
        assert label_settings(s, small.session_id) == chosen
        assert s.scalar(select(func.count()).select_from(SessionLabelSettings)) == 1
    # A second change updates the one row.
    write_transaction(
        small.Session,
        lambda s: set_label_settings(s, session_id=small.session_id, settings=LabelSettings(audit_share=0.0)),
    )
    with small.Session() as s:
        assert label_settings(s, small.session_id) == LabelSettings(0.05, 0.90, 0.0)
        assert s.scalar(select(func.count()).select_from(SessionLabelSettings)) == 1
        rows = [r for r in audit_log(s, session_id=small.session_id) if r["kind"] == "label_settings_changed"]
    assert [r["detail"] for r in rows] == [
        "max_error 0.05 -> 0.02; confidence 0.9 -> 0.95; audit_share 0.05 -> 0.1",
        "max_error 0.02 -> 0.05; confidence 0.95 -> 0.9; audit_share 0.1 -> 0",
    ]
    assert [r["actor"] for r in rows] == [None, None]


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"max_error": 0.0}, InvalidRecord, r"max_error must be > 0 and < 0.5"),
        ({"max_error": 0.5}, InvalidRecord, r"max_error must be > 0 and < 0.5"),
        ({"max_error": float("nan")}, InvalidRecord, r"max_error must be a finite number"),
        ({"confidence": 0.4}, InvalidRecord, r"confidence must be >= 0.5 and < 1"),
        ({"confidence": 1.0}, InvalidRecord, r"confidence must be >= 0.5 and < 1"),
        ({"audit_share": -0.01}, InvalidRecord, r"audit_share must be >= 0 and <= 0.5"),
        ({"audit_share": 0.6}, InvalidRecord, r"audit_share must be >= 0 and <= 0.5"),
        ({"max_error": "0.05"}, TypeError, r"max_error must be a number, got str"),
        ({"audit_share": True}, TypeError, r"audit_share must be a number, got bool"),
    ],
)
def test_settings_out_of_range_are_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        LabelSettings(**kwargs)


def test_the_bounds_are_inclusive_where_documented():
    assert LabelSettings(confidence=0.5, audit_share=0.5).audit_share == 0.5
    assert LabelSettings(audit_share=0).audit_share == 0.0


def test_only_an_admin_changes_label_settings_and_the_change_is_audited(small):
    def team(s):
        add_user(s, name="ada", role="admin", password=PASSWORD)
        add_user(s, name="ann", role="annotator", password=PASSWORD, actor="ada")
        add_user(s, name="rev", role="reviewer", password=PASSWORD, actor="ada")
        assign_users(s, session_id=small.session_id, names=["ann"], actor="ada")

    write_transaction(small.Session, team)
    tight = LabelSettings(max_error=0.01)
    for who in ("ann", "rev", "nobody"):
        with pytest.raises(PermissionDenied, match="session label settings"):
            write_transaction(
                small.Session,
                lambda s, who=who: set_label_settings(s, session_id=small.session_id, settings=tight, actor=who),
            )
    with small.Session() as s:
        assert label_settings(s, small.session_id) == LabelSettings()
    write_transaction(
        small.Session, lambda s: set_label_settings(s, session_id=small.session_id, settings=tight, actor="ada")
    )
    with small.Session() as s:
        assert label_settings(s, small.session_id) == tight
        rows = [r for r in audit_log(s, session_id=small.session_id) if r["kind"] == "label_settings_changed"]
    assert [(r["actor"], r["detail"]) for r in rows] == [("ada", "max_error 0.05 -> 0.01")]


def test_draws_are_stored_once_per_slot_and_per_item(small):
    def save(draws):
        return write_transaction(small.Session, lambda s: save_audit_draws(s, small.session_id, draws))

    assert save({3: 1, 7: 4}) == {3: 1, 7: 4}
    # Slot 3 is taken (its item stays), item 4 is drawn already (its slot stays); slot 9 is new.
    assert save({3: 0, 8: 4, 9: 3}) == {3: 1, 7: 4, 9: 3}
    # Two new slots for one item: the first keeps it.
    assert save({10: 0, 11: 0}) == {3: 1, 7: 4, 9: 3, 10: 0}
    with small.Session() as s:
        assert audit_draws(s, small.session_id) == {3: 1, 7: 4, 9: 3, 10: 0}
        assert s.scalar(select(func.count()).select_from(AuditDraw)) == 4


@pytest.mark.parametrize("draws, match", [({-1: 0}, "slot must be >= 0"), ({0: 99}, "position 99 is not an item")])
def test_bad_draws_are_refused_and_nothing_is_stored(small, draws, match):
    with pytest.raises(InvalidRecord, match=match):
        write_transaction(small.Session, lambda s: save_audit_draws(s, small.session_id, draws))
    with small.Session() as s:
        assert audit_draws(s, small.session_id) == {}


def test_0014_takes_label_settings_changes_and_keeps_the_audit_log_append_only(store_url):
    """Up to 0014 with audit rows written: they are kept, the kind CHECK takes
    'label_settings_changed' (and still refuses unknown kinds), the append-only triggers are
    back, and downgrading refuses while such a change is in the log."""
    upgrade_database(store_url, "0013")
    engine = make_engine(store_url)
    insert = text("INSERT INTO audit_events (kind, user_name, created_at) VALUES (:kind, 'ada', :now)")
    now = datetime(2026, 11, 25, tzinfo=UTC)
    try:
        with engine.begin() as conn:
            for kind in ("user_added", "hotkeys_changed"):
                conn.execute(insert, {"kind": kind, "now": now})
        upgrade_database(store_url, "0014")
        with engine.connect() as conn:
            assert conn.execute(text("SELECT id, kind FROM audit_events ORDER BY id")).all() == [
                (1, "user_added"),
                (2, "hotkeys_changed"),
            ]
            assert {"session_label_settings", "audit_draws"} <= set(inspect(conn).get_table_names())
        with engine.begin() as conn:
            conn.execute(insert, {"kind": "label_settings_changed", "now": now})
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.execute(insert, {"kind": "bogus", "now": now})
        with pytest.raises(DatabaseError, match="append-only"), engine.begin() as conn:
            conn.execute(text("DELETE FROM audit_events"))
        with pytest.raises(RuntimeError, match="1 change\\(s\\) of label settings"):
            downgrade_database(store_url, "0013")
    finally:
        engine.dispose()
