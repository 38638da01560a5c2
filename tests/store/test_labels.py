"""A session's label settings and label lots in the store (issues 20 and 28), on SQLite and
PostgreSQL: defaults, checks, admins only and audited; lots stored once per number and never
changed; the store's audit key made once; 0017 replaces audit_draws with label_lots."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from sqlalchemy import func, inspect, select, text
from sqlalchemy.exc import DatabaseError, IntegrityError

from app.store import (
    InvalidRecord,
    LabelLotRecord,
    LabelSettings,
    PermissionDenied,
    add_user,
    assign_users,
    audit_log,
    audit_secret,
    downgrade_database,
    label_lots,
    label_settings,
    make_engine,
    save_label_lot,
    set_label_settings,
    stored_audit_secret,
    upgrade_database,
    write_transaction,
)
from app.store.models import LabelLot, SessionLabelSettings

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


def lot(number: int, positions, *, labels=None, margins=None, alpha: float = 0.075) -> LabelLotRecord:
    positions = np.asarray(positions, dtype=np.int64)
    return LabelLotRecord(
        number=number,
        positions=positions,
        labels=np.zeros(positions.size, dtype=np.int64) if labels is None else np.asarray(labels),
        margins=np.linspace(1.0, 0.5, positions.size) if margins is None else np.asarray(margins),
        alpha=alpha,
        target=0.05,
        threshold=0.25,
        after_event_id=7,
    )


def same_lot(a: LabelLotRecord, b: LabelLotRecord) -> bool:
    return (
        (a.number, a.alpha, a.target, a.threshold, a.after_event_id)
        == (b.number, b.alpha, b.target, b.threshold, b.after_event_id)
        and a.positions.tolist() == b.positions.tolist()
        and a.labels.tolist() == b.labels.tolist()
        and a.margins.tolist() == b.margins.tolist()
    )


def test_lots_are_stored_once_per_number_and_read_back_in_audit_order(small):
    def save(record):
        return write_transaction(small.Session, lambda s: save_label_lot(s, small.session_id, record))

    first = lot(1, [4, 0, 3], labels=[3, 1, 2], margins=[0.9, 0.5, 0.25])
    stored = save(first)
    assert len(stored) == 1 and same_lot(stored[0], first)
    assert stored[0].positions.dtype == np.int64 and stored[0].labels.dtype == np.int64
    # Another process froze lot 1 first: its lot stands, the new one is not stored.
    again = save(lot(1, [1, 2], labels=[0, 0]))
    assert len(again) == 1 and same_lot(again[0], first)
    # A number that skips one is not stored either.
    assert [r.number for r in save(lot(3, [1]))] == [1]
    second = lot(2, [2, 1], labels=[0, 1])
    both = save(second)
    assert [r.number for r in both] == [1, 2] and same_lot(both[1], second)
    with small.Session() as s:
        read = label_lots(s, small.session_id)
        assert len(read) == 2 and same_lot(read[0], first) and same_lot(read[1], second)
        assert s.scalar(select(func.count()).select_from(LabelLot)) == 2


def test_a_lot_frozen_by_another_process_in_between_stands_and_other_faults_are_raised(small, monkeypatch):
    from app.store import labels as store_labels

    first = lot(1, [4, 0, 3])
    write_transaction(small.Session, lambda s: save_label_lot(s, small.session_id, first))
    # This process read "no lot yet" just before the other one stored lot 1: the insert clashes
    # on (session, number), and the lot already stored is the one that stands.
    real = store_labels.label_lots
    stale: list[list] = [[]]

    def label_lots_once_stale(s, session_id):
        return stale.pop() if stale else real(s, session_id)

    monkeypatch.setattr(store_labels, "label_lots", label_lots_once_stale)
    stored = write_transaction(small.Session, lambda s: save_label_lot(s, small.session_id, lot(1, [1, 2])))
    assert len(stored) == 1 and same_lot(stored[0], first)
    # A violation that is not that clash (here an alpha the table refuses) is this write's fault.
    with pytest.raises(IntegrityError):
        write_transaction(small.Session, lambda s: save_label_lot(s, small.session_id, lot(2, [1, 2], alpha=1.5)))
    with small.Session() as s:
        assert [r.number for r in label_lots(s, small.session_id)] == [1]


@pytest.mark.parametrize(
    "record, match",
    [
        (lot(1, [0, 1], labels=[0]), "one value per item"),
        (lot(1, [0, 1], margins=[0.5]), "one value per item"),
        (lot(1, [0, 99]), "distinct items of session 'first'"),
        (lot(1, [-1, 0]), "distinct items of session 'first'"),
        (lot(1, [2, 2]), "distinct items of session 'first'"),
    ],
)
def test_bad_lots_are_refused_and_nothing_is_stored(small, record, match):
    with pytest.raises(InvalidRecord, match=match):
        write_transaction(small.Session, lambda s: save_label_lot(s, small.session_id, record))
    with small.Session() as s:
        assert label_lots(s, small.session_id) == []


def test_the_audit_key_is_made_once_per_store_and_kept(small, store_url, random_audit_key):
    with small.Session() as s:
        assert stored_audit_secret(s) is None  # a read makes nothing
    key = write_transaction(small.Session, audit_secret)
    assert isinstance(key, bytes) and len(key) == 32
    assert write_transaction(small.Session, audit_secret) == key
    with small.Session() as s:
        assert stored_audit_secret(s) == key


def test_0017_replaces_audit_draws_with_label_lots_and_downgrades_back(store_url):
    upgrade_database(store_url, "0016")
    engine = make_engine(store_url)
    try:
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
        assert "audit_draws" in tables and "label_lots" not in tables
        upgrade_database(store_url, "0017")
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
            columns = {c["name"] for c in inspect(conn).get_columns("label_lots")}
        assert "label_lots" in tables and "audit_draws" not in tables
        assert {"session_id", "number", "positions", "labels", "margins", "alpha", "target", "threshold"} <= columns
        downgrade_database(store_url, "0016")
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
        assert "audit_draws" in tables and "label_lots" not in tables
    finally:
        engine.dispose()


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
