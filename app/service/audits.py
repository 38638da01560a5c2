"""Audits: which served items are drawn at random, so that model labels can be measured.

One seam of :class:`app.service.workbench.Workbench`. The items a session serves (the Query
page's next item, ``winnow session status``'s next queries, the rows of the ranked export)
are numbered by **slot**: the slot of the first item served now is the number of items that
have an expert verdict (:func:`served_base`), and each later item takes the next slot. Slot
``j`` is an **audit slot** when ``u_j < audit_share``, where ``u_0, u_1, …`` is one seeded
stream of uniforms per session (:func:`slot_uniforms`): so every view, in every process,
agrees on which slots are audits, and about ``audit_share`` of the served items are.

The item of an audit slot is drawn once, uniformly at random (a ``numpy.random.default_rng``
seeded by the session and the slot) among the items the model would label that are not yet
served ahead of it nor drawn before (open, not skipped), and persisted
(:func:`app.store.save_audit_draws`), so every view shows the same item there. The other
slots take the ranked queue in order, leaving out the items waiting in a later audit slot.
An audit slot whose item is no longer open (answered out of order, skipped) is spent: it
serves nothing. Nothing marks an audit on screen or in the export: the expert answers it like
any other item, unanchored.

An answer to a drawn item is an **audited answer**: the draw did not look at the model's
label or its score, so the audited items are a uniform sample of the items the model would
label when they were drawn (the sampling model of :mod:`engine.calibration`); answers to ranked
items are chosen where the model is least sure and are never used as audits. The sample is
uniform over the open items at the time of each draw less the handful already served ahead
of it (about ``1 / audit_share`` items on the Query page; more in a full ranked export), a
departure the documentation states rather than hides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["AUDIT_STREAM", "ServedOrder", "served_base", "slot_uniforms", "draw_index", "served_order"]

#: First word of the seeds of the audit streams (the slot uniforms and the item draws), so
#: they are independent of every other seeded stream of a session.
AUDIT_STREAM = 20_2611


def served_base(answered_by: Sequence[str | None]) -> int:
    """The slot of the first item served now: the number of items with an expert verdict."""
    return len(answered_by) - list(answered_by).count(None)


def slot_uniforms(session_id: int, n: int) -> np.ndarray:
    """``u_0 … u_{n-1}`` of the session's stream (a prefix of every longer call)."""
    return np.random.default_rng([AUDIT_STREAM, 0, int(session_id)]).random(int(n))


def draw_index(session_id: int, slot: int, pool_size: int) -> int:
    """Which of ``pool_size`` candidate items slot ``slot`` draws (uniform, seeded)."""
    return int(np.random.default_rng([AUDIT_STREAM, 1, int(session_id), int(slot)]).integers(pool_size))


@dataclass(frozen=True)
class ServedOrder:
    """The items served next, in order, with the audit draws this order needed.

    Attributes
    ----------
    positions : int array of shape (n,)
        The items, first served first.
    audit : bool array of shape (n,)
        Whether each item is an audit (tests only: nothing shows it).
    new_draws : dict of int to int
        Slot -> position of the audit items drawn now (to be stored).
    """

    positions: np.ndarray
    audit: np.ndarray
    new_draws: dict[int, int]


class _Pool:
    """The items an audit may still draw, with O(1) removal (swap with the last)."""

    def __init__(self, items: np.ndarray, n: int) -> None:
        self.items = items.astype(np.int64).copy()
        self.where = np.full(n, -1, dtype=np.int64)
        self.where[self.items] = np.arange(self.items.size)
        self.size = int(self.items.size)

    def remove(self, position: int) -> None:
        i = int(self.where[position])
        if i < 0:
            return
        last = int(self.items[self.size - 1])
        self.items[i], self.where[last] = last, i
        self.where[position] = -1
        self.size -= 1

    def take(self, i: int) -> int:
        position = int(self.items[i])
        self.remove(position)
        return position


def served_order(
    ranked: np.ndarray,
    eligible: np.ndarray,
    draws: Mapping[int, int],
    *,
    base: int,
    audit_share: float,
    session_id: int,
    top: int | None = None,
) -> ServedOrder:
    """The ranked queue with the audit slots interleaved (see the module docstring).

    Parameters
    ----------
    ranked : int array of shape (m,)
        The ranked queue: open items by score, skipped ones last.
    eligible : bool array of shape (n_instances,)
        Items an audit may serve: open and not skipped.
    draws : mapping of int to int
        The stored draws, slot -> position.
    base : int
        The slot of the first item served now (:func:`served_base`).
    audit_share : float
        The session's share of audit slots.
    session_id : int
        Seeds the streams.
    top : int, optional
        Stop after this many items (all by default).

    Returns
    -------
    ServedOrder
    """
    ranked = np.asarray(ranked, dtype=np.int64)
    limit = ranked.size + len(draws) if top is None else int(top)
    if audit_share <= 0.0 or limit <= 0:
        head = ranked if top is None else ranked[: max(int(top), 0)]
        return ServedOrder(head, np.zeros(head.size, dtype=bool), {})
    n = eligible.shape[0]
    # Enough uniforms for every slot this call can reach; extended below if not.
    horizon = max(64, 2 * (ranked.size + len(draws)) + 64)
    # Every stored draw's slot is covered, so no waiting draw is missed (and served twice).
    u = slot_uniforms(session_id, max(base + horizon, max(draws, default=-1) + 1))
    audit_slot = u < audit_share
    drawn_items = np.zeros(n, dtype=bool)
    if draws:
        drawn_items[np.fromiter(draws.values(), dtype=np.int64, count=len(draws))] = True
    # Draws waiting in a later audit slot: their items leave the ranked part.
    waiting = {
        slot: pos
        for slot, pos in draws.items()
        if slot >= base and slot < u.size and audit_slot[slot] and eligible[pos]
    }
    held = np.zeros(n, dtype=bool)
    if waiting:
        held[list(waiting.values())] = True
    rest = ranked[~held[ranked]]
    last_waiting = max(waiting, default=-1)
    pool: _Pool | None = None

    out: list[int] = []
    flags: list[bool] = []
    new: dict[int, int] = {}
    r = 0  # next item of ``rest``
    slot = base
    while len(out) < limit:
        if r >= rest.size and slot > last_waiting and (pool is None or pool.size == 0):
            # Nothing ranked is left and no drawn item waits ahead; a new draw could only
            # take an item not yet served, and every eligible item has been.
            if pool is None:
                pool = _Pool(np.flatnonzero(eligible & ~drawn_items), n)
                for p in out:
                    pool.remove(p)
            if pool.size == 0:
                break
        if slot >= u.size:
            u = slot_uniforms(session_id, 2 * u.size)
            audit_slot = u < audit_share
        if audit_slot[slot]:
            if slot in draws:
                pos = draws[slot]
                if eligible[pos] and slot >= base:
                    out.append(pos)
                    flags.append(True)
            else:
                if pool is None:
                    pool = _Pool(np.flatnonzero(eligible & ~drawn_items), n)
                    for p in out:
                        pool.remove(p)
                if pool.size:
                    pos = pool.take(draw_index(session_id, slot, pool.size))
                    new[slot] = pos
                    out.append(pos)
                    flags.append(True)
                    # Drawn now: it leaves the ranked part that follows.
                    if not held[pos]:
                        held[pos] = True
        elif r < rest.size:
            while r < rest.size and held[rest[r]]:
                r += 1
            if r < rest.size:
                pos = int(rest[r])
                r += 1
                out.append(pos)
                flags.append(False)
                if pool is not None:
                    pool.remove(pos)
        slot += 1
    return ServedOrder(np.asarray(out, dtype=np.int64), np.asarray(flags, dtype=bool), new)
