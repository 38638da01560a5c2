"""Engines, migrations and sessions for a winnow store.

A store is any SQLAlchemy URL; a bare file path means a SQLite file. SQLite connections get
WAL journaling, ``synchronous`` (``NORMAL`` unless ``?synchronous=full`` in the URL or
``$WINNOW_SQLITE_SYNCHRONOUS`` says otherwise, see :data:`DEFAULT_SQLITE_SYNCHRONOUS`),
``foreign_keys=ON`` and a ``busy_timeout`` from a connect listener, and
SQLAlchemy (not the ``sqlite3`` module) emits ``BEGIN`` so that every session is one real
transaction; :func:`write_transaction` begins with ``BEGIN IMMEDIATE`` so that concurrent
writers queue on the busy timeout instead of failing half-way. On PostgreSQL a write
transaction starts by taking a transaction-scoped advisory lock (``pg_advisory_xact_lock``)
with a ``lock_timeout``, so writers queue the same way: at the default READ COMMITTED level two
writers could otherwise both read "the latest event not yet undone" and both try to undo it.

The schema is created and upgraded only by Alembic (:func:`upgrade_database`), which runs the
migrations shipped in the ``migrations`` package, from any working directory.

Typical use::

    Session = open_store("winnow.db")            # upgrades the schema, cached per process
    with Session.begin() as s:                    # a read, or a write without retries
        state = load_state(s, session_id)
    event = write_transaction(Session, lambda s: record_event(s, ...))   # a write
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from app.store.errors import InvalidRecord, StoreUnavailable

__all__ = [
    "DEFAULT_SQLITE_SYNCHRONOUS",
    "SQLITE_SYNCHRONOUS_LEVELS",
    "SQLITE_SYNCHRONOUS_VARIABLE",
    "sqlite_synchronous",
    "database_url",
    "make_engine",
    "upgrade_database",
    "downgrade_database",
    "alembic_config",
    "open_store",
    "close_stores",
    "write_transaction",
    "is_locked_error",
    "BUSY_TIMEOUT_MS",
]

#: How long a SQLite connection waits for another writer before "database is locked".
BUSY_TIMEOUT_MS = 30_000

#: ``PRAGMA synchronous`` of a SQLite file store (always in WAL mode), by default. ``NORMAL``:
#: a committed answer survives winnow or the app being killed, but a crash of the operating
#: system or a power cut may lose the last commits (the database stays consistent). ``FULL``
#: syncs the WAL at every commit, so an acknowledged answer survives those too, at the cost of
#: an fsync per answer.
DEFAULT_SQLITE_SYNCHRONOUS = "NORMAL"
#: Levels accepted in ``?synchronous=`` and ``$WINNOW_SQLITE_SYNCHRONOUS``.
SQLITE_SYNCHRONOUS_LEVELS: tuple[str, ...] = ("OFF", "NORMAL", "FULL", "EXTRA")
#: Environment variable choosing the level of every SQLite store the process opens.
SQLITE_SYNCHRONOUS_VARIABLE = "WINNOW_SQLITE_SYNCHRONOUS"

#: Execution option that makes the ``begin`` listener take the write lock: ``BEGIN IMMEDIATE``
#: on SQLite, the advisory lock :data:`_PG_WRITE_LOCK` on PostgreSQL.
_WRITE_OPTION = "winnow_write"

#: Key of the PostgreSQL advisory lock held by every write transaction (advisory locks are
#: per database, so stores on one server do not block each other).
_PG_WRITE_LOCK = 0x77696E6E6F77  # "winnow"

#: SQLSTATEs of transient PostgreSQL errors after which a write transaction is re-run:
#: lock_not_available (the write lock timed out), serialization_failure, deadlock_detected.
_PG_RETRY_SQLSTATES = frozenset({"55P03", "40001", "40P01"})

T = TypeVar("T")

_stores: dict[tuple[int, str], tuple[Engine, sessionmaker[Session]]] = {}
_stores_lock = threading.Lock()


def database_url(path_or_url: str | os.PathLike[str]) -> str:
    """Return the SQLAlchemy URL for a store given as a URL or a file path.

    Parameters
    ----------
    path_or_url : str or path-like
        ``"sqlite:///..."``, ``"postgresql+psycopg://..."`` or any SQLAlchemy URL is returned
        unchanged; anything else is a file path and becomes ``sqlite:///<absolute path>``
        (relative to the current directory, ``~`` expanded).

    Returns
    -------
    str

    Raises
    ------
    StoreUnavailable
        The text is empty or not a valid SQLAlchemy URL.
    """
    if isinstance(path_or_url, os.PathLike):
        path_or_url = os.fspath(path_or_url)
    if not isinstance(path_or_url, str):
        raise TypeError(
            f"path_or_url must be a str or a path, got {type(path_or_url).__name__}"
        )
    text = path_or_url.strip()
    if not text:
        raise StoreUnavailable("path_or_url is empty: give a SQLite file path or a SQLAlchemy URL")
    if "://" in text:
        try:
            make_url(text)
        except (ArgumentError, ValueError):  # a bad port is a ValueError
            raise StoreUnavailable(f"path_or_url {path_or_url!r} is not a valid SQLAlchemy URL") from None
        return text
    return "sqlite:///" + str(Path(text).expanduser().resolve())


def _shown(url: str) -> str:
    """The store's URL for messages: the password hidden."""
    return make_url(url).render_as_string(hide_password=True)


def _first_line(error: BaseException | None) -> str:
    text = str(error).strip() if error is not None else ""
    return text.splitlines()[0] if text else type(error).__name__


def _check_sqlite_folder(url: str) -> None:
    """A SQLite file store needs its folder: say so instead of "unable to open database file"."""
    if _is_file_sqlite(url):
        database = Path(make_url(url).database or "")
        if not database.parent.is_dir():
            raise StoreUnavailable(f"{_shown(url)}: folder {str(database.parent)!r} does not exist")
        if database.is_dir():
            raise StoreUnavailable(f"{_shown(url)} is a folder; give a SQLite file inside it, e.g. {str(database / 'winnow.db')!r}")


def _is_file_sqlite(url: str) -> bool:
    parsed = make_url(url)
    database = parsed.database or ""
    return (
        parsed.get_backend_name() == "sqlite"
        and database not in ("", ":memory:")
        and "mode=memory" not in url
    )


def sqlite_synchronous(url: str) -> tuple[str, str]:
    """The URL without winnow's ``synchronous`` option, and the ``PRAGMA synchronous`` level.

    The level comes from the URL's query (``sqlite:///winnow.db?synchronous=full``), else from
    ``$WINNOW_SQLITE_SYNCHRONOUS``, else :data:`DEFAULT_SQLITE_SYNCHRONOUS`.

    >>> sqlite_synchronous("sqlite:////data/w.db?synchronous=FULL")
    ('sqlite:////data/w.db', 'FULL')
    """
    parsed = make_url(url)
    given = parsed.query.get("synchronous")
    if isinstance(given, tuple):
        given = given[-1]
    level = (given if given is not None else os.environ.get(SQLITE_SYNCHRONOUS_VARIABLE, "")).strip().upper()
    if not level:
        level = DEFAULT_SQLITE_SYNCHRONOUS
    if level not in SQLITE_SYNCHRONOUS_LEVELS:
        source = "the URL's synchronous option" if given is not None else f"${SQLITE_SYNCHRONOUS_VARIABLE}"
        raise StoreUnavailable(
            f"{source} must be one of {', '.join(SQLITE_SYNCHRONOUS_LEVELS)} (any case); got {level.lower()!r}"
        )
    if given is not None:
        url = parsed.difference_update_query(["synchronous"]).render_as_string(hide_password=False)
    return url, level


def _install_sqlite_listeners(engine: Engine, *, wal: bool, synchronous: str = "NORMAL") -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, connection_record: Any) -> None:
        # SQLAlchemy emits BEGIN itself (below), so sqlite3 must not: otherwise SELECTs run
        # outside any transaction and a read-then-write is not atomic.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            if wal:
                cursor.execute("PRAGMA journal_mode = WAL")
                cursor.execute(f"PRAGMA synchronous = {synchronous}")
            cursor.execute("PRAGMA foreign_keys = ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        if conn.get_execution_options().get(_WRITE_OPTION):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.exec_driver_sql("BEGIN")


def _install_postgresql_listeners(engine: Engine) -> None:
    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # The driver begins the transaction implicitly with the first statement.
        if conn.get_execution_options().get(_WRITE_OPTION):
            conn.exec_driver_sql(f"SET LOCAL lock_timeout = {BUSY_TIMEOUT_MS}")
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_WRITE_LOCK})")


def make_engine(path_or_url: str | os.PathLike[str], **kwargs: Any) -> Engine:
    """Create a new engine for a store (not cached; prefer :func:`open_store` in the app).

    SQLite engines get WAL, ``foreign_keys=ON`` and ``busy_timeout`` on every connection;
    on SQLite and PostgreSQL, write transactions (:func:`write_transaction`, migrations) take
    the store's write lock when they begin. Extra keyword arguments go to
    :func:`sqlalchemy.create_engine`.
    """
    url = database_url(path_or_url)
    synchronous = DEFAULT_SQLITE_SYNCHRONOUS
    if make_url(url).get_backend_name() == "sqlite":
        url, synchronous = sqlite_synchronous(url)
    try:
        engine = create_engine(url, **kwargs)
    except NoSuchModuleError:
        raise StoreUnavailable(f"{_shown(url)}: no SQLAlchemy dialect for this URL (use sqlite:// or postgresql+psycopg://)") from None
    except ImportError as exc:  # the URL's driver is not installed (e.g. psycopg without winnow[scale])
        raise StoreUnavailable(f"{_shown(url)}: its database driver is not installed ({exc.name or exc})") from None
    if engine.dialect.name == "sqlite":
        _install_sqlite_listeners(engine, wal=_is_file_sqlite(url), synchronous=synchronous)
    elif engine.dialect.name == "postgresql":
        _install_postgresql_listeners(engine)
    return engine


def alembic_config(path_or_url: str | os.PathLike[str]) -> Any:
    """An :class:`alembic.config.Config` for the store, pointing at the installed migrations."""
    from alembic.config import Config

    import migrations

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(migrations.__file__).resolve().parent))
    # ConfigParser interpolation: a literal % must be doubled.
    cfg.set_main_option("sqlalchemy.url", database_url(path_or_url).replace("%", "%%"))
    return cfg


def _run_alembic(path_or_url: str | os.PathLike[str], engine: Engine | None, action: Callable[[Any], None]) -> None:
    cfg = alembic_config(path_or_url)
    own_engine = engine is None
    engine = engine if engine is not None else make_engine(path_or_url)
    try:
        # The write lock (BEGIN IMMEDIATE on SQLite, the advisory lock on PostgreSQL):
        # processes opening a new store at the same time migrate one after the other instead
        # of racing to create the same tables.
        with engine.connect() as connection:
            connection = connection.execution_options(**{_WRITE_OPTION: True})
            with connection.begin():
                cfg.attributes["connection"] = connection
                action(cfg)
    finally:
        if own_engine:
            engine.dispose()


def upgrade_database(
    path_or_url: str | os.PathLike[str], revision: str = "head", *, engine: Engine | None = None
) -> None:
    """Create or upgrade the store's schema with Alembic (``alembic upgrade head``).

    Runs in one transaction (DDL is transactional on SQLite here and on PostgreSQL), so a
    failed upgrade leaves the database as it was. Safe to call on an up-to-date database.
    """
    from alembic import command

    _run_alembic(path_or_url, engine, lambda cfg: command.upgrade(cfg, revision))


def downgrade_database(
    path_or_url: str | os.PathLike[str], revision: str = "base", *, engine: Engine | None = None
) -> None:
    """Downgrade the store's schema (``alembic downgrade base`` drops every table)."""
    from alembic import command

    _run_alembic(path_or_url, engine, lambda cfg: command.downgrade(cfg, revision))


def open_store(path_or_url: str | os.PathLike[str]) -> sessionmaker[Session]:
    """Upgrade the store's schema and return a sessionmaker bound to its engine.

    Also removes the datasets of imports whose process died before publishing them
    (:func:`app.store.staging.remove_abandoned_imports`).

    One engine per process and URL: later calls with the same store return the cached
    sessionmaker without touching the schema again (a forked child gets its own). Sessions
    are made with ``expire_on_commit=False`` so objects returned by a committed unit of work
    stay readable.
    """
    url = database_url(path_or_url)
    key = (os.getpid(), url)
    with _stores_lock:
        cached = _stores.get(key)
        if cached is not None:
            return cached[1]
        _check_sqlite_folder(url)
        engine = make_engine(url)
        try:
            upgrade_database(url, engine=engine)
        except DBAPIError as exc:
            engine.dispose()
            if is_locked_error(exc):
                raise
            raise StoreUnavailable(f"{_shown(url)} cannot be opened as a winnow store: {_first_line(exc.orig)}") from None
        except BaseException:
            engine.dispose()
            raise
        factory = sessionmaker(bind=engine, expire_on_commit=False)
        # Imports whose process died half-way (their datasets were never published, so nothing
        # showed them) are removed now, before this process can trip over their names.
        from app.store.staging import remove_abandoned_imports

        try:
            remove_abandoned_imports(factory)
        except BaseException:
            engine.dispose()
            raise
        _stores[key] = (engine, factory)
        return factory


def close_stores() -> None:
    """Dispose of every engine :func:`open_store` cached in this process."""
    with _stores_lock:
        for (pid, _url), (engine, _factory) in list(_stores.items()):
            if pid == os.getpid():
                engine.dispose()
        _stores.clear()


def is_locked_error(exc: BaseException) -> bool:
    """True for a transient lock error after which a write transaction may be re-run.

    SQLite's "database is locked" / "database is busy"; PostgreSQL's lock timeout,
    serialization failure and deadlock (SQLSTATE 55P03, 40001, 40P01).
    """
    if not isinstance(exc, OperationalError):
        return False
    sqlstate = getattr(exc.orig, "sqlstate", None) or getattr(exc.orig, "pgcode", None)
    if sqlstate in _PG_RETRY_SQLSTATES:
        return True
    message = str(exc.orig if exc.orig is not None else exc).lower()
    return "database is locked" in message or "database is busy" in message


def write_transaction(
    session_factory: sessionmaker[Session],
    work: Callable[[Session], T],
    *,
    attempts: int = 8,
) -> T:
    """Run ``work(session)`` as one write transaction, retrying while the store is locked.

    The transaction takes the store's write lock before reading (``BEGIN IMMEDIATE`` on
    SQLite, a transaction-scoped advisory lock on PostgreSQL), waits up to
    :data:`BUSY_TIMEOUT_MS` for other writers, and so never acts on what another writer is
    about to change. If the lock still cannot be had, the whole unit of work is rolled back
    and run again (``attempts`` times in all, with jittered back-off). Any other exception
    rolls back and propagates. ``work`` must therefore be safe to re-run.

    Parameters
    ----------
    session_factory : sessionmaker
        From :func:`open_store`.
    work : callable
        Receives the ORM session; its return value is returned after the commit.
    attempts : int, default=8

    Returns
    -------
    Whatever ``work`` returned.
    """
    if attempts < 1:
        raise InvalidRecord(f"attempts must be >= 1, got {attempts!r}")
    for attempt in range(1, attempts + 1):
        try:
            with session_factory() as session:
                session.connection(execution_options={_WRITE_OPTION: True})
                result = work(session)
                session.commit()
                return result
        except OperationalError as exc:
            if not is_locked_error(exc) or attempt == attempts:
                raise
            time.sleep(min(2.0, 0.05 * 2**attempt) * random.uniform(0.5, 1.0))
    raise AssertionError("unreachable")  # pragma: no cover
