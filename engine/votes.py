"""Candidate sets made from crowd votes: which labels an item's annotators left possible.

Several annotators vote one label each for an item; the item's candidate set is read from the
votes. By default every label someone voted for is a candidate (the union of the votes). A
stricter reading keeps only labels with enough support: at least ``min_votes`` votes, and/or
at least a share ``min_share`` of the item's votes.

When no label of an item reaches the thresholds (four votes split 1/1/1/1 with
``min_votes=2``), the item keeps its **plurality labels**: every label with the most votes
(ties kept). The set is then never empty, it always holds the plurality label, and raising a
threshold never adds a label (the thresholds are monotone), which falling back to the union
would break. An item without any vote gets every label (nothing rules a label out).

Complexity is ``O(n_votes + n_items * n_labels)`` time and memory (one counting pass).

Examples
--------
>>> import numpy as np
>>> items = np.array([0, 0, 0, 1, 1])
>>> labels = np.array([0, 0, 1, 2, 1])
>>> vote_counts(items, labels, n_items=3, n_labels=3)
array([[2, 1, 0],
       [0, 1, 1],
       [0, 0, 0]])
>>> candidate_sets_from_votes(items, labels, n_items=3, n_labels=3).astype(int)
array([[1, 1, 0],
       [0, 1, 1],
       [1, 1, 1]])
>>> candidate_sets_from_votes(items, labels, n_items=3, n_labels=3, min_votes=2).astype(int)
array([[1, 0, 0],
       [0, 1, 1],
       [1, 1, 1]])
>>> candidate_sets_from_votes(items, labels, n_items=3, n_labels=3, min_share=0.6).astype(int)
array([[1, 0, 0],
       [0, 1, 1],
       [1, 1, 1]])

Item 1 has one vote for each of two labels: no label reaches two votes, so both plurality
labels stay.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np

from engine.exceptions import InvalidInput

__all__ = ["check_vote_thresholds", "vote_counts", "candidate_sets_from_votes"]


def _check_index_array(values: object, name: str, bound: int, bound_name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise InvalidInput(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        return arr.astype(np.int64)
    if not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must hold integers, got dtype {arr.dtype}")
    if arr.min() < 0 or arr.max() >= bound:
        bad = int(arr[(arr < 0) | (arr >= bound)][0])
        raise InvalidInput(f"{name} holds {bad}, outside [0, {bound_name}={bound})")
    return arr.astype(np.int64)


def _check_count(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or int(value) < minimum:
        raise InvalidInput(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_vote_thresholds(min_votes: object = None, min_share: object = None) -> tuple[int | None, float | None]:
    """``(min_votes, min_share)`` checked: an integer >= 1 and a number in ``(0, 1]``, or ``None``.

    >>> check_vote_thresholds(2, None)
    (2, None)

    Raises
    ------
    InvalidInput
        A threshold out of range or of the wrong type; the message names it.
    """
    votes = None if min_votes is None else _check_count(min_votes, "min_votes", 1)
    share = None
    if min_share is not None:
        if isinstance(min_share, bool) or not isinstance(min_share, Real) or not 0 < float(min_share) <= 1:
            raise InvalidInput(f"min_share must be a number in (0, 1], got {min_share!r}")
        share = float(min_share)
    return votes, share


def vote_counts(items: object, labels: object, *, n_items: int, n_labels: int) -> np.ndarray:
    """How many votes each label received for each item.

    Parameters
    ----------
    items : int array of shape (n_votes,)
        The item of each vote, in ``[0, n_items)``.
    labels : int array of shape (n_votes,)
        The label of each vote, in ``[0, n_labels)``.
    n_items, n_labels : int

    Returns
    -------
    int array of shape (n_items, n_labels)

    Raises
    ------
    InvalidInput
        Arrays of different lengths, indices out of range, or bad sizes.
    TypeError
        Non-integer indices.
    """
    n = _check_count(n_items, "n_items", 0)
    m = _check_count(n_labels, "n_labels", 1)
    item_idx = _check_index_array(items, "items", n, "n_items")
    label_idx = _check_index_array(labels, "labels", m, "n_labels")
    if item_idx.shape != label_idx.shape:
        raise InvalidInput(f"items and labels must have the same length, got {item_idx.size} and {label_idx.size}")
    flat = np.bincount(item_idx * m + label_idx, minlength=n * m)
    return flat.reshape(n, m)


def candidate_sets_from_votes(
    items: object,
    labels: object,
    *,
    n_items: int,
    n_labels: int,
    min_votes: int | None = None,
    min_share: float | None = None,
) -> np.ndarray:
    """The candidate set of every item, read from its votes (see the module docstring).

    Parameters
    ----------
    items : int array of shape (n_votes,)
        The item of each vote, in ``[0, n_items)``.
    labels : int array of shape (n_votes,)
        The label of each vote, in ``[0, n_labels)``.
    n_items, n_labels : int
    min_votes : int, optional
        Keep labels with at least this many votes (>= 1; 1 is the union).
    min_share : float, optional
        Keep labels with at least this share of the item's votes, in ``(0, 1]``. Shares are
        compared exactly as ``count >= min_share * total``.

    Returns
    -------
    bool array of shape (n_items, n_labels)
        No row is empty. Rows of items with votes hold the labels meeting every threshold
        given, or the item's plurality labels when none does; rows of items without votes are
        all ``True``.

    Raises
    ------
    InvalidInput
        A bad threshold or bad index arrays (:func:`vote_counts`).
    """
    min_votes, min_share = check_vote_thresholds(min_votes, min_share)
    counts = vote_counts(items, labels, n_items=n_items, n_labels=n_labels)
    total = counts.sum(axis=1, keepdims=True)
    keep = counts > 0
    if min_votes is not None:
        keep &= counts >= min_votes
    if min_share is not None:
        keep &= counts >= min_share * total
    plurality = (counts == counts.max(axis=1, keepdims=True)) & (counts > 0)
    none_kept = ~keep.any(axis=1)
    keep[none_kept] = plurality[none_kept]
    keep[total[:, 0] == 0] = True
    return keep
