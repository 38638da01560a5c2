"""Label lots (issue 28).

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-27

* ``session_label_settings.promise``: what a stated error means, "confidence" (the default:
  every statement holds with the session's confidence) or "average".
* ``label_lots``: the lots of model labels a session froze, each with its items in audit
  order, their frozen labels and accept scores (:mod:`app.service.lots`). They replace
  ``audit_draws``: an audit is now the next item of the active lot's random order, not a
  draw per served slot, so the old draws are dropped (a session of an upgraded store starts
  its first lot on its next read; nothing stated before was valid under repeated reading).
The audit order is seeded by the store's own random key ``audit_order`` in ``store_secrets``
(made on first use), so that nobody can compute it from the source and the session id.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | Sequence[str] | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "label_lots",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("after_event_id", sa.Integer(), nullable=False),
        sa.Column("alpha", sa.Float(), nullable=False),
        sa.Column("target", sa.Float(), nullable=False),
        sa.Column("threshold", sa.Float(), nullable=False),
        sa.Column("positions", sa.LargeBinary(), nullable=False),
        sa.Column("labels", sa.LargeBinary(), nullable=False),
        sa.Column("margins", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("number >= 1", name=op.f("ck_label_lots_number_positive")),
        sa.CheckConstraint("alpha > 0 AND alpha < 1", name=op.f("ck_label_lots_alpha_range")),
        sa.CheckConstraint("target > 0 AND target < 1", name=op.f("ck_label_lots_target_range")),
        sa.ForeignKeyConstraint(
            ["session_id"], ["labelling_sessions.id"], name=op.f("fk_label_lots_session_id_labelling_sessions")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_label_lots")),
        sa.UniqueConstraint("session_id", "number", name=op.f("uq_label_lots_session_id_number")),
    )
    op.drop_table("audit_draws")
    with op.batch_alter_table("session_label_settings") as batch:
        batch.add_column(sa.Column("promise", sa.String(length=20), server_default="confidence", nullable=False))
        batch.create_check_constraint("promise_known", "promise IN ('confidence', 'average')")


def downgrade() -> None:
    with op.batch_alter_table("session_label_settings") as batch:
        batch.drop_constraint(op.f("ck_session_label_settings_promise_known"), type_="check")
        batch.drop_column("promise")
    op.create_table(
        "audit_draws",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("instance_id", sa.Integer(), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column("drawn_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("slot >= 0", name=op.f("ck_audit_draws_slot_nonnegative")),
        sa.ForeignKeyConstraint(["instance_id"], ["instances.id"], name=op.f("fk_audit_draws_instance_id_instances")),
        sa.ForeignKeyConstraint(
            ["session_id"], ["labelling_sessions.id"], name=op.f("fk_audit_draws_session_id_labelling_sessions")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_draws")),
        sa.UniqueConstraint("session_id", "instance_id", name=op.f("uq_audit_draws_session_id_instance_id")),
        sa.UniqueConstraint("session_id", "slot", name=op.f("uq_audit_draws_session_id_slot")),
    )
    op.drop_table("label_lots")
