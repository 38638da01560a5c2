"""Working-state snapshots of sessions: the arrays a session at work derived, kept for the next process.

A session at work derives, from its event log and its dataset's neighbour graph, the ranker's
arrays, the candidate sets they were computed from and the suspect scores. At 1M items that
is seconds of scoring that every command (``session status``, ``export``, ``answer``) paid
again. The service layer (:mod:`app.service.working_state`) saves them here and reads them
back; this module only stores and checks bytes.

What makes a snapshot trustworthy, and what does not:

* every array is one :class:`~app.store.models.SessionSnapshotPart` row (``.npy`` bytes, no
  pickle), or, past :data:`PIECE_BYTES`, several rows holding slices of its first axis
  (``name#0000``, ``name#0001``, …); rows are written and read one at a time, so that a writer
  or a reader holds at most one piece's bytes besides the arrays (at 1M items a whole part was
  160 MB, and its bytes with the database driver's copy of them made the peak of the first
  ``rank``);
* all the parts of one snapshot are written in one transaction and carry the same random
  ``token``: a reader that finds two tokens (parts of two writes) gets no snapshot;
* ``digest`` (a CRC-32 of the bytes, ``crc32:`` and 8 hex digits; the SHA-256 in parts
  written before) is checked on every read: a part whose bytes changed is reported, and the
  caller rebuilds. A checksum, not a cryptographic hash, is what this check needs: it is
  against damaged bytes (any change of up to 32 consecutive bits, and all but one in 2³² of
  the others), not against someone who can write the store, and it reads 546 MB at 1M items
  in a third of SHA-256's time. Another session's or graph's snapshot, or parts of two writes,
  are told apart by the header and the token, not by the digest;
* the format version, the identity (graph and parameters) and the last event id are the caller's to check (a
  snapshot of another graph, or one ahead of the event log, is not this session's state).

A snapshot is never the only copy of anything: the event log stays the truth, and dropping
every row loses nothing but time.
"""

from __future__ import annotations

import hashlib
import io
import math
import secrets
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.store.checks import check_int
from app.store.models import SessionSnapshotPart

__all__ = [
    "SnapshotHeader",
    "StoredSnapshot",
    "encode_array",
    "decode_array",
    "save_session_snapshot",
    "load_session_snapshot",
    "drop_session_snapshot",
    "part_digest",
    "digest_matches",
    "PIECE_BYTES",
]

#: An array of more bytes than this is stored in pieces, slices of its first axis of at most
#: this many bytes each (module docstring).
PIECE_BYTES = 16 * 2**20

#: Between an array's name and the number of one of its pieces.
_PIECE_MARK = "#"

#: More than any .npy header numpy reads (its limit is 10,000 bytes).
_HEADER_MAX = 1 << 16

#: How a part's digest starts when it is a CRC-32 (:func:`part_digest`).
_CRC32 = "crc32:"


def part_digest(data: bytes) -> str:
    """The digest a part of ``data`` is written with: its CRC-32.

    >>> part_digest(b"winnow")
    'crc32:86737c0b'
    """
    return f"{_CRC32}{zlib.crc32(data):08x}"


def digest_matches(data: bytes, digest: str) -> bool:
    """Whether ``data`` has ``digest``: a CRC-32 (:func:`part_digest`), or the SHA-256 hex of
    parts written before (read as they are, not rebuilt for it)."""
    if digest.startswith(_CRC32):
        return part_digest(data) == digest
    return hashlib.sha256(data).hexdigest() == digest


@dataclass(frozen=True)
class SnapshotHeader:
    """What a snapshot says it is: checked by the reader before any array is used."""

    format_version: int
    #: What the arrays were computed for (the caller's hash of the graph and of the parameters).
    identity: str
    #: The largest event id of the log the arrays were derived from.
    last_event_id: int


@dataclass(frozen=True)
class StoredSnapshot:
    """A snapshot read back: its header and its arrays by name."""

    header: SnapshotHeader
    arrays: dict[str, np.ndarray]


def encode_array(array: np.ndarray) -> bytes:
    """The ``.npy`` bytes of ``array`` (no pickle: object arrays are refused).

    >>> decode_array(encode_array(np.arange(3))).tolist()
    [0, 1, 2]
    """
    if array.dtype.hasobject:
        raise TypeError("object arrays are not stored in snapshots")
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def _pieces(arrays: dict[str, np.ndarray]) -> Iterator[tuple[str, np.ndarray]]:
    """The rows to write: each array whole, or in numbered slices past :data:`PIECE_BYTES`."""
    for name, array in arrays.items():
        if array.ndim == 0 or array.nbytes <= PIECE_BYTES:
            yield name, array
            continue
        per_piece = max(1, PIECE_BYTES // max(1, array[:1].nbytes))
        for number, start in enumerate(range(0, array.shape[0], per_piece)):
            yield f"{name}{_PIECE_MARK}{number:04d}", array[start : start + per_piece]


def decode_array(data: bytes, *, copy: bool = True) -> np.ndarray:
    """The array of ``.npy`` bytes, writable (a copy of the bytes), never unpickled; with
    ``copy=False``, a read-only view of ``data``.

    The header is read by numpy's ``.npy`` functions and the data copied once from the
    bytes: ``numpy.load`` on a stream copies them in chunks through the stream, 1.4 s for
    the 546 MB of a snapshot at 1M items against a fifth of that.

    Raises ``ValueError`` when the bytes are not an ``.npy`` array of plain numbers.

    >>> decode_array(encode_array(np.array([[1.5, 2.0]]).T)).tolist()
    [[1.5], [2.0]]
    """
    view = memoryview(data)
    stream = io.BytesIO(view[:_HEADER_MAX])  # the header only: the data is copied once, below
    version = np.lib.format.read_magic(stream)
    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    if version not in readers:
        raise ValueError(f".npy format version {version} is not 1.0 or 2.0")
    shape, fortran, dtype = readers[version](stream, max_header_size=_HEADER_MAX)
    if dtype.hasobject:
        raise ValueError("object arrays are not read from snapshots")
    count = math.prod(shape)
    offset = stream.tell()
    if len(view) - offset != count * dtype.itemsize:
        raise ValueError(f"{len(view) - offset} bytes of data for {count} values of {dtype.str}")
    flat = np.frombuffer(view, dtype=dtype, count=count, offset=offset)
    array = flat.reshape(shape[::-1]).T if fortran else flat.reshape(shape)
    return array.copy(order="K") if copy else array


def save_session_snapshot(
    session: Session, session_id: int, header: SnapshotHeader, arrays: dict[str, np.ndarray]
) -> None:
    """Replace the session's snapshot by ``arrays`` (in the caller's transaction).

    Every part gets the same fresh token, so a reader never mixes the parts of two writes.
    """
    check_int(session_id, "session_id")
    token = secrets.token_hex(16)
    session.execute(delete(SessionSnapshotPart).where(SessionSnapshotPart.session_id == session_id))
    for name, array in _pieces(arrays):
        data = encode_array(array)
        session.add(
            SessionSnapshotPart(
                session_id=session_id,
                name=name,
                token=token,
                format_version=int(header.format_version),
                identity=header.identity,
                last_event_id=int(header.last_event_id),
                digest=part_digest(data),
                data=data,
            )
        )
        # Written part by part: the session holds at most one part's bytes besides the arrays.
        session.flush()
        session.expunge_all()


def _joined(numbered: dict[int, np.ndarray]) -> np.ndarray | None:
    """The array whose pieces are ``numbered`` (a writable copy), or None when a piece is
    missing or they do not make one array (another shape or kind)."""
    if sorted(numbered) != list(range(len(numbered))):
        return None
    parts = [numbered[number] for number in range(len(numbered))]
    if any(p.shape[1:] != parts[0].shape[1:] or p.dtype != parts[0].dtype for p in parts):
        return None
    return np.concatenate(parts)


def drop_session_snapshot(session: Session, session_id: int) -> None:
    """Delete the session's snapshot (in the caller's transaction)."""
    session.execute(delete(SessionSnapshotPart).where(SessionSnapshotPart.session_id == session_id))


def load_session_snapshot(session: Session, session_id: int) -> StoredSnapshot | None:
    """The session's snapshot, or ``None`` when it has none or it cannot be trusted.

    ``None`` also when the parts disagree on their token or header (two writes mixed), when a
    part's bytes do not match its digest (the store's bytes changed), when a part is not a
    plain ``.npy`` array, or when an array's pieces are missing or do not fit together. The
    caller rebuilds and saves a new one then.
    """
    columns = (
        SessionSnapshotPart.token,
        SessionSnapshotPart.format_version,
        SessionSnapshotPart.identity,
        SessionSnapshotPart.last_event_id,
    )
    rows = session.execute(
        select(*columns, SessionSnapshotPart.name, SessionSnapshotPart.digest, SessionSnapshotPart.data)
        .where(SessionSnapshotPart.session_id == session_id)
        .execution_options(yield_per=1)  # one part's bytes at a time besides the arrays
    )
    written: tuple[Any, ...] | None = None  # the first part's token and header
    arrays: dict[str, np.ndarray] = {}
    pieces: dict[str, dict[int, np.ndarray]] = {}  # read-only views of the pieces' bytes
    with rows:
        for row in rows:
            written = tuple(row[: len(columns)]) if written is None else written
            if tuple(row[: len(columns)]) != written:
                return None
            if row.data is None or not digest_matches(row.data, row.digest):
                return None
            name, mark, number = str(row.name).partition(_PIECE_MARK)
            if mark and not number.isdigit():
                return None
            try:
                array = decode_array(bytes(row.data), copy=not mark)
            except ValueError:
                return None
            if mark:
                pieces.setdefault(name, {})[int(number)] = array
            else:
                arrays[name] = array
            del row, array
    for name, numbered in pieces.items():
        joined = _joined(numbered)
        if joined is None or name in arrays:
            return None
        arrays[name] = joined
        numbered.clear()
    if written is None:
        return None
    _, version, identity, last_event_id = written
    header = SnapshotHeader(int(version), str(identity), int(last_event_id))
    return StoredSnapshot(header, arrays)
