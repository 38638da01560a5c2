"""Items carry their content: a text, a media reference (image or audio) and a link; datasets
record their media root and the featurizer that computed their features.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24

``instances`` gains ``text`` (the item's text), ``media_path`` (a path relative to the
dataset's media root, ``/``-separated), ``media_kind`` (``image`` or ``audio``; a column CHECK
keeps other values out) and ``link`` (an http(s) URL). ``datasets`` gains ``media_root`` (an
absolute folder) and the featurizer record: ``featurizer`` (its name), ``featurizer_params``
(JSON) and ``featurizer_state`` (an ``.npz`` archive of plain arrays, never a pickle). Every new
column is nullable, so existing rows keep their meaning: items without content, datasets whose
features were given as numbers.

Plain ``ALTER TABLE ... ADD COLUMN`` on both backends (no batch copy of ``instances``, which
``answer_events`` references); the downgrade drops the columns again (SQLite 3.35+ drops a
column natively, and a column CHECK goes with its column).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_INSTANCE_COLUMNS = ("text", "media_path", "media_kind", "link")
_DATASET_COLUMNS = ("media_root", "featurizer", "featurizer_params", "featurizer_state")


def upgrade() -> None:
    op.add_column("instances", sa.Column("text", sa.Text(), nullable=True))
    op.add_column("instances", sa.Column("media_path", sa.String(length=1024), nullable=True))
    op.add_column(
        "instances",
        sa.Column(
            "media_kind",
            sa.String(length=10),
            sa.CheckConstraint("media_kind IN ('image', 'audio')", name=op.f("ck_instances_media_kind")),
            nullable=True,
        ),
    )
    op.add_column("instances", sa.Column("link", sa.String(length=2048), nullable=True))
    op.add_column("datasets", sa.Column("media_root", sa.String(length=4096), nullable=True))
    op.add_column("datasets", sa.Column("featurizer", sa.String(length=100), nullable=True))
    op.add_column("datasets", sa.Column("featurizer_params", sa.JSON(), nullable=True))
    op.add_column("datasets", sa.Column("featurizer_state", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    for name in reversed(_DATASET_COLUMNS):
        op.drop_column("datasets", name)
    for name in reversed(_INSTANCE_COLUMNS):
        op.drop_column("instances", name)
