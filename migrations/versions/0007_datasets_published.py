"""Datasets are published at the end of their import: long imports no longer hold the write lock.

Revision ID: 0007
Revises: 0006 (branch harden: after the migrations main had when it was rebased; the lead orders the chain)
Create Date: 2026-11-23

An import writes its instances in batches, each batch its own short transaction, under a
dataset row with ``published = false`` that every read ignores; a last short transaction sets
``published = true`` (and creates the import's labelling session, if any). Answers of other
sessions commit between the batches instead of waiting for the whole load. ``staged_by``
(``"host:pid"``) and ``staged_at`` (time of the last batch) tell an import still running from
one whose process died, which the next start removes. Existing datasets are published.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ADD COLUMN (not batch mode) on both backends: nothing is rebuilt.
    op.add_column("datasets", sa.Column("published", sa.Boolean(), nullable=False, server_default=sa.true()))
    op.add_column("datasets", sa.Column("staged_by", sa.String(length=200), nullable=True))
    op.add_column("datasets", sa.Column("staged_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    # Unpublished datasets were never visible: they go with the columns that mark them.
    op.execute("DELETE FROM instances WHERE dataset_id IN (SELECT id FROM datasets WHERE NOT published)")
    op.execute("DELETE FROM datasets WHERE NOT published")
    # Plain DROP COLUMN (SQLite >= 3.35): batch mode would rebuild the table the instances and
    # sessions refer to.
    for column in ("staged_at", "staged_by", "published"):
        op.drop_column("datasets", column)
