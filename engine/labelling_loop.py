"""The labelling loop: which lots are frozen, which served slot is an audit, what is stated.

One pure function of the items, the model, the answers, the store's key and the settings in
force when each lot was frozen (:func:`run_loop`). The app and the replay benchmark both call
it; nothing here reads a store or a page, and reading a session never changes it.

The clock
    Every verdict (an answer, another label, "none of these") is counted in the order it was
    recorded, undone ones included: ``v`` verdicts have been given. The loop only looks at
    **checkpoints**, multiples of :data:`STATEMENT_EVERY` verdicts: what a session states
    changes only there, so no single answer shows its effect on a statement.

Lots
    Lot 1 is frozen at ``v = 0``. The model (DST-PLL, given the candidate sets after the first
    ``v`` verdicts) labels every item still to settle (two or more candidates, no verdict, not
    delivered yet); the items it accepts (margin > 0), in order of margin, make the lot. Its
    labels are fixed then. Nested **sets** of the lot, its best :data:`SET_FRACTIONS` by
    margin, are each tested under the promise in force (:mod:`engine.promises`), with
    :data:`SET_SHARES` of the lot's share of it (:func:`lot_share`). The lot is audited in one
    uniformly random order drawn from the key; restricted to a set it is a uniformly random
    order of that set, so one stream of audits tests every set. A lot ends at the first
    checkpoint where each set is certified or hopeless, or :data:`LOT_ANSWERS` verdicts after it
    was frozen; the next lot is frozen there from the model as it is then (items of certified
    sets stay delivered; the others may join it). When no lot can be frozen, the loop tries
    again :data:`RETRY_ANSWERS` verdicts later. So the points where lots are frozen are fixed by
    the answers alone, and a dirty lot gives way within :data:`LOT_ANSWERS` verdicts.

Outcomes
    An item's outcome for its lot is its **first** verdict: right when it names the frozen
    label, wrong otherwise ("none of these" included). Undoing it and answering again changes
    the item's candidate set, never the outcome, so re-answering cannot steer a verdict.

Serving
    Served slot ``j`` (the number of items answered or skipped before it) is an audit when the
    ``j``-th uniform of a stream drawn from the key is below the audit share: audit slots serve
    the active lot's items nobody has answered or skipped, in its audit order; the other slots
    serve the ranked queue (:func:`served_order`). A skipped audit goes to the end with every
    other skipped item, in the order they were skipped, and an undone one comes back to the
    slot it had: skip and undo treat an audit like any other item.

Settings
    Promise, target and confidence are those in force when the lot is frozen: the caller's
    ``settings_at(v)`` gives the settings before the first verdict that could test a lot frozen
    at ``v``. A change applies to lots frozen later. The audit share is read when serving.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from engine.promises import Promise, SetTest, SetVerdict, make_promise

__all__ = [
    "STATEMENT_EVERY",
    "LOT_ANSWERS",
    "RETRY_ANSWERS",
    "SET_FRACTIONS",
    "SET_SHARES",
    "LoopSettings",
    "VerdictLog",
    "ItemsAt",
    "Lot",
    "LotState",
    "Loop",
    "lot_share",
    "audits_to_state",
    "run_loop",
    "slot_uniforms",
    "served_order",
    "ServedOrder",
]

#: Statements change only every this many verdicts (module docstring, "The clock").
STATEMENT_EVERY = 10

#: A lot is audited for at most this many verdicts after it is frozen. At the default audit
#: share (half the served items) that is 150 audits: a set about 2 % wrong needs about that
#: many to be certified at 5 % with 90 % confidence, and a set the audits cannot certify by
#: then is better replaced by one the model, having learned from these answers, labels anew.
LOT_ANSWERS = 300

#: When no lot can be frozen (the model accepts too few items), the loop looks again this many
#: verdicts later.
RETRY_ANSWERS = 50

#: The nested sets of a lot: its best items by margin, as shares of the lot. The whole lot is
#: DST-PLL's own accept rule; the halves let a lot whose lower-margin half is too wrong still
#: certify its best labels.
SET_FRACTIONS: tuple[float, ...] = (1.0, 0.5, 0.25)

#: Each set's share of its lot's share of the promise (sums to 1).
SET_SHARES: tuple[float, ...] = (0.8, 0.1, 0.1)


def lot_share(number: int) -> float:
    """Lot ``number``'s share (1, 2, …) of the promise: ``6 / (π² l²)``, summing to 1.

    A slowly falling series: late lots, frozen when the model has learned most, still get
    enough of the promise to certify something.

    >>> [round(lot_share(l), 3) for l in (1, 2, 3)]
    [0.608, 0.152, 0.068]
    """
    return 6.0 / (math.pi**2 * int(number) ** 2)


def audits_to_state(size: int, settings: LoopSettings, number: int = 1) -> int | None:
    """Fewest audited answers, none wrong, after which lot ``number`` of ``size`` items states its
    labels (its whole set certified); None when it never could.

    >>> audits_to_state(1000, LoopSettings())
    68
    """
    test = settings.make_promise().test(int(size), lot_share(number) * SET_SHARES[0])
    if test is None or not test.verdict(np.zeros(test.size, dtype=np.int64)).certified:
        return None
    lo, hi = 1, test.size  # with no wrong label, a longer prefix only certifies more
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if test.verdict(np.zeros(mid, dtype=np.int64)).certified else (mid + 1, hi)
    return lo


@dataclass(frozen=True)
class LoopSettings:
    """The label settings the loop reads (the store's ``LabelSettings`` fields)."""

    max_error: float = 0.05
    confidence: float = 0.90
    promise: str = "confidence"
    audit_share: float = 0.5

    def make_promise(self) -> Promise:
        return make_promise(self.promise, target=self.max_error, confidence=self.confidence)


@dataclass(frozen=True)
class VerdictLog:
    """Every verdict of a session in the order recorded, undone ones included.

    Attributes
    ----------
    positions : int array of shape (v,)
        The item of each verdict.
    labels : int array of shape (v,)
        The label it names; -1 for "none of these".
    """

    positions: np.ndarray
    labels: np.ndarray

    def __len__(self) -> int:
        return int(self.positions.size)

    def first_verdicts(self, n_items: int) -> tuple[np.ndarray, np.ndarray]:
        """For each item, the index of its first verdict (``len(self)`` when none) and its label."""
        at = np.full(n_items, len(self), dtype=np.int64)
        label = np.full(n_items, -1, dtype=np.int64)
        items, first = np.unique(self.positions, return_index=True)
        at[items] = first
        label[items] = self.labels[first]
        return at, label


@dataclass(frozen=True)
class ItemsAt:
    """What a lot is frozen from: the items after the first ``v`` verdicts.

    ``candidates`` the candidate sets, ``settled`` the items with a verdict or in conflict.
    """

    candidates: np.ndarray
    settled: np.ndarray


@dataclass(frozen=True)
class Lot:
    """A lot, frozen once: its items in audit order, their labels, and its sets' tests.

    Attributes
    ----------
    number : int
        1, 2, … in the session.
    frozen_at : int
        The verdict count it was frozen at.
    items : int array of shape (size,)
        Its items, in audit order.
    labels : int array of shape (size,)
        Their frozen model labels.
    margins : float array of shape (size,)
        The model's margins when it was frozen.
    ranks : int array of shape (size,)
        Each item's rank by margin (0 the largest); set ``j`` holds the ranks below
        ``sets[j].size``.
    tests : tuple of SetTest
        One per set, smallest set last.
    promise : Promise
        The promise in force when it was frozen.
    """

    number: int
    frozen_at: int
    items: np.ndarray
    labels: np.ndarray
    margins: np.ndarray
    ranks: np.ndarray
    tests: tuple[SetTest, ...]
    promise: Promise


@dataclass(frozen=True)
class LotState:
    """A lot and what its audits say at a checkpoint.

    Attributes
    ----------
    lot : Lot
    verdicts : tuple of SetVerdict
        One per set.
    certified : int
        Items of its largest certified set (0: none).
    ended_at : int or None
        The checkpoint where it ended; None while it is the lot being audited.
    """

    lot: Lot
    verdicts: tuple[SetVerdict, ...]
    certified: int
    ended_at: int | None

    @property
    def decided(self) -> bool:
        return all(v.certified or v.hopeless for v in self.verdicts)

    @property
    def certified_items(self) -> np.ndarray:
        """The items of its largest certified set."""
        return self.lot.items[self.lot.ranks < self.certified]

    @property
    def certified_labels(self) -> np.ndarray:
        return self.lot.labels[self.lot.ranks < self.certified]

    @property
    def wrong_bound(self) -> int | None:
        """With confidence, the bound on the wrong labels of its largest certified set."""
        for test, verdict in zip(self.lot.tests, self.verdicts, strict=True):
            if verdict.certified and test.size == self.certified:
                return verdict.wrong_bound
        return None

    @property
    def audited(self) -> int:
        """Audited answers read by its largest set (the lot's own audited prefix)."""
        return self.verdicts[0].audited if self.verdicts else 0


@dataclass(frozen=True)
class Loop:
    """The lots of a session at its last checkpoint (:func:`run_loop`).

    Attributes
    ----------
    lots : tuple of LotState
        Every lot frozen so far, first first; the last one is being audited unless it ended.
    checkpoint : int
        The verdict count the statement is read at.
    verdicts : int
        The verdicts given so far (the checkpoint is the last multiple of
        :data:`STATEMENT_EVERY` at or below it).
    next_lot_at : int or None
        The verdict count at which the lot being audited ends at the latest (or, with no lot,
        the next attempt to freeze one); None when nothing is left to label.
    frozen : dict of int to Lot or None
        Every attempt to freeze a lot, by the verdict count it was made at (None: nothing
        could be frozen): what :func:`run_loop` may reuse for a longer log.
    """

    lots: tuple[LotState, ...]
    checkpoint: int
    verdicts: int
    next_lot_at: int | None = None
    frozen: Mapping[int, Lot | None] = field(default_factory=dict, repr=False)

    @property
    def active(self) -> LotState | None:
        """The lot being audited, if any."""
        if self.lots and self.lots[-1].ended_at is None:
            return self.lots[-1]
        return None

    def delivered(self, n_items: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Items in a certified set, their frozen labels and margins (-1 / NaN elsewhere)."""
        member = np.zeros(n_items, dtype=bool)
        label = np.full(n_items, -1, dtype=np.int64)
        margin = np.full(n_items, np.nan)
        for state in self.lots:
            keep = state.lot.ranks < state.certified
            member[state.lot.items[keep]] = True
            label[state.lot.items[keep]] = state.lot.labels[keep]
            margin[state.lot.items[keep]] = state.lot.margins[keep]
        return member, label, margin

    def in_lots(self, n_items: int) -> np.ndarray:
        """Items delivered, or of the lot being audited: the ranked queue leaves them last."""
        member, _, _ = self.delivered(n_items)
        if self.active is not None:
            member[self.active.lot.items] = True
        return member

    def audit_queue(self, answered: np.ndarray, skipped: np.ndarray) -> np.ndarray:
        """The active lot's items that nobody has answered or skipped, in audit order."""
        if self.active is None:
            return np.zeros(0, dtype=np.int64)
        items = self.active.lot.items
        queue: np.ndarray = items[~np.asarray(answered)[items] & ~np.asarray(skipped)[items]]
        return queue

    @property
    def stated_sets(self) -> tuple[LotState, ...]:
        """The lots with a certified set."""
        return tuple(s for s in self.lots if s.certified > 0)


def _seed(key: bytes, *words: int) -> list[int]:
    """A seed for ``numpy.random.default_rng`` from the store's key and some integers."""
    digest = hashlib.sha256(key + b"".join(int(w).to_bytes(8, "little", signed=True) for w in words)).digest()
    return [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 32, 4)]


def slot_uniforms(key: bytes, session: int, n: int) -> np.ndarray:
    """``u_0 … u_{n-1}``: served slot ``j`` is an audit when ``u_j`` is below the audit share."""
    return np.random.default_rng(_seed(key, 0, session)).random(int(n))


def _audit_order(key: bytes, session: int, number: int, size: int) -> np.ndarray:
    return np.random.default_rng(_seed(key, 1, session, number)).permutation(int(size))


def _freeze(
    number: int,
    at: int,
    items: ItemsAt,
    delivered: np.ndarray,
    model: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    promise: Promise,
    key: bytes,
    session: int,
) -> Lot | None:
    """Lot ``number`` frozen at ``at`` verdicts, or None when no set of it could be certified."""
    free = (np.asarray(items.candidates).sum(axis=1) >= 2) & ~np.asarray(items.settled) & ~delivered
    if not free.any():
        return None
    labels, margins = model(np.asarray(items.candidates))
    members = np.flatnonzero(free & (np.asarray(margins) > 0))
    if members.size == 0:
        return None
    by_margin = members[np.argsort(-np.asarray(margins)[members], kind="stable")]
    rank = np.empty(by_margin.size, dtype=np.int64)
    rank[np.argsort(-np.asarray(margins)[members], kind="stable")] = np.arange(by_margin.size)
    tests: list[SetTest] = []
    for fraction, share in zip(SET_FRACTIONS, SET_SHARES, strict=True):
        size = int(math.ceil(fraction * members.size))
        test = promise.test(size, lot_share(number) * share) if size else None
        if test is not None and all(t.size != size for t in tests):
            tests.append(test)
    if not tests:
        return None
    order = _audit_order(key, session, number, members.size)
    return Lot(
        number=number,
        frozen_at=at,
        items=members[order],
        labels=np.asarray(labels, dtype=np.int64)[members[order]],
        margins=np.asarray(margins, dtype=np.float64)[members[order]],
        ranks=rank[order],
        tests=tuple(tests),
        promise=promise,
    )


def _evaluate(lot: Lot, first_at: np.ndarray, first_label: np.ndarray, at: int) -> tuple[SetVerdict, ...]:
    """Each set's verdict from the first verdicts given before ``at``."""
    known = first_at[lot.items] < at
    wrong = known & (first_label[lot.items] != lot.labels)
    verdicts = []
    for test in lot.tests:
        member = lot.ranks < test.size
        seen = known[member]
        prefix = int(np.argmin(seen)) if not seen.all() else int(seen.size)
        verdicts.append(test.verdict(np.cumsum(wrong[member][:prefix])))
    return tuple(verdicts)


def _largest_certified(lot: Lot, verdicts: tuple[SetVerdict, ...]) -> int:
    return max((t.size for t, v in zip(lot.tests, verdicts, strict=True) if v.certified), default=0)


def run_loop(
    log: VerdictLog,
    *,
    n_items: int,
    items_at: Callable[[int], ItemsAt],
    model: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    settings_at: Callable[[int], LoopSettings],
    key: bytes,
    session: int,
    known: Mapping[int, Lot | None] | None = None,
) -> Loop:
    """The session's lots and their verdicts at its last checkpoint (module docstring).

    Parameters
    ----------
    log : VerdictLog
        Every verdict so far.
    n_items : int
        Items of the dataset.
    items_at : callable
        ``items_at(v)``: the items after the first ``v`` verdicts (called only where a lot is
        frozen).
    model : callable
        ``model(candidates)``: each item's label and margin (margin > 0: the model accepts it).
    settings_at : callable
        ``settings_at(v)``: the settings in force for a lot frozen at ``v`` verdicts.
    key : bytes
        The store's secret: audit orders and audit slots are drawn from it.
    session : int
        Tells sessions of one store apart in the draws.
    known : mapping of int to Lot or None
        :attr:`Loop.frozen` of an earlier call for a shorter log of the same session: reused,
        not frozen again (the result is the same; freezing runs the model).

    Returns
    -------
    Loop
    """
    checkpoint = (len(log) // STATEMENT_EVERY) * STATEMENT_EVERY
    first_at, first_label = log.first_verdicts(n_items)
    reuse = dict(known or {})
    frozen: dict[int, Lot | None] = {}
    states: list[LotState] = []
    delivered = np.zeros(n_items, dtype=bool)
    at = 0
    while True:
        cached = reuse.get(at, False)
        if cached is None or (isinstance(cached, Lot) and cached.number == len(states) + 1):
            lot = cached
        else:
            lot = _freeze(
                len(states) + 1, at, items_at(at), delivered, model, settings_at(at).make_promise(), key, session
            )
        frozen[at] = lot
        if lot is None:
            # Nothing could be frozen: look again later, unless nothing is left to label.
            retry = at + RETRY_ANSWERS if _anything_to_label(items_at, at, delivered) else None
            if retry is None or retry > checkpoint:
                return Loop(tuple(states), checkpoint, len(log), retry, frozen)
            at = retry
            continue
        ended = None
        verdicts = _evaluate(lot, first_at, first_label, at)
        for point in range(at + STATEMENT_EVERY, checkpoint + 1, STATEMENT_EVERY):
            verdicts = _evaluate(lot, first_at, first_label, point)
            if all(v.certified or v.hopeless for v in verdicts) or point >= at + LOT_ANSWERS:
                ended = point
                break
        state = LotState(lot, verdicts, _largest_certified(lot, verdicts), ended)
        states.append(state)
        delivered[state.certified_items] = True
        if ended is None:
            return Loop(tuple(states), checkpoint, len(log), at + LOT_ANSWERS, frozen)
        at = ended


def _anything_to_label(items_at: Callable[[int], ItemsAt], at: int, delivered: np.ndarray) -> bool:
    items = items_at(at)
    return bool(((np.asarray(items.candidates).sum(axis=1) >= 2) & ~np.asarray(items.settled) & ~delivered).any())


@dataclass(frozen=True)
class ServedOrder:
    """The items served next, first first; ``audit`` marks the audits (tests only)."""

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
    """The ranked queue with the audit slots interleaved (module docstring, "Serving").

    Parameters
    ----------
    ranked : int array of shape (m,)
        The ranked queue (skipped items last, in the order they were skipped).
    queue : int array of shape (q,)
        The items audit slots serve, in order (:meth:`Loop.audit_queue`).
    base : int
        The slot of the first item served now: the items answered or skipped.
    audit_share : float
        The share of audit slots.
    uniforms : callable
        ``uniforms(n)``: the session's first ``n`` slot uniforms (:func:`slot_uniforms`).
    top : int, optional
        Stop after this many items.

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
    # (audited items leave the ranked part): start from an upper bound and lower it to the
    # fixed point (a never grows, so this ends, in one or two passes in practice).
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
    is_audit[np.flatnonzero(is_audit)[a:]] = False  # the lot has nothing more to audit
    out = np.empty(length, dtype=np.int64)
    out[is_audit] = queue[:a]
    out[~is_audit] = rest[: length - a]
    if top is not None:
        out, is_audit = out[: max(int(top), 0)], is_audit[: max(int(top), 0)]
    return ServedOrder(out, is_audit)
