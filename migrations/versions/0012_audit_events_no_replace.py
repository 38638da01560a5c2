"""audit_events cannot be rewritten by REPLACE on SQLite, as answer_events since 0003.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25

The triggers of 0008 refuse ``UPDATE`` and ``DELETE`` of an audit row, but SQLite resolves
``INSERT OR REPLACE`` (and ``REPLACE INTO``) by deleting the conflicting row, and that delete
fires no trigger while ``recursive_triggers`` is off (the default, and any client may connect
with it off): ``REPLACE INTO audit_events`` rewrote a sign-in record (issue 23, item 7). A
``BEFORE INSERT`` trigger refuses an insert whose id is taken, so there is nothing to replace
(``id`` is the table's only unique key). It lives in the file, so it holds for every client,
not only winnow's connections.

PostgreSQL needs nothing new: its upsert (``ON CONFLICT DO UPDATE``) and ``MERGE`` are UPDATEs
or DELETEs there and already fire the row trigger of 0008; ``TRUNCATE`` is refused by 0008's
statement trigger.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute(
            """
            CREATE TRIGGER audit_events_no_replace BEFORE INSERT ON audit_events
            WHEN EXISTS (SELECT 1 FROM audit_events WHERE id = NEW.id)
            BEGIN SELECT RAISE(ABORT, 'audit_events is append-only: a record cannot be replaced'); END
            """
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS audit_events_no_replace")
