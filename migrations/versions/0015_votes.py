"""Crowd votes: who voted which label for an item before winnow (issue 22).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25

* ``votes``: one row per vote (instance, the annotator's name as the source gives it, label
  index, time when known, source), indexed by instance. Written with the dataset's instances by
  the import; existing datasets simply have none.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "votes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("instance_id", sa.Integer(), nullable=False),
        sa.Column("annotator", sa.String(length=200), nullable=False),
        sa.Column("label", sa.Integer(), nullable=False),
        sa.Column("voted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("source", sa.String(length=200), nullable=False),
        sa.CheckConstraint("label >= 0", name=op.f("ck_votes_label_nonnegative")),
        sa.ForeignKeyConstraint(["instance_id"], ["instances.id"], name=op.f("fk_votes_instance_id_instances")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_votes")),
    )
    op.create_index(op.f("ix_votes_instance_id"), "votes", ["instance_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_votes_instance_id"), table_name="votes")
    op.drop_table("votes")
