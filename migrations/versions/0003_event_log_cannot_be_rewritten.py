"""The event log cannot be rewritten: no REPLACE of an event, no renaming of an annotator;
answers carry an idempotency key.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22

Two ways around the append-only triggers of 0001 are closed:

* SQLite resolves ``INSERT OR REPLACE`` (and ``REPLACE INTO``) by deleting the conflicting
  row, and that delete fires no trigger while ``recursive_triggers`` is off (the default).
  A ``BEFORE INSERT`` trigger refuses an insert that would collide with an existing event on
  any unique key (its id, the event it undoes, or its session's idempotency key), so there is nothing to replace.
  An upsert (``ON CONFLICT DO UPDATE``) is an UPDATE and was already refused, on both backends.
* Renaming an annotator re-attributed every one of their past events. Names are now
  immutable on both backends (``UPDATE`` of the name is refused; on SQLite a REPLACE of an
  annotator row is refused the same way as for events).

``answer_events.idempotency_key`` (nullable, unique per session) lets a client that retries
a request after a lost reply record its answer once: the store returns the event already
recorded under that key instead of writing a second one.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SQLITE_TRIGGERS = (
    """
    CREATE TRIGGER answer_events_no_replace BEFORE INSERT ON answer_events
    WHEN EXISTS (SELECT 1 FROM answer_events WHERE id = NEW.id)
      OR (NEW.undoes_event_id IS NOT NULL AND EXISTS (
            SELECT 1 FROM answer_events WHERE undoes_event_id = NEW.undoes_event_id))
      OR (NEW.idempotency_key IS NOT NULL AND EXISTS (
            SELECT 1 FROM answer_events
            WHERE session_id = NEW.session_id AND idempotency_key = NEW.idempotency_key))
    BEGIN SELECT RAISE(ABORT, 'answer_events is append-only: an event cannot be replaced'); END
    """,
    """
    CREATE TRIGGER annotators_name_immutable BEFORE UPDATE OF name ON annotators
    WHEN NEW.name IS NOT OLD.name
    BEGIN SELECT RAISE(ABORT, 'annotator names are immutable: past events name them'); END
    """,
    """
    CREATE TRIGGER annotators_no_replace BEFORE INSERT ON annotators
    WHEN EXISTS (SELECT 1 FROM annotators WHERE id = NEW.id OR name = NEW.name)
    BEGIN SELECT RAISE(ABORT, 'annotator names are immutable: past events name them'); END
    """,
)

_POSTGRESQL_TRIGGERS = (
    """
    CREATE FUNCTION annotators_name_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'annotator names are immutable: past events name them';
    END
    $$
    """,
    """
    CREATE TRIGGER annotators_name_immutable BEFORE UPDATE ON annotators
    FOR EACH ROW WHEN (OLD.name IS DISTINCT FROM NEW.name OR OLD.id IS DISTINCT FROM NEW.id)
    EXECUTE FUNCTION annotators_name_immutable()
    """,
)


def upgrade() -> None:
    # Plain ALTER TABLE (not batch mode): recreating answer_events would drop its triggers.
    op.add_column("answer_events", sa.Column("idempotency_key", sa.String(length=128), nullable=True))
    op.create_index(
        "uq_answer_events_session_idempotency_key",
        "answer_events",
        ["session_id", "idempotency_key"],
        unique=True,
    )
    dialect = op.get_bind().dialect.name
    for statement in {"sqlite": _SQLITE_TRIGGERS, "postgresql": _POSTGRESQL_TRIGGERS}.get(dialect, ()):
        op.execute(statement)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for name in ("annotators_no_replace", "annotators_name_immutable", "answer_events_no_replace"):
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
    elif dialect == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS annotators_name_immutable ON annotators")
        op.execute("DROP FUNCTION IF EXISTS annotators_name_immutable()")
    op.drop_index("uq_answer_events_session_idempotency_key", table_name="answer_events")
    op.drop_column("answer_events", "idempotency_key")
