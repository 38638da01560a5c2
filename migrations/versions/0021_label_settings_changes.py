"""Label settings kept as changes; lots derived from the answers, not stored (issue 42).

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-05

* ``label_settings_changes``: one row per change of a session's label settings, never updated
  or deleted (append-only triggers), with the largest event id when it was made. A lot of model
  labels keeps the settings in force when it was frozen (``engine.labelling_loop``); a change
  applies to lots frozen later. The rows of ``session_label_settings`` become its first rows.
* ``label_lots`` is dropped: lots are now a function of the answers, the store's key and the
  settings (``engine.labelling_loop.run_loop``), computed by whoever reads a session and never
  written, so that reading changes nothing. A session of an upgraded store has its lots frozen
  again under the new rules from its answers.
* ``store_secrets``: a key is never deleted, and never changed once the store holds an answer (the
  audit order and slots are drawn from it, so a new key would re-draw audits already seen).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | Sequence[str] | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SQLITE_TRIGGERS = (
    """
    CREATE TRIGGER label_settings_changes_no_update BEFORE UPDATE ON label_settings_changes
    BEGIN SELECT RAISE(ABORT, 'label_settings_changes is append-only: record a new change instead'); END
    """,
    """
    CREATE TRIGGER label_settings_changes_no_delete BEFORE DELETE ON label_settings_changes
    BEGIN SELECT RAISE(ABORT, 'label_settings_changes is append-only: record a new change instead'); END
    """,
    """
    CREATE TRIGGER store_secrets_no_delete BEFORE DELETE ON store_secrets
    BEGIN SELECT RAISE(ABORT, 'store_secrets are kept: a key is never deleted'); END
    """,
    """
    CREATE TRIGGER store_secrets_fixed_once_answered BEFORE UPDATE ON store_secrets
    WHEN EXISTS (SELECT 1 FROM answer_events)
    BEGIN SELECT RAISE(ABORT, 'store_secrets are fixed once the store holds an answer'); END
    """,
)

_POSTGRESQL_TRIGGERS = (
    """
    CREATE FUNCTION label_settings_changes_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'label_settings_changes is append-only: record a new change instead';
    END
    $$
    """,
    """
    CREATE TRIGGER label_settings_changes_append_only BEFORE UPDATE OR DELETE ON label_settings_changes
    FOR EACH ROW EXECUTE FUNCTION label_settings_changes_append_only()
    """,
    """
    CREATE TRIGGER label_settings_changes_no_truncate BEFORE TRUNCATE ON label_settings_changes
    FOR EACH STATEMENT EXECUTE FUNCTION label_settings_changes_append_only()
    """,
    """
    CREATE FUNCTION store_secrets_kept() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP <> 'UPDATE' THEN
            RAISE EXCEPTION 'store_secrets are kept: a key is never deleted';
        END IF;
        IF EXISTS (SELECT 1 FROM answer_events) THEN
            RAISE EXCEPTION 'store_secrets are fixed once the store holds an answer';
        END IF;
        RETURN NEW;
    END
    $$
    """,
    """
    CREATE TRIGGER store_secrets_kept BEFORE UPDATE OR DELETE ON store_secrets
    FOR EACH ROW EXECUTE FUNCTION store_secrets_kept()
    """,
    """
    CREATE TRIGGER store_secrets_no_truncate BEFORE TRUNCATE ON store_secrets
    FOR EACH STATEMENT EXECUTE FUNCTION store_secrets_kept()
    """,
)


def upgrade() -> None:
    op.create_table(
        "label_settings_changes",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("after_event_id", sa.Integer(), nullable=False),
        sa.Column("max_error", sa.Float(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("audit_share", sa.Float(), nullable=False),
        sa.Column("promise", sa.String(length=20), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("max_error > 0 AND max_error < 0.5", name=op.f("ck_label_settings_changes_max_error_range")),
        sa.CheckConstraint(
            "confidence >= 0.5 AND confidence < 1", name=op.f("ck_label_settings_changes_confidence_range")
        ),
        sa.CheckConstraint(
            "audit_share >= 0 AND audit_share <= 0.5", name=op.f("ck_label_settings_changes_audit_share_range")
        ),
        sa.CheckConstraint(
            "promise IN ('confidence', 'average')", name=op.f("ck_label_settings_changes_promise_known")
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["labelling_sessions.id"],
            name=op.f("fk_label_settings_changes_session_id_labelling_sessions"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_label_settings_changes")),
    )
    op.create_index(
        op.f("ix_label_settings_changes_session_id"), "label_settings_changes", ["session_id"], unique=False
    )
    op.execute(
        "INSERT INTO label_settings_changes"
        " (session_id, after_event_id, max_error, confidence, audit_share, promise, created_at)"
        " SELECT session_id, 0, max_error, confidence, audit_share, promise, CURRENT_TIMESTAMP"
        " FROM session_label_settings ORDER BY session_id"
    )
    dialect = op.get_bind().dialect.name
    for statement in {"sqlite": _SQLITE_TRIGGERS, "postgresql": _POSTGRESQL_TRIGGERS}.get(dialect, ()):
        op.execute(statement)
    op.drop_table("session_label_settings")
    op.drop_table("label_lots")


def downgrade() -> None:
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
    op.create_table(
        "session_label_settings",
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("max_error", sa.Float(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("audit_share", sa.Float(), nullable=False),
        sa.Column("promise", sa.String(length=20), server_default="confidence", nullable=False),
        sa.CheckConstraint("max_error > 0 AND max_error < 0.5", name=op.f("ck_session_label_settings_max_error_range")),
        sa.CheckConstraint(
            "confidence >= 0.5 AND confidence < 1", name=op.f("ck_session_label_settings_confidence_range")
        ),
        sa.CheckConstraint(
            "audit_share >= 0 AND audit_share <= 0.5", name=op.f("ck_session_label_settings_audit_share_range")
        ),
        sa.CheckConstraint(
            "promise IN ('confidence', 'average')", name=op.f("ck_session_label_settings_promise_known")
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["labelling_sessions.id"],
            name=op.f("fk_session_label_settings_session_id_labelling_sessions"),
        ),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_session_label_settings")),
    )
    op.execute(
        "INSERT INTO session_label_settings (session_id, max_error, confidence, audit_share, promise)"
        " SELECT c.session_id, c.max_error, c.confidence, c.audit_share, c.promise FROM label_settings_changes c"
        " WHERE c.id = (SELECT MAX(d.id) FROM label_settings_changes d WHERE d.session_id = c.session_id)"
    )
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS store_secrets_no_delete")
        op.execute("DROP TRIGGER IF EXISTS store_secrets_fixed_once_answered")
    if dialect == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS store_secrets_no_truncate ON store_secrets")
        op.execute("DROP TRIGGER IF EXISTS store_secrets_kept ON store_secrets")
        op.execute("DROP FUNCTION IF EXISTS store_secrets_kept()")
        op.execute("DROP TRIGGER IF EXISTS label_settings_changes_no_truncate ON label_settings_changes")
        op.execute("DROP TRIGGER IF EXISTS label_settings_changes_append_only ON label_settings_changes")
        op.execute("DROP FUNCTION IF EXISTS label_settings_changes_append_only()")
    op.drop_index(op.f("ix_label_settings_changes_session_id"), table_name="label_settings_changes")
    op.drop_table("label_settings_changes")
