"""The labelling loop: which lots are frozen, which served slot is an audit, what is stated.

One pure function of the items, the model, the answers, the store's key and the settings in
force when each lot was frozen (:func:`run_loop`). The app and the replay benchmark both call
it; nothing here reads a store or a page, and reading a session never changes it.

The clock
    The first verdict on each item (an answer, another label, "none of these") is counted in the
    order it was recorded: ``v`` items have had one. Undoing and answering again does not move
    the clock. The loop only looks at **checkpoints**, multiples of ``DESIGN.statement_every``:
    what a session states changes only there, so no single answer shows its effect on a
    statement.

Lots
    Lot 1 is frozen at ``v = 0``. The model (DST-PLL, given the candidate sets after the first
    ``v`` verdicts) labels every item still to settle (two or more candidates, no verdict, not
    delivered yet); the items it accepts (margin > 0) make the lot, their labels fixed then. By
    margin, the lot is cut into **layers** (its best quarter, the next quarter, the rest), each
    audited in a uniformly random order drawn from the key and tested under the promise in force
    (:mod:`engine.promises`) with a share of the lot's share of it (:func:`lot_share`; on
    average, also read among the labels already stated: :mod:`engine.promises`, "Several sets").
    On average, a lot frozen while nothing is stated is its best half and the rest of its best
    ``DESIGN.alone_layer_fractions[1]``, the two charged together by their worst read
    (:meth:`engine.promises.AveragePromise.pair_tests`); its worst labels are left to later lots.
    Statements are about **sets**, the best ``j`` layers together: set ``j`` is certified when
    its layers' tests together back it (:meth:`engine.promises.Promise.judge`). The layers are
    audited one after another, best first, each until its set is certified. A lot ends at the
    first checkpoint where every set is certified or the next one is hopeless, or
    ``DESIGN.lot_answers`` verdicts after it was frozen; a set is also given up as hopeless when it
    could not be certified by then even if every audit still to come (at the audit share the lot
    was frozen with) named the frozen label, so a lot that can state no more gives way at once.
    The next lot is frozen there from the model as it is then (items of certified sets stay
    delivered; the others may join it). When no lot can be frozen, the loop tries again
    ``DESIGN.retry_answers`` verdicts later. So the points where lots are frozen are fixed by the
    answers alone, and a dirty lot gives way within ``DESIGN.lot_answers`` verdicts.

The promise's shares
    The shares of a session's tests sum to at most 1 (:mod:`engine.promises`, "Several sets").
    A lot's place ``l`` in the series is 1 + the lots before it that spent some of it; the lot is
    given :func:`lot_share` ``(l)`` of it (lot 1 the promise's ``first_lot_share``: on average
    more than the series' first term, so that a large lot 1, which most sessions state most
    with, is rarely rejected by chance), scaled by the **wealth** left over the share the
    series would have left (``W_l / R_l``, ``R_l = Σ_{m ≥ l} lot_share(m)``). A layer whose
    test read no audit before its lot ended can never be certified: it puts no label at risk,
    so its share goes back to the wealth. The rest of a lot's share is spent, each layer's times
    its test's charge (on average, a layer charged by how its test ended spends only that end's
    charge: :mod:`engine.promises`, "Charges by how a test ended"). So ``W`` never
    falls below 0 (``lot_share(l) ≤ R_l``), the shares at risk sum to at most 1, and a lot that
    fails before reaching its lower layers leaves them to the lots after it. A lot whose share
    from the series could certify none of its sets is given all of the wealth instead
    (:func:`lot_parts`): otherwise, with the wealth and the place in the series unchanged until
    some lot spends, no lot could ever be frozen again while part of the promise is unspent.
    When even all of it could certify no set of a lot made of every open item, the loop says
    so (:attr:`Loop.out_of_promise`): what is missing then is the promise, not the model.

    A lot frozen after one that certified nothing is **piloted** (:mod:`engine.promises`,
    "Pilots"): the model has been wrong where it was sure, so each layer's test starts only
    after a short pilot of its audits has found few wrong labels, and a layer that fails its
    pilot spends nothing and takes no place in the series. Where the model stays that wrong
    (MSRCv2's early lots, 20–30 % wrong), its lots no longer spend the promise one after
    another. Lot 1 and a lot after a certified one are not piloted: a pilot's audits cannot
    certify, and piloting every lot was measured to delay the sample's first statement by
    about 40 answers and to state less on BirdSong and synthetic2k (``docs/results_labels.md``).

Outcomes
    An item's outcome for its lot is its **first** verdict: right when it names the frozen
    label, wrong otherwise ("none of these" included). Undoing it and answering again changes
    the item's candidate set, never the outcome, so re-answering cannot steer a verdict.

Serving
    Served slot ``j`` (the number of items answered or skipped before it) is an audit when the
    ``j``-th uniform of a stream drawn from the key is below the audit share: audit slots serve
    the items of the layer being audited (then of the next layers) that nobody has answered or
    skipped, in their audit order; the other slots
    serve the ranked queue (:func:`served_order`). A skipped audit goes to the end with every
    other skipped item, in the order they were skipped, and an undone one comes back to the
    slot it had: skip and undo treat an audit like any other item.

Settings
    Promise, target and confidence are those in force when the lot is frozen: the caller's
    ``settings_at(v)`` gives the settings before the first verdict that could test a lot frozen
    at ``v``. A change applies to lots frozen later. The audit share is read when serving.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from engine.loop_design import DESIGN, SERIES_FIRST_SHARE
from engine.promises import AveragePromise, Promise, SetTest, SetVerdict, make_promise, part_test

__all__ = [
    "LoopSettings",
    "VerdictLog",
    "ItemsAt",
    "Lot",
    "LotState",
    "Loop",
    "lot_share",
    "lot_parts",
    "share_left_by_series",
    "audits_to_state",
    "judge_lot",
    "run_loop",
    "slot_uniforms",
    "served_order",
    "ServedOrder",
]


def lot_share(number: int, first: float = SERIES_FIRST_SHARE) -> float:
    """Lot ``number``'s share (1, 2, …) of the promise, ``first`` for lot 1
    (:attr:`engine.promises.Promise.first_lot_share`): the series ``6 / (π² l²)``, summing to 1,
    with its later terms scaled to share the rest.

    A slowly falling series: late lots, frozen when the model has learned most, still get
    enough of the promise to certify something. Lot 1 may take more than the series' first term
    without changing what a later lot takes of what is left (:func:`lot_parts`).

    >>> [round(lot_share(l), 3) for l in (1, 2, 3)], [round(lot_share(l, 0.8), 3) for l in (1, 2, 3)]
    ([0.608, 0.152, 0.068], [0.8, 0.078, 0.034])
    """
    number = int(number)
    if number == 1:
        return float(first)
    return 6.0 / (math.pi**2 * number**2) * ((1.0 - first) / (1.0 - SERIES_FIRST_SHARE))


def share_left_by_series(number: int, first: float = SERIES_FIRST_SHARE) -> float:
    """``R_l = Σ_{m ≥ l} lot_share(m, first)``: what the series leaves for lot ``number`` on.

    >>> round(share_left_by_series(2), 3), round(share_left_by_series(2, 0.8), 3)
    (0.392, 0.2)
    """
    return max(1.0 - sum(lot_share(m, first) for m in range(1, int(number))), 0.0)


def audits_to_state(
    size: int, settings: LoopSettings, number: int = 1, stated_before: int = 0, *, piloted: bool = False
) -> int | None:
    """Fewest audited answers, none wrong, after which the lot at place ``number`` in the series,
    of ``size`` items, states its first labels (its best layer), ``stated_before`` labels being
    stated when it was frozen, its pilot included when ``piloted``; None when it never could. A
    later lot is taken at the series' share: the wealth the lots before it gave back (module
    docstring, "The promise's shares") can only lower the figure.

    >>> audits_to_state(1000, LoopSettings())
    66
    """
    promise = settings.make_promise()
    share = lot_share(number, promise.first_lot_share)
    tests = _layer_tests(promise, int(size), stated_before, share, piloted=piloted)[0]
    test = tests[0] if tests else None
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
    """The first verdict on each item of a session, in the order recorded (undone ones included).

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
    """A lot, frozen once: its items in audit order, their labels, and its layers' tests.

    Attributes
    ----------
    number : int
        1, 2, … in the session.
    frozen_at : int
        The verdict count it was frozen at.
    items : int array of shape (size,)
        Its items in audit order: the first layer's in a random order, then the second's, ….
    labels : int array of shape (size,)
        Their frozen model labels.
    margins : float array of shape (size,)
        DST-PLL's margins when it was frozen (what the labelled export shows).
    layers : int array of shape (size,)
        Each item's layer (0 holds the largest scores).
    tests : tuple of SetTest
        One per layer; set ``j`` is layers ``0 … j``.
    promise : Promise
        The promise in force when it was frozen.
    audit_share : float
        The audit share in force when it was frozen: how many audits it can expect before its
        deadline (:func:`judge_lot`).
    shares : tuple of float
        Each layer's test's share of the promise (module docstring, "The promise's shares").
    """

    number: int
    frozen_at: int
    items: np.ndarray
    labels: np.ndarray
    margins: np.ndarray
    layers: np.ndarray
    tests: tuple[SetTest, ...]
    promise: Promise
    audit_share: float
    shares: tuple[float, ...]

    @functools.cached_property
    def set_sizes(self) -> tuple[int, ...]:
        """Items of set ``j`` (layers ``0 … j``)."""
        return tuple(int(v) for v in np.cumsum([t.size for t in self.tests]))

    @functools.cached_property
    def layer_spans(self) -> tuple[tuple[int, int], ...]:
        """Where each layer lies in the audit order (its items are consecutive)."""
        return tuple(itertools.pairwise((0, *self.set_sizes)))


@dataclass(frozen=True)
class LotState:
    """A lot and what its audits say at a checkpoint.

    Attributes
    ----------
    lot : Lot
    verdicts : tuple of SetVerdict
        One per layer.
    certified : int
        The number of layers of its largest certified set (0: none).
    current : int or None
        The layer being audited (None when the lot is decided: every set certified, or the
        next one hopeless).
    ended_at : int or None
        The checkpoint where it ended; None while it is the lot being audited.
    """

    lot: Lot
    verdicts: tuple[SetVerdict, ...]
    certified: int
    current: int | None
    ended_at: int | None

    @property
    def certified_mask(self) -> np.ndarray:
        """Its items in the largest certified set (in audit order)."""
        return self.lot.layers < self.certified

    @property
    def stated(self) -> int:
        """Items of its largest certified set."""
        return self.lot.set_sizes[self.certified - 1] if self.certified else 0

    @property
    def wrong_bound(self) -> int | None:
        """With confidence, the bound on the wrong labels of its largest certified set."""
        bounds = [v.wrong_bound for v in self.verdicts[: self.certified]]
        return None if not self.certified or None in bounds else sum(int(b) for b in bounds if b is not None)

    @property
    def audited(self) -> int:
        """Audited answers its layers read."""
        return sum(v.audited for v in self.verdicts)

    @property
    def share_spent(self) -> float:
        """Its share of the promise at risk: every layer's while it is audited; once it ended,
        each layer's times its test's charge, nothing for a layer whose test read no audit and
        certified nothing (module docstring, "The promise's shares")."""
        if self.ended_at is None:
            return sum(self.lot.shares)
        return sum(
            share * verdict.charge
            for share, verdict in zip(self.lot.shares, self.verdicts, strict=True)
            if verdict.at_risk or verdict.certified
        )


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
        ``DESIGN.statement_every`` at or below it).
    next_lot_at : int or None
        The verdict count at which the lot being audited ends at the latest (or, with no lot,
        the next attempt to freeze one); None when nothing is left to label.
    frozen : dict of int to Lot or None
        Every sealed attempt to freeze a lot, by the verdict count it was made at (None:
        nothing could be frozen): what :func:`run_loop` may reuse for a longer log.
    promise_left : float
        The share of the promise the lots that ended left unspent (module docstring, "The
        promise's shares").
    out_of_promise : bool
        No lot is being audited, and ``promise_left`` could certify none of the sets of a lot
        made of every open item: what is missing is the promise, not the model's certainty.
    """

    lots: tuple[LotState, ...]
    checkpoint: int
    verdicts: int
    next_lot_at: int | None = None
    frozen: Mapping[int, Lot | None] = field(default_factory=dict, repr=False)
    promise_left: float = 1.0
    out_of_promise: bool = False

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
            keep = state.certified_mask
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
        """The items of the layer being audited and of the layers after it that nobody has
        answered or skipped, in audit order (a list of answers taken at once, from the ranked
        export, goes on into the next layer)."""
        active = self.active
        if active is None or active.current is None:
            return np.zeros(0, dtype=np.int64)
        items = active.lot.items[active.lot.layers >= active.current]
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


def _freeze(
    number: int,
    at: int,
    items: ItemsAt,
    delivered: np.ndarray,
    model: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]],
    settings: LoopSettings,
    key: bytes,
    session: int,
    *,
    wealth: float,
    rank: int,
    piloted: bool,
) -> Lot | None:
    """Lot ``number`` frozen at ``at`` verdicts under ``settings``, or None when none of its sets
    could be certified; ``wealth``: the promise's share not yet spent, ``rank``: its place in the
    series, 1 + the lots before it that spent some (module docstring, "The promise's shares")."""
    promise = settings.make_promise()
    stated_before = int(np.asarray(delivered).sum())
    free = _open(items, delivered)
    if not free.any():
        return None
    labels, scores, margins = model(np.asarray(items.candidates))
    scores = np.asarray(scores, dtype=np.float64)
    members = np.flatnonzero(free & (scores > 0))
    if members.size == 0:
        return None
    by_margin = members[np.argsort(-scores[members], kind="stable")]
    for lot_part in lot_parts(wealth, rank, promise.first_lot_share):
        tests, shares, edges = _layer_tests(promise, by_margin.size, stated_before, lot_part, piloted=piloted)
        if tests:
            break
    else:
        return None
    rng = np.random.default_rng(_seed(key, 1, session, number))
    order = np.concatenate([rng.permutation(by_margin[lo:hi]) for lo, hi in itertools.pairwise(edges)])
    layer_of = np.repeat(np.arange(len(tests)), np.diff(edges))
    return Lot(
        number=number,
        frozen_at=at,
        items=order,
        labels=np.asarray(labels, dtype=np.int64)[order],
        margins=np.asarray(margins, dtype=np.float64)[order],
        layers=layer_of,
        tests=tuple(tests),
        promise=promise,
        audit_share=float(settings.audit_share),
        shares=tuple(shares),
    )


def lot_parts(wealth: float, rank: int, first: float = SERIES_FIRST_SHARE) -> tuple[float, ...]:
    """The shares of the promise a lot at place ``rank`` in the series is offered, in turn, while
    ``wealth`` of it is not spent (module docstring, "The promise's shares"): the series' share
    (lot 1's ``first``) scaled by the wealth, then, when that could certify none of its sets, all
    of the wealth. What a later lot is offered of the wealth, ``lot_share(l) / R_l``, does not
    depend on ``first``.

    >>> [round(p, 3) for p in lot_parts(1.0, 1)], [round(p, 3) for p in lot_parts(0.3, 4)]
    ([0.608, 1.0], [0.066, 0.3])
    >>> [round(p, 3) for p in lot_parts(1.0, 1, 0.8)], [round(p, 3) for p in lot_parts(0.3, 4, 0.8)]
    ([0.8, 1.0], [0.066, 0.3])
    """
    left = share_left_by_series(rank, first)
    series = wealth * (min(lot_share(rank, first) / left, 1.0) if left > 0 else 1.0)
    return (series, wealth) if wealth > series else (series,)


def _layer_tests(
    promise: Promise, size: int, stated_before: int, lot_part: float, *, piloted: bool
) -> tuple[list[SetTest], list[float], list[int]]:
    """The tests of the layers a lot of ``size`` items (by margin) is cut into with ``lot_part``
    of the promise, their shares and the layers' edges (the lot's items are those before the
    last edge); no test when no layer could be certified (module docstring, "Lots")."""
    if lot_part <= 0.0:
        return [], [], [0]
    if isinstance(promise, AveragePromise) and stated_before == 0:
        half, kept = (int(math.ceil(f * size)) for f in DESIGN.alone_layer_fractions)
        pair = promise.pair_tests(half, kept - half, lot_part, piloted=piloted) if 0 < half < kept else None
        if pair is not None:
            return list(pair[0]), list(pair[1]), [0, half, kept]
    bounds = [int(math.ceil(f * size)) for f in DESIGN.layer_fractions]
    tests: list[SetTest] = []
    shares: list[float] = []
    edges: list[int] = [0]
    share = 0.0
    # A layer too small to be certified on its own share joins the next one.
    for end, layer_share in zip(bounds, DESIGN.layer_shares, strict=True):
        share += layer_share
        # A layer is stated with the labels stated before its lot and the layers before it.
        among = stated_before + end
        test = (
            part_test(promise, end - edges[-1], lot_part * share, among=among, piloted=piloted)
            if end > edges[-1]
            else None
        )
        if test is not None:
            tests.append(test)
            shares.append(lot_part * share)
            edges.append(end)
            share = 0.0
    return tests, shares, edges


def judge_lot(
    lot: Lot,
    known: np.ndarray,
    wrong: np.ndarray,
    cache: dict[int, tuple[int, SetVerdict]] | None = None,
    *,
    at: int | None = None,
) -> tuple[tuple[SetVerdict, ...], int, int | None]:
    """Each layer's verdict, the lot's largest certified set (0: none) and the layer being
    audited (None: the lot is decided).

    A layer's test reads the longest prefix of its audit order whose verdicts are all known
    (``known``, in audit order; ``wrong``: known and not the frozen label). ``cache`` keeps each
    layer's last verdict by its prefix length, for calls with the same ``wrong`` on a growing
    ``known``. ``at``: the verdict count it is judged at; the set being audited is then also
    given up when it could not be certified by the lot's deadline even if each of the
    ``⌈(frozen_at + DESIGN.lot_answers − at) · audit_share⌉`` audits still to come named the frozen
    label (module docstring, "Lots"). This changes no verdict, only when the lot ends.
    """
    cache = {} if cache is None else cache
    verdicts = []
    for layer, (test, (lo, hi)) in enumerate(zip(lot.tests, lot.layer_spans, strict=True)):
        seen = known[lo:hi]
        prefix = int(np.argmin(seen)) if not seen.all() else hi - lo
        kept = cache.get(layer)
        if kept is None or kept[0] != prefix:
            kept = (prefix, test.verdict(np.cumsum(wrong[lo : lo + prefix])))
            cache[layer] = kept
        verdicts.append(kept[1])
    certified = 0
    for j, size in enumerate(lot.set_sizes):
        ok, hopeless = lot.promise.judge(tuple(verdicts[: j + 1]), size)
        if not ok:
            if not hopeless and at is not None:
                audits_left = math.ceil(max(lot.frozen_at + DESIGN.lot_answers - at, 0) * lot.audit_share)
                hopeless = not _certified_if_right(lot, tuple(verdicts[: j + 1]), wrong, audits_left)
            # The first set not certified: its last layer is audited, unless it cannot be.
            return tuple(verdicts), certified, None if hopeless else j
        certified = j + 1
    return tuple(verdicts), certified, None


def _certified_if_right(lot: Lot, verdicts: tuple[SetVerdict, ...], wrong: np.ndarray, audits: int) -> bool:
    """Whether the set of the layers ``verdicts`` judge would be certified if its last layer's
    audited prefix grew by ``audits`` audits (as far as the layer goes), each naming the frozen
    label."""
    layer = len(verdicts) - 1
    lo, hi = lot.layer_spans[layer]
    prefix = verdicts[layer].audited
    more = min(audits, hi - lo - prefix)
    hoped = np.concatenate([wrong[lo : lo + prefix], np.zeros(more, dtype=bool)])
    ok, _ = lot.promise.judge((*verdicts[:layer], lot.tests[layer].verdict(np.cumsum(hoped))), lot.set_sizes[layer])
    return ok


def _evaluate(lot: Lot, first_at: np.ndarray, first_label: np.ndarray) -> Callable[[int], LotState]:
    """The lot's state from the first verdicts given before a checkpoint (not yet ended)."""
    given_at = first_at[lot.items]
    names_another = first_label[lot.items] != lot.labels
    cache: dict[int, tuple[int, SetVerdict]] = {}

    def at(point: int) -> LotState:
        known = given_at < point
        verdicts, certified, current = judge_lot(lot, known, known & names_another, cache, at=point)
        return LotState(lot, verdicts, certified, current, None)

    return at


def run_loop(
    log: VerdictLog,
    *,
    n_items: int,
    items_at: Callable[[int], ItemsAt],
    model: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]],
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
        ``model(candidates)``: each item's label, score (> 0: the model would label it; higher:
        surer) and DST-PLL margin (:class:`engine.lot_model.LotModel`).
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
    checkpoint = (len(log) // DESIGN.statement_every) * DESIGN.statement_every
    first_at, first_label = log.first_verdicts(n_items)
    reuse = dict(known or {})
    frozen: dict[int, Lot | None] = {}
    states: list[LotState] = []
    delivered = np.zeros(n_items, dtype=bool)
    wealth, rank = 1.0, 1  # the promise not yet spent; the next lot's place in the series
    at = 0
    while True:
        # A lot after one that certified nothing is piloted (module docstring).
        piloted = bool(states) and states[-1].certified == 0
        cached = reuse.get(at, False)
        if cached is None or (isinstance(cached, Lot) and cached.number == len(states) + 1):
            lot = cached
        else:
            lot = _freeze(
                len(states) + 1,
                at,
                items_at(at),
                delivered,
                model,
                settings_at(at),
                key,
                session,
                wealth=wealth,
                rank=rank,
                piloted=piloted,
            )
        if at < len(log):
            # Sealed: the verdict after it exists, so the events and settings it was frozen from
            # are fixed. A lot frozen at the last verdict is provisional until the next one
            # (an undo or a change of settings before it still counts), so it is not kept.
            frozen[at] = lot
        if lot is None:
            # Nothing could be frozen: look again later, unless nothing is left to label.
            open_items = int(_open(items_at(at), delivered).sum())
            retry = at + DESIGN.retry_answers if open_items else None
            if retry is None or retry > checkpoint:
                out = retry is not None and not _could_certify(
                    open_items, int(delivered.sum()), settings_at(at), wealth, piloted=piloted
                )
                return Loop(tuple(states), checkpoint, len(log), retry, frozen, wealth, out)
            at = retry
            continue
        state_at = _evaluate(lot, first_at, first_label)
        state = state_at(at)
        for point in range(at + DESIGN.statement_every, checkpoint + 1, DESIGN.statement_every):
            state = state_at(point)
            if state.current is None or point >= at + DESIGN.lot_answers:
                state = dataclasses.replace(state, ended_at=point)
                break
        states.append(state)
        delivered[state.lot.items[state.certified_mask]] = True
        ended = state.ended_at
        if ended is None:
            return Loop(tuple(states), checkpoint, len(log), at + DESIGN.lot_answers, frozen, wealth)
        wealth = max(wealth - state.share_spent, 0.0)
        rank += state.share_spent > 0
        at = ended


def _could_certify(open_items: int, stated: int, settings: LoopSettings, wealth: float, *, piloted: bool) -> bool:
    """Whether all of ``wealth`` could certify a set of a lot made of every one of the ``open_items``."""
    return bool(_layer_tests(settings.make_promise(), open_items, stated, wealth, piloted=piloted)[0])


def _open(items: ItemsAt, delivered: np.ndarray) -> np.ndarray:
    """The items a lot may take: two or more candidates, no verdict, not delivered."""
    free: np.ndarray = (np.asarray(items.candidates).sum(axis=1) >= 2) & ~np.asarray(items.settled) & ~delivered
    return free


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
    skipped_at_end: int = 0,
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
    skipped_at_end : int, default=0
        The last ``skipped_at_end`` items of ``ranked`` are skipped ones: they are served after
        every other item and every audit, audits among them too.
    top : int, optional
        Stop after this many items.

    Returns
    -------
    ServedOrder
    """
    ranked = np.asarray(ranked, dtype=np.int64)
    queue = np.asarray(queue, dtype=np.int64)
    if skipped_at_end > 0:
        first = served_order(
            ranked[:-skipped_at_end], queue, base=base, audit_share=audit_share, uniforms=uniforms, top=top
        )
        if top is not None and first.positions.size >= top:
            return first
        tail = ranked[-skipped_at_end:]
        if top is not None:
            tail = tail[: max(int(top), 0) - first.positions.size]
        return ServedOrder(
            np.concatenate([first.positions, tail]), np.concatenate([first.audit, np.zeros(tail.size, dtype=bool)])
        )
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
