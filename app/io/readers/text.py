"""CSV, TSV and delimited ``.txt`` files: UTF-8 (a BOM is fine) or UTF-16 with a BOM."""

from __future__ import annotations

import codecs
import csv
import io
from pathlib import Path

from app.io.errors import DataFileError
from app.io.limits import MAX_COLUMNS
from app.io.readers.checks import reject_binary_magic
from app.io.readers.table import Table, check_header
from app.io.writers import FORMULA_PREFIXES

__all__ = ["read_text"]


def read_text(file: Path, head: bytes, ext: str, delimiter: str | None) -> Table:
    reject_binary_magic(file, head, expected="text")
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

    # Counted before the csv module makes a string of every header cell.
    start = len(text) - len(text.lstrip())
    end = text.find("\n", start)
    if text.count(delimiter, start, end if end >= 0 else len(text)) >= MAX_COLUMNS:
        raise DataFileError(file, f"has more than {MAX_COLUMNS:,} columns in its header")
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
            if len(record) > len(header) and not any(c.strip() for c in record[len(header) :]):
                record = record[: len(header)]  # trailing empty cells a spreadsheet left behind
            if len(record) != len(header):
                hint = ""
                if len(record) > len(header) and any(c.lstrip().startswith("[") for c in record):
                    hint = '; a JSON list containing the delimiter must be quoted, e.g. "[""cat"", ""dog""]"'
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

    check_header(file, header)
    hint = ""
    if len(header) == 1:
        for sep, label in (("\t", "tab"), (";", "';'"), (",", "','")):
            if sep != delimiter and sep in header[0]:
                hint = f" (the header looks {label}-separated; pass delimiter={sep!r} or use the matching extension)"
                break
    columns = (
        {name: list(cells) for name, cells in zip(header, zip(*rows, strict=True), strict=True)}
        if rows
        else {n: [] for n in header}
    )
    return Table(header, columns, row_numbers, has_header=True, single_column_hint=hint)


def _unescape_formula(cell: str) -> str:
    """Undo :func:`app.io.writers.neutralise_formulas`: ``'=x`` is read as ``=x``."""
    if cell[:1] == "'" and cell[1:2] and cell[1:].startswith(FORMULA_PREFIXES):
        return cell[1:]
    return cell
