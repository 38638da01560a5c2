"""Tables (text and Parquet files): columns of raw cells, then one shared validation.

:func:`dataset_from_table` turns a :class:`Table` (header, columns of cells, 1-based data row
of each record) into a :class:`~app.io.readers.checks.LoadedDataset`: the candidates column,
the optional id and true-label columns, and every other column as a numeric feature.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from app.dataset_rules import first_repeat
from app.io.errors import DataFileError
from app.io.readers.checks import (
    LoadedDataset,
    check_store_limits,
    check_true_in_candidates,
    check_unique_ids,
    detect_layout,
    first_line,
)
from app.io.readers.content import ContentSources, features_from_content, read_contents, resolve_content_columns
from app.io.readers.labels import (
    LABEL_SEPARATOR,
    is_missing,
    label_from_scalar,
    listing,
    parse_candidate_cell,
    quote,
    sort_label_names,
)
from engine.exceptions import InvalidInput

__all__ = ["Roles", "Table", "check_header", "cells", "dataset_from_table"]


@dataclass
class Roles:
    candidates: str
    id: str | None
    true_label: str | None
    ignored: set[str]
    #: Without a candidates column: ``None`` refuses the file; label names give every item
    #: all of them (the caller narrows the sets, e.g. from votes).
    default_labels: list[str] | None = None


@dataclass
class Table:
    names: list[str]
    columns: dict[str, Any]  # list of cells, or a pyarrow ChunkedArray
    rows: list[int]  # 1-based data row of each kept record
    has_header: bool
    layout: str | None = None
    single_column_hint: str = ""


#: Columns every Label Studio CSV export has (besides the data keys and one column per control).
LABEL_STUDIO_CSV_COLUMNS = frozenset({"annotation_id", "annotator", "created_at", "lead_time", "updated_at"})


def check_header(file: Path, header: Sequence[str]) -> None:
    for position, name in enumerate(header, start=1):
        if not name:
            raise DataFileError(
                file,
                f"header cell {position} is empty; every column needs a name "
                "(a leftover index column? drop it or call it 'id')",
            )
    repeat = first_repeat(header)
    if repeat is not None:
        position, earlier = repeat
        raise DataFileError(
            file, f"duplicate column name (header cells {earlier + 1} and {position + 1})", column=header[position]
        )


def cells(column: Any) -> list[Any]:
    """Cells of a column as Python objects (None for a missing value)."""
    if isinstance(column, list):
        return column
    return column.to_pylist()


def _float_column(file: Path, table: Table, name: str) -> np.ndarray:
    """A feature column as float64; a non-numeric or non-finite cell is a DataFileError."""
    column = table.columns[name]
    if isinstance(column, list):
        raw_cells = column
        values = pd.to_numeric(pd.Series(raw_cells, dtype=object), errors="coerce").to_numpy(dtype=np.float64)
    else:
        import pyarrow as pa

        kind = column.type
        if (
            pa.types.is_integer(kind)
            or pa.types.is_floating(kind)
            or pa.types.is_boolean(kind)
            or pa.types.is_decimal(kind)
        ):
            raw_cells = None
            try:
                values = column.cast(pa.float64()).to_numpy(zero_copy_only=False).astype(np.float64)
            except Exception as exc:  # overflowing decimals and the like
                raise DataFileError(file, f"cannot be read as numbers: {first_line(exc)}", column=name) from None
        elif pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_dictionary(kind):
            raw_cells = column.to_pylist()
            values = pd.to_numeric(pd.Series(raw_cells, dtype=object), errors="coerce").to_numpy(dtype=np.float64)
        else:
            raise DataFileError(file, f"holds {kind} values; feature columns must be numeric", column=name)
    bad = ~np.isfinite(values)
    if not bad.any():
        return values
    position = int(np.flatnonzero(bad)[0])
    cell = (raw_cells if raw_cells is not None else cells(column))[position]
    if cell is None or (isinstance(cell, str) and not cell.strip()):
        problem = "is empty; every feature needs a value"
    else:
        try:
            finite = math.isfinite(float(cell))
        except (TypeError, ValueError, OverflowError):
            finite = True
        if not finite:
            problem = f"{quote(cell)} is not a finite number; features must be finite"
        else:
            problem = (
                f"{quote(cell)} is not a number; every column other than id, candidates, true_label "
                "and the content columns (text, image, audio, link) is a numeric feature: name the "
                "column's role (--text-column NAME) or skip it (--ignore-columns NAME)"
            )
    raise DataFileError(file, problem, row=table.rows[position], column=name, has_header=table.has_header)


#: Cells converted by one ``pd.to_numeric`` call when text columns are read together.
CONVERSION_BLOCK_CELLS = 1_000_000


def _feature_matrix(file: Path, table: Table, names: list[str]) -> np.ndarray:
    """The feature columns as one float64 matrix; the error names the first bad cell in reading
    order (top row first, then left column)."""
    n = len(table.rows)
    X = np.empty((n, len(names)), dtype=np.float64)
    if all(isinstance(table.columns[name], list) for name in names):
        # Text columns are converted many at a time: one pandas call per column costs about
        # 0.4 ms, which made a two-row file with a 200,000-column header take 85 s. The block
        # bound keeps the extra list of cell references small.
        width = max(1, CONVERSION_BLOCK_CELLS // max(n, 1))
        for start in range(0, len(names), width):
            block = names[start : start + width]
            flat = pd.Series([cell for name in block for cell in table.columns[name]], dtype=object)
            X[:, start : start + len(block)] = (
                pd.to_numeric(flat, errors="coerce").to_numpy(dtype=np.float64).reshape(len(block), n).T
            )
        bad = ~np.isfinite(X)
        if not bad.any():
            return X
        # Only the columns with a bad cell in the first bad row can hold the first error.
        first_row = int(np.flatnonzero(bad.any(axis=1))[0])
        suspects = [names[j] for j in np.flatnonzero(bad[first_row])]
        _convert_columns(file, table, suspects, np.empty((n, len(suspects))))
    _convert_columns(file, table, names, X)
    return X


def _convert_columns(file: Path, table: Table, names: list[str], out: np.ndarray) -> None:
    """Fill ``out`` column by column, or raise the error of the first bad cell in reading order."""
    errors: list[tuple[int, int, DataFileError]] = []
    for j, name in enumerate(names):
        try:
            out[:, j] = _float_column(file, table, name)
        except DataFileError as exc:
            errors.append((exc.row if exc.row is not None else -1, j, exc))
    if errors:
        raise min(errors, key=lambda e: (e[0], e[1]))[2]


def dataset_from_table(
    file: Path, table: Table, roles: Roles, label_names: list[str] | None, sources: ContentSources | None = None
) -> LoadedDataset:
    sources = sources if sources is not None else ContentSources()
    header = table.names
    has_header = table.has_header
    no_candidates = roles.candidates not in table.columns and roles.default_labels is not None
    if roles.candidates not in table.columns and not no_candidates:
        if LABEL_STUDIO_CSV_COLUMNS <= set(header):
            raise DataFileError(
                file,
                "is a Label Studio CSV export, which keeps one answer per task and not who voted what: "
                "export the project as JSON (Export > JSON) and import that file",
            )
        raise DataFileError(
            file,
            f"has no {roles.candidates!r} column (columns: {listing(header)}); "
            f"name another with --candidates-column NAME{table.single_column_hint}",
        )
    id_name = _resolve_role(file, table, roles.id, "id", "id_column")
    true_name = _resolve_role(file, table, roles.true_label, "true_label", "true_label_column")
    used = [u for u in (None if no_candidates else roles.candidates, id_name, true_name) if u is not None]
    if len(set(used)) != len(used):
        raise InvalidInput(f"candidates, id and true-label columns must differ, got {used}")
    role_of = {roles.candidates: "the candidate sets", id_name: "the ids", true_name: "the true labels"}
    clash = [name for name in used if name in roles.ignored]
    if clash:
        # Skipping them silently would import a dataset without what the user thinks it has.
        raise DataFileError(
            file,
            "ignore_columns names columns that cannot be ignored: "
            + ", ".join(f"{quote(name)} (holds {role_of[name]})" for name in clash),
            has_header=has_header,
        )
    content_roles = resolve_content_columns(file, header, sources.columns, set(used), roles.ignored)
    used += list(content_roles.values())
    # A features file replaces the numeric columns: none is read as a feature then.
    feature_names = (
        [] if sources.features_from is not None else [n for n in header if n not in used and n not in roles.ignored]
    )
    n = len(table.rows)
    if n == 0:
        raise DataFileError(file, "has a header but no data rows")
    if not feature_names and not content_roles and sources.features_from is None:
        raise DataFileError(
            file,
            "has no feature columns and no content: every column other than id, candidates and true_label "
            "must be a numeric feature, or the file needs a text, image or audio column "
            f"(columns: {listing(header)}){table.single_column_hint}",
        )

    # Candidate sets.
    sets: list[list[str]] = []
    if no_candidates:
        default = list(roles.default_labels or ())
        if not default:
            raise InvalidInput("the default labels of a file without a candidates column are empty")
        sets = [default] * n
    for position, cell in enumerate(cells(table.columns[roles.candidates]) if not no_candidates else ()):
        row = table.rows[position]
        try:
            names = parse_candidate_cell(cell)
        except ValueError as exc:
            raise DataFileError(file, str(exc), row=row, column=roles.candidates, has_header=has_header) from None
        if not names:
            raise DataFileError(
                file,
                "empty candidate set; every item needs at least one candidate label (write e.g. cat|dog)",
                row=row,
                column=roles.candidates,
                has_header=has_header,
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
                    f"unknown label {quote(name)}; the labels are {listing(label_space)}{hint}",
                    row=table.rows[position],
                    column=roles.candidates,
                    has_header=has_header,
                )
            candidates[position, j] = True

    # True labels.
    true_labels = None
    if true_name is not None:
        true_labels = np.full(n, -1, dtype=np.int64)
        for position, cell in enumerate(cells(table.columns[true_name])):
            row = table.rows[position]
            try:
                parsed = parse_candidate_cell(cell) if not isinstance(cell, (list, tuple)) else None
            except ValueError as exc:
                raise DataFileError(file, str(exc), row=row, column=true_name, has_header=has_header) from None
            if parsed is None or len(parsed) > 1:
                raise DataFileError(
                    file, f"{quote(cell)} is not a single label", row=row, column=true_name, has_header=has_header
                )
            if not parsed:
                continue  # unknown true label
            j = index.get(parsed[0])
            if j is None:
                raise DataFileError(
                    file,
                    f"true label {quote(parsed[0])} is not in the item's candidate set "
                    f"{quote(LABEL_SEPARATOR.join(sets[position]))}",
                    row=row,
                    column=true_name,
                    has_header=has_header,
                )
            true_labels[position] = j
        check_true_in_candidates(
            file, true_labels, candidates, label_space, true_name, rows=table.rows, has_header=has_header
        )

    # Ids.
    if id_name is None:
        ids = [str(i) for i in range(n)]
    else:
        ids = []
        for position, cell in enumerate(cells(table.columns[id_name])):
            row = table.rows[position]
            if is_missing(cell) or (isinstance(cell, str) and not cell.strip()):
                raise DataFileError(
                    file, "empty id; every item needs a unique id", row=row, column=id_name, has_header=has_header
                )
            if isinstance(cell, (list, tuple, dict, bytes)):
                raise DataFileError(file, f"{quote(cell)} is not an id", row=row, column=id_name, has_header=has_header)
            ids.append(
                label_from_scalar(cell)
                if isinstance(cell, (float, np.floating)) and float(cell).is_integer()
                else str(cell).strip()
            )
        check_unique_ids(file, ids, table.rows, id_name, has_header=has_header)

    # Content: checked before any feature is computed (a missing image is named, not featurized).
    contents = read_contents(
        file,
        {name: cells(table.columns[name]) for name in content_roles.values()},
        table.rows,
        has_header,
        sources,
        content_roles,
    )

    X = _feature_matrix(file, table, feature_names)
    record = None
    if feature_names:
        layout = detect_layout(file, feature_names, table.layout)
    else:
        X, feature_names, record = features_from_content(file, contents, ids, table.rows, has_header, sources)
        layout = None
    dataset = LoadedDataset(
        X,
        candidates,
        list(label_space),
        ids,
        true_labels,
        feature_names,
        layout,
        os.fspath(file),
        texts=contents.texts,
        media_paths=contents.media_paths,
        media_kinds=contents.media_kinds,
        links=contents.links,
        media_root=contents.media_root,
        featurizer=record,
        content_columns=contents.columns,
    )
    check_store_limits(
        file,
        dataset,
        rows=table.rows,
        has_header=has_header,
        id_column=id_name,
        labels_column=roles.candidates,
        feature_columns=record is None,
    )
    return dataset


def _resolve_role(file: Path, table: Table, requested: str | None, default: str, argument: str) -> str | None:
    if requested is None:
        return default if default in table.columns else None
    if requested not in table.columns:
        raise DataFileError(file, f"has no {requested!r} column for {argument} (columns: {listing(table.names)})")
    return requested
