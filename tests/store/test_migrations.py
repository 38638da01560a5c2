"""The schema comes from Alembic only, and the migrations match the models."""

from __future__ import annotations

import os
from datetime import datetime, timezone

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.exc import DatabaseError, IntegrityError

from app.store import (
    Base,
    alembic_config,
    database_url,
    downgrade_database,
    make_engine,
    open_store,
    upgrade_database,
)

TABLES = {"datasets", "instances", "labelling_sessions", "annotators", "answer_events"}


def test_database_url(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert database_url("w.db") == f"sqlite:///{tmp_path / 'w.db'}"
    assert database_url(tmp_path / "x.db") == f"sqlite:///{tmp_path / 'x.db'}"
    assert database_url("sqlite:////abs/w.db") == "sqlite:////abs/w.db"
    assert database_url("postgresql+psycopg://u@h/db") == "postgresql+psycopg://u@h/db"
    with pytest.raises(ValueError, match="empty"):
        database_url("  ")
    with pytest.raises(TypeError):
        database_url(3)  # type: ignore[arg-type]


def test_upgrade_head_has_no_drift_and_downgrade_base_works(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # script_location must not depend on the working directory
    path = tmp_path / "m.db"
    upgrade_database(path)
    engine = make_engine(path)
    try:
        with engine.connect() as conn:
            assert TABLES <= set(inspect(conn).get_table_names())
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(context, Base.metadata) == []
            head = ScriptDirectory.from_config(alembic_config(path)).get_current_head()
            assert context.get_current_revision() == head

        upgrade_database(path)  # idempotent
        downgrade_database(path, "base")
        with engine.connect() as conn:
            assert set(inspect(conn).get_table_names()) == {"alembic_version"}
            assert MigrationContext.configure(conn).get_current_revision() is None
            triggers = conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type='trigger'")
            assert triggers.all() == []

        upgrade_database(path)  # and back up again
        with engine.connect() as conn:
            assert TABLES <= set(inspect(conn).get_table_names())
    finally:
        engine.dispose()


def test_sqlite_connections_use_wal_foreign_keys_and_busy_timeout(store):
    with store() as s:
        conn = s.connection()
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 1000


def test_open_store_caches_one_engine_per_url(db_path):
    first = open_store(db_path)
    assert open_store(str(db_path)) is first
    assert open_store(database_url(db_path)) is first


def test_check_constraints_and_foreign_keys_are_enforced(small):
    with small.Session() as s:
        conn = s.connection()
        now = datetime.now(timezone.utc).isoformat()
        with pytest.raises(IntegrityError):  # unknown kind
            with conn.begin_nested():
                conn.execute(
                    text(
                        "INSERT INTO answer_events (session_id, instance_id, annotator_id, kind,"
                        " created_at) VALUES (:s, 1, 1, 'shrug', :t)"
                    ),
                    {"s": small.session_id, "t": now},
                )
        conn.exec_driver_sql("INSERT INTO annotators (name) VALUES ('x')")
        with pytest.raises(IntegrityError):  # an answer without a label
            with conn.begin_nested():
                conn.execute(
                    text(
                        "INSERT INTO answer_events (session_id, instance_id, annotator_id, kind,"
                        " created_at) VALUES (:s, 1, 1, 'answer', :t)"
                    ),
                    {"s": small.session_id, "t": now},
                )
        with pytest.raises(IntegrityError):  # foreign key: no such instance
            with conn.begin_nested():
                conn.execute(
                    text(
                        "INSERT INTO answer_events (session_id, instance_id, annotator_id, kind,"
                        " label, created_at) VALUES (:s, 999, 1, 'answer', 0, :t)"
                    ),
                    {"s": small.session_id, "t": now},
                )


def test_answer_events_are_append_only(small):
    from app.store import record_event, write_transaction

    event = write_transaction(
        small.Session,
        lambda s: record_event(
            s, session_id=small.session_id, instance_position=0, annotator="a", kind="skip"
        ),
    )
    with small.Session() as s:
        conn = s.connection()
        with pytest.raises(DatabaseError, match="append-only"):
            conn.exec_driver_sql(f"UPDATE answer_events SET kind='answer' WHERE id={event.id}")
        with pytest.raises(DatabaseError, match="append-only"):
            conn.exec_driver_sql(f"DELETE FROM answer_events WHERE id={event.id}")


def test_migrations_ship_with_the_package():
    import migrations

    folder = os.path.dirname(migrations.__file__)
    assert os.path.exists(os.path.join(folder, "env.py"))
    assert os.path.exists(os.path.join(folder, "script.py.mako"))
    assert any(name.endswith(".py") for name in os.listdir(os.path.join(folder, "versions")))
