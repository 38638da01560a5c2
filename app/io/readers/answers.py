"""Read a file of answers (``winnow answer SESSION --from FILE``), checked before anything is stored.

Formats, by extension: ``.csv`` and ``.tsv`` (a header row, then one answer per row; UTF-8, a
BOM is fine) and ``.jsonl`` (one JSON object per line). Columns (keys): ``id`` (the item's id),
``label`` (a label name), optionally ``kind`` and ``annotator``. ``kind`` is what the row says
about the item, as for a single answer: ``label`` (or ``answer``, the default when the cell or
the column is missing: the item's label is ``label``, one of its candidates), ``other_label``
(a label outside its candidate set), ``none_of_these`` or ``skip`` (both with a blank
``label``). Any other kind is refused, and so is a column that is one of these names
misspelt or in other capitals (``Kind``, ``annotater``): it would otherwise be ignored. Other
columns are ignored, so the ranked export with a ``label`` column filled in by an expert reads
as it is. Rows are numbered from 1 (the first answer); a CSV/TSV message also gives the
spreadsheet row.

The file is read row by row within the bounds of :mod:`app.io.limits` (file size, header
columns, field size, number of answers, JSON nesting and integer size), so a hostile file is
refused before it is held in memory. This module checks the file alone (columns present, no
blank id or label, no id twice, texts the store accepts); the store checks each answer against
the session (:func:`app.store.record_events`).
"""

from __future__ import annotations

import csv
import difflib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from app.dataset_rules import text_problem
from app.io.errors import DataFileError
from app.io.limits import MAX_ANSWERS, MAX_COLUMNS, MAX_FIELD_CHARS, MAX_INT_DIGITS, MAX_JSON_DEPTH, max_upload_bytes
from app.io.readers.labels import quote

__all__ = ["ANSWER_EXTENSIONS", "ANSWER_COLUMNS", "ANSWER_KINDS", "AnswerRow", "read_answers"]

#: The extensions :func:`read_answers` reads.
ANSWER_EXTENSIONS: tuple[str, ...] = (".csv", ".tsv", ".jsonl")
#: The columns :func:`read_answers` reads; others are ignored (unless one of these misspelt).
ANSWER_COLUMNS: tuple[str, ...] = ("id", "label", "kind", "annotator")
#: Values of the ``kind`` column, and the event kind each records.
ANSWER_KINDS: dict[str, str] = {
    "label": "answer",
    "answer": "answer",
    "other_label": "other_label",
    "none_of_these": "none_of_these",
    "skip": "skip",
}
#: Kinds that carry a label.
_LABELLED = ("answer", "other_label")


@dataclass(frozen=True)
class AnswerRow:
    """One answer of the file: its 1-based row, the item id, the event kind (``answer``,
    ``other_label``, ``none_of_these``, ``skip``), the label name (``None`` for the kinds
    without one) and who answered (``None``: the command's ``--annotator``)."""

    row: int
    item: str
    label: str | None
    annotator: str | None
    kind: str = "answer"


def _cell(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    text = str(value).strip()
    return text or None


def _check_columns(target: Path, columns: list[str], *, has_header: bool, row: int | None = None) -> None:
    """Refuse a column that is a known one misspelt or in other capitals."""
    for name in columns:
        if name in ANSWER_COLUMNS:
            continue
        near = difflib.get_close_matches(name.strip().lower().replace("-", "_"), ANSWER_COLUMNS, n=1, cutoff=0.8)
        if near:
            raise DataFileError(
                target,
                f"column {quote(name)} is not an answers column; did you mean {near[0]!r}? "
                f"(columns read: {', '.join(ANSWER_COLUMNS)}; others are ignored)",
                row=row,
                has_header=has_header,
            )


def _count_header_columns(handle: IO[bytes], delimiter: bytes) -> int:
    """Columns of the first line, counted in 1 MiB chunks without splitting it into strings."""
    count = 1
    while chunk := handle.read(1 << 20):
        end = chunk.find(b"\n")
        count += chunk.count(delimiter, 0, end if end >= 0 else len(chunk))
        if end >= 0 or count > MAX_COLUMNS:
            break
    handle.seek(0)
    return count


def _table_records(target: Path, delimiter: str) -> Iterator[tuple[int, dict[str, object]]]:
    with target.open("rb") as raw:
        if _count_header_columns(raw, delimiter.encode()) > MAX_COLUMNS:
            raise DataFileError(target, f"has more than {MAX_COLUMNS:,} columns in its header")
    with target.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.reader(handle, delimiter=delimiter)
        number = 0
        try:
            header = [c.strip() for c in next(reader, [])]
            for required in ("id", "label"):
                if required not in header:
                    raise DataFileError(
                        target,
                        f"has no {required!r} column (columns: {sorted(header)[:20]}); "
                        "an answers file has id,label and optionally kind,annotator",
                    )
            _check_columns(target, header, has_header=True)
            for number, cells in enumerate(reader, 1):
                yield number, dict(zip(header, cells, strict=False))
        except csv.Error as exc:
            too_long = "field limit" in str(exc)
            raise DataFileError(
                target,
                f"has a field longer than {MAX_FIELD_CHARS:,} characters" if too_long else f"is not valid CSV ({exc})",
                row=number + 1,
                has_header=True,
            ) from None
        except UnicodeDecodeError as exc:
            raise DataFileError(
                target, f"is not UTF-8 text ({exc.reason})", row=number + 1 if number else None, has_header=True
            ) from None


def _jsonl_records(target: Path) -> Iterator[tuple[int, dict[str, object]]]:
    count = 0
    with target.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            row = count + 1
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise DataFileError(
                    target, f"line {number} is not UTF-8 text ({exc.reason})", row=row, has_header=False
                ) from None
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataFileError(
                    target, f"line {number} is not JSON: {exc.msg}", row=row, has_header=False
                ) from None
            except RecursionError:
                raise DataFileError(
                    target, f"line {number} nests JSON deeper than {MAX_JSON_DEPTH} levels", row=row, has_header=False
                ) from None
            except ValueError:  # Python's integer-size limit
                raise DataFileError(
                    target,
                    f"line {number} holds an integer of more than {MAX_INT_DIGITS:,} digits",
                    row=row,
                    has_header=False,
                ) from None
            if not isinstance(value, dict):
                raise DataFileError(target, f"line {number} is not a JSON object", row=row, has_header=False)
            for required in ("id", "label"):
                if required not in value and not (required == "label" and "kind" in value):
                    raise DataFileError(target, f"has no {required!r} key", row=row, column=required, has_header=False)
            _check_columns(target, list(value), has_header=False, row=row)
            count += 1
            yield count, value


def read_answers(path: str | os.PathLike[str]) -> list[AnswerRow]:
    """The answers of ``path``, in file order.

    Raises
    ------
    DataFileError
        An unsupported extension, a missing ``id`` or ``label`` column, a misspelt column, an
        unknown kind, a blank id, a missing or an unwanted label, an id given twice, a text the
        store refuses (a control character, a lone surrogate), a line that is not a JSON
        object, or a file over the bounds of :mod:`app.io.limits`; the message names the file
        and the row.
    """
    target = Path(path)
    ext = target.suffix.lower()
    if ext not in ANSWER_EXTENSIONS:
        raise DataFileError(
            target,
            f"cannot read answers from {ext or '(no extension)'!r} files; use one of {', '.join(ANSWER_EXTENSIONS)}",
        )
    if not target.is_file():
        raise DataFileError(target, "does not exist or is not a file")
    limit = max_upload_bytes()
    if target.stat().st_size > limit:
        raise DataFileError(target, f"is larger than {limit:,} bytes; split it into smaller files")
    has_header = ext != ".jsonl"
    records = _jsonl_records(target) if ext == ".jsonl" else _table_records(target, "," if ext == ".csv" else "\t")
    answers: list[AnswerRow] = []
    first_row: dict[str, int] = {}
    for number, record in records:
        if len(answers) >= MAX_ANSWERS:
            raise DataFileError(
                target,
                f"holds more than {MAX_ANSWERS:,} answers; split it into smaller files",
                row=number,
                has_header=has_header,
            )
        values = {name: _cell(record.get(name)) for name in ANSWER_COLUMNS}
        for name, value in values.items():
            problem = text_problem(value) if value is not None else None
            if problem is not None:
                raise DataFileError(target, f"the {name} {problem}", row=number, column=name, has_header=has_header)
        item, label, given_kind = values["id"], values["label"], values["kind"]
        if item is None:
            raise DataFileError(target, "the id is blank", row=number, column="id", has_header=has_header)
        kind = ANSWER_KINDS.get(given_kind or "label")
        if kind is None:
            raise DataFileError(
                target,
                f"kind {quote(given_kind)} is not one of {', '.join(k for k in ANSWER_KINDS if k != 'answer')}",
                row=number,
                column="kind",
                has_header=has_header,
            )
        if kind in _LABELLED and label is None:
            raise DataFileError(
                target, f"item {item!r} has no label", row=number, column="label", has_header=has_header
            )
        if kind not in _LABELLED and label is not None:
            raise DataFileError(
                target,
                f"item {item!r}: kind {given_kind!r} takes no label, got {quote(label)}; leave the label blank",
                row=number,
                column="label",
                has_header=has_header,
            )
        if item in first_row:
            raise DataFileError(
                target,
                f"item {item!r} is answered twice (first in row {first_row[item]})",
                row=number,
                column="id",
                has_header=has_header,
            )
        first_row[item] = number
        answers.append(AnswerRow(number, item, label, values["annotator"], kind))
    if not answers:
        raise DataFileError(target, "holds no answers")
    return answers
