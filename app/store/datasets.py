"""Datasets in the store: validate, write all instances or none, and look them up.

:func:`create_dataset` checks every argument with one small function each (features, ids,
label names, candidate sets, true labels, feature names, layout) before it writes; the write
runs inside a SAVEPOINT of the caller's session, so a failure (bad input, a crash half-way
through the inserts) leaves no dataset and no instance behind. The rules shared with the file
readers (distinct ids, true label inside its candidate set, image layouts) come from
:mod:`app.dataset_rules`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import numpy as np
from sqlalchemy import insert, or_, select
from sqlalchemy.orm import Session

from app.dataset_rules import first_repeat, first_true_label_outside, image_shape
from app.store.checks import NAME_MAX, check_int, check_name, check_text, describe_row, format_label_set
from app.store.errors import InvalidRecord, RecordNotFound
from app.store.features import drop_feature_matrix, save_feature_matrix
from app.store.item_columns import drop_item_columns
from app.store.models import (
    LINK_MAX,
    MAX_LABELS,
    MEDIA_KINDS,
    MEDIA_PATH_MAX,
    MEDIA_ROOT_MAX,
    Dataset,
    Instance,
    encode_candidate_masks,
)
from app.store.votes import CheckedVotes, VoteSpec, check_votes, write_votes

__all__ = [
    "DatasetSpec",
    "CheckedDataset",
    "check_dataset",
    "check_dataset_name_free",
    "create_dataset",
    "list_datasets",
    "get_dataset_by_name",
    "get_dataset_by_id",
    "INSERT_CHUNK",
    "insert_instances",
    "write_instances",
    "DatasetContent",
    "StoredFeaturizer",
    "dataset_content",
    "dataset_featurizer",
]

#: Instances are inserted in chunks of this many rows (one executemany each).
INSERT_CHUNK = 20_000
_LAYOUT_MAX = 100


@dataclass(frozen=True, eq=False)
class DatasetSpec:
    """A dataset as a caller hands it to the store, before any check: one typed record.

    :func:`check_dataset` checks it into a :class:`CheckedDataset`; :func:`create_dataset`
    and :func:`app.store.import_dataset` write it.

    Attributes
    ----------
    name : str
        Unique dataset name.
    X : array of shape (n_instances, n_features)
        Finite float features.
    candidates : array of shape (n_instances, n_labels), bool
        Candidate sets; every row needs at least one ``True``. 0/1 integers are accepted.
    label_names : sequence of str, length n_labels
        Distinct label names; label index ``j`` is ``label_names[j]``.
    external_ids : sequence of str, length n_instances
        Distinct, non-empty instance identifiers (file names, row keys...).
    true_labels : array of shape (n_instances,), int, optional
        For simulations only; ``-1`` where unknown. A known true label must be a candidate.
    feature_names : sequence of str, length n_features, optional
    layout : str, optional
        How to draw a feature row, e.g. ``"image:8x8"`` (then ``8 * 8 == n_features``).
    texts : sequence of (str or None), length n_instances, optional
        Each item's text; ``None`` (or a blank text) for an item without one.
    media_paths : sequence of (str or None), length n_instances, optional
        Each item's media file, relative to ``media_root`` with ``/`` separators (no ``..``,
        not absolute); ``None`` for an item without one. Needs ``media_kinds`` and
        ``media_root``.
    media_kinds : sequence of (str or None), length n_instances, optional
        ``"image"`` or ``"audio"`` where ``media_paths`` has a path, ``None`` where it has none.
    links : sequence of (str or None), length n_instances, optional
        An ``http://`` or ``https://`` URL per item, or ``None``.
    media_root : str, optional
        Absolute folder the media paths are relative to.
    featurizer, featurizer_params, featurizer_state : optional
        The featurizer that computed ``X`` (name, JSON-serialisable parameters, pickle-free
        state bytes), as :class:`app.io.featurizers.FeaturizerRecord` holds them; all three or
        none (``featurizer_state`` may be ``b""``).
    votes : VoteSpec, optional
        The crowd votes the candidate sets were made from (:mod:`app.store.votes`), written
        with the instances.
    label_studio_control : tuple of (str, str, str), optional
        The ``from_name``, ``to_name`` and content ``data`` key of the Label Studio project the
        dataset was read from.
    """

    name: str
    X: np.ndarray
    candidates: np.ndarray
    label_names: Sequence[str]
    external_ids: Sequence[str]
    true_labels: np.ndarray | None = None
    feature_names: Sequence[str] | None = None
    layout: str | None = None
    texts: Sequence[str | None] | None = None
    media_paths: Sequence[str | None] | None = None
    media_kinds: Sequence[str | None] | None = None
    links: Sequence[str | None] | None = None
    media_root: str | None = None
    featurizer: str | None = None
    featurizer_params: Mapping[str, Any] | None = None
    featurizer_state: bytes | None = None
    votes: VoteSpec | None = None
    label_studio_control: tuple[str, str, str] | None = None


def _spec(spec: DatasetSpec | None, fields: dict[str, Any]) -> DatasetSpec:
    """``spec``, or one made of the keyword ``fields`` (the older calling form)."""
    if spec is None:
        return DatasetSpec(**fields)
    if fields:
        raise TypeError(f"give a DatasetSpec or its fields as keywords, not both; got also {sorted(fields)}")
    if not isinstance(spec, DatasetSpec):
        raise TypeError(f"spec must be a DatasetSpec, got {type(spec).__name__}")
    return spec


@dataclass(frozen=True, eq=False)
class CheckedDataset:
    """A dataset that passed every check of :func:`check_dataset`, ready to be written.

    Attributes
    ----------
    name : str
    X : array of shape (n_instances, n_features), float64
    candidates : array of shape (n_instances, n_labels), bool
    label_names, external_ids : list of str
    true_labels : array of shape (n_instances,), int64, or None
    feature_names : list of str or None
    layout : str or None
    content
        The items' texts, media paths and kinds, links and the media root, checked.
    featurizer
        The featurizer record (name, parameters, state), checked.
    votes : CheckedVotes or None
        The crowd votes, checked and sorted by item.
    label_studio_control : dict or None
        ``{"from_name", "to_name", "data_key"}`` of the Label Studio project it was read from.
    """

    name: str
    X: np.ndarray
    candidates: np.ndarray
    label_names: list[str]
    external_ids: list[str]
    true_labels: np.ndarray | None
    feature_names: list[str] | None
    layout: str | None
    content: _Content
    featurizer: _FeaturizerRow
    votes: CheckedVotes | None = None
    label_studio_control: dict[str, str] | None = None

    @property
    def n_instances(self) -> int:
        return int(self.X.shape[0])

    def new_row(self, *, published: bool = True) -> Dataset:
        """The :class:`Dataset` row of this dataset (not yet added to a session)."""
        n, d = self.X.shape
        # Set only when there is one: an INSERT without the column also works on a store
        # that an older test or tool keeps at a revision before it (0017).
        extra = {"label_studio_control": self.label_studio_control} if self.label_studio_control else {}
        return Dataset(
            name=self.name,
            label_names=self.label_names,
            n_instances=n,
            n_features=d,
            feature_names=self.feature_names,
            layout=self.layout,
            media_root=self.content.media_root,
            featurizer=self.featurizer.name,
            featurizer_params=self.featurizer.params,
            featurizer_state=self.featurizer.state,
            published=published,
            **extra,
        )


def check_dataset(spec: DatasetSpec | None = None, /, **fields: Any) -> CheckedDataset:
    """Check a :class:`DatasetSpec` (or its fields given as keywords) without touching the database.

    Raises
    ------
    InvalidRecord
        On any bad value; ``.row`` is the 0-based position of the offending instance when there
        is one (messages count rows from 1, as a person does).
    """
    spec = _spec(spec, fields)
    name = check_name(spec.name, "name")
    features = _check_features(spec.X)
    n, d = features.shape
    ids = _check_external_ids(spec.external_ids, n)
    _check_finite_rows(features, ids)
    labels = _check_label_names(spec.label_names)
    Y = _check_candidate_sets(spec.candidates, n, len(labels), ids)
    truth = _check_true_labels(spec.true_labels, Y, labels, ids)
    features_meta = _check_feature_names(spec.feature_names, d)
    layout = _check_layout(spec.layout, d)
    content = _check_content(spec.texts, spec.media_paths, spec.media_kinds, spec.links, spec.media_root, ids)
    record = _check_featurizer(spec.featurizer, spec.featurizer_params, spec.featurizer_state)
    votes = None if spec.votes is None else check_votes(spec.votes, n_instances=n, n_labels=len(labels))
    control = _check_label_studio_control(spec.label_studio_control)
    return CheckedDataset(name, features, Y, labels, ids, truth, features_meta, layout, content, record, votes, control)


def _check_label_studio_control(control: Any) -> dict[str, str] | None:
    if control is None:
        return None
    keys = ("from_name", "to_name", "data_key")
    if not isinstance(control, tuple) or len(control) != len(keys):
        raise TypeError(f"label_studio_control must be a (from_name, to_name, data_key) tuple, got {control!r}")
    return {key: check_name(value, key) for key, value in zip(keys, control, strict=True)}


def check_dataset_name_free(session: Session, name: str) -> None:
    """Raise :class:`InvalidRecord` when a dataset (published or still importing) has ``name``."""
    taken = session.execute(select(Dataset.published, Dataset.staged_by).where(Dataset.name == name)).first()
    if taken is None:
        return
    published, staged_by = taken
    if published:
        raise InvalidRecord(f"name: a dataset called {name!r} already exists")
    raise InvalidRecord(
        f"name: a dataset called {name!r} is being imported (by {staged_by}); wait for it or choose another name"
    )


def create_dataset(session: Session, spec: DatasetSpec | None = None, /, **fields: Any) -> Dataset:
    """Validate a dataset and write it with all its instances, all or nothing.

    In the caller's transaction: for large files prefer :func:`app.store.import_dataset`, which
    does not hold the write lock for the whole load.

    Parameters
    ----------
    session : Session
        The caller commits (or uses :func:`app.store.db.write_transaction`). The write runs in
        a SAVEPOINT, so a failure leaves no dataset and no instance behind.
    spec : DatasetSpec
        The dataset; its fields may be given as keywords instead.

    Returns
    -------
    Dataset
        Flushed (it has its ``id``).

    Raises
    ------
    InvalidRecord
        On any bad value; ``.row`` names the offending row when there is one.
    """
    checked = check_dataset(_spec(spec, fields))
    check_dataset_name_free(session, checked.name)

    with session.begin_nested():
        dataset = checked.new_row()
        session.add(dataset)
        session.flush()
        write_instances(session, dataset.id, checked)
        save_feature_matrix(session, dataset.id, checked.X)
    return dataset


@dataclass(frozen=True)
class DatasetContent:
    """What a person looks at for every item of a dataset, as stored (paths not resolved).

    Attributes
    ----------
    media_root : str or None
        Absolute folder the media paths are relative to.
    texts, media_paths, media_kinds, links : tuple of (str or None), length n_instances
        Per position; ``media_paths`` are relative, ``/``-separated. All ``None`` for a
        dataset without content.
    """

    media_root: str | None
    texts: tuple[str | None, ...]
    media_paths: tuple[str | None, ...]
    media_kinds: tuple[str | None, ...]
    links: tuple[str | None, ...]

    @functools.cached_property
    def has_content(self) -> bool:
        """Whether any item has a text, a media file or a link (a pass over every item, once:
        the Query page asks for each thumbnail)."""
        return any(value is not None for column in (self.texts, self.media_paths, self.links) for value in column)


@dataclass(frozen=True)
class StoredFeaturizer:
    """The featurizer record stored on a dataset (see :class:`app.io.featurizers.FeaturizerRecord`)."""

    name: str
    params: dict[str, Any]
    state: bytes


def dataset_content(session: Session, dataset_id: int) -> DatasetContent:
    """Every item's content of dataset ``dataset_id``, in position order (one ``SELECT``).

    A dataset none of whose items has any content (features alone) is found with one query
    that stops at the first item with some, and gets its all-``None`` columns without reading
    every item (at 100,000 items, about half of a ranked export's reading).
    """
    dataset = get_dataset_by_id(session, dataset_id)
    stored = (
        Instance.text.is_not(None),
        Instance.media_path.is_not(None),
        Instance.media_kind.is_not(None),
        Instance.link.is_not(None),
    )
    some = session.execute(select(Instance.id).where(Instance.dataset_id == dataset_id, or_(*stored)).limit(1)).first()
    if some is None:
        nothing: tuple[str | None, ...] = (None,) * dataset.n_instances
        return DatasetContent(dataset.media_root, nothing, nothing, nothing, nothing)
    rows = session.execute(
        select(Instance.text, Instance.media_path, Instance.media_kind, Instance.link)
        .where(Instance.dataset_id == dataset_id)
        .order_by(Instance.position)
    ).all()
    texts, paths, kinds, links = zip(*rows, strict=True) if rows else ((), (), (), ())
    return DatasetContent(dataset.media_root, tuple(texts), tuple(paths), tuple(kinds), tuple(links))


def dataset_featurizer(session: Session, dataset_id: int) -> StoredFeaturizer | None:
    """The featurizer record of dataset ``dataset_id``; ``None`` when its features were given."""
    dataset = get_dataset_by_id(session, dataset_id)
    if dataset.featurizer is None:
        return None
    return StoredFeaturizer(
        dataset.featurizer, dict(dataset.featurizer_params or {}), bytes(dataset.featurizer_state or b"")
    )


def list_datasets(session: Session) -> list[Dataset]:
    """Every published dataset, oldest first (an import still running is not listed)."""
    return list(session.scalars(select(Dataset).where(Dataset.published).order_by(Dataset.id)))


def get_dataset_by_name(session: Session, name: str) -> Dataset:
    """The dataset called ``name``; :class:`RecordNotFound` lists the known ones otherwise."""
    # No stored name holds a NUL (and PostgreSQL cannot even compare with one).
    found = select(Dataset).where(Dataset.name == name, Dataset.published)
    dataset = session.scalar(found) if "\x00" not in name else None
    if dataset is None:
        known = session.scalars(select(Dataset.name).where(Dataset.published).order_by(Dataset.id)).all()
        raise RecordNotFound(f"no dataset called {name!r}; known datasets: {known}")
    return dataset


def get_dataset_by_id(session: Session, dataset_id: int) -> Dataset:
    """The dataset with id ``dataset_id``; :class:`RecordNotFound` otherwise."""
    dataset = session.get(Dataset, check_int(dataset_id, "dataset_id"))
    if dataset is None or not dataset.published:
        raise RecordNotFound(f"dataset_id {dataset_id} does not exist")
    return dataset


def insert_instances(session: Session, rows: list[dict[str, Any]]) -> None:
    """One bulk INSERT of instance rows (a Core executemany: the ORM bulk path is about twice
    as slow)."""
    session.connection().execute(insert(Instance.__table__), rows)


# --------------------------------------------------------------------------------------------
# Checks, one per argument of create_dataset


def _check_features(X: Any) -> np.ndarray:
    arr = np.asarray(X)
    if arr.ndim != 2:
        raise InvalidRecord(f"X must be 2-D (n_instances, n_features), got shape {arr.shape}")
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"X must hold numbers, got dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr, dtype="<f8")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise InvalidRecord(f"X must have at least one row and one column, got shape {arr.shape}")
    return arr


def _check_finite_rows(X: np.ndarray, ids: Sequence[str]) -> None:
    bad_rows = np.flatnonzero(~np.isfinite(X).all(axis=1))
    if bad_rows.size:
        row = int(bad_rows[0])
        raise InvalidRecord(
            f"X: {describe_row(row, ids)} holds a NaN or infinite value ({bad_rows.size} such rows)", row=row
        )


def _check_external_ids(external_ids: Any, n: int) -> list[str]:
    if not isinstance(external_ids, Sequence) or isinstance(external_ids, str):
        external_ids = list(external_ids)  # numpy arrays, pandas Index, ...
    ids = [str(e) if isinstance(e, (np.str_, np.integer)) else e for e in external_ids]
    if len(ids) != n:
        raise InvalidRecord(f"external_ids has {len(ids)} entries but X has {n} rows")
    for position, ext in enumerate(ids):
        if not isinstance(ext, str):
            raise TypeError(f"external_ids[{position}] must be a str, got {type(ext).__name__} {ext!r}")
        if not ext.strip():
            raise InvalidRecord(f"external_ids: row {position + 1} has an empty external id", row=position)
        if "\x00" in ext:
            raise InvalidRecord(
                f"external_ids: row {position + 1} has an external id holding a NUL character ({ext[:40]!r})",
                row=position,
            )
        check_text(ext, "external_ids", row=position)
        if len(ext) > NAME_MAX:
            raise InvalidRecord(
                f"external_ids: row {position + 1} has an external id longer than {NAME_MAX} characters", row=position
            )
    repeat = first_repeat(ids)
    if repeat is not None:
        position, earlier = repeat
        raise InvalidRecord(
            f"external_ids: row {position + 1} repeats external id {ids[position]!r} of row {earlier + 1}", row=position
        )
    return ids


def _check_label_names(label_names: Any) -> list[str]:
    if isinstance(label_names, str) or not isinstance(label_names, Iterable):
        raise TypeError("label_names must be a sequence of str")
    labels = list(label_names)
    if not labels:
        raise InvalidRecord("label_names is empty")
    for j, label in enumerate(labels):
        check_name(label, f"label_names[{j}]")
    if len(set(labels)) != len(labels):
        dupes = sorted({x for x in labels if labels.count(x) > 1})
        raise InvalidRecord(f"label_names repeats {dupes}")
    if len(labels) > MAX_LABELS:
        raise InvalidRecord(f"label_names has {len(labels)} labels; at most {MAX_LABELS} are supported")
    return labels


def _check_candidate_sets(candidates: Any, n: int, m: int, ids: Sequence[str]) -> np.ndarray:
    Y = np.asarray(candidates)
    if Y.dtype != bool:
        if not np.issubdtype(Y.dtype, np.integer) or not np.isin(Y, (0, 1)).all():
            raise TypeError(f"candidates must be a bool (or 0/1) array, got dtype {Y.dtype}")
        Y = Y.astype(bool)
    if Y.shape != (n, m):
        raise InvalidRecord(f"candidates has shape {Y.shape}; expected (n_instances, n_labels) = ({n}, {m})")
    empty = np.flatnonzero(~Y.any(axis=1))
    if empty.size:
        row = int(empty[0])
        raise InvalidRecord(
            f"candidates: {describe_row(row, ids)} has an empty candidate set ({empty.size} such rows); "
            "every instance needs at least one candidate label",
            row=row,
        )
    return Y


def _check_true_labels(true_labels: Any, Y: np.ndarray, labels: Sequence[str], ids: Sequence[str]) -> np.ndarray | None:
    """The true labels as int64 (``-1`` unknown), or ``None`` when none is known."""
    if true_labels is None:
        return None
    n, m = Y.shape
    truth = np.asarray(true_labels)
    if truth.shape != (n,):
        raise InvalidRecord(f"true_labels has shape {truth.shape}; expected ({n},)")
    if not np.issubdtype(truth.dtype, np.integer):
        raise TypeError(f"true_labels must be integers (-1 = unknown), got dtype {truth.dtype}")
    truth = truth.astype(np.int64)
    out = np.flatnonzero((truth < -1) | (truth >= m))
    if out.size:
        row = int(out[0])
        raise InvalidRecord(
            f"true_labels: {describe_row(row, ids)} has label {truth[row]}, not -1 or an index in [0, {m})", row=row
        )
    outside = first_true_label_outside(truth, Y)
    if outside is not None:
        raise InvalidRecord(
            f"true_labels: {describe_row(outside, ids)} has true label {labels[truth[outside]]!r} "
            f"outside its candidate set {format_label_set(labels, Y[outside])}",
            row=outside,
        )
    return truth if (truth >= 0).any() else None


def _check_feature_names(feature_names: Sequence[str] | None, d: int) -> list[str] | None:
    if feature_names is None:
        return None
    names = list(feature_names)
    if len(names) != d:
        raise InvalidRecord(f"feature_names has {len(names)} names but X has {d} columns")
    for j, fname in enumerate(names):
        check_name(fname, f"feature_names[{j}]")
    if len(set(names)) != d:
        raise InvalidRecord("feature_names holds duplicates")
    return names


def _check_layout(layout: str | None, d: int) -> str | None:
    if layout is None:
        return None
    layout = check_name(layout, "layout", max_length=_LAYOUT_MAX)
    if layout.startswith("image:") and image_shape(layout, d) is None:
        raise InvalidRecord(f"layout {layout!r} does not fit {d} features; expected 'image:HxW' with H*W = {d}")
    return layout


@dataclass(frozen=True)
class _Content:
    texts: list[str | None]
    media_paths: list[str | None]
    media_kinds: list[str | None]
    links: list[str | None]
    media_root: str | None


def _optional_strings(values: Any, parameter: str, n: int) -> list[str | None]:
    if values is None:
        return [None] * n
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{parameter} must be a sequence with one entry per instance, not a single string")
    out = list(values)
    if len(out) != n:
        raise InvalidRecord(f"{parameter} has {len(out)} entries but there are {n} instances")
    for position, value in enumerate(out):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{parameter}[{position}] must be a str or None, got {type(value).__name__}")
        if value is not None and "\x00" in value:
            raise InvalidRecord(f"{parameter}: row {position + 1} holds a NUL character", row=position)
    return out


def _check_content(
    texts: Any, media_paths: Any, media_kinds: Any, links: Any, media_root: Any, ids: Sequence[str]
) -> _Content:
    n = len(ids)
    text_values = [t if t is not None and t.strip() else None for t in _optional_strings(texts, "texts", n)]
    for position, text in enumerate(text_values):
        if text is not None:
            check_text(text, "texts", row=position, line_breaks=True)
    paths = _optional_strings(media_paths, "media_paths", n)
    kinds = _optional_strings(media_kinds, "media_kinds", n)
    link_values = _optional_strings(links, "links", n)
    for position, (path, kind) in enumerate(zip(paths, kinds, strict=True)):
        where = describe_row(position, ids)
        if (path is None) != (kind is None):
            raise InvalidRecord(
                f"media_paths/media_kinds: {where} has a media path without a kind or a kind without a path",
                row=position,
            )
        if path is None:
            continue
        check_text(path, "media_paths", row=position)
        if kind not in MEDIA_KINDS:
            raise InvalidRecord(
                f"media_kinds: {where} is {kind!r}; expected one of {', '.join(MEDIA_KINDS)}", row=position
            )
        pure = PurePosixPath(path)
        if not path.strip() or pure.is_absolute() or "\\" in path or ".." in pure.parts or len(path) > MEDIA_PATH_MAX:
            raise InvalidRecord(
                f"media_paths: {where} is {path[:80]!r}; a media path is relative to the media root, "
                f"'/'-separated, without '..', at most {MEDIA_PATH_MAX} characters",
                row=position,
            )
    for position, link in enumerate(link_values):
        if link is not None:
            check_text(link, "links", row=position)
        if link is not None and (
            not link.startswith(("http://", "https://")) or len(link) > LINK_MAX or any(ch.isspace() for ch in link)
        ):
            raise InvalidRecord(
                f"links: {describe_row(position, ids)} is {link[:80]!r}; a link is an http(s) URL without "
                f"spaces of at most {LINK_MAX} characters",
                row=position,
            )
    if media_root is not None:
        if not isinstance(media_root, str):
            raise TypeError(f"media_root must be a str, got {type(media_root).__name__}")
        if not media_root.startswith("/") and not (len(media_root) > 2 and media_root[1] == ":"):
            raise InvalidRecord(f"media_root must be an absolute folder, got {media_root[:80]!r}")
        if len(media_root) > MEDIA_ROOT_MAX or "\x00" in media_root:
            raise InvalidRecord(f"media_root is longer than {MEDIA_ROOT_MAX} characters or holds a NUL")
    if any(p is not None for p in paths) and media_root is None:
        raise InvalidRecord("media_root is needed when items have media paths")
    return _Content(text_values, paths, kinds, link_values, media_root)


@dataclass(frozen=True)
class _FeaturizerRow:
    name: str | None
    params: dict[str, Any] | None
    state: bytes | None


def _check_featurizer(name: Any, params: Any, state: Any) -> _FeaturizerRow:
    if name is None:
        if params is not None or state is not None:
            raise InvalidRecord("featurizer_params and featurizer_state need a featurizer name")
        return _FeaturizerRow(None, None, None)
    name = check_name(name, "featurizer", max_length=100)
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise TypeError(f"featurizer_params must be a mapping, got {type(params).__name__}")
    try:
        plain = json.loads(json.dumps(dict(params), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidRecord(f"featurizer_params must be JSON-serialisable: {exc}") from None
    if state is None:
        state = b""
    if not isinstance(state, (bytes, bytearray, memoryview)):
        raise TypeError(f"featurizer_state must be bytes, got {type(state).__name__}")
    return _FeaturizerRow(name, plain, bytes(state))


def write_instances(
    session: Session, dataset_id: int, checked: CheckedDataset, start: int = 0, stop: int | None = None
) -> None:
    """Insert the instances ``start .. stop - 1`` of a checked dataset, :data:`INSERT_CHUNK` rows
    per bulk INSERT.

    The dataset's stored feature blocks (:mod:`app.store.features`) and item columns
    (:mod:`app.store.item_columns`) are deleted first: they would no longer cover its rows.
    Whoever publishes the rows writes the blocks again; the next open, the columns. The votes
    of these instances (:mod:`app.store.votes`) are written in the same transaction.
    """
    stop = checked.n_instances if stop is None else stop
    drop_feature_matrix(session, dataset_id)
    drop_item_columns(session, dataset_id)
    masks = encode_candidate_masks(checked.candidates[start:stop])
    truth = checked.true_labels
    X, ids, content = checked.X, checked.external_ids, checked.content
    for chunk in range(start, stop, INSERT_CHUNK):
        rows = [
            {
                "dataset_id": dataset_id,
                "position": i,
                "external_id": ids[i],
                "features": X[i].tobytes(),
                "candidate_mask": masks[i - start],
                "true_label": int(truth[i]) if truth is not None and truth[i] >= 0 else None,
                "text": content.texts[i],
                "media_path": content.media_paths[i],
                "media_kind": content.media_kinds[i],
                "link": content.links[i],
            }
            for i in range(chunk, min(chunk + INSERT_CHUNK, stop))
        ]
        insert_instances(session, rows)
    if checked.votes is not None:
        write_votes(session, dataset_id, checked.votes, start, stop)
