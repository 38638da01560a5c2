"""Tables winnow exports: the ranked query list and the labelled dataset, as CSV, JSON or Parquet.

Ranked query list (:func:`ranked_query_table`)
----------------------------------------------
One row per *partially* labelled item (candidate set of two or more labels), most useful
question first, in the order of :func:`engine.query.ranking_order` (the order the Query page
and ``winnow session status`` show): deferred (skipped) items last, then score, highest first,
then dataset order. Precise items are left out: asking about them teaches nothing.

=============================  =================================================================
column                         meaning
=============================  =================================================================
``rank``                       1-based position in the list (1 = ask this first).
``id``                         The item's id, as in the imported file.
``score``                      Query score of the chosen criterion. For ``apl`` / ``pl``: the
                               number of targets whose necessary or (approximate) possible labels
                               at least one answer about this item could change. Higher is more
                               useful; ties keep the dataset order; skipped items come last
                               whatever their score.
``candidates``                 The item's current candidate labels, joined by ``|``
                               (a JSON list in ``.json`` output).
``n_candidates``               Size of the candidate set (always >= 2).
``open_targets_touched``       How many currently open targets (necessary labels ≠ approximate
                               possible labels) have this item among their k nearest neighbours.
``criterion``                  The scoring criterion, e.g. ``apl`` or ``pl``.
``params``                     The scoring parameters as compact JSON, e.g. ``{"k":10,...}``.
``text``, ``media_path``,      Only for items with content (:data:`CONTENT_COLUMNS`): the item's
``link``                       text, its image or audio file relative to the dataset's media root,
                               its http(s) link; empty where an item has none.
=============================  =================================================================

Labelled dataset (:func:`labelled_dataset_table`)
-------------------------------------------------
:data:`LABELLED_COLUMNS`, then the content columns (as above) when the items have content, then
the features when asked. ``label`` is the label name when one candidate is left (written as the
name: ``3``, never ``3.0``), ``none_of_these`` is ``True`` for an item an annotator flagged as
fitting none of its candidates (its ``label`` is then empty).

Output formats (:func:`write_table`, by extension)
--------------------------------------------------
``.csv`` / ``.tsv``
    All columns as above. A text cell a spreadsheet would run as a formula (starting with ``=``,
    ``+``, ``-``, ``@``, tab or carriage return) is written with a leading ``'``; numbers,
    including negative ones, are written as they are. :func:`app.io.read_dataset` removes the
    ``'`` again when it reads such a file.
``.json``
    For the two winnow tables an object ``{"table": ..., <table metadata>, "rows": [...]}``: the
    ranked list gives ``{"table": "ranked_queries", "criterion": ..., "params": {...},
    "rows": [...]}`` with the per-row ``criterion`` / ``params`` hoisted out; the labelled dataset
    gives ``{"table": "labelled_dataset", "label_names": [...], "rows": [...]}``. In rows,
    ``candidates`` is a list of label names and missing values are ``null``. Any other DataFrame
    is written as a plain list of row objects.
    A session's labelled export (:mod:`app.service.delivery`) adds ``"metadata": {...}`` after
    ``"table"``: the target error, the confidence, the audit share, the stated error bound (null
    when none is stated), the threshold, the number of audited answers, the counts per label
    source and the statement line, and what its ``suspect`` and ``suspicion`` columns mean
    (``suspect_column``, ``suspicion_column``, ``fdr``).
``.jsonl``
    JSON Lines: one row object per line, as in the ``rows`` of ``.json``; rows only, no
    metadata (the format ML pipelines stream).
``.parquet``
    The DataFrame as is (``candidates`` as the ``|``-joined string); a labelled export's
    metadata (as in ``.json``) is the file's key-value metadata under the key ``winnow``, a
    JSON object (``pyarrow.parquet.read_schema(path).metadata[b"winnow"]``).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import re
import secrets
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pandas as pd

from app.crash_points import crash_point
from app.io.errors import DataFileError
from engine import check_candidates
from engine.exceptions import InvalidInput
from engine.query import ranking_order

__all__ = [
    "RANKED_COLUMNS",
    "LABELLED_COLUMNS",
    "EXPORT_ONLY_COLUMNS",
    "CONTENT_COLUMNS",
    "TABLE_EXTENSIONS",
    "FORMULA_PREFIXES",
    "neutralise_formulas",
    "ranked_query_table",
    "labelled_dataset_table",
    "write_table",
    "atomic_file",
    "EXPORT_MODE",
]

#: Mode of every file winnow writes (exports, unpacked uploads): its owner's alone. An export
#: holds who answered what; another local user has no business reading it.
EXPORT_MODE = 0o600

RANKED_COLUMNS: tuple[str, ...] = (
    "rank",
    "id",
    "score",
    "candidates",
    "n_candidates",
    "open_targets_touched",
    "criterion",
    "params",
)
LABELLED_COLUMNS: tuple[str, ...] = (
    "id",
    "candidates",
    "n_candidates",
    "label",
    "resolved",
    "none_of_these",
    "answered_by",
    "answered_at",
    "true_label",
)
"""Columns of :func:`labelled_dataset_table` before any content and feature columns
(``true_label`` only when true labels are given). Pass ``ignore_columns=EXPORT_ONLY_COLUMNS``
to :func:`app.io.read_dataset` to import an export that includes features (its ``text``
column is then read as the items' text)."""
EXPORT_ONLY_COLUMNS: tuple[str, ...] = (
    *(c for c in LABELLED_COLUMNS if c not in ("id", "candidates", "true_label")),
    "label_source",
    "model_margin",
    "suspect",
    "suspicion",
)
"""The columns of :data:`LABELLED_COLUMNS` (and the ``label_source`` and ``model_margin`` a
session's labelled export adds, :mod:`app.service.delivery`, and its ``suspect`` flag and
``suspicion``, :mod:`app.service.suspects`) that have no role when an export is
read back: the others are its ids, candidate sets and true labels, which cannot be ignored."""
CONTENT_COLUMNS: tuple[str, ...] = ("text", "media_path", "link")
"""Content columns an export may carry, in this order, each only when some item has it."""
TABLE_EXTENSIONS: tuple[str, ...] = (".csv", ".tsv", ".json", ".jsonl", ".parquet")
FORMULA_PREFIXES: tuple[str, ...] = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet treat a text cell as a formula."""

_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


# --------------------------------------------------------------------------------------------
# Ranked query list
# --------------------------------------------------------------------------------------------


def ranked_query_table(
    scores: Any,
    candidates: Any,
    label_names: Sequence[str],
    ids: Sequence[str],
    touched: Any,
    *,
    criterion: str,
    params: Mapping[str, Any],
    include: Any = None,
    also: Any = None,
    deferred: Any = None,
    content: Mapping[str, Sequence[str | None] | None] | None = None,
) -> pd.DataFrame:
    """The ranked query list: partially labelled items, highest query score first.

    Parameters
    ----------
    scores : array-like of shape (n_instances,)
        Query score of every instance (finite).
    candidates : array-like of shape (n_instances, n_labels), bool
        Current candidate sets.
    label_names : sequence of str, length n_labels
    ids : sequence of str, length n_instances
    touched : array-like of shape (n_instances,), int
        Number of currently open targets that have the instance among their neighbours
        (:func:`engine.query.open_neighbourhoods`).
    criterion : str
        Name of the scoring criterion, e.g. ``"apl"``.
    params : mapping
        Scoring parameters (JSON-serialisable), e.g. ``{"k": 10, "weighting": "uniform"}``.
    include : array-like of shape (n_instances,), bool, optional
        Items that may be asked about; others are left out even when partial (a labelling
        session sets aside items in conflict or flagged "none of these").
    also : array-like of shape (n_instances,), bool, optional
        Items asked although their set holds a single label (a session's suspect items:
        :mod:`app.service.suspects`).
    deferred : array-like of shape (n_instances,), bool, optional
        Items ranked after all others whatever their score (a session's skipped items).
    content : mapping, optional
        ``{"text": [...], "media_path": [...], "link": [...]}`` (any subset of
        :data:`CONTENT_COLUMNS`, one entry per instance, ``None`` where an item has none);
        columns that hold at least one value are appended.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`RANKED_COLUMNS` (then the content columns), documented in this module's
        docstring; one row per item whose candidate set has two or more labels (and per item
        ``also`` marks), in the order of
        :func:`engine.query.ranking_order` (deferred last, ``score`` descending, ties in
        dataset order). ``df.attrs`` holds ``table="ranked_queries"``, ``criterion`` and ``params``
        (used by :func:`write_table` for JSON).
    """
    Y = check_candidates(candidates, name="candidates")
    n, M = Y.shape
    score_arr = _vector(scores, "scores", n, kind="f")
    touched_arr = _vector(touched, "touched", n, kind="i")
    names = _names(label_names, "label_names", M)
    id_list = _names(ids, "ids", n)
    if not isinstance(criterion, str) or not criterion:
        raise InvalidInput(f"criterion must be a non-empty string, got {criterion!r}")
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a mapping, got {type(params).__name__}")
    params_dict = {str(key): _json_value(value) for key, value in params.items()}
    try:
        params_json = json.dumps(params_dict, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"params must be JSON-serialisable: {exc}") from None

    sizes = Y.sum(axis=1)
    askable = sizes >= 2
    if include is not None:
        askable &= _flags(include, "include", n)
    if also is not None:
        askable |= _flags(also, "also", n)
    later = None if deferred is None else _flags(deferred, "deferred", n)
    order = ranking_order(score_arr, askable, deferred=later)
    table = pd.DataFrame(
        {
            "rank": np.arange(1, order.shape[0] + 1, dtype=np.int64),
            "id": pd.Series([id_list[i] for i in order], dtype=object),
            "score": score_arr[order],
            "candidates": pd.Series(_joined_sets(names, Y[order]), dtype=object),
            "n_candidates": sizes[order].astype(np.int64),
            "open_targets_touched": touched_arr[order],
            "criterion": pd.Series([criterion] * order.shape[0], dtype=object),
            "params": pd.Series([params_json] * order.shape[0], dtype=object),
        },
        columns=list(RANKED_COLUMNS),
    )
    for name, values in _content_columns(content, n).items():
        table[name] = pd.Series([values[i] for i in order], dtype=object)
    table.attrs = {"table": "ranked_queries", "criterion": criterion, "params": params_dict}
    return table


def _content_columns(content: Mapping[str, Sequence[str | None] | None] | None, n: int) -> dict[str, list[str | None]]:
    """The content columns worth writing: known names, one entry per item, some value present."""
    if content is None:
        return {}
    if not isinstance(content, Mapping):
        raise TypeError(f"content must be a mapping of column name to values, got {type(content).__name__}")
    unknown = sorted(set(content) - set(CONTENT_COLUMNS))
    if unknown:
        raise InvalidInput(f"content columns must be among {', '.join(CONTENT_COLUMNS)}; got {unknown}")
    columns = {}
    for name in CONTENT_COLUMNS:
        values = content.get(name)
        if values is None:
            continue
        values = list(values)
        if len(values) != n:
            raise InvalidInput(f"content[{name!r}] has {len(values)} entries but there are {n} items")
        if values.count(None) < len(values):  # list.count: C speed on 100k empty cells
            columns[name] = [None if v is None else str(v) for v in values]
    return columns


# --------------------------------------------------------------------------------------------
# Labelled dataset export
# --------------------------------------------------------------------------------------------


def labelled_dataset_table(
    ids: Sequence[str],
    label_names: Sequence[str],
    current_candidates: Any,
    resolved: Any,
    answered_by: Sequence[str | None],
    answered_at: Sequence[Any],
    true_labels: Any = None,
    *,
    features: Any = None,
    feature_names: Sequence[str] | None = None,
    none_of_these: Any = None,
    content: Mapping[str, Sequence[str | None] | None] | None = None,
) -> pd.DataFrame:
    """The labelled dataset as a table, one row per item, ready for :func:`write_table`.

    Parameters
    ----------
    ids : sequence of str, length n_instances
    label_names : sequence of str, length n_labels
    current_candidates : array-like of shape (n_instances, n_labels), bool
        Candidate sets after the expert's answers.
    resolved : array-like of shape (n_instances,), bool
        True where an expert answer fixed the item's label.
    answered_by : sequence of str or None, length n_instances
        Who answered (None where nobody did).
    answered_at : sequence of datetime, str or None, length n_instances
        When (written as ISO 8601 text).
    true_labels : array-like of shape (n_instances,), int, optional
        True label indices, -1 where unknown; adds a ``true_label`` column.
    features : array-like of shape (n_instances, n_features), optional
        Adds the features after the label columns, so the export can be imported again with
        ``read_dataset(path, ignore_columns=LABELLED_COLUMNS)``.
    feature_names : sequence of str, optional
        Names of the feature columns (default ``feature_0`` ...).
    none_of_these : array-like of shape (n_instances,), bool, optional
        True where an annotator said no candidate fits (default: nowhere).
    content : mapping, optional
        As in :func:`ranked_query_table`: the items' text, media path and link.

    Returns
    -------
    pandas.DataFrame
        Columns ``id``, ``candidates`` (``|``-joined), ``n_candidates``, ``label`` (the label
        when exactly one candidate is left and the item is not flagged, else missing),
        ``resolved``, ``none_of_these``, ``answered_by``, ``answered_at``, then ``true_label``
        (name or missing), the content columns and the features when given.
        ``df.attrs`` holds ``table="labelled_dataset"`` and ``label_names``.
    """
    Y = check_candidates(current_candidates, name="current_candidates")
    n, M = Y.shape
    names = _names(label_names, "label_names", M)
    id_list = _names(ids, "ids", n)
    resolved_arr = np.asarray(resolved)
    if resolved_arr.shape != (n,) or resolved_arr.dtype.kind not in "biu":
        raise InvalidInput(f"resolved must be {n} booleans, got {resolved_arr.dtype} of shape {resolved_arr.shape}")
    for name, seq in (("answered_by", answered_by), ("answered_at", answered_at)):
        if len(seq) != n:
            raise InvalidInput(f"{name} has {len(seq)} entries but there are {n} items")
    sizes = Y.sum(axis=1)
    flagged = np.zeros(n, dtype=bool) if none_of_these is None else _flags(none_of_these, "none_of_these", n)
    columns: dict[str, Any] = {
        "id": pd.Series(id_list, dtype=object),
        "candidates": pd.Series(_joined_sets(names, Y), dtype=object),
        "n_candidates": sizes.astype(np.int64),
        "label": pd.Series(_single_labels(names, Y, (sizes == 1) & ~flagged), dtype=object),
        "resolved": resolved_arr.astype(bool),
        "none_of_these": flagged,
        "answered_by": pd.Series([None if _missing(a) else str(a) for a in answered_by], dtype=object),
        "answered_at": pd.Series([_iso(t) for t in answered_at], dtype=object),
    }
    if true_labels is not None:
        y = _vector(true_labels, "true_labels", n, kind="i")
        if ((y < -1) | (y >= M)).any():
            raise InvalidInput(f"true_labels must lie in -1..{M - 1}")
        columns["true_label"] = pd.Series([names[j] if j >= 0 else None for j in y], dtype=object)
    for name, values in _content_columns(content, n).items():
        columns[name] = pd.Series(values, dtype=object)
    table = pd.DataFrame(columns)
    if features is not None:
        X = np.asarray(features, dtype=np.float64)
        if X.ndim != 2 or X.shape[0] != n:
            raise InvalidInput(f"features must have shape ({n}, n_features), got {X.shape}")
        fnames = (
            _names(feature_names, "feature_names", X.shape[1])
            if feature_names is not None
            else [f"feature_{j}" for j in range(X.shape[1])]
        )
        clash = sorted(set(fnames) & set(table.columns))
        if clash:
            raise InvalidInput(f"feature_names clash with label columns: {clash}")
        table = pd.concat([table, pd.DataFrame(X, columns=fnames)], axis=1)
    table.attrs = {"table": "labelled_dataset", "label_names": list(names)}
    return table


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def write_table(df: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write ``df`` to ``path`` as CSV, TSV, JSON or Parquet, chosen by the extension.

    The file appears whole or not at all (:func:`atomic_file`): it is written to a file without
    a name, synced to disk, then given its name, so a crash, ``kill -9`` or a full disk never
    leaves half a file nor a temporary file behind. It is readable and writable by its owner only
    (``0600``, whatever the umask: exports hold annotators' names and answers), and a file
    already there is replaced at once (its old mode is not kept). See the
    module docstring for the exact format of each type, including the neutralisation of
    spreadsheet formulas in CSV / TSV.

    Returns
    -------
    pathlib.Path
        The path written.

    Raises
    ------
    DataFileError
        Unsupported extension, or the file cannot be written.
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"df must be a pandas DataFrame, got {type(df).__name__}")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    target = Path(path)
    ext = target.suffix.lower()
    if ext not in TABLE_EXTENSIONS:
        raise DataFileError(
            target, f"cannot write {ext or '(no extension)'!r} files; use one of {', '.join(TABLE_EXTENSIONS)}"
        )
    if not target.parent.is_dir():
        raise DataFileError(target, f"cannot be written: folder {os.fspath(target.parent)!r} does not exist")
    try:
        with atomic_file(target) as handle:
            if ext in (".csv", ".tsv"):
                neutralised = neutralise_formulas(df)
                # CRLF (RFC 4180) also makes the csv module quote cells holding a lone "\r".
                neutralised.to_csv(
                    handle, index=False, sep="," if ext == ".csv" else "\t", lineterminator="\r\n", encoding="utf-8"
                )
            elif ext == ".json":
                handle.write(
                    (json.dumps(_json_payload(df), ensure_ascii=False, allow_nan=False, indent=1) + "\n").encode(
                        "utf-8"
                    )
                )
            elif ext == ".jsonl":
                for record in _json_records(df):
                    handle.write((json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8"))
            else:
                _write_parquet(df, handle)
    except OSError as exc:
        raise DataFileError(target, f"cannot be written: {exc.strerror or exc}") from None
    return target


@contextlib.contextmanager
def atomic_file(target: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary handle whose content becomes ``target`` whole, once the ``with`` block ends.

    On Linux the data go to an unnamed file (``O_TMPFILE``) in ``target``'s folder: a process
    killed while writing leaves nothing behind, not even a temporary file. When the block ends
    the file is flushed and ``fsync``-ed, linked under a temporary name and renamed over
    ``target`` (atomic), and the folder is synced so the new name survives a power cut.
    Elsewhere (or on a file system without ``O_TMPFILE``) a hidden temporary file named after
    the target is used and removed on any error. The mode is :data:`EXPORT_MODE` (``0600``)
    whatever the umask, also when ``target`` already exists with another mode.
    """
    target = Path(target)
    folder = target.parent
    named: Path | None = None
    fd = -1
    if hasattr(os, "O_TMPFILE") and os.path.isdir("/proc/self/fd"):
        try:
            fd = os.open(folder, os.O_TMPFILE | os.O_WRONLY, EXPORT_MODE)
        except OSError:  # e.g. a file system without O_TMPFILE support
            fd = -1
    if fd < 0:
        named = _temporary_name(target)
        fd = os.open(named, os.O_WRONLY | os.O_CREAT | os.O_EXCL, EXPORT_MODE)
    try:
        # The creation mode is masked by the umask (0o600 may become 0o400 under umask 0o277):
        # set it exactly before any byte is written.
        os.fchmod(fd, EXPORT_MODE)
    except BaseException:
        os.close(fd)
        if named is not None:
            with contextlib.suppress(OSError):
                named.unlink()
        raise
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
            crash_point("export-before-rename")
            if named is None:
                named = _temporary_name(target)
                # linkat(/proc/self/fd, "<fd>", AT_SYMLINK_FOLLOW) names the unnamed file; os.link
                # calls that only with a directory descriptor (a plain path would call link(2),
                # which links the /proc symlink itself and fails).
                procfd = os.open("/proc/self/fd", os.O_RDONLY)
                try:
                    os.link(str(handle.fileno()), named, src_dir_fd=procfd, follow_symlinks=True)
                finally:
                    os.close(procfd)
        os.replace(named, target)
        named = None
        _sync_folder(folder)
    finally:
        if named is not None:
            with contextlib.suppress(OSError):
                named.unlink()


def _temporary_name(target: Path) -> Path:
    return target.parent / f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"


def _sync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def neutralise_formulas(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` whose text cells cannot run as spreadsheet formulas.

    A string starting with one of :data:`FORMULA_PREFIXES` gets a leading ``'`` unless it is a
    plain number such as ``-3`` or ``+1.5e3``. Numeric and boolean columns are untouched.
    """
    out = df.copy()
    for name in out.columns:
        column = out[name]
        if pd.api.types.is_numeric_dtype(column.dtype) or pd.api.types.is_bool_dtype(column.dtype):
            continue
        column = column.astype(object)
        try:
            # Vectorised first look: almost no cell starts like a formula.
            suspect = np.flatnonzero(column.str.startswith(FORMULA_PREFIXES, na=False).to_numpy(dtype=bool))
        except AttributeError:  # no text in the column
            suspect = np.arange(len(column))
        if suspect.size:
            values = column.to_numpy(copy=True)
            values[suspect] = [_neutralise(v) for v in values[suspect]]
            column = pd.Series(values, index=column.index, dtype=object)
        out[name] = column
    return out


def _neutralise(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def _json_records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows as JSON objects; in winnow's tables ``candidates`` is a list of names."""
    records = [{str(k): _json_value(v) for k, v in row.items()} for row in df.to_dict(orient="records")]
    if df.attrs.get("table") in ("ranked_queries", "labelled_dataset"):
        for record in records:
            cell = record.get("candidates")
            if isinstance(cell, str):
                record["candidates"] = cell.split("|") if cell else []
    return records


def _write_parquet(df: pd.DataFrame, handle: BinaryIO) -> None:
    """The DataFrame as Parquet; ``df.attrs["metadata"]`` (a JSON-able mapping), when there is
    one, as the file's key-value metadata under the key ``winnow`` (a JSON object)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    frame = df.copy()
    metadata = frame.attrs.get("metadata")
    frame.attrs = {}  # pandas would store attrs as JSON; only the metadata below is kept
    table = pa.Table.from_pandas(frame, preserve_index=False)
    if metadata is not None:
        extra = {b"winnow": json.dumps(_json_value(metadata), ensure_ascii=False, allow_nan=False).encode("utf-8")}
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **extra})
    pq.write_table(table, handle)


def _json_payload(df: pd.DataFrame) -> Any:
    records = _json_records(df)
    kind = df.attrs.get("table")
    if kind not in ("ranked_queries", "labelled_dataset"):
        return records
    payload: dict[str, Any] = {"table": kind}
    if df.attrs.get("metadata") is not None:
        payload["metadata"] = _json_value(df.attrs["metadata"])
    if kind == "ranked_queries":
        payload["criterion"] = df.attrs.get("criterion")
        payload["params"] = _json_value(df.attrs.get("params", {}))
        for record in records:
            record.pop("criterion", None)
            record.pop("params", None)
    else:
        payload["label_names"] = _json_value(df.attrs.get("label_names"))
    payload["rows"] = records
    return payload


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def _join(names: Sequence[str], row: np.ndarray) -> str:
    return "|".join(names[j] for j in np.flatnonzero(row).tolist())


def _joined_sets(names: Sequence[str], Y: np.ndarray) -> list[str]:
    """``"|"``-joined candidate names of every row: each distinct set joined once (a table of
    100k items holds a few thousand distinct sets; joining every row took seconds).

    >>> _joined_sets(["a", "b", "c"], np.array([[1, 0, 1], [0, 1, 0], [1, 0, 1]], dtype=bool))
    ['a|c', 'b', 'a|c']
    """
    if Y.shape[0] == 0:
        return []
    keys = np.packbits(Y, axis=1)
    # One opaque bytes value per row (void view), so np.unique compares whole rows at once.
    rows = np.ascontiguousarray(keys).view(np.dtype((np.void, keys.shape[1]))).ravel()
    distinct, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    joined = np.array([_join(names, Y[i]) for i in first], dtype=object)
    out: list[str] = joined[inverse.ravel()].tolist()
    return out


def _single_labels(names: Sequence[str], Y: np.ndarray, single: np.ndarray) -> list[str | None]:
    """The one candidate's name where ``single``, else ``None``.

    >>> _single_labels(["a", "b"], np.array([[0, 1], [1, 1]], dtype=bool), np.array([True, False]))
    ['b', None]
    """
    lookup = np.array([*names, None], dtype=object)
    which = np.where(single, np.argmax(Y, axis=1), len(names)) if Y.shape[0] else np.zeros(0, dtype=np.intp)
    out: list[str | None] = lookup[which].tolist()
    return out


def _flags(values: Any, name: str, n: int) -> np.ndarray:
    arr = np.asarray(values, dtype=bool)
    if arr.shape != (n,):
        raise InvalidInput(f"{name} must be a bool array of shape ({n},), got {arr.shape}")
    return arr


def _vector(values: Any, name: str, n: int, *, kind: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.shape != (n,):
        raise InvalidInput(f"{name} must have shape ({n},), got {arr.shape}")
    if kind == "f":
        if arr.dtype.kind not in "biuf":
            raise InvalidInput(f"{name} must be numeric, got dtype {arr.dtype}")
        arr = arr.astype(np.float64)
        if not np.isfinite(arr).all():
            row = int(np.flatnonzero(~np.isfinite(arr))[0])
            raise InvalidInput(f"{name} row {row} is {arr[row]}; scores must be finite")
        return arr
    if arr.dtype.kind not in "iu" and not (
        arr.dtype.kind == "f" and np.isfinite(arr).all() and (arr == np.round(arr)).all()
    ):
        raise InvalidInput(f"{name} must hold integers, got dtype {arr.dtype}")
    return arr.astype(np.int64)


def _names(values: Any, name: str, n: int) -> list[str]:
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of strings, not a single string")
    out = [str(v) for v in values]
    if len(out) != n:
        raise InvalidInput(f"{name} has {len(out)} entries but {n} are needed")
    return out


def _missing(value: Any) -> bool:
    if value is None or value is pd.NaT or value is pd.NA:
        return True
    return isinstance(value, float) and math.isnan(value)


def _iso(value: Any) -> str | None:
    if _missing(value):
        return None
    if isinstance(value, (_dt.datetime, _dt.date)):
        return value.isoformat()
    if isinstance(value, np.datetime64):
        return pd.Timestamp(value).isoformat()
    return str(value)


def _json_value(value: Any) -> Any:
    """Plain JSON types: numpy scalars and arrays unwrapped, NaN / NA as None, datetimes as ISO."""
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_json_value(v) for v in value]
    if _missing(value):
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, (_dt.datetime, _dt.date, np.datetime64)):
        return _iso(value)
    return value
