"""A session's label settings in the store (issues 20, 28 and 42), on SQLite and PostgreSQL:
defaults, checks, admins only and audited; every change a row never rewritten; the store's audit
key made once, with the store; 0021 keeps the settings as changes and drops the stored lots."""

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
    audit_log,
    audit_secret,
    close_stores,
    downgrade_database,
    label_settings,
    label_settings_history,
    make_engine,
    open_store,
    record_event,
    set_label_settings,
    stored_audit_secret,
    upgrade_database,
    write_transaction,
)
from app.store.labels import AUDIT_ORDER_KEY
from app.store.models import LabelSettingsChange

PASSWORD = "correct horse battery"


def test_defaults_until_set_then_what_was_set(small):
    with small.Session() as s:
        assert label_settings(s, small.session_id) == LabelSettings(0.05, 0.90, 0.5)
    chosen = LabelSettings(max_error=0.02, confidence=0.95, audit_share=0.1)
    assert (
        write_transaction(small.Session, lambda s: set_label_settings(s, session_id=small.session_id, settings=chosen))
        == chosen
    )
    with small.Session() as s:
        assert label_settings(s, small.session_id) == chosen
        assert s.scalar(select(func.count()).select_from(LabelSettingsChange)) == 1
    # A second change is a second row.
    write_transaction(
        small.Session,
        lambda s: set_label_settings(s, session_id=small.session_id, settings=LabelSettings(audit_share=0.0)),
    )
    with small.Session() as s:
        assert label_settings(s, small.session_id) == LabelSettings(0.05, 0.90, 0.0)
        assert s.scalar(select(func.count()).select_from(LabelSettingsChange)) == 2
        rows = [r for r in audit_log(s, session_id=small.session_id) if r["kind"] == "label_settings_changed"]
    assert [r["detail"] for r in rows] == [
        "max_error 0.05 -> 0.02; confidence 0.9 -> 0.95; audit_share 0.5 -> 0.1",
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


def test_the_audit_key_is_made_once_per_store_and_kept(small, store_url, random_audit_key):
    with small.Session() as s:
        key = stored_audit_secret(s)  # made with the store
    assert isinstance(key, bytes) and len(key) == 32
    assert write_transaction(small.Session, audit_secret) == key
    with small.Session() as s:
        assert stored_audit_secret(s) == key


def test_the_audit_key_is_never_deleted_and_fixed_once_an_answer_exists(small):
    """A new key would re-draw audits already seen (issue 44, item 5): SQL that goes around winnow
    may set it before the first answer (tests choose their keys so), never after, and never delete it."""
    change = text("UPDATE store_secrets SET value = :v WHERE name = :n")
    with small.Session() as s, s.begin():
        s.execute(change, {"v": bytes(32), "n": AUDIT_ORDER_KEY})
    with pytest.raises(DatabaseError, match="never deleted"), small.Session() as s, s.begin():
        s.execute(text("DELETE FROM store_secrets"))
    write_transaction(
        small.Session,
        lambda s: record_event(s, session_id=small.session_id, annotator="ada", kind="skip", instance_position=0),
    )
    with pytest.raises(DatabaseError, match="fixed once the store holds an answer"), small.Session() as s, s.begin():
        s.execute(change, {"v": bytes(range(32)), "n": AUDIT_ORDER_KEY})
    with small.Session() as s:
        assert stored_audit_secret(s) == bytes(32)


def test_each_change_is_a_row_never_rewritten_with_the_event_it_follows(small):
    first, second = LabelSettings(max_error=0.02), LabelSettings(max_error=0.03, promise="average")
    for chosen in (first, second):
        write_transaction(
            small.Session, lambda s, c=chosen: set_label_settings(s, session_id=small.session_id, settings=c)
        )
    with small.Session() as s:
        assert label_settings_history(s, small.session_id) == [(0, first), (0, second)]
        assert label_settings(s, small.session_id) == second
    for statement in ("UPDATE label_settings_changes SET max_error = 0.3", "DELETE FROM label_settings_changes"):
        with pytest.raises(DatabaseError, match="append-only"), small.Session() as s, s.begin():
            s.execute(text(statement))


def test_0021_keeps_the_settings_as_changes_drops_the_lots_and_downgrades_back(small, store_url):
    for chosen in (LabelSettings(max_error=0.02), LabelSettings(max_error=0.03, promise="average")):
        write_transaction(
            small.Session, lambda s, c=chosen: set_label_settings(s, session_id=small.session_id, settings=c)
        )
    close_stores()
    downgrade_database(store_url, "0020")
    engine = make_engine(store_url)
    try:
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
            kept = conn.execute(text("SELECT max_error, promise FROM session_label_settings")).all()
        assert {"label_lots", "session_label_settings"} <= tables and "label_settings_changes" not in tables
        assert kept == [(0.03, "average")]
        upgrade_database(store_url, "0021")
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
            rows = conn.execute(text("SELECT after_event_id, max_error, promise FROM label_settings_changes")).all()
        assert not {"label_lots", "session_label_settings"} & tables
        assert rows == [(0, 0.03, "average")]
    finally:
        engine.dispose()


def test_a_new_store_has_its_audit_key_before_anything_reads_it(tmp_path):
    Session = open_store(tmp_path / "new.db")
    with Session() as s:
        key = stored_audit_secret(s)
    assert isinstance(key, bytes) and len(key) == 32


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
