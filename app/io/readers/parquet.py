"""Parquet files: the columns of a CSV file, candidates possibly as a list column."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from app.io.errors import DataFileError
from app.io.limits import PYTHON_CELL_BYTES, check_decompressed_size
from app.io.readers.checks import first_line, reject_binary_magic
from app.io.readers.table import Table, check_header

__all__ = ["read_parquet"]


def _bytes_per_row(file: Path, metadata: Any) -> int:
    """What a row takes once read: 8 bytes a numeric cell, :data:`PYTHON_CELL_BYTES` any other
    (strings and lists become Python objects, however well the file compressed them)."""
    import pyarrow as pa

    try:
        schema = metadata.schema.to_arrow_schema()
    except Exception as exc:  # pyarrow raises many types on corrupt input; report, never leak
        raise DataFileError(file, f"is not a readable Parquet file: {first_line(exc)}") from None
    numeric = (pa.types.is_integer, pa.types.is_floating, pa.types.is_boolean)
    per_row = sum(8 if any(test(field.type) for test in numeric) else PYTHON_CELL_BYTES for field in schema)
    return max(per_row, 8)


def read_parquet(file: Path, head: bytes) -> Table:
    import pyarrow.parquet as pq

    if not head.startswith(b"PAR1"):
        reject_binary_magic(file, head, expected="Parquet")
        raise DataFileError(file, "is not a Parquet file (it does not start with the 'PAR1' signature)")
    try:
        metadata = pq.read_metadata(file)
    except Exception as exc:  # pyarrow raises many types on corrupt input; report, never leak
        raise DataFileError(file, f"is not a readable Parquet file: {first_line(exc)}") from None
    # Before decompressing: the footer's uncompressed sizes, and 8 bytes a cell at least (what
    # the features become), bound what reading the table allocates.
    declared = sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups))
    estimate = max(declared, metadata.num_rows * _bytes_per_row(file, metadata))
    check_decompressed_size(file, "the table", estimate)
    try:
        table = pq.read_table(file)
        table = table.combine_chunks()
    except Exception as exc:  # pyarrow raises many types on corrupt input; report, never leak
        raise DataFileError(file, f"is not a readable Parquet file: {first_line(exc)}") from None
    names = [n for n in table.column_names if not re.fullmatch(r"__index_level_\d+__", n)]
    header = [n.strip() for n in names]
    check_header(file, header)
    columns: dict[str, Any] = {h: table.column(n) for h, n in zip(header, names, strict=True)}
    for name, column in columns.items():
        try:  # full validation catches invalid UTF-8 and bad offsets before any value is read
            column.validate(full=True)
        except Exception as exc:  # pyarrow.ArrowInvalid and friends
            raise DataFileError(file, f"is corrupt: {first_line(exc)}", column=name, has_header=False) from None
    metadata = table.schema.metadata or {}
    layout = metadata.get(b"winnow.layout")
    try:
        layout_text = layout.decode("utf-8") if layout is not None else None
    except UnicodeDecodeError:
        layout_text = None
    return Table(header, columns, list(range(1, table.num_rows + 1)), has_header=False, layout=layout_text)
