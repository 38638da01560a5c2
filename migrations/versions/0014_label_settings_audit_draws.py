"""Label settings and audit draws of a session (issue 20); label-settings changes are audited.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-25

* ``session_label_settings``: per session, the largest error accepted in model labels, the
  confidence with which it must hold and the share of served items that are audits (no row:
  the defaults, 5 % at 90 % with 5 % audits).
* ``audit_draws``: the item drawn at random for each audit slot of a session's queue, once
  (a slot holds one item, an item is drawn once per session).
* ``audit_events.kind`` accepts ``label_settings_changed``.

The CHECK constraint is replaced as in 0009 and 0013: PostgreSQL drops and re-creates it; SQLite
cannot alter one, so the rows are kept aside, the table dropped and created again from its
own ``CREATE TABLE`` text with the new list, the rows put back, and the table's indexes and
triggers (the append-only ones) re-created from their saved text, in one transaction.
Downgrading refuses while an audit row is a ``label_settings_changed`` one: the audit log is
append-only.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLE = "audit_events"
_NAME = "ck_audit_events_kind"
# Frozen here (not read from app.store.models): a migration describes one step of the schema.
_OLD = (
    "kind IN ('sign_in', 'sign_in_failed', 'user_added', 'role_changed', 'user_disabled', "
    "'user_enabled', 'password_changed', 'assigned', 'overlap_changed', 'hotkeys_changed')"
)
_NEW = (
    "kind IN ('sign_in', 'sign_in_failed', 'user_added', 'role_changed', 'user_disabled', "
    "'user_enabled', 'password_changed', 'assigned', 'overlap_changed', 'hotkeys_changed', "
    "'label_settings_changed')"
)
_KEPT = "_winnow_0014_audit_events"


def upgrade() -> None:
    op.create_table(
        "session_label_settings",
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("max_error", sa.Float(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("audit_share", sa.Float(), nullable=False),
        sa.CheckConstraint("max_error > 0 AND max_error < 0.5", name=op.f("ck_session_label_settings_max_error_range")),
        sa.CheckConstraint(
            "confidence >= 0.5 AND confidence < 1", name=op.f("ck_session_label_settings_confidence_range")
        ),
        sa.CheckConstraint(
            "audit_share >= 0 AND audit_share <= 0.5", name=op.f("ck_session_label_settings_audit_share_range")
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["labelling_sessions.id"],
            name=op.f("fk_session_label_settings_session_id_labelling_sessions"),
        ),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_session_label_settings")),
    )
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
    _replace_check(_OLD, _NEW)


def downgrade() -> None:
    bind = op.get_bind()
    count = bind.execute(sa.text(f"SELECT count(*) FROM {_TABLE} WHERE kind = 'label_settings_changed'")).scalar_one()
    if count:
        raise RuntimeError(
            f"cannot downgrade below revision 0014: the audit log holds {count} change(s) of label settings "
            "(kind 'label_settings_changed'), which the older schema does not allow, and audit rows cannot be deleted"
        )
    _replace_check(_NEW, _OLD)
    op.drop_table("audit_draws")
    op.drop_table("session_label_settings")


def _replace_check(old: str, new: str) -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        op.drop_constraint(op.f(_NAME), _TABLE, type_="check")
        op.create_check_constraint(op.f(_NAME), _TABLE, new)
        return
    table_sql = bind.execute(
        sa.text("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = :t"), {"t": _TABLE}
    ).scalar_one()
    if table_sql.count(old) != 1:
        raise RuntimeError(f"{_TABLE} does not have the expected CHECK constraint {old!r}: {table_sql}")
    # Indexes and triggers go with the dropped table (the append-only triggers among them).
    extras = (
        bind.execute(
            sa.text(
                "SELECT sql FROM sqlite_master WHERE tbl_name = :t AND type IN ('index', 'trigger') AND sql IS NOT NULL"
            ),
            {"t": _TABLE},
        )
        .scalars()
        .all()
    )
    # Raw SQL (exec_driver_sql): saved statement text is not parsed for ":name" parameters.
    run = bind.exec_driver_sql
    run(f"CREATE TEMPORARY TABLE {_KEPT} AS SELECT * FROM {_TABLE}")
    # DROP TABLE empties the table without firing its DELETE trigger (SQLite documents it).
    run(f"DROP TABLE {_TABLE}")
    run(table_sql.replace(old, new))
    run(f"INSERT INTO {_TABLE} SELECT * FROM {_KEPT}")
    run(f"DROP TABLE {_KEPT}")
    for sql in extras:
        run(sql)
