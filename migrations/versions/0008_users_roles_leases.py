"""Teams: user accounts with roles, session assignments and overlap, an audit log, item leases.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23

* ``users``: name (unique and immutable: it is the name of the user's annotator row, which
  past events reference), role (admin, annotator, reviewer), active flag, argon2 hash.
* ``session_assignments``: who may answer in which labelling session.
* ``session_team_settings``: a session's overlap (annotators required per item).
* ``audit_events``: sign-ins (successful or not) and changes to accounts and assignments;
  append-only like ``answer_events`` (triggers on both backends).
* ``item_leases``: the item reserved for a user of a session, until it expires.

Existing stores keep their data: annotators and events are untouched, and a store without
users stays in single-user mode.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ROLES = "role IN ('admin', 'annotator', 'reviewer')"
_AUDIT_KINDS = (
    "kind IN ('sign_in', 'sign_in_failed', 'user_added', 'role_changed', 'user_disabled', "
    "'user_enabled', 'password_changed', 'assigned', 'overlap_changed')"
)

_SQLITE_TRIGGERS = (
    """
    CREATE TRIGGER users_name_immutable BEFORE UPDATE OF name ON users
    WHEN NEW.name IS NOT OLD.name
    BEGIN SELECT RAISE(ABORT, 'user names are immutable: past events name them'); END
    """,
    """
    CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
    BEGIN SELECT RAISE(ABORT, 'audit_events is append-only'); END
    """,
    """
    CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events
    BEGIN SELECT RAISE(ABORT, 'audit_events is append-only'); END
    """,
)

_POSTGRESQL_TRIGGERS = (
    """
    CREATE FUNCTION users_name_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'user names are immutable: past events name them';
    END
    $$
    """,
    """
    CREATE TRIGGER users_name_immutable BEFORE UPDATE ON users
    FOR EACH ROW WHEN (OLD.name IS DISTINCT FROM NEW.name)
    EXECUTE FUNCTION users_name_immutable()
    """,
    """
    CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'audit_events is append-only';
    END
    $$
    """,
    """
    CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_append_only()
    """,
    """
    CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only()
    """,
)


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("password_hash", sa.String(length=255), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(_ROLES, name=op.f("ck_users_role")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("name", name=op.f("uq_users_name")),
    )
    op.create_table(
        "session_team_settings",
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("overlap", sa.Integer(), nullable=False),
        sa.CheckConstraint("overlap >= 1", name=op.f("ck_session_team_settings_overlap_positive")),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["labelling_sessions.id"],
            name=op.f("fk_session_team_settings_session_id_labelling_sessions"),
        ),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_session_team_settings")),
    )
    op.create_table(
        "session_assignments",
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["labelling_sessions.id"],
            name=op.f("fk_session_assignments_session_id_labelling_sessions"),
        ),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("fk_session_assignments_user_id_users")),
        sa.PrimaryKeyConstraint("session_id", "user_id", name=op.f("pk_session_assignments")),
    )
    op.create_index(op.f("ix_session_assignments_user_id"), "session_assignments", ["user_id"])
    op.create_table(
        "audit_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(length=30), nullable=False),
        sa.Column("user_name", sa.String(length=200), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=True),
        sa.Column("session_id", sa.Integer(), nullable=True),
        sa.Column("detail", sa.String(length=500), nullable=True),
        sa.CheckConstraint(_AUDIT_KINDS, name=op.f("ck_audit_events_kind")),
        sa.ForeignKeyConstraint(
            ["session_id"], ["labelling_sessions.id"], name=op.f("fk_audit_events_session_id_labelling_sessions")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_events")),
    )
    op.create_index("ix_audit_events_user_kind_created", "audit_events", ["user_name", "kind", "created_at"])
    op.create_table(
        "item_leases",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("instance_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("slot >= 0", name=op.f("ck_item_leases_slot_nonnegative")),
        sa.ForeignKeyConstraint(["instance_id"], ["instances.id"], name=op.f("fk_item_leases_instance_id_instances")),
        sa.ForeignKeyConstraint(
            ["session_id"], ["labelling_sessions.id"], name=op.f("fk_item_leases_session_id_labelling_sessions")
        ),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("fk_item_leases_user_id_users")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_item_leases")),
        sa.UniqueConstraint(
            "session_id", "instance_id", "slot", name=op.f("uq_item_leases_session_id_instance_id_slot")
        ),
        sa.UniqueConstraint("session_id", "user_id", name=op.f("uq_item_leases_session_id_user_id")),
    )
    dialect = op.get_bind().dialect.name
    for statement in {"sqlite": _SQLITE_TRIGGERS, "postgresql": _POSTGRESQL_TRIGGERS}.get(dialect, ()):
        op.execute(statement)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS audit_events_no_truncate ON audit_events")
        op.execute("DROP TRIGGER IF EXISTS audit_events_append_only ON audit_events")
        op.execute("DROP FUNCTION IF EXISTS audit_events_append_only()")
        op.execute("DROP TRIGGER IF EXISTS users_name_immutable ON users")
        op.execute("DROP FUNCTION IF EXISTS users_name_immutable()")
    elif dialect == "sqlite":
        for name in ("audit_events_no_delete", "audit_events_no_update", "users_name_immutable"):
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
    op.drop_table("item_leases")
    op.drop_index("ix_audit_events_user_kind_created", table_name="audit_events")
    op.drop_table("audit_events")
    op.drop_index(op.f("ix_session_assignments_user_id"), table_name="session_assignments")
    op.drop_table("session_assignments")
    op.drop_table("session_team_settings")
    op.drop_table("users")
