"""The schema comes from Alembic only, and the migrations match the models."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime

import numpy as np
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.exc import DatabaseError, IntegrityError

from app.store import (
    Base,
    InvalidRecord,
    StoreUnavailable,
    alembic_config,
    database_url,
    downgrade_database,
    make_engine,
    open_store,
    upgrade_database,
)
from engine.exceptions import InvalidInput

TABLES = {"datasets", "instances", "labelling_sessions", "annotators", "answer_events"}


def test_database_url(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert database_url("w.db") == f"sqlite:///{tmp_path / 'w.db'}"
    assert database_url(tmp_path / "x.db") == f"sqlite:///{tmp_path / 'x.db'}"
    assert database_url("sqlite:////abs/w.db") == "sqlite:////abs/w.db"
    assert database_url("postgresql+psycopg://u@h/db") == "postgresql+psycopg://u@h/db"
    with pytest.raises(StoreUnavailable, match="empty"):
        database_url("  ")
    with pytest.raises(StoreUnavailable, match="not a valid SQLAlchemy URL"):
        database_url("postgresql://u@h:notaport/db")
    with pytest.raises(TypeError):
        database_url(3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("store", "match"),
    [
        ("{tmp}/missing/w.db", "folder .* does not exist"),
        ("{tmp}/text.db", r"text.db is not a winnow store \(not a SQLite database\)"),
        ("nosuchdialect://x", "no SQLAlchemy dialect"),
    ],
)
def test_unusable_stores_raise_the_store_error(tmp_path, store, match):
    (tmp_path / "text.db").write_text("not a database\n" * 200)
    with pytest.raises(StoreUnavailable, match=match) as info:
        open_store(store.format(tmp=tmp_path))
    assert isinstance(info.value, InvalidRecord) and isinstance(info.value, InvalidInput)


def _triggers(conn) -> set[str]:
    """Names of the triggers in the database (user triggers only on PostgreSQL)."""
    if conn.dialect.name == "sqlite":
        rows = conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'trigger'")
    else:
        rows = conn.exec_driver_sql("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")
    return {name for (name,) in rows}


def _functions(conn) -> set[str]:
    """Names of the user-defined functions (PostgreSQL; SQLite has none)."""
    if conn.dialect.name == "sqlite":
        return set()
    rows = conn.exec_driver_sql(
        "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'"
    )
    return {name for (name,) in rows}


def test_upgrade_head_has_no_drift_and_downgrade_base_works(store_url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # script_location must not depend on the working directory
    upgrade_database(store_url)
    engine = make_engine(store_url)
    try:
        with engine.connect() as conn:
            assert TABLES <= set(inspect(conn).get_table_names())
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(context, Base.metadata) == []
            head = ScriptDirectory.from_config(alembic_config(store_url)).get_current_head()
            assert context.get_current_revision() == head
            assert _triggers(conn), "the append-only triggers are missing"

        upgrade_database(store_url)  # idempotent
        downgrade_database(store_url, "base")
        with engine.connect() as conn:
            assert set(inspect(conn).get_table_names()) == {"alembic_version"}
            assert MigrationContext.configure(conn).get_current_revision() is None
            assert _triggers(conn) == set()
            assert _functions(conn) == set()

        upgrade_database(store_url)  # and back up again
        with engine.connect() as conn:
            assert TABLES <= set(inspect(conn).get_table_names())
            assert compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata) == []
    finally:
        engine.dispose()


def test_a_failed_upgrade_leaves_the_database_as_it_was(store_url, monkeypatch):
    """DDL is transactional on both backends: a crash in a migration creates nothing."""
    from alembic import op

    real_create_index = op.create_index
    calls = []

    def crash_on_third_index(*args, **kwargs):
        calls.append(args)
        if len(calls) == 3:
            raise RuntimeError("disk on fire")
        return real_create_index(*args, **kwargs)

    monkeypatch.setattr(op, "create_index", crash_on_third_index)
    with pytest.raises(RuntimeError, match="disk on fire"):
        upgrade_database(store_url)
    assert len(calls) == 3
    engine = make_engine(store_url)
    try:
        with engine.connect() as conn:
            assert set(inspect(conn).get_table_names()) == set()
            assert _triggers(conn) == set() and _functions(conn) == set()
    finally:
        engine.dispose()


def test_sqlite_connections_use_wal_foreign_keys_and_busy_timeout(db_path):
    with open_store(db_path)() as s:
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
        now = datetime.now(UTC).isoformat()
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
    from app.store import event_log, record_event, write_transaction

    event = write_transaction(
        small.Session,
        lambda s: record_event(s, session_id=small.session_id, instance_position=0, annotator="a", kind="skip"),
    )
    with small.Session() as s:
        before = event_log(s, small.session_id)
    statements = [
        f"UPDATE answer_events SET kind = 'answer', label = 0 WHERE id = {event.id}",
        f"UPDATE answer_events SET created_at = created_at WHERE id = {event.id}",
        "UPDATE answer_events SET annotator_id = annotator_id",
        f"DELETE FROM answer_events WHERE id = {event.id}",
        "DELETE FROM answer_events",
    ]
    if small.url.startswith("postgresql"):  # row triggers do not fire on TRUNCATE
        statements += ["TRUNCATE answer_events", "TRUNCATE instances CASCADE"]
    with small.Session() as s:
        conn = s.connection()
        for statement in statements:
            # A SAVEPOINT each: on PostgreSQL a failed statement aborts the whole transaction.
            with pytest.raises(DatabaseError, match="append-only"):
                with conn.begin_nested():
                    conn.exec_driver_sql(statement)
        s.commit()
    with small.Session() as s:
        assert event_log(s, small.session_id) == before


def test_migrations_ship_with_the_package():
    import migrations

    folder = os.path.dirname(migrations.__file__)
    assert os.path.exists(os.path.join(folder, "env.py"))
    assert os.path.exists(os.path.join(folder, "script.py.mako"))
    assert any(name.endswith(".py") for name in os.listdir(os.path.join(folder, "versions")))


def test_the_revisions_read_from_the_migration_files_are_alembics():
    # Every command checks the store's revision against these without importing Alembic.
    from app.store import db

    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    assert db.head_revision() == script.get_current_head()
    assert db._known_revisions() == {s.revision for s in script.walk_revisions()}
    chain = db._migration_chain()
    assert chain is not None
    assert chain == {s.revision: tuple(s._all_down_revisions) for s in script.walk_revisions()}


def _write_rows_of_0001(conn, now: datetime) -> None:
    """A dataset 'old' (the conftest's candidate sets), a session 's' and an annotator 'a',
    written with the SQL of the 0001 schema (today's models have columns 0001 lacks)."""
    from app.store.models import encode_candidate_mask

    from .conftest import CANDIDATES, LABELS

    conn.execute(
        text(
            "INSERT INTO datasets (id, name, created_at, label_names, n_instances, n_features)"
            " VALUES (1, 'old', :now, :labels, :n, 1)"
        ),
        {"now": now, "labels": json.dumps(LABELS), "n": len(CANDIDATES)},
    )
    for position, row in enumerate(CANDIDATES):
        conn.execute(
            text(
                "INSERT INTO instances (id, dataset_id, position, external_id, features,"
                " candidate_mask) VALUES (:id, 1, :p, :e, :f, :m)"
            ),
            {
                "id": position + 1,
                "p": position,
                "e": f"e{position}",
                "f": np.float64(position).tobytes(),
                "m": encode_candidate_mask(row),
            },
        )
    conn.execute(
        text(
            "INSERT INTO labelling_sessions (id, name, dataset_id, k, weighting, criterion,"
            " target_set, created_at, updated_at)"
            " VALUES (1, 's', 1, 3, 'uniform', 'apl', 'all', :now, :now)"
        ),
        {"now": now},
    )
    conn.execute(text("INSERT INTO annotators (id, name) VALUES (1, 'a')"))


def test_upgrading_a_store_step_by_step_keeps_its_data(store_url):
    """A store made at 0001 (rows written with that schema's SQL, since today's models have
    columns 0001 lacks) upgrades to head, down to 0001 and up again with its events intact."""
    from sqlalchemy.orm import sessionmaker

    from app.store import event_log, record_event, write_transaction

    from .conftest import LABELS

    upgrade_database(store_url, "0001")
    engine = make_engine(store_url)
    try:
        now = datetime(2026, 11, 1, tzinfo=UTC)
        with engine.begin() as conn:
            _write_rows_of_0001(conn, now)
            conn.execute(
                text(
                    "INSERT INTO answer_events (session_id, instance_id, annotator_id, kind, label,"
                    " created_at) VALUES (1, 1, 1, 'answer', 0, :now)"
                ),
                {"now": now},
            )
        upgrade_database(store_url)
        with engine.connect() as conn:
            head = ScriptDirectory.from_config(alembic_config(store_url)).get_current_head()
            assert MigrationContext.configure(conn).get_current_revision() == head
        Session = sessionmaker(bind=engine, expire_on_commit=False)
        with Session() as s:
            before = event_log(s, 1)
        assert [(e["kind"], e["label_name"]) for e in before] == [("answer", LABELS[0])]
        downgrade_database(store_url, "0001")
        upgrade_database(store_url)
        with Session() as s:
            assert event_log(s, 1) == before
        # The upgraded store takes new events.
        write_transaction(
            Session,
            lambda s: record_event(s, session_id=1, instance_position=1, annotator="a", kind="skip"),
        )
        with Session() as s:
            assert len(event_log(s, 1)) == 2
    finally:
        engine.dispose()


def test_0004_adds_item_content_and_keeps_a_0003_store(store_url):
    """A store at 0003 with a dataset, a session and an event upgrades to 0004: every row is
    kept, the new content and featurizer columns read as NULL, and a downgrade to 0003 keeps
    the rows too."""
    from sqlalchemy.orm import sessionmaker

    from app.store import dataset_content, dataset_featurizer, event_log

    from .conftest import CANDIDATES, LABELS

    upgrade_database(store_url, "0003")
    engine = make_engine(store_url)
    try:
        now = datetime(2026, 11, 20, tzinfo=UTC)
        with engine.begin() as conn:
            assert "text" not in {c["name"] for c in inspect(conn).get_columns("instances")}
            _write_rows_of_0001(conn, now)
            conn.execute(
                text(
                    "INSERT INTO answer_events (session_id, instance_id, annotator_id, kind, label, created_at,"
                    " idempotency_key) VALUES (1, 2, 1, 'answer', 1, :now, 'k1')"
                ),
                {"now": now},
            )
        # To the head, not to 0004: the ORM models read below also hold the columns of the
        # later revisions (0005: labelling_sessions.hotkeys; 0007: datasets.published).
        upgrade_database(store_url)
        Session = sessionmaker(bind=engine, expire_on_commit=False)
        with Session() as s:
            content = dataset_content(s, 1)
            assert content.media_root is None and not content.has_content
            assert content.texts == (None,) * len(CANDIDATES) and content.links == (None,) * len(CANDIDATES)
            assert dataset_featurizer(s, 1) is None
            before = event_log(s, 1)
        assert [(e["kind"], e["label_name"], e["external_id"]) for e in before] == [("answer", LABELS[1], "e1")]
        # The new CHECK refuses a media kind other than image/audio.
        with engine.connect() as conn:
            with pytest.raises(IntegrityError):
                with conn.begin():
                    conn.exec_driver_sql("UPDATE instances SET media_kind = 'video', media_path = 'a.mp4' WHERE id = 1")
        downgrade_database(store_url, "0003")
        with engine.connect() as conn:
            columns = {c["name"] for c in inspect(conn).get_columns("instances")}
            assert not columns & {"text", "media_path", "media_kind", "link"}
            assert conn.exec_driver_sql("SELECT count(*) FROM instances").scalar() == len(CANDIDATES)
        upgrade_database(store_url)
        with Session() as s:
            assert event_log(s, 1) == before
    finally:
        engine.dispose()


def _schema_around_sessions(conn) -> dict:
    """What the 0009 copy-and-move of labelling_sessions must keep: every trigger, every
    foreign key and index of the two tables, and the rows."""
    found = inspect(conn)
    return {
        "triggers": _triggers(conn),
        "foreign_keys": {
            t: sorted(map(repr, found.get_foreign_keys(t))) for t in ("labelling_sessions", "answer_events")
        },
        "indexes": {t: sorted(map(repr, found.get_indexes(t))) for t in ("labelling_sessions", "answer_events")},
        "unique": sorted(map(repr, found.get_unique_constraints("labelling_sessions"))),
        "columns": [c["name"] for c in found.get_columns("labelling_sessions")],
        "sessions": conn.exec_driver_sql(
            "SELECT id, name, dataset_id, k, weighting, criterion, target_set FROM labelling_sessions ORDER BY id"
        ).all(),
        "events": conn.exec_driver_sql("SELECT id, session_id, kind, label FROM answer_events ORDER BY id").all(),
    }


def test_0009_accepts_decision_change_and_keeps_triggers_keys_and_rows(store_url):
    """Up to 0009 with an event recorded: the criterion CHECK takes 'decision_change' (and
    still refuses unknown names), nothing else about labelling_sessions or the events that
    reference it changes, and downgrading refuses while a session ranks by decision_change."""
    below = ScriptDirectory.from_config(alembic_config(store_url)).get_revision("0009").down_revision
    upgrade_database(store_url, below)
    engine = make_engine(store_url)
    insert_session = text(
        "INSERT INTO labelling_sessions (id, name, dataset_id, k, weighting, criterion, target_set,"
        " created_at, updated_at) VALUES (:id, :name, 1, 3, 'uniform', :criterion, 'all', :now, :now)"
    )
    now = datetime(2026, 11, 2, tzinfo=UTC)
    try:
        with engine.begin() as conn:
            _write_rows_of_0001(conn, now)
            conn.execute(
                text(
                    "INSERT INTO answer_events (session_id, instance_id, annotator_id, kind, label,"
                    " created_at) VALUES (1, 1, 1, 'answer', 0, :now)"
                ),
                {"now": now},
            )
        with engine.connect() as conn:
            before = _schema_around_sessions(conn)
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.execute(insert_session, {"id": 2, "name": "dc", "criterion": "decision_change", "now": now})

        upgrade_database(store_url, "0009")
        with engine.connect() as conn:
            assert _schema_around_sessions(conn) == before
            if conn.dialect.name == "sqlite":
                assert conn.exec_driver_sql("PRAGMA foreign_key_check").all() == []
        with engine.begin() as conn:
            conn.execute(insert_session, {"id": 2, "name": "dc", "criterion": "decision_change", "now": now})
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.execute(insert_session, {"id": 3, "name": "bad", "criterion": "nope", "now": now})
        with pytest.raises(IntegrityError), engine.begin() as conn:  # the session foreign key holds
            conn.execute(
                text(
                    "INSERT INTO answer_events (session_id, instance_id, annotator_id, kind, created_at)"
                    " VALUES (99, 1, 1, 'skip', :now)"
                ),
                {"now": now},
            )
        with pytest.raises(DatabaseError), engine.begin() as conn:  # and the events stay append-only
            conn.execute(text("DELETE FROM answer_events"))

        with pytest.raises(RuntimeError, match="'dc' rank by criterion 'decision_change'"):
            downgrade_database(store_url, below)
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM labelling_sessions WHERE id = 2"))
        downgrade_database(store_url, below)
        with engine.connect() as conn:
            assert _schema_around_sessions(conn) == before
    finally:
        engine.dispose()


def test_0013_audits_key_changes_and_keeps_the_audit_log_append_only(store_url):
    """Up to 0013 with audit rows written: they are kept, the kind CHECK takes
    'hotkeys_changed' (and still refuses unknown kinds), the append-only triggers (0012's
    REPLACE guard among them) and the index are back, and downgrading refuses while a key
    change is in the log."""
    upgrade_database(store_url, "0012")
    engine = make_engine(store_url)
    insert = text("INSERT INTO audit_events (kind, user_name, created_at) VALUES (:kind, 'ada', :now)")
    now = datetime(2026, 11, 25, tzinfo=UTC)
    try:
        with engine.begin() as conn:
            for kind in ("user_added", "sign_in"):
                conn.execute(insert, {"kind": kind, "now": now})
        upgrade_database(store_url, "0013")
        with engine.connect() as conn:
            assert conn.execute(text("SELECT id, kind FROM audit_events ORDER BY id")).all() == [
                (1, "user_added"),
                (2, "sign_in"),
            ]
            assert "ix_audit_events_user_kind_created" in {i["name"] for i in inspect(conn).get_indexes("audit_events")}
            assert "store_secrets" in inspect(conn).get_table_names()
        with engine.begin() as conn:
            conn.execute(insert, {"kind": "hotkeys_changed", "now": now})
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.execute(insert, {"kind": "bogus", "now": now})
        with pytest.raises(DatabaseError, match="append-only"), engine.begin() as conn:
            conn.execute(text("DELETE FROM audit_events"))
        with pytest.raises(DatabaseError, match="append-only"), engine.begin() as conn:
            conn.execute(text("UPDATE audit_events SET user_name = 'eve'"))
        if engine.dialect.name == "sqlite":
            with pytest.raises(DatabaseError, match="append-only"), engine.begin() as conn:
                conn.execute(
                    text(
                        "REPLACE INTO audit_events (id, kind, user_name, created_at) VALUES (1, 'sign_in', 'eve', :now)"
                    ),
                    {"now": now},
                )
        with pytest.raises(RuntimeError, match="1 change\\(s\\) of answer keys"):
            downgrade_database(store_url, "0012")
    finally:
        engine.dispose()
