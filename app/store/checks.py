"""Argument checks shared by the store's writes; each raises :class:`InvalidRecord`.

Every "not one of the valid choices" message of winnow has one wording, the engine's
(:func:`engine.check_choice`): ``"kind must be one of answer, skip; got 'shrug'"``.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from app.dataset_rules import NAME_MAX, text_problem
from app.store.errors import InvalidRecord
from engine import check_choice as engine_check_choice
from engine.exceptions import InvalidInput

__all__ = ["NAME_MAX", "check_name", "check_text", "check_choice", "check_int", "describe_row", "format_label_set"]

# NAME_MAX: the longest name (dataset, session, annotator, label, feature, external id) the
# schema holds; a dataset rule, so that the file readers refuse a long name with its row first.


def check_name(value: Any, parameter: str, *, max_length: int = NAME_MAX) -> str:
    """``value`` stripped; it must be a non-empty ``str`` of at most ``max_length`` characters
    that :func:`app.dataset_rules.text_problem` accepts (no control character, no lone surrogate)."""
    if not isinstance(value, str):
        raise TypeError(f"{parameter} must be a str, got {type(value).__name__}")
    text = value.strip()
    if not text:
        raise InvalidRecord(f"{parameter} is empty")
    if "\x00" in text:  # PostgreSQL text cannot hold it: refuse it on every backend
        raise InvalidRecord(f"{parameter} holds a NUL character: {text[:40]!r}")
    problem = text_problem(text)
    if problem is not None:
        raise InvalidRecord(f"{parameter} {text[:40]!r} {problem}")
    if len(text) > max_length:
        raise InvalidRecord(f"{parameter} {text[:40]!r}... is longer than {max_length} characters")
    return text


def check_text(value: str, parameter: str, *, row: int | None = None, line_breaks: bool = False) -> str:
    """``value`` unchanged when :func:`app.dataset_rules.text_problem` accepts it, else an
    :class:`InvalidRecord` naming ``parameter`` (and the row, counted from 1, when given)."""
    problem = text_problem(value, line_breaks=line_breaks)
    if problem is not None:
        where = f"{parameter}: row {row + 1}" if row is not None else parameter
        raise InvalidRecord(f"{where}: {value[:40]!r} {problem}", row=row)
    return value


def check_choice(value: Any, parameter: str, choices: Sequence[str]) -> str:
    """``value`` when it is one of ``choices``, in the wording of :func:`engine.check_choice`."""
    try:
        return str(engine_check_choice(value, parameter, choices))
    except InvalidInput as exc:
        raise InvalidRecord(str(exc)) from None


def check_int(value: Any, parameter: str) -> int:
    """``value`` as an ``int``; a bool or a non-integral number is a :class:`TypeError`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{parameter} must be an int, got {type(value).__name__} {value!r}")
    return int(value)


def describe_row(position: int, external_ids: Sequence[str] | None) -> str:
    """``"row 4 (external id 'x3')"`` for messages about the instance at ``position``.

    Rows are counted as a person counts them, from 1 (position 0 is row 1); ``.row`` of the
    error keeps the 0-based position for code.

    >>> describe_row(3, ["x0", "x1", "x2", "x3"])
    "row 4 (external id 'x3')"
    """
    if external_ids is not None and 0 <= position < len(external_ids):
        return f"row {position + 1} (external id {external_ids[position]!r})"
    return f"row {position + 1}"


def format_label_set(names: Sequence[str], mask: np.ndarray) -> str:
    """A candidate set in messages: ``{'cat', 'dog'}``."""
    return "{" + ", ".join(repr(names[j]) for j in np.flatnonzero(mask).tolist()) + "}"
