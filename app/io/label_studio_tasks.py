"""A session's labelled dataset as tasks Label Studio imports, with the labelling config they fit.

``winnow export SESSION --what labelled --format label-studio -o tasks.json`` writes two files:

``tasks.json``
    A JSON list of tasks in Label Studio's import format (https://labelstud.io/guide/tasks.html,
    "Basic Label Studio JSON format"; predictions as in https://labelstud.io/guide/predictions.html),
    one per item, in dataset order::

        {"data": {"text": "Great riff, lazy drums", "id": "17"},
         "annotations": [{"result": [{"from_name": "label", "to_name": "text", "type": "choices",
                                      "value": {"choices": ["rock"]}}]}],
         "predictions": [],
         "meta": {"winnow": {"id": "17", "label": "rock", "label_source": "expert",
                             "candidates": ["jazz", "rock"], "answered_by": "ada", ...}}}

    ``data`` holds the item's content as imported, plus its winnow ``id``: ``text``;
    ``image`` / ``audio`` for a media file, written as Label Studio's local-files reference
    ``/data/local-files/?d=<path relative to the dataset's media root>`` (serve that folder
    with Label Studio's local-files storage, ``LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT``); an
    http(s) link goes to ``image`` or ``audio`` when it ends with an image or audio file
    extension and the item has no media file, else to ``link``.

    ``annotations`` holds the expert's verdict (label source ``expert``: an answer, another
    label or a reviewer's resolve) as one single-choice result. Label Studio gives an imported
    annotation to the user who imports it; who answered in winnow, and when, is in ``meta``.

    ``predictions`` holds a model label (label source ``model``: a DST-PLL label winnow stands
    behind at the session's error target, :mod:`app.service.delivery`) with ``score`` its
    ``model_margin`` (DST-PLL's margin when its lot was frozen, in (0, 1]: it orders model
    labels, it is not a probability) and ``model_version`` ``winnow-<version>-dstpll-<session>``.
    (:func:`app.service.export_label_studio` writes the model labels of the lot still being
    audited as undecided: annotators open these tasks.)

    Items with a ``given`` label (a single candidate nobody answered) and ``undecided`` items
    get neither: their label (if any), label source and candidates are in ``meta.winnow``
    (with the item's crowd votes, ``"jazz:2|blues:1"``, when the dataset has some).
``tasks.label_config.xml``
    The labelling config the tasks fit (:func:`labelling_config`): one object tag per
    content key (``<Text name="text" value="$text"/>``, ``<Image .../>``, ``<Audio .../>``,
    ``<Text name="link" .../>`` for a link, shown as text) and ``<Choices name="label" toName="text"
    choice="single">`` with one ``<Choice>`` per label of the dataset. Paste it into the Label
    Studio project's Settings > Labeling Interface > Code before importing the tasks.

:data:`LABEL_STUDIO_TASKS_SCHEMA` is a JSON schema (draft 2020-12) of exactly the shapes this
module writes; the tests validate every export against it (``label-studio-sdk``, which carries
Label Studio's own models, is not a dependency: see ``docs/label_studio.md``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote as url_quote
from urllib.parse import urlsplit
from xml.etree import ElementTree
from xml.sax.saxutils import quoteattr

import pandas as pd

from app.io.errors import DataFileError
from app.io.media import IMAGE_EXTENSIONS
from app.io.readers.label_studio import LOCAL_FILES_PREFIX, UPLOAD_PREFIX
from app.io.writers import atomic_file
from engine.exceptions import InvalidInput

__all__ = [
    "DEFAULT_FROM_NAME",
    "CrowdVote",
    "LabelConfig",
    "LocalFilesSetup",
    "local_files_setup",
    "read_label_config",
    "check_tasks_fit",
    "LABEL_STUDIO_TASKS_SCHEMA",
    "AUDIO_LINK_EXTENSIONS",
    "label_studio_tasks",
    "labelling_config",
    "config_path_for",
    "write_label_studio",
]

#: Name of the classification control (``<Choices name=...>``) unless told otherwise.
DEFAULT_FROM_NAME = "label"

#: Link extensions read as audio clips (images: :data:`app.io.media.IMAGE_EXTENSIONS`).
AUDIO_LINK_EXTENSIONS: tuple[str, ...] = (".wav", ".wave", ".mp3", ".ogg", ".oga", ".opus", ".flac", ".m4a", ".aac")

_RESULT = {
    "type": "object",
    "required": ["from_name", "to_name", "type", "value"],
    "additionalProperties": False,
    "properties": {
        "from_name": {"type": "string", "minLength": 1},
        "to_name": {"type": "string", "minLength": 1},
        "type": {"const": "choices"},
        "value": {
            "type": "object",
            "required": ["choices"],
            "additionalProperties": False,
            "properties": {
                "choices": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1, "maxItems": 1}
            },
        },
    },
}

LABEL_STUDIO_TASKS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Label Studio tasks written by winnow",
    "description": (
        "A list of tasks in Label Studio's import format: data (content + winnow id), the expert's "
        "answer as an annotation with one single-choice result, a model label as a prediction with "
        "score and model_version, and winnow's own record in meta."
    ),
    "type": "array",
    "items": {
        "type": "object",
        "required": ["data", "annotations", "predictions", "meta"],
        "additionalProperties": False,
        "properties": {
            "data": {
                "type": "object",
                "required": ["id"],
                "minProperties": 2,
                "additionalProperties": False,
                "properties": {
                    "id": {"type": "string", "minLength": 1},
                    "text": {"type": "string"},
                    "image": {"type": "string", "minLength": 1},
                    "audio": {"type": "string", "minLength": 1},
                    "link": {"type": "string", "minLength": 1},
                },
            },
            "annotations": {
                "type": "array",
                "maxItems": 1,
                "items": {
                    "type": "object",
                    "required": ["id", "result"],
                    "additionalProperties": False,
                    "properties": {
                        "id": {"type": "integer", "minimum": 1},
                        "result": {"type": "array", "items": _RESULT, "minItems": 1, "maxItems": 1},
                    },
                },
            },
            "predictions": {
                "type": "array",
                "maxItems": 1,
                "items": {
                    "type": "object",
                    "required": ["model_version", "score", "result"],
                    "additionalProperties": False,
                    "properties": {
                        "model_version": {"type": "string", "minLength": 1},
                        "score": {"type": "number", "minimum": 0, "maximum": 1},
                        "result": {"type": "array", "items": _RESULT, "minItems": 1, "maxItems": 1},
                    },
                },
            },
            "meta": {
                "type": "object",
                "required": ["winnow"],
                "properties": {
                    "winnow": {
                        "type": "object",
                        "required": ["id", "label", "label_source", "candidates"],
                        "properties": {
                            "id": {"type": "string"},
                            "label": {"type": ["string", "null"]},
                            "label_source": {"enum": ["expert", "given", "crowd", "model", "undecided"]},
                            "model_margin": {"type": ["number", "null"], "minimum": -1, "maximum": 1},
                            "candidates": {"type": "array", "items": {"type": "string"}},
                            "answered_by": {"type": ["string", "null"]},
                            "answered_at": {"type": ["string", "null"]},
                            "votes": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "required": ["annotator", "label", "time"],
                                    "additionalProperties": False,
                                    "properties": {
                                        "annotator": {"type": "string", "minLength": 1},
                                        "label": {"type": "string", "minLength": 1},
                                        "time": {"type": ["string", "null"]},
                                    },
                                },
                            },
                        },
                    }
                },
            },
        },
    },
}
"""JSON schema of the tasks :func:`label_studio_tasks` writes (see the module docstring)."""


@dataclass(frozen=True)
class CrowdVote:
    """One crowd vote on an item, as ``meta.winnow.votes`` carries it."""

    annotator: str
    label: str
    time: str | None


@dataclass(frozen=True)
class LocalFilesSetup:
    """How Label Studio serves a dataset's media files, and how the tasks refer to them.

    Label Studio serves ``/data/local-files/?d=<path>`` from ``LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT``
    only for files inside a "Local files" storage of the project, and refuses a storage on the
    document root itself ("Please add a subdirectory"). So the document root is the media root's
    parent (the storage on the media root) unless every media path lies in one sub-folder of the
    media root (a dataset read from a Label Studio export): then the media root is the document
    root and the storage is that sub-folder. Files Label Studio stored itself (``upload/...``
    under its ``media`` folder) keep their ``/data/upload/`` reference and need no storage.

    Attributes
    ----------
    document_root : Path or None
        ``LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT``; ``None`` for uploaded files.
    storage : Path or None
        The folder of the project's "Local files" storage; ``None`` for uploaded files.
    prefix : str
        What goes before a media path in the tasks (ends with ``/`` or is empty).
    uploaded : bool
        The files are Label Studio's uploads (``/data/upload/``).
    """

    document_root: Path | None
    storage: Path | None
    prefix: str
    uploaded: bool = False

    def reference(self, media_path: str) -> str:
        """The task's reference to ``media_path`` (relative to the media root).

        >>> LocalFilesSetup(Path("/srv"), Path("/srv/photos"), "photos/").reference("a b.png")
        '/data/local-files/?d=photos/a%20b.png'
        >>> LocalFilesSetup(None, None, "", uploaded=True).reference("upload/3/a.png")
        '/data/upload/3/a.png'
        """
        if self.uploaded:
            return UPLOAD_PREFIX + url_quote(media_path[len("upload/") :])
        return LOCAL_FILES_PREFIX + "?d=" + url_quote(self.prefix + media_path)


def local_files_setup(media_root: str | os.PathLike[str], media_paths: Sequence[str]) -> LocalFilesSetup:
    """The Label Studio set-up that serves ``media_paths`` under ``media_root`` (see
    :class:`LocalFilesSetup`).

    >>> local_files_setup("/srv/photos", ["a.png", "b.png"])
    LocalFilesSetup(document_root=PosixPath('/srv'), storage=PosixPath('/srv/photos'), prefix='photos/', uploaded=False)
    >>> local_files_setup("/srv", ["photos/a.png", "photos/b.png"]).storage
    PosixPath('/srv/photos')
    >>> local_files_setup("/ls/media", ["upload/3/a.png"]).uploaded
    True
    """
    root = Path(media_root)
    folders = {path.split("/", 1)[0] for path in media_paths if "/" in path}
    in_one_folder = len(folders) == 1 and all("/" in path for path in media_paths)
    if in_one_folder and folders == {"upload"} and root.name == "media":
        return LocalFilesSetup(None, None, "", uploaded=True)
    if in_one_folder:
        return LocalFilesSetup(root, root / folders.pop(), "")
    return LocalFilesSetup(root.parent, root, root.name + "/")


@dataclass(frozen=True)
class LabelConfig:
    """What winnow needs of a Label Studio project's labelling config (:func:`read_label_config`).

    Attributes
    ----------
    from_name, to_name : str
        The single-choice ``<Choices>`` control and the object tag it labels.
    data_key : str
        The ``data`` key that object shows (its ``value="$key"``).
    object_tag : str
        The object tag (``Text``, ``Image``, ``Audio``, ...).
    choices : tuple of str
        The control's choice values.
    """

    from_name: str
    to_name: str
    data_key: str
    object_tag: str
    choices: tuple[str, ...]


#: Object tags and the content each shows.
_OBJECT_CONTENT = {"text": "text", "hypertext": "text", "image": "image", "audio": "audio", "audioplus": "audio"}


def read_label_config(path: str | os.PathLike[str]) -> LabelConfig:
    """The classification control of a Label Studio labelling config (the XML of Settings >
    Labeling Interface > Code, or the project's ``label_config`` from its API).

    Raises
    ------
    DataFileError
        The file cannot be read, is not XML, or has no single ``<Choices>`` control tied to an
        object tag with a ``value="$key"``; one line naming the file.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise DataFileError(file, f"cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise DataFileError(file, "is not UTF-8 text") from None
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        raise DataFileError(file, "declares a DOCTYPE or entities; a labelling config has none")
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as exc:
        raise DataFileError(file, f"is not XML ({exc})") from None
    controls = [e for e in root.iter() if e.tag.lower() == "choices"]
    if len(controls) != 1:
        raise DataFileError(
            file, f"has {len(controls)} <Choices> controls; winnow writes one single-choice classification"
        )
    control = controls[0]
    from_name, to_name = control.get("name", "").strip(), control.get("toName", "").strip()
    if not from_name or not to_name:
        raise DataFileError(file, "<Choices> needs a name and a toName")
    if control.get("choice", "single").strip().lower() not in ("single", "single-radio"):
        raise DataFileError(file, f'<Choices name="{from_name}"> is not choice="single"; winnow writes one label')
    objects = [e for e in root.iter() if e.get("name", "").strip() == to_name and e is not control]
    value = objects[0].get("value", "").strip() if objects else ""
    if not value.startswith("$") or len(value) < 2:
        raise DataFileError(
            file, f'<Choices toName="{to_name}"> names no object tag with value="$key" (name="{to_name}")'
        )
    choices = tuple(c.get("value", "").strip() for c in control if c.tag.lower() == "choice")
    return LabelConfig(from_name, to_name, value[1:], objects[0].tag, tuple(c for c in choices if c))


def check_tasks_fit(
    config: LabelConfig, file: str | os.PathLike[str], label_names: Sequence[str], content: str
) -> None:
    """Refuse (one line naming the config file) tasks the project's config cannot show.

    ``content`` is what the tasks show (``"text"``, ``"image"``, ``"audio"`` or ``"link"``);
    every label of ``label_names`` must be one of the config's choices.
    """
    shows = _OBJECT_CONTENT.get(config.object_tag.lower())
    if shows is not None and shows != content and not (content == "link" and shows == "text"):
        raise DataFileError(
            file, f'<{config.object_tag} name="{config.to_name}"> shows {shows}, but the items are {content}'
        )
    missing = [name for name in label_names if name not in config.choices]
    if missing:
        raise DataFileError(
            file,
            f'<Choices name="{config.from_name}"> lacks the labels {", ".join(repr(m) for m in missing)} '
            f"(its choices: {', '.join(repr(c) for c in config.choices) or 'none'})",
        )


def _present(value: Any) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return False
    return not (isinstance(value, float) and math.isnan(value))


def _link_key(link: str) -> str:
    suffix = Path(urlsplit(link).path).suffix.lower()
    if suffix in IMAGE_EXTENSIONS:
        return "image"
    if suffix in AUDIO_LINK_EXTENSIONS:
        return "audio"
    return "link"


def _task_data(
    item_id: str, text: Any, media_path: Any, media_kind: Any, link: Any, files: LocalFilesSetup | None
) -> dict[str, str]:
    data: dict[str, str] = {}
    if _present(text):
        data["text"] = str(text)
    if _present(media_path):
        setup = files if files is not None else LocalFilesSetup(None, None, "")
        data["audio" if media_kind == "audio" else "image"] = setup.reference(str(media_path))
    if _present(link):
        key = _link_key(str(link))
        data[key if key not in data else "link"] = str(link)
    data["id"] = item_id
    return data


def _to_name_for(keys: set[str]) -> str:
    for key in ("image", "audio", "text", "link"):
        if key in keys:
            return key
    return "text"


def label_studio_tasks(
    table: pd.DataFrame,
    *,
    media_kinds: Sequence[str | None] | None = None,
    votes: Sequence[Sequence[CrowdVote]] | None = None,
    model_version: str,
    from_name: str = DEFAULT_FROM_NAME,
    to_name: str | None = None,
    files: LocalFilesSetup | None = None,
    data_key: str | None = None,
    candidate_sets: Sequence[Sequence[str]] | None = None,
) -> tuple[list[dict[str, Any]], str]:
    """The tasks of a labelled dataset (see the module docstring) and the ``to_name`` they use.

    Parameters
    ----------
    table : pandas.DataFrame
        A session's labelled export (:func:`app.service.delivery.delivered_table`): ``id``,
        ``candidates``, ``label``, ``label_source``, ``model_margin``, ``answered_by``,
        ``answered_at`` and the content columns it has (``text``, ``media_path``, ``link``).
    media_kinds : sequence of (str or None), optional
        ``"image"`` or ``"audio"`` for each row with a ``media_path`` (default: image).
    votes : sequence of sequence of CrowdVote, optional
        Each item's crowd votes (who, which label, when), kept in ``meta.winnow.votes``.
    model_version : str
        The predictions' ``model_version``.
    from_name : str, default "label"
        Name of the ``<Choices>`` control.
    to_name : str, optional
        Name of the object tag the choices label; default the content key: ``image``, else
        ``audio``, else ``text``, else ``link``.
    files : LocalFilesSetup, optional
        How media paths are referred to (:func:`local_files_setup`); default: as paths under
        Label Studio's local-files document root.
    data_key : str, optional
        The ``data`` key of the content the choices label, when the project's config names
        another (``$review`` for the text): the content moves to that key.
    candidate_sets : sequence of sequence of str, optional
        Each item's candidate set as imported, before any answer (``meta.winnow.candidates``:
        what an import of the tasks makes the item's set); default the table's ``candidates``.

    Returns
    -------
    (list of dict, str)
        The tasks, in table order, and the ``to_name`` used.

    Raises
    ------
    InvalidInput
        A missing column, an empty name, or a model row whose model_margin is outside (0, 1].
    """
    for name, value in (("model_version", model_version), ("from_name", from_name), ("to_name", to_name)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise InvalidInput(f"{name} must be a non-empty string, got {value!r}")
    required = ("id", "candidates", "label", "label_source", "model_margin", "answered_by", "answered_at")
    missing = [c for c in required if c not in table.columns]
    if missing:
        raise InvalidInput(f"the labelled table lacks the columns {missing}")
    n = len(table)
    kinds = list(media_kinds) if media_kinds is not None else [None] * n
    if len(kinds) != n:
        raise InvalidInput(f"media_kinds has {len(kinds)} entries but the table has {n} rows")
    if votes is not None and len(votes) != n:
        raise InvalidInput(f"votes has {len(votes)} entries but the table has {n} rows")
    if candidate_sets is not None and len(candidate_sets) != n:
        raise InvalidInput(f"candidate_sets has {len(candidate_sets)} entries but the table has {n} rows")

    def column(name: str) -> list[Any]:
        return list(table[name]) if name in table.columns else [None] * n

    datas = [
        _task_data(str(item_id), text, path, kind, link, files)
        for item_id, text, path, kind, link in zip(
            column("id"), column("text"), column("media_path"), kinds, column("link"), strict=True
        )
    ]
    keys = {key for data in datas for key in data if key != "id"}
    if not keys:
        raise InvalidInput(
            "the items have no content (text, image, audio or link): Label Studio has nothing to show; "
            "export --what labelled as CSV or JSON instead"
        )
    shown = _to_name_for(keys)
    target = to_name if to_name is not None else shown
    if data_key is not None and data_key != shown:
        for data in datas:
            if shown in data:
                data[data_key] = data.pop(shown)

    def result(label: str) -> list[dict[str, Any]]:
        return [{"from_name": from_name, "to_name": target, "type": "choices", "value": {"choices": [label]}}]

    tasks = []
    for position, (row, data) in enumerate(zip(table.itertuples(index=False), datas, strict=True)):
        record = row._asdict()
        label = record["label"] if _present(record["label"]) else None
        source = str(record["label_source"])
        margin = float(record["model_margin"]) if _present(record["model_margin"]) else None
        # The annotation's id comes back from Label Studio as its import_id: how the reader tells
        # winnow's answer from an annotation made in Label Studio.
        annotations = (
            [{"id": position + 1, "result": result(str(label))}] if source == "expert" and label is not None else []
        )
        predictions = []
        if source == "model" and label is not None:
            if margin is None or not 0.0 < margin <= 1.0:
                raise InvalidInput(f"item {data['id']!r}: model label without a model_margin in (0, 1] ({margin})")
            predictions = [{"model_version": model_version, "score": margin, "result": result(str(label))}]
        candidates = record["candidates"]
        meta: dict[str, Any] = {
            "id": data["id"],
            "label": None if label is None else str(label),
            "label_source": source,
            "model_margin": margin,
            "candidates": (
                [str(name) for name in candidate_sets[position]]
                if candidate_sets is not None
                else str(candidates).split("|")
                if _present(candidates) and str(candidates)
                else []
            ),
            "answered_by": str(record["answered_by"]) if _present(record["answered_by"]) else None,
            "answered_at": str(record["answered_at"]) if _present(record["answered_at"]) else None,
        }
        if votes is not None:
            meta["votes"] = [{"annotator": v.annotator, "label": v.label, "time": v.time} for v in votes[position]]
        tasks.append({"data": data, "annotations": annotations, "predictions": predictions, "meta": {"winnow": meta}})
    return tasks, target


def labelling_config(
    label_names: Sequence[str],
    *,
    data_keys: Sequence[str],
    from_name: str = DEFAULT_FROM_NAME,
    to_name: str,
    data_key: str | None = None,
) -> str:
    """The Label Studio labelling config (XML) the tasks fit.

    ``data_keys`` are the kinds of content the tasks hold (``text``, ``image``, ``audio``,
    ``link``); the one the choices label (the first of image, audio, text, link) is the object
    ``to_name``, showing ``data.<data_key>`` (default: its kind's key).

    >>> print(labelling_config(["jazz", "rock"], data_keys=["text"], to_name="text"))
    <View>
      <Text name="text" value="$text"/>
      <Choices name="label" toName="text" choice="single" showInLine="true">
        <Choice value="jazz"/>
        <Choice value="rock"/>
      </Choices>
    </View>
    """
    # A link is shown with <Text> (as text), never <HyperText>, which renders its value as HTML.
    tags = {"text": "Text", "image": "Image", "audio": "Audio", "link": "Text"}
    lines = ["<View>"]
    shown = [key for key in ("image", "audio", "text", "link") if key in data_keys]
    for key in shown:
        name, value = (to_name, data_key or key) if key == shown[0] else (key, key)
        lines.append(f"  <{tags[key]} name={quoteattr(name)} value={quoteattr('$' + value)}/>")
    lines.append(
        f'  <Choices name={quoteattr(from_name)} toName={quoteattr(to_name)} choice="single" showInLine="true">'
    )
    lines.extend(f"    <Choice value={quoteattr(str(name))}/>" for name in label_names)
    lines.append("  </Choices>")
    lines.append("</View>")
    return "\n".join(lines)


def config_path_for(path: str | os.PathLike[str]) -> Path:
    """Where the labelling config of the tasks file ``path`` is written: ``tasks.json`` →
    ``tasks.label_config.xml``."""
    target = Path(path)
    return target.with_name(f"{target.stem}.label_config.xml")


def write_label_studio(
    tasks: Sequence[Mapping[str, Any]], config: str, path: str | os.PathLike[str]
) -> tuple[Path, Path]:
    """Write the tasks to ``path`` (``.json``) and the config beside it (:func:`config_path_for`).

    Each file appears whole or not at all, readable by its owner only
    (:func:`app.io.writers.atomic_file`); the config is written first, so a tasks file never
    lacks its config.

    Returns
    -------
    (Path, Path)
        The tasks file and the config file.

    Raises
    ------
    DataFileError
        ``path`` does not end in ``.json``, its folder does not exist, or a file cannot be written.
    """
    target = Path(path)
    if target.suffix.lower() != ".json":
        raise DataFileError(target, "Label Studio tasks are written as .json; name the output tasks.json")
    if not target.parent.is_dir():
        raise DataFileError(target, f"cannot be written: folder {os.fspath(target.parent)!r} does not exist")
    config_file = config_path_for(target)
    try:
        with atomic_file(config_file) as handle:
            handle.write((config + "\n").encode("utf-8"))
        with atomic_file(target) as handle:
            text = json.dumps(list(tasks), ensure_ascii=False, allow_nan=False, indent=1)
            handle.write((text + "\n").encode("utf-8"))
    except OSError as exc:
        raise DataFileError(target, f"cannot be written: {exc.strerror or exc}") from None
    return target, config_file
