"""Features brought along: embeddings the user supplies in a ``.npy``, ``.npz`` or ``.parquet`` file,
checked for size before loading and aligned by id with the items.
"""

from __future__ import annotations

import math
import os
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from app.io.errors import DataFileError
from app.io.featurizers.records import check_int, quoted
from app.io.limits import DEFAULT_MAX_DECOMPRESSED_BYTES, max_decompressed_bytes, npy_header, npz_member_shapes, too_big

FEATURES_FILE_MAX_BYTES = DEFAULT_MAX_DECOMPRESSED_BYTES
"""Largest features array :func:`load_features_file` accepts, in bytes (1 GiB), by default: the
decompressed-size limit of :mod:`app.io.limits` (``WINNOW_MAX_DECOMPRESSED_BYTES`` changes it).

Checked *before* loading: from the ``.npy`` header (shape x item size), from the declared
uncompressed sizes and ``.npy`` headers of every ``.npz`` member (a zip bomb is refused without
inflating it), and from the Parquet footer (uncompressed row-group sizes). 1 GiB holds one
million 256-dimensional float32 embeddings with room to spare."""

FEATURES_FILE_EXTENSIONS: tuple[str, ...] = (".npy", ".npz", ".parquet")
"""Extensions :func:`load_features_file` reads (compared case-insensitively)."""


def _check_max_bytes(max_bytes: int) -> int:
    return check_int("max_bytes", max_bytes, 1)


def _checked_dtype(path: Path, dtype: np.dtype, what: str) -> None:
    if dtype.hasobject or dtype.fields is not None or dtype.kind not in "iuf":
        raise DataFileError(path, f"{what} has dtype {dtype}; features must be integers or floats")


def _read_npy(path: Path, max_bytes: int) -> np.ndarray:
    with path.open("rb") as handle:
        shape, dtype, header = npy_header(handle, path, "the file")
    _checked_dtype(path, dtype, "the array")
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > max_bytes:
        raise too_big(path, f"the {'x'.join(map(str, shape))} array", nbytes, max_bytes)
    if path.stat().st_size < header + nbytes:
        raise DataFileError(path, "the file is truncated (shorter than its header says)")
    return np.load(path, allow_pickle=False)


def _read_npz(path: Path, max_bytes: int) -> tuple[np.ndarray | None, np.ndarray, str]:
    """``(ids or None, features, name of the features array)`` from an ``.npz`` archive."""
    # Declared sizes and .npy headers only: a zip bomb is refused without inflating it.
    shapes = npz_member_shapes(path, max_bytes)
    if "ids" in shapes and shapes["ids"][1].kind not in "USiu":
        raise DataFileError(path, f"ids have dtype {shapes['ids'][1]}; use strings or integers", column="ids")
    if "features" in shapes:
        if "ids" not in shapes:
            raise DataFileError(path, "has a 'features' array but no 'ids' array to align it with the items")
        feature_name = "features"
    elif len(shapes) == 1:
        feature_name = next(iter(shapes))
    else:
        raise DataFileError(
            path,
            f"holds arrays {', '.join(sorted(shapes)) or '(none)'}; expected 'ids' + 'features', "
            "or a single 2-D array in item order",
        )
    _checked_dtype(path, shapes[feature_name][1], f"array {feature_name!r}")
    try:
        with np.load(path, allow_pickle=False) as arrays:
            features = arrays[feature_name]
            ids = arrays["ids"] if feature_name == "features" else None
    except (ValueError, OSError, zipfile.BadZipFile) as exc:
        # e.g. an object array (it would need pickle, which is never allowed).
        raise DataFileError(path, f"cannot be read without pickle ({exc})") from None
    return ids, features, feature_name


def _ids_as_strings(path: Path, raw: np.ndarray, column: str) -> list[str]:
    if raw.ndim != 1:
        raise DataFileError(path, f"ids must be 1-D, got shape {raw.shape}", column=column)
    if raw.dtype.kind == "U":
        return [str(v) for v in raw]
    if raw.dtype.kind == "S":
        try:
            return [bytes(v).decode("utf-8") for v in raw]
        except UnicodeDecodeError:
            raise DataFileError(path, "ids are bytes that are not UTF-8", column=column) from None
    if raw.dtype.kind in "iu":
        return [str(int(v)) for v in raw]
    raise DataFileError(path, f"ids have dtype {raw.dtype}; use strings or integers", column=column)


def _read_parquet(path: Path, max_bytes: int, id_column: str) -> tuple[list[str], np.ndarray, list[str]]:
    """``(ids, features, feature column names)`` from a Parquet file."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise DataFileError(path, f"is not a valid Parquet file ({exc})") from None
    meta = parquet.metadata
    declared = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    columns = parquet.schema_arrow.names
    # The footer's sizes and a float64 copy of every column both bound the memory we need.
    estimate = max(declared, meta.num_rows * max(len(columns), 1) * 8)
    if estimate > max_bytes:
        raise too_big(path, "the table", estimate, max_bytes)
    if id_column not in columns:
        raise DataFileError(path, f"has no {id_column!r} column; columns are {', '.join(columns)}")
    schema = parquet.schema_arrow
    numeric, lists = [], []
    for name in columns:
        if name == id_column:
            continue
        kind = schema.field(name).type
        if pa.types.is_integer(kind) or pa.types.is_floating(kind):
            numeric.append(name)
        elif (pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)) and (
            pa.types.is_integer(kind.value_type) or pa.types.is_floating(kind.value_type)
        ):
            lists.append(name)
        else:
            raise DataFileError(path, f"column {name!r} has type {kind}; features must be numeric", column=name)
    if lists and (numeric or len(lists) > 1):
        raise DataFileError(
            path,
            "mixes list columns with other feature columns; use numeric columns or one list column",
            column=lists[0],
        )
    if not numeric and not lists:
        raise DataFileError(path, f"has no feature column besides {id_column!r}")
    try:
        table = parquet.read()
    except (pa.ArrowException, OSError) as exc:
        raise DataFileError(path, f"cannot be read ({exc})") from None
    id_values = table.column(id_column)
    if id_values.null_count:
        row = int(np.flatnonzero(id_values.is_null().to_numpy(zero_copy_only=False))[0]) + 1
        raise DataFileError(path, "the id is missing", row=row, column=id_column, has_header=False)
    id_kind = id_values.type
    if not (pa.types.is_string(id_kind) or pa.types.is_large_string(id_kind) or pa.types.is_integer(id_kind)):
        raise DataFileError(path, f"ids have type {id_kind}; use strings or integers", column=id_column)
    ids = [str(v) for v in id_values.to_pylist()]
    if lists:
        name = lists[0]
        values = table.column(name).combine_chunks()
        if values.null_count:
            row = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0]) + 1
            raise DataFileError(path, "the embedding is missing", row=row, column=name, has_header=False)
        lengths = np.asarray(pc.list_value_length(values).to_numpy(zero_copy_only=False))
        if lengths.size and (lengths != lengths[0]).any():
            row = int(np.flatnonzero(lengths != lengths[0])[0]) + 1
            raise DataFileError(
                path,
                f"the embedding has {lengths[row - 1]} values, row 1 has {lengths[0]}",
                row=row,
                column=name,
                has_header=False,
            )
        flat = pc.list_flatten(values)
        if flat.null_count:
            row = (
                int(
                    np.repeat(np.arange(len(lengths)), lengths)[
                        np.flatnonzero(flat.is_null().to_numpy(zero_copy_only=False))[0]
                    ]
                )
                + 1
            )
            raise DataFileError(path, "the embedding has a missing value", row=row, column=name, has_header=False)
        d = int(lengths[0]) if lengths.size else 0
        features = np.asarray(flat.to_numpy(zero_copy_only=False), dtype=np.float64).reshape(len(ids), d)
        return ids, features, [f"{name}[{j}]" for j in range(d)]
    blocks = []
    for name in numeric:
        column = table.column(name)
        if column.null_count:
            row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0]) + 1
            raise DataFileError(path, "the value is missing", row=row, column=name, has_header=False)
        blocks.append(np.asarray(column.to_numpy(), dtype=np.float64))
    return ids, np.column_stack(blocks), numeric


def _align(path: Path, file_ids: list[str], item_ids: list[str], id_column: str) -> np.ndarray:
    """Row of the file for each item, checking duplicates, missing and extra ids."""
    position: dict[str, int] = {}
    for row, value in enumerate(file_ids):
        first = position.setdefault(value, row)
        if first != row:
            raise DataFileError(
                path,
                f"id {quoted(value)} appears twice (rows {first + 1} and {row + 1})",
                row=row + 1,
                column=id_column,
                has_header=False,
            )
    missing = [value for value in item_ids if value not in position]
    if missing:
        shown = ", ".join(quoted(v) for v in missing[:3])
        raise DataFileError(
            path, f"{len(missing)} item id(s) have no features in the file, e.g. {shown}", column=id_column
        )
    wanted = set(item_ids)
    extra = [(row, value) for row, value in enumerate(file_ids) if value not in wanted]
    if extra:
        row, value = extra[0]
        raise DataFileError(
            path,
            f"{len(extra)} id(s) are not items of the dataset, e.g. {quoted(value)}",
            row=row + 1,
            column=id_column,
            has_header=False,
        )
    return np.fromiter((position[value] for value in item_ids), dtype=np.intp, count=len(item_ids))


def load_features_file(
    path: str | os.PathLike[str],
    ids: Sequence[str],
    *,
    id_column: str = "id",
    expected_dimension: int | None = None,
    max_bytes: int | None = None,
) -> np.ndarray:
    """Read embeddings brought by the user and align them with the items.

    Formats (by extension):

    ``.npy``
        One 2-D array; row ``i`` belongs to item ``i`` (no ids to align by), so the row count
        must equal the number of items.
    ``.npz``
        Arrays ``ids`` (strings or integers) and ``features`` (2-D), aligned by id; or a single
        2-D array of any name, in item order.
    ``.parquet``
        An ``id_column`` column (strings or integers) and either numeric columns (one per
        dimension, in file order) or one list column of numbers (an embedding per row).

    Integer ids are compared as their decimal text (``7`` matches item ``"7"``). Every item must
    have exactly one row and every row must belong to an item.

    Parameters
    ----------
    path : str or os.PathLike
        The features file.
    ids : sequence of str
        The items' ids, in item order.
    id_column : str, default "id"
        Id column of a Parquet file.
    expected_dimension : int, optional
        Number of columns the features must have (e.g. that of the dataset's existing items).
    max_bytes : int, optional
        Largest array accepted, checked before anything is loaded; by default the limit of
        :func:`app.io.limits.max_decompressed_bytes` (:data:`FEATURES_FILE_MAX_BYTES` unless
        ``WINNOW_MAX_DECOMPRESSED_BYTES`` says otherwise).

    Returns
    -------
    ndarray of shape (len(ids), dimension), float64
        Finite values; row ``i`` belongs to ``ids[i]``.

    Raises
    ------
    DataFileError
        Missing file, unknown extension, too large, not 2-D, non-numeric, NaN or infinite values,
        wrong dimension, or ids that are missing, duplicated or not items (one line naming the
        row, 1-based, and the column).
    """
    max_bytes = _check_max_bytes(max_decompressed_bytes() if max_bytes is None else max_bytes)
    if expected_dimension is not None:
        expected_dimension = check_int("expected_dimension", expected_dimension, 1)
    if isinstance(ids, str):
        raise TypeError("ids must be a sequence of item ids, not a single string")
    item_ids = [str(v) for v in ids]
    if len(set(item_ids)) != len(item_ids):
        raise ValueError("ids holds duplicated item ids; they cannot be aligned")
    path = Path(path)
    extension = path.suffix.lower()
    if extension not in FEATURES_FILE_EXTENSIONS:
        raise DataFileError(
            path, f"extension {path.suffix!r} is not a features file; use {', '.join(FEATURES_FILE_EXTENSIONS)}"
        )
    if not path.is_file():
        raise DataFileError(path, "does not exist" if not path.exists() else "is not a file")

    feature_names: list[str] | None = None
    file_ids: list[str] | None = None
    column_of_ids = "ids"
    if extension == ".npy":
        features = _read_npy(path, max_bytes)
    elif extension == ".npz":
        raw_ids, features, _ = _read_npz(path, max_bytes)
        if raw_ids is not None:
            file_ids = _ids_as_strings(path, raw_ids, "ids")
    else:
        file_ids, features, feature_names = _read_parquet(path, max_bytes, id_column)
        column_of_ids = id_column

    if features.ndim != 2:
        raise DataFileError(
            path,
            f"the features are {features.ndim}-D of shape {features.shape}; a 2-D array (items x dimensions) is needed",
        )
    if features.shape[1] == 0:
        raise DataFileError(path, "the features have 0 columns")
    if file_ids is not None and len(file_ids) != features.shape[0]:
        raise DataFileError(path, f"has {len(file_ids)} ids but {features.shape[0]} feature rows")
    if file_ids is None and features.shape[0] != len(item_ids):
        raise DataFileError(
            path,
            f"has {features.shape[0]} rows but the dataset has {len(item_ids)} items; "
            "without ids, row i must be item i",
        )
    if expected_dimension is not None and features.shape[1] != expected_dimension:
        raise DataFileError(
            path, f"the features have {features.shape[1]} columns; this dataset's features have {expected_dimension}"
        )
    features = np.asarray(features, dtype=np.float64)
    finite = np.isfinite(features)
    if not finite.all():
        row, col = (int(v) for v in np.argwhere(~finite)[0])
        column = feature_names[col] if feature_names is not None else f"feature {col}"
        raise DataFileError(
            path,
            f"the value {float(features[row, col])} is not a finite number",
            row=row + 1,
            column=column,
            has_header=False,
        )
    if file_ids is not None:
        features = features[_align(path, file_ids, item_ids, column_of_ids)]
    return np.ascontiguousarray(features)
