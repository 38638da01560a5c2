"""The record a featurizer is stored as, and the checks every featurizer shares.

A fitted featurizer is recorded on its dataset as a :class:`FeaturizerRecord` (a name, JSON
parameters and an ``.npz`` state of plain arrays, no pickle); :data:`STATE_FORMAT` is the layout
version every record carries.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.exceptions import InvalidInput, WinnowError

STATE_FORMAT = 1  # bump when the layout of a record's state changes
_SHOWN = 80  # longest piece of user content quoted in a message


@dataclass(frozen=True)
class FeaturizerRecord:
    """A featurizer as the store keeps it: name, parameters and fitted state, without pickle.

    Attributes
    ----------
    name : str
        ``"tfidf-svd"``, ``"image"``, ``"sentence-transformers"`` or ``"open-clip"``.
    params : dict
        JSON-serialisable parameters (``json.dumps(params)`` works): the constructor's, plus
        ``format`` and, for the built-in featurizers, ``output_dimension``.
    state : bytes
        An ``.npz`` archive of plain arrays (loadable with ``allow_pickle=False``); ``b""`` for
        stateless featurizers.
    """

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    state: bytes = b""


class EmbedderUnavailable(WinnowError, RuntimeError):
    """A model embedder cannot run: its package is not installed or its model directory is absent."""


def row_numbers(rows: Sequence[int] | None, n: int) -> Sequence[int]:
    """The 1-based row number of each input, as the caller counts them."""
    if rows is None:
        return range(1, n + 1)
    if len(rows) != n:
        raise ValueError(f"rows has {len(rows)} entries but there are {n} items")
    return rows


def l2_normalise(Z: np.ndarray) -> np.ndarray:
    """Rows scaled to unit Euclidean norm; all-zero rows stay zero."""
    norms = np.sqrt(np.einsum("ij,ij->i", Z, Z))
    norms[norms == 0.0] = 1.0
    return Z / norms[:, None]


def quoted(text: str) -> str:
    """``text`` as a Python literal for a message, cut to 80 characters (user content is quoted, never trusted)."""
    return repr(text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "...")


def npz_bytes(**arrays: np.ndarray) -> bytes:
    """The arrays as a compressed ``.npz`` archive in memory: the ``state`` of a record."""
    buffer = io.BytesIO()
    # numpy's stub reads a ** mapping as possibly holding allow_pickle (a bool); these are arrays.
    np.savez_compressed(buffer, **arrays)  # type: ignore[arg-type]
    return buffer.getvalue()


def check_int(name: str, value: Any, low: int) -> int:
    """``value`` as an ``int`` of at least ``low``; ``TypeError`` / ``ValueError`` naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < low:
        raise ValueError(f"{name} must be at least {low}, got {value}")
    return int(value)


def check_record(record: FeaturizerRecord, name: str) -> dict[str, Any]:
    """The parameters of a record for featurizer ``name`` in the current :data:`STATE_FORMAT`, ``format`` removed."""
    if not isinstance(record, FeaturizerRecord):
        raise TypeError(f"record must be a FeaturizerRecord, got {type(record).__name__}")
    if record.name != name:
        raise InvalidInput(f"record is for featurizer {record.name!r}, not {name!r}")
    params = dict(record.params)
    version = params.pop("format", None)
    if version != STATE_FORMAT:
        raise InvalidInput(f"record format {version!r} is not supported (this winnow reads format {STATE_FORMAT})")
    return params
