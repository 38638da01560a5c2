"""Alembic environment for the winnow store.

Uses the connection handed over in ``config.attributes["connection"]`` when the app runs the
migrations (so the SQLite pragmas of :func:`app.store.db.make_engine` apply), otherwise makes
an engine from ``-x url=...`` or ``sqlalchemy.url``. ``render_as_batch`` is on for SQLite,
whose ALTER TABLE cannot change or drop columns and constraints.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from app.store.models import Base

config = context.config
target_metadata = Base.metadata


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )


def _url() -> str:
    return context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")


def run_migrations_offline() -> None:
    """Emit SQL to stdout instead of running it (``alembic upgrade head --sql``)."""
    url = _url()
    context.configure(
        url=url,
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=url.startswith("sqlite"),
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return

    from app.store.db import make_engine

    engine = make_engine(_url())
    try:
        with engine.begin() as connection:
            _configure(connection)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
