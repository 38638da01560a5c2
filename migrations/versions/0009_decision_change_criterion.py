"""labelling_sessions.criterion accepts "decision_change" (the default strategy).

Revision ID: 0009
Revises: 0004
Create Date: 2026-11-23

The CHECK constraint ``ck_labelling_sessions_criterion`` lists the criteria a session may
rank by; ``decision_change`` (:mod:`engine.decision_change`) joins the list.

PostgreSQL drops and re-creates the constraint. SQLite cannot alter a CHECK constraint, so
the table is copied and moved, but not with Alembic's batch mode: batch mode drops the old
table and renames the copy into place, and with ``PRAGMA foreign_keys = ON`` (every winnow
connection) dropping a table that ``answer_events`` references fails as soon as the store
holds one event; deferring the foreign keys (``PRAGMA foreign_keys`` cannot be switched off
inside the migration's transaction) lets the drop through but leaves every event counted as
an orphan, so the commit fails instead. Here the rows are kept aside, the old table dropped,
the new one created under the same name from the old ``CREATE TABLE`` text (so columns added
by other migrations, foreign keys and constraint names are kept as they are) and the rows
inserted back: each inserted session settles the events that the drop had orphaned, and the
commit finds no violation. The table's indexes and triggers (it has none today) are
re-created from their saved text. The whole upgrade stays one transaction.

Downgrading refuses while a session ranks by ``decision_change``: the old constraint could
not hold it, and silently switching the session to another criterion would change its queue.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLE = "labelling_sessions"
_NAME = "ck_labelling_sessions_criterion"
# Frozen here (not read from engine.choices): a migration describes one step of the schema.
_OLD = "criterion IN ('apl', 'pl', 'participation', 'most_partial', 'random')"
_NEW = "criterion IN ('apl', 'pl', 'participation', 'most_partial', 'random', 'decision_change')"
_KEPT = "_winnow_0009_labelling_sessions"


def upgrade() -> None:
    _replace_check(_OLD, _NEW)


def downgrade() -> None:
    bind = op.get_bind()
    names = (
        bind.execute(sa.text(f"SELECT name FROM {_TABLE} WHERE criterion = 'decision_change' ORDER BY id"))
        .scalars()
        .all()
    )
    if names:
        raise RuntimeError(
            f"cannot downgrade below revision 0009: sessions {', '.join(repr(n) for n in names)} rank by"
            " criterion 'decision_change', which the older schema does not allow; change or delete them first"
        )
    _replace_check(_NEW, _OLD)


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
    # Indexes and triggers go with the dropped table; automatic (unique) indexes have no text
    # and come back with the table.
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
    # Deferred until COMMIT, so the events orphaned between DROP and the re-insert are
    # checked only once their sessions are back (reset by SQLite at the end of the transaction).
    run("PRAGMA defer_foreign_keys = ON")
    run(f"CREATE TEMPORARY TABLE {_KEPT} AS SELECT * FROM {_TABLE}")
    run(f"DROP TABLE {_TABLE}")
    run(table_sql.replace(old, new))
    run(f"INSERT INTO {_TABLE} SELECT * FROM {_KEPT}")
    run(f"DROP TABLE {_KEPT}")
    for sql in extras:
        run(sql)
