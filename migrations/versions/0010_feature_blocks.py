"""Each dataset's feature matrix in a few blobs: opening a session reads blocks, not a row per item.

Revision ID: 0010
Revises: 0008 (main's head when this branch was rebased; written as 0010 after 0007)
Create Date: 2026-11-23

``feature_blocks`` holds consecutive rows of a dataset's feature matrix as ``.npy`` bytes
(float64, as ``instances.features`` holds them), up to 64 MiB per block (issue 14;
``app/store/features.py``). The upgrade fills it for every dataset whose instances are all
there, one block at a time: each block's rows are read with one ``SELECT`` by position, so
memory stays at one block (plus its rows) whatever the size of the store. A dataset whose
rows do not match its ``n_instances`` gets no blocks; it is read from its rows as before.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np
import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen here (not read from app.store.features): a migration describes one step of the schema.
_BLOCK_BYTES = 64 * 2**20


def upgrade() -> None:
    op.create_table(
        "feature_blocks",
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("start", sa.Integer(), nullable=False),
        sa.Column("n_rows", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.CheckConstraint("start >= 0", name=op.f("ck_feature_blocks_start_nonnegative")),
        sa.CheckConstraint("n_rows >= 1", name=op.f("ck_feature_blocks_n_rows_positive")),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"], name=op.f("fk_feature_blocks_dataset_id_datasets")),
        sa.PrimaryKeyConstraint("dataset_id", "start", name=op.f("pk_feature_blocks")),
    )
    bind = op.get_bind()
    datasets = bind.execute(sa.text("SELECT id, n_instances, n_features FROM datasets ORDER BY id")).all()
    for dataset_id, n, d in datasets:
        stored = bind.execute(
            sa.text("SELECT count(*) FROM instances WHERE dataset_id = :d"), {"d": dataset_id}
        ).scalar_one()
        if n == 0 or stored != n:
            continue
        _fill(bind, dataset_id, n, d)


def _fill(bind: sa.engine.Connection, dataset_id: int, n: int, d: int) -> None:
    step = max(1, _BLOCK_BYTES // (8 * d))
    for start in range(0, n, step):
        rows = (
            bind.execute(
                sa.text(
                    "SELECT features FROM instances WHERE dataset_id = :d AND position >= :a AND position < :b"
                    " ORDER BY position"
                ),
                {"d": dataset_id, "a": start, "b": start + step},
            )
            .scalars()
            .all()
        )
        if len(rows) != min(step, n - start) or any(len(row) != 8 * d for row in rows):
            # Positions with gaps or rows of another width: leave the dataset to its rows.
            bind.execute(sa.text("DELETE FROM feature_blocks WHERE dataset_id = :d"), {"d": dataset_id})
            return
        block = np.frombuffer(b"".join(rows), dtype="<f8").reshape(len(rows), d)
        buffer = io.BytesIO()
        np.lib.format.write_array(buffer, block, allow_pickle=False)
        bind.execute(
            sa.text("INSERT INTO feature_blocks (dataset_id, start, n_rows, data) VALUES (:d, :s, :r, :data)"),
            {"d": dataset_id, "s": start, "r": len(rows), "data": buffer.getvalue()},
        )


def downgrade() -> None:
    op.drop_table("feature_blocks")
