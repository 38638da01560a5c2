"""Read a file of answers (``winnow answer SESSION --from FILE``), checked before anything is stored.

Formats, by extension: ``.csv`` and ``.tsv`` (a header row, then one answer per row; UTF-8, a
BOM is fine) and ``.jsonl`` (one JSON object per line). Columns (keys): ``id`` (the item's id)
and ``label`` (a label name), optionally ``annotator``; other columns are ignored, so the ranked
export with a ``label`` column filled in by an expert reads as it is. Rows are numbered from 1
(the first answer); a CSV/TSV message also gives the spreadsheet row.

This module checks the file alone (columns present, no blank id or label, no id twice); the
store checks each answer against the session (:func:`app.store.record_event`).
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

from app.io.errors import DataFileError
from app.io.limits import max_upload_bytes

__all__ = ["ANSWER_EXTENSIONS", "AnswerRow", "read_answers"]

#: The extensions :func:`read_answers` reads.
ANSWER_EXTENSIONS: tuple[str, ...] = (".csv", ".tsv", ".jsonl")


@dataclass(frozen=True)
class AnswerRow:
    """One answer of the file: its 1-based row, the item id, the label name and who answered
    (``None``: the command's ``--annotator``)."""

    row: int
    item: str
    label: str
    annotator: str | None


def _cell(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    text = str(value).strip()
    return text or None


def read_answers(path: str | os.PathLike[str]) -> list[AnswerRow]:
    """The answers of ``path``, in file order.

    Raises
    ------
    DataFileError
        An unsupported extension, a missing ``id`` or ``label`` column, a blank id or label,
        an id given twice, or a line that is not a JSON object; the message names the file and
        the row.
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
        raise DataFileError(target, f"is larger than {limit} bytes (an answers file is read whole)")
    try:
        text = target.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataFileError(target, f"is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    has_header = ext != ".jsonl"
    records: list[tuple[int, dict[str, object]]] = []
    if ext == ".jsonl":
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataFileError(
                    target, f"line {number} is not JSON: {exc.msg}", row=len(records) + 1, has_header=False
                ) from None
            if not isinstance(value, dict):
                raise DataFileError(
                    target, f"line {number} is not a JSON object", row=len(records) + 1, has_header=False
                )
            records.append((len(records) + 1, value))
        columns = set().union(*(r.keys() for _, r in records)) if records else set()
        for required in ("id", "label"):
            missing = next((row for row, r in records if required not in r), None)
            if missing is not None:
                raise DataFileError(target, f"has no {required!r} key", row=missing, column=required, has_header=False)
    else:
        reader = csv.DictReader(io.StringIO(text, newline=""), delimiter="," if ext == ".csv" else "\t")
        columns = {c.strip() for c in (reader.fieldnames or [])}
        for required in ("id", "label"):
            if required not in columns:
                raise DataFileError(
                    target,
                    f"has no {required!r} column (columns: {sorted(columns)}); "
                    "an answers file has id,label and optionally annotator",
                )
        for number, row in enumerate(reader, 1):
            records.append((number, {(k or "").strip(): v for k, v in row.items()}))
    if not records:
        raise DataFileError(target, "holds no answers")
    answers: list[AnswerRow] = []
    first_row: dict[str, int] = {}
    for number, record in records:
        item, label = _cell(record.get("id")), _cell(record.get("label"))
        if item is None:
            raise DataFileError(target, "the id is blank", row=number, column="id", has_header=has_header)
        if label is None:
            raise DataFileError(
                target, f"item {item!r} has no label", row=number, column="label", has_header=has_header
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
        annotator = _cell(record.get("annotator")) if "annotator" in columns else None
        answers.append(AnswerRow(number, item, label, annotator))
    return answers
