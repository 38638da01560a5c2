"""The Label Studio control a dataset was read from (issue 30).

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-27

* ``datasets.label_studio_control``: ``{"from_name", "to_name", "data_key"}`` of the
  classification control of the Label Studio project a dataset was imported from, so that ``winnow export --format
  label-studio`` writes tasks that fit the same project. Nullable: every other dataset, and
  every dataset of an upgraded store, has none.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | Sequence[str] | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ADD COLUMN: a batch copy of "datasets" would trip the foreign keys that point at it.
    op.add_column("datasets", sa.Column("label_studio_control", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("datasets", "label_studio_control")
