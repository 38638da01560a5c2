"""How much memory a file may make winnow allocate, checked before anything is decompressed;
and the other bounds every reader applies before it allocates (one place, documented in
``docs/reliability.md``).

One limit, :func:`max_decompressed_bytes`, bounds what a compressed or sparse file may expand
to: the members of an ``.npz`` archive (their declared sizes and their ``.npy`` headers, read
without inflating anything), a compressed MAT-file variable, a sparse matrix made dense (rows x
columns x 8 bytes, never densified beyond the limit), the uncompressed columns of a Parquet
file, and the features files of :func:`app.io.featurizers.load_features_file`. A file over the
limit is refused with one line naming the file, the array and both sizes.

Bounds on what a reader parses (before it builds Python objects for it):

- :data:`MAX_FIELD_CHARS` characters in one CSV/TSV field (Python's ``csv`` default, made
  explicit), :data:`MAX_COLUMNS` columns in a header, :data:`MAX_ANSWERS` rows in a file of
  answers;
- a JSON document (a Label Studio export) at most :func:`max_decompressed_bytes` divided by
  :data:`JSON_EXPANSION` bytes (what parsing and importing it takes, measured); JSON nested deeper than
  :data:`MAX_JSON_DEPTH` levels, and integers of more than :data:`MAX_INT_DIGITS` digits, are
  refused (Python's own limits, turned into one line);
- a Parquet file: :data:`PYTHON_CELL_BYTES` per cell of a column that is not numeric (each
  becomes a Python object), 8 per numeric cell;
- times converted to UTC must stay within years 1..9999 (:func:`as_utc`).

Configuration
-------------
``WINNOW_MAX_DECOMPRESSED_BYTES``
    The limit in bytes (a plain integer, or with a ``K``/``M``/``G`` suffix for KiB, MiB, GiB).
    Default :data:`DEFAULT_MAX_DECOMPRESSED_BYTES`, 1 GiB.
``WINNOW_MAX_UPLOAD_MB``
    Largest file the browser app accepts, in MB (also passed to Streamlit as
    ``server.maxUploadSize`` by ``winnow ui``). Default :data:`DEFAULT_MAX_UPLOAD_MB`.
"""

from __future__ import annotations

import math
import os
import re
import sys
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import numpy as np

from app.io.errors import DataFileError
from engine.exceptions import InvalidInput

__all__ = [
    "MAX_DECOMPRESSED_VARIABLE",
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "MAX_UPLOAD_VARIABLE",
    "DEFAULT_MAX_UPLOAD_MB",
    "max_decompressed_bytes",
    "max_upload_bytes",
    "too_big",
    "check_decompressed_size",
    "check_upload_size",
    "npy_header",
    "npz_member_shapes",
    "MAX_FIELD_CHARS",
    "MAX_COLUMNS",
    "MAX_ANSWERS",
    "MAX_JSON_DEPTH",
    "MAX_INT_DIGITS",
    "JSON_EXPANSION",
    "PYTHON_CELL_BYTES",
    "max_json_bytes",
    "as_utc",
]

MAX_DECOMPRESSED_VARIABLE = "WINNOW_MAX_DECOMPRESSED_BYTES"
#: 1 GiB: a million 128-dimensional float64 rows, with room for their labels.
DEFAULT_MAX_DECOMPRESSED_BYTES = 1 << 30

MAX_UPLOAD_VARIABLE = "WINNOW_MAX_UPLOAD_MB"
#: 100 MB: a CSV of about a million rows of 10 features; larger files go through ``winnow import``.
DEFAULT_MAX_UPLOAD_MB = 100

#: Most characters in one CSV/TSV field (the ``csv`` module's default limit, set explicitly).
MAX_FIELD_CHARS = 131_072
#: Most columns in the header of a CSV/TSV file, counted before the header is parsed (a
#: 9-million-column header would otherwise take 1.5 GB as Python strings).
MAX_COLUMNS = 250_000
#: Most answers in one file for ``winnow answer --from`` (split larger files).
MAX_ANSWERS = 200_000
#: Deepest JSON nesting accepted: Python's parser recurses once per level, so deeper
#: documents end in RecursionError, reported as this limit.
MAX_JSON_DEPTH = sys.getrecursionlimit()
#: Most digits of an integer in a file: Python's ``int`` conversion limit.
MAX_INT_DIGITS = sys.get_int_max_str_digits() or 4300
#: Bytes of memory per byte of JSON: importing a 10 MB Label Studio export of 59,657 small
#: text tasks peaked 327 MB above the interpreter's own 278 MB (33 times the file; measured
#: with ``/usr/bin/time`` as in ``benchmarks/bench_hostile_files.py``), so a JSON file is parsed
#: only when this many times its size fits in :func:`max_decompressed_bytes` (21 MiB by
#: default), keeping the whole process near the limit.
JSON_EXPANSION = 48
#: Bytes a cell of a non-numeric Parquet column takes once it is a Python object (a ``str``
#: holds 49 bytes of header, and a list slot 8): what a dictionary-encoded column of 40 million
#: identical strings, a few hundred KB on disk, would become.
PYTHON_CELL_BYTES = 64

_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _positive_from_environment(variable: str, default: int, *, suffixes: bool) -> int:
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    match = re.fullmatch(r"(\d+)\s*([KMG]?)(?:i?B)?" if suffixes else r"(\d+)()", text, flags=re.IGNORECASE)
    value = int(match.group(1)) * _SUFFIXES[match.group(2).upper()] if match else 0
    if value < 1:
        example = "a number of bytes such as 2147483648 or 2G" if suffixes else "a whole number such as 200"
        raise InvalidInput(f"{variable} must be {example}, got {text!r}")
    return value


def max_decompressed_bytes() -> int:
    """The decompressed-size limit in bytes: ``$WINNOW_MAX_DECOMPRESSED_BYTES`` or 1 GiB.

    >>> max_decompressed_bytes() >= 1
    True
    """
    return _positive_from_environment(MAX_DECOMPRESSED_VARIABLE, DEFAULT_MAX_DECOMPRESSED_BYTES, suffixes=True)


def max_upload_bytes() -> int:
    """The largest upload the browser app accepts, in bytes (``$WINNOW_MAX_UPLOAD_MB``, MB)."""
    return _positive_from_environment(MAX_UPLOAD_VARIABLE, DEFAULT_MAX_UPLOAD_MB, suffixes=False) * 1_000_000


def too_big(
    path: str | os.PathLike[str], what: str, nbytes: int, limit: int, *, column: str | None = None
) -> DataFileError:
    """The one-line error for ``what`` needing ``nbytes`` when at most ``limit`` are accepted."""
    return DataFileError(
        path,
        f"{what} needs {nbytes:,} bytes once loaded; at most {limit:,} are accepted "
        f"(raise the limit with {MAX_DECOMPRESSED_VARIABLE})",
        column=column,
        has_header=False,
    )


def check_decompressed_size(
    path: str | os.PathLike[str], what: str, nbytes: int, limit: int | None = None, *, column: str | None = None
) -> None:
    """Raise :func:`too_big` when ``nbytes`` exceeds ``limit`` (default :func:`max_decompressed_bytes`)."""
    limit = max_decompressed_bytes() if limit is None else limit
    if nbytes > limit:
        raise too_big(path, what, nbytes, limit, column=column)


def check_upload_size(file_name: str, nbytes: int) -> None:
    """Refuse an upload larger than :func:`max_upload_bytes` (the browser's own cap may be off)."""
    limit = max_upload_bytes()
    if nbytes > limit:
        raise DataFileError(
            file_name,
            f"is {nbytes:,} bytes; uploads of at most {limit:,} bytes are accepted "
            f"(import larger files with `winnow import`, or raise {MAX_UPLOAD_VARIABLE})",
        )


def npy_header(handle: IO[bytes], path: str | os.PathLike[str], what: str) -> tuple[tuple[int, ...], np.dtype, int]:
    """Shape, dtype and header length of the ``.npy`` stream ``handle`` (positioned at 0).

    Reads only the header: nothing the header describes is allocated.
    """
    from numpy.lib import format as npy_format

    try:
        version = npy_format.read_magic(handle)
        if version == (1, 0):
            shape, _, dtype = npy_format.read_array_header_1_0(handle)
        elif version in ((2, 0), (3, 0)):
            shape, _, dtype = npy_format.read_array_header_2_0(handle)
        else:
            raise ValueError(f"unsupported .npy version {version}")
    except (ValueError, OSError, EOFError, SyntaxError) as exc:
        raise DataFileError(path, f"{what} is not a valid .npy array ({exc})") from None
    return tuple(int(s) for s in shape), dtype, handle.tell()


def npz_member_shapes(
    path: str | os.PathLike[str], limit: int | None = None
) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """The shape and dtype of every array of an ``.npz`` archive, checked against the limit.

    Nothing is inflated but each member's ``.npy`` header: the sum of the members' declared
    uncompressed sizes must be within ``limit``, and each header's shape x item size must fit in
    its member's declared size (reading stops there, so no member can expand further).

    Raises
    ------
    DataFileError
        Not a zip archive, a member that is not an ``.npy`` array, or sizes over the limit.
    """
    limit = max_decompressed_bytes() if limit is None else limit
    path = Path(path)
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise DataFileError(path, f"is not a valid .npz archive ({exc})") from None
    with archive:
        infos = [info for info in archive.infolist() if not info.is_dir()]
        check_decompressed_size(path, "the archive", sum(info.file_size for info in infos), limit)
        shapes: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
        for info in infos:
            name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            try:
                with archive.open(info) as member:
                    shape, dtype, header = npy_header(member, path, f"array {name!r}")
            except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError) as exc:
                raise DataFileError(
                    path, f"array {name!r} cannot be read ({exc})", column=name, has_header=False
                ) from None
            nbytes = math.prod(shape) * dtype.itemsize
            if nbytes > limit or header + nbytes > info.file_size:
                raise DataFileError(
                    path,
                    f"array {name!r} claims {nbytes:,} bytes but the archive holds "
                    f"{info.file_size:,} for it (limit {limit:,}, {MAX_DECOMPRESSED_VARIABLE})",
                    column=name,
                    has_header=False,
                )
            shapes[name] = (shape, dtype)
    return shapes


def max_json_bytes() -> int:
    """The largest JSON document parsed whole: :func:`max_decompressed_bytes` / :data:`JSON_EXPANSION`.

    >>> max_json_bytes() * JSON_EXPANSION <= max_decompressed_bytes()
    True
    """
    return max_decompressed_bytes() // JSON_EXPANSION


def as_utc(value: datetime) -> datetime:
    """``value`` in UTC (a naive time is taken as UTC).

    Raises
    ------
    ValueError
        The time leaves years 1..9999 once converted (``0001-01-01T00:00:00+14:00``).

    >>> as_utc(datetime(2026, 1, 1, 12)).isoformat()
    '2026-01-01T12:00:00+00:00'
    """
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{value.isoformat()!r} is out of range once converted to UTC (years 1 to 9999)") from None
