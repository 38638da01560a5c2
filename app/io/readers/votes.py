"""Read a table of crowd votes, and turn an item file's votes into its candidate sets.

A votes table has one row per vote: ``id`` (the item's id, as in the items file),
``annotator`` (who voted, as the source names them: not a winnow user), ``label`` (one label
name or integer) and optionally ``time`` (when the vote was cast: ISO 8601 text such as
``2026-11-20T14:03:00Z``, or a Parquet timestamp; a time without a zone is taken as UTC; blank
for unknown). Other columns are ignored.

Formats, by extension
---------------------
``.csv`` / ``.tsv``
    A header row, then one vote per row; UTF-8 (a BOM is fine) or UTF-16 with a BOM.
``.parquet``
    The same columns; ``time`` may be a timestamp column.
``.jsonl``
    One JSON object per line with the same keys.

The file's size is bounded before it is read (:func:`app.io.limits.max_decompressed_bytes`, the
limit of every reader) and so is the number of votes (:data:`MAX_VOTES`). Every problem is a
:class:`~app.io.errors.DataFileError` naming the file, the 1-based data row and the column;
CSV/TSV messages give the spreadsheet row too.

:class:`Votes` is what every source of votes produces (this reader, a Label Studio export);
:func:`match_votes` checks them against the items (unknown item, unknown label: the vote's
row is named) and :func:`apply_votes` makes the candidate sets with
:func:`engine.votes.candidate_sets_from_votes`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from datetime import datetime
from numbers import Integral
from pathlib import Path
from typing import Any

import numpy as np

from app.dataset_rules import NAME_MAX, text_problem
from app.io.errors import DataFileError
from app.io.limits import MAX_INT_DIGITS, MAX_JSON_DEPTH, as_utc, check_decompressed_size
from app.io.readers.checks import LoadedDataset, file_head
from app.io.readers.labels import LABEL_SEPARATOR, is_missing, label_from_scalar, listing, quote, sort_label_names
from app.io.readers.table import Table, cells
from engine.votes import candidate_sets_from_votes

__all__ = [
    "VOTE_EXTENSIONS",
    "MAX_VOTES",
    "Votes",
    "MatchedVotes",
    "read_votes",
    "vote_label_names",
    "match_votes",
    "apply_votes",
]

#: The extensions :func:`read_votes` reads.
VOTE_EXTENSIONS: tuple[str, ...] = (".csv", ".tsv", ".parquet", ".jsonl")
#: Most votes one file may hold (about 100 bytes each once read: 1 GB at the limit).
MAX_VOTES = 10_000_000

_REQUIRED = ("id", "annotator", "label")


@dataclass(frozen=True, eq=False)
class Votes:
    """Votes as a source gives them, checked one by one but not yet against the items.

    Attributes
    ----------
    item_ids, annotators, labels : list of str
        Per vote: the item's id, who voted, the label voted for (non-empty, at most
        :data:`app.dataset_rules.NAME_MAX` characters; a label holds no ``|``).
    times : list of (datetime or None)
        When each vote was cast, timezone-aware UTC; ``None`` when unknown.
    rows : list of int
        Where each vote is in its source, for messages: the 1-based data row (or task number).
    source : str
        The file the votes were read from.
    has_header : bool
        Whether ``rows`` count below a header line (CSV, TSV): messages then give the
        spreadsheet row too.
    """

    item_ids: list[str]
    annotators: list[str]
    labels: list[str]
    times: list[datetime | None]
    rows: list[int]
    source: str
    has_header: bool = True

    def __post_init__(self) -> None:
        n = len(self.item_ids)
        if not (len(self.annotators) == len(self.labels) == len(self.times) == len(self.rows) == n):
            raise ValueError("item_ids, annotators, labels, times and rows must have one entry per vote")

    def __len__(self) -> int:
        return len(self.item_ids)

    def error(self, vote: int, problem: str, column: str | None = None) -> DataFileError:
        """The error about vote number ``vote`` (0-based), naming its row and ``column``."""
        return DataFileError(self.source, problem, row=self.rows[vote], column=column, has_header=self.has_header)


@dataclass(frozen=True, eq=False)
class MatchedVotes:
    """Votes matched to the items of a dataset.

    Attributes
    ----------
    votes : Votes
    positions : int array of shape (n_votes,)
        The position of each vote's item in the dataset.
    label_indices : int array of shape (n_votes,)
        Each vote's label as an index into the dataset's label names.
    label_names : list of str
        The label names the indices refer to.
    """

    votes: Votes
    positions: np.ndarray
    label_indices: np.ndarray
    label_names: list[str]


def read_votes(path: str | os.PathLike[str]) -> Votes:
    """The votes of a ``.csv``, ``.tsv``, ``.parquet`` or ``.jsonl`` file, in file order.

    Raises
    ------
    DataFileError
        An unsupported extension, a missing or empty file, a missing ``id``, ``annotator`` or
        ``label`` column, a blank or over-long cell, a label holding ``|``, a time that is not
        a date and time, an annotator voting twice on one item, more than :data:`MAX_VOTES`
        votes. The message names the file, the row and the column.
    TypeError
        ``path`` is not a path.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    file = Path(path)
    ext = file.suffix.lower()
    if ext not in VOTE_EXTENSIONS:
        raise DataFileError(
            file, f"cannot read votes from {ext or '(no extension)'!r} files; use one of {', '.join(VOTE_EXTENSIONS)}"
        )
    size, head = file_head(file)
    if ext == ".parquet":
        from app.io.readers.parquet import read_parquet

        table = read_parquet(file, head)
    elif ext == ".jsonl":
        check_decompressed_size(file, "the votes file", size)
        table = _read_jsonl(file)
    else:
        from app.io.readers.text import read_text

        check_decompressed_size(file, "the votes file", size)
        table = read_text(file, head, ext, None)
    return _votes_from_table(file, table)


def _read_jsonl(file: Path) -> Table:
    columns: dict[str, list[Any]] = {name: [] for name in (*_REQUIRED, "time")}
    rows: list[int] = []
    with file.open("rb") as handle:
        for line_number, raw in enumerate(handle, 1):
            try:
                line = raw.decode("utf-8-sig" if line_number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise DataFileError(file, f"line {line_number} is not UTF-8 text ({exc.reason})") from None
            if not line.strip():
                continue
            row = len(rows) + 1
            try:
                value = json.loads(line)
            except (ValueError, RecursionError) as exc:  # JSONDecodeError, an integer over Python's limit
                message = (
                    exc.msg
                    if isinstance(exc, json.JSONDecodeError)
                    else f"nested deeper than {MAX_JSON_DEPTH} levels"
                    if isinstance(exc, RecursionError)
                    else f"holds an integer of more than {MAX_INT_DIGITS:,} digits"
                )
                raise DataFileError(
                    file, f"line {line_number} is not JSON: {message}", row=row, has_header=False
                ) from None
            if not isinstance(value, dict):
                raise DataFileError(file, f"line {line_number} is not a JSON object", row=row, has_header=False)
            for name in _REQUIRED:
                if name not in value:
                    raise DataFileError(file, f"has no {name!r} key", row=row, column=name, has_header=False)
            for name, column in columns.items():
                column.append(value.get(name))
            rows.append(row)
            if len(rows) > MAX_VOTES:
                raise DataFileError(file, f"holds more than {MAX_VOTES:,} votes", row=row, has_header=False)
    return Table(list(columns), dict(columns), rows, has_header=False)


def _text(cell: Any) -> str | None:
    """A cell as stripped text; ``None`` when missing or blank; ``""`` never returned."""
    if is_missing(cell):
        return None
    if isinstance(cell, (Integral, float, np.floating)) and not isinstance(cell, bool):
        return label_from_scalar(cell)
    if isinstance(cell, str):
        return cell.strip() or None
    raise ValueError(f"{quote(cell)} is not a name or a number")


def _time(cell: Any) -> datetime | None:
    if is_missing(cell) or (isinstance(cell, str) and not cell.strip()):
        return None
    if isinstance(cell, datetime):
        value = cell
    elif isinstance(cell, str):
        text = cell.strip()
        try:
            value = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        except ValueError:
            raise ValueError(
                f"{quote(cell)} is not a date and time (write ISO 8601, e.g. 2026-11-20T14:03:00Z)"
            ) from None
    else:
        raise ValueError(f"{quote(cell)} is not a date and time")
    return as_utc(value)


def _votes_from_table(file: Path, table: Table) -> Votes:
    has_header = table.has_header
    for name in _REQUIRED:
        if name not in table.columns:
            raise DataFileError(
                file,
                f"has no {name!r} column (columns: {listing(table.names)}); a votes file has id,annotator,label[,time]",
            )
    n = len(table.rows)
    if n == 0:
        raise DataFileError(file, "holds no votes")
    if n > MAX_VOTES:
        raise DataFileError(file, f"holds {n:,} votes; at most {MAX_VOTES:,} are accepted")
    values: dict[str, list[str]] = {}
    for name in _REQUIRED:
        column: list[str] = []
        for position, cell in enumerate(cells(table.columns[name])):
            row = table.rows[position]
            try:
                text = _text(cell)
            except ValueError as exc:
                raise DataFileError(file, str(exc), row=row, column=name, has_header=has_header) from None
            if text is None:
                raise DataFileError(file, f"the {name} is blank", row=row, column=name, has_header=has_header)
            if len(text) > NAME_MAX:
                raise DataFileError(
                    file,
                    f"{quote(text)} is longer than {NAME_MAX} characters",
                    row=row,
                    column=name,
                    has_header=has_header,
                )
            problem = text_problem(text)
            if problem is not None:
                raise DataFileError(file, f"{quote(text)} {problem}", row=row, column=name, has_header=has_header)
            if name == "label" and LABEL_SEPARATOR in text:
                raise DataFileError(
                    file,
                    f"{quote(text)} holds '|': a vote is one label (write one row per label voted for)",
                    row=row,
                    column=name,
                    has_header=has_header,
                )
            column.append(text)
        values[name] = column
    times: list[datetime | None] = [None] * n
    if "time" in table.columns:
        for position, cell in enumerate(cells(table.columns["time"])):
            try:
                times[position] = _time(cell)
            except ValueError as exc:
                raise DataFileError(
                    file, str(exc), row=table.rows[position], column="time", has_header=has_header
                ) from None
    first: dict[tuple[str, str], int] = {}
    for position, key in enumerate(zip(values["id"], values["annotator"], strict=True)):
        earlier = first.setdefault(key, position)
        if earlier != position:
            raise DataFileError(
                file,
                f"annotator {quote(key[1])} votes twice on item {quote(key[0])} (first in row {table.rows[earlier]}); "
                "keep one vote per annotator and item",
                row=table.rows[position],
                column="annotator",
                has_header=has_header,
            )
    return Votes(
        values["id"], values["annotator"], values["label"], times, list(table.rows), os.fspath(file), has_header
    )


def vote_label_names(votes: Votes) -> list[str]:
    """The labels the votes name, sorted as a reader sorts discovered labels."""
    return sort_label_names(votes.labels)


def match_votes(votes: Votes, ids: list[str], label_names: list[str]) -> MatchedVotes:
    """Match every vote to its item (by id) and its label (by name).

    Raises
    ------
    DataFileError
        A vote for an id that is not among ``ids`` ("unknown item") or for a label not in
        ``label_names`` ("unknown label"), naming the vote's row and column.
    """
    if not isinstance(votes, Votes):
        raise TypeError(f"votes must be a Votes, got {type(votes).__name__}")
    position_of = {item_id: position for position, item_id in enumerate(ids)}
    index_of = {name: j for j, name in enumerate(label_names)}
    positions = np.empty(len(votes), dtype=np.int64)
    labels = np.empty(len(votes), dtype=np.int64)
    for vote, (item_id, label) in enumerate(zip(votes.item_ids, votes.labels, strict=True)):
        position = position_of.get(item_id)
        if position is None:
            raise votes.error(vote, f"unknown item {quote(item_id)}: the items file has no such id", "id")
        j = index_of.get(label)
        if j is None:
            raise votes.error(vote, f"unknown label {quote(label)}; the labels are {listing(label_names)}", "label")
        positions[vote] = position
        labels[vote] = j
    return MatchedVotes(votes, positions, labels, list(label_names))


def apply_votes(
    dataset: LoadedDataset, votes: Votes, *, min_votes: int | None = None, min_share: float | None = None
) -> tuple[LoadedDataset, MatchedVotes]:
    """The dataset with the candidate sets of its voted items made from their votes.

    Items with votes get :func:`engine.votes.candidate_sets_from_votes` of them (the union, or
    the labels meeting ``min_votes`` / ``min_share``, falling back to the plurality labels);
    items without votes keep the set the dataset gave them (read without a candidates column,
    that is every label), and so do the items whose set the file states
    (:attr:`~app.io.readers.checks.LoadedDataset.kept_sets`). The label names are the
    dataset's: a vote for another label is an error.

    Returns
    -------
    (LoadedDataset, MatchedVotes)

    Raises
    ------
    DataFileError
        An unknown item or label (:func:`match_votes`), naming the votes file's row.
    InvalidInput
        A bad threshold.
    """
    matched = match_votes(votes, dataset.ids, dataset.label_names)
    voted = candidate_sets_from_votes(
        matched.positions,
        matched.label_indices,
        n_items=dataset.n_instances,
        n_labels=dataset.n_labels,
        min_votes=min_votes,
        min_share=min_share,
    )
    has_votes = np.zeros(dataset.n_instances, dtype=bool)
    has_votes[matched.positions] = True
    if dataset.kept_sets is not None:
        has_votes &= ~dataset.kept_sets  # the file states these sets (winnow's own export)
    candidates = np.where(has_votes[:, None], voted, dataset.candidates)
    return replace(dataset, candidates=candidates), matched
