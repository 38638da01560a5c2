"""answer_events: PostgreSQL refuses TRUNCATE too.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22

The row-level trigger of 0001 does not fire on ``TRUNCATE``, so on PostgreSQL
``TRUNCATE answer_events`` (or ``TRUNCATE ... CASCADE`` of a table it references) emptied the
append-only event log. A statement-level ``BEFORE TRUNCATE`` trigger, calling the same
function, refuses it. SQLite has no ``TRUNCATE`` (a ``DELETE FROM`` fires the 0001 trigger):
nothing to do there.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE TRIGGER answer_events_no_truncate BEFORE TRUNCATE ON answer_events"
            " FOR EACH STATEMENT EXECUTE FUNCTION answer_events_append_only()"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS answer_events_no_truncate ON answer_events")
