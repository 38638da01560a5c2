"""A dataset's feature matrix in a few blobs, so that opening a session reads blocks, not rows.

Reading the features of 1M items row by row (a small blob in each ``instances`` row) makes
a million values to fetch and join; in blocks they read in 0.4-0.8 s at 1M items
(``docs/benchmarks_scale.md``, section 3). Each published dataset therefore also keeps
its matrix in :class:`~app.store.models.FeatureBlock` rows: consecutive rows of the matrix as
``.npy`` bytes (float64, as the instances hold them, so graphs hashed over the features and
built from them do not change), :data:`BLOCK_BYTES` at most each, so that no single value
nears SQLite's 1 GB limit and a reader holds at most one block besides the matrix.

When they are written and dropped:

* :func:`~app.store.datasets.create_dataset` and the publishing transaction of
  :func:`~app.store.staging.import_dataset` write them, in the transaction that makes the
  dataset visible;
* any write of instances (:func:`~app.store.datasets.write_instances`) deletes the dataset's
  blocks first, so a dataset that gets new items is never read from a stale matrix;
* migration ``0010`` writes them for the datasets of an existing store, a block at a time.

:func:`load_feature_matrix` returns ``None`` when the blocks are missing or do not cover the
dataset, and the caller reads the rows instead (and may store the blocks again with
:func:`save_feature_matrix`, which refuses a matrix whose row count is not the dataset's).
"""

from __future__ import annotations

import io
import threading

import numpy as np
from sqlalchemy import delete, func, insert, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session

from app.store.checks import check_int
from app.store.errors import InvalidRecord, StoreUnavailable
from app.store.item_columns import current_token
from app.store.models import Dataset, FeatureBlock, Instance

__all__ = [
    "BLOCK_BYTES",
    "block_rows",
    "encode_block",
    "decode_block",
    "save_feature_matrix",
    "drop_feature_matrix",
    "load_feature_matrix",
    "feature_matrix_stored",
    "features_from_rows",
    "FeatureMatrix",
]

#: Largest block of the matrix stored as one value (64 MiB: 131,072 rows of 64 features).
BLOCK_BYTES = 64 * 2**20
_DTYPE = np.dtype("<f8")
#: More than any .npy header numpy reads (its limit is 10,000 bytes).
_HEADER_MAX = 1 << 16


def block_rows(n_features: int) -> int:
    """Rows of ``n_features`` float64 features per block: as many as fit :data:`BLOCK_BYTES`.

    >>> block_rows(64)
    131072
    """
    return max(1, BLOCK_BYTES // (_DTYPE.itemsize * n_features))


def encode_block(X: np.ndarray) -> bytes:
    """``.npy`` bytes of a float64 block (C order, little-endian, no pickle)."""
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.ascontiguousarray(X, dtype=_DTYPE), allow_pickle=False)
    return buffer.getvalue()


def decode_block(data: bytes, n_rows: int, n_features: int, *, where: str = "feature block") -> np.ndarray:
    """The read-only array of ``.npy`` bytes (a view of ``data``, nothing is copied).

    Raises
    ------
    StoreUnavailable
        The bytes are not an ``.npy`` float64 array of shape ``(n_rows, n_features)``
        (``where`` names the block in the message).
    """
    view = memoryview(data)
    stream = io.BytesIO(view[:_HEADER_MAX])  # the header only: the data is not copied
    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    try:
        version = np.lib.format.read_magic(stream)
        if version not in readers:
            raise ValueError(f"format version {version} is not 1.0 or 2.0")
        shape, fortran, dtype = readers[version](stream)
    except ValueError as exc:
        raise StoreUnavailable(f"{where} is not .npy data: {exc}") from None
    if dtype != _DTYPE or fortran or shape != (n_rows, n_features):
        raise StoreUnavailable(
            f"{where} holds a {'Fortran-ordered ' if fortran else ''}{dtype.str} array of shape {shape}; "
            f"expected <f8 of shape ({n_rows}, {n_features})"
        )
    offset = stream.tell()
    if len(view) - offset != n_rows * n_features * _DTYPE.itemsize:
        raise StoreUnavailable(f"{where} holds {len(view) - offset} bytes of data for {n_rows} x {n_features} float64")
    return np.frombuffer(view, dtype=_DTYPE, offset=offset).reshape(n_rows, n_features)


def save_feature_matrix(session: Session, dataset_id: int, X: np.ndarray) -> bool:
    """Replace the stored blocks of a dataset by those of ``X``; returns whether it stored them.

    Nothing is stored (``False``) when ``X`` does not have the dataset's number of rows and
    instances (items were added since ``X`` was read). Run in a write transaction.

    Parameters
    ----------
    session : Session
    dataset_id : int
    X : array of shape (n_instances, n_features)
        The dataset's features in position order.
    """
    dataset_id = check_int(dataset_id, "dataset_id")
    X = np.asarray(X)
    row = session.execute(select(Dataset.n_instances, Dataset.n_features).where(Dataset.id == dataset_id)).first()
    if row is None:
        raise InvalidRecord(f"dataset_id {dataset_id} does not exist")
    n, d = row
    if X.ndim != 2 or X.shape[1] != d:
        raise InvalidRecord(f"X has shape {X.shape}; dataset {dataset_id} has {d} features")
    stored = session.scalar(select(func.count(Instance.id)).where(Instance.dataset_id == dataset_id))
    if X.shape[0] != n or stored != n:
        return False
    drop_feature_matrix(session, dataset_id)
    step = block_rows(d)
    for start in range(0, n, step):
        block = X[start : start + step]
        # One block per statement: only one block's bytes are held besides X.
        session.connection().execute(
            insert(FeatureBlock.__table__),
            [{"dataset_id": dataset_id, "start": start, "n_rows": block.shape[0], "data": encode_block(block)}],
        )
    return True


def drop_feature_matrix(session: Session, dataset_id: int) -> None:
    """Delete the stored blocks of a dataset (its instances are about to change)."""
    session.connection().execute(delete(FeatureBlock.__table__).where(FeatureBlock.dataset_id == dataset_id))


def feature_matrix_stored(session: Session, dataset_id: int) -> bool:
    """Whether the blocks of a dataset cover its ``n_instances`` rows (one small query)."""
    covered = session.scalar(select(func.sum(FeatureBlock.n_rows)).where(FeatureBlock.dataset_id == dataset_id))
    n = session.scalar(select(Dataset.n_instances).where(Dataset.id == dataset_id))
    return covered is not None and n is not None and int(covered) == int(n)


def load_feature_matrix(session: Session, dataset_id: int, n_instances: int, n_features: int) -> np.ndarray | None:
    """The feature matrix of a dataset from its blocks, or ``None`` when they do not cover it.

    One query lists the blocks, then one reads each block, so that at most one block's bytes
    are held besides the matrix (a streamed result would need server-side cursors on
    PostgreSQL).

    Returns
    -------
    array of shape (n_instances, n_features), float64, or None
        Read-only when the dataset has one block (a view of its bytes), writable otherwise.
    """
    blocks = session.execute(
        select(FeatureBlock.start, FeatureBlock.n_rows)
        .where(FeatureBlock.dataset_id == dataset_id)
        .order_by(FeatureBlock.start)
    ).all()
    starts = [start for start, _ in blocks]
    ends = [start + rows for start, rows in blocks]
    if not blocks or starts[0] != 0 or ends[-1] != n_instances or starts[1:] != ends[:-1]:
        return None
    if len(blocks) == 1:
        # One block (up to 131,072 rows of 64 features) is the matrix: its bytes are used as
        # they are read, read-only, instead of copied (0.1 s of every open at 100k items).
        data = session.scalar(
            select(FeatureBlock.data).where(FeatureBlock.dataset_id == dataset_id, FeatureBlock.start == 0)
        )
        if data is None:
            return None
        return decode_block(data, n_instances, n_features, where=f"feature block 0 of dataset {dataset_id}")
    X = np.empty((n_instances, n_features), dtype=np.float64)
    for start, rows in blocks:
        data = session.scalar(
            select(FeatureBlock.data).where(FeatureBlock.dataset_id == dataset_id, FeatureBlock.start == start)
        )
        if data is None:  # deleted since the blocks were listed: they no longer cover the matrix
            return None
        X[start : start + rows] = decode_block(
            data, rows, n_features, where=f"feature block {start} of dataset {dataset_id}"
        )
    return X


def features_from_rows(session: Session, dataset_id: int, n_instances: int, n_features: int) -> np.ndarray:
    """The feature matrix read from the instances' rows (one ordered ``SELECT``)."""
    rows = (
        session.connection()
        .execute(select(Instance.features).where(Instance.dataset_id == dataset_id).order_by(Instance.position))
        .scalars()
        .all()
    )
    if len(rows) != n_instances:
        raise InvalidRecord(f"dataset {dataset_id} holds {len(rows)} instances, expected {n_instances}")
    return np.frombuffer(b"".join(rows), dtype="<f8").reshape(n_instances, n_features).astype(np.float64)


class FeatureMatrix:
    """A dataset's feature matrix, read from the store when first asked for (:meth:`array`).

    A command that finds its graph by the key kept with the dataset's item columns
    (:mod:`app.store.item_columns`) never looks at the features: ``winnow session status``,
    ``export`` and ``answer`` at 1M items would read 512 MB for nothing. The matrix is read
    in a transaction of its own, later than the state it belongs to, so it is read only while
    the item columns the state was read with (``token``) are still the dataset's: a write of
    instances drops them, and the matrix of other items is never handed out. Read once, then
    kept (read-only) for every state of the session, by whichever thread asks first.
    """

    def __init__(self, bind: Engine | Connection, dataset_id: int, shape: tuple[int, int], token: str) -> None:
        self._bind = bind
        self._dataset_id = dataset_id
        self.shape = shape
        self._token = token
        self._lock = threading.Lock()
        self._array: np.ndarray | None = None

    def array(self) -> np.ndarray:
        """The matrix, of shape :attr:`shape`, float64, read-only.

        Raises
        ------
        StoreUnavailable
            The dataset's items changed since the state was read (open the session again).
        """
        with self._lock:
            if self._array is None:
                self._array = self._read()
            return self._array

    def _read(self) -> np.ndarray:
        n, d = self.shape
        with Session(self._bind) as s:
            if current_token(s, self._dataset_id) != self._token:
                raise StoreUnavailable(
                    f"the items of dataset {self._dataset_id} changed since the session was opened; open it again"
                )
            X = load_feature_matrix(s, self._dataset_id, n, d)
            if X is None:
                X = features_from_rows(s, self._dataset_id, n, d)
        X.setflags(write=False)
        return X
