"""Working-state snapshots of sessions (issue 32).

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-27

``session_snapshot_parts``: per session, the arrays a session at work derived from its event
log and its neighbour graph (``app.store.snapshots``), so that a command opens a session in
the time it takes to read them. A cache: the table starts empty and the first open of each
session fills it; dropping every row loses nothing but time.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | Sequence[str] | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "session_snapshot_parts",
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=40), nullable=False),
        sa.Column("token", sa.String(length=32), nullable=False),
        sa.Column("format_version", sa.Integer(), nullable=False),
        sa.Column("identity", sa.String(length=64), nullable=False),
        sa.Column("last_event_id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["labelling_sessions.id"],
            name=op.f("fk_session_snapshot_parts_session_id_labelling_sessions"),
        ),
        sa.PrimaryKeyConstraint("session_id", "name", name=op.f("pk_session_snapshot_parts")),
    )


def downgrade() -> None:
    op.drop_table("session_snapshot_parts")
