"""Validation at the engine's public boundary.

Public functions validate once here and then call private kernels that trust their input.
Messages name the argument, the offending row and the valid choices.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from numbers import Integral, Real
from typing import Any

import numpy as np
import numpy.typing as npt

from engine import exceptions
from engine.exceptions import InvalidInput

__all__ = [
    "check_level",
    "check_count",
    "check_candidates",
    "check_choice",
    "check_features",
    "check_graph",
    "check_labels",
    "check_neighbors",
    "check_scalar",
    "check_is_fitted",
    "check_n_features",
    "check_query",
    "check_training_data",
]


def _first_bad_row(mask: npt.ArrayLike) -> int:
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
        raise InvalidInput(
            f"{name} row {row} is an empty candidate set; every instance needs at least one candidate label"
        )
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


def check_graph(idx: Any, n_instances: int, *, n_rows: int | None = None, name: str = "idx") -> np.ndarray:
    """Return a neighbour graph ``idx`` as an intp array of shape (n_targets, k), k ≥ 1.

    Every entry must be a training row in ``0..n_instances-1``; ``n_rows`` fixes the number
    of targets when the graph has one row per training row.
    """
    arr = np.asarray(idx)
    if arr.ndim != 2:
        raise InvalidInput(f"{name} must be 2-D (n_targets, k), got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        raise InvalidInput(f"{name} must hold integer row indices, got dtype {arr.dtype}")
    if arr.shape[1] == 0:
        raise InvalidInput(f"{name} has no neighbour columns (k = 0); every target needs at least one neighbour")
    if n_rows is not None and arr.shape[0] != n_rows:
        raise InvalidInput(f"{name} has {arr.shape[0]} rows but {n_rows} were expected, one per training row")
    out_of_range = ((arr < 0) | (arr >= n_instances)).any(axis=1)
    if out_of_range.any():
        row = _first_bad_row(out_of_range)
        raise InvalidInput(
            f"{name} row {row} refers to a training row outside 0..{n_instances - 1}: {arr[row].tolist()}"
        )
    return arr.astype(np.intp, copy=False)


def check_labels(
    y: Any, *, n_labels: int | None = None, n_rows: int | None = None, name: str = "y"
) -> tuple[np.ndarray, int]:
    """Return true labels ``y`` as an intp array of shape (n,) and the number of labels.

    Labels are ``0..n_labels-1`` (``n_labels`` defaults to ``max(y) + 1``); integral floats
    are accepted, NaN, fractions, booleans and negative values are not (``-1``, "unknown"
    elsewhere, is refused: these functions need every label).
    """
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise InvalidInput(f"{name} must be a 1-D array of integer labels, got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise InvalidInput(f"{name} is empty")
    if n_rows is not None and arr.shape[0] != n_rows:
        raise InvalidInput(f"{name} has {arr.shape[0]} labels but {n_rows} were expected")
    if arr.dtype == bool or arr.dtype.kind not in "iuf":
        raise InvalidInput(f"{name} must hold integer labels, got dtype {arr.dtype}")
    if arr.dtype.kind == "f" and not (np.isfinite(arr).all() and (arr == np.round(arr)).all()):
        raise InvalidInput(f"{name} must hold integer labels, got non-integer floats")
    arr = arr.astype(np.intp)
    if n_labels is None:
        n_labels = int(arr.max()) + 1
    else:
        check_scalar(n_labels, "n_labels", kind=Integral, min_value=1)
        n_labels = int(n_labels)
    bad = (arr < 0) | (arr >= n_labels)
    if bad.any():
        row = _first_bad_row(bad)
        raise InvalidInput(f"{name}[{row}] = {arr[row]} is not a known label in 0..{max(n_labels - 1, 0)}")
    return arr, n_labels


def check_neighbors(idx: Any, w: Any, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Validate a neighbourhood graph ``(idx, w)`` against the candidate matrix ``Y``."""
    idx_arr = check_graph(idx, Y.shape[0])
    w_arr = np.asarray(w, dtype=np.float64)
    if w_arr.shape != idx_arr.shape:
        raise InvalidInput(f"w has shape {w_arr.shape} but idx has shape {idx_arr.shape}; they must match")
    bad_w = (~np.isfinite(w_arr) | (w_arr < 0)).any(axis=1)
    if bad_w.any():
        row = _first_bad_row(bad_w)
        raise InvalidInput(f"w row {row} has a negative, NaN or infinite weight: {w_arr[row].tolist()}")
    return idx_arr, w_arr


def check_scalar(
    value: Any,
    name: str,
    *,
    kind: type[Any] = Real,
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


def check_level(value: Any, name: str) -> float:
    """A probability strictly between 0 and 1 (a target error, a confidence, a miscoverage)."""
    check_scalar(value, name, kind=Real, min_value=0.0, max_value=1.0, include_min=False, include_max=False)
    return float(value)


def check_count(value: Any, name: str) -> int:
    """A count: an integer ``>= 0``."""
    check_scalar(value, name, kind=Integral, min_value=0)
    return int(value)


def check_choice(value: Any, name: str, choices: Iterable[Any]) -> Any:
    """Return ``value`` when it is one of ``choices``; raise :class:`InvalidInput` otherwise.

    The one wording every engine function uses for a bad choice:
    ``"{name} must be one of a, b, c; got 'x'"``. A value matches only a choice of the same
    kind (``1`` is not ``True``, ``"1"`` is not ``1``; a ``numpy.str_`` is a ``str``).

    Parameters
    ----------
    value : object
        What the caller passed.
    name : str
        The parameter (or option) name to show.
    choices : iterable
        The valid values, in the order to list them.

    Returns
    -------
    value : object
        ``value`` unchanged.

    Examples
    --------
    >>> check_choice("pl", "criterion", ("apl", "pl"))
    'pl'
    >>> check_choice("entropy", "criterion", ("apl", "pl"))
    Traceback (most recent call last):
        ...
    engine.exceptions.InvalidInput: criterion must be one of apl, pl; got 'entropy'
    """
    valid = tuple(choices)
    if isinstance(value, Hashable) and any(_same_choice(value, c) for c in valid):
        return value
    raise InvalidInput(f"{name} must be one of {', '.join(map(str, valid))}; got {value!r}")


def _same_choice(value: Any, choice: Any) -> bool:
    # Compare only like with like: a str with a str, a bool with a bool.
    for kind in (str, bool):
        if isinstance(value, kind) != isinstance(choice, kind):
            return False
    return bool(value == choice)


# --------------------------------------------------------------------------- estimators


def check_is_fitted(estimator: Any, attribute: str) -> None:
    """Raise :class:`~engine.exceptions.NotFittedError` unless ``estimator`` has ``attribute`` (set by ``fit``)."""
    if not hasattr(estimator, attribute):
        raise exceptions.NotFittedError(
            f"This {type(estimator).__name__} instance is not fitted yet; call fit before using it"
        )


def check_n_features(estimator: Any, X: np.ndarray) -> None:
    """``X`` has as many columns as the data ``estimator`` was fitted on (``n_features_in_``)."""
    if X.shape[1] != estimator.n_features_in_:
        raise InvalidInput(
            f"X has {X.shape[1]} features but {type(estimator).__name__} was fitted with {estimator.n_features_in_}"
        )


def check_query(estimator: Any, X: Any, *, attribute: str) -> np.ndarray:
    """Validate the query points of a fitted estimator: fitted, finite, the fitted number of features."""
    check_is_fitted(estimator, attribute)
    checked = check_features(X, name="X")
    check_n_features(estimator, checked)
    return checked


def check_training_data(X: Any, Y: Any) -> tuple[np.ndarray, np.ndarray]:
    """Validate a training pair: finite ``X`` (n, d) and a candidate matrix ``Y`` (n, M)."""
    X = check_features(X, name="X")
    return X, check_candidates(Y, name="Y", n_rows=X.shape[0])
