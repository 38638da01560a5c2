"""Label names and candidate-set cells, as every reader understands them.

``cat|dog``, a JSON list ``["cat", "dog"]`` or integer labels (``3|8``, ``[3, 8]``) are one
candidate set; discovered label names are sorted naturally (``"class2"`` before
``"class10"``). Also the small text helpers every reader's messages use (:func:`quote`,
:func:`listing`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from numbers import Integral
from typing import Any

import numpy as np

from engine.exceptions import InvalidInput

__all__ = [
    "LABEL_SEPARATOR",
    "sort_label_names",
    "parse_candidate_cell",
    "label_from_scalar",
    "is_missing",
    "quote",
    "listing",
    "check_label_names_argument",
]

LABEL_SEPARATOR = "|"


_MAX_LISTED = 12  # how many valid choices an error message quotes before "..."


def sort_label_names(names: Iterable[str]) -> list[str]:
    """Sort label names naturally: all-numeric names by value, otherwise digit runs by value.

    >>> sort_label_names(["10", "9", "2"])
    ['2', '9', '10']
    >>> sort_label_names(["class10", "class2", "bird"])
    ['bird', 'class2', 'class10']
    """
    unique = list(dict.fromkeys(names))
    numbers = []
    for name in unique:
        try:
            value = float(name)
        except ValueError:
            break
        if not math.isfinite(value):
            break
        numbers.append(value)
    else:
        return [n for _, n in sorted(zip(numbers, unique, strict=True), key=lambda pair: (pair[0], pair[1]))]
    return sorted(unique, key=_natural_key)


def _natural_key(name: str) -> tuple:
    parts = re.split(r"(\d+)", name)
    # Even positions are text, odd positions digit runs, so tuples always compare like with like.
    key = tuple(int(p) if i % 2 else p.casefold() for i, p in enumerate(parts))
    return (key, name)


def parse_candidate_cell(cell: Any) -> list[str]:
    """Parse one candidate-set cell into label names (duplicates dropped, order kept).

    Accepts ``"cat|dog"``, a JSON list ``'["cat", "dog"]'`` or ``"[3, 8]"``, an integer, or a
    list/array of strings or integers (Parquet list columns). Whitespace around names is ignored,
    and so are empty pieces of a ``|``-separated cell (``"cat|"``).

    Raises
    ------
    ValueError
        The cell cannot be read as a candidate set; the message says why. An empty set is
        returned as ``[]`` (the caller decides it is an error).
    """
    if cell is None:
        return []
    if isinstance(cell, (bool, np.bool_)):
        raise ValueError(f"{cell!r} is not a label")
    if isinstance(cell, (Integral, float, np.floating)):
        return [label_from_scalar(cell)] if not is_missing(cell) else []
    if isinstance(cell, bytes):
        cell = cell.decode("utf-8", errors="replace")
    if isinstance(cell, str):
        text = cell.strip()
        if not text:
            return []
        if text.startswith("["):
            try:
                items = json.loads(text)
            except (ValueError, RecursionError):
                raise ValueError(f"{quote(text)} starts with '[' but is not a valid JSON list") from None
            if not isinstance(items, list):
                raise ValueError(f"{quote(text)} is not a JSON list")
        else:
            items = [piece for piece in text.split(LABEL_SEPARATOR) if piece.strip()]
    elif isinstance(cell, (list, tuple, np.ndarray)):
        items = list(cell)
    else:
        raise ValueError(f"{quote(cell)} is not a candidate set")
    names = []
    for item in items:
        if isinstance(item, (bool, np.bool_)) or item is None:
            raise ValueError(f"{item!r} in {quote(cell)} is not a label")
        if isinstance(item, str):
            name = item.strip()
        elif isinstance(item, (Integral, float, np.floating)):
            name = label_from_scalar(item)
        else:
            raise ValueError(f"{quote(item)} in {quote(cell)} is not a label name (use strings or integers)")
        if not name:
            raise ValueError(f"{quote(cell)} contains an empty label name")
        if LABEL_SEPARATOR in name:
            raise ValueError(f"label name {quote(name)} contains '|', which separates labels")
        names.append(name)
    return list(dict.fromkeys(names))


def label_from_scalar(value: Any) -> str:
    if isinstance(value, Integral):
        return str(int(value))
    value = float(value)
    if not math.isfinite(value) or value != int(value):
        raise ValueError(f"{value!r} is not a label (labels are names or integers)")
    return str(int(value))


def is_missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, (float, np.floating)):
        return bool(np.isnan(value))
    return False


def quote(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def listing(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_MAX_LISTED])
    return shown + (f", ... ({len(names)} in all)" if len(names) > _MAX_LISTED else "")


def check_label_names_argument(label_names: Sequence[str | int] | None) -> list[str] | None:
    if label_names is None:
        return None
    if isinstance(label_names, (str, bytes)):
        raise TypeError("label_names must be a sequence of names, not a single string")
    names = []
    for item in label_names:
        if isinstance(item, bool) or not isinstance(item, (str, Integral)):
            raise InvalidInput(f"label_names must hold strings or integers, got {item!r}")
        name = str(item).strip()
        if not name or LABEL_SEPARATOR in name:
            raise InvalidInput(f"label_names entry {item!r} is empty or contains '|'")
        names.append(name)
    if not names:
        raise InvalidInput("label_names is empty")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InvalidInput(f"label_names has duplicates: {listing(duplicates)}")
    return names
