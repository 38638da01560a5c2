"""Leases without reading the event log (issue 21).

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-25

* ``ix_answer_events_session_instance`` on ``answer_events (session_id, instance_id, id)``:
  :func:`app.store.next_item` reads the events of the few items it considers, not the log.
* ``lease_open_items``: per session, the items with an annotator's verdict that are neither
  resolved nor in conflict, with how many annotators gave one: where ``next_item`` finds the
  items that want another annotator (overlap >= 2).
* ``lease_cursors``: per session, the last event ``lease_open_items`` takes into account.
  Both tables start empty: ``next_item`` brings them up to date from the events after the
  cursor (the whole log, once, for a session of an upgraded store), so the upgrade reads no
  events.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | Sequence[str] | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_answer_events_session_instance", "answer_events", ["session_id", "instance_id", "id"], unique=False
    )
    op.create_table(
        "lease_open_items",
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("instance_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("annotators", sa.Integer(), nullable=False),
        sa.CheckConstraint("annotators >= 1", name=op.f("ck_lease_open_items_annotators_positive")),
        sa.ForeignKeyConstraint(
            ["instance_id"], ["instances.id"], name=op.f("fk_lease_open_items_instance_id_instances")
        ),
        sa.ForeignKeyConstraint(
            ["session_id"], ["labelling_sessions.id"], name=op.f("fk_lease_open_items_session_id_labelling_sessions")
        ),
        sa.PrimaryKeyConstraint("session_id", "instance_id", name=op.f("pk_lease_open_items")),
    )
    op.create_index(
        "ix_lease_open_items_session_position_annotators",
        "lease_open_items",
        ["session_id", "position", "annotators"],
        unique=False,
    )
    op.create_table(
        "lease_cursors",
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("last_event_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"], ["labelling_sessions.id"], name=op.f("fk_lease_cursors_session_id_labelling_sessions")
        ),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_lease_cursors")),
    )


def downgrade() -> None:
    op.drop_table("lease_cursors")
    op.drop_index("ix_lease_open_items_session_position_annotators", table_name="lease_open_items")
    op.drop_table("lease_open_items")
    op.drop_index("ix_answer_events_session_instance", table_name="answer_events")
