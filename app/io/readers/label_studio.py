"""Label Studio JSON exports: tasks in, items with their content and the annotators' votes.

Label Studio (https://labelstud.io/guide/export.html, format "JSON") exports a project as a
JSON list of **tasks**::

    [{"id": 17,
      "data": {"text": "Great riff, lazy drums"},
      "annotations": [
        {"completed_by": 3, "was_cancelled": false, "created_at": "2024-05-01T10:00:00Z",
         "result": [{"from_name": "label", "to_name": "text", "type": "choices",
                     "value": {"choices": ["rock"]}}]},
        ...]},
     ...]

:func:`is_label_studio_export` recognises such a file (a ``.json`` file whose top level is a list
of objects with ``data``); :func:`read_label_studio` reads it into a
:class:`~app.io.readers.checks.LoadedDataset` and the votes it holds.

What is read
------------
item id
    The task's ``id``; a task without one (a file made by hand for import) takes ``data.id``,
    else its 1-based position in the list.
content
    From ``data``, with the rules of every other data file (:mod:`app.io.readers.content`):
    ``data.text`` is the item's text, ``data.image`` (or ``data.path``) its image,
    ``data.audio`` its audio clip, ``data.link`` / ``data.url`` its link; the caller may name
    other keys (``text_column="review"`` reads ``data.review``). An http(s) URL is kept as the
    item's link; a path resolves against the media root (the JSON file's folder unless given)
    and must stay inside it. Label Studio's own references are read as paths under the media
    root: ``/data/local-files/?d=photos/a.png`` as ``photos/a.png`` (give Label Studio's
    ``LOCAL_FILES_DOCUMENT_ROOT`` as the media root) and ``/data/upload/3/a.png`` as
    ``upload/3/a.png`` (give Label Studio's ``media`` folder). Other keys of ``data`` are
    ignored; features are computed from the content (or read with ``features_from``).
votes
    Every annotation's single-choice ``choices`` result is one vote: the item, the annotator
    (``completed_by``: an integer user id is kept as its decimal text, an object by its
    ``email``, else its ``id``; without ``completed_by``, the ``meta.winnow.answered_by`` of a
    task winnow exported), the label and the annotation's ``created_at``. An annotation
    without any result (opened, never answered) and a cancelled one (``was_cancelled: true``,
    "skipped" in Label Studio) cast no vote. Pre-1.0 exports' ``completions`` are read as
    annotations; ``predictions`` are not votes and are ignored.
candidate sets
    The labels the item's annotators chose (their union); an item nobody voted on may be any
    label. The label set is every label voted for (natural order), or ``label_names`` when
    given (a vote outside it is then an error).

What is refused
---------------
One line naming the file, the task's position (``row``, 1-based) and its id: a task that is
not an object or has no ``data`` object; a result that is not a ``choices`` result (``labels``,
``textarea``, ``rectanglelabels`` ...) or that holds several choices ("task 17:
annotations[0].result[0].type 'labels' is not a single choice"); two classification controls
(``from_name``) in one file; an annotation whose ``completed_by`` is missing; a file without a
single vote.

Memory
------
The file is parsed whole with :func:`json.load` (``ijson`` is not a dependency), after checking
that :data:`app.io.limits.JSON_EXPANSION` times its size stays within
:func:`app.io.limits.max_decompressed_bytes`: an import of an export of many small tasks
takes about 33 bytes of memory per byte of JSON (docs/reliability.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import numpy as np

from app.io.errors import DataFileError
from app.io.limits import JSON_EXPANSION, MAX_INT_DIGITS, as_utc, check_decompressed_size, max_decompressed_bytes
from app.io.readers.checks import LoadedDataset, check_store_limits, check_unique_ids
from app.io.readers.content import ContentSources, features_from_content, read_contents, resolve_content_columns
from app.io.readers.labels import LABEL_SEPARATOR, listing, quote, sort_label_names
from app.io.readers.votes import MatchedVotes, Votes, apply_votes

__all__ = [
    "JSON_EXPANSION",
    "LOCAL_FILES_PREFIX",
    "UPLOAD_PREFIX",
    "LabelStudioExport",
    "is_label_studio_export",
    "read_label_studio",
    "media_reference",
]

#: How Label Studio refers to a file of its local-files storage: the path follows ``?d=``.
LOCAL_FILES_PREFIX = "/data/local-files/"
#: How Label Studio refers to a file uploaded to it (stored under its ``media/upload`` folder).
UPLOAD_PREFIX = "/data/upload/"

_MEDIA_ROLES = ("image", "audio", "link")


@dataclass(frozen=True)
class LabelStudioExport:
    """A Label Studio export read by :func:`read_label_studio`.

    Attributes
    ----------
    dataset : LoadedDataset
        The items (ids, content, features) and their candidate sets, made from the votes
        (which it carries as :attr:`~app.io.readers.checks.LoadedDataset.votes`).
    votes : MatchedVotes
        Every vote (:class:`app.io.readers.votes.Votes`: task id, annotator, label, time, and
        the task's position as its row), in file order, matched to its item and label.
    from_name, to_name : str
        The classification control and the object it labels, as the annotations name them
        (a writer reuses them so the tasks fit the same labelling config).
    """

    dataset: LoadedDataset
    votes: MatchedVotes
    from_name: str
    to_name: str


def is_label_studio_export(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` looks like a Label Studio export: a ``.json`` file whose first
    non-blank character opens a list and whose first element is an object with ``data``.

    Only the start of the file is read; :func:`read_label_studio` checks the rest.
    """
    file = Path(path)
    if file.suffix.lower() != ".json" or not file.is_file():
        return False
    try:
        with file.open("rb") as handle:
            head = handle.read(65536)
    except OSError:
        return False
    text = head.decode("utf-8-sig", errors="replace").lstrip()
    if not text.startswith("["):
        return False
    body = text[1:].lstrip()
    if not body.startswith("{"):
        return False
    # The first task's keys: "data" is usually among the first few (after "id").
    return '"data"' in body[:65536]


def media_reference(value: Any) -> Any:
    """A Label Studio media reference as a path under the media root (other values unchanged).

    >>> media_reference("/data/local-files/?d=photos%2Fcat%201.png")
    'photos/cat 1.png'
    >>> media_reference("/data/upload/3/5d1e-cat.png")
    'upload/3/5d1e-cat.png'
    >>> media_reference("https://example.com/a.png")
    'https://example.com/a.png'
    """
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith(LOCAL_FILES_PREFIX):
        found = parse_qs(urlsplit(text).query).get("d")
        return found[0] if found else text
    if text.startswith(UPLOAD_PREFIX):
        return "upload/" + unquote(text[len(UPLOAD_PREFIX) :])
    return value


def _annotator(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, dict):
        email = value.get("email")
        if isinstance(email, str) and email.strip():
            return email.strip()
        return _annotator(value.get("id"))
    return None


def _exported_by(task: dict[str, Any]) -> str | None:
    """Who answered a task of winnow's own export (``meta.winnow.answered_by``), if anyone."""
    meta = task.get("meta")
    record = meta.get("winnow") if isinstance(meta, dict) else None
    return _annotator(record.get("answered_by")) if isinstance(record, dict) else None


def _task_name(task: Any, row: int) -> str:
    task_id = task.get("id") if isinstance(task, dict) else None
    if isinstance(task_id, (int, str)) and not isinstance(task_id, bool) and str(task_id).strip():
        return f"task {str(task_id).strip()}"
    return f"task at position {row}"


def _load(file: Path) -> Any:
    size = file.stat().st_size
    limit = max_decompressed_bytes()
    check_decompressed_size(file, "the JSON file", size * JSON_EXPANSION, limit)
    raw = file.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataFileError(file, f"is not UTF-8 text (byte {exc.start + 1})", has_header=False) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFileError(
            file, f"is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})", has_header=False
        ) from None
    except RecursionError:
        raise DataFileError(file, "nests JSON too deeply to be a Label Studio export", has_header=False) from None
    except ValueError:  # an integer over Python's limit
        raise DataFileError(
            file, f"holds an integer of more than {MAX_INT_DIGITS:,} digits", has_header=False
        ) from None


def read_label_studio(
    path: str | os.PathLike[str],
    *,
    label_names: Sequence[str] | None = None,
    sources: ContentSources | None = None,
    min_votes: int | None = None,
    min_share: float | None = None,
) -> LabelStudioExport:
    """Read a Label Studio JSON export (see the module docstring).

    Parameters
    ----------
    path : str or os.PathLike
        The ``.json`` export.
    label_names : sequence of str, optional
        The complete label set, in order; a vote outside it is an error. Default: the labels
        voted for, in natural order.
    sources : ContentSources, optional
        Which ``data`` keys hold content (``columns``), the media root, a features file or a
        featurizer, as for :func:`app.io.read_dataset`.
    min_votes, min_share : optional
        Keep the labels with at least this many votes / this share of the task's votes
        (:func:`engine.votes.candidate_sets_from_votes`); default: every label voted for.

    Returns
    -------
    LabelStudioExport

    Raises
    ------
    DataFileError
        The file is not a Label Studio export or holds something winnow cannot read; one line
        naming the file, the task's position and its id.
    """
    file = Path(path)
    sources = sources if sources is not None else ContentSources()
    tasks = _load(file)
    if not isinstance(tasks, list):
        raise DataFileError(
            file, "is not a Label Studio export: its top level must be a list of tasks", has_header=False
        )
    if not tasks:
        raise DataFileError(file, "holds no tasks (an empty list)", has_header=False)

    rows = list(range(1, len(tasks) + 1))
    ids: list[str] = []
    data_cells: dict[str, list[Any]] = {}
    raw_votes: list[tuple[int, str, str, datetime | None, int]] = []
    voters: dict[tuple[int, str], str] = {}
    control: tuple[str, str, str] | None = None  # from_name, to_name, where first seen
    for position, task in enumerate(tasks):
        row = position + 1
        name = _task_name(task, row)
        if not isinstance(task, dict):
            raise DataFileError(file, f"{name} is not an object", row=row, has_header=False)
        data = task.get("data")
        if not isinstance(data, dict):
            problem = "has no 'data'" if data is None else f"'data' is {type(data).__name__}, not an object"
            # JSON-MIN, Label Studio's other JSON export, flattens data and choices into one object.
            hint = " (a JSON-MIN export? export the project as JSON)" if "annotations" not in task else ""
            raise DataFileError(
                file,
                f"{name} {problem}; every task needs its data (text or media){hint}",
                row=row,
                has_header=False,
            )
        ids.append(_item_id(file, task, data, position, name))
        for key in data:
            data_cells.setdefault(str(key), [None] * position)
        for key, cells in data_cells.items():
            cells.append(data.get(key))

        annotations = task.get("annotations", task.get("completions"))
        field = "annotations" if "annotations" in task else "completions"
        if annotations is None:
            continue
        if not isinstance(annotations, list):
            raise DataFileError(file, f"{name}: {field} is not a list", row=row, has_header=False)
        for a, annotation in enumerate(annotations):
            where = f"{field}[{a}]"
            if not isinstance(annotation, dict):
                raise DataFileError(file, f"{name}: {where} is not an object", row=row, has_header=False)
            if annotation.get("was_cancelled") is True:
                continue  # skipped in Label Studio: no vote
            result = annotation.get("result")
            if not result:
                continue  # an empty annotation: opened, never answered
            if not isinstance(result, list):
                raise DataFileError(file, f"{name}: {where}.result is not a list", row=row, has_header=False)
            who = _annotator(annotation.get("completed_by"))
            if who is None and "completed_by" not in annotation:
                who = _exported_by(task)  # winnow's own export names its expert in meta
            if who is None:
                raise DataFileError(
                    file,
                    f"{name}: {where}.completed_by is missing or not a user "
                    f"({quote(annotation.get('completed_by'))}); winnow keeps who voted what",
                    row=row,
                    has_header=False,
                )
            earlier = voters.setdefault((position, who), where)
            if earlier != where:
                raise DataFileError(
                    file,
                    f"{name}: {where} is a second annotation by {quote(who)} (the first is {earlier}); "
                    "keep one vote per annotator and task",
                    row=row,
                    has_header=False,
                )
            time = _created_at(file, annotation.get("created_at"), f"{name}: {where}.created_at", row)
            for r, item in enumerate(result):
                label, from_name, to_name = _single_choice(file, item, f"{where}.result[{r}]", name, row)
                if control is None:
                    control = (from_name, to_name, f"{name}: {where}.result[{r}]")
                elif from_name != control[0]:
                    raise DataFileError(
                        file,
                        f"{name}: {where}.result[{r}].from_name {quote(from_name)} is a second classification "
                        f"(the first, {quote(control[0])}, is in {control[2]}); winnow reads one choice per task",
                        row=row,
                        has_header=False,
                    )
                raw_votes.append((position, who, label, time, row))
    if not raw_votes or control is None:
        raise DataFileError(
            file,
            "has no annotation with a single choice: there is nothing to make candidate sets from "
            "(export the project after annotating, with its annotations)",
            has_header=False,
        )
    check_unique_ids(file, ids, rows, "id", has_header=False)
    n = len(tasks)
    for cells in data_cells.values():
        cells.extend([None] * (n - len(cells)))

    label_space = list(label_names) if label_names is not None else sort_label_names(v[2] for v in raw_votes)
    known = set(label_space)
    for position, _, label, _, row in raw_votes:
        if label not in known:
            raise DataFileError(
                file,
                f"{_task_name(tasks[position], row)}: unknown label {quote(label)}; the labels are "
                f"{listing(label_space)}",
                row=row,
                has_header=False,
            )
    every_label = np.ones((n, len(label_space)), dtype=bool)  # nobody ruled a label out yet
    dataset = _with_content(file, tasks, ids, rows, data_cells, every_label, label_space, sources)
    votes = Votes(
        [ids[v[0]] for v in raw_votes],
        [v[1] for v in raw_votes],
        [v[2] for v in raw_votes],
        [v[3] for v in raw_votes],
        [v[4] for v in raw_votes],
        os.fspath(file),
        has_header=False,
    )
    dataset, matched = apply_votes(replace(dataset, votes=votes), votes, min_votes=min_votes, min_share=min_share)
    return LabelStudioExport(dataset, matched, control[0], control[1])


def _created_at(file: Path, value: Any, where: str, row: int) -> datetime | None:
    """An annotation's ``created_at`` as a UTC time (``None`` when absent)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        text = value.strip()
        try:
            time = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        except ValueError:
            time = None
        if time is not None:
            try:
                return as_utc(time)
            except ValueError as exc:
                raise DataFileError(file, f"{where} {exc}", row=row, has_header=False) from None
    raise DataFileError(file, f"{where} {quote(value)} is not an ISO 8601 date and time", row=row, has_header=False)


def _item_id(file: Path, task: dict[str, Any], data: dict[str, Any], position: int, name: str) -> str:
    for where, value in (("id", task.get("id")), ("data.id", data.get("id"))):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip():
            raise DataFileError(
                file, f"{name}: {where} {quote(value)} is not an id", row=position + 1, has_header=False
            )
        return str(value).strip()
    return str(position + 1)


def _single_choice(file: Path, item: Any, where: str, name: str, row: int) -> tuple[str, str, str]:
    """The label, ``from_name`` and ``to_name`` of one single-choice result, or an error."""
    if not isinstance(item, dict):
        raise DataFileError(file, f"{name}: {where} is not an object", row=row, has_header=False)
    kind = item.get("type")
    if kind != "choices":
        raise DataFileError(
            file,
            f"{name}: {where}.type {quote(kind)} is not a single choice; winnow reads classifications made "
            'with <Choices choice="single"> (choices results)',
            row=row,
            has_header=False,
        )
    value = item.get("value")
    chosen = value.get("choices") if isinstance(value, dict) else None
    if not isinstance(chosen, list) or len(chosen) != 1:
        count = f"{len(chosen)} choices" if isinstance(chosen, list) else "no choices list"
        raise DataFileError(
            file,
            f"{name}: {where}.value.choices holds {count}, it is not a single choice (winnow reads one "
            "label per annotator)",
            row=row,
            has_header=False,
        )
    label = chosen[0]
    if isinstance(label, bool) or not isinstance(label, (str, int)) or not str(label).strip():
        raise DataFileError(
            file, f"{name}: {where}.value.choices[0] {quote(label)} is not a label", row=row, has_header=False
        )
    label = str(label).strip()
    if LABEL_SEPARATOR in label:
        raise DataFileError(
            file,
            f"{name}: {where}.value.choices[0] {quote(label)} contains {LABEL_SEPARATOR!r}, which winnow "
            "keeps to separate labels",
            row=row,
            has_header=False,
        )
    names = []
    for key in ("from_name", "to_name"):
        text = item.get(key)
        names.append(text.strip() if isinstance(text, str) and text.strip() else "")
    return label, names[0] or "label", names[1] or "text"


def _with_content(
    file: Path,
    tasks: list[Any],
    ids: list[str],
    rows: list[int],
    data_cells: dict[str, list[Any]],
    candidates: np.ndarray,
    label_space: list[str],
    sources: ContentSources,
) -> LoadedDataset:
    """The dataset with each item's content from ``data`` and features computed from it."""
    header = list(data_cells)
    taken = {"id"} if "id" in data_cells and "id" not in sources.columns.values() else set()
    try:
        roles = resolve_content_columns(file, header, sources.columns, taken, set())
    except DataFileError as exc:
        raise DataFileError(file, f"data: {exc.problem}", has_header=False) from None
    if not roles:
        raise DataFileError(
            file,
            f"no task data holds a text, an image, an audio clip or a link (data keys: {listing(header)}); "
            "name the key with --text-column, --image-column or --audio-column",
            has_header=False,
        )
    cells = {
        column: [media_reference(v) for v in data_cells[column]] if role in _MEDIA_ROLES else data_cells[column]
        for role, column in roles.items()
    }
    try:
        contents = read_contents(file, cells, rows, False, sources, roles)
        X, feature_names, record = features_from_content(file, contents, ids, rows, False, sources)
    except DataFileError as exc:
        raise _at_task(file, exc, tasks) from None
    dataset = LoadedDataset(
        X,
        candidates,
        list(label_space),
        ids,
        None,
        feature_names,
        None,
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
        file, dataset, rows=rows, has_header=False, id_column="id", labels_column="choices", feature_columns=False
    )
    return dataset


def _at_task(file: Path, exc: DataFileError, tasks: list[Any]) -> DataFileError:
    """``exc`` (about a data row and a column) retold with the task's id and its ``data`` key."""
    if exc.row is None:
        where = f"data.{exc.column}: " if exc.column else ""
        return DataFileError(file, f"{where}{exc.problem}", has_header=False)
    name = _task_name(tasks[exc.row - 1], exc.row)
    where = f"data.{exc.column} " if exc.column else ""
    return DataFileError(file, f"{name}: {where}{exc.problem}", row=exc.row, has_header=False)
