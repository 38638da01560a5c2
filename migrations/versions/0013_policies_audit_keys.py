"""Answer-key changes are audited, and the store keeps a key for unknown sign-in names.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25

* ``audit_events.kind`` accepts ``hotkeys_changed``: who changed a session's answer keys, and
  from what to what (issue 23: only admins set them, and every change is audited).
* ``store_secrets``: random keys the store keeps for itself, by name. The first is the key of
  the hash under which a failed sign-in with a name that is no account is recorded and
  counted (:func:`app.store.users.unknown_name_tag`), made on first use.

The CHECK constraint is replaced as in 0009: PostgreSQL drops and re-creates it; SQLite
cannot alter one, so the rows are kept aside, the table dropped and created again from its
own ``CREATE TABLE`` text with the new list, the rows put back, and the table's indexes and
triggers (the append-only ones) re-created from their saved text, in one transaction.
Downgrading refuses while an audit row is a ``hotkeys_changed`` one: the audit log is
append-only, so it can be neither deleted nor rewritten.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLE = "audit_events"
_NAME = "ck_audit_events_kind"
# Frozen here (not read from app.store.models): a migration describes one step of the schema.
_OLD = (
    "kind IN ('sign_in', 'sign_in_failed', 'user_added', 'role_changed', 'user_disabled', "
    "'user_enabled', 'password_changed', 'assigned', 'overlap_changed')"
)
_NEW = (
    "kind IN ('sign_in', 'sign_in_failed', 'user_added', 'role_changed', 'user_disabled', "
    "'user_enabled', 'password_changed', 'assigned', 'overlap_changed', 'hotkeys_changed')"
)
_KEPT = "_winnow_0012_audit_events"


def upgrade() -> None:
    op.create_table(
        "store_secrets",
        sa.Column("name", sa.String(length=50), nullable=False),
        sa.Column("value", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_store_secrets")),
    )
    _replace_check(_OLD, _NEW)


def downgrade() -> None:
    bind = op.get_bind()
    count = bind.execute(sa.text(f"SELECT count(*) FROM {_TABLE} WHERE kind = 'hotkeys_changed'")).scalar_one()
    if count:
        raise RuntimeError(
            f"cannot downgrade below revision 0012: the audit log holds {count} change(s) of answer keys "
            "(kind 'hotkeys_changed'), which the older schema does not allow, and audit rows cannot be deleted"
        )
    _replace_check(_NEW, _OLD)
    op.drop_table("store_secrets")


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
