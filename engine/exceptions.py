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


class NotFittedError(WinnowError, ValueError, AttributeError):
    """An estimator was used before ``fit``.

    A ``ValueError`` and an ``AttributeError``, as scikit-learn's ``NotFittedError`` is, so
    code written for scikit-learn estimators (``except (ValueError, AttributeError)``, its
    estimator checks) handles it; it does not subclass scikit-learn's class, whose import
    would cost every command line call about a second.
    """
