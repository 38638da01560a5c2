"""Imports that never make annotators wait: stage the instances in batches, publish at the end.

:func:`import_dataset` is what ``winnow import`` and the Sessions page's upload run:

1. every argument is checked (the dataset by :func:`~app.store.datasets.check_dataset`, which
   the caller runs, the optional labelling session by
   :func:`~app.store.sessions.check_session_spec`, including ``k`` smaller than the number of
   items) before anything is written;
2. one short transaction reserves the names: a dataset row with ``published = false``;
3. the instances are written in batches of :data:`STAGE_ROWS`, each batch its own short
   transaction, so the write lock is free between batches and answers of other sessions commit
   while a million-row file loads (on SQLite the importer pauses :data:`SQLITE_STAGE_PAUSE`
   after each batch, so that writers waiting on the busy handler get their turn);
4. one short transaction publishes the dataset, writes its feature matrix in blocks
   (:mod:`~app.store.features`; about a second per 100 MB) and creates the labelling session.

Every read (:func:`~app.store.datasets.list_datasets`, look-ups by name, sessions) ignores an
unpublished dataset, so a reader sees nothing of an import until step 4 and then all of it:
dataset and session together or neither. An import that fails removes what it staged; one whose
process died (``kill -9``, a power cut) is removed when the next import starts
(:func:`remove_abandoned_imports`).

An import is running while its process holds the import's lock, a lock the operating system or
the database server drops when the process dies, whatever killed it: on PostgreSQL a
session-level advisory lock (key :data:`PG_IMPORT_LOCK_CLASS`, the dataset id) on a connection
of its own; on a SQLite file an open-file-description lock (``F_OFD_SETLK``) on the byte at the
dataset id's offset in the store's lock file ``<store>-imports`` (made ``0600``). Neither
depends on host names or process ids, so a command in another PID namespace (a container) on
the same host name cannot take a running import for a dead one (issue 23, item 7), and the
lock is taken before the staged row is committed, so nobody can see the row without it.

PostgreSQL drops a session's lock only once it notices that the client is gone, which may take
a while after a ``kill -9`` on a loaded machine (and, when the client's host vanished, as long as
TCP keeps the dead connection). So the lock's connection is named after its process
(``application_name``: this host's boot and PID namespace, the pid and the process's start
time): an import that finds the lock held by a process of its own host and namespace that no
longer runs ends that server session (``pg_terminate_backend``) and waits at most
:data:`IMPORT_TAKEOVER_SECONDS` for the lock to go, saying so on the log ``winnow.imports``
when it takes more than a second, then fails in one line naming the server process.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import logging
import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from sqlalchemy import Connection, CursorResult, Engine, delete, func, select, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from app.crash_points import crash_point
from app.store.datasets import CheckedDataset, check_dataset_name_free, write_instances
from app.store.db import write_transaction
from app.store.errors import InvalidRecord, StoreBusy, StoreUnavailable
from app.store.features import save_feature_matrix
from app.store.models import Dataset, Instance, Vote, utcnow
from app.store.sessions import SessionSpec, check_session_name_free, check_session_spec, create_labelling_session

__all__ = [
    "STAGE_ROWS",
    "SQLITE_STAGE_PAUSE",
    "PG_IMPORT_LOCK_CLASS",
    "IMPORT_TAKEOVER_SECONDS",
    "IMPORT_LOCK_SUFFIX",
    "ImportResult",
    "import_dataset",
    "remove_abandoned_imports",
    "importer_name",
]

#: Instances written per staging transaction: enough to amortise a commit, few enough (a
#: fraction of a second) that an answer waiting for the write lock is hardly noticed.
STAGE_ROWS = 10_000

#: Pause after each staging transaction on SQLite, in seconds. SQLite's busy handler polls
#: with back-off (up to 100 ms between tries), so an importer that began its next batch at once
#: would win the lock again and again while an answer waits: the pause lets the waiting writers
#: in. PostgreSQL queues the waiters of the advisory lock and needs none.
SQLITE_STAGE_PAUSE = 0.1

#: First key of the PostgreSQL advisory lock an import holds (the second is the dataset id).
#: Advisory locks are per database, so imports into stores on one server do not collide.
PG_IMPORT_LOCK_CLASS = 0x77696E6E  # "winn"

#: Seconds an import waits for PostgreSQL to let go of the lock of an import whose process is
#: gone (after ending its server session), before it gives up with a message.
IMPORT_TAKEOVER_SECONDS = 30.0

#: Prefix of the ``application_name`` of an import's lock connection on PostgreSQL.
_PG_LOCK_APPLICATION = "winnow import"

log = logging.getLogger("winnow.imports")

#: Suffix of the lock file next to a SQLite store (``winnow.db`` -> ``winnow.db-imports``).
IMPORT_LOCK_SUFFIX = "-imports"

#: Mode of that lock file: like the store, its owner's alone.
_LOCK_FILE_MODE = 0o600

#: ``struct flock`` of Linux (l_type, l_whence, l_start, l_len, l_pid, padding).
_FLOCK = struct.Struct("@hhqqi4x")

#: Dataset ids imported by this process into in-memory SQLite databases, which no other
#: process can reach, so a set in memory is their lock.
_in_memory_imports: set[tuple[int, int]] = set()
_in_memory_lock = threading.Lock()


@dataclass(frozen=True)
class ImportResult:
    """What :func:`import_dataset` stored."""

    dataset_id: int
    n_instances: int
    #: The labelling session created with the dataset, when one was asked for.
    session_id: int | None


def importer_name() -> str:
    """``"host:pid"`` of this process, as recorded on the datasets it is importing.

    For people (the message about a name being imported says by whom); whether an import is
    still running is decided by its lock, never by this text.
    """
    return f"{socket.gethostname()}:{os.getpid()}"


def import_dataset(
    session_factory: sessionmaker[Session],
    dataset: CheckedDataset,
    *,
    labelling: SessionSpec | None = None,
    batch_rows: int = STAGE_ROWS,
    on_batch: Callable[[int, int], None] | None = None,
    in_session: Callable[[Session, int], None] | None = None,
) -> ImportResult:
    """Store a dataset (and optionally a labelling session on it): all of it or nothing.

    Parameters
    ----------
    session_factory : sessionmaker
        From :func:`app.store.open_store`.
    dataset : CheckedDataset
        From :func:`app.store.check_dataset` (the caller turns its errors into messages about
        its own source, e.g. a file's rows and columns).
    labelling : SessionSpec, optional
        A labelling session to create on the dataset, published in the same transaction; its
        options (``k`` smaller than the number of items, ...) are checked before anything is
        written.
    batch_rows : int, default :data:`STAGE_ROWS`
        Instances per staging transaction.
    on_batch : callable, optional
        Called as ``on_batch(rows_staged, n_instances)`` after each staging transaction (a
        progress bar; the tests use it to act while an import is half-way).
    in_session : callable, optional
        With ``labelling``: called as ``in_session(s, session_id)`` in the transaction that
        publishes the dataset and creates the session (answers a file brings are recorded
        there, so that they and the dataset appear together or not at all).

    Returns
    -------
    ImportResult

    Raises
    ------
    InvalidRecord
        A bad session option, a dataset or session name already taken: raised before anything
        is written, or (a name taken while the import ran) after what was staged is removed.

    Notes
    -----
    Imports whose process died are removed first (:func:`remove_abandoned_imports`), so their
    names are free again.
    """
    if not isinstance(dataset, CheckedDataset):
        raise TypeError(f"dataset must be a CheckedDataset (from check_dataset), got {type(dataset).__name__}")
    checked = dataset
    if labelling is not None:
        labelling = check_session_spec(labelling, n_instances=checked.n_instances, dataset_name=checked.name)
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise InvalidRecord(f"batch_rows must be an int >= 1, got {batch_rows!r}")

    bind = session_factory.kw.get("bind")
    pause = SQLITE_STAGE_PAUSE if bind is not None and bind.dialect.name == "sqlite" else 0.0
    remove_abandoned_imports(session_factory)
    with contextlib.ExitStack() as stack:
        held = _HeldLocks(stack)
        dataset_id = write_transaction(session_factory, lambda s: _reserve(s, checked, labelling, held))
        return _stage_and_publish(
            session_factory, dataset_id, checked, labelling, batch_rows, pause, on_batch, in_session
        )


def _stage_and_publish(
    session_factory: sessionmaker[Session],
    dataset_id: int,
    checked: CheckedDataset,
    labelling: SessionSpec | None,
    batch_rows: int,
    pause: float,
    on_batch: Callable[[int, int], None] | None,
    in_session: Callable[[Session, int], None] | None = None,
) -> ImportResult:
    try:
        n = checked.n_instances
        for start in range(0, n, batch_rows):
            stop = min(n, start + batch_rows)
            stage = functools.partial(_stage, dataset_id=dataset_id, checked=checked, start=start, stop=stop)
            write_transaction(session_factory, stage)
            if pause and stop < n:
                time.sleep(pause)
            if start == 0:
                crash_point("import-after-first-batch")
            if on_batch is not None:
                on_batch(stop, n)
        crash_point("import-before-publish")
        session_id = write_transaction(
            session_factory, lambda s: _publish(s, dataset_id, checked, labelling, in_session)
        )
    except BaseException:
        try:
            _discard(session_factory, dataset_id)
        except Exception:  # the first error is the one to report; the next start cleans up
            pass
        raise
    return ImportResult(dataset_id, checked.n_instances, session_id)


def remove_abandoned_imports(session_factory: sessionmaker[Session]) -> list[str]:
    """Remove the unpublished datasets whose import will never finish; returns their names.

    An import is abandoned when nobody holds its lock (see the module docstring): its process
    is gone, on whatever host or in whatever PID namespace it ran. Imports still running are
    left alone, however long they take.

    Raises
    ------
    StoreBusy
        On PostgreSQL, when the server still holds the lock of an import whose process is gone
        (on this host) :data:`IMPORT_TAKEOVER_SECONDS` after its session was asked to end.
    """
    with session_factory() as s:
        staged = s.execute(select(Dataset.id, Dataset.name, Dataset.staged_by).where(~Dataset.published)).all()
    bind = _engine_of(session_factory)
    removed = []
    for dataset_id, name, staged_by in staged:
        if bind.dialect.name == "postgresql":
            holder = _pg_lock_holder(bind, dataset_id)
            if holder is not None and _holder_is_gone(holder.application_name):
                holder = _end_dead_holder(bind, dataset_id, holder, f"the import of dataset {name!r} by {staged_by}")
            running = holder is not None
        else:
            running = _import_running(bind, dataset_id)
        if not running:
            _discard(session_factory, dataset_id)
            removed.append(name)
    return removed


# --------------------------------------------------------------------------------------------
# The transactions of an import


def _reserve(s: Session, checked: CheckedDataset, labelling: SessionSpec | None, held: _HeldLocks) -> int:
    check_dataset_name_free(s, checked.name)
    if labelling is not None:
        check_session_name_free(s, labelling.name)
    dataset = checked.new_row(published=False)
    dataset.staged_by = importer_name()
    dataset.staged_at = utcnow()
    s.add(dataset)
    s.flush()
    # Locked before the row is committed: whoever can see the row sees it locked.
    held.hold(_engine_of(s), dataset.id)
    return dataset.id


def _stage(s: Session, dataset_id: int, checked: CheckedDataset, start: int, stop: int) -> None:
    result = s.execute(update(Dataset).where(Dataset.id == dataset_id, ~Dataset.published).values(staged_at=utcnow()))
    touched = cast(CursorResult[Any], result).rowcount  # an UPDATE's result is a cursor result
    if touched != 1:
        raise StoreUnavailable(
            f"the import of dataset {checked.name!r} was removed while it ran (taken for abandoned); run it again"
        )
    write_instances(s, dataset_id, checked, start, stop)


def _publish(
    s: Session,
    dataset_id: int,
    checked: CheckedDataset,
    labelling: SessionSpec | None,
    in_session: Callable[[Session, int], None] | None = None,
) -> int | None:
    dataset = s.get(Dataset, dataset_id)
    stored = s.scalar(select(func.count(Instance.id)).where(Instance.dataset_id == dataset_id))
    if dataset is None or dataset.published or stored != checked.n_instances:
        raise StoreUnavailable(
            f"the import of dataset {checked.name!r} was changed while it ran "
            f"({stored} of {checked.n_instances} instances staged); run it again"
        )
    dataset.published = True
    dataset.staged_by = None
    dataset.staged_at = None
    s.flush()
    # The matrix in blocks, for the session opens to come: visible with the dataset or not at all.
    save_feature_matrix(s, dataset_id, checked.X)
    if labelling is None:
        return None
    # Re-checked here: another process may have taken the name while the rows were staged.
    session = create_labelling_session(
        s,
        dataset_id=dataset_id,
        name=labelling.name,
        k=labelling.k,
        weighting=labelling.weighting,
        criterion=labelling.criterion,
        target_set=labelling.target_set,
    )
    if in_session is not None:
        s.flush()
        in_session(s, session.id)
    return session.id


def _discard(session_factory: sessionmaker[Session], dataset_id: int) -> None:
    """Delete an unpublished dataset, its instances (and their votes) a batch per transaction,
    then its row."""

    def delete_batch(s: Session) -> int:
        if s.scalar(select(Dataset.published).where(Dataset.id == dataset_id)) is not False:
            return 0  # published meanwhile, or already gone: not ours to delete
        positions = select(Instance.id).where(Instance.dataset_id == dataset_id).order_by(Instance.id).limit(STAGE_ROWS)
        # The batch's votes first: they refer to its instances.
        s.execute(delete(Vote).where(Vote.instance_id.in_(positions.scalar_subquery())))
        result = s.execute(delete(Instance).where(Instance.id.in_(positions.scalar_subquery())))
        return cast(CursorResult[Any], result).rowcount

    while write_transaction(session_factory, delete_batch):
        pass
    write_transaction(
        session_factory, lambda s: s.execute(delete(Dataset).where(Dataset.id == dataset_id, ~Dataset.published))
    )


# --------------------------------------------------------------------------------------------
# The lock a running import holds


class _HeldLocks:
    """The import locks one import holds until its ``ExitStack`` closes.

    A write transaction re-run after a lock timeout may reserve the same id again: its lock is
    then already held here (taking it on a second descriptor would conflict with the first).
    """

    def __init__(self, stack: contextlib.ExitStack) -> None:
        self._stack = stack
        self._ids: set[int] = set()

    def hold(self, engine: Engine, dataset_id: int) -> None:
        if dataset_id not in self._ids:
            self._stack.enter_context(_import_lock(engine, dataset_id))
            self._ids.add(dataset_id)


def _engine_of(source: sessionmaker[Session] | Session) -> Engine:
    bind = source.kw.get("bind") if isinstance(source, sessionmaker) else source.get_bind()
    if isinstance(bind, Connection):
        bind = bind.engine
    if not isinstance(bind, Engine):
        raise TypeError(
            f"the sessionmaker must be bound to an Engine (open_store makes one), got {type(bind).__name__}"
        )
    return bind


def _lock_file(engine: Engine) -> Path | None:
    """The lock file of a SQLite file store; ``None`` for an in-memory one."""
    database = make_url(str(engine.url)).database or ""
    if database in ("", ":memory:") or "mode=memory" in str(engine.url):
        return None
    return Path(database).with_name(Path(database).name + IMPORT_LOCK_SUFFIX)


def _ofd_lock(fd: int, lock_type: int, offset: int) -> bool:
    """Set (or clear) an OFD lock on one byte; ``False`` when another holder has it."""
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _FLOCK.pack(lock_type, os.SEEK_SET, offset, 1, 0))
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def _open_lock_file(path: Path) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, _LOCK_FILE_MODE)
    with contextlib.suppress(OSError):  # made by another user: its mode is theirs to set
        os.fchmod(fd, _LOCK_FILE_MODE)
    return fd


@contextlib.contextmanager
def _import_lock(engine: Engine, dataset_id: int) -> Iterator[None]:
    """Hold the lock of dataset ``dataset_id``'s import until the block ends (or the process dies)."""
    if engine.dialect.name == "postgresql":
        # A connection of its own, kept out of the pool for the whole import; the lock is
        # session-level, so it outlives the transactions and dies with the connection.
        connection = engine.connect()
        try:
            # Named before it locks: whoever sees the lock can tell whether its process still runs.
            connection.exec_driver_sql(
                "SELECT set_config('application_name', %(name)s, false)", {"name": _lock_application_name()}
            )
            taken = connection.exec_driver_sql(
                f"SELECT pg_try_advisory_lock({PG_IMPORT_LOCK_CLASS}, {int(dataset_id)})"
            ).scalar_one()
            connection.commit()  # not left "idle in transaction" for the length of the import
            if not taken:
                raise StoreUnavailable(f"dataset id {dataset_id} is locked by another import; run the import again")
            yield
        finally:
            with contextlib.suppress(Exception):
                connection.exec_driver_sql(f"SELECT pg_advisory_unlock({PG_IMPORT_LOCK_CLASS}, {int(dataset_id)})")
                connection.exec_driver_sql("RESET application_name")  # back to the pool unnamed
                connection.commit()
            connection.close()
        return
    path = _lock_file(engine) if engine.dialect.name == "sqlite" else None
    if path is None:
        key = (id(engine), dataset_id)
        with _in_memory_lock:
            _in_memory_imports.add(key)
        try:
            yield
        finally:
            with _in_memory_lock:
                _in_memory_imports.discard(key)
        return
    fd = _open_lock_file(path)
    try:
        if not _ofd_lock(fd, fcntl.F_WRLCK, dataset_id):
            raise StoreUnavailable(
                f"dataset id {dataset_id} is locked by another import in {path}; run the import again"
            )
        yield
    finally:
        os.close(fd)  # closing the only descriptor of an OFD lock releases it


def _import_running(engine: Engine, dataset_id: int) -> bool:
    """Whether some process (this one included) holds the lock of ``dataset_id``'s import."""
    if engine.dialect.name == "postgresql":
        return _pg_lock_holder(engine, dataset_id) is not None
    path = _lock_file(engine) if engine.dialect.name == "sqlite" else None
    if path is None:
        with _in_memory_lock:
            return (id(engine), dataset_id) in _in_memory_imports
    if not path.exists():
        return False
    fd = _open_lock_file(path)
    try:
        # A test lock on a description of our own: it conflicts with the importer's even when
        # the importer is this very process (OFD locks belong to descriptions, not processes).
        if not _ofd_lock(fd, fcntl.F_WRLCK, dataset_id):
            return True
        _ofd_lock(fd, fcntl.F_UNLCK, dataset_id)
        return False
    finally:
        os.close(fd)


# --------------------------------------------------------------------------------------------
# PostgreSQL: the server session holding an import's lock, and whether its process is gone


@dataclass(frozen=True)
class _PgHolder:
    """The server session that holds an import's advisory lock."""

    #: Its server process id (``pg_backend_pid()`` of the importer's lock connection).
    backend: int
    #: The connection's ``application_name``: :func:`_lock_application_name` of its client.
    application_name: str


def _pg_lock_holder(engine: Engine, dataset_id: int) -> _PgHolder | None:
    with engine.connect() as connection:
        row = connection.exec_driver_sql(
            "SELECT l.pid, coalesce(a.application_name, '') FROM pg_locks l"
            " LEFT JOIN pg_stat_activity a ON a.pid = l.pid"
            " WHERE l.locktype = 'advisory' AND l.granted"
            " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            f" AND l.classid = {PG_IMPORT_LOCK_CLASS} AND l.objid = {int(dataset_id)} AND l.objsubid = 2"
        ).first()
    return None if row is None else _PgHolder(int(row[0]), str(row[1]))


@functools.cache
def _namespace_tag() -> str | None:
    """Names this host, its boot and this PID namespace: where a pid names the same process as
    here. ``None`` where the system does not tell (no ``/proc``)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    return hashlib.sha256(f"{socket.gethostname()}\0{boot}\0{namespace}".encode()).hexdigest()[:12]


def _start_time(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot), ``None`` if it does not run here."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # the command name may hold spaces and parentheses
    return fields[19] if len(fields) > 19 else None  # field 22 of proc_pid_stat(5)


def _lock_application_name() -> str:
    """``winnow import TAG PID START`` for this process, or plain ``winnow import`` where the
    system does not tell enough to know later whether the process still runs."""
    tag, start = _namespace_tag(), _start_time(os.getpid())
    if tag is None or start is None:
        return _PG_LOCK_APPLICATION
    return f"{_PG_LOCK_APPLICATION} {tag} {os.getpid()} {start}"


def _holder_is_gone(application_name: str) -> bool:
    """Whether the lock's client was a process of this host and PID namespace that no longer
    runs (its pid is free, or taken by a process started later). Anything else, e.g. a client
    on another host, may still be running: only its own server can tell, by dropping the lock."""
    parts = application_name.split(" ")
    if len(parts) != 5 or " ".join(parts[:2]) != _PG_LOCK_APPLICATION or not parts[3].isdigit():
        return False
    tag, pid, start = parts[2], int(parts[3]), parts[4]
    return tag == _namespace_tag() and _start_time(pid) != start


def _end_dead_holder(engine: Engine, dataset_id: int, holder: _PgHolder, what: str) -> _PgHolder | None:
    """End the server session of an import whose process is gone, and wait (at most
    :data:`IMPORT_TAKEOVER_SECONDS`) until PostgreSQL lets go of its lock.

    Returns the holder still found (``None`` once the lock is free, or another live import's
    holder that took it meanwhile); raises :class:`StoreBusy` when the dead one keeps it.
    """
    _terminate_backend(engine, holder.backend)
    started = time.monotonic()
    told = False
    while True:
        current = _pg_lock_holder(engine, dataset_id)
        if current is None or current.backend != holder.backend:
            return current
        waited = time.monotonic() - started
        if waited >= IMPORT_TAKEOVER_SECONDS:
            raise StoreBusy(
                f"{what} has ended (its process is gone), but PostgreSQL still holds its lock "
                f"(server process {holder.backend}) after {waited:.0f} s; try again later, or have the "
                f"database's owner run SELECT pg_terminate_backend({holder.backend})"
            )
        if not told and waited >= 1.0:
            log.warning(
                "%s has ended (its process is gone); waiting up to %.0f s for PostgreSQL to end its "
                "server process %d, which still holds the import's lock",
                what,
                IMPORT_TAKEOVER_SECONDS,
                holder.backend,
            )
            told = True
        time.sleep(0.1)


def _terminate_backend(engine: Engine, backend: int) -> None:
    with engine.connect() as connection:
        try:
            connection.exec_driver_sql(f"SELECT pg_terminate_backend({int(backend)})")
            connection.commit()
        except DBAPIError:  # no right to end it: PostgreSQL ends it once it sees the client gone
            connection.rollback()
