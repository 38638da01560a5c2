"""Fixtures for the store tests: a migrated store per test, on SQLite and on PostgreSQL.

``store_url`` is parametrised over the two backends, so every test that uses it (directly or
through ``store`` / ``small``) runs twice:

* ``sqlite``: a fresh file in the test's ``tmp_path`` (the default backend of winnow);
* ``postgresql``: an empty database on one throw-away PostgreSQL server that
  :func:`postgres_server` starts for the whole test session, on 127.0.0.1 only, from a
  cluster in a temporary directory, and stops at the end. Databases are made with
  ``CREATE DATABASE`` and, after a test, emptied (its connections ended, the ``public``
  schema dropped and made again) and handed to a later test: copying a database costs up to
  a second on a busy disk, emptying one a few milliseconds.

The server needs Debian's ``postgresql`` package (``make postgres`` installs it;
``initdb``/``pg_ctl`` are found on ``PATH``, in ``$WINNOW_PG_BINDIR`` or in
``/usr/lib/postgresql/<version>/bin``) and the ``psycopg`` driver. Without them the
``postgresql`` tests are skipped with the reason, or fail when ``CI=true``. Deselect them with
``-m "not postgresql"``.
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.store import (
    Annotator,
    AnswerEvent,
    Dataset,
    Instance,
    LabellingSession,
    close_stores,
    create_dataset,
    create_labelling_session,
    database_url,
    open_store,
    write_transaction,
)
from tests.tools import tool_missing

LABELS = ["cat", "dog", "bird", "fish"]
# position: candidate set
CANDIDATES = np.array(
    [
        [1, 1, 0, 0],  # 0: {cat, dog}
        [0, 1, 1, 0],  # 1: {dog, bird}
        [1, 0, 0, 0],  # 2: {cat}
        [1, 1, 1, 0],  # 3: {cat, dog, bird}
        [0, 0, 1, 1],  # 4: {bird, fish}
    ],
    dtype=bool,
)
TRUE_LABELS = np.array([0, 2, 0, -1, 3])

#: Superuser of the test cluster (trust authentication on loopback; nothing else can connect).
PG_USER = "postgres"


# --------------------------------------------------------------------------------------------
# The PostgreSQL server


def find_postgres_bindir() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``.

    ``$WINNOW_PG_BINDIR`` when set (and then only it); else the one of ``initdb`` on ``PATH``;
    else Debian's ``/usr/lib/postgresql/<version>/bin``, newest version first.
    """
    candidates: list[Path] = []
    if os.environ.get("WINNOW_PG_BINDIR"):
        candidates.append(Path(os.environ["WINNOW_PG_BINDIR"]))
    else:
        candidates += _default_bindirs()
    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "pg_ctl").is_file():
            return bindir
    return None


def _default_bindirs() -> list[Path]:
    candidates: list[Path] = []
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)

    def version(path: Path) -> tuple[int, ...]:
        parts = path.parent.name.split(".")
        return tuple(int(p) for p in parts if p.isdigit())

    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=version, reverse=True)
    return candidates


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PostgresServer:
    """A PostgreSQL cluster in a temporary directory, served on 127.0.0.1:``port``."""

    bindir: Path
    root: Path
    port: int = 0
    run_as: list[str] = field(default_factory=list)
    _names: Iterator[int] = field(default_factory=itertools.count)
    _empty: list[str] = field(default_factory=list)
    _connection: Any = None

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://{PG_USER}@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str) -> None:
        completed = subprocess.run(
            [*self.run_as, *args],
            cwd=self.root,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if completed.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(
                f"{' '.join(args)} failed ({completed.returncode}):\n{completed.stdout}{completed.stderr}\n{log}"
            )

    def start(self) -> None:
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            PG_USER,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
            "--no-instructions",
        )
        # Throw-away data: no fsync. Loopback TCP only; the socket stays in our directory.
        options = (
            f"-c listen_addresses=127.0.0.1 -c unix_socket_directories={self.root}"
            " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
            " -c max_connections=50 -c shared_buffers=32MB"
        )
        for attempt in range(3):  # the free port may be taken between probe and start
            self.port = _free_port()
            try:
                self._run(
                    str(self.bindir / "pg_ctl"),
                    "-D",
                    str(self.data),
                    "-l",
                    str(self.log),
                    "-w",
                    "-t",
                    "60",
                    "-o",
                    f"-p {self.port} {options}",
                    "start",
                )
                return
            except RuntimeError:
                if attempt == 2:
                    raise

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def _connect(self, database: str) -> Any:
        import psycopg

        return psycopg.connect(host="127.0.0.1", port=self.port, user=PG_USER, dbname=database, autocommit=True)

    def _admin(self) -> Any:
        if self._connection is None or self._connection.closed:
            self._connection = self._connect("postgres")
        return self._connection

    def acquire_database(self) -> str:
        """The name of an empty database (no tables, functions or triggers) for one test."""
        if self._empty:
            return self._empty.pop()
        name = f"winnow_test_{next(self._names)}"
        self._admin().execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        return name

    def release_database(self, name: str) -> None:
        """Empty a database a test is done with, for the next test (or drop it)."""
        admin = self._admin()
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )
        try:
            with self._connect(name) as conn:
                conn.execute("DROP SCHEMA public CASCADE")
                conn.execute("CREATE SCHEMA public AUTHORIZATION pg_database_owner")
                conn.execute("GRANT USAGE ON SCHEMA public TO PUBLIC")
        except Exception:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            raise
        self._empty.append(name)

    def shutdown(self) -> None:
        """Close our connection, stop the server and remove its directory (idempotent)."""
        try:
            if self._connection is not None:
                self._connection.close()
                self._connection = None
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


class PostgresUnavailable(Exception):
    """PostgreSQL cannot be started here; the message says why."""


def start_postgres_server() -> PostgresServer:
    """Make a cluster in a new temporary directory and start it (as ``postgres`` if root)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise PostgresUnavailable("the psycopg driver is not installed (pip install 'psycopg[binary]')") from None
    bindir = find_postgres_bindir()
    if bindir is None:
        raise PostgresUnavailable(
            "PostgreSQL's initdb/pg_ctl were not found (`make postgres` installs Debian's "
            "postgresql; or set WINNOW_PG_BINDIR)"
        )
    run_as: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        runuser = shutil.which("runuser")
        if runuser is None:
            raise PostgresUnavailable("running as root and runuser is missing")
        run_as = [runuser, "-u", "postgres", "--"]
    # mkdtemp: mode 0700 in /tmp, so the postgres user needs no access to pytest's tmp_path.
    root = Path(tempfile.mkdtemp(prefix="winnow-pg-"))
    if run_as:
        shutil.chown(root, user="postgres", group="postgres")
    server = PostgresServer(bindir=bindir, root=root, run_as=run_as)
    try:
        server.start()
    except BaseException:
        server.shutdown()
        raise
    return server


class _EarlyStart:
    """Starts the server in a thread once collection shows PostgreSQL tests will run, so that
    ``initdb`` (seconds) overlaps with the SQLite tests that come first."""

    def __init__(self) -> None:
        self.server: PostgresServer | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="postgres-start", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.server = start_postgres_server()
        except BaseException as exc:  # handed to the fixture, which skips or fails
            self.error = exc

    def result(self) -> PostgresServer:
        self.thread.join()
        if self.error is not None:
            raise self.error
        assert self.server is not None
        return self.server


_early_start: _EarlyStart | None = None


def pytest_collection_finish(session: pytest.Session) -> None:
    global _early_start
    if (
        _early_start is None
        and not session.config.option.collectonly
        and any(item.get_closest_marker("postgresql") for item in session.items)
    ):
        _early_start = _EarlyStart()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop a server the fixture never took (e.g. ``-x`` stopped before the first use)."""
    if _early_start is not None:
        _early_start.thread.join()
        if _early_start.server is not None:
            _early_start.server.shutdown()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the test session, stopped (and its files removed) after it."""
    try:
        server = _early_start.result() if _early_start is not None else start_postgres_server()
    except PostgresUnavailable as exc:
        tool_missing(f"PostgreSQL cannot be started: {exc}", install="make postgres")
    try:
        yield server
    finally:
        server.shutdown()


# --------------------------------------------------------------------------------------------
# Stores


@pytest.fixture(
    params=[
        pytest.param("sqlite"),
        pytest.param("postgresql", marks=pytest.mark.postgresql),
    ]
)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty database, on each backend in turn (no schema yet)."""
    if request.param == "sqlite":
        yield database_url(tmp_path / "winnow.db")
        close_stores()
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    name = server.acquire_database()
    try:
        yield server.url(name)
    finally:
        close_stores()
        server.release_database(name)


@pytest.fixture
def db_path(tmp_path):
    """A SQLite file path, for the tests of SQLite-only behaviour."""
    yield tmp_path / "winnow.db"
    close_stores()


@dataclass(frozen=True)
class SmallStore:
    Session: sessionmaker[Session]
    url: str
    dataset_id: int
    session_id: int


@pytest.fixture
def store(store_url):
    return open_store(store_url)


@pytest.fixture
def small(store, store_url) -> SmallStore:
    return small_store(store, store_url)


def small_store(store: sessionmaker[Session], store_url: str) -> SmallStore:
    """Dataset ``toy`` (the five items above) and session ``first`` on it, in an empty store."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(len(CANDIDATES), 3))

    def work(s: Session) -> tuple[int, int]:
        ds = create_dataset(
            s,
            name="toy",
            X=X,
            candidates=CANDIDATES,
            label_names=LABELS,
            external_ids=[f"item-{i}" for i in range(len(CANDIDATES))],
            true_labels=TRUE_LABELS,
        )
        ls = create_labelling_session(s, dataset_id=ds.id, name="first", k=2)
        return ds.id, ls.id

    dataset_id, session_id = write_transaction(store, work)
    return SmallStore(store, store_url, dataset_id, session_id)


def row_counts(Session: sessionmaker[Session]) -> dict[str, int]:
    with Session() as s:
        return {
            model.__tablename__: s.scalar(select(func.count()).select_from(model))
            for model in (Dataset, Instance, LabellingSession, Annotator, AnswerEvent)
        }
