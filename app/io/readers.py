"""Read a partially labelled dataset from a file and validate it before anything is stored.

Supported formats (chosen by extension)
---------------------------------------
``.csv`` / ``.tsv`` / ``.txt``
    One header row, then one row per instance. The candidates column (``candidates`` unless told
    otherwise) holds a candidate set as ``cat|dog`` or as a JSON list ``["cat", "dog"]``; integer
    labels are fine (``3|8``, ``[3, 8]``). A column named ``id`` is taken as the instance id and a
    column named ``true_label`` as the (optional, possibly blank) true label. Every other column is
    a numeric feature. ``.txt`` files have their delimiter detected from the header (tab, comma or
    semicolon). Text must be UTF-8 (a BOM is fine) or UTF-16 with a BOM.
``.parquet``
    The same columns as CSV; candidates may also be a list column (``list<string>`` or
    ``list<int>``). A ``winnow.layout`` key in the schema metadata sets :attr:`LoadedDataset.layout`.
``.mat`` (MATLAB 5/7, the format of the PLL benchmarks)
    ``data`` (n x d), ``partial_target`` (q x n, 1 where a label is a candidate), optional
    ``target`` (q x n one-hot true label; an all-zero column means unknown). Dense or scipy.sparse.
    An n x q ``partial_target`` is accepted too. Labels are named ``"1"`` .. ``"q"`` (the MATLAB
    row numbers) unless ``label_names`` is given.
``.npz``
    ``X`` (n x d numeric), ``candidates`` (n x M bool or 0/1), optional ``y`` (true label indices,
    -1 for unknown), ``label_names`` (M strings; default ``"0"`` .. ``"M-1"``), ``ids`` (n strings
    or integers), ``feature_names`` (d strings) and ``layout`` (a string such as ``"image:8x8"``).

Every problem raises :class:`~app.io.errors.DataFileError` (an
:class:`engine.exceptions.InvalidInput`) whose one-line message names the file, the 1-based data
row and/or the column, and what is wrong. See :mod:`app.io.errors` for the row convention.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from numbers import Integral
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from app.io.errors import DataFileError
from app.io.writers import FORMULA_PREFIXES
from engine.exceptions import InvalidInput

__all__ = [
    "LoadedDataset",
    "SUPPORTED_EXTENSIONS",
    "read_dataset",
    "parse_candidate_cell",
    "sort_label_names",
]

SUPPORTED_EXTENSIONS: tuple[str, ...] = (".csv", ".tsv", ".txt", ".parquet", ".mat", ".npz")
"""File extensions :func:`read_dataset` understands (compared case-insensitively)."""

LABEL_SEPARATOR = "|"
_MAX_LISTED = 12  # how many valid choices an error message quotes before "..."


@dataclass(frozen=True, eq=False)
class LoadedDataset:
    """A validated partially labelled dataset, ready for the store and the engine.

    Attributes
    ----------
    X : ndarray of shape (n_instances, n_features), float64
        Finite features.
    candidates : ndarray of shape (n_instances, n_labels), bool
        Row ``i`` is the candidate set of instance ``i``; no row is empty.
    label_names : list of str
        Name of label column ``j``. Discovered labels are sorted naturally (numeric labels in
        numeric order, ``"class2"`` before ``"class10"``); a ``label_names`` argument, an
        ``.npz`` ``label_names`` array or a ``.mat`` row order is kept as given.
    ids : list of str
        Unique instance ids; ``"0"`` .. ``"n-1"`` when the file has none.
    true_labels : ndarray of shape (n_instances,), int, or None
        Index of the true label, ``-1`` where unknown; ``None`` when the file has no true labels.
        A known true label always lies in its candidate set.
    feature_names : list of str
    layout : str or None
        A drawing hint for the UI, e.g. ``"image:8x8"`` (row-major pixels). Set from the file's
        own metadata or from feature names ``pixel_0`` .. ``pixel_{d-1}`` (square d) or
        ``pixel_<row>_<col>``.
    source : str
        The path the data was read from.
    """

    X: np.ndarray
    candidates: np.ndarray
    label_names: list[str]
    ids: list[str]
    true_labels: np.ndarray | None
    feature_names: list[str]
    layout: str | None
    source: str

    @property
    def n_instances(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def n_labels(self) -> int:
        return len(self.label_names)


# --------------------------------------------------------------------------------------------
# Public entry point
# --------------------------------------------------------------------------------------------


def read_dataset(
    path: str | os.PathLike[str],
    *,
    candidates_column: str = "candidates",
    id_column: str | None = None,
    true_label_column: str | None = None,
    label_names: Sequence[str | int] | None = None,
    delimiter: str | None = None,
    min_rows: int = 1,
    ignore_columns: Iterable[str] = (),
) -> LoadedDataset:
    """Read and validate a partially labelled dataset.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.csv``, ``.tsv``, ``.txt``, ``.parquet``, ``.mat`` or ``.npz`` file.
    candidates_column : str, default "candidates"
        Column holding the candidate sets (text and Parquet files).
    id_column : str, optional
        Column holding instance ids. ``None`` uses a column named ``id`` when there is one.
    true_label_column : str, optional
        Column holding true labels (blank = unknown). ``None`` uses ``true_label`` when present.
    label_names : sequence of str, optional
        The complete label set, in the order to use. A label outside it is an error. For
        ``.mat`` / ``.npz`` it names the label columns and must have one name per column.
    delimiter : str, optional
        One character; overrides the extension's delimiter for text files.
    min_rows : int, default 1
        Fewest instances accepted (a k-NN caller passes ``k + 1``).
    ignore_columns : iterable of str, default ()
        Columns of a text or Parquet file to skip (e.g. notes); names not in the file are ignored.

    Returns
    -------
    LoadedDataset

    Raises
    ------
    DataFileError
        The file is missing, empty, of an unsupported type, unreadable, or its content is invalid.
        The message is one line naming the file, the 1-based data row and/or column.
    InvalidInput
        A keyword argument has a bad value (e.g. duplicate ``label_names``).
    TypeError
        ``path`` is not a path.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    if isinstance(min_rows, bool) or not isinstance(min_rows, Integral) or min_rows < 1:
        raise InvalidInput(f"min_rows must be an integer >= 1, got {min_rows!r}")
    if delimiter is not None and (not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in "\r\n\"'"):
        raise InvalidInput(f"delimiter must be one character other than a quote or newline, got {delimiter!r}")
    for name, value in (("candidates_column", candidates_column), ("id_column", id_column),
                        ("true_label_column", true_label_column)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise InvalidInput(f"{name} must be a non-empty column name, got {value!r}")
    names = _check_label_names_argument(label_names)
    ignored = {str(c) for c in ignore_columns}

    file = Path(path)
    ext = file.suffix.lower()
    if ext not in SUPPORTED_EXTENSIONS:
        hint = " (save a spreadsheet as CSV UTF-8)" if ext in (".xlsx", ".xls", ".ods") else ""
        raise DataFileError(
            file,
            f"unsupported file type {ext or '(no extension)'!r}; use one of {', '.join(SUPPORTED_EXTENSIONS)}{hint}",
        )
    try:
        if not file.exists():
            raise DataFileError(file, "file not found")
        if not file.is_file():
            raise DataFileError(file, "is not a regular file")
        size = file.stat().st_size
        with file.open("rb") as handle:
            head = handle.read(1024)
    except OSError as exc:
        raise DataFileError(file, f"cannot be opened: {exc.strerror or exc}") from None
    if size == 0:
        raise DataFileError(file, "is empty (0 bytes)")

    roles = _Roles(candidates_column, id_column, true_label_column, ignored)
    if ext in (".csv", ".tsv", ".txt"):
        table = _read_text(file, head, ext, delimiter)
        dataset = _dataset_from_table(file, table, roles, names)
    elif ext == ".parquet":
        table = _read_parquet(file, head)
        dataset = _dataset_from_table(file, table, roles, names)
    elif ext == ".mat":
        dataset = _read_mat(file, head, names)
    else:
        dataset = _read_npz(file, head, names)

    n = dataset.n_instances
    if n < min_rows:
        raise DataFileError(file, f"has {n} data row{'s' if n != 1 else ''} but at least {min_rows} are needed")
    return dataset


# --------------------------------------------------------------------------------------------
# Label names and candidate cells
# --------------------------------------------------------------------------------------------


def sort_label_names(names: Iterable[str]) -> list[str]:
    """Sort label names naturally: all-numeric names by value, otherwise digit runs by value.

    >>> sort_label_names(["10", "9", "2"])
    ['2', '9', '10']
    >>> sort_label_names(["class10", "class2", "bird"])
    ['bird', 'class2', 'class10']
    """
    unique = list(dict.fromkeys(names))
    numbers = []
    for name in unique:
        try:
            value = float(name)
        except ValueError:
            break
        if not math.isfinite(value):
            break
        numbers.append(value)
    else:
        return [n for _, n in sorted(zip(numbers, unique), key=lambda pair: (pair[0], pair[1]))]
    return sorted(unique, key=_natural_key)


def _natural_key(name: str) -> tuple:
    parts = re.split(r"(\d+)", name)
    # Even positions are text, odd positions digit runs, so tuples always compare like with like.
    key = tuple(int(p) if i % 2 else p.casefold() for i, p in enumerate(parts))
    return (key, name)


def parse_candidate_cell(cell: Any) -> list[str]:
    """Parse one candidate-set cell into label names (duplicates dropped, order kept).

    Accepts ``"cat|dog"``, a JSON list ``'["cat", "dog"]'`` or ``"[3, 8]"``, an integer, or a
    list/array of strings or integers (Parquet list columns). Whitespace around names is ignored,
    and so are empty pieces of a ``|``-separated cell (``"cat|"``).

    Raises
    ------
    ValueError
        The cell cannot be read as a candidate set; the message says why. An empty set is
        returned as ``[]`` (the caller decides it is an error).
    """
    if cell is None:
        return []
    if isinstance(cell, (bool, np.bool_)):
        raise ValueError(f"{cell!r} is not a label")
    if isinstance(cell, (Integral, float, np.floating)):
        return [_label_from_scalar(cell)] if not _is_missing(cell) else []
    if isinstance(cell, bytes):
        cell = cell.decode("utf-8", errors="replace")
    if isinstance(cell, str):
        text = cell.strip()
        if not text:
            return []
        if text.startswith("["):
            try:
                items = json.loads(text)
            except (ValueError, RecursionError):
                raise ValueError(f"{_quote(text)} starts with '[' but is not a valid JSON list") from None
            if not isinstance(items, list):
                raise ValueError(f"{_quote(text)} is not a JSON list")
        else:
            items = [piece for piece in text.split(LABEL_SEPARATOR) if piece.strip()]
    elif isinstance(cell, (list, tuple, np.ndarray)):
        items = list(cell)
    else:
        raise ValueError(f"{_quote(cell)} is not a candidate set")
    names = []
    for item in items:
        if isinstance(item, (bool, np.bool_)) or item is None:
            raise ValueError(f"{item!r} in {_quote(cell)} is not a label")
        if isinstance(item, str):
            name = item.strip()
        elif isinstance(item, (Integral, float, np.floating)):
            name = _label_from_scalar(item)
        else:
            raise ValueError(f"{_quote(item)} in {_quote(cell)} is not a label name (use strings or integers)")
        if not name:
            raise ValueError(f"{_quote(cell)} contains an empty label name")
        if LABEL_SEPARATOR in name:
            raise ValueError(f"label name {_quote(name)} contains '|', which separates labels")
        names.append(name)
    return list(dict.fromkeys(names))


def _label_from_scalar(value: Any) -> str:
    if isinstance(value, Integral):
        return str(int(value))
    value = float(value)
    if not math.isfinite(value) or value != int(value):
        raise ValueError(f"{value!r} is not a label (labels are names or integers)")
    return str(int(value))


def _is_missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, (float, np.floating)):
        return bool(np.isnan(value))
    return False


def _quote(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def _listing(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_MAX_LISTED])
    return shown + (f", ... ({len(names)} in all)" if len(names) > _MAX_LISTED else "")


def _check_label_names_argument(label_names: Sequence[str | int] | None) -> list[str] | None:
    if label_names is None:
        return None
    if isinstance(label_names, (str, bytes)):
        raise TypeError("label_names must be a sequence of names, not a single string")
    names = []
    for item in label_names:
        if isinstance(item, bool) or not isinstance(item, (str, Integral)):
            raise InvalidInput(f"label_names must hold strings or integers, got {item!r}")
        name = str(item).strip()
        if not name or LABEL_SEPARATOR in name:
            raise InvalidInput(f"label_names entry {item!r} is empty or contains '|'")
        names.append(name)
    if not names:
        raise InvalidInput("label_names is empty")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InvalidInput(f"label_names has duplicates: {_listing(duplicates)}")
    return names


# --------------------------------------------------------------------------------------------
# Tables (text and Parquet): columns of raw cells, then one shared validation
# --------------------------------------------------------------------------------------------


@dataclass
class _Roles:
    candidates: str
    id: str | None
    true_label: str | None
    ignored: set[str]


@dataclass
class _Table:
    names: list[str]
    columns: dict[str, Any]  # list of cells, or a pyarrow ChunkedArray
    rows: list[int]  # 1-based data row of each kept record
    has_header: bool
    layout: str | None = None
    single_column_hint: str = ""


def _read_text(file: Path, head: bytes, ext: str, delimiter: str | None) -> _Table:
    _reject_binary_magic(file, head, expected="text")
    raw = file.read_bytes()
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"
    else:
        encoding = "utf-8-sig"
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataFileError(
            file,
            f"is not UTF-8 text (byte 0x{raw[exc.start]:02x} on line {line}); save it as 'CSV UTF-8'",
        ) from None
    if "\x00" in text:
        raise DataFileError(file, "contains NUL bytes: it is a binary file, not text")
    if not text.strip():
        raise DataFileError(file, "has no header row (the file is blank)")

    if delimiter is None:
        if ext == ".csv":
            delimiter = ","
        elif ext == ".tsv":
            delimiter = "\t"
        else:
            first_line = next(line for line in text.splitlines() if line.strip())
            counts = {sep: first_line.count(sep) for sep in ("\t", ",", ";")}
            delimiter = max(counts, key=lambda sep: counts[sep]) if any(counts.values()) else ","

    records = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    header: list[str] | None = None
    rows: list[list[str]] = []
    row_numbers: list[int] = []
    data_row = 0
    try:
        for record in records:
            if header is None:
                if not any(cell.strip() for cell in record):
                    continue  # leading blank lines
                header = [cell.strip() for cell in record]
                continue
            data_row += 1
            if not any(cell.strip() for cell in record):
                continue  # blank row: skipped, but it still counts in the row numbers
            if len(record) > len(header) and not any(c.strip() for c in record[len(header):]):
                record = record[: len(header)]  # trailing empty cells a spreadsheet left behind
            if len(record) != len(header):
                hint = ""
                if len(record) > len(header) and any(c.lstrip().startswith("[") for c in record):
                    hint = "; a JSON list containing the delimiter must be quoted, e.g. \"[\"\"cat\"\", \"\"dog\"\"]\""
                raise DataFileError(
                    file,
                    f"has {len(record)} cells but the header has {len(header)} columns{hint}",
                    row=data_row,
                )
            rows.append([_unescape_formula(cell) for cell in record])
            row_numbers.append(data_row)
    except csv.Error as exc:
        raise DataFileError(file, f"is not valid delimited text near line {records.line_num}: {exc}") from None
    if header is None:  # only possible if every record was blank
        raise DataFileError(file, "has no header row (the file is blank)")

    _check_header(file, header)
    hint = ""
    if len(header) == 1:
        for sep, label in (("\t", "tab"), (";", "';'"), (",", "','")):
            if sep != delimiter and sep in header[0]:
                hint = f" (the header looks {label}-separated; pass delimiter={sep!r} or use the matching extension)"
                break
    columns = {name: list(cells) for name, cells in zip(header, zip(*rows))} if rows else {n: [] for n in header}
    return _Table(header, columns, row_numbers, has_header=True, single_column_hint=hint)


def _unescape_formula(cell: str) -> str:
    """Undo :func:`app.io.writers.neutralise_formulas`: ``'=x`` is read as ``=x``."""
    if cell[:1] == "'" and cell[1:2] and cell[1:].startswith(FORMULA_PREFIXES):
        return cell[1:]
    return cell


def _check_header(file: Path, header: Sequence[str]) -> None:
    for position, name in enumerate(header, start=1):
        if not name:
            raise DataFileError(
                file,
                f"header cell {position} is empty; every column needs a name "
                "(a leftover index column? drop it or call it 'id')",
            )
    seen: dict[str, int] = {}
    for position, name in enumerate(header, start=1):
        if name in seen:
            raise DataFileError(file, f"duplicate column name (header cells {seen[name]} and {position})", column=name)
        seen[name] = position


def _read_parquet(file: Path, head: bytes) -> _Table:
    import pyarrow.parquet as pq

    if not head.startswith(b"PAR1"):
        _reject_binary_magic(file, head, expected="Parquet")
        raise DataFileError(file, "is not a Parquet file (it does not start with the 'PAR1' signature)")
    try:
        table = pq.read_table(file)
        table = table.combine_chunks()
    except Exception as exc:  # pyarrow raises many types on corrupt input; report, never leak
        raise DataFileError(file, f"is not a readable Parquet file: {_first_line(exc)}") from None
    names = [n for n in table.column_names if not re.fullmatch(r"__index_level_\d+__", n)]
    header = [n.strip() for n in names]
    _check_header(file, header)
    columns: dict[str, Any] = {h: table.column(n) for h, n in zip(header, names)}
    for name, column in columns.items():
        try:  # full validation catches invalid UTF-8 and bad offsets before any value is read
            column.validate(full=True)
        except Exception as exc:  # pyarrow.ArrowInvalid and friends
            raise DataFileError(file, f"is corrupt: {_first_line(exc)}", column=name, has_header=False) from None
    metadata = table.schema.metadata or {}
    layout = metadata.get(b"winnow.layout")
    try:
        layout_text = layout.decode("utf-8") if layout is not None else None
    except UnicodeDecodeError:
        layout_text = None
    return _Table(header, columns, list(range(1, table.num_rows + 1)), has_header=False, layout=layout_text)


def _cells(column: Any) -> list[Any]:
    """Cells of a column as Python objects (None for a missing value)."""
    if isinstance(column, list):
        return column
    return column.to_pylist()


def _float_column(file: Path, table: _Table, name: str) -> np.ndarray:
    """A feature column as float64; a non-numeric or non-finite cell is a DataFileError."""
    column = table.columns[name]
    if isinstance(column, list):
        cells = column
        values = pd.to_numeric(pd.Series(cells, dtype=object), errors="coerce").to_numpy(dtype=np.float64)
    else:
        import pyarrow as pa

        kind = column.type
        if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind) or pa.types.is_decimal(kind):
            cells = None
            try:
                values = column.cast(pa.float64()).to_numpy(zero_copy_only=False).astype(np.float64)
            except Exception as exc:  # overflowing decimals and the like
                raise DataFileError(file, f"cannot be read as numbers: {_first_line(exc)}", column=name) from None
        elif pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_dictionary(kind):
            cells = column.to_pylist()
            values = pd.to_numeric(pd.Series(cells, dtype=object), errors="coerce").to_numpy(dtype=np.float64)
        else:
            raise DataFileError(file, f"holds {kind} values; feature columns must be numeric", column=name)
    bad = ~np.isfinite(values)
    if not bad.any():
        return values
    position = int(np.flatnonzero(bad)[0])
    cell = (cells if cells is not None else _cells(column))[position]
    if cell is None or (isinstance(cell, str) and not cell.strip()):
        problem = "is empty; every feature needs a value"
    else:
        try:
            finite = math.isfinite(float(cell))
        except (TypeError, ValueError, OverflowError):
            finite = True
        if not finite:
            problem = f"{_quote(cell)} is not a finite number; features must be finite"
        else:
            problem = (f"{_quote(cell)} is not a number; every column other than id, candidates and "
                       "true_label is a numeric feature")
    raise DataFileError(file, problem, row=table.rows[position], column=name, has_header=table.has_header)


def _dataset_from_table(file: Path, table: _Table, roles: _Roles, label_names: list[str] | None) -> LoadedDataset:
    header = table.names
    has_header = table.has_header
    if roles.candidates not in table.columns:
        raise DataFileError(
            file,
            f"has no {roles.candidates!r} column (columns: {_listing(header)}); "
            f"pass candidates_column=... to use another{table.single_column_hint}",
        )
    id_name = _resolve_role(file, table, roles.id, "id", "id_column")
    true_name = _resolve_role(file, table, roles.true_label, "true_label", "true_label_column")
    used = [roles.candidates, id_name, true_name]
    used = [u for u in used if u is not None]
    if len(set(used)) != len(used):
        raise InvalidInput(f"candidates, id and true-label columns must differ, got {used}")
    feature_names = [n for n in header if n not in used and n not in roles.ignored]
    n = len(table.rows)
    if n == 0:
        raise DataFileError(file, "has a header but no data rows")
    if not feature_names:
        raise DataFileError(
            file,
            "has no feature columns: every column other than id, candidates and true_label "
            f"must be a numeric feature (columns: {_listing(header)}){table.single_column_hint}",
        )

    # Candidate sets.
    sets: list[list[str]] = []
    for position, cell in enumerate(_cells(table.columns[roles.candidates])):
        row = table.rows[position]
        try:
            names = parse_candidate_cell(cell)
        except ValueError as exc:
            raise DataFileError(file, str(exc), row=row, column=roles.candidates, has_header=has_header) from None
        if not names:
            raise DataFileError(
                file,
                "empty candidate set; every item needs at least one candidate label (write e.g. cat|dog)",
                row=row, column=roles.candidates, has_header=has_header,
            )
        sets.append(names)
    if label_names is None:
        label_space = sort_label_names(name for names in sets for name in names)
    else:
        label_space = label_names
    index = {name: j for j, name in enumerate(label_space)}
    candidates = np.zeros((n, len(label_space)), dtype=bool)
    for position, names in enumerate(sets):
        for name in names:
            j = index.get(name)
            if j is None:
                hint = "; separate labels with '|'" if ("," in name or ";" in name) else ""
                raise DataFileError(
                    file,
                    f"unknown label {_quote(name)}; the labels are {_listing(label_space)}{hint}",
                    row=table.rows[position], column=roles.candidates, has_header=has_header,
                )
            candidates[position, j] = True

    # True labels.
    true_labels = None
    if true_name is not None:
        true_labels = np.full(n, -1, dtype=np.int64)
        for position, cell in enumerate(_cells(table.columns[true_name])):
            row = table.rows[position]
            try:
                parsed = parse_candidate_cell(cell) if not isinstance(cell, (list, tuple)) else None
            except ValueError as exc:
                raise DataFileError(file, str(exc), row=row, column=true_name, has_header=has_header) from None
            if parsed is None or len(parsed) > 1:
                raise DataFileError(
                    file, f"{_quote(cell)} is not a single label", row=row, column=true_name, has_header=has_header
                )
            if not parsed:
                continue  # unknown true label
            j = index.get(parsed[0])
            if j is None or not candidates[position, j]:
                raise DataFileError(
                    file,
                    f"true label {_quote(parsed[0])} is not in the item's candidate set "
                    f"{_quote(LABEL_SEPARATOR.join(sets[position]))}",
                    row=row, column=true_name, has_header=has_header,
                )
            true_labels[position] = j

    # Ids.
    if id_name is None:
        ids = [str(i) for i in range(n)]
    else:
        ids = []
        first_seen: dict[str, int] = {}
        for position, cell in enumerate(_cells(table.columns[id_name])):
            row = table.rows[position]
            if _is_missing(cell) or (isinstance(cell, str) and not cell.strip()):
                raise DataFileError(file, "empty id; every item needs a unique id", row=row, column=id_name,
                                    has_header=has_header)
            if isinstance(cell, (list, tuple, dict, bytes)):
                raise DataFileError(file, f"{_quote(cell)} is not an id", row=row, column=id_name,
                                    has_header=has_header)
            text = _label_from_scalar(cell) if isinstance(cell, (float, np.floating)) and float(cell).is_integer() \
                else str(cell).strip()
            if text in first_seen:
                raise DataFileError(
                    file,
                    f"duplicate id {_quote(text)} (first used in row {first_seen[text]})",
                    row=row, column=id_name, has_header=has_header,
                )
            first_seen[text] = row
            ids.append(text)

    # Features: report the first bad cell in reading order (top row first, then left column).
    X = np.empty((n, len(feature_names)), dtype=np.float64)
    errors: list[tuple[int, int, DataFileError]] = []
    for j, name in enumerate(feature_names):
        try:
            X[:, j] = _float_column(file, table, name)
        except DataFileError as exc:
            errors.append((exc.row if exc.row is not None else -1, j, exc))
    if errors:
        raise min(errors, key=lambda e: (e[0], e[1]))[2]

    layout = _layout(file, feature_names, table.layout)
    return LoadedDataset(X, candidates, list(label_space), ids, true_labels, feature_names, layout, os.fspath(file))


def _resolve_role(file: Path, table: _Table, requested: str | None, default: str, argument: str) -> str | None:
    if requested is None:
        return default if default in table.columns else None
    if requested not in table.columns:
        raise DataFileError(file, f"has no {requested!r} column for {argument} (columns: {_listing(table.names)})")
    return requested


# --------------------------------------------------------------------------------------------
# Arrays (.mat and .npz)
# --------------------------------------------------------------------------------------------


def _read_mat(file: Path, head: bytes, label_names: list[str] | None) -> LoadedDataset:
    import scipy.io
    import scipy.sparse

    if head.startswith(b"MATLAB 7.3") or head.startswith(b"\x89HDF") or head[512:516] == b"\x89HDF":
        raise DataFileError(file, "is a MATLAB v7.3 (HDF5) file; re-save it in MATLAB with save(..., '-v7')")
    if len(head) < 128 or head[126:128] not in (b"IM", b"MI"):
        _reject_binary_magic(file, head, expected="MATLAB")
        raise DataFileError(file, "is not a MATLAB 5/7 MAT-file (no MAT-file header)")
    # scipy's compiled MAT reader can crash the whole process on a corrupt element (an unknown
    # data type code indexes past a table), so the element structure is checked here first.
    raw = file.read_bytes()
    try:
        _check_mat5_structure(raw, wanted=_MAT_VARIABLES)
    except _CorruptMat as exc:
        raise DataFileError(file, f"is not a readable MAT-file: {exc}") from None
    try:
        contents = scipy.io.loadmat(io.BytesIO(raw), variable_names=list(_MAT_VARIABLES))
    except Exception as exc:  # scipy raises many types on corrupt input; report, never leak
        raise DataFileError(file, f"is not a readable MAT-file: {_first_line(exc)}") from None
    keys = sorted(k for k in contents if not k.startswith("__"))
    for key in ("data", "partial_target"):
        if key not in contents:
            raise DataFileError(
                file,
                f"has no variable {key!r}; a PLL MAT-file needs 'data' (n x d) and 'partial_target' (q x n) "
                f"(variables: {_listing(keys) or 'none'})",
            )

    def dense(key: str) -> np.ndarray:
        value = contents[key]
        try:
            if scipy.sparse.issparse(value):
                value.check_format(full_check=True)  # bad indices would be read out of bounds
                value = value.toarray()
            arr = np.asarray(value)
        except Exception as exc:  # corrupt sparse structure, absurd shapes
            raise DataFileError(file, f"cannot be read: {_first_line(exc)}", column=key, has_header=False) from None
        if arr.dtype.kind not in "biuf" or arr.ndim != 2:
            raise DataFileError(
                file, f"must be a 2-D numeric matrix, got {arr.dtype} of shape {arr.shape}", column=key,
                has_header=False,
            )
        return arr

    X = _check_feature_matrix(file, dense("data"), "data")
    n = X.shape[0]
    partial = dense("partial_target")
    if partial.shape[1] == n:
        partial = partial.T
    elif partial.shape[0] != n:
        raise DataFileError(
            file, f"has shape {partial.shape} but 'data' has {n} rows; expected (q, {n})", column="partial_target",
            has_header=False,
        )
    candidates = _check_zero_one(file, partial, "partial_target")
    target = None
    if "target" in contents:
        target = dense("target")
        if target.shape == (candidates.shape[1], n) and target.shape != candidates.shape:
            target = target.T
        if target.shape != candidates.shape:
            raise DataFileError(
                file, f"has shape {target.shape}, which does not match 'partial_target'", column="target",
                has_header=False,
            )
        target = _check_zero_one(file, target, "target", allow_empty=True)
    q = candidates.shape[1]
    names = _names_for_columns(file, label_names, [str(j) for j in range(1, q + 1)], q, "partial_target")
    true_labels = _true_labels_from_one_hot(file, target, candidates) if target is not None else None
    feature_names = [f"feature_{j}" for j in range(X.shape[1])]
    return LoadedDataset(X, candidates, names, [str(i) for i in range(n)], true_labels, feature_names, None,
                         os.fspath(file))


_MAT_VARIABLES = ("data", "partial_target", "target")
_MAT_MAX_INFLATED = 1 << 29  # 512 MiB: refuse to inflate a compressed variable beyond this
_MI_NUMERIC = {1: 1, 2: 1, 3: 2, 4: 2, 5: 4, 6: 4, 7: 4, 9: 8, 12: 8, 13: 8}  # mi type -> item size
_MI_INT8, _MI_INT32, _MI_UINT32, _MI_MATRIX, _MI_COMPRESSED = 1, 5, 6, 14, 15
_MX_SPARSE, _MX_NUMERIC = 5, range(6, 16)


class _CorruptMat(Exception):
    """Internal: the MAT-file's element structure is inconsistent (converted to DataFileError)."""


def _check_mat5_structure(raw: bytes, *, wanted: Sequence[str]) -> None:
    """Walk the data elements of a MAT 5 file and check every tag that scipy would trust.

    Checks every top-level element (inflating compressed ones), every variable's flags, dims
    and name, and for the ``wanted`` variables that the data parts have a numeric type code and
    exactly the byte count their dimensions need. Raises ``_CorruptMat`` on the first problem.
    """
    import struct
    import zlib

    endian = "<" if raw[126:128] == b"IM" else ">"

    def tag(buf: bytes, pos: int, end: int) -> tuple[int, int, int, int]:
        if pos + 8 > end:
            raise _CorruptMat(f"truncated element at byte {pos}")
        first, second = struct.unpack_from(endian + "II", buf, pos)
        if first >> 16:  # small data element: type and size packed in 4 bytes, data in the next 4
            mdtype, nbytes, start = first & 0xFFFF, first >> 16, pos + 4
            if nbytes > 4:
                raise _CorruptMat(f"bad small element at byte {pos}")
            return mdtype, nbytes, start, pos + 8
        start = pos + 8
        if start + second > end:
            raise _CorruptMat(f"element at byte {pos} claims {second} bytes beyond the end")
        return first, second, start, start + second + (-second % 8)

    def matrix(buf: bytes, start: int, end: int) -> None:
        if start == end:
            return  # empty matrix
        mdtype, nbytes, data, pos = tag(buf, start, end)
        if mdtype != _MI_UINT32 or nbytes != 8:
            raise _CorruptMat("variable without array flags")
        flags = struct.unpack_from(endian + "I", buf, data)[0]
        mx_class, is_complex = flags & 0xFF, bool(flags & 0x800)
        mdtype, nbytes, data, pos = tag(buf, pos, end)
        if mdtype != _MI_INT32 or nbytes % 4 or nbytes < 8:
            raise _CorruptMat("variable without valid dimensions")
        dims = struct.unpack_from(endian + f"{nbytes // 4}i", buf, data)
        if min(dims) < 0:
            raise _CorruptMat(f"negative dimension {dims}")
        mdtype, nbytes, data, pos = tag(buf, pos, end)
        if mdtype != _MI_INT8:
            raise _CorruptMat("variable without a name")
        name = buf[data:data + nbytes].decode("latin-1")
        if name not in wanted:
            return  # scipy skips the body of variables it was not asked for
        if mx_class == _MX_SPARSE:
            parts = 3 + is_complex  # ir, jc, real part, imaginary part
        elif mx_class in _MX_NUMERIC:
            parts = 1 + is_complex
        else:
            raise _CorruptMat(f"variable {name!r} is not a numeric matrix (MATLAB class {mx_class})")
        count = math.prod(dims)
        for part in range(parts):
            mdtype, nbytes, data, pos = tag(buf, pos, end)
            size = _MI_NUMERIC.get(mdtype)
            if size is None:
                raise _CorruptMat(f"variable {name!r} has data of unknown type code {mdtype}")
            if mx_class in _MX_NUMERIC and nbytes != count * size:
                raise _CorruptMat(f"variable {name!r} holds {nbytes} bytes but its size {dims} needs {count * size}")
            if mx_class == _MX_SPARSE and nbytes % size:
                raise _CorruptMat(f"variable {name!r} has a truncated sparse part")

    if len(raw) < 128:
        raise _CorruptMat("shorter than a MAT-file header")
    pos, end = 128, len(raw)
    while pos < end:
        if end - pos < 8 and not raw[pos:].strip(b"\x00"):
            break  # trailing padding
        mdtype, nbytes, data, pos_next = tag(raw, pos, end)
        if mdtype == _MI_COMPRESSED:
            inflater = zlib.decompressobj()
            try:
                inner = inflater.decompress(raw[data:data + nbytes], _MAT_MAX_INFLATED)
            except zlib.error as exc:
                raise _CorruptMat(f"compressed element at byte {pos}: {exc}") from None
            if inflater.unconsumed_tail:
                raise _CorruptMat("a compressed variable inflates to more than 512 MiB")
            inner_type, inner_bytes, inner_data, _ = tag(inner, 0, len(inner))
            if inner_type != _MI_MATRIX:
                raise _CorruptMat(f"compressed element at byte {pos} does not hold a variable")
            matrix(inner, inner_data, inner_data + inner_bytes)
            pos = data + nbytes  # compressed elements are not padded
        elif mdtype == _MI_MATRIX:
            matrix(raw, data, data + nbytes)
            pos = pos_next
        else:
            raise _CorruptMat(f"unexpected element type {mdtype} at byte {pos}")


def _read_npz(file: Path, head: bytes, label_names: list[str] | None) -> LoadedDataset:
    if head.startswith(b"\x93NUMPY"):
        raise DataFileError(file, "is a single .npy array, not an .npz archive; save with numpy.savez(path, X=..., candidates=...)")
    if not head.startswith(b"PK"):
        _reject_binary_magic(file, head, expected="npz")
        raise DataFileError(file, "is not an .npz archive (not a zip file)")
    try:
        archive = np.load(file, allow_pickle=False)
    except Exception as exc:  # numpy / zipfile raise many types on corrupt input
        raise DataFileError(file, f"is not a readable .npz archive: {_first_line(exc)}") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise DataFileError(file, "is not an .npz archive")
    with archive:
        keys = sorted(archive.files)

        def get(key: str) -> np.ndarray | None:
            if key not in archive.files:
                return None
            try:
                return np.asarray(archive[key])
            except Exception as exc:  # corrupt member, pickled object array, ...
                reason = _first_line(exc)
                if "allow_pickle" in reason:
                    reason = "it is an object array; save strings as a numpy str array (dtype 'U')"
                raise DataFileError(file, f"cannot be read: {reason}", column=key, has_header=False) from None

        raw_X, raw_candidates = get("X"), get("candidates")
        for key, value in (("X", raw_X), ("candidates", raw_candidates)):
            if value is None:
                raise DataFileError(
                    file,
                    f"has no array {key!r}; an .npz dataset needs 'X' (n x d features) and 'candidates' "
                    f"(n x M bool) (arrays: {_listing(keys) or 'none'})",
                )
        raw_y, raw_names, raw_ids = get("y"), get("label_names"), get("ids")
        raw_features, raw_layout = get("feature_names"), get("layout")

    if raw_X.dtype.kind not in "biuf" or raw_X.ndim != 2:
        raise DataFileError(file, f"must be a 2-D numeric array, got {raw_X.dtype} of shape {raw_X.shape}",
                            column="X", has_header=False)
    X = _check_feature_matrix(file, raw_X, "X")
    n, d = X.shape
    if raw_candidates.dtype.kind not in "biuf" or raw_candidates.ndim != 2 or raw_candidates.shape[0] != n:
        raise DataFileError(
            file, f"must be a bool array of shape ({n}, n_labels), got {raw_candidates.dtype} of shape "
            f"{raw_candidates.shape}", column="candidates", has_header=False,
        )
    candidates = _check_zero_one(file, raw_candidates, "candidates")
    M = candidates.shape[1]
    file_names = _string_vector(file, raw_names, "label_names", M) if raw_names is not None else None
    names = _names_for_columns(file, label_names, file_names or [str(j) for j in range(M)], M, "candidates")
    if file_names is not None and label_names is None:
        _check_label_names_in_file(file, names)

    true_labels = None
    if raw_y is not None:
        y = raw_y.reshape(-1) if raw_y.ndim == 2 and 1 in raw_y.shape else raw_y
        if y.ndim != 1 or y.shape[0] != n or y.dtype.kind not in "iuf":
            raise DataFileError(file, f"must be {n} integer label indices, got {y.dtype} of shape {raw_y.shape}",
                                column="y", has_header=False)
        bad = ~np.isfinite(y.astype(np.float64)) | (y != np.round(y)) | (y < -1) | (y >= M)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DataFileError(file, f"value {y[i].item()!r} is not a label index in -1..{M - 1} (-1 = unknown)",
                                row=i + 1, column="y", has_header=False)
        true_labels = y.astype(np.int64)
        _check_true_in_candidates(file, true_labels, candidates, names, "y")

    if raw_ids is not None:
        ids = _string_vector(file, raw_ids, "ids", n)
        seen: dict[str, int] = {}
        for i, item in enumerate(ids):
            if item in seen:
                raise DataFileError(file, f"duplicate id {_quote(item)} (first used in row {seen[item]})",
                                    row=i + 1, column="ids", has_header=False)
            seen[item] = i + 1
    else:
        ids = [str(i) for i in range(n)]
    feature_names = (_string_vector(file, raw_features, "feature_names", d) if raw_features is not None
                     else [f"feature_{j}" for j in range(d)])
    declared = None
    if raw_layout is not None:
        if raw_layout.size != 1 or raw_layout.dtype.kind not in "US":
            raise DataFileError(file, "must be one string such as 'image:8x8'", column="layout", has_header=False)
        item = raw_layout.reshape(-1)[0]
        declared = item.decode("utf-8", "replace") if isinstance(item, bytes) else str(item)
    layout = _layout(file, feature_names, declared)
    return LoadedDataset(X, candidates, names, ids, true_labels, feature_names, layout, os.fspath(file))


def _check_feature_matrix(file: Path, arr: np.ndarray, key: str) -> np.ndarray:
    X = np.asarray(arr, dtype=np.float64)
    if X.shape[0] == 0:
        raise DataFileError(file, "has no rows", column=key, has_header=False)
    if X.shape[1] == 0:
        raise DataFileError(file, "has no feature columns", column=key, has_header=False)
    bad = ~np.isfinite(X)
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        raise DataFileError(file, f"feature {j} (0-based) is {X[i, j]}; features must be finite",
                            row=i + 1, column=key, has_header=False)
    return np.ascontiguousarray(X)


def _check_zero_one(file: Path, arr: np.ndarray, key: str, *, allow_empty: bool = False) -> np.ndarray:
    if arr.dtype != bool:
        bad = ~np.isin(arr, (0, 1))
        if bad.any():
            i, j = (int(v) for v in np.argwhere(bad)[0])
            raise DataFileError(file, f"entry for label {j} (0-based) is {arr[i, j]!r}; entries must be 0 or 1",
                                row=i + 1, column=key, has_header=False)
        arr = arr.astype(bool)
    if arr.shape[1] == 0:
        raise DataFileError(file, "has no label columns", column=key, has_header=False)
    if not allow_empty:
        empty = ~arr.any(axis=1)
        if empty.any():
            i = int(np.flatnonzero(empty)[0])
            raise DataFileError(file, "empty candidate set; every item needs at least one candidate label",
                                row=i + 1, column=key, has_header=False)
    return np.ascontiguousarray(arr)


def _true_labels_from_one_hot(file: Path, target: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    counts = target.sum(axis=1)
    if (counts > 1).any():
        i = int(np.flatnonzero(counts > 1)[0])
        raise DataFileError(file, f"has {int(counts[i])} true labels for one item; 'target' must be one-hot",
                            row=i + 1, column="target", has_header=False)
    true_labels = np.where(counts == 1, target.argmax(axis=1), -1).astype(np.int64)
    names = [str(j) for j in range(1, candidates.shape[1] + 1)]
    _check_true_in_candidates(file, true_labels, candidates, names, "target")
    return true_labels


def _check_true_in_candidates(file: Path, true_labels: np.ndarray, candidates: np.ndarray,
                              names: list[str], key: str) -> None:
    known = true_labels >= 0
    rows = np.flatnonzero(known)
    outside = ~candidates[rows, true_labels[rows]]
    if outside.any():
        i = int(rows[np.flatnonzero(outside)[0]])
        in_set = LABEL_SEPARATOR.join(names[j] for j in np.flatnonzero(candidates[i]))
        raise DataFileError(
            file, f"true label {_quote(names[true_labels[i]])} is not in the item's candidate set {_quote(in_set)}",
            row=i + 1, column=key, has_header=False,
        )


def _string_vector(file: Path, arr: np.ndarray, key: str, length: int) -> list[str]:
    flat = arr.reshape(-1) if arr.ndim == 2 and 1 in arr.shape else arr
    if flat.ndim != 1 or flat.shape[0] != length or flat.dtype.kind not in "USiu":
        raise DataFileError(file, f"must be {length} strings or integers, got {arr.dtype} of shape {arr.shape}",
                            column=key, has_header=False)
    out = [item.decode("utf-8", "replace").strip() if isinstance(item, bytes) else str(item).strip()
           for item in flat.tolist()]
    for i, item in enumerate(out):
        if not item:
            raise DataFileError(file, "is empty", row=i + 1, column=key, has_header=False)
    return out


def _names_for_columns(file: Path, given: list[str] | None, default: list[str], count: int, key: str) -> list[str]:
    if given is None:
        return default
    if len(given) != count:
        raise DataFileError(
            file, f"has {count} label columns but {len(given)} label_names were given", column=key, has_header=False
        )
    return given


def _check_label_names_in_file(file: Path, names: list[str]) -> None:
    try:
        _check_label_names_argument(names)
    except InvalidInput as exc:
        raise DataFileError(file, str(exc), column="label_names", has_header=False) from None


# --------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------

_PIXEL = re.compile(r"(?:pixel|pix|px)[_\-. ]?(\d+)", re.IGNORECASE)
_PIXEL_RC = re.compile(r"(?:pixel|pix|px)[_\-. ]?(\d+)[_\-. x](\d+)", re.IGNORECASE)
_LAYOUT = re.compile(r"image:(\d+)x(\d+)")


def _layout(file: Path, feature_names: Sequence[str], declared: str | None) -> str | None:
    d = len(feature_names)
    if declared is not None:
        match = _LAYOUT.fullmatch(declared.strip())
        if not match:
            raise DataFileError(file, f"layout {_quote(declared)} is not of the form 'image:<height>x<width>'")
        height, width = int(match[1]), int(match[2])
        if height * width != d:
            raise DataFileError(file, f"layout {_quote(declared)} needs {height * width} features but there are {d}")
        return f"image:{height}x{width}"
    flat = [_PIXEL.fullmatch(name) for name in feature_names]
    if all(flat):
        side = math.isqrt(d)
        indices = [int(m[1]) for m in flat]
        if side >= 2 and side * side == d and indices in (list(range(d)), list(range(1, d + 1))):
            return f"image:{side}x{side}"
        return None
    grid = [_PIXEL_RC.fullmatch(name) for name in feature_names]
    if all(grid) and d >= 4:
        cells = [(int(m[1]), int(m[2])) for m in grid]
        height = max(r for r, _ in cells) + 1
        width = max(c for _, c in cells) + 1
        if height * width == d and cells == [(r, c) for r in range(height) for c in range(width)]:
            return f"image:{height}x{width}"
    return None


_MAGIC = (
    (b"PK\x03\x04", "a zip archive (an Excel .xlsx workbook or an .npz?)"),
    (b"PAR1", "a Parquet file"),
    (b"MATLAB", "a MATLAB MAT-file"),
    (b"\x93NUMPY", "a NumPy .npy file"),
    (b"\x89HDF", "an HDF5 file"),
    (b"\xd0\xcf\x11\xe0", "an old Excel/Office document"),
    (b"\x1f\x8b", "a gzip-compressed file"),
    (b"%PDF", "a PDF document"),
)


def _reject_binary_magic(file: Path, head: bytes, *, expected: str) -> None:
    for magic, what in _MAGIC:
        if head.startswith(magic):
            raise DataFileError(file, f"looks like {what}, not {expected}; check the file or its extension")


def _first_line(exc: BaseException, limit: int = 160) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
