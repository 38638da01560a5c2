"""Validation at the engine's public boundary.

Public functions validate once here and then call private kernels that trust their input.
Messages name the argument, the offending row and the valid choices.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np

from engine.exceptions import InvalidInput

__all__ = ["check_candidates", "check_features", "check_neighbors", "check_scalar"]


def _first_bad_row(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def check_candidates(Y: Any, *, name: str = "Y", n_rows: int | None = None) -> np.ndarray:
    """Return ``Y`` as a C-contiguous bool array of shape (n, M) with no empty row."""
    arr = np.asarray(Y)
    if arr.ndim != 2:
        raise InvalidInput(f"{name} must be a 2-D (n_instances, n_labels) candidate matrix, got shape {arr.shape}")
    if arr.shape[1] == 0:
        raise InvalidInput(f"{name} has no label columns")
    if arr.dtype != bool:
        if arr.dtype.kind not in "iuf" or not np.isin(arr, (0, 1)).all():
            raise InvalidInput(f"{name} must be boolean (or 0/1), got dtype {arr.dtype}")
        arr = arr.astype(bool)
    if n_rows is not None and arr.shape[0] != n_rows:
        raise InvalidInput(f"{name} has {arr.shape[0]} rows but {n_rows} were expected")
    empty = ~arr.any(axis=1)
    if empty.any():
        row = _first_bad_row(empty)
        raise InvalidInput(f"{name} row {row} is an empty candidate set; every instance needs at least one candidate label")
    return np.ascontiguousarray(arr)


def check_features(X: Any, *, name: str = "X") -> np.ndarray:
    """Return ``X`` as a finite float64 array of shape (n, d)."""
    try:
        arr = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{name} must be numeric: {exc}") from None
    if arr.ndim == 1:
        raise InvalidInput(f"{name} must be 2-D (n_instances, n_features), got a 1-D array of length {arr.shape[0]}")
    if arr.ndim != 2:
        raise InvalidInput(f"{name} must be 2-D (n_instances, n_features), got shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise InvalidInput(f"{name} is empty (shape {arr.shape})")
    bad = ~np.isfinite(arr).all(axis=1)
    if bad.any():
        row = _first_bad_row(bad)
        col = int(np.flatnonzero(~np.isfinite(arr[row]))[0])
        raise InvalidInput(f"{name} row {row} column {col} is {arr[row, col]}; features must be finite")
    return arr


def check_neighbors(idx: Any, w: Any, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Validate a neighbourhood graph ``(idx, w)`` against the candidate matrix ``Y``."""
    idx_arr = np.asarray(idx)
    if idx_arr.ndim != 2:
        raise InvalidInput(f"idx must be 2-D (n_targets, k), got shape {idx_arr.shape}")
    if idx_arr.dtype.kind not in "iu":
        raise InvalidInput(f"idx must hold integer row indices, got dtype {idx_arr.dtype}")
    if idx_arr.shape[1] == 0:
        raise InvalidInput("idx has no neighbour columns (k = 0); every target needs at least one neighbour")
    w_arr = np.asarray(w, dtype=np.float64)
    if w_arr.shape != idx_arr.shape:
        raise InvalidInput(f"w has shape {w_arr.shape} but idx has shape {idx_arr.shape}; they must match")
    n = Y.shape[0]
    out_of_range = ((idx_arr < 0) | (idx_arr >= n)).any(axis=1)
    if out_of_range.any():
        row = _first_bad_row(out_of_range)
        raise InvalidInput(f"idx row {row} refers to a training row outside 0..{n - 1}: {idx_arr[row].tolist()}")
    bad_w = (~np.isfinite(w_arr) | (w_arr < 0)).any(axis=1)
    if bad_w.any():
        row = _first_bad_row(bad_w)
        raise InvalidInput(f"w row {row} has a negative, NaN or infinite weight: {w_arr[row].tolist()}")
    return idx_arr.astype(np.intp, copy=False), w_arr


def check_scalar(
    value: Any,
    name: str,
    *,
    kind: type = Real,
    min_value: float | None = None,
    max_value: float | None = None,
    include_min: bool = True,
    include_max: bool = True,
) -> Any:
    """Check a scalar's type and range; ``kind`` is ``numbers.Integral`` or ``numbers.Real``."""
    if isinstance(value, bool) or not isinstance(value, kind):
        expected = "an integer" if kind is Integral else "a number"
        raise TypeError(f"{name} must be {expected}, got {value!r} ({type(value).__name__})")
    if isinstance(value, float) and not np.isfinite(value):
        raise InvalidInput(f"{name} must be finite, got {value!r}")
    if min_value is not None and (value < min_value or (not include_min and value == min_value)):
        op = ">=" if include_min else ">"
        raise InvalidInput(f"{name} must be {op} {min_value}, got {value!r}")
    if max_value is not None and (value > max_value or (not include_max and value == max_value)):
        op = "<=" if include_max else "<"
        raise InvalidInput(f"{name} must be {op} {max_value}, got {value!r}")
    return value
