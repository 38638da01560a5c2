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

__all__ = ["NAME_MAX", "MAX_LABELS", "IMAGE_LAYOUT", "first_repeat", "first_true_label_outside", "image_shape"]

#: Longest name the store holds: dataset, session, annotator, label, feature, item id.
NAME_MAX = 200
#: Most labels a dataset may have (the store's candidate masks hold this many bits).
MAX_LABELS = 1024

#: A drawing hint for a feature row: ``image:<height>x<width>`` (row-major pixels).
IMAGE_LAYOUT = re.compile(r"image:(\d+)x(\d+)")


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
