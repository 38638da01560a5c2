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
from collections.abc import Mapping, Sequence
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
    "ExpertAnswer",
    "LabelStudioExport",
    "ModelLabel",
    "is_label_studio_export",
    "read_label_studio",
    "read_user_map",
    "media_reference",
]

#: How Label Studio refers to a file of its local-files storage: the path follows ``?d=``.
LOCAL_FILES_PREFIX = "/data/local-files/"
#: How Label Studio refers to a file uploaded to it (stored under its ``media/upload`` folder).
UPLOAD_PREFIX = "/data/upload/"

_MEDIA_ROLES = ("image", "audio", "link")
#: The control read when no annotation names one (a file with winnow's answers only).
DEFAULT_CONTROL = ("label", "text")


@dataclass(frozen=True)
class ExpertAnswer:
    """An expert's answer carried by a task of winnow's own export (``meta.winnow``).

    Attributes
    ----------
    item_id, label : str
    annotator : str
        Who answered in winnow (``meta.winnow.answered_by``), not the Label Studio user who
        imported the tasks.
    time : datetime or None
        When (``meta.winnow.answered_at``), UTC.
    row : int
        The task's 1-based position in the file.
    """

    item_id: str
    label: str
    annotator: str
    time: datetime | None
    row: int


@dataclass(frozen=True)
class ModelLabel:
    """A model's label read from a task's ``predictions``: never a vote.

    Attributes
    ----------
    item_id, label : str
    score : float or None
        The prediction's ``score``.
    model_version : str or None
    row : int
        The task's 1-based position in the file.
    """

    item_id: str
    label: str
    score: float | None
    model_version: str | None
    row: int


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
    answers : tuple of ExpertAnswer
        The expert answers of winnow's own export (also in
        :attr:`~app.io.readers.checks.LoadedDataset.expert_answers`), in file order.
    model_labels : tuple of ModelLabel
        The single-choice predictions, in file order; they make no candidate set.
    """

    dataset: LoadedDataset
    votes: MatchedVotes
    from_name: str
    to_name: str
    answers: tuple[ExpertAnswer, ...] = ()
    model_labels: tuple[ModelLabel, ...] = ()


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


def _winnow_record(task: dict[str, Any]) -> dict[str, Any] | None:
    """``meta.winnow`` of a task winnow exported, when it states the item's candidate set."""
    meta = task.get("meta")
    record = meta.get("winnow") if isinstance(meta, dict) else None
    return record if isinstance(record, dict) and "candidates" in record else None


def _label_text(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value).strip():
        return None
    return str(value).strip()


def _meta_candidates(file: Path, record: dict[str, Any], name: str, row: int) -> list[str]:
    found = record.get("candidates")
    labels = [_label_text(v) for v in found] if isinstance(found, list) else [None]
    if not labels or None in labels or any(LABEL_SEPARATOR in str(v) for v in labels):
        raise DataFileError(
            file,
            f"{name}: meta.winnow.candidates {quote(found)} is not a non-empty list of labels",
            row=row,
            has_header=False,
        )
    return [str(v) for v in labels]


def _meta_votes(file: Path, record: dict[str, Any], name: str, row: int) -> list[tuple[str, str, datetime | None]]:
    """The crowd votes winnow exported with the item: annotator, label, time.

    An older export's ``"jazz:2|blues:1"`` summary names no annotator and is not read.
    """
    found = record.get("votes")
    if not isinstance(found, list):
        return []
    votes = []
    for v, vote in enumerate(found):
        where = f"meta.winnow.votes[{v}]"
        who = _annotator(vote.get("annotator")) if isinstance(vote, dict) else None
        label = _label_text(vote.get("label")) if isinstance(vote, dict) else None
        if who is None or label is None or LABEL_SEPARATOR in label:
            raise DataFileError(
                file,
                f"{name}: {where} {quote(vote)} is not a vote with an annotator and a label",
                row=row,
                has_header=False,
            )
        votes.append((who, label, _created_at(file, vote.get("time"), f"{name}: {where}.time", row)))
    return votes


def _meta_answer(file: Path, record: dict[str, Any], item_id: str, name: str, row: int) -> ExpertAnswer | None:
    """The expert's answer winnow exported with the item, if it has one."""
    if record.get("label_source") != "expert":
        return None
    label = _label_text(record.get("label"))
    who = _annotator(record.get("answered_by"))
    if label is None or who is None:
        raise DataFileError(
            file,
            f"{name}: meta.winnow names an expert answer without its label and who answered (answered_by)",
            row=row,
            has_header=False,
        )
    time = _created_at(file, record.get("answered_at"), f"{name}: meta.winnow.answered_at", row)
    return ExpertAnswer(item_id, label, who, time, row)


def _result_names(result: Any) -> tuple[str, str]:
    names = []
    for key in ("from_name", "to_name"):
        text = result.get(key) if isinstance(result, dict) else None
        names.append(text.strip() if isinstance(text, str) and text.strip() else "")
    return names[0] or DEFAULT_CONTROL[0], names[1] or DEFAULT_CONTROL[1]


def _single_label(result: Any) -> str | None:
    """The label of a single-choice result, ``None`` for any other result."""
    if not isinstance(result, list) or len(result) != 1 or not isinstance(result[0], dict):
        return None
    value = result[0].get("value")
    chosen = value.get("choices") if result[0].get("type") == "choices" and isinstance(value, dict) else None
    return _label_text(chosen[0]) if isinstance(chosen, list) and len(chosen) == 1 else None


def _is_exported_answer(annotation: dict[str, Any], label: str) -> bool:
    """Whether ``annotation`` is the one winnow wrote for its expert's answer ``label``.

    winnow writes it without ``completed_by``; Label Studio gives an imported annotation to the
    user who imports it and keeps the ``id`` it was written with as ``import_id``, which an
    annotation made in Label Studio does not have.
    """
    mine = "completed_by" not in annotation or annotation.get("import_id") is not None
    return mine and _single_label(annotation.get("result")) == label


def _model_labels(task: dict[str, Any], item_id: str, row: int) -> list[ModelLabel]:
    """The task's single-choice predictions (others, e.g. regions, are not read)."""
    found = task.get("predictions")
    labels = []
    for prediction in found if isinstance(found, list) else []:
        label = _single_label(prediction.get("result")) if isinstance(prediction, dict) else None
        if label is None or LABEL_SEPARATOR in label:
            continue
        score = prediction.get("score")
        version = prediction.get("model_version")
        labels.append(
            ModelLabel(
                item_id,
                label,
                float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None,
                str(version) if isinstance(version, (str, int)) and not isinstance(version, bool) else None,
                row,
            )
        )
    return labels


def read_user_map(path: str | os.PathLike[str]) -> dict[str, str]:
    """Label Studio user ids (as text) to their emails, from the JSON list Label Studio's
    ``GET /api/users/`` returns (objects with ``id`` and ``email``; other keys ignored).

    Raises
    ------
    DataFileError
        The file is not such a list; one line naming the file and the entry.
    """
    file = Path(path)
    if not file.is_file():
        raise DataFileError(file, "does not exist or is not a file", has_header=False)
    users = _load(file)
    if not isinstance(users, list):
        raise DataFileError(file, "is not a user map: a JSON list of users with id and email", has_header=False)
    names: dict[str, str] = {}
    for position, user in enumerate(users):
        user_id = _annotator(user.get("id")) if isinstance(user, dict) else None
        email = user.get("email") if isinstance(user, dict) else None
        if user_id is None or not isinstance(email, str) or not email.strip():
            raise DataFileError(
                file, f"entry {position + 1} {quote(user)} is not a user with an id and an email", has_header=False
            )
        names[user_id] = email.strip()
    return names


def _control_of(control: tuple[str, str, str], columns: dict[str, str]) -> tuple[str, str, str] | None:
    """The control the annotations use and the ``data`` key of the content it labels, or
    ``None`` when no annotation named one."""
    if not control[2]:
        return None
    shown = next((columns[role] for role in ("image", "audio", "text", "link") if role in columns), None)
    return (control[0], control[1], shown) if shown is not None else None


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
    user_names: Mapping[str, str] | None = None,
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
    user_names : mapping of str to str, optional
        Label Studio user id (as text) to the name winnow keeps for that annotator (an email):
        Label Studio's JSON export names annotators by id only. With a map, an id missing from
        it is an error.

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
    kept: dict[int, set[str]] = {}  # a task of winnow's export: its candidate set, and new votes' labels
    answers: list[ExpertAnswer] = []
    model_labels: list[ModelLabel] = []
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
        item_id = _item_id(file, task, data, position, name)
        ids.append(item_id)
        for key in data:
            data_cells.setdefault(str(key), [None] * position)
        for key, cells in data_cells.items():
            cells.append(data.get(key))

        record = _winnow_record(task)
        expert: ExpertAnswer | None = None
        if record is not None:
            kept[position] = set(_meta_candidates(file, record, name, row))
            for vote in _meta_votes(file, record, name, row):
                earlier = voters.setdefault((position, vote[0]), "meta.winnow.votes")
                if earlier != "meta.winnow.votes":
                    raise DataFileError(
                        file,
                        f"{name}: meta.winnow.votes holds two votes by {quote(vote[0])}",
                        row=row,
                        has_header=False,
                    )
                raw_votes.append((position, vote[0], vote[1], vote[2], row))
            expert = _meta_answer(file, record, item_id, name, row)
            if expert is not None:
                answers.append(expert)
        model_labels.extend(_model_labels(task, item_id, row))

        annotations = task.get("annotations", task.get("completions"))
        field = "annotations" if "annotations" in task else "completions"
        if annotations is None:
            continue
        answer_seen = False
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
            if expert is not None and not answer_seen and _is_exported_answer(annotation, expert.label):
                answer_seen = True  # winnow's own answer, already read from meta: not a vote
                from_name, to_name = _result_names(result[0])
                if control is None:
                    control = (from_name, to_name, f"{name}: {where}.result[0]")
                continue
            who = _annotator(annotation.get("completed_by"))
            if who is not None and user_names is not None and isinstance(annotation.get("completed_by"), int):
                if who not in user_names:
                    raise DataFileError(
                        file,
                        f"{name}: {where}.completed_by {who} is not in the user map; it names "
                        f"{listing(sorted(user_names))}",
                        row=row,
                        has_header=False,
                    )
                who = user_names[who]
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
                if position in kept:
                    kept[position].add(label)  # a label chosen in Label Studio after winnow's export
    if control is None and kept:
        control = (DEFAULT_CONTROL[0], DEFAULT_CONTROL[1], "")
    if (not raw_votes and not kept) or control is None:
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

    position_of = {item_id: position for position, item_id in enumerate(ids)}
    named = [(position, label, row) for position, _, label, _, row in raw_votes]
    named += [(position, label, position + 1) for position, labels in kept.items() for label in sorted(labels)]
    named += [(position_of[x.item_id], x.label, x.row) for x in answers]
    named += [(position_of[x.item_id], x.label, x.row) for x in model_labels]
    label_space = list(label_names) if label_names is not None else sort_label_names(v[1] for v in named)
    known = set(label_space)
    for position, label, row in named:
        if label not in known:
            raise DataFileError(
                file,
                f"{_task_name(tasks[position], row)}: unknown label {quote(label)}; the labels are "
                f"{listing(label_space)}",
                row=row,
                has_header=False,
            )
    every_label = np.ones((n, len(label_space)), dtype=bool)  # nobody ruled a label out yet
    kept_sets = np.zeros(n, dtype=bool)
    for position, labels in kept.items():
        every_label[position] = np.isin(label_space, sorted(labels))
        kept_sets[position] = True
    dataset = _with_content(file, tasks, ids, rows, data_cells, every_label, label_space, sources)
    dataset = replace(
        dataset,
        kept_sets=kept_sets if kept else None,
        expert_answers=tuple(answers) or None,
        label_studio_control=_control_of(control, dataset.content_columns),
    )
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
    return LabelStudioExport(dataset, matched, control[0], control[1], tuple(answers), tuple(model_labels))


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
    # data.id first: it is the id the items were imported into Label Studio with (winnow writes
    # it); the task id is Label Studio's own number, given anew in every project.
    for where, value in (("data.id", data.get("id")), ("id", task.get("id"))):
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
