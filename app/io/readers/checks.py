"""What every reader checks and returns, written once: the :class:`LoadedDataset`, feature
and 0/1 matrices, true labels inside their candidate sets, unique ids, image layouts, and the
"this is really a ... file" sniffing of binary signatures.

Each check raises :class:`~app.io.errors.DataFileError` naming the file, the 1-based data row
and the column. The rules shared with the store (distinct ids, true label in its set, the
``image:HxW`` layout) come from :mod:`app.dataset_rules`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from app.dataset_rules import (
    IMAGE_LAYOUT,
    MAX_LABELS,
    NAME_MAX,
    first_repeat,
    first_true_label_outside,
    text_problem,
)
from app.io.errors import DataFileError
from app.io.readers.labels import LABEL_SEPARATOR, check_label_names_argument, quote
from engine.exceptions import InvalidInput

if TYPE_CHECKING:
    from app.io.featurizers import FeaturizerRecord
    from app.io.readers.label_studio import ExpertAnswer
    from app.io.readers.votes import Votes

__all__ = [
    "SUPPORTED_EXTENSIONS",
    "LoadedDataset",
    "check_feature_matrix",
    "check_zero_one",
    "check_true_in_candidates",
    "check_unique_ids",
    "check_store_limits",
    "string_vector",
    "names_for_columns",
    "check_label_names_in_file",
    "detect_layout",
    "reject_binary_magic",
    "first_line",
    "file_head",
]

SUPPORTED_EXTENSIONS: tuple[str, ...] = (".csv", ".tsv", ".txt", ".parquet", ".mat", ".npz", ".json")
"""File extensions :func:`read_dataset` understands (compared case-insensitively)."""


@dataclass(frozen=True, eq=False)
class LoadedDataset:
    """A validated partially labelled dataset, ready for the store and the engine.

    Attributes
    ----------
    X : ndarray of shape (n_instances, n_features), float64
        Finite features.
    candidates : ndarray of shape (n_instances, n_labels), bool
        Row ``i`` is the candidate set of instance ``i``; no row is empty.
    label_names : list of str
        Name of label column ``j``. Discovered labels are sorted naturally (numeric labels in
        numeric order, ``"class2"`` before ``"class10"``); a ``label_names`` argument, an
        ``.npz`` ``label_names`` array or a ``.mat`` row order is kept as given.
    ids : list of str
        Unique instance ids; ``"0"`` .. ``"n-1"`` when the file has none.
    true_labels : ndarray of shape (n_instances,), int, or None
        Index of the true label, ``-1`` where unknown; ``None`` when the file has no true labels.
        A known true label always lies in its candidate set.
    feature_names : list of str
    layout : str or None
        A drawing hint for the UI, e.g. ``"image:8x8"`` (row-major pixels). Set from the file's
        own metadata or from feature names ``pixel_0`` .. ``pixel_{d-1}`` (square d) or
        ``pixel_<row>_<col>``.
    source : str
        The path the data was read from.
    texts : list of str, or None
        Each item's text (from a text column), or ``None`` when the file has none.
    media_paths : list of (str or None), or None
        Each item's image or audio file relative to :attr:`media_root` (``/``-separated).
    media_kinds : list of (str or None), or None
        ``"image"`` or ``"audio"`` where :attr:`media_paths` has a path.
    links : list of (str or None), or None
        An http(s) URL per item (a link column, or a media cell that is a URL).
    media_root : str or None
        Absolute folder the media paths are relative to.
    featurizer : FeaturizerRecord or None
        The featurizer that computed :attr:`X` from the content; ``None`` when the features
        came from the file's numeric columns or a features file.
    content_columns : dict
        Content role (``"text"``, ``"image"``, ``"audio"``, ``"link"``) to the column it came from.
    votes : Votes or None
        The votes a file brings with its items (a Label Studio export's annotations), from
        which :attr:`candidates` were made; ``None`` for other files.
    kept_sets : bool array of shape (n_instances,), or None
        Items whose candidate set the file states (a task of winnow's own Label Studio export,
        ``meta.winnow.candidates``): their votes do not remake it.
    expert_answers : tuple of ExpertAnswer, or None
        Expert answers the file carries (winnow's own Label Studio export), recorded in the
        session an import creates.
    label_studio_control : (str, str, str) or None
        The ``from_name`` and ``to_name`` a Label Studio export's annotations use, and the
        ``data`` key of the content they label (stored with the dataset, so that tasks written
        back fit the same project).
    """

    X: np.ndarray
    candidates: np.ndarray
    label_names: list[str]
    ids: list[str]
    true_labels: np.ndarray | None
    feature_names: list[str]
    layout: str | None
    source: str
    texts: list[str] | None = None
    media_paths: list[str | None] | None = None
    media_kinds: list[str | None] | None = None
    links: list[str | None] | None = None
    media_root: str | None = None
    featurizer: FeaturizerRecord | None = None
    content_columns: dict[str, str] = field(default_factory=dict)
    votes: Votes | None = None
    kept_sets: np.ndarray | None = None
    expert_answers: tuple[ExpertAnswer, ...] | None = None
    label_studio_control: tuple[str, str, str] | None = None

    @property
    def n_instances(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def n_labels(self) -> int:
        return len(self.label_names)


def check_feature_matrix(file: Path, arr: np.ndarray, key: str) -> np.ndarray:
    X = np.asarray(arr, dtype=np.float64)
    if X.shape[0] == 0:
        raise DataFileError(file, "has no rows", column=key, has_header=False)
    if X.shape[1] == 0:
        raise DataFileError(file, "has no feature columns", column=key, has_header=False)
    bad = ~np.isfinite(X)
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        raise DataFileError(
            file,
            f"feature {j} (0-based) is {X[i, j]}; features must be finite",
            row=i + 1,
            column=key,
            has_header=False,
        )
    return np.ascontiguousarray(X)


def check_zero_one(file: Path, arr: np.ndarray, key: str, *, allow_empty: bool = False) -> np.ndarray:
    if arr.dtype != bool:
        bad = ~np.isin(arr, (0, 1))
        if bad.any():
            i, j = (int(v) for v in np.argwhere(bad)[0])
            raise DataFileError(
                file,
                f"entry for label {j} (0-based) is {arr[i, j]!r}; entries must be 0 or 1",
                row=i + 1,
                column=key,
                has_header=False,
            )
        arr = arr.astype(bool)
    if arr.shape[1] == 0:
        raise DataFileError(file, "has no label columns", column=key, has_header=False)
    if not allow_empty:
        empty = ~arr.any(axis=1)
        if empty.any():
            i = int(np.flatnonzero(empty)[0])
            raise DataFileError(
                file,
                "empty candidate set; every item needs at least one candidate label",
                row=i + 1,
                column=key,
                has_header=False,
            )
    return np.ascontiguousarray(arr)


def check_true_in_candidates(
    file: Path,
    true_labels: np.ndarray,
    candidates: np.ndarray,
    names: Sequence[str],
    key: str,
    *,
    rows: Sequence[int] | None = None,
    has_header: bool = False,
) -> None:
    """A known true label outside its item's candidate set is a DataFileError.

    ``rows`` gives the 1-based data row of each item (default: position + 1).
    """
    i = first_true_label_outside(true_labels, candidates)
    if i is not None:
        in_set = LABEL_SEPARATOR.join(names[j] for j in np.flatnonzero(candidates[i]).tolist())
        raise DataFileError(
            file,
            f"true label {quote(names[true_labels[i]])} is not in the item's candidate set {quote(in_set)}",
            row=rows[i] if rows is not None else i + 1,
            column=key,
            has_header=has_header,
        )


def check_store_limits(
    file: Path,
    dataset: LoadedDataset,
    *,
    rows: Sequence[int],
    has_header: bool,
    id_column: str | None,
    labels_column: str,
    feature_columns: bool,
) -> None:
    """The limits of the store, checked with the file's rows and columns in the message.

    Ids, label names and feature names of at most ``NAME_MAX`` characters, at most
    ``MAX_LABELS`` labels, and every id, label, feature name and text free of control
    characters and lone surrogates (:func:`app.dataset_rules.text_problem`): the store refuses
    them too, but only a reader can say where in the file the offending value is.

    Parameters
    ----------
    rows : sequence of int
        The 1-based data row of each item.
    id_column, labels_column : str
        Where the ids and the labels come from (``None``: ids made up by the reader).
    feature_columns : bool
        Whether feature names are column names (text and Parquet) or the entries of an array.
    """
    n_labels = len(dataset.label_names)
    if n_labels > MAX_LABELS:
        raise DataFileError(
            file,
            f"has {n_labels} different labels; at most {MAX_LABELS} are supported",
            column=labels_column,
            has_header=has_header,
        )
    for j, name in enumerate(dataset.label_names):
        problem = text_problem(name)
        if len(name) > NAME_MAX or problem is not None:
            holders = np.flatnonzero(dataset.candidates[:, j])
            row = rows[int(holders[0])] if holders.size else None
            raise DataFileError(
                file,
                f"label {quote(name[:NAME_MAX])} {problem or f'is longer than {NAME_MAX} characters'}",
                row=row,
                column=labels_column,
                has_header=has_header,
            )
    if id_column is not None:
        for position, item_id in enumerate(dataset.ids):
            problem = text_problem(item_id)
            if len(item_id) > NAME_MAX or problem is not None:
                raise DataFileError(
                    file,
                    f"id {quote(item_id[:NAME_MAX])} {problem or f'is longer than {NAME_MAX} characters'}",
                    row=rows[position],
                    column=id_column,
                    has_header=has_header,
                )
    for position, text in enumerate(dataset.texts or ()):
        problem = text_problem(text, line_breaks=True) if text else None
        if problem is not None:
            raise DataFileError(
                file,
                f"the text {problem}",
                row=rows[position],
                column=dataset.content_columns.get("text", "text"),
                has_header=has_header,
            )
    for j, name in enumerate(dataset.feature_names):
        problem = text_problem(name)
        if problem is not None:
            raise DataFileError(file, f"feature name {quote(name[:NAME_MAX])} (feature {j + 1}) {problem}")
        if len(name) > NAME_MAX:
            if feature_columns:
                raise DataFileError(
                    file,
                    f"column name {quote(name)} (column {j + 1} of the features) is longer than {NAME_MAX} characters",
                )
            raise DataFileError(
                file,
                f"entry {j + 1} {quote(name)} is longer than {NAME_MAX} characters",
                column="feature_names",
                has_header=False,
            )


def check_unique_ids(file: Path, ids: Sequence[str], rows: Sequence[int], column: str, *, has_header: bool) -> None:
    """A repeated id is a DataFileError at the row that repeats it (``rows``: 1-based data rows)."""
    repeat = first_repeat(ids)
    if repeat is not None:
        position, earlier = repeat
        raise DataFileError(
            file,
            f"duplicate id {quote(ids[position])} (first used in row {rows[earlier]})",
            row=rows[position],
            column=column,
            has_header=has_header,
        )


def string_vector(file: Path, arr: np.ndarray, key: str, length: int) -> list[str]:
    flat = arr.reshape(-1) if arr.ndim == 2 and 1 in arr.shape else arr
    if flat.ndim != 1 or flat.shape[0] != length or flat.dtype.kind not in "USiu":
        raise DataFileError(
            file,
            f"must be {length} strings or integers, got {arr.dtype} of shape {arr.shape}",
            column=key,
            has_header=False,
        )
    out = [
        item.decode("utf-8", "replace").strip() if isinstance(item, bytes) else str(item).strip()
        for item in flat.tolist()
    ]
    for i, item in enumerate(out):
        if not item:
            raise DataFileError(file, "is empty", row=i + 1, column=key, has_header=False)
    return out


def names_for_columns(file: Path, given: list[str] | None, default: list[str], count: int, key: str) -> list[str]:
    if given is None:
        return default
    if len(given) != count:
        raise DataFileError(
            file, f"has {count} label columns but {len(given)} label_names were given", column=key, has_header=False
        )
    return given


def check_label_names_in_file(file: Path, names: list[str]) -> None:
    try:
        check_label_names_argument(names)
    except InvalidInput as exc:
        raise DataFileError(file, str(exc), column="label_names", has_header=False) from None


_PIXEL = re.compile(r"(?:pixel|pix|px)[_\-. ]?(\d+)", re.IGNORECASE)


_PIXEL_RC = re.compile(r"(?:pixel|pix|px)[_\-. ]?(\d+)[_\-. x](\d+)", re.IGNORECASE)


def detect_layout(file: Path, feature_names: Sequence[str], declared: str | None) -> str | None:
    d = len(feature_names)
    if declared is not None:
        match = IMAGE_LAYOUT.fullmatch(declared.strip())
        if not match:
            raise DataFileError(file, f"layout {quote(declared)} is not of the form 'image:<height>x<width>'")
        height, width = int(match[1]), int(match[2])
        if height * width != d:
            raise DataFileError(file, f"layout {quote(declared)} needs {height * width} features but there are {d}")
        return f"image:{height}x{width}"
    flat = [m for name in feature_names if (m := _PIXEL.fullmatch(name))]
    if len(flat) == d:
        side = math.isqrt(d)
        indices = [int(m[1]) for m in flat]
        if side >= 2 and side * side == d and indices in (list(range(d)), list(range(1, d + 1))):
            return f"image:{side}x{side}"
        return None
    grid = [m for name in feature_names if (m := _PIXEL_RC.fullmatch(name))]
    if len(grid) == d and d >= 4:
        cells = [(int(m[1]), int(m[2])) for m in grid]
        height = max(r for r, _ in cells) + 1
        width = max(c for _, c in cells) + 1
        if height * width == d and cells == [(r, c) for r in range(height) for c in range(width)]:
            return f"image:{height}x{width}"
    return None


_MAGIC = (
    (b"PK\x03\x04", "a zip archive (an Excel .xlsx workbook or an .npz?)"),
    (b"PAR1", "a Parquet file"),
    (b"MATLAB", "a MATLAB MAT-file"),
    (b"\x93NUMPY", "a NumPy .npy file"),
    (b"\x89HDF", "an HDF5 file"),
    (b"\xd0\xcf\x11\xe0", "an old Excel/Office document"),
    (b"\x1f\x8b", "a gzip-compressed file"),
    (b"%PDF", "a PDF document"),
)


def reject_binary_magic(file: Path, head: bytes, *, expected: str) -> None:
    for magic, what in _MAGIC:
        if head.startswith(magic):
            raise DataFileError(file, f"looks like {what}, not {expected}; check the file or its extension")


def first_line(exc: BaseException, limit: int = 160) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def file_head(file: Path) -> tuple[int, bytes]:
    """The size of a data file and its first KiB (to recognise its format), or a
    :class:`DataFileError` naming what is wrong: missing, not a regular file, unreadable or
    empty."""
    try:
        if not file.exists():
            raise DataFileError(file, "file not found")
        if not file.is_file():
            raise DataFileError(file, "is not a regular file")
        size = file.stat().st_size
        with file.open("rb") as handle:
            head = handle.read(1024)
    except OSError as exc:
        raise DataFileError(file, f"cannot be opened: {exc.strerror or exc}") from None
    if size == 0:
        raise DataFileError(file, "is empty (0 bytes)")
    return size, head
