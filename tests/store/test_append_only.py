"""The event log cannot be rewritten by SQL that goes around the append-only triggers of 0001:
REPLACE on SQLite, renaming or replacing an annotator on both backends (migration 0003)."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import DatabaseError

from app.store import event_log, record_event, write_transaction


def _record(small, annotator: str, kind: str = "skip", position: int = 0):
    return write_transaction(
        small.Session,
        lambda s: record_event(
            s, session_id=small.session_id, instance_position=position, annotator=annotator, kind=kind
        ),
    )


def _refused(small, statements: list[str], match: str) -> None:
    with small.Session() as s:
        conn = s.connection()
        for statement in statements:
            # A SAVEPOINT each: on PostgreSQL a failed statement aborts the whole transaction.
            with pytest.raises(DatabaseError, match=match):
                with conn.begin_nested():
                    conn.exec_driver_sql(statement)
        s.commit()


def test_replace_cannot_overwrite_an_event(small):
    first = _record(small, "alice")
    undone = _record(small, "alice", "skip", position=1)
    with small.Session() as s:
        conn = s.connection()
        undo_id = conn.exec_driver_sql("SELECT max(id) FROM answer_events").scalar_one() + 1
        instance_id, annotator_id = conn.exec_driver_sql(
            f"SELECT instance_id, annotator_id FROM answer_events WHERE id = {undone.id}"
        ).one()
        conn.exec_driver_sql(
            "INSERT INTO answer_events (id, session_id, instance_id, annotator_id, kind, undoes_event_id,"
            f" created_at) VALUES ({undo_id}, {small.session_id}, {instance_id}, {annotator_id}, 'undo',"
            f" {undone.id}, CURRENT_TIMESTAMP)"
        )
        s.commit()
    with small.Session() as s:
        before = event_log(s, small.session_id)
    columns = "(id, session_id, instance_id, annotator_id, kind, label, undoes_event_id, created_at)"
    if small.url.startswith("sqlite"):
        statements = [
            # Same id: REPLACE would delete event 1 without firing the DELETE trigger.
            f"INSERT OR REPLACE INTO answer_events {columns} VALUES ({first.id}, {small.session_id},"
            f" {instance_id}, {annotator_id}, 'answer', 0, NULL, CURRENT_TIMESTAMP)",
            f"REPLACE INTO answer_events {columns} VALUES ({first.id}, {small.session_id},"
            f" {instance_id}, {annotator_id}, 'answer', 0, NULL, CURRENT_TIMESTAMP)",
            # Same undone event (a unique column): REPLACE would delete the existing undo.
            f"INSERT OR REPLACE INTO answer_events {columns} VALUES (NULL, {small.session_id},"
            f" {instance_id}, {annotator_id}, 'undo', NULL, {undone.id}, CURRENT_TIMESTAMP)",
        ]
    else:
        statements = [
            f"INSERT INTO answer_events {columns} VALUES ({first.id}, {small.session_id},"
            f" {instance_id}, {annotator_id}, 'answer', 0, NULL, CURRENT_TIMESTAMP)"
            " ON CONFLICT (id) DO UPDATE SET kind = 'answer', label = 0",
        ]
    _refused(small, statements, "append-only")
    with small.Session() as s:
        assert event_log(s, small.session_id) == before


def test_an_event_under_an_idempotency_key_cannot_be_replaced(small):
    event = _record(small, "alice")
    with small.Session() as s:
        conn = s.connection()
        conn.exec_driver_sql(
            "INSERT INTO answer_events (session_id, instance_id, annotator_id, kind, created_at,"
            " idempotency_key) SELECT session_id, instance_id, annotator_id, 'skip', created_at, 'k1'"
            f" FROM answer_events WHERE id = {event.id}"
        )
        s.commit()
    with small.Session() as s:
        before = event_log(s, small.session_id)
    insert = (
        "INSERT {verb} answer_events (session_id, instance_id, annotator_id, kind, label, created_at,"
        " idempotency_key) SELECT session_id, instance_id, annotator_id, 'answer', 1, created_at, 'k1'"
        f" FROM answer_events WHERE id = {event.id}"
    )
    if small.url.startswith("sqlite"):
        statements = [insert.format(verb="OR REPLACE INTO")]
    else:
        statements = [
            insert.format(verb="INTO")
            + " ON CONFLICT (session_id, idempotency_key) DO UPDATE SET kind = 'answer', label = 1"
        ]
    _refused(small, statements, "append-only")
    with small.Session() as s:
        assert event_log(s, small.session_id) == before


def test_annotator_names_are_immutable(small):
    _record(small, "alice")
    _record(small, "bob", position=1)
    with small.Session() as s:
        before = event_log(s, small.session_id)
        alice = s.connection().exec_driver_sql("SELECT id FROM annotators WHERE name = 'alice'").scalar_one()
    statements = [
        "UPDATE annotators SET name = 'mallory' WHERE name = 'alice'",
        "UPDATE annotators SET name = name || '!'",
    ]
    if small.url.startswith("sqlite"):
        statements += [
            f"INSERT OR REPLACE INTO annotators (id, name) VALUES ({alice}, 'mallory')",
            "REPLACE INTO annotators (id, name) VALUES (999, 'alice')",
        ]
    else:
        statements += [
            f"INSERT INTO annotators (id, name) VALUES ({alice}, 'mallory')"
            " ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name",
        ]
    _refused(small, statements, "immutable")
    with small.Session() as s:
        assert event_log(s, small.session_id) == before


def _audit_rows(small) -> list[tuple]:
    with small.Session() as s:
        return [
            tuple(row)
            for row in s.connection().exec_driver_sql(
                "SELECT id, kind, user_name, actor, detail FROM audit_events ORDER BY id"
            )
        ]


def test_audit_events_cannot_be_replaced_updated_or_deleted(small):
    """The audit log is as append-only as answer_events (issue 23, item 7): on SQLite a REPLACE
    deleted the old row without firing the DELETE trigger and rewrote a sign-in record."""
    with small.Session() as s:
        for kind, user in (("sign_in", "ann"), ("sign_in_failed", "bob")):
            s.connection().exec_driver_sql(
                f"INSERT INTO audit_events (kind, user_name, created_at) VALUES ('{kind}', '{user}', CURRENT_TIMESTAMP)"
            )
        s.commit()
    before = _audit_rows(small)
    first = before[0][0]
    columns = "(id, kind, user_name, actor, created_at)"
    statements = [
        "UPDATE audit_events SET user_name = 'mallory'",
        f"UPDATE audit_events SET detail = 'rewritten' WHERE id = {first}",
        f"DELETE FROM audit_events WHERE id = {first}",
        "DELETE FROM audit_events",
    ]
    if small.url.startswith("sqlite"):
        statements += [
            f"REPLACE INTO audit_events {columns} VALUES ({first}, 'sign_in', 'mallory', NULL, CURRENT_TIMESTAMP)",
            f"INSERT OR REPLACE INTO audit_events {columns} VALUES ({first}, 'sign_in', 'mallory', NULL,"
            " CURRENT_TIMESTAMP)",
        ]
    else:
        statements += [
            f"INSERT INTO audit_events {columns} VALUES ({first}, 'sign_in', 'mallory', NULL, CURRENT_TIMESTAMP)"
            " ON CONFLICT (id) DO UPDATE SET user_name = EXCLUDED.user_name",
            "TRUNCATE audit_events",
        ]
    _refused(small, statements, "append-only")
    assert _audit_rows(small) == before
    # Appending still works.
    with small.Session() as s:
        s.connection().exec_driver_sql(
            "INSERT INTO audit_events (kind, user_name, created_at) VALUES ('sign_in', 'cid', CURRENT_TIMESTAMP)"
        )
        s.commit()
    assert _audit_rows(small)[:-1] == before and _audit_rows(small)[-1][1:3] == ("sign_in", "cid")
