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
process died (``kill -9``, a power cut) is removed by the next :func:`~app.store.db.open_store`
(:func:`remove_abandoned_imports`).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.crash_points import crash_point
from app.store.datasets import CheckedDataset, check_dataset_name_free, write_instances
from app.store.db import write_transaction
from app.store.errors import InvalidRecord, StoreUnavailable
from app.store.features import save_feature_matrix
from app.store.models import Dataset, Instance, utcnow
from app.store.sessions import SessionSpec, check_session_name_free, check_session_spec, create_labelling_session

__all__ = [
    "STAGE_ROWS",
    "SQLITE_STAGE_PAUSE",
    "ABANDONED_AFTER",
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

#: An unpublished dataset whose importer wrote nothing for this long is taken as abandoned
#: even when its process cannot be checked (another host sharing a PostgreSQL server).
ABANDONED_AFTER = timedelta(hours=1)


@dataclass(frozen=True)
class ImportResult:
    """What :func:`import_dataset` stored."""

    dataset_id: int
    n_instances: int
    #: The labelling session created with the dataset, when one was asked for.
    session_id: int | None


def importer_name() -> str:
    """``"host:pid"`` of this process, as recorded on the datasets it is importing."""
    return f"{socket.gethostname()}:{os.getpid()}"


def import_dataset(
    Session: sessionmaker[Session],
    dataset: CheckedDataset,
    *,
    labelling: SessionSpec | None = None,
    batch_rows: int = STAGE_ROWS,
    on_batch: Callable[[int, int], None] | None = None,
) -> ImportResult:
    """Store a dataset (and optionally a labelling session on it): all of it or nothing.

    Parameters
    ----------
    Session : sessionmaker
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

    Returns
    -------
    ImportResult

    Raises
    ------
    InvalidRecord
        A bad session option, a dataset or session name already taken: raised before anything
        is written, or (a name taken while the import ran) after what was staged is removed.
    """
    if not isinstance(dataset, CheckedDataset):
        raise TypeError(f"dataset must be a CheckedDataset (from check_dataset), got {type(dataset).__name__}")
    checked = dataset
    if labelling is not None:
        labelling = check_session_spec(labelling, n_instances=checked.n_instances, dataset_name=checked.name)
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise InvalidRecord(f"batch_rows must be an int >= 1, got {batch_rows!r}")

    bind = Session.kw.get("bind")
    pause = SQLITE_STAGE_PAUSE if bind is not None and bind.dialect.name == "sqlite" else 0.0
    dataset_id = write_transaction(Session, lambda s: _reserve(s, checked, labelling))
    try:
        n = checked.n_instances
        for start in range(0, n, batch_rows):
            stop = min(n, start + batch_rows)
            write_transaction(Session, lambda s, a=start, b=stop: _stage(s, dataset_id, checked, a, b))
            if pause and stop < n:
                time.sleep(pause)
            if start == 0:
                crash_point("import-after-first-batch")
            if on_batch is not None:
                on_batch(stop, n)
        crash_point("import-before-publish")
        session_id = write_transaction(Session, lambda s: _publish(s, dataset_id, checked, labelling))
    except BaseException:
        try:
            _discard(Session, dataset_id)
        except Exception:  # noqa: BLE001 - the first error is the one to report; the next start cleans up
            pass
        raise
    return ImportResult(dataset_id, checked.n_instances, session_id)


def remove_abandoned_imports(Session: sessionmaker[Session], *, now: datetime | None = None) -> list[str]:
    """Remove the unpublished datasets whose import will never finish; returns their names.

    An import is abandoned when its process, on this host, is gone (or a zombie), or when it
    has written nothing for :data:`ABANDONED_AFTER`. Imports still running are left alone.
    """
    now = now or utcnow()
    with Session() as s:
        staged = s.execute(
            select(Dataset.id, Dataset.name, Dataset.staged_by, Dataset.staged_at).where(~Dataset.published)
        ).all()
    removed = []
    for dataset_id, name, staged_by, staged_at in staged:
        if _abandoned(staged_by, staged_at, now):
            _discard(Session, dataset_id)
            removed.append(name)
    return removed


# --------------------------------------------------------------------------------------------
# The transactions of an import


def _reserve(s: Session, checked: CheckedDataset, labelling: SessionSpec | None) -> int:
    check_dataset_name_free(s, checked.name)
    if labelling is not None:
        check_session_name_free(s, labelling.name)
    dataset = checked.new_row(published=False)
    dataset.staged_by = importer_name()
    dataset.staged_at = utcnow()
    s.add(dataset)
    s.flush()
    return dataset.id


def _stage(s: Session, dataset_id: int, checked: CheckedDataset, start: int, stop: int) -> None:
    touched = s.execute(
        update(Dataset).where(Dataset.id == dataset_id, ~Dataset.published).values(staged_at=utcnow())
    ).rowcount
    if touched != 1:
        raise StoreUnavailable(
            f"the import of dataset {checked.name!r} was removed while it ran (taken for abandoned); run it again"
        )
    write_instances(s, dataset_id, checked, start, stop)


def _publish(s: Session, dataset_id: int, checked: CheckedDataset, labelling: SessionSpec | None) -> int | None:
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
        s, dataset_id=dataset_id, name=labelling.name, k=labelling.k, weighting=labelling.weighting,
        criterion=labelling.criterion, target_set=labelling.target_set,
    )
    return session.id


def _discard(Session: sessionmaker[Session], dataset_id: int) -> None:
    """Delete an unpublished dataset, its instances a batch per transaction, then its row."""

    def delete_batch(s: Session) -> int:
        if s.scalar(select(Dataset.published).where(Dataset.id == dataset_id)) is not False:
            return 0  # published meanwhile, or already gone: not ours to delete
        positions = select(Instance.id).where(Instance.dataset_id == dataset_id).limit(STAGE_ROWS)
        return s.execute(delete(Instance).where(Instance.id.in_(positions.scalar_subquery()))).rowcount

    while write_transaction(Session, delete_batch):
        pass
    write_transaction(
        Session, lambda s: s.execute(delete(Dataset).where(Dataset.id == dataset_id, ~Dataset.published))
    )


def _abandoned(staged_by: str | None, staged_at: datetime | None, now: datetime) -> bool:
    host, _, pid = (staged_by or "").rpartition(":")
    if host == socket.gethostname() and pid.isdigit() and not _process_alive(int(pid)):
        return True
    return staged_at is None or now - staged_at > ABANDONED_AFTER


def _process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs here (a zombie, killed but not yet reaped, does not)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    stat = Path(f"/proc/{pid}/stat")
    try:
        # The state letter follows the parenthesised command name, which may hold spaces.
        return stat.read_text().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return True
