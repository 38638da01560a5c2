"""A dataset's item columns in one piece, and the graph keys already hashed from its features.

Opening a session read every ``instances`` row of its dataset (database id, external id,
candidate mask, true label): a Python tuple per item, about 0.4 s at 100k items and seconds
at 1M, in every command. Its graph was found by hashing the whole feature matrix (half a
second at 1M). Both are the same at every open until the dataset's items change, so they are
kept here (:class:`~app.store.models.ItemColumn` rows) and read back as a few blobs.

Why they can be trusted, and when they are not:

* They are a **cache of the rows**, never the only copy: the ``instances`` rows stay the
  truth, and a reader that finds no usable columns reads the rows (and the caller stores the
  columns again).
* Instances are never updated; they are only inserted (:func:`~app.store.datasets.
  write_instances`, which deletes these columns with the feature blocks first) or deleted
  with an unpublished dataset. :func:`save_item_columns` stores the columns of a state only
  if the dataset's rows are still the ones it was read from (the same count and the same
  smallest and largest database id: new rows get larger ids), in the caller's write
  transaction.
* Every column of one write carries the same random ``token`` and a checksum of its bytes:
  parts of two writes, changed bytes, or an array of the wrong shape or kind are refused
  (the rows are read instead).
* A **graph key** (:func:`app.service.graphs.graph_key`, the SHA-256 of the features and the
  graph's parameters) is stored under the token of the columns read in the same transaction
  as the features it was hashed from, and used only while that token is the current one: a
  change of the items drops the token, and the key with it.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session

from app.store.checks import check_int
from app.store.models import Instance, ItemColumn
from app.store.snapshots import decode_array, digest_matches, encode_array, part_digest

if TYPE_CHECKING:
    from app.store.derive import SessionState

__all__ = [
    "ITEM_COLUMNS",
    "ItemColumns",
    "save_item_columns",
    "load_item_columns",
    "drop_item_columns",
    "current_token",
    "find_graph_key",
    "save_graph_key",
]

#: The columns kept per dataset, in :class:`~app.store.models.ItemColumn` ``name``.
ITEM_COLUMNS: tuple[str, ...] = ("instance_id", "external_id", "candidate_mask", "true_label")

#: ``name`` of a graph key: this prefix and the SHA-256 of the graph's parameters.
_GRAPH_KEY = "graph_key:"


@dataclass(frozen=True)
class ItemColumns:
    """A dataset's items as :func:`app.store.load_state` needs them, in position order.

    Attributes
    ----------
    token : str
        What the columns were written with (graph keys are stored under it).
    instance_ids : array of shape (n_instances,), int64
    external_ids : tuple of str, length n_instances
    candidates : array of shape (n_instances, n_labels), bool
        The original candidate sets.
    true_labels : array of shape (n_instances,), int64, or None
        ``-1`` where unknown; ``None`` when no item has one.
    """

    token: str
    instance_ids: np.ndarray
    external_ids: tuple[str, ...]
    candidates: np.ndarray
    true_labels: np.ndarray | None


def _rows_fingerprint(session: Session, dataset_id: int) -> tuple[int, int | None, int | None]:
    """How many instance rows the dataset has, and their smallest and largest database id."""
    row = session.execute(
        select(func.count(Instance.id), func.min(Instance.id), func.max(Instance.id)).where(
            Instance.dataset_id == dataset_id
        )
    ).one()
    return int(row[0]), None if row[1] is None else int(row[1]), None if row[2] is None else int(row[2])


def _encoded(state: SessionState) -> dict[str, bytes]:
    n = state.n_instances
    truth = state.true_labels if state.true_labels is not None else np.full(n, -1, dtype=np.int64)
    return {
        "instance_id": encode_array(np.asarray(state.instance_ids, dtype=np.int64)),
        # JSON keeps any text an id may hold; a separator character would have to be refused.
        "external_id": json.dumps(list(state.external_ids), ensure_ascii=False).encode("utf-8"),
        "candidate_mask": encode_array(np.asarray(state.original_candidates, dtype=bool)),
        "true_label": encode_array(np.asarray(truth, dtype=np.int64)),
    }


def save_item_columns(session: Session, state: SessionState) -> str | None:
    """Store the item columns of ``state``'s dataset as ``state`` read them; returns their
    token, or ``None`` (nothing stored) when the dataset's rows are no longer those ``state``
    was read from. Run in a write transaction.
    """
    dataset_id = check_int(state.config.dataset_id, "dataset_id")
    ids = np.asarray(state.instance_ids, dtype=np.int64)
    read = (int(ids.size), int(ids.min()) if ids.size else None, int(ids.max()) if ids.size else None)
    if _rows_fingerprint(session, dataset_id) != read:
        return None
    drop_item_columns(session, dataset_id)
    token = secrets.token_hex(16)
    for name, data in _encoded(state).items():
        # One column per statement: only one column's bytes are held besides the state.
        session.connection().execute(
            insert(ItemColumn.__table__),
            [
                {
                    "dataset_id": dataset_id,
                    "name": name,
                    "token": token,
                    "digest": part_digest(data),
                    "data": data,
                }
            ],
        )
    return token


def drop_item_columns(session: Session, dataset_id: int) -> None:
    """Delete the item columns and graph keys of a dataset (its instances are about to change)."""
    session.connection().execute(delete(ItemColumn.__table__).where(ItemColumn.dataset_id == dataset_id))


def load_item_columns(session: Session, dataset_id: int, n_instances: int, n_labels: int) -> ItemColumns | None:
    """The dataset's item columns, or ``None`` when they are missing or cannot be trusted
    (parts of two writes, bytes that do not match their digest, arrays of another shape or
    kind): the caller reads the rows then."""
    rows = session.execute(
        select(ItemColumn.name, ItemColumn.token, ItemColumn.digest, ItemColumn.data).where(
            ItemColumn.dataset_id == dataset_id, ItemColumn.name.in_(ITEM_COLUMNS)
        )
    ).all()
    if sorted(r.name for r in rows) != sorted(ITEM_COLUMNS) or len({r.token for r in rows}) != 1:
        return None
    data: dict[str, bytes] = {}
    for row in rows:
        if not digest_matches(row.data, row.digest):
            return None
        data[row.name] = bytes(row.data)
    try:
        ids = decode_array(data["instance_id"])
        masks = decode_array(data["candidate_mask"])
        truth = decode_array(data["true_label"])
        external = json.loads(data["external_id"].decode("utf-8"))
    except (ValueError, UnicodeDecodeError):  # json.JSONDecodeError is a ValueError
        return None
    if (
        ids.dtype != np.int64
        or ids.shape != (n_instances,)
        or masks.dtype != bool
        or masks.shape != (n_instances, n_labels)
        or truth.dtype != np.int64
        or truth.shape != (n_instances,)
        or not isinstance(external, list)
        or len(external) != n_instances
        or not set(map(type, external)) <= {str}
    ):
        return None
    return ItemColumns(
        token=str(rows[0].token),
        instance_ids=ids,
        external_ids=tuple(external),
        candidates=masks,
        true_labels=None if bool((truth < 0).all()) else truth,
    )


def current_token(session: Session, dataset_id: int) -> str | None:
    """The token of the dataset's item columns as they are now (``None``: none stored)."""
    return session.scalar(
        select(ItemColumn.token).where(ItemColumn.dataset_id == dataset_id, ItemColumn.name == ITEM_COLUMNS[0])
    )


def _graph_key_name(params: str) -> str:
    return _GRAPH_KEY + hashlib.sha256(params.encode()).hexdigest()


def find_graph_key(session: Session, dataset_id: int, token: str, params: str) -> str | None:
    """The graph key stored for ``params`` under ``token``, if that is still the dataset's
    current token (``None`` otherwise)."""
    row = session.execute(
        select(ItemColumn.token, ItemColumn.digest, ItemColumn.data).where(
            ItemColumn.dataset_id == dataset_id, ItemColumn.name == _graph_key_name(params)
        )
    ).first()
    if row is None or row.token != token or not digest_matches(row.data, row.digest):
        return None
    return row.data.decode("ascii") if current_token(session, dataset_id) == token else None


def save_graph_key(session: Session, dataset_id: int, token: str, params: str, key: str) -> bool:
    """Store ``key``, hashed from the features read with the item columns of ``token``, for
    ``params``; returns whether it was stored (not when ``token`` is no longer current).
    Run in a write transaction."""
    if current_token(session, dataset_id) != token:
        return False
    name = _graph_key_name(params)
    data = key.encode("ascii")
    table = ItemColumn.__table__
    session.connection().execute(delete(table).where(ItemColumn.dataset_id == dataset_id, ItemColumn.name == name))
    session.connection().execute(
        insert(table),
        [
            {
                "dataset_id": dataset_id,
                "name": name,
                "token": token,
                "digest": part_digest(data),
                "data": data,
            }
        ],
    )
    return True
