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


def __getattr__(name: str):
    # NotFittedError subclasses scikit-learn's, so `except NotFittedError` in user code keeps
    # working; it is built on first use because importing scikit-learn costs about a second,
    # which every CLI call would otherwise pay.
    if name == "NotFittedError":
        from sklearn.exceptions import NotFittedError as _SklearnNotFitted

        cls = type(
            "NotFittedError",
            (WinnowError, _SklearnNotFitted),
            {"__doc__": "An estimator was used before ``fit``.", "__module__": __name__},
        )
        globals()["NotFittedError"] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
