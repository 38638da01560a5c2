"""Read a folder of images and the candidate set of each: ``winnow import photos/ --labels labels.csv``.

Two layouts:

**Folder + labels CSV** (:func:`read_image_folder` with ``labels``)
    A UTF-8 CSV (``.tsv``: tab-separated) with a header row and the columns

    ========== ======== ================================================================
    column     required meaning
    ========== ======== ================================================================
    path/file  yes      the image, relative to the folder (``cats/01.png``); ``path`` is
                        used when both exist
    candidates yes      the candidate set: ``cat|dog`` or a JSON list ``["cat", "dog"]``
    id         no       the item id (default: the relative path)
    true_label no       the true label when known (blank = unknown); must be a candidate
    ========== ======== ================================================================

    Other columns are ignored. Every listed file must exist inside the folder (links are
    followed, and must stay inside) and be an image no larger than ``max_pixels`` (checked from
    the header only). Images in the folder that the CSV does not list are an error by default,
    because an image silently left out is a surprise; ``unlisted="ignore"`` leaves them out on
    purpose. Hidden files and folders (names starting with ``.``) are never scanned.

**One sub-folder per label** (``labels=None``)
    ``photos/cat/01.png``, ``photos/dog/07.jpg``, ...: the first folder level names the label
    and each image's candidate set is that one label (a fully labelled set, e.g. to review
    rejects). An image directly inside the folder is an error.

Items are returned in the CSV's order, or sorted by relative path for sub-folders. Errors are
:class:`~app.io.errors.DataFileError`, one line naming the labels file, the row (data row, so
``row 5 (spreadsheet row 6)``) and the column.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from app.io.errors import DataFileError
from app.io.media import IMAGE_EXTENSIONS, MAX_IMAGE_PIXELS, ContentError, check_image, resolve_media
from app.io.readers.checks import LoadedDataset

__all__ = ["ImageFolder", "read_image_folder", "read_image_dataset"]

_PATH_COLUMNS = ("path", "file")
_MAX_SHOWN = 3  # example files quoted in an error message


@dataclass(frozen=True)
class ImageFolder:
    """A validated image folder: one item per image, with its candidate labels.

    Attributes
    ----------
    root : pathlib.Path
        The folder, absolute, links resolved (the media root of the items).
    ids : tuple of str
        Unique item ids.
    paths : tuple of str
        Each image relative to ``root``, with ``/`` separators.
    candidates : tuple of tuple of str
        Candidate label names per item: non-empty, no duplicates, in the order written.
    true_labels : tuple of (str or None), or None
        True label per item (``None`` = unknown); ``None`` when there is no ``true_label`` column.
    labels_file : pathlib.Path or None
        The labels CSV, or ``None`` for the sub-folder layout.
    """

    root: Path
    ids: tuple[str, ...]
    paths: tuple[str, ...]
    candidates: tuple[tuple[str, ...], ...]
    true_labels: tuple[str | None, ...] | None
    labels_file: Path | None


def _natural_key(text: str) -> list[object]:
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", text)]


def _scan_images(root: Path) -> Iterator[Path]:
    """Image files under ``root`` (not following folder links), hidden names skipped."""
    for directory, folders, files in os.walk(root):
        folders[:] = [name for name in folders if not name.startswith(".")]
        for name in files:
            if not name.startswith(".") and os.path.splitext(name)[1].lower() in IMAGE_EXTENSIONS:
                yield Path(directory) / name


def _parse_candidates(cell: str) -> list[str]:
    """``cat|dog`` or ``["cat", "dog"]`` into names (blanks dropped, duplicates dropped)."""
    text = cell.strip()
    if text.startswith("["):
        try:
            values = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{text!r} looks like a JSON list but is not one ({exc.msg})") from None
        if not isinstance(values, list) or not all(
            isinstance(v, (str, int)) and not isinstance(v, bool) for v in values
        ):
            raise ValueError(f"{text!r} must be a list of label names")
        pieces = [str(v).strip() for v in values]
    else:
        pieces = [piece.strip() for piece in text.split("|")]
    return list(dict.fromkeys(piece for piece in pieces if piece))


def _checked_folder(folder: str | os.PathLike[str]) -> Path:
    path = Path(folder)
    if not path.exists():
        raise DataFileError(path, "the image folder does not exist")
    if not path.is_dir():
        raise DataFileError(path, "is not a folder")
    return path.resolve()


def _check_image_file(path: Path, max_pixels: int, labels: Path, row: int, column: str) -> None:
    try:
        check_image(path, max_pixels=max_pixels)
    except ContentError as exc:
        raise DataFileError(labels, exc.problem, row=row, column=column) from None


def read_image_folder(
    folder: str | os.PathLike[str],
    labels: str | os.PathLike[str] | None = None,
    *,
    unlisted: Literal["error", "ignore"] = "error",
    max_pixels: int = MAX_IMAGE_PIXELS,
) -> ImageFolder:
    """Read and validate an image folder (see the module docstring for both layouts).

    Parameters
    ----------
    folder : str or os.PathLike
        The folder holding the images.
    labels : str or os.PathLike, optional
        The labels CSV (its own location is free; its paths are relative to ``folder``).
        ``None`` reads the one-sub-folder-per-label layout.
    unlisted : {"error", "ignore"}, default "error"
        What to do with images in the folder that the labels CSV does not list.
    max_pixels : int, default :data:`~app.io.media.MAX_IMAGE_PIXELS`
        Largest image accepted (width x height, read from the header).

    Returns
    -------
    ImageFolder

    Raises
    ------
    DataFileError
        The folder or CSV is missing or malformed, a listed file is missing, outside the folder,
        not an image or too large, an id or path is repeated, a candidate set is empty, a true
        label is not a candidate, or (``unlisted="error"``) an image is not listed.
    """
    if unlisted not in ("error", "ignore"):
        raise ValueError(f"unlisted must be 'error' or 'ignore', got {unlisted!r}")
    root = _checked_folder(folder)
    if labels is None:
        return _read_subfolders(root, max_pixels)
    return _read_with_csv(root, Path(labels), unlisted, max_pixels)


def _read_subfolders(root: Path, max_pixels: int) -> ImageFolder:
    found = sorted((p.relative_to(root).as_posix() for p in _scan_images(root)), key=_natural_key)
    if not found:
        raise DataFileError(root, f"holds no image ({', '.join(IMAGE_EXTENSIONS)})")
    loose = [rel for rel in found if "/" not in rel]
    if loose:
        raise DataFileError(
            root,
            f"{len(loose)} image(s) are not inside a label sub-folder, e.g. {loose[0]!r}; without a "
            "labels CSV, each image must be in a folder named after its label",
        )
    for rel in found:
        try:
            check_image(root / rel, max_pixels=max_pixels)
        except ContentError as exc:
            raise DataFileError(root, f"{rel!r}: {exc.problem}") from None
    return ImageFolder(
        root=root,
        ids=tuple(found),
        paths=tuple(found),
        candidates=tuple((rel.split("/", 1)[0],) for rel in found),
        true_labels=None,
        labels_file=None,
    )


def _read_labels_table(labels: Path):
    import pandas as pd

    if not labels.is_file():
        raise DataFileError(labels, "the labels file does not exist" if not labels.exists() else "is not a file")
    separator = "\t" if labels.suffix.lower() == ".tsv" else ","
    try:
        table = pd.read_csv(
            labels,
            sep=separator,
            dtype=str,
            keep_default_na=False,
            na_filter=False,
            encoding="utf-8-sig",
            skipinitialspace=False,
        )
    except pd.errors.EmptyDataError:
        raise DataFileError(labels, "the labels file is empty") from None
    except UnicodeDecodeError:
        raise DataFileError(labels, "the labels file is not UTF-8 text") from None
    except (pd.errors.ParserError, ValueError) as exc:
        raise DataFileError(labels, f"the labels file cannot be read as CSV ({exc})") from None
    table.columns = [str(c).strip() for c in table.columns]
    if len(set(table.columns)) != len(table.columns):
        raise DataFileError(labels, "two columns have the same name")
    return table


def _read_with_csv(root: Path, labels: Path, unlisted: str, max_pixels: int) -> ImageFolder:
    table = _read_labels_table(labels)
    columns = list(table.columns)
    path_column = next((c for c in _PATH_COLUMNS if c in columns), None)
    if path_column is None or "candidates" not in columns:
        missing = [
            name for name, ok in (("path (or file)", path_column), ("candidates", "candidates" in columns)) if not ok
        ]
        raise DataFileError(labels, f"needs the column(s) {', '.join(missing)}; found {', '.join(columns) or 'none'}")
    if table.empty:
        raise DataFileError(labels, "the labels file has a header but no rows")
    has_ids, has_true = "id" in columns, "true_label" in columns

    ids: list[str] = []
    paths: list[str] = []
    sets: list[tuple[str, ...]] = []
    truths: list[str | None] = []
    seen_paths: dict[str, int] = {}
    seen_ids: dict[str, int] = {}
    for index, record in enumerate(table.itertuples(index=False)):
        row = index + 1
        cells = dict(zip(columns, record, strict=True))
        try:
            ref = resolve_media(cells[path_column], root, row=row, column=path_column)
        except ContentError as exc:
            raise DataFileError(labels, exc.problem, row=row, column=path_column) from None
        if ref.kind != "file" or ref.path is None or ref.relative_path is None:
            raise DataFileError(
                labels,
                "a link is not a file of the folder; give a path relative to the folder",
                row=row,
                column=path_column,
            )
        _check_image_file(ref.path, max_pixels, labels, row, path_column)
        rel = ref.relative_path
        if rel in seen_paths:
            raise DataFileError(
                labels, f"{rel!r} is already listed on row {seen_paths[rel]}", row=row, column=path_column
            )
        seen_paths[rel] = row

        item_id = cells["id"].strip() if has_ids else rel
        if not item_id:
            raise DataFileError(labels, "the id is empty", row=row, column="id")
        if item_id in seen_ids:
            raise DataFileError(
                labels, f"id {item_id!r} is already used on row {seen_ids[item_id]}", row=row, column="id"
            )
        seen_ids[item_id] = row

        try:
            names = _parse_candidates(cells["candidates"])
        except ValueError as exc:
            raise DataFileError(labels, str(exc), row=row, column="candidates") from None
        if not names:
            raise DataFileError(
                labels,
                "the candidate set is empty; give at least one label, e.g. cat|dog",
                row=row,
                column="candidates",
            )
        truth = cells["true_label"].strip() if has_true else ""
        if truth and truth not in names:
            raise DataFileError(
                labels,
                f"true label {truth!r} is not among the candidates {'|'.join(names)}",
                row=row,
                column="true_label",
            )
        ids.append(item_id)
        paths.append(rel)
        sets.append(tuple(names))
        truths.append(truth or None)

    if unlisted == "error":
        extra = sorted(
            (
                rel
                for rel in (
                    p.resolve().relative_to(root).as_posix()
                    for p in _scan_images(root)
                    if p.resolve().is_relative_to(root)
                )
                if rel not in seen_paths
            ),
            key=_natural_key,
        )
        if extra:
            shown = ", ".join(repr(rel) for rel in extra[:_MAX_SHOWN])
            raise DataFileError(
                labels,
                f"{len(extra)} image(s) in the folder are not listed, e.g. {shown}; list them or "
                "import with unlisted images ignored",
            )
    return ImageFolder(
        root=root,
        ids=tuple(ids),
        paths=tuple(paths),
        candidates=tuple(sets),
        true_labels=tuple(truths) if has_true else None,
        labels_file=labels,
    )


def read_image_dataset(
    folder: str | os.PathLike[str],
    labels: str | os.PathLike[str] | None = None,
    *,
    unlisted: Literal["error", "ignore"] = "error",
    max_pixels: int = MAX_IMAGE_PIXELS,
    features_from: str | os.PathLike[str] | None = None,
    featurizer: Any = None,
) -> LoadedDataset:
    """An image folder as a dataset: :func:`read_image_folder`, then the images' features.

    Parameters
    ----------
    folder, labels, unlisted, max_pixels
        As in :func:`read_image_folder`.
    features_from : str or os.PathLike, optional
        Embeddings aligned by item id (:func:`app.io.featurizers.load_features_file`) instead
        of computed features.
    featurizer : object, optional
        An unfitted image featurizer (e.g. :class:`app.io.featurizers.ClipEmbedder`); default
        :class:`app.io.featurizers.ImageFeaturizer`.

    Returns
    -------
    LoadedDataset
        Labels sorted naturally, the folder as the media root, every item an image, and the
        featurizer's record (``None`` with ``features_from``).

    Raises
    ------
    DataFileError
        As :func:`read_image_folder`; a damaged image is named by the labels file's row (or,
        without a labels file, by its path in the folder).
    """
    from app.io.featurizers import ImageFeaturizer, load_features_file
    from app.io.readers.labels import sort_label_names

    images = read_image_folder(folder, labels, unlisted=unlisted, max_pixels=max_pixels)
    n = len(images.ids)
    label_names = sort_label_names(name for names in images.candidates for name in names)
    index = {name: j for j, name in enumerate(label_names)}
    candidates = np.zeros((n, len(label_names)), dtype=bool)
    for i, names in enumerate(images.candidates):
        candidates[i, [index[name] for name in names]] = True
    true_labels = None
    if images.true_labels is not None:
        true_labels = np.array([-1 if t is None else index[t] for t in images.true_labels], dtype=np.int64)
    record = None
    if features_from is not None:
        X = load_features_file(features_from, list(images.ids))
        feature_names = [f"embedding_{j}" for j in range(X.shape[1])]
    else:
        model = featurizer if featurizer is not None else ImageFeaturizer(max_pixels=max_pixels)
        try:
            X = model.fit_transform([images.root / rel for rel in images.paths])
        except ContentError as exc:
            position = (exc.row or 1) - 1
            if images.labels_file is not None:
                raise DataFileError(images.labels_file, exc.problem, row=exc.row, column="path") from None
            raise DataFileError(images.root, f"{images.paths[position]!r}: {exc.problem}") from None
        record = model.to_record()
        feature_names = [f"{record.name}_{j}" for j in range(X.shape[1])]
    source = images.labels_file if images.labels_file is not None else images.root
    return LoadedDataset(
        np.ascontiguousarray(X, dtype=np.float64),
        candidates,
        label_names,
        list(images.ids),
        true_labels,
        feature_names,
        None,
        os.fspath(source),
        media_paths=list(images.paths),
        media_kinds=["image"] * n,
        media_root=os.fspath(images.root),
        featurizer=record,
        content_columns={"image": "path"},
    )
