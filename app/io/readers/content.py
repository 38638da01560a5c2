"""Item content in a table: which columns hold a text, an image, an audio clip or a link, their
checked values, and the features computed from them when the file brings none.

Content columns are named by the caller (``text_column``, ``image_column``, ``audio_column``,
``link_column``) or found by name (compared without case): ``text``; ``image`` or ``path``
(``path`` is taken for audio when every file it names has an audio extension); ``audio``;
``link`` or ``url``. A content column is never a feature. Media paths resolve against the media
root (the data file's folder unless given), must stay inside it, and are checked without
decoding: an image's header (format, at most :data:`~app.io.media.MAX_IMAGE_PIXELS` pixels), an
audio clip's first bytes. A media cell holding an http(s) URL is kept as the item's link.

Every problem is a :class:`~app.io.errors.DataFileError` naming the data file, the data row and
the column, as the other checks of the readers.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from app.io.errors import DataFileError
from app.io.featurizers import FeaturizerRecord, ImageFeaturizer, TextFeaturizer, load_features_file
from app.io.media import MAX_IMAGE_PIXELS, ContentError, check_audio, check_image, resolve_media
from app.io.readers.labels import is_missing, listing
from engine.exceptions import InvalidInput

__all__ = [
    "CONTENT_ROLES",
    "AUTO_COLUMNS",
    "ContentSources",
    "ItemContents",
    "resolve_content_columns",
    "read_contents",
    "features_from_content",
]

#: The kinds of content a column can hold.
CONTENT_ROLES: tuple[str, ...] = ("text", "image", "audio", "link")

#: Column names recognised for each role when the caller names none (compared without case).
AUTO_COLUMNS: dict[str, tuple[str, ...]] = {
    "text": ("text",),
    "image": ("image", "path"),
    "audio": ("audio",),
    "link": ("link", "url"),
}

_AUDIO_SUFFIXES = (".wav", ".wave", ".mp3", ".ogg", ".oga", ".opus", ".flac", ".m4a", ".aac")


@dataclass
class ContentSources:
    """What the caller says about content and features (arguments of ``read_dataset``).

    Attributes
    ----------
    columns : dict
        Role (``"text"``, ``"image"``, ``"audio"``, ``"link"``) to the column the caller named.
    media_root : str or os.PathLike or None
        Folder media paths are relative to; ``None``: the data file's folder.
    features_from : str or os.PathLike or None
        Embeddings aligned by id (:func:`app.io.featurizers.load_features_file`).
    featurizer : object or None
        An unfitted featurizer (``fit_transform`` and ``to_record``) to use instead of the
        built-in one for the content.
    max_pixels : int
        Largest image accepted.
    """

    columns: dict[str, str] = field(default_factory=dict)
    media_root: str | os.PathLike[str] | None = None
    features_from: str | os.PathLike[str] | None = None
    featurizer: Any = None
    max_pixels: int = MAX_IMAGE_PIXELS


@dataclass(frozen=True)
class ItemContents:
    """Checked content of every item (``None`` lists for a role the file does not have).

    Attributes
    ----------
    columns : dict
        Role to the column it was read from.
    texts : list of str or None
    media_paths : list of (str or None) or None
        Relative to ``media_root``, ``/``-separated.
    media_kinds : list of (str or None) or None
        ``"image"`` or ``"audio"`` where ``media_paths`` has a path.
    media_files : list of (Path or None) or None
        Absolute resolved paths (for featurizing; never stored).
    links : list of (str or None) or None
    media_root : str or None
        Absolute resolved folder, when some item has a media file.
    """

    columns: dict[str, str]
    texts: list[str] | None = None
    media_paths: list[str | None] | None = None
    media_kinds: list[str | None] | None = None
    media_files: list[Path | None] | None = None
    links: list[str | None] | None = None
    media_root: str | None = None


def resolve_content_columns(
    file: Path, header: Sequence[str], requested: dict[str, str], taken: set[str], ignored: set[str]
) -> dict[str, str]:
    """The column of each content role: the one the caller named, else one found by name.

    Parameters
    ----------
    file : Path
        The data file (for messages).
    header : sequence of str
        The file's column names.
    requested : dict
        Role to the column the caller named.
    taken : set of str
        Columns already used (candidates, id, true label): never content.
    ignored : set of str
        Columns the caller asked to skip: never found by name.

    Returns
    -------
    dict
        Role to column, for the roles the file has.
    """
    roles: dict[str, str] = {}
    for role, name in requested.items():
        if name not in header:
            raise DataFileError(file, f"has no {name!r} column for {role}_column (columns: {listing(list(header))})")
        if name in taken:
            raise DataFileError(
                file, f"column {name!r} cannot be both the {role} column and the candidates, id or true-label column"
            )
        roles[role] = name
    used = set(roles.values()) | taken | ignored
    folded = {h.casefold(): h for h in reversed(header)}  # the first spelling wins
    for role in CONTENT_ROLES:
        if role in roles:
            continue
        if role == "image" and "audio" in requested:
            continue  # the caller named the media column: no second one is guessed
        if role == "audio" and "image" in requested:
            continue
        for candidate in AUTO_COLUMNS[role]:
            found = folded.get(candidate)
            if found is not None and found not in used:
                roles[role] = found
                used.add(found)
                break
    if len(set(roles.values())) != len(roles):
        repeated = sorted({c for c in roles.values() if list(roles.values()).count(c) > 1})
        raise DataFileError(file, f"column {repeated[0]!r} is named for two kinds of content")
    return roles


def _text_cells(file: Path, values: list[Any], rows: Sequence[int], column: str, has_header: bool) -> list[str]:
    texts = []
    for value, row in zip(values, rows, strict=True):
        if is_missing(value) or (isinstance(value, str) and not value.strip()):
            raise DataFileError(
                file, "the text is empty; every item needs its text", row=row, column=column, has_header=has_header
            )
        if not isinstance(value, str):
            raise DataFileError(file, f"{value!r} is not text", row=row, column=column, has_header=has_header)
        if "\x00" in value:
            raise DataFileError(file, "the text holds a NUL character", row=row, column=column, has_header=has_header)
        texts.append(value)
    return texts


def _link_cells(
    file: Path, values: list[Any], rows: Sequence[int], column: str, has_header: bool, root: Path
) -> list[str | None]:
    links: list[str | None] = []
    for value, row in zip(values, rows, strict=True):
        if is_missing(value) or (isinstance(value, str) and not value.strip()):
            links.append(None)  # a link is optional per item
            continue
        try:
            ref = resolve_media(value, root, row=row, column=column, must_exist=False)
        except ContentError as exc:
            raise DataFileError(file, exc.problem, row=row, column=column, has_header=has_header) from None
        if ref.kind != "url":
            raise DataFileError(
                file, f"{str(value)[:80]!r} is not an http(s) link", row=row, column=column, has_header=has_header
            )
        links.append(ref.url)
    return links


def read_contents(
    file: Path,
    cells: dict[str, list[Any]],
    rows: Sequence[int],
    has_header: bool,
    sources: ContentSources,
    roles: dict[str, str],
) -> ItemContents:
    """Check the content cells of every item.

    Parameters
    ----------
    file : Path
        The data file (for messages; its folder is the default media root).
    cells : dict
        Column name to its cells (Python values, ``None`` for a missing one).
    rows : sequence of int
        1-based data row of each item.
    has_header : bool
        Whether ``rows`` count below a header (messages then also give the spreadsheet row).
    sources : ContentSources
    roles : dict
        From :func:`resolve_content_columns`.

    Returns
    -------
    ItemContents
    """
    if not roles:
        return ItemContents(columns={})
    root = Path(sources.media_root) if sources.media_root is not None else file.resolve().parent
    if ("image" in roles or "audio" in roles) and not root.is_dir():
        raise DataFileError(file, f"the media root {os.fspath(root)!r} is not a folder")
    texts = _text_cells(file, cells[roles["text"]], rows, roles["text"], has_header) if "text" in roles else None
    links = _link_cells(file, cells[roles["link"]], rows, roles["link"], has_header, root) if "link" in roles else None

    media_paths: list[str | None] | None = None
    media_kinds: list[str | None] | None = None
    media_files: list[Path | None] | None = None
    media_root: str | None = None
    media_column = roles.get("image") or roles.get("audio")
    if media_column is not None:
        kind = "image" if "image" in roles else "audio"
        values = cells[media_column]
        if kind == "image" and media_column.casefold() == "path" and "image" not in sources.columns:
            named = [str(v).strip().lower() for v in values if isinstance(v, str) and v.strip()]
            if named and all(v.endswith(_AUDIO_SUFFIXES) for v in named):
                kind = "audio"
        media_paths, media_kinds, media_files = [], [], []
        links = links if links is not None else [None] * len(rows)
        for i, (value, row) in enumerate(zip(values, rows, strict=True)):
            try:
                ref = resolve_media(value, root, row=row, column=media_column)
                if ref.path is not None and kind == "image":
                    check_image(ref.path, max_pixels=sources.max_pixels)
                elif ref.path is not None:
                    check_audio(ref.path)
            except ContentError as exc:
                raise DataFileError(file, exc.problem, row=row, column=media_column, has_header=has_header) from None
            if ref.kind == "url":
                if links[i] is not None and links[i] != ref.url:
                    raise DataFileError(
                        file,
                        f"the {kind} is a link and the link column holds another one",
                        row=row,
                        column=media_column,
                        has_header=has_header,
                    )
                links[i] = ref.url
                media_paths.append(None)
                media_kinds.append(None)
                media_files.append(None)
            else:
                media_paths.append(ref.relative_path)
                media_kinds.append(kind)
                media_files.append(ref.path)
        if any(p is not None for p in media_paths):
            media_root = os.fspath(root.resolve())
        if links is not None and all(link is None for link in links) and "link" not in roles:
            links = None
    return ItemContents(
        columns=dict(roles),
        texts=texts,
        media_paths=media_paths,
        media_kinds=media_kinds,
        media_files=media_files,
        links=links,
        media_root=media_root,
    )


def features_from_content(
    file: Path,
    contents: ItemContents,
    ids: Sequence[str],
    rows: Sequence[int],
    has_header: bool,
    sources: ContentSources,
) -> tuple[np.ndarray, list[str], FeaturizerRecord | None]:
    """Features when the file has no numeric column: a features file, or a featurizer run on
    the items' images (when there are) or texts.

    Returns
    -------
    (ndarray of shape (n_items, dimension), list of str, FeaturizerRecord or None)
        The features, their names, and the featurizer's record (``None`` for a features file).
    """
    if sources.features_from is not None:
        X = load_features_file(sources.features_from, ids)
        return X, [f"embedding_{j}" for j in range(X.shape[1])], None
    featurizer = sources.featurizer
    if contents.media_kinds is not None and "image" in contents.media_kinds:
        column = contents.columns.get("image") or contents.columns.get("audio", "")
        missing = [i for i, path in enumerate(contents.media_files or []) if path is None]
        if missing:
            raise DataFileError(
                file,
                "this image is a link, which winnow does not download; give every item a local image, "
                "numeric feature columns or features_from (an embeddings file)",
                row=rows[missing[0]],
                column=column,
                has_header=has_header,
            )
        items: list[Any] = list(contents.media_files or [])
        featurizer = featurizer if featurizer is not None else ImageFeaturizer(max_pixels=sources.max_pixels)
    elif contents.media_kinds is not None and "audio" in contents.media_kinds:
        raise DataFileError(
            file,
            "audio items need their features: numeric feature columns in the file or features_from "
            "(an embeddings file aligned by id); winnow computes none from sound",
            column=contents.columns.get("audio") or contents.columns.get("image"),
        )
    elif contents.texts is not None:
        items = list(contents.texts)
        column = contents.columns["text"]
        featurizer = featurizer if featurizer is not None else TextFeaturizer()
    else:
        raise DataFileError(file, "has no feature columns and no content (text, image) to compute features from")
    try:
        X = featurizer.fit_transform(items, rows=list(rows))
    except ContentError as exc:
        raise DataFileError(file, exc.problem, row=exc.row, column=column, has_header=has_header) from None
    except InvalidInput as exc:  # e.g. no term left once min_df / max_df pruned the vocabulary
        raise DataFileError(file, str(exc), column=column, has_header=has_header) from None
    record = featurizer.to_record()
    return np.ascontiguousarray(X, dtype=np.float64), [f"{record.name}_{j}" for j in range(X.shape[1])], record
