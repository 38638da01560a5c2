"""Read a partially labelled dataset from a file and validate it before anything is stored.

One module per format (:mod:`.text`, :mod:`.parquet`, :mod:`.mat`, :mod:`.npz`; text and
Parquet share :mod:`.table`), the checks they share in :mod:`.checks` and :mod:`.labels`.

Supported formats (chosen by extension)
---------------------------------------
``.csv`` / ``.tsv`` / ``.txt``
    One header row, then one row per instance. The candidates column (``candidates`` unless told
    otherwise) holds a candidate set as ``cat|dog`` or as a JSON list ``["cat", "dog"]``; integer
    labels are fine (``3|8``, ``[3, 8]``). A column named ``id`` is taken as the instance id and a
    column named ``true_label`` as the (optional, possibly blank) true label. Content columns
    (an item's text, image, audio clip, link; see :mod:`.content`) are named by the caller or
    found by name. Every other column is a numeric feature; a file without any gets features
    computed from its content (or read from ``features_from``). ``.txt`` files have their
    delimiter detected from the header (tab, comma or semicolon). Text must be UTF-8 (a BOM is
    fine) or UTF-16 with a BOM.
``.parquet``
    The same columns as CSV; candidates may also be a list column (``list<string>`` or
    ``list<int>``). A ``winnow.layout`` key in the schema metadata sets :attr:`LoadedDataset.layout`.
``.mat`` (MATLAB 5/7, the format of the PLL benchmarks)
    ``data`` (n x d), ``partial_target`` (q x n, 1 where a label is a candidate), optional
    ``target`` (q x n one-hot true label; an all-zero column means unknown). Dense or scipy.sparse.
    An n x q ``partial_target`` is accepted too. Labels are named ``"1"`` .. ``"q"`` (the MATLAB
    row numbers) unless ``label_names`` is given.
``.json`` (a Label Studio export)
    A list of tasks with ``data`` and ``annotations`` (:mod:`.label_studio`): the task ids, the
    content of ``data`` (text, image, audio, link; the content options name other keys), and
    candidate sets made from the annotators' single choices (their union; a task nobody
    annotated may be any label). Features are computed from the content or read from
    ``features_from``.
``.npz``
    ``X`` (n x d numeric), ``candidates`` (n x M bool or 0/1), optional ``y`` (true label indices,
    -1 for unknown), ``label_names`` (M strings; default ``"0"`` .. ``"M-1"``), ``ids`` (n strings
    or integers), ``feature_names`` (d strings) and ``layout`` (a string such as ``"image:8x8"``).

Every problem raises :class:`~app.io.errors.DataFileError` (an
:class:`engine.exceptions.InvalidInput`) whose one-line message names the file, the 1-based data
row and/or the column, and what is wrong. See :mod:`app.io.errors` for the row convention.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from numbers import Integral
from pathlib import Path
from typing import Any

from app.io.errors import DataFileError
from app.io.featurizers import load_features_file
from app.io.media import MAX_IMAGE_PIXELS
from app.io.readers.checks import SUPPORTED_EXTENSIONS, LoadedDataset, file_head
from app.io.readers.content import AUTO_COLUMNS, CONTENT_ROLES, ContentSources
from app.io.readers.labels import check_label_names_argument, parse_candidate_cell, sort_label_names
from app.io.readers.mat import read_mat
from app.io.readers.npz import read_npz
from engine.exceptions import InvalidInput

__all__ = [
    "AUTO_COLUMNS",
    "CONTENT_ROLES",
    "LoadedDataset",
    "SUPPORTED_EXTENSIONS",
    "read_dataset",
    "parse_candidate_cell",
    "sort_label_names",
]


def read_dataset(
    path: str | os.PathLike[str],
    *,
    candidates_column: str = "candidates",
    id_column: str | None = None,
    true_label_column: str | None = None,
    label_names: Sequence[str | int] | None = None,
    delimiter: str | None = None,
    min_rows: int = 1,
    ignore_columns: Iterable[str] = (),
    text_column: str | None = None,
    image_column: str | None = None,
    audio_column: str | None = None,
    link_column: str | None = None,
    media_root: str | os.PathLike[str] | None = None,
    features_from: str | os.PathLike[str] | None = None,
    featurizer: Any = None,
    max_pixels: int = MAX_IMAGE_PIXELS,
    default_labels: Sequence[str] | None = None,
    user_names: Mapping[str, str] | None = None,
) -> LoadedDataset:
    """Read and validate a partially labelled dataset.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.csv``, ``.tsv``, ``.txt``, ``.parquet``, ``.mat`` or ``.npz`` file, or a Label
        Studio export (``.json``).
    candidates_column : str, default "candidates"
        Column holding the candidate sets (text and Parquet files).
    id_column : str, optional
        Column holding instance ids. ``None`` uses a column named ``id`` when there is one.
    true_label_column : str, optional
        Column holding true labels (blank = unknown). ``None`` uses ``true_label`` when present.
    label_names : sequence of str, optional
        The complete label set, in the order to use. A label outside it is an error. For
        ``.mat`` / ``.npz`` it names the label columns and must have one name per column.
    delimiter : str, optional
        One character; overrides the extension's delimiter for text files.
    min_rows : int, default 1
        Fewest instances accepted (a k-NN caller passes ``k + 1``).
    ignore_columns : iterable of str, default ()
        Columns of a text or Parquet file to skip (e.g. notes); names not in the file are ignored.
        An ignored column is never taken for content either.
    text_column, image_column, audio_column, link_column : str, optional
        Columns of a text or Parquet file holding each item's text, image file, audio file
        and http(s) link. ``None`` finds them by name (without case): ``text``; ``image`` or
        ``path`` (taken for audio when every file it names is audio); ``audio``; ``link`` or
        ``url``. Content columns are not features. An image or audio cell may be an http(s)
        URL: it is kept as the item's link. Give an image column or an audio column, not both.
    media_root : str or os.PathLike, optional
        Folder that media paths are relative to (default: the data file's folder). Paths must
        stay inside it, symbolic links included.
    features_from : str or os.PathLike, optional
        An embeddings file (``.npy``, ``.npz``, ``.parquet``) aligned by id with the items
        (:func:`app.io.featurizers.load_features_file`); it replaces the file's numeric columns
        and any computed features.
    featurizer : object, optional
        An unfitted featurizer (e.g. :class:`app.io.featurizers.SentenceEmbedder`) used instead
        of the built-in one when features are computed from the content. Without numeric
        columns or ``features_from``, images get :class:`~app.io.featurizers.ImageFeaturizer`
        and texts :class:`~app.io.featurizers.TextFeaturizer`; audio needs numeric columns or
        ``features_from``.
    max_pixels : int, default :data:`~app.io.media.MAX_IMAGE_PIXELS`
        Largest image accepted (width x height, read from the header before decoding).
    default_labels : sequence of str, optional
        For a text or Parquet file without a candidates column: every item gets all these
        labels (a caller that makes the sets from votes narrows them afterwards). ``None``
        (the default) refuses a file without a candidates column.
    user_names : mapping of str to str, optional
        For a Label Studio export: user id to email (:func:`.label_studio.read_user_map`).

    Returns
    -------
    LoadedDataset

    Raises
    ------
    DataFileError
        The file is missing, empty, of an unsupported type, unreadable, or its content is invalid.
        The message is one line naming the file, the 1-based data row and/or column.
    InvalidInput
        A keyword argument has a bad value (e.g. duplicate ``label_names``).
    TypeError
        ``path`` is not a path.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    if isinstance(min_rows, bool) or not isinstance(min_rows, Integral) or min_rows < 1:
        raise InvalidInput(f"min_rows must be an integer >= 1, got {min_rows!r}")
    if delimiter is not None and (not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in "\r\n\"'"):
        raise InvalidInput(f"delimiter must be one character other than a quote or newline, got {delimiter!r}")
    for name, value in (
        ("candidates_column", candidates_column),
        ("id_column", id_column),
        ("true_label_column", true_label_column),
    ):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise InvalidInput(f"{name} must be a non-empty column name, got {value!r}")
    names = check_label_names_argument(label_names)
    if isinstance(ignore_columns, str):
        raise TypeError("ignore_columns must be a sequence of column names, not a single string")
    ignored = {str(c) for c in ignore_columns}
    content_columns: dict[str, str] = {}
    for role, value in (("text", text_column), ("image", image_column), ("audio", audio_column), ("link", link_column)):
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip():
            raise InvalidInput(f"{role}_column must be a non-empty column name, got {value!r}")
        content_columns[role] = value.strip()
    if "image" in content_columns and "audio" in content_columns:
        raise InvalidInput("give image_column or audio_column, not both: an item has one media file")
    if media_root is not None:
        if not isinstance(media_root, (str, os.PathLike)):
            raise TypeError(f"media_root must be a path, got {type(media_root).__name__}")
        if not Path(media_root).is_dir():
            raise InvalidInput(f"media_root {os.fspath(media_root)!r} is not an existing folder")
    if features_from is not None and not isinstance(features_from, (str, os.PathLike)):
        raise TypeError(f"features_from must be a path, got {type(features_from).__name__}")
    sources = ContentSources(content_columns, media_root, features_from, featurizer, max_pixels)

    file = Path(path)
    ext = file.suffix.lower()
    if ext not in SUPPORTED_EXTENSIONS:
        hint = " (save a spreadsheet as CSV UTF-8)" if ext in (".xlsx", ".xls", ".ods") else ""
        raise DataFileError(
            file,
            f"unsupported file type {ext or '(no extension)'!r}; use one of {', '.join(SUPPORTED_EXTENSIONS)}{hint}",
        )
    size, head = file_head(file)
    # Imported here: the table readers load pandas and pyarrow (0.3-0.5 s), which the other
    # modules of this package (the answers file of `winnow answer --from`) never need.
    from app.io.readers.label_studio import read_label_studio
    from app.io.readers.parquet import read_parquet
    from app.io.readers.table import Roles, dataset_from_table
    from app.io.readers.text import read_text

    defaults = check_label_names_argument(default_labels)
    roles = Roles(candidates_column, id_column, true_label_column, ignored, defaults)
    if user_names is not None and ext != ".json":
        raise InvalidInput("a user map goes with a Label Studio export (.json)")
    if ext in (".csv", ".tsv", ".txt"):
        table = read_text(file, head, ext, delimiter)
        dataset = dataset_from_table(file, table, roles, names, sources)
    elif ext == ".parquet":
        table = read_parquet(file, head)
        dataset = dataset_from_table(file, table, roles, names, sources)
    elif ext == ".json":
        table_options = [
            option
            for option, given in (
                ("candidates_column", candidates_column != "candidates"),
                ("id_column", id_column is not None),
                ("true_label_column", true_label_column is not None),
                ("ignore_columns", bool(ignored)),
            )
            if given
        ]
        if table_options:
            raise InvalidInput(
                f"{', '.join(table_options)} apply to tables; a Label Studio export (.json) takes its ids, "
                "candidate sets and content from its tasks"
            )
        dataset = read_label_studio(file, label_names=names, sources=sources, user_names=user_names).dataset
    else:
        if content_columns:
            raise InvalidInput(
                f"{ext} files hold no content columns; {', '.join(content_columns)}_column applies "
                "to CSV, TSV, TXT and Parquet files"
            )
        dataset = read_mat(file, head, names) if ext == ".mat" else read_npz(file, head, names)
        if features_from is not None:
            X = load_features_file(features_from, dataset.ids)
            dataset = replace(dataset, X=X, feature_names=[f"embedding_{j}" for j in range(X.shape[1])], layout=None)

    n = dataset.n_instances
    if n < min_rows:
        raise DataFileError(file, f"has {n} data row{'s' if n != 1 else ''} but at least {min_rows} are needed")
    return dataset
