"""Persisted neighbour graphs: a k-NN graph is computed once per dataset and parameters.

Revision ID: 0006
Revises: 0005 (chained after main's current head; the lead renumbers it when merging)
Create Date: 2026-11-23

``neighbour_graphs`` holds one k-NN graph per content hash of (features, k, weighting,
search algorithm and its parameters), with the neighbour rows and weights as blobs, so that
every browser tab, process and CLI command loads the graph instead of rebuilding it
(issue 14; ``app/store/graphs.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "neighbour_graphs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("k", sa.Integer(), nullable=False),
        sa.Column("weighting", sa.String(length=20), nullable=False),
        sa.Column("algorithm", sa.String(length=20), nullable=False),
        sa.Column("n_targets", sa.Integer(), nullable=False),
        sa.Column("idx", sa.LargeBinary(), nullable=False),
        sa.Column("w", sa.LargeBinary(), nullable=True),
        sa.Column("build_seconds", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("k >= 1", name=op.f("ck_neighbour_graphs_k_positive")),
        sa.CheckConstraint("n_targets >= 0", name=op.f("ck_neighbour_graphs_n_targets_nonnegative")),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"], name=op.f("fk_neighbour_graphs_dataset_id_datasets")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_neighbour_graphs")),
        sa.UniqueConstraint("content_hash", name=op.f("uq_neighbour_graphs_content_hash")),
    )
    op.create_index(op.f("ix_neighbour_graphs_dataset_id"), "neighbour_graphs", ["dataset_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_neighbour_graphs_dataset_id"), table_name="neighbour_graphs")
    op.drop_table("neighbour_graphs")
