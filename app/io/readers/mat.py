"""MATLAB 5/7 MAT-files, the format of the PLL benchmarks.

``data`` (n x d), ``partial_target`` (q x n, 1 where a label is a candidate), optional
``target`` (q x n one-hot true label). The element structure is walked and checked before
scipy reads it: scipy's compiled reader can crash the process on a corrupt element.
"""

from __future__ import annotations

import io
import math
import os
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from app.io.errors import DataFileError
from app.io.limits import MAX_DECOMPRESSED_VARIABLE, check_decompressed_size, max_decompressed_bytes, too_big
from app.io.readers.checks import (
    LoadedDataset,
    check_feature_matrix,
    check_store_limits,
    check_true_in_candidates,
    check_zero_one,
    first_line,
    names_for_columns,
    reject_binary_magic,
)
from app.io.readers.labels import listing

__all__ = ["read_mat"]


def read_mat(file: Path, head: bytes, label_names: list[str] | None) -> LoadedDataset:
    import scipy.io
    import scipy.sparse

    if head.startswith(b"MATLAB 7.3") or head.startswith(b"\x89HDF") or head[512:516] == b"\x89HDF":
        raise DataFileError(file, "is a MATLAB v7.3 (HDF5) file; re-save it in MATLAB with save(..., '-v7')")
    if len(head) < 128 or head[126:128] not in (b"IM", b"MI"):
        reject_binary_magic(file, head, expected="MATLAB")
        raise DataFileError(file, "is not a MATLAB 5/7 MAT-file (no MAT-file header)")
    # scipy's compiled MAT reader can crash the whole process on a corrupt element (an unknown
    # data type code indexes past a table), so the element structure is checked here first.
    raw = file.read_bytes()
    limit = max_decompressed_bytes()
    try:
        _check_mat5_structure(file, raw, wanted=_MAT_VARIABLES, limit=limit)
    except _CorruptMat as exc:
        raise DataFileError(file, f"is not a readable MAT-file: {exc}") from None
    try:
        contents = scipy.io.loadmat(io.BytesIO(raw), variable_names=list(_MAT_VARIABLES))
    except Exception as exc:  # scipy raises many types on corrupt input; report, never leak
        raise DataFileError(file, f"is not a readable MAT-file: {first_line(exc)}") from None
    keys = sorted(k for k in contents if not k.startswith("__"))
    for key in ("data", "partial_target"):
        if key not in contents:
            raise DataFileError(
                file,
                f"has no variable {key!r}; a PLL MAT-file needs 'data' (n x d) and 'partial_target' (q x n) "
                f"(variables: {listing(keys) or 'none'})",
            )

    def dense(key: str) -> np.ndarray:
        value = contents[key]
        if scipy.sparse.issparse(value):
            # Never densify beyond the limit: a few kB of non-zeros can describe a matrix of
            # gigabytes.
            rows, cols = value.shape
            check_decompressed_size(
                file, f"the sparse {rows}x{cols} matrix made dense", rows * cols * 8, limit, column=key
            )
        try:
            if scipy.sparse.issparse(value):
                value.check_format(full_check=True)  # bad indices would be read out of bounds
                value = value.toarray()
            arr = np.asarray(value)
        except Exception as exc:  # corrupt sparse structure, absurd shapes
            raise DataFileError(file, f"cannot be read: {first_line(exc)}", column=key, has_header=False) from None
        if arr.dtype.kind not in "biuf" or arr.ndim != 2:
            raise DataFileError(
                file,
                f"must be a 2-D numeric matrix, got {arr.dtype} of shape {arr.shape}",
                column=key,
                has_header=False,
            )
        return arr

    X = check_feature_matrix(file, dense("data"), "data")
    n = X.shape[0]
    partial = dense("partial_target")
    if partial.shape[1] == n:
        partial = partial.T
    elif partial.shape[0] != n:
        raise DataFileError(
            file,
            f"has shape {partial.shape} but 'data' has {n} rows; expected (q, {n})",
            column="partial_target",
            has_header=False,
        )
    candidates = check_zero_one(file, partial, "partial_target")
    target = None
    if "target" in contents:
        target = dense("target")
        if target.shape == (candidates.shape[1], n) and target.shape != candidates.shape:
            target = target.T
        if target.shape != candidates.shape:
            raise DataFileError(
                file,
                f"has shape {target.shape}, which does not match 'partial_target'",
                column="target",
                has_header=False,
            )
        target = check_zero_one(file, target, "target", allow_empty=True)
    q = candidates.shape[1]
    names = names_for_columns(file, label_names, [str(j) for j in range(1, q + 1)], q, "partial_target")
    true_labels = _true_labels_from_one_hot(file, target, candidates) if target is not None else None
    feature_names = [f"feature_{j}" for j in range(X.shape[1])]
    dataset = LoadedDataset(
        X, candidates, names, [str(i) for i in range(n)], true_labels, feature_names, None, os.fspath(file)
    )
    check_store_limits(
        file,
        dataset,
        rows=range(1, n + 1),
        has_header=False,
        id_column=None,
        labels_column="partial_target",
        feature_columns=False,
    )
    return dataset


_MAT_VARIABLES = ("data", "partial_target", "target")


_MI_NUMERIC = {1: 1, 2: 1, 3: 2, 4: 2, 5: 4, 6: 4, 7: 4, 9: 8, 12: 8, 13: 8}  # mi type -> item size


_MI_INT8, _MI_INT32, _MI_UINT32, _MI_MATRIX, _MI_COMPRESSED = 1, 5, 6, 14, 15


_MX_SPARSE, _MX_NUMERIC = 5, range(6, 16)


class _CorruptMat(Exception):
    """Internal: the MAT-file's element structure is inconsistent (converted to DataFileError)."""


#: Inflated bytes produced per step while a compressed element is checked: what the check holds
#: in memory at once, whatever the element inflates to.
_INFLATE_STEP = 1 << 20

#: Longest variable name or dimension list a check reads (MATLAB names have at most 63
#: characters; a claim of more is corrupt, and must not make the check allocate it).
_MAX_HEADER_PART = 4096


class _Bytes:
    """The bytes of an uncompressed part of the file, read by absolute offset."""

    def __init__(self, raw: bytes) -> None:
        self._raw = raw

    def at(self, pos: int, n: int) -> bytes:
        chunk = self._raw[pos : pos + n]
        if len(chunk) != n:
            raise _CorruptMat(f"truncated element at byte {pos}")
        return chunk


class _Inflating:
    """The inflated bytes of one compressed element, read forward only.

    Only the bytes asked for are kept; those before are dropped as reading moves on, and the
    stream is inflated :data:`_INFLATE_STEP` bytes at a time, so memory stays bounded while the
    inflated size is counted against ``limit`` *during* decompression. (Inflating the whole
    element first, even with ``max_length=limit``, allocated up to the limit -- 1 GiB by default
    -- for a 1 MB file, before scipy inflated it again.)
    """

    def __init__(self, file: Path, compressed: memoryview, offset: int, limit: int) -> None:
        self._file, self._offset, self._limit = file, offset, limit
        self._compressed = compressed
        self._read = 0
        self._inflater = zlib.decompressobj()
        self._window = bytearray()
        self._base = 0  # offset of _window[0] in the inflated stream
        self.size = 0  # inflated so far

    def _step(self) -> bool:
        """Inflate the next step; ``False`` at the end of the stream."""
        if self._inflater.eof:
            return False
        data: bytes | memoryview
        if self._inflater.unconsumed_tail:
            data = self._inflater.unconsumed_tail
        else:
            data = self._compressed[self._read : self._read + _INFLATE_STEP]
            self._read += len(data)
            if not data:
                return False
        try:
            out = self._inflater.decompress(data, _INFLATE_STEP)
        except zlib.error as exc:
            raise _CorruptMat(f"compressed element at byte {self._offset}: {exc}") from None
        self.size += len(out)
        if self.size > self._limit:
            raise DataFileError(
                self._file,
                f"the compressed element at byte {self._offset} inflates to more than {self._limit:,} bytes "
                f"(raise the limit with {MAX_DECOMPRESSED_VARIABLE})",
            )
        self._window += out
        return True

    def at(self, pos: int, n: int) -> bytes:
        if pos < self._base:
            raise _CorruptMat(f"compressed element at byte {self._offset}: elements overlap")
        while self._base + len(self._window) < pos + n and self._step():
            pass
        del self._window[: pos - self._base]
        self._base = pos
        if len(self._window) < n:
            raise _CorruptMat(f"truncated element in the compressed element at byte {self._offset}")
        return bytes(self._window[:n])

    def finish(self) -> int:
        """Inflate (and drop) the rest; return the inflated size."""
        self._window.clear()
        while self._step():
            self._base += len(self._window)
            self._window.clear()
        return self.size


def _check_mat5_structure(file: Path, raw: bytes, *, wanted: Sequence[str], limit: int) -> None:
    """Walk the data elements of a MAT 5 file and check every tag that scipy would trust.

    Checks every top-level element (inflating compressed ones a step at a time, never holding
    more than the parts read), every variable's flags, dims and name, and for the ``wanted``
    variables that the data parts have a numeric type code and exactly the byte count their
    dimensions need. Raises ``_CorruptMat`` on the first problem, :class:`DataFileError` when
    the wanted variables would need more than ``limit`` bytes (their dense size, or a sparse
    one's parts) or a compressed element inflates to more than ``limit`` bytes.
    """
    endian = "<" if raw[126:128] == b"IM" else ">"

    def tag(buf: _Bytes | _Inflating, pos: int, end: int) -> tuple[int, int, int, int]:
        if pos + 8 > end:
            raise _CorruptMat(f"truncated element at byte {pos}")
        head = buf.at(pos, 8)
        first, second = struct.unpack(endian + "II", head)
        if first >> 16:  # small data element: type and size packed in 4 bytes, data in the next 4
            mdtype, nbytes, start = first & 0xFFFF, first >> 16, pos + 4
            if nbytes > 4:
                raise _CorruptMat(f"bad small element at byte {pos}")
            return mdtype, nbytes, start, pos + 8
        start = pos + 8
        if start + second > end:
            raise _CorruptMat(f"element at byte {pos} claims {second} bytes beyond the end")
        return first, second, start, start + second + (-second % 8)

    def header_part(buf: _Bytes | _Inflating, data: int, nbytes: int, what: str) -> bytes:
        if nbytes > _MAX_HEADER_PART:
            raise _CorruptMat(f"variable with a {nbytes}-byte {what}")
        return buf.at(data, nbytes)

    def matrix(buf: _Bytes | _Inflating, start: int, end: int) -> None:
        if start == end:
            return  # empty matrix
        mdtype, nbytes, data, pos = tag(buf, start, end)
        if mdtype != _MI_UINT32 or nbytes != 8:
            raise _CorruptMat("variable without array flags")
        flags = struct.unpack(endian + "I", buf.at(data, 4))[0]
        mx_class, is_complex = flags & 0xFF, bool(flags & 0x800)
        mdtype, nbytes, data, pos = tag(buf, pos, end)
        if mdtype != _MI_INT32 or nbytes % 4 or nbytes < 8:
            raise _CorruptMat("variable without valid dimensions")
        dims = struct.unpack(endian + f"{nbytes // 4}i", header_part(buf, data, nbytes, "dimension list"))
        if min(dims) < 0:
            raise _CorruptMat(f"negative dimension {dims}")
        mdtype, nbytes, data, pos = tag(buf, pos, end)
        if mdtype != _MI_INT8:
            raise _CorruptMat("variable without a name")
        name = header_part(buf, data, nbytes, "name").decode("latin-1")
        if name not in wanted:
            return  # scipy skips the body of variables it was not asked for
        if mx_class == _MX_SPARSE:
            parts = 3 + is_complex  # ir, jc, real part, imaginary part
        elif mx_class in _MX_NUMERIC:
            parts = 1 + is_complex
        else:
            raise _CorruptMat(f"variable {name!r} is not a numeric matrix (MATLAB class {mx_class})")
        count = math.prod(dims)
        if mx_class in _MX_NUMERIC:
            needed[0] += count * 8 * parts  # read back as float64 by check_feature_matrix
            if needed[0] > limit:
                raise too_big(
                    file, f"variable {name!r} of size {'x'.join(map(str, dims))}", needed[0], limit, column=name
                )
        for _ in range(parts):
            mdtype, nbytes, data, pos = tag(buf, pos, end)
            size = _MI_NUMERIC.get(mdtype)
            if size is None:
                raise _CorruptMat(f"variable {name!r} has data of unknown type code {mdtype}")
            if mx_class in _MX_NUMERIC and nbytes != count * size:
                raise _CorruptMat(f"variable {name!r} holds {nbytes} bytes but its size {dims} needs {count * size}")
            if mx_class == _MX_SPARSE and nbytes % size:
                raise _CorruptMat(f"variable {name!r} has a truncated sparse part")
            if mx_class == _MX_SPARSE:
                needed[0] += nbytes // size * 8
                if needed[0] > limit:
                    raise too_big(file, f"sparse variable {name!r}", needed[0], limit, column=name)

    needed = [0]  # bytes the wanted variables take once read, summed over the file
    if len(raw) < 128:
        raise _CorruptMat("shorter than a MAT-file header")
    whole = _Bytes(raw)
    pos, end = 128, len(raw)
    while pos < end:
        if end - pos < 8 and not raw[pos:].strip(b"\x00"):
            break  # trailing padding
        mdtype, nbytes, data, pos_next = tag(whole, pos, end)
        if mdtype == _MI_COMPRESSED:
            inner = _Inflating(file, memoryview(raw)[data : data + nbytes], pos, limit)
            # The inner element's declared end is checked against what it inflates to, at the end
            # (inflating stops at the limit): a variable too big is named by its size first.
            inner_type, inner_bytes, inner_data, _ = tag(inner, 0, 1 << 64)
            if inner_type != _MI_MATRIX:
                raise _CorruptMat(f"compressed element at byte {pos} does not hold a variable")
            matrix(inner, inner_data, inner_data + inner_bytes)
            if inner.finish() < inner_data + inner_bytes:
                raise _CorruptMat(f"compressed element at byte {pos} holds less than its variable claims")
            pos = data + nbytes  # compressed elements are not padded
        elif mdtype == _MI_MATRIX:
            matrix(whole, data, data + nbytes)
            pos = pos_next
        else:
            raise _CorruptMat(f"unexpected element type {mdtype} at byte {pos}")


def _true_labels_from_one_hot(file: Path, target: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    counts = target.sum(axis=1)
    if (counts > 1).any():
        i = int(np.flatnonzero(counts > 1)[0])
        raise DataFileError(
            file,
            f"has {int(counts[i])} true labels for one item; 'target' must be one-hot",
            row=i + 1,
            column="target",
            has_header=False,
        )
    true_labels = np.where(counts == 1, target.argmax(axis=1), -1).astype(np.int64)
    names = [str(j) for j in range(1, candidates.shape[1] + 1)]
    check_true_in_candidates(file, true_labels, candidates, names, "target")
    return true_labels
