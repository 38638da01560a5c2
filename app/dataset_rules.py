"""The rules every partially labelled dataset obeys, written once.

The file readers (:mod:`app.io.readers`) and the store (:mod:`app.store.datasets`) both check
them before anything is written; each phrases the problem for its own caller (file, row and
column for a file; parameter and row for a store write), so these functions only *find* the
first offending row and leave the message to the caller. Pure numpy, no I/O.

Examples
--------
>>> first_repeat(["a", "b", "a"])
(2, 0)
>>> first_repeat(["a", "b"]) is None
True
>>> import numpy as np
>>> first_true_label_outside(np.array([0, -1, 1]), np.array([[1, 0], [1, 1], [1, 0]], dtype=bool))
2
>>> image_shape("image:8x8")
(8, 8)
>>> image_shape("table") is None
True
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable

import numpy as np

__all__ = [
    "NAME_MAX",
    "MAX_LABELS",
    "IMAGE_LAYOUT",
    "first_repeat",
    "first_true_label_outside",
    "image_shape",
    "text_problem",
]

#: Longest name the store holds: dataset, session, annotator, label, feature, item id.
NAME_MAX = 200
#: Most labels a dataset may have (the store's candidate masks hold this many bits).
MAX_LABELS = 1024

#: A drawing hint for a feature row: ``image:<height>x<width>`` (row-major pixels).
IMAGE_LAYOUT = re.compile(r"image:(\d+)x(\d+)")


#: What no stored text may hold: a lone surrogate (it cannot be written as UTF-8, so every
#: export and page showing it would fail) or a control character (C0, DEL, C1: terminal escape
#: sequences, NUL that PostgreSQL refuses). Item texts may hold tabs and line breaks.
_FORBIDDEN_IN_NAMES = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_FORBIDDEN_IN_TEXTS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def text_problem(text: str, *, line_breaks: bool = False) -> str | None:
    r"""What makes ``text`` unfit for the store, or ``None`` when it may be stored.

    The one rule for every text that enters a store (ids, labels, annotators, names; item
    texts with ``line_breaks=True``): valid Unicode that UTF-8 can encode (no lone surrogate)
    and no control character, except tab, line feed and carriage return in item texts. The
    readers and the store word the refusal (file, row and column; parameter and row).

    Parameters
    ----------
    text : str
    line_breaks : bool, default=False
        Whether tab, line feed and carriage return are allowed (item texts).

    Returns
    -------
    str or None
        E.g. ``"holds the control character U+001B at character 1"``.

    Examples
    --------
    >>> text_problem("cat") is None
    True
    >>> text_problem("\x1b[31mred")
    'holds the control character U+001B at character 1'
    >>> text_problem("a\udfff")
    'holds a lone surrogate (U+DFFF) at character 2, which is not valid Unicode text'
    >>> text_problem("line one\nline two", line_breaks=True) is None
    True
    """
    found = (_FORBIDDEN_IN_TEXTS if line_breaks else _FORBIDDEN_IN_NAMES).search(text)
    if found is None:
        return None
    code = ord(found.group())
    where = f"at character {found.start() + 1}"
    if 0xD800 <= code <= 0xDFFF:
        return f"holds a lone surrogate (U+{code:04X}) {where}, which is not valid Unicode text"
    return f"holds the control character U+{code:04X} {where}"


def first_repeat(values: Iterable[Hashable]) -> tuple[int, int] | None:
    """The first value that repeats an earlier one, as ``(position, earlier position)``.

    Parameters
    ----------
    values : iterable of hashable
        E.g. the instance ids of a dataset, in row order.

    Returns
    -------
    tuple of (int, int) or None
        0-based positions of the repeat and of the value's first occurrence; ``None`` when
        every value is distinct.
    """
    seen: dict[Hashable, int] = {}
    for position, value in enumerate(values):
        earlier = seen.setdefault(value, position)
        if earlier != position:
            return position, earlier
    return None


def first_true_label_outside(true_labels: np.ndarray, candidates: np.ndarray) -> int | None:
    """The first row whose known true label is not in its candidate set.

    Parameters
    ----------
    true_labels : int array of shape (n_instances,)
        Label indices in ``[0, n_labels)``, ``-1`` where unknown.
    candidates : bool array of shape (n_instances, n_labels)

    Returns
    -------
    int or None
        0-based row, or ``None`` when every known true label is a candidate.
    """
    rows = np.flatnonzero(true_labels >= 0)
    outside = ~candidates[rows, true_labels[rows]]
    return int(rows[np.argmax(outside)]) if outside.any() else None


def image_shape(layout: str | None, n_features: int | None = None) -> tuple[int, int] | None:
    """``(height, width)`` of an ``"image:HxW"`` layout, else ``None``.

    Parameters
    ----------
    layout : str or None
    n_features : int, optional
        When given, a layout whose ``H * W`` differs from it is ``None`` too.
    """
    match = IMAGE_LAYOUT.fullmatch(layout or "")
    if match is None:
        return None
    height, width = int(match.group(1)), int(match.group(2))
    if n_features is not None and height * width != n_features:
        return None
    return height, width
