"""Audits: which served items are audits, so that model labels can be certified.

One seam of :class:`app.service.workbench.Workbench`. The items a session serves (the Query
page's next item, ``winnow session status``'s next queries, the rows of the ranked export)
are numbered by **slot**: the slot of the first item served now is the number of items that
have an expert verdict or were skipped (:func:`served_base`), and each later item takes the
next slot. Slot ``j`` is an **audit slot** when ``u_j`` is below the audit share, where
``u_0, u_1, …`` is a stream seeded by the store's secret and the session
(:func:`app.service.lots.slot_uniforms`): every view, in every process, agrees on which slots
are audits, and nobody without the store's file can tell.

The audit slots serve the active lot's items in the lot's audit order
(:func:`app.service.lots.audit_queue`); the other slots serve the ranked queue in order,
leaving out the items an audit slot serves. Nothing marks an audit on screen or in the
export: the expert answers it like any other item. Which items are audits does not depend
on any answer, score or label: the lot's order was drawn when it was frozen, so the audited
items are a random prefix of the lot (:mod:`engine.lots`), whatever the ranked queries do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["ServedOrder", "served_base", "served_order"]


def served_base(
    answered_by: Sequence[str | None] | np.ndarray, skipped: Sequence[bool] | np.ndarray | None = None
) -> int:
    """The slot of the first item served now: the number of items with an expert verdict or
    skipped (a skip uses up its slot: a skipped audit, which stays first in the audit queue,
    is served again at the next audit slot, not at once in the slot it was skipped in).

    ``answered_by`` names who gave each item's verdict (``None``: nobody), or is already the
    bool mask of the items with one (:attr:`app.store.SessionState.answered`, which the
    derivation keeps: a pass over the names costs 0.2 s at 1M items, on every page run).
    """
    if isinstance(answered_by, np.ndarray) and answered_by.dtype == bool:
        done = answered_by.copy()
    else:
        done = np.fromiter((a is not None for a in answered_by), dtype=bool, count=len(answered_by))
    if skipped is not None:
        done |= np.asarray(skipped, dtype=bool)
    return int(done.sum())


@dataclass(frozen=True)
class ServedOrder:
    """The items served next, in order.

    Attributes
    ----------
    positions : int array of shape (n,)
        The items, first served first.
    audit : bool array of shape (n,)
        Whether each item is an audit (tests only: nothing shows it).
    """

    positions: np.ndarray
    audit: np.ndarray


def served_order(
    ranked: np.ndarray,
    queue: np.ndarray,
    *,
    base: int,
    audit_share: float,
    uniforms: Callable[[int], np.ndarray],
    top: int | None = None,
) -> ServedOrder:
    """The ranked queue with the audit slots interleaved (see the module docstring).

    Parameters
    ----------
    ranked : int array of shape (m,)
        The ranked queue: open items by score, skipped ones last.
    queue : int array of shape (q,)
        The items audit slots serve, in order (:func:`app.service.lots.audit_queue`).
    base : int
        The slot of the first item served now (:func:`served_base`).
    audit_share : float
        The share of audit slots now.
    uniforms : callable
        ``uniforms(n)`` returns the first ``n`` slot uniforms of the session.
    top : int, optional
        Stop after this many items (all by default).

    Returns
    -------
    ServedOrder
    """
    ranked = np.asarray(ranked, dtype=np.int64)
    queue = np.asarray(queue, dtype=np.int64)
    if audit_share <= 0.0 or queue.size == 0:
        head = ranked if top is None else ranked[: max(int(top), 0)]
        return ServedOrder(head, np.zeros(head.size, dtype=bool))
    horizon = ranked.size + queue.size
    flags = uniforms(base + horizon)[base:] < audit_share
    n_max = int(max(ranked.max(initial=-1), queue.max(initial=-1))) + 1
    # The number of audit slots a depends on the length of the order, which depends on a
    # (the audited items leave the ranked part). Start from an upper bound and lower it to
    # the fixed point: a never grows, so this ends (in one or two passes in practice).
    a = min(queue.size, int(flags.sum()))
    while True:
        assigned = np.zeros(n_max, dtype=bool)
        assigned[queue[:a]] = True
        rest = ranked[~assigned[ranked]]
        length = rest.size + a
        fits = min(queue.size, int(flags[:length].sum()))
        if fits >= a:
            break
        a = fits
    is_audit = flags[:length].copy()
    # Audit slots beyond the a-th serve the ranked queue (the lot has nothing more to audit).
    is_audit[np.flatnonzero(is_audit)[a:]] = False
    out = np.empty(length, dtype=np.int64)
    out[is_audit] = queue[:a]
    out[~is_audit] = rest[: length - a]
    if top is not None:
        out, is_audit = out[: max(int(top), 0)], is_audit[: max(int(top), 0)]
    return ServedOrder(out, is_audit)
