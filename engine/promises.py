"""The two promises a statement about model labels can make, and the test each runs on a set of them.

A **set** is a fixed collection of ``N`` model labels, frozen before any of them is audited;
``E`` of them are wrong (unknown, fixed). It is audited in a uniformly random order drawn when
it is frozen; only the **prefix** of that order whose right labels are all known is read, so a
skipped audit holds the sample back instead of being left out. A set is **certified** when its
test says so; certification is final, and the statement is about the set as it is handed back:
its items an expert answered carry the expert's label, the others the frozen model label, so
the set holds at most ``E`` wrong labels whatever was answered afterwards.

With confidence (:class:`ConfidencePromise`)
    "At most ``t`` of these labels are wrong, with confidence ``1 − δ``": with probability at
    least ``1 − δ``, no certified set ever holds more than ``t N`` wrong labels, read whenever
    and as often as one likes. The test is an anytime-valid confidence sequence for ``E``
    (Waudby-Smith and Ramdas [1]_, prior–posterior ratio): given ``E``, a prefix of length ``n``
    with ``k`` wrong labels has the sequential hypergeometric likelihood ``L_n(E)``; with a
    beta-binomial prior, whose marginal is ``m_n = B(a + k, b + n − k) / B(a, b)``, the ratio
    ``m_n / L_n(E*)`` is a non-negative martingale at the truth, so by Ville's inequality the sets
    ``C_n = {E : L_n(E) > δ m_n}`` cover ``E*`` at every ``n`` at once with probability
    ``1 − δ``. Their running intersection is used, so the upper end only falls: a set is
    certified at the first ``n`` where it is at most ``t N``, and stays certified. The prior
    (``a = 1``, ``b = 4 / t``) decides where the sequence is tight, not whether it is valid.

On average (:class:`AveragePromise`)
    "At most ``t`` of these labels are wrong on average": the expected share of wrong labels
    among the certified sets, at any moment a person reads (0 when nothing is certified), is at
    most ``t``. The test is a sequential sampling plan (:class:`SamplingPlan`, Dodge and Romig's
    average outgoing quality [2]_, a Wald acceptance line [3]_): accept at the first prefix
    ``n`` in ``start … last`` holding at most ``⌊s (n − start)⌋`` wrong labels. Accepted at
    ``τ`` with ``X_τ`` wrong found, the set hands back at most ``E − X_τ`` wrong labels among
    ``N``, at most ``(E − X_τ) / (N − τ)`` of them; the plan's worst expectation of this,
    ``max_E AOQ(E)``, computed exactly by dynamic programming (:func:`outgoing_quality`), is at
    most its budget (or, charged by how its test ended, its budget times its expected charge:
    "Charges by how a test ended" below). After acceptance, later answers only correct labels, so the bound holds at
    every later read too.

Several sets
    A session tests several disjoint parts (the layers of its lots) one after another
    (:mod:`engine.labelling_loop`); the statement is about the union of the certified ones. Each
    part gets a **share** ``s_u`` of the promise; the shares of a session sum to at most 1.

    With confidence, the share is of ``δ``: a union bound, so every certified part's sequence
    covers its wrong labels at once with probability ``1 − δ``.

    On average, a part is also read among the labels stated before it: when part ``u`` (``N_u``
    labels, ``w_u`` of them wrong as handed back) is certified, at least ``A_u`` labels are stated
    with it (those certified before its lot was frozen, the parts of its set, itself), and stated
    labels stay stated. So at any read the share wrong is ``Σ w_u / M ≤ Σ w_u / A_u`` over the
    certified parts, and its expectation is at most ``Σ (N_u / A_u) · AOQ_u``. Giving part ``u``
    the budget ``AOQ_u ≤ t · s_u · A_u / N_u`` (``A_u`` known when its plan is made, before any of
    its audits) keeps the sum at most ``t``: a late part, read among many labels already stated,
    gets a larger budget than its share alone would give. Each budget is capped at ``t``, so no
    part is certified dirtier than the promise.

    **Two layers read by their worst read.** A lot frozen on average while nothing is stated
    is cut into two layers, its best labels and the next ones (``N_1``, ``N_2``; ``A_1 = N_1``,
    ``A_2 = N_1 + N_2``), charged for what its worst read can hold instead of the sum above
    (:func:`pair_charges`). After its first layer is accepted a read holds ``D_1 = W_1 / A_1``
    wrong, after both ``D_2 = (W_1 + W_2) / A_2``, so the lot adds at most ``1{acc_1} D_1 +
    1{acc_2} (D_2 − D_1)⁺`` to any read's share, with ``D_2 − D_1 = W_2 / A_2 − W_1 N_2 / (A_1
    A_2)``. The first term's expectation is at most ``F(E_1) = N_1 AOQ_1(E_1) / A_1``. The second
    layer is audited only after the first is accepted, in an order of its own, and then the first
    hands back at least ``E_1 − a_1`` wrong labels (``a_1``: the most its plan finds and still
    accepts) and the second at most ``E_2``; so, given that the second layer's test reads an audit
    (probability ``q ≤ P_1(E_1)``), the second term's expectation is at most ``R(E_1) = max_{E_2}
    P_2(E_2) (E_2 / A_2 − (E_1 − a_1)⁺ N_2 / (A_1 A_2))⁺``. The first layer holds ``c_1 = max
    F`` of the promise (as a share wrong) and the second ``c_2 = max_{E_1} ((F(E_1) − c_1) /
    P_1(E_1) + R(E_1))``, each spent once its test reads an audit, so that ``F + q R ≤ c_1 + q
    c_2`` at ``q = 0`` and ``q = P_1``, and so at every ``q`` between. Both layers take the
    highest common rate whose ``c_1 + c_2`` is at most ``t`` times the lot's share
    (:meth:`AveragePromise.pair_tests`). That sum is about four fifths of the two plans' worst
    outgoing qualities added up as above, so the same share tests both layers at a higher rate;
    and a lot whose first layer fails spends only ``c_1``.

Pilots
    A part's share is put at risk only once its test may certify it. A part may be **piloted**
    (:mod:`engine.labelling_loop` decides which before the part is frozen): the first
    ``DESIGN.pilot_audits`` audits of its order are then a pilot (:class:`PilotedTest`), which
    certifies nothing. A pilot with more wrong labels than :func:`pilot_allowance` allows makes
    the part hopeless; a part exactly as wrong as the rate its test holds it to
    (``SetTest.rate``: the target with confidence, the plan's budget on average) passes with
    probability at least ``DESIGN.pilot_pass``. After a passed pilot, the part's own test starts on
    its other items. Given what the pilot found, those are still audited in a uniformly random
    order, so the test is valid given the pilot, at the share fixed before it.

    The share is spent only once the test has read an audit (``SetVerdict.at_risk``). With
    confidence, the chance that some part's sequence misses is then at most
    ``Σ_u δ s_u P(u's test reads an audit)``: ``δ`` times the expected sum of the shares spent.
    On average, a part whose test read nothing hands back nothing, so the expected share wrong is
    at most the expected sum of the budgets spent. The shares spent sum to at most 1 on every
    course of the audits, so both promises hold, while a dirty part fails its pilot within a few
    audits and spends nothing. The pilot's items are answered, so the set hands them back right.

Charges by how a test ended
    On average, a part's test need not spend its whole share whenever it reads an audit: it is
    enough that, at every number of wrong labels, its expected charge (a fraction of its share)
    times its budget covers its plan's outgoing quality (:mod:`engine.end_charges`). A part
    tested on its own, not one of a pair, gets a plan at ``DESIGN.average_plan_headroom`` times
    its budget and is charged by how its test ended (``SetVerdict.charge``): accepted or
    rejected at which audit, each end's charge the least a linear programme finds; a test its lot
    cut short is charged in full. The shares charged still sum to at most 1 on every course of
    the audits, so the argument above holds with the charges in place of the shares. A part about
    as wrong as its budget spends most of its share; a part far dirtier is rejected within a few
    audits and spends a small part of it (0.3–21 % when 30 % wrong, a thousandth when every audit
    is wrong, in the sets ``benchmarks.bench_lots`` measures), so a dirty lot no longer uses up the
    promise the lots after it need.

Both promises assume the audited answers are right.

References
----------
.. [1] I. Waudby-Smith and A. Ramdas, "Confidence sequences for sampling without replacement",
       NeurIPS 2020. arXiv:2006.04347.
.. [2] H. F. Dodge and H. G. Romig, "Sampling Inspection Tables: Single and Double Sampling",
       2nd ed., Wiley, 1959 (AOQL plans); ISO 2859-1.
.. [3] A. Wald, "Sequential Analysis", Wiley, 1947, Ch. 5.
.. [4] A. N. Angelopoulos, S. Bates, E. J. Candès, M. I. Jordan and L. Lei, "Learn then Test:
       Calibrating Predictive Algorithms to Achieve Risk Control", arXiv:2110.01052, 2021.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np

from engine._validation import check_count, check_level
from engine.end_charges import end_charges, end_distribution
from engine.exceptions import InvalidInput
from engine.loop_design import DESIGN, SERIES_FIRST_SHARE

__all__ = [
    "PROMISES",
    "EXACT_LOT_SIZE",
    "SetVerdict",
    "SetTest",
    "pilot_allowance",
    "PilotedTest",
    "part_test",
    "Promise",
    "ConfidencePromise",
    "AveragePromise",
    "make_promise",
    "error_rate_prior",
    "log_beta",
    "SamplingPlan",
    "average_plan",
    "outgoing_quality",
    "worst_outgoing",
    "pair_charges",
    "pair_plans",
    "lot_error_bounds",
    "audits_to_certify",
]

#: The names of the two promises (what the store and the command line call them).
PROMISES: tuple[str, ...] = ("confidence", "average")

#: Sets up to this size have their plan's outgoing quality checked at every ``E``; larger ones
#: on a grid of ``E`` with a bound between its points (:func:`worst_outgoing`).
EXACT_LOT_SIZE = 5_000


@dataclass(frozen=True)
class SetVerdict:
    """What a set's audited prefix says now.

    Attributes
    ----------
    audited : int
        Length of the audited prefix.
    wrong : int
        Wrong frozen labels in it.
    certified : bool
        The set's test certifies it (final).
    hopeless : bool
        No further audit can certify it.
    wrong_bound : int or None
        With confidence: the upper end of the confidence sequence for the set's wrong labels;
        None on average (which bounds no single set).
    wrong_floor : int or None
        With confidence: its lower end.
    at_risk : bool
        Its test has read an audit it could certify on, so its share of the promise is spent
        (module docstring, "Pilots").
    charge : float
        The fraction of its share it spends if it is at risk: 1, but on average, once a set
        charged by its end has ended, that end's charge (module docstring, "Charges by how a
        test ended").
    """

    audited: int
    wrong: int
    certified: bool
    hopeless: bool
    wrong_bound: int | None = None
    wrong_floor: int | None = None
    at_risk: bool = True
    charge: float = 1.0


class SetTest(Protocol):
    """The test of one frozen set (one per promise)."""

    @property
    def size(self) -> int:
        """Labels in the set."""
        ...

    @property
    def rate(self) -> float:
        """The share of wrong labels it tests the set against (what its pilot allows)."""
        ...

    def verdict(self, prefix_errors: np.ndarray) -> SetVerdict:
        """``prefix_errors[j − 1]``: wrong labels in the first ``j`` of the audited prefix."""
        ...


class Promise(Protocol):
    """What a statement means; makes the test of each set it is given a share of."""

    @property
    def name(self) -> str:
        """One of :data:`PROMISES`."""
        ...

    @property
    def target(self) -> float:
        """The error rate promised."""
        ...

    @property
    def first_lot_share(self) -> float:
        """Lot 1's share of the promise in a session; the lots after it share the rest
        (:func:`engine.labelling_loop.lot_share`)."""
        ...

    @property
    def read_among_stated(self) -> bool:
        """Whether a set's test is eased by the labels it is stated with (``among`` in
        :meth:`test`; module docstring, "Several sets")."""
        ...

    def test(self, size: int, share: float, *, among: int | None = None) -> SetTest | None:
        """The test of a set of ``size`` labels with ``share`` of the promise, or None when
        such a set could never be certified. ``among``: the fewest labels it is stated with,
        itself included (module docstring, "Several sets"); ``size`` when not given."""
        ...

    def judge(self, parts: tuple[SetVerdict, ...], size: int) -> tuple[bool, bool]:
        """Whether the union of disjoint sets (``size`` labels), each with its own test's
        verdict, is certified, and whether it is hopeless."""
        ...


def _prefix(prefix_errors: np.ndarray) -> tuple[np.ndarray, int, int]:
    """The cumulative wrong counts of an audited prefix, its length and its wrong labels."""
    errors = np.asarray(prefix_errors, dtype=np.int64)
    n = int(errors.size)
    return errors, n, int(errors[-1]) if n else 0


@dataclass(frozen=True)
class ConfidenceTest:
    """The confidence sequence of one set (module docstring) at miscoverage ``alpha``."""

    size: int
    target: float
    alpha: float

    @property
    def rate(self) -> float:
        return self.target

    def verdict(self, prefix_errors: np.ndarray) -> SetVerdict:
        errors, n, k = _prefix(prefix_errors)
        low, high = _running_bounds(self.size, errors, self.alpha, self.target)
        allowed = self.target * self.size
        return SetVerdict(n, k, high <= allowed, low > allowed, high, low, at_risk=n > 0)


@dataclass(frozen=True)
class AverageTest:
    """The sequential sampling plan of one set (module docstring); charged by how it ended when
    ``budget`` is given (module docstring, "Charges by how a test ended"), in full otherwise."""

    size: int
    plan: SamplingPlan
    budget: float | None = None

    @property
    def rate(self) -> float:
        """Its plan's rate: the plan accepts a set this wrong more often than not."""
        return self.plan.slope

    def verdict(self, prefix_errors: np.ndarray) -> SetVerdict:
        errors, n, k = _prefix(prefix_errors)
        accepted_at = self.plan.accepted_at(errors)
        accepted = accepted_at >= 0
        hopeless = not accepted and (n >= self.plan.last or k > self.plan.last_acceptance_number)
        charge = 1.0
        if self.budget is not None and (accepted or hopeless):
            charge = end_charges(self.plan, self.budget).charge(self.plan, errors, accepted_at)
        return SetVerdict(n, k, accepted, hopeless, at_risk=n > 0, charge=charge)


def pilot_allowance(rate: float, audits: int | None = None) -> int:
    """Most wrong labels a pilot of ``audits`` (``DESIGN.pilot_audits`` when not given) may hold
    and pass: the smallest ``c`` with ``P(Binomial(audits, rate) ≤ c) ≥ DESIGN.pilot_pass``.

    >>> pilot_allowance(0.05), pilot_allowance(0.01)
    (2, 1)
    """
    rate = check_level(rate, "rate")
    audits = DESIGN.pilot_audits if audits is None else int(audits)
    below = 0.0
    for c in range(audits + 1):
        below += math.comb(audits, c) * rate**c * (1.0 - rate) ** (audits - c)
        if below >= DESIGN.pilot_pass:
            return c
    return audits


@dataclass(frozen=True)
class PilotedTest:
    """A part's test after its pilot (module docstring, "Pilots"): ``inner`` tests the part's
    items after the first ``pilot`` of its audit order."""

    size: int
    pilot: int
    allowed: int
    inner: SetTest

    @property
    def rate(self) -> float:
        return self.inner.rate

    def verdict(self, prefix_errors: np.ndarray) -> SetVerdict:
        errors, n, k = _prefix(prefix_errors)
        found = int(errors[min(n, self.pilot) - 1]) if n else 0
        if found > self.allowed:
            return SetVerdict(n, k, False, True, at_risk=False)
        if n <= self.pilot:
            return SetVerdict(n, k, False, False, at_risk=False)
        after = self.inner.verdict(errors[self.pilot :] - errors[self.pilot - 1])
        return dataclasses.replace(after, audited=n, wrong=k)


def part_test(
    promise: Promise, size: int, share: float, *, among: int | None = None, piloted: bool = False
) -> SetTest | None:
    """``promise``'s test of a part of ``size`` labels with ``share`` of it (:meth:`Promise.test`),
    after a pilot when ``piloted`` (module docstring, "Pilots"); None when it could never certify
    the part."""
    if not piloted:
        return promise.test(size, share, among=among)
    rest = int(size) - DESIGN.pilot_audits
    inner = promise.test(rest, share, among=among) if rest > 0 else None
    if inner is None:
        return None
    return PilotedTest(int(size), DESIGN.pilot_audits, pilot_allowance(inner.rate), inner)


@dataclass(frozen=True)
class ConfidencePromise:
    """ "At most ``target`` wrong, with ``confidence``" (module docstring)."""

    target: float
    confidence: float
    name: ClassVar[str] = "confidence"
    read_among_stated: ClassVar[bool] = False
    # The series' own first term: a larger share for lot 1 was measured on average only
    # (docs/loop_design.md, average_first_lot_share).
    first_lot_share: ClassVar[float] = SERIES_FIRST_SHARE

    def __post_init__(self) -> None:
        check_level(self.target, "target")
        check_level(self.confidence, "confidence")

    def test(self, size: int, share: float, *, among: int | None = None) -> ConfidenceTest | None:
        alpha = (1.0 - self.confidence) * share
        needed = audits_to_certify(size, target=self.target, alpha=alpha)
        # A set mostly audited before it could be certified would hand back little.
        return ConfidenceTest(size, self.target, alpha) if 0 <= needed <= size // 2 else None

    def judge(self, parts: tuple[SetVerdict, ...], size: int) -> tuple[bool, bool]:
        """Every part's sequence covers its wrong labels at once (a union bound over the parts'
        shares), so their upper ends add up to a bound on the union's."""
        high = sum(int(v.wrong_bound if v.wrong_bound is not None else size) for v in parts)
        low = sum(int(v.wrong_floor or 0) for v in parts)
        return high <= self.target * size, low > self.target * size


@dataclass(frozen=True)
class AveragePromise:
    """ "At most ``target`` wrong on average" (module docstring)."""

    target: float
    name: ClassVar[str] = "average"
    read_among_stated: ClassVar[bool] = True
    first_lot_share: ClassVar[float] = DESIGN.average_first_lot_share

    def __post_init__(self) -> None:
        check_level(self.target, "target")

    def test(self, size: int, share: float, *, among: int | None = None) -> AverageTest | None:
        diluted = share * max(int(among if among is not None else size), size) / size
        budget = self.target * min(1.0, diluted)
        plan = average_plan(size, DESIGN.average_plan_headroom * budget)
        return None if plan is None else AverageTest(size, plan, budget)

    def judge(self, parts: tuple[SetVerdict, ...], size: int) -> tuple[bool, bool]:
        """The union's share of wrong labels is at most the sum of its parts' shares, so it is
        certified once every part is accepted."""
        return all(v.certified for v in parts), any(v.hopeless for v in parts)

    def pair_tests(
        self, first: int, second: int, share: float, *, piloted: bool = False
    ) -> tuple[tuple[SetTest, SetTest], tuple[float, float]] | None:
        """The tests of a lot's two layers of ``first`` and ``second`` labels, nothing stated
        before them, and the shares they hold, charged by their worst read (module docstring,
        "Several sets"), each after a pilot when ``piloted``: the highest common rate whose
        :func:`pair_charges` add up to at most ``target · share`` (:func:`pair_plans`); None when
        no rate does. Layers that each hold ``DESIGN.steep_pair_labels`` labels past their pilots
        get the steeper, longer plans of ``DESIGN.steep_pair_slope_factor`` and
        ``DESIGN.steep_pair_audits``: with thousands of labels at stake, a plan that accepts a
        layer as wrong as its rate more surely is worth its later start.

        >>> tests, shares = AveragePromise(0.05).pair_tests(1000, 900, 0.6)
        >>> round(tests[0].rate, 4), tests[0].rate == tests[1].rate, [round(s, 3) for s in shares]
        (0.0253, True, [0.497, 0.1])
        """
        first, second, pilot = int(first), int(second), DESIGN.pilot_audits if piloted else 0
        steep = min(first, second) - pilot >= DESIGN.steep_pair_labels
        found = pair_plans(
            first,
            second,
            self.target,
            self.target * min(float(share), 1.0),
            pilot,
            slope_factor=DESIGN.steep_pair_slope_factor if steep else 1.0,
            audits=DESIGN.steep_pair_audits if steep else None,
        )
        if found is None:
            return None
        plan1, plan2, charges = found
        shares = (charges[0] / self.target, charges[1] / self.target)
        tests = (AverageTest(first - pilot, plan1), AverageTest(second - pilot, plan2))
        if not piloted:
            return tests, shares
        return (
            PilotedTest(first, pilot, pilot_allowance(plan1.slope), tests[0]),
            PilotedTest(second, pilot, pilot_allowance(plan2.slope), tests[1]),
        ), shares


@functools.lru_cache(maxsize=256)
def pair_plans(
    first: int,
    second: int,
    target: float,
    limit: float,
    pilot: int = 0,
    *,
    slope_factor: float = 1.0,
    audits: int | None = None,
) -> tuple[SamplingPlan, SamplingPlan, tuple[float, float]] | None:
    """The plans of :meth:`AveragePromise.pair_tests` and their charges: the highest rate, on a
    grid of 64 steps up to ``1.5 · limit`` (and never above the target, like every budget), whose
    charges add up to at most ``limit``; the plans of that shape (:func:`average_plan`; the
    loop's by default) test each layer's labels past its ``pilot``. The first charge is its plan's
    worst outgoing quality, close to the rate, so no higher rate fits; a higher rate only raises
    the charges, so each try halves the steps left.

    >>> plan1, plan2, charges = pair_plans(1000, 900, 0.05, 0.03)
    >>> round(plan1.slope, 4), plan1.slope == plan2.slope, [round(c / 0.05, 3) for c in charges]
    (0.0253, True, [0.497, 0.1])
    """
    found = None
    low, high = 0, 64
    while low < high:
        step = (low + high + 1) // 2
        rate = min(1.5 * limit, target) * step / 64
        plan1, plan2 = (
            average_plan(size - pilot, rate, slope_factor=slope_factor, audits=audits) for size in (first, second)
        )
        charges = pair_charges(plan1, plan2, first, second) if plan1 and plan2 else None
        if plan1 and plan2 and charges is not None and sum(charges) <= limit:
            found, low = (plan1, plan2, charges), step
        else:
            high = step - 1
    return found


def make_promise(name: str, *, target: float, confidence: float) -> ConfidencePromise | AveragePromise:
    """The promise called ``name`` (:data:`PROMISES`); ``confidence`` is read only by "confidence".

    >>> make_promise("average", target=0.05, confidence=0.9)
    AveragePromise(target=0.05)
    """
    if name == "confidence":
        return ConfidencePromise(target, confidence)
    if name == "average":
        return AveragePromise(target)
    raise InvalidInput(f"promise must be one of {', '.join(PROMISES)}; got {name!r}")


def audits_to_certify(size: int, *, target: float, alpha: float) -> int:
    """Fewest audits, all right, that certify a set of ``size`` labels with confidence
    ``1 − alpha`` (-1: none do).

    >>> audits_to_certify(1000, target=0.05, alpha=0.075)
    59
    """
    big_n = check_count(size, "size")
    target, alpha = check_level(target, "target"), check_level(alpha, "alpha")
    if big_n == 0 or _bounds(big_n, big_n, 0, alpha, target)[1] > target * big_n:
        return -1
    lo, hi = 0, big_n  # with no wrong label the upper end falls as the prefix grows
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _bounds(big_n, mid, 0, alpha, target)[1] <= target * big_n else (mid + 1, hi)
    return lo


def error_rate_prior(target: float) -> tuple[float, float]:
    """The confidence sequence's beta prior ``(a, b)`` on a set's error rate (module docstring);
    :mod:`engine.estimates` draws its simulated error rates from it too."""
    return 1.0, 4.0 / target


def log_beta(x: float, y: float) -> float:
    """``log B(x, y)`` for the scalars of the prior: ``math.lgamma`` keeps ``scipy.special``
    (0.1-0.3 s to import) out of a command that only reads the high-probability promise's
    verdict (issue 32)."""
    return math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)


@functools.lru_cache(maxsize=65536)
def _bounds(lot_size: int, audited: int, errors: int, alpha: float, target: float) -> tuple[int, int]:
    """The confidence sequence's interval; trusts its input (see :func:`lot_error_bounds`).

    ``log L_n`` is log-concave in ``E`` with its mode at ``⌊(N + 1) k / n⌋`` (the ratio
    ``L(E + 1) / L(E)`` is at least 1 exactly below it), so each end of ``C_n`` is found by
    bisection on one side of the mode: ``O(log N)`` evaluations, not ``O(N)``, which the running
    intersection pays once per prefix.
    """
    n, k, big_n = audited, errors, lot_size
    if n == 0:
        return 0, big_n
    a, b = error_rate_prior(target)
    level = math.log(alpha) + log_beta(a + k, b + n - k) - log_beta(a, b)
    lowest, highest = k, big_n - (n - k)
    drawn = math.lgamma(big_n + 1) - math.lgamma(big_n - n + 1)

    def inside(e: int) -> bool:
        log_lik = (
            math.lgamma(e + 1)
            - math.lgamma(e - k + 1)
            + math.lgamma(big_n - e + 1)
            - math.lgamma(big_n - e - (n - k) + 1)
        )
        return log_lik - drawn > level

    mode = min(max((big_n + 1) * k // n, lowest), highest)
    if not inside(mode):  # cannot happen at the truth; keep the interval honest anyway
        return k, highest
    left, right = lowest, mode  # the smallest E inside
    while left < right:
        mid = (left + right) // 2
        left, right = (left, mid) if inside(mid) else (mid + 1, right)
    low = left
    left, right = mode, highest  # the largest E inside
    while left < right:
        mid = (left + right + 1) // 2
        left, right = (mid, right) if inside(mid) else (left, mid - 1)
    return low, left


@dataclass(frozen=True)
class SamplingPlan:
    """A lot's sequential sampling plan under the average promise (module docstring).

    Accepted at the first audited prefix ``n`` with ``start ≤ n ≤ last`` holding at most
    :meth:`acceptance_number` ``(n) = ⌊slope · (n − start)⌋`` wrong labels; never after ``last``.
    """

    lot_size: int
    start: int
    slope: float
    last: int

    def acceptance_number(self, n: Any) -> np.ndarray:
        """Most wrong labels a prefix of ``n`` may hold to be accepted there (-1: not at ``n``)."""
        n = np.asarray(n, dtype=np.int64)
        # The tolerance keeps a product like 0.03 × 100 = 2.9999… at 3 on every platform.
        number = np.floor(self.slope * (n - self.start) + 1e-9).astype(np.int64)
        return np.where((n >= self.start) & (n <= self.last), number, -1)

    @functools.cached_property
    def last_acceptance_number(self) -> int:
        """:meth:`acceptance_number` at ``last``: more wrong labels than this and the set is hopeless."""
        return int(self.acceptance_number(self.last))

    def accepted_at(self, prefix_errors: np.ndarray) -> int:
        """The prefix where the plan accepted (``prefix_errors[j − 1]`` wrong labels in the first
        ``j``), or -1."""
        n = np.arange(1, prefix_errors.size + 1)
        hits = np.flatnonzero(np.asarray(prefix_errors) <= self.acceptance_number(n))
        return int(n[hits[0]]) if hits.size else -1


def outgoing_quality(plan: SamplingPlan, errors: Any) -> tuple[np.ndarray, np.ndarray]:
    """``AOQ(E)`` and the probability of acceptance, exactly, for each ``E`` in ``errors``.

    ``AOQ(E) = E[(E − X_τ) / (N − τ) · 1{accepted}]`` over the lot's uniformly random audit
    order (module docstring), from the probability of each way its test can end
    (:func:`engine.end_charges.end_distribution`).

    >>> plan = SamplingPlan(lot_size=1000, start=15, slope=0.03, last=150)
    >>> aoq, accepted = outgoing_quality(plan, [0, 20, 80])
    >>> [round(float(v), 3) for v in aoq], [round(float(v), 2) for v in accepted]
    ([0.0, 0.019, 0.025], [1.0, 0.95, 0.31])
    """
    accepted, _, aoq = end_distribution(plan, errors)
    return aoq, accepted.sum(axis=1)


def worst_outgoing(plan: SamplingPlan, budget: float) -> float:
    """An upper bound on ``max_E AOQ(E)``, exact up to :data:`EXACT_LOT_SIZE` items (module
    docstring). Only its comparison with ``budget`` matters: past the ``E`` where acceptance
    is at most ``budget`` likely, that probability stands for the rest."""
    big_n = plan.lot_size
    if big_n <= EXACT_LOT_SIZE:
        # Up to a quarter of the lot first: acceptance is rare beyond, and P_acc bounds the rest.
        reach = min(big_n, max(64, big_n // 4))
        while True:
            aoq, accepted = outgoing_quality(plan, np.arange(reach + 1))
            if reach == big_n or accepted[-1] <= budget:
                return float(max(aoq.max(), accepted[-1] if reach < big_n else 0.0))
            reach = min(big_n, 2 * reach)
    points = _error_grid(big_n)
    aoq, accepted = outgoing_quality(plan, points)
    gaps = np.flatnonzero(np.diff(points) > 1)  # cells with error counts between their ends
    between = points[gaps + 1] * accepted[gaps] / (big_n - plan.last)
    return float(max(aoq.max(), between.max(initial=0.0)))


def _cells(plan: SamplingPlan) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Cells covering every number of wrong labels ``E = 0 … N`` of ``plan``'s set: each
    ``E`` up to 400, then the gaps of a geometric grid (a factor of at most 1.005 apart). For each
    cell: its least and greatest ``E``, and upper bounds on ``P_acc`` and ``AOQ`` over it
    (acceptance only falls as ``E`` grows, and ``AOQ(E) ≤ E · P_acc(E) / (N − last)``)."""
    big_n = plan.lot_size
    points = _error_grid(big_n)
    aoq, accepted = outgoing_quality(plan, points)
    gaps = np.flatnonzero(np.diff(points) > 1)
    low = np.concatenate([points, points[gaps] + 1])
    high = np.concatenate([points, points[gaps + 1] - 1])
    accepted_up = np.concatenate([accepted, accepted[gaps]])
    aoq_up = np.concatenate([aoq, high[points.size :] * accepted[gaps] / (big_n - plan.last)])
    return low, high, accepted_up, aoq_up


def pair_charges(first: SamplingPlan, second: SamplingPlan, first_size: int, second_size: int) -> tuple[float, float]:
    """What each of a lot's two layers must hold of the promise, as shares wrong (the target
    times a share), so that its worst read keeps within what it spends: ``c_1`` once its first
    test reads an audit, ``c_1 + c_2`` once its second does (module docstring, "Several sets").
    The layers hold ``first_size`` and ``second_size`` labels, nothing stated before them;
    ``first`` and ``second`` test each layer's labels past its pilot, if any (a pilot's labels are
    answered).
    """
    n2 = second_size
    a1, a2 = first_size, first_size + second_size
    low1, _, accepted1, aoq1 = _cells(first)
    _, high2, accepted2, _ = _cells(second)
    alone = aoq1 * first.lot_size / a1
    handed_back = np.maximum(low1 - first.last_acceptance_number, 0) * n2 / (a1 * a2)
    rise = (accepted2[None, :] * np.maximum(high2[None, :] / a2 - handed_back[:, None], 0.0)).max(axis=1)
    first_charge = float(alone.max())
    reached = accepted1 > 0.0
    with np.errstate(over="ignore"):  # ``alone ≤ first_charge``: a tiny acceptance gives −∞, never the maximum
        second_charge = ((alone[reached] - first_charge) / accepted1[reached] + rise[reached]).max(initial=0.0)
    return first_charge, max(float(second_charge), 0.0)


def _error_grid(big_n: int) -> np.ndarray:
    """The error counts a large set's plan is evaluated at: every one up to 400, then a geometric
    grid to ``big_n``, a factor of at most 1.005 apart."""
    points = np.arange(min(big_n, 400) + 1)
    if big_n > 400:
        points = np.unique(np.concatenate([points, np.geomspace(400, big_n, _grid_size(big_n)).round()]))
    return points.astype(np.int64)


def _grid_size(big_n: int) -> int:
    """Points of the geometric grid from 400 to ``big_n``, a factor of at most 1.005 apart."""
    return int(math.ceil(math.log(big_n / 400) / math.log(1.005))) + 1


@functools.lru_cache(maxsize=256)
def average_plan(
    lot_size: int, budget: float, *, slope_factor: float = 1.0, audits: int | None = None
) -> SamplingPlan | None:
    """The sampling plan of a lot under the average promise: ``AOQ(E) ≤ budget`` for every ``E``.

    Slope ``slope_factor · budget`` (at the default 1, a lot as wrong as its budget is accepted
    more often than not), accepted within ``audits`` audits (``DESIGN.average_plan_audits`` by
    default); ``start`` the earliest found by bisection that meets the bound. None when no start
    does (a lot too small). A steeper, longer plan starts later but accepts a set a little cleaner
    than its budget more surely (``benchmarks.lot_accounting``, the plans' table).

    >>> average_plan(1000, 0.03)
    SamplingPlan(lot_size=1000, start=15, slope=0.03, last=150)
    """
    big_n = check_count(lot_size, "lot_size")
    budget = check_level(budget, "budget")
    if not (math.isfinite(slope_factor) and slope_factor >= 1.0):
        raise InvalidInput(f"slope_factor must be at least 1; got {slope_factor}")
    last = min(DESIGN.average_plan_audits if audits is None else check_count(audits, "audits"), big_n - 1)
    if last < 1:
        return None
    slope = slope_factor * budget

    def meets(start: int) -> bool:
        return worst_outgoing(SamplingPlan(big_n, start, slope, last), budget) <= budget

    if not meets(last):
        return None
    lo, hi = 1, last
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if meets(mid) else (mid + 1, hi)
    return SamplingPlan(big_n, lo, slope, last)  # the bisection keeps ``hi`` meeting the bound


def lot_error_bounds(lot_size: int, audited: int, errors: int, *, alpha: float, target: float) -> tuple[int, int]:
    """Anytime-valid bounds on the number of wrong labels in a lot (module docstring).

    Parameters
    ----------
    lot_size : int
        ``N``, the items of the lot.
    audited : int
        ``n``, the length of the audited prefix of the lot's random order, ``0 ≤ n ≤ N``.
    errors : int
        ``k``, the wrong labels among them.
    alpha : float
        Miscoverage of the whole sequence, strictly between 0 and 1.
    target : float
        The error rate the lot is to be certified at (sets the prior: where the sequence is
        tight), strictly between 0 and 1.

    Returns
    -------
    low, high : int
        ``lo_n ≤ E ≤ hi_n`` for every ``n`` at once with probability at least ``1 − alpha``;
        ``(0, N)`` before any audit. Always ``k ≤ low`` and ``high ≤ N − (n − k)``.

    Raises
    ------
    TypeError
        A count is not an integer.
    InvalidInput
        A value is out of range (``audited > lot_size``, ``errors > audited``, a level not in (0, 1)).

    Examples
    --------
    A lot of 1,000 labels, 56 audits all right: at most 47 wrong (4.7 %), whenever this is read.

    >>> lot_error_bounds(1000, 56, 0, alpha=0.1, target=0.05)
    (0, 47)
    >>> lot_error_bounds(1000, 0, 0, alpha=0.1, target=0.05)
    (0, 1000)
    """
    big_n = check_count(lot_size, "lot_size")
    n = check_count(audited, "audited")
    k = check_count(errors, "errors")
    if n > big_n:
        raise InvalidInput(f"audited must be <= lot_size ({big_n}), got {n}")
    if k > n:
        raise InvalidInput(f"errors must be <= audited ({n}), got {k}")
    return _bounds(big_n, n, k, check_level(alpha, "alpha"), check_level(target, "target"))


#: Running intersections already computed, by set size, levels and audited prefix
#: (:func:`_running_bounds`); emptied when it holds this many.
RUNNING_BOUNDS_KEPT = 65_536
_running_kept: dict[tuple[int, float, float, bytes], tuple[int, int]] = {}


def _running_bounds(big_n: int, prefix_errors: np.ndarray, alpha: float, prior: float) -> tuple[int, int]:
    """The running intersection of the sequence's intervals over the prefixes ``1 … n``
    (``prefix_errors[j − 1]`` wrong labels in the first ``j``; module docstring)."""
    low, high = _intersection(big_n, prefix_errors, alpha, prior)
    if prefix_errors.size and (low > high or high < int(prefix_errors[-1])):
        # Empty: the truth is outside some interval, the event of probability ≤ α. Say what
        # the latest interval says rather than a bound below the wrong labels already found.
        return _bounds(big_n, int(prefix_errors.size), int(prefix_errors[-1]), alpha, prior)
    return low, high


def _intersection(big_n: int, prefix_errors: np.ndarray, alpha: float, prior: float) -> tuple[int, int]:
    """The bare running intersection, kept per prefix: a set's verdict is read after every
    answer while its prefix grows by at most one audit, so each read extends the last one's
    intersection instead of walking the whole prefix again."""
    raw = np.ascontiguousarray(prefix_errors, dtype=np.int64).tobytes()
    key = (big_n, alpha, prior, raw)
    kept = _running_kept.get(key)
    if kept is not None:
        return kept
    n = len(raw) // 8
    shorter = _running_kept.get((big_n, alpha, prior, raw[:-8])) if n else None
    low, high, start = (*shorter, n) if shorter is not None else (0, big_n, 1)
    for j in range(start, n + 1):
        lo_j, hi_j = _bounds(big_n, j, int(prefix_errors[j - 1]), alpha, prior)
        low, high = max(low, lo_j), min(high, hi_j)
    if len(_running_kept) >= RUNNING_BOUNDS_KEPT:
        _running_kept.clear()
    _running_kept[key] = (low, high)
    return low, high
