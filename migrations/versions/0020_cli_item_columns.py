"""A dataset's item columns in one piece, and the graph keys hashed from its features (issue 32).

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-28

``item_columns``: per dataset, its items' ids, external ids, candidate masks and true labels
as one blob each, and the graph keys already hashed from its features
(``app.store.item_columns``), so that opening a session reads a few blobs instead of a row
per item and hashes no features. A cache of the ``instances`` rows: the table starts empty,
the first open of a session on each dataset fills it, and dropping every row loses nothing
but time.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | Sequence[str] | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "item_columns",
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=80), nullable=False),
        sa.Column("token", sa.String(length=32), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"], name=op.f("fk_item_columns_dataset_id_datasets")),
        sa.PrimaryKeyConstraint("dataset_id", "name", name=op.f("pk_item_columns")),
    )


def downgrade() -> None:
    op.drop_table("item_columns")
