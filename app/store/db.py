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

:func:`open_store` opens only what is a winnow store (:func:`check_store`): a file or database
that holds something else is refused before any connection changes it (no table added, no
switch to WAL), and a missing or empty one is created only when the caller says so
(``create=True``: the commands that store data). A SQLite store and its ``-wal``/``-shm``
files are readable by their owner only (:data:`STORE_FILE_MODE`; SQLite gives the side files
the mode of the main file), whatever the umask: the store holds password hashes.

Typical use::

    Session = open_store("winnow.db")            # upgrades the schema, cached per process
    with Session.begin() as s:                    # a read, or a write without retries
        state = load_state(s, session_id)
    event = write_transaction(Session, lambda s: record_event(s, ...))   # a write
"""

from __future__ import annotations

import functools
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from app.store.errors import InvalidRecord, StoreBusy, StoreUnavailable
from app.store.labels import audit_secret

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
    "check_store",
    "STORE_FILE_MODE",
    "close_stores",
    "write_transaction",
    "is_locked_error",
    "BUSY_TIMEOUT_MS",
    "BUSY_TIMEOUT_VARIABLE",
    "busy_timeout_ms",
    "store_busy",
    "head_revision",
    "PG_WRITE_LOCK",
]

#: How long a connection waits for another writer's lock, by default: SQLite's
#: ``busy_timeout``, PostgreSQL's ``lock_timeout`` (milliseconds).
BUSY_TIMEOUT_MS = 30_000
#: Environment variable overriding :data:`BUSY_TIMEOUT_MS` for every store the process opens.
BUSY_TIMEOUT_VARIABLE = "WINNOW_BUSY_TIMEOUT_MS"

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
#: on SQLite, the advisory lock :data:`PG_WRITE_LOCK` on PostgreSQL.
_WRITE_OPTION = "winnow_write"

#: Key of the PostgreSQL advisory lock held by every write transaction (advisory locks are
#: per database, so stores on one server do not block each other).
PG_WRITE_LOCK = 0x77696E6E6F77  # "winnow"

#: SQLSTATEs of transient PostgreSQL errors after which a write transaction is re-run:
#: lock_not_available (the write lock timed out), serialization_failure, deadlock_detected.
_PG_RETRY_SQLSTATES = frozenset({"55P03", "40001", "40P01"})

#: Mode of a SQLite store file created by winnow, and so of its ``-wal`` and ``-shm`` files.
STORE_FILE_MODE = 0o600

#: The first 16 bytes of every SQLite 3 database file.
_SQLITE_HEADER = b"SQLite format 3\x00"

T = TypeVar("T")

_stores: dict[tuple[int, str], tuple[Engine, sessionmaker[Session]]] = {}
_stores_lock = threading.Lock()


def busy_timeout_ms() -> int:
    """How long a connection waits for another process's lock, in milliseconds.

    ``$WINNOW_BUSY_TIMEOUT_MS`` (a whole number of milliseconds, ``0`` allowed: fail at once)
    when set, else :data:`BUSY_TIMEOUT_MS`. Read when a connection is made.

    >>> busy_timeout_ms() >= 0
    True
    """
    text = os.environ.get(BUSY_TIMEOUT_VARIABLE, "").strip()
    if not text:
        return BUSY_TIMEOUT_MS
    if not text.isdigit() or not text.isascii() or len(text) > 9:
        raise StoreUnavailable(
            f"${BUSY_TIMEOUT_VARIABLE} must be a whole number of milliseconds (at most 9 digits), got {text[:40]!r}"
        )
    return int(text)


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
        raise TypeError(f"path_or_url must be a str or a path, got {type(path_or_url).__name__}")
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
            raise StoreUnavailable(
                f"{_shown(url)} is a folder; give a SQLite file inside it, e.g. {str(database / 'winnow.db')!r}"
            )


def _is_file_sqlite(url: str) -> bool:
    parsed = make_url(url)
    database = parsed.database or ""
    return parsed.get_backend_name() == "sqlite" and database not in ("", ":memory:") and "mode=memory" not in url


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
            cursor.execute(f"PRAGMA busy_timeout = {busy_timeout_ms()}")
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
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, connection_record: Any) -> None:
        # Reads wait for a table lock at most as long as writers wait for the write lock,
        # then fail with lock_not_available (turned into StoreBusy), never hang for ever.
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"SET lock_timeout = {busy_timeout_ms()}")
        finally:
            cursor.close()
        dbapi_connection.commit()  # a SET in a transaction rolled back by the pool is undone

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # The driver begins the transaction implicitly with the first statement.
        if conn.get_execution_options().get(_WRITE_OPTION):
            conn.exec_driver_sql(f"SET LOCAL lock_timeout = {busy_timeout_ms()}")
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({PG_WRITE_LOCK})")


def _install_lock_error_listener(engine: Engine) -> None:
    @event.listens_for(engine, "handle_error")
    def _on_error(context: Any) -> None:
        # A read that waited the whole lock timeout: one line naming who holds the store.
        # Write transactions decide themselves whether to retry (write_transaction).
        connection = context.connection
        if connection is not None and connection.get_execution_options().get(_WRITE_OPTION):
            return
        if _is_lock_timeout(context.sqlalchemy_exception):
            raise store_busy(engine) from context.original_exception


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
        raise StoreUnavailable(
            f"{_shown(url)}: no SQLAlchemy dialect for this URL (use sqlite:// or postgresql+psycopg://)"
        ) from None
    except ImportError as exc:  # the URL's driver is not installed (e.g. psycopg without winnow[scale])
        raise StoreUnavailable(f"{_shown(url)}: its database driver is not installed ({exc.name or exc})") from None
    if engine.dialect.name == "sqlite":
        _install_sqlite_listeners(engine, wal=_is_file_sqlite(url), synchronous=synchronous)
    elif engine.dialect.name == "postgresql":
        _install_postgresql_listeners(engine)
    _install_lock_error_listener(engine)
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


@functools.lru_cache(maxsize=1)
def _known_revisions() -> frozenset[str]:
    """The revision ids of the migrations shipped with this winnow."""
    chain = _migration_chain()
    if chain is not None:
        return frozenset(chain)
    from alembic.script import ScriptDirectory

    return frozenset(
        script.revision for script in ScriptDirectory.from_config(alembic_config("sqlite://")).walk_revisions()
    )


def head_revision() -> str:
    """The Alembic revision of the newest migration this winnow ships (its schema)."""
    return _head_revision()


@functools.lru_cache(maxsize=1)
def _head_revision() -> str:
    chain = _migration_chain()
    if chain is not None:
        heads = set(chain) - {parent for parents in chain.values() for parent in parents}
        if len(heads) == 1:
            return heads.pop()
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    if head is None:  # pragma: no cover - the package always ships migrations
        raise StoreUnavailable("this winnow ships no migrations")
    return str(head)


@functools.lru_cache(maxsize=1)
def _migration_chain() -> dict[str, tuple[str, ...]] | None:
    """Revision id -> its down revisions, read from the migration files' module-level
    ``revision`` and ``down_revision`` constants; ``None`` when a file does not state them
    as literals (then Alembic reads the scripts).

    Every command checks the store's revision: Alembic's script directory imports Alembic,
    Mako and every migration module, about 0.3 s of a command's start, for two constants per
    file. ``tests/store/test_migrations.py`` checks that both readings agree.
    """
    import ast
    import re

    import migrations

    # A line-anchored match, not a parse of each file: ast.parse of twenty files cost 70 ms.
    constant = re.compile(r"^(revision|down_revision)\s*(?::[^=\n]*)?=\s*(.+?)\s*(?:#.*)?$", re.MULTILINE)
    chain: dict[str, tuple[str, ...]] = {}
    for path in sorted((Path(migrations.__file__).resolve().parent / "versions").glob("*.py")):
        found: dict[str, object] = {}
        for name, value in constant.findall(path.read_text(encoding="utf-8")):
            if name in found:
                return None
            try:
                found[name] = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                return None
        revision, down = found.get("revision"), found.get("down_revision", ...)
        if not isinstance(revision, str) or revision in chain:
            return None
        if down is None:
            chain[revision] = ()
        elif isinstance(down, str):
            chain[revision] = (down,)
        elif isinstance(down, (tuple, list)) and all(isinstance(x, str) for x in down):
            chain[revision] = tuple(down)
        else:
            return None
    return chain or None


def _how_to_create(shown: str) -> str:
    return (
        f"no winnow store at {shown} (create one with `winnow import FILE --db {shown}` or `winnow init --db {shown}`)"
    )


def _check_revision(shown: str, revision: str | None) -> None:
    if revision not in _known_revisions():
        raise StoreUnavailable(
            f"{shown} is not a winnow store this version knows (its Alembic revision is {revision!r}); "
            "give another --db"
        )


def _check_sqlite_file(url: str, *, create: bool) -> str | None:
    """The SQLite-file half of :func:`check_store`; creates a missing file 0600 if asked.

    Returns the store's Alembic revision, ``None`` for a new (missing or empty) store.
    """
    path = Path(make_url(url).database or "")
    shown = str(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        if not create:
            raise StoreUnavailable(_how_to_create(shown)) from None
        try:
            # Made here, with its final mode, before SQLite opens it: SQLite would create it
            # 0644 less the umask, and its -wal and -shm files take the main file's mode.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, STORE_FILE_MODE)
        except FileExistsError:  # another process made it meanwhile: check that one
            return _check_sqlite_file(url, create=create)
        try:
            os.fchmod(fd, STORE_FILE_MODE)  # the creation mode is masked by the umask
        finally:
            os.close(fd)
        return None
    if size == 0:
        if not create:
            raise StoreUnavailable(_how_to_create(shown) + "; the file is empty")
        if path.stat().st_uid == os.getuid():
            os.chmod(path, STORE_FILE_MODE)
        return None
    with path.open("rb") as handle:
        header = handle.read(len(_SQLITE_HEADER))
    if header != _SQLITE_HEADER:
        raise StoreUnavailable(f"{shown} is not a winnow store (not a SQLite database); give another --db")
    # Read with the sqlite3 module and no pragma: nothing is written, the journal mode is left alone.
    try:
        connection = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=busy_timeout_ms() / 1000)
        try:
            tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            revision = None
            if "alembic_version" in tables:
                row = connection.execute("SELECT version_num FROM alembic_version").fetchone()
                revision = row[0] if row else None
        finally:
            connection.close()
    except sqlite3.Error as exc:
        if _is_locked_message(str(exc)):
            raise _busy_message(shown, _sqlite_lock_holders(path)) from None
        raise StoreUnavailable(f"{shown} cannot be read as a winnow store: {_first_line(exc)}") from None
    if "alembic_version" not in tables:
        if tables:
            raise StoreUnavailable(
                f"{shown} is not a winnow store (a SQLite database without winnow's tables); give another --db"
            )
        if not create:
            raise StoreUnavailable(_how_to_create(shown) + "; the database is empty")
        return None
    _check_revision(shown, revision)
    return revision


def _check_server_database(engine: Engine, url: str, *, create: bool) -> str | None:
    """The server half of :func:`check_store` (PostgreSQL and other URLs): read the catalogue only."""
    shown = _shown(url)
    try:
        with engine.connect() as connection:
            tables = set(inspect(connection).get_table_names())
            revision = None
            if "alembic_version" in tables:
                revision = connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
            connection.rollback()
    except DBAPIError as exc:
        raise StoreUnavailable(f"{shown} cannot be opened as a winnow store: {_first_line(exc.orig)}") from None
    if "alembic_version" in tables:
        _check_revision(shown, revision)
        return str(revision)
    if tables:
        raise StoreUnavailable(f"{shown} is not a winnow store (a database without winnow's tables); give another --db")
    if not create:
        raise StoreUnavailable(_how_to_create(shown))
    return None


def check_store(
    path_or_url: str | os.PathLike[str], *, create: bool = False, engine: Engine | None = None
) -> str | None:
    """Refuse a store that is not winnow's, before anything connects to it with winnow's settings.

    A winnow store holds Alembic's ``alembic_version`` table at a revision this winnow ships.
    Anything else holding data (a SQLite database of another program, a file that is not SQLite,
    a PostgreSQL database with other tables) is refused whatever ``create`` says, and is left
    exactly as it was: the SQLite file is read with the ``sqlite3`` module and no pragma (no
    switch to WAL), the server database only through its catalogue.

    Parameters
    ----------
    path_or_url : str or path-like
        As for :func:`database_url`.
    create : bool, default=False
        Whether a missing SQLite file, an empty one, or a database without tables may become a
        new store. A missing SQLite file is then created here, ``0600``.
    engine : Engine, optional
        An engine for a server URL (one is made and disposed of otherwise).

    Returns
    -------
    str or None
        The store's Alembic revision; ``None`` for a new store (or an in-memory database).

    Raises
    ------
    StoreUnavailable
        One line naming the file or URL (password hidden): not a winnow store, or no store
        there and ``create`` is false.
    """
    url = database_url(path_or_url)
    if make_url(url).get_backend_name() == "sqlite":
        if _is_file_sqlite(url):
            _check_sqlite_folder(url)
            return _check_sqlite_file(sqlite_synchronous(url)[0], create=create)
        return None  # an in-memory database is always new
    own_engine = engine is None
    engine = engine if engine is not None else make_engine(url)
    try:
        return _check_server_database(engine, url, create=create)
    finally:
        if own_engine:
            engine.dispose()


def open_store(path_or_url: str | os.PathLike[str], *, create: bool = True) -> sessionmaker[Session]:
    """Check that the store is winnow's, upgrade its schema and return a sessionmaker bound to it.

    One engine per process and URL: later calls with the same store return the cached
    sessionmaker without touching the schema again (a forked child gets its own). Sessions
    are made with ``expire_on_commit=False`` so objects returned by a committed unit of work
    stay readable.

    Parameters
    ----------
    path_or_url : str or path-like
        As for :func:`database_url`.
    create : bool, default=True
        Whether a missing or empty store may be created (see :func:`check_store`). The command
        line passes ``False`` for every command that only reads or changes an existing store,
        so a mistyped ``--db`` is an error rather than a new empty store. A database holding
        something other than a winnow store is refused either way.

    Raises
    ------
    StoreUnavailable
        Not a winnow store, no store and ``create`` false, or the database cannot be opened.
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
            # Only a store behind this winnow's schema takes the write lock to migrate: a
            # current one is opened with reads alone, so a long writer elsewhere does not
            # stop other commands from opening it.
            if check_store(url, create=create, engine=engine) != head_revision():
                upgrade_database(url, engine=engine)
                # The audit key is made with the store (or at its upgrade), never by a reader,
                # under the write lock like any write: processes opening a new store together
                # would otherwise race from a stale read to the insert.
                write_transaction(sessionmaker(bind=engine), audit_secret)
        except DBAPIError as exc:
            if is_locked_error(exc):
                busy = store_busy(engine)
                engine.dispose()
                raise busy from None
            engine.dispose()
            raise StoreUnavailable(
                f"{_shown(url)} cannot be opened as a winnow store: {_first_line(exc.orig)}"
            ) from None
        except BaseException:
            engine.dispose()
            raise
        factory = sessionmaker(bind=engine, expire_on_commit=False)
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
    serialization failure and deadlock (SQLSTATE 55P03, 40001, 40P01); a :class:`StoreBusy`.
    """
    if isinstance(exc, StoreBusy):
        return True
    if not isinstance(exc, OperationalError):
        return False
    sqlstate = getattr(exc.orig, "sqlstate", None) or getattr(exc.orig, "pgcode", None)
    if sqlstate in _PG_RETRY_SQLSTATES:
        return True
    return _is_locked_message(str(exc.orig if exc.orig is not None else exc))


def _is_locked_message(message: str) -> bool:
    lowered = message.lower()
    return "database is locked" in lowered or "database is busy" in lowered


def _is_lock_timeout(exc: BaseException) -> bool:
    """A lock waited for the whole busy timeout (not a deadlock or serialization failure)."""
    if not isinstance(exc, OperationalError):
        return False
    sqlstate = getattr(exc.orig, "sqlstate", None) or getattr(exc.orig, "pgcode", None)
    return sqlstate == "55P03" or _is_locked_message(str(exc.orig if exc.orig is not None else exc))


#: Offsets of the byte SQLite locks for writing: in WAL mode the ``-shm`` file's write-lock
#: byte (WAL_WRITE_LOCK, 120), in rollback mode the database file's RESERVED byte.
_SQLITE_WAL_WRITE_BYTE = 120
_SQLITE_RESERVED_BYTE = 0x40000001


def _process_name(pid: int) -> str:
    """``pid 123 (winnow answer s --from big.csv)``: the command line, shortened."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return f"pid {pid}"
    words = [Path(word).name if i == 0 else word for i, word in enumerate(raw.decode(errors="replace").split("\0"))]
    command = " ".join(word for word in words if word)
    command = command if len(command) <= 80 else command[:77] + "..."
    return f"pid {pid} ({command})" if command else f"pid {pid}"


def _sqlite_lock_holders(database: Path) -> list[str]:
    """The processes holding a SQLite file's write lock (from ``/proc/locks``), if Linux says.

    SQLite locks bytes with POSIX ``fcntl`` locks, which the kernel lists with the owner's
    pid: the write-lock byte of the ``-shm`` file in WAL mode, the RESERVED byte of the
    database file otherwise.
    """
    wanted: dict[tuple[int, int, int], int] = {}
    for path, offset in ((Path(f"{database}-shm"), _SQLITE_WAL_WRITE_BYTE), (database, _SQLITE_RESERVED_BYTE)):
        try:
            info = path.stat()
        except OSError:
            continue
        wanted[(os.major(info.st_dev), os.minor(info.st_dev), info.st_ino)] = offset
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return []
    pids: list[int] = []
    for line in lines:
        fields = line.split()
        # "1: POSIX  ADVISORY  WRITE 3568 fd:00:2531452 120 120" (a blocked waiter has "->")
        if len(fields) < 8 or fields[1] == "->" or fields[1] != "POSIX" or fields[3] != "WRITE":
            continue
        try:
            major, minor, inode = fields[5].split(":")
            key = (int(major, 16), int(minor, 16), int(inode))
            pid, start = int(fields[4]), int(fields[6])
            end = int(fields[7]) if fields[7] != "EOF" else 1 << 62
        except ValueError:
            continue
        offset_wanted = wanted.get(key)
        if offset_wanted is not None and start <= offset_wanted <= end and pid != os.getpid() and pid not in pids:
            pids.append(pid)
    return [_process_name(pid) for pid in pids[:3]]


def _postgresql_lock_holders(engine: Engine) -> list[str]:
    """Who holds winnow's advisory write lock, else the oldest open transactions on the database."""
    high, low = PG_WRITE_LOCK >> 32, PG_WRITE_LOCK & 0xFFFFFFFF
    columns = (
        "a.pid, coalesce(a.application_name, ''), coalesce(host(a.client_addr), 'local'), "
        "coalesce(extract(epoch from now() - a.xact_start), 0)::int, coalesce(left(a.query, 60), '')"
    )
    advisory = (
        f"SELECT {columns} FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted AND l.database = "
        "(SELECT oid FROM pg_database WHERE datname = current_database()) "
        f"AND l.classid = {high} AND l.objid = {low} AND l.objsubid = 1"
    )
    oldest = (
        f"SELECT {columns} FROM pg_stat_activity a WHERE a.datname = current_database() "
        "AND a.pid <> pg_backend_pid() AND a.xact_start IS NOT NULL ORDER BY a.xact_start LIMIT 3"
    )
    with engine.connect() as connection:
        rows = connection.exec_driver_sql(advisory).all() or connection.exec_driver_sql(oldest).all()
        connection.rollback()
    return [
        f"server pid {pid} ({application or 'no application name'} from {client}, "
        f"in a transaction for {seconds} s: {' '.join(str(query).split())!r})"
        for pid, application, client, seconds, query in rows
    ]


def _busy_message(shown: str, holders: list[str]) -> StoreBusy:
    waited = busy_timeout_ms() / 1000
    who = "; ".join(holders) if holders else "another process (it could not be told which)"
    return StoreBusy(
        f"{shown} is busy: {who} has held its write lock for longer than the {waited:g} s this command "
        f"waits; run the command again when it has finished (wait longer with ${BUSY_TIMEOUT_VARIABLE})"
    )


def store_busy(engine: Engine) -> StoreBusy:
    """The one-line error for a store whose lock could not be had: who holds it, if known.

    Parameters
    ----------
    engine : Engine
        The store's engine (for its URL and, on PostgreSQL, to ask the server who holds it).
    """
    url = engine.url.render_as_string(hide_password=False)
    holders: list[str] = []
    try:
        if engine.dialect.name == "sqlite" and _is_file_sqlite(url):
            holders = _sqlite_lock_holders(Path(engine.url.database or ""))
        elif engine.dialect.name == "postgresql":
            holders = _postgresql_lock_holders(engine)
    except (OSError, DBAPIError):  # naming the holder is a courtesy; the error stands without it
        holders = []
    shown = str(Path(engine.url.database or "")) if _is_file_sqlite(url) else _shown(url)
    return _busy_message(shown, holders)


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
    rolls back and propagates. ``work`` must therefore be safe to re-run. A lock that was
    waited for the whole busy timeout (:func:`busy_timeout_ms`) is not waited for again: the
    store is held by a long writer, and :class:`StoreBusy` says which.

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

    Raises
    ------
    StoreBusy
        Another process held the write lock for the whole busy timeout, or the lock could not
        be had in ``attempts`` tries.
    """
    if attempts < 1:
        raise InvalidRecord(f"attempts must be >= 1, got {attempts!r}")
    for attempt in range(1, attempts + 1):
        started = time.monotonic()
        try:
            with session_factory() as session:
                session.connection(execution_options={_WRITE_OPTION: True})
                result = work(session)
                session.commit()
                return result
        except OperationalError as exc:
            if not is_locked_error(exc):
                raise
            waited_out = _is_lock_timeout(exc) and time.monotonic() - started >= 0.9 * busy_timeout_ms() / 1000
            if waited_out or attempt == attempts:
                engine = session_factory.kw.get("bind")
                if isinstance(engine, Engine):
                    raise store_busy(engine) from None
                raise
            time.sleep(min(2.0, 0.05 * 2**attempt) * random.uniform(0.5, 1.0))
    raise AssertionError("unreachable")  # pragma: no cover
