"""The one exception hierarchy of winnow's engine.

Every error raised on bad user input is an :class:`InvalidInput`, itself a
:class:`ValueError`, so callers that only know the standard library still catch it.
"""

from __future__ import annotations

__all__ = ["WinnowError", "InvalidInput", "SolverError", "NotFittedError"]


class WinnowError(Exception):
    """Base class of every error winnow raises on purpose."""


class InvalidInput(WinnowError, ValueError):
    """An argument has a bad value: the message names the argument and, for arrays, the row."""


class SolverError(WinnowError, RuntimeError):
    """An exact solver could not prove its answer (time limit, unknown status)."""


try:  # scikit-learn's own class, so `except NotFittedError` in user code keeps working.
    from sklearn.exceptions import NotFittedError as _SklearnNotFitted
except ImportError:  # pragma: no cover - scikit-learn is a hard dependency
    _SklearnNotFitted = ValueError  # type: ignore[misc,assignment]


class NotFittedError(WinnowError, _SklearnNotFitted):
    """An estimator was used before ``fit``."""
