"""Certifying a frozen lot of model labels, valid whenever the result is read.

What is computed
----------------
A **lot** is a fixed set of ``N`` model labels, frozen when it is made: which items, and the
label each gets. ``E`` of them are wrong; ``E`` is unknown but fixed. The lot is audited in a
**random order** ``π`` (a uniformly random permutation of its items, drawn from a secret when
the lot is frozen and independent of everything else): the ``j``-th audit is the ``j``-th item
of ``π``. Any item of the lot whose right label is known (an audit, or an answer to a ranked
query, or another annotator's answer) tells whether its frozen label was right; only the
**prefix** of ``π`` whose outcomes are all known is used as the sample, so a skipped or
disputed audit holds the sequence back instead of being left out.

:func:`lot_error_bounds` gives an **anytime-valid confidence sequence** for ``E``: intervals
``[lo_n, hi_n]`` such that, with probability at least ``1 − α``, *every* ``n`` (every length of
the prefix, hence every moment the result is read and every moment a person stops) has
``lo_n ≤ E ≤ hi_n``. :func:`lot_verdict` turns it into a statement about the labels actually
delivered: the items of the lot nobody has answered, ``D``. Their wrong labels number exactly
``E − k``, where ``k`` counts the answered items of the lot whose frozen label was wrong (every
answered item's outcome is known). So ``(hi_n − k) / |D|`` bounds their error at every moment
at once, in **any** query order: answers to ranked queries only move items from ``D`` to the
answered ones, and are counted in ``k`` when they find a wrong label. A lot is **certified**
when that bound is at most the target.

Derivation (prior–posterior ratio, Waudby-Smith & Ramdas [1]_, Sec. 3)
---------------------------------------------------------------------
Let ``x_1, x_2, …`` be the outcomes (1 wrong) of ``π``'s items. Given ``E``, the probability
of a prefix of length ``n`` holding ``k`` wrong ones is the sequential hypergeometric law::

    L_n(E) = E^(k) (N − E)^(n − k) / N^(n)          (x^(j) the falling factorial)

Put a prior on ``E``: the beta-binomial ``BetaBin(N, a, b)``. Its marginal probability of the
same prefix is the Beta–Bernoulli ``m_n = B(a + k, b + n − k) / B(a, b)`` (a beta-binomial
population is ``N`` Bernoulli draws of a beta-distributed rate, and a random order of it is
still such draws). ``M_n = m_n / L_n(E*)`` at the true ``E*`` is a non-negative martingale with
``M_0 = 1`` under the sampling of ``π`` (a likelihood ratio of the mixture against the truth),
so Ville's inequality gives ``P(∃ n : M_n ≥ 1/α) ≤ α``. Hence the sets

    C_n = { E : L_n(E) > α · m_n }

cover ``E*`` for all ``n`` simultaneously with probability at least ``1 − α``. ``L_n`` is
log-concave in ``E`` (a hypergeometric likelihood), so ``C_n`` is an interval of integers,
computed here exactly by bisection on each side of the likelihood's mode (``O(log N)``). No
correction for reading often is needed, and none for stopping when the result suits the reader.

Since every ``C_j`` covers ``E*`` on the same event, so does their **running intersection**
``C_1 ∩ … ∩ C_n`` (its ends are the largest lower and the smallest upper end so far): the
verdicts use it, so a wrong audit never widens a bound already reached, and a statement made with
confidence is withdrawn only when answers elsewhere leave fewer labels to deliver.

The prior only decides where the sequence is tight, not whether it is valid. ``a = 1`` and
``b = 4 / target`` put most of its weight on error rates below the target (mean ``target / 4``
roughly): with no wrong audit a 5 % statement at ``α = 0.1`` needs 56 audits of a large lot
(Clopper–Pearson at one planned read: 45), and each wrong audit costs about 20 more.

Several lots
------------
Lots are certified one after another (a new lot is frozen when the previous one is settled),
each at its own level ``α_l`` (:func:`lot_alpha`) with ``Σ α_l ≤ α``: each lot's sequence is
valid given everything before it was frozen, so all of them hold at every moment with
probability at least ``1 − α``, and then the wrong labels of all delivered lots together are at
most ``target`` times their number.

The average promise
-------------------
"At most 5 % wrong **on average**" asks less: the expected share of wrong labels among those
delivered, ``E[FDP_τ]`` (0 when nothing is delivered, as in false-discovery-rate control), at
most the target ``t`` at any moment ``τ`` the person chooses to read or export. Acceptance
sampling has measured exactly this for eighty years: the **average outgoing quality** of a
sampling plan, ``AOQ(E)``, the expected error of what a plan lets through from a lot with ``E``
defects, and its worst case over ``E``, the AOQ limit (Dodge and Romig [5]_).

Each lot under the average promise gets a **sequential sampling plan** fixed when it is frozen
(:class:`SamplingPlan`, :func:`average_plan`): it is accepted at the first audited prefix ``n``
in ``start … last`` with at most ``⌊s (n − start)⌋`` wrong labels (a Wald-style acceptance line
[6]_ of slope ``s``; no acceptance after ``last`` audits), and acceptance is final. Write ``τ``
for the prefix where it is accepted and ``X_τ`` for the wrong labels found there. The items of
the lot outside that prefix hold ``E − X_τ`` wrong labels among ``N − τ``, so

    AOQ(E) = E[ (E − X_τ) / (N − τ) · 1{accepted} ],

computed **exactly** by dynamic programming over the sequential hypergeometric law of the audit
order (:func:`outgoing_quality`; ``O(last · E · ⌊s · last⌋)``). Whatever the lot holds,
``AOQ(E) ≤ b`` for every ``E`` is checked when the plan is designed (``start`` is the earliest
meeting it, by bisection): for every ``E`` up to :data:`EXACT_LOT_SIZE` items, and for larger
lots on a grid of ``E`` a factor 1.005 apart, each cell ``(E_i, E_(i+1))`` bounded by
``E_(i+1) P_acc(E_i) / (N − last)`` (acceptance is a decreasing event of the set of wrong items,
so ``P_acc`` falls with ``E``: couple the lots by adding one wrong item). Above the ``E`` where
``P_acc ≤ b`` the bound is ``P_acc`` itself.

The labels delivered from an accepted lot are its items nobody has answered, ``D``, a subset of
the items outside its audited prefix, whose length ``n`` grows past ``τ`` as answers reach the
next items of the audit order: they hold at most ``E − X_n`` wrong labels. The share wrong of the
items outside the prefix, ``M_n = (E − X_n) / (N − n)``, is a martingale in ``n`` (sampling
without replacement), so at any stopping time ``n ≥ τ``, the moment a person reads included,
``E[M_n 1{accepted}] = E[M_τ 1{accepted}] = AOQ(E)`` (optional stopping, ``M`` bounded). Answers
out of the audit order may pick out right labels: a lot delivers only while
``|D| ≥ ρ (N − n)`` (``ρ`` = :data:`AVERAGE_KEPT_SHARE`), so its delivered share wrong is at most
``M_n / ρ`` however those answers chose their items. Lot ``l``'s plan has ``b_l = ρ t c_l`` with
``Σ_l c_l ≤ 1`` (``c_l = lot_share(l)``). At a read, the delivered labels of all lots together are
at most

    FDP ≤ Σ_l M_l / ρ · 1{lot l accepted}

wrong (a share of several lots is at most the sum of their shares; ``M_l`` at the lot's prefix
then), and given everything before lot ``l`` was frozen (its random order is drawn then) the
``l``-th term has expectation ``AOQ_l(E_l) / ρ ≤ t c_l`` at any stopping time. So
``E[FDP_τ] ≤ t`` for every ``τ``, chosen by looking or not. Leaving a lot before it is accepted (a
failing lot, a superseded one) only removes acceptances. The plan is designed for the target the
lot was frozen with; at a lower target it certifies nothing (a new lot is frozen for it).

What this buys over a confidence sequence: a lot about as wrong as ``b`` is accepted after a few
dozen audits most of the time (``docs/results_labels.md``), while a statement with confidence
needs a lot clearly below the target. What it does not promise: any single delivery's error. A
first lot of 1,000 labels 8 % wrong is accepted in 38 % of its audit orders; the promise is the
mean.

References
----------
.. [1] I. Waudby-Smith and A. Ramdas, "Confidence sequences for sampling without replacement",
       NeurIPS 2020. arXiv:2006.04347.
.. [2] I. Waudby-Smith and A. Ramdas, "Estimating means of bounded random variables by
       betting", Journal of the Royal Statistical Society Series B 86(1), 1-27, 2024.
.. [3] J. Ville, "Étude critique de la notion de collectif", Gauthier-Villars, 1939.
.. [4] A. N. Angelopoulos, S. Bates, E. J. Candès, M. I. Jordan and L. Lei, "Learn then Test:
       Calibrating Predictive Algorithms to Achieve Risk Control", arXiv:2110.01052, 2021.
.. [5] H. F. Dodge and H. G. Romig, "Sampling Inspection Tables: Single and Double Sampling",
       2nd ed., Wiley, 1959 (AOQL plans); ISO 2859-1.
.. [6] A. Wald, "Sequential Analysis", Wiley, 1947, Ch. 5 (acceptance lines of sequential plans).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from numbers import Integral
from typing import Any

import numpy as np

from engine._validation import check_choice, check_count, check_level, check_scalar
from engine.exceptions import InvalidInput

__all__ = [
    "PROMISES",
    "LOT_ALPHA_FIRST_SHARE",
    "AVERAGE_PLAN_AUDITS",
    "AVERAGE_KEPT_SHARE",
    "EXACT_LOT_SIZE",
    "LotVerdict",
    "SamplingPlan",
    "average_plan",
    "outgoing_quality",
    "worst_outgoing",
    "OUTCOME_RIGHT",
    "OUTCOME_UNKNOWN",
    "OUTCOME_WRONG",
    "audit_prefix",
    "audits_to_certify",
    "lot_alpha",
    "lot_share",
    "lot_error_bounds",
    "lot_verdict",
]

#: The two promises a statement can make (module docstring).
PROMISES: tuple[str, ...] = ("confidence", "average")

#: Outcomes of a lot item, in the lot's audit order.
OUTCOME_UNKNOWN, OUTCOME_RIGHT, OUTCOME_WRONG = -1, 0, 1

#: Share of the miscoverage ``α`` (or of the average promise's target) spent on the first lot; lot ``l`` gets
#: ``α (1 − r) r^(l−1)`` with ``r = 1 − LOT_ALPHA_FIRST_SHARE`` (a geometric series that sums
#: to ``α``). Most goes to the first lot: the first statement is the one people wait for.
LOT_ALPHA_FIRST_SHARE = 0.75

#: The average promise (module docstring): a lot is accepted within this many audits or never.
#: The first lot's plan accepts a lot 2.7 % wrong with probability about 0.9 within 150 audits;
#: on BirdSong (500 answers, five seeds) 400 delivered the same, and a plan's design takes three
#: times as long (0.1 s for a lot of 1,000 items, once per process).
AVERAGE_PLAN_AUDITS = 150

#: ``ρ``: an accepted lot delivers while at least this share of the items it had outside its
#: audited prefix when accepted are still unanswered. The plan's budget is ``ρ t c_l``.
AVERAGE_KEPT_SHARE = 0.9

#: Lots up to this size have their plan's outgoing quality checked at every ``E``; larger ones
#: on a grid of ``E`` with a bound between its points (module docstring).
EXACT_LOT_SIZE = 5_000


def lot_share(number: int) -> float:
    """Lot ``number``'s share (1, 2, …) of a budget: ``(1 − r) r^(number − 1)``, summing to 1.

    >>> [round(lot_share(l), 5) for l in (1, 2, 3)]
    [0.75, 0.1875, 0.04688]
    """
    check_scalar(number, "number", kind=Integral, min_value=1)
    r = 1.0 - LOT_ALPHA_FIRST_SHARE
    return (1.0 - r) * r ** (int(number) - 1)


def lot_alpha(alpha: float, number: int) -> float:
    """The miscoverage of lot ``number`` (1, 2, …): ``α`` times :func:`lot_share`, summing to ``α``.

    >>> [round(lot_alpha(0.1, l), 5) for l in (1, 2, 3)]
    [0.075, 0.01875, 0.00469]
    """
    return check_level(alpha, "alpha") * lot_share(number)


def _prior(target: float) -> tuple[float, float]:
    return 1.0, 4.0 / target


def _log_beta(x: float, y: float) -> float:
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
    a, b = _prior(target)
    level = math.log(alpha) + _log_beta(a + k, b + n - k) - _log_beta(a, b)
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

    def accepted_at(self, prefix_errors: np.ndarray) -> int:
        """The prefix where the plan accepted (``prefix_errors[j − 1]`` wrong labels in the first
        ``j``), or -1."""
        n = np.arange(1, prefix_errors.size + 1)
        hits = np.flatnonzero(np.asarray(prefix_errors) <= self.acceptance_number(n))
        return int(n[hits[0]]) if hits.size else -1


def outgoing_quality(plan: SamplingPlan, errors: Any) -> tuple[np.ndarray, np.ndarray]:
    """``AOQ(E)`` and the probability of acceptance, exactly, for each ``E`` in ``errors``.

    ``AOQ(E) = E[(E − X_τ) / (N − τ) · 1{accepted}]`` over the lot's uniformly random audit
    order (module docstring): a dynamic programme over the prefixes not yet accepted, by how
    many wrong labels they hold; a prefix past the last acceptance number can never be
    accepted and is dropped.

    >>> plan = SamplingPlan(lot_size=1000, start=15, slope=0.03, last=150)
    >>> aoq, accepted = outgoing_quality(plan, [0, 20, 80])
    >>> [round(float(v), 3) for v in aoq], [round(float(v), 2) for v in accepted]
    ([0.0, 0.019, 0.025], [1.0, 0.95, 0.31])
    """
    big_n = plan.lot_size
    e = np.asarray(errors, dtype=np.float64)[:, None]
    top = int(plan.acceptance_number(plan.last))
    found = np.arange(top + 1, dtype=np.float64)[None, :]
    waiting = np.zeros((e.shape[0], top + 1))
    waiting[:, 0] = 1.0
    aoq = np.zeros(e.shape[0])
    accepted = np.zeros(e.shape[0])
    numbers = plan.acceptance_number(np.arange(plan.last + 1))
    for n in range(plan.last + 1):
        a = int(numbers[n])
        if a >= 0:
            now = waiting[:, : a + 1]
            accepted += now.sum(axis=1)
            aoq += (now * (e - found[:, : a + 1])).sum(axis=1) / (big_n - n)
            waiting[:, : a + 1] = 0.0
        if n == plan.last:
            break
        wrong_next = np.clip((e - found) / (big_n - n), 0.0, 1.0)
        moved = waiting * wrong_next
        waiting -= moved
        waiting[:, 1:] += moved[:, :-1]
    return aoq, accepted


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
    points = np.unique(np.concatenate([np.arange(400), np.geomspace(400, big_n, _grid_size(big_n)).round()]))
    points = points.astype(np.int64)
    aoq, accepted = outgoing_quality(plan, points)
    gaps = np.flatnonzero(np.diff(points) > 1)  # cells with error counts between their ends
    between = points[gaps + 1] * accepted[gaps] / (big_n - plan.last)
    return float(max(aoq.max(), between.max(initial=0.0)))


def _grid_size(big_n: int) -> int:
    """Points of the geometric grid from 400 to ``big_n``, a factor of at most 1.005 apart."""
    return int(math.ceil(math.log(big_n / 400) / math.log(1.005))) + 1


@functools.lru_cache(maxsize=256)
def average_plan(lot_size: int, budget: float) -> SamplingPlan | None:
    """The sampling plan of a lot under the average promise: ``AOQ(E) ≤ budget`` for every ``E``.

    Slope ``budget`` (a lot as wrong as its budget is accepted more often than not, within
    :data:`AVERAGE_PLAN_AUDITS` audits); ``start`` the earliest found by bisection that meets
    the bound. None when no start does (a lot too small).

    >>> average_plan(1000, 0.03)
    SamplingPlan(lot_size=1000, start=15, slope=0.03, last=150)
    """
    big_n = check_count(lot_size, "lot_size")
    budget = check_level(budget, "budget")
    last = min(AVERAGE_PLAN_AUDITS, big_n - 1)
    if last < 1:
        return None

    def meets(start: int) -> bool:
        return worst_outgoing(SamplingPlan(big_n, start, budget, last), budget) <= budget

    if not meets(last):
        return None
    lo, hi = 1, last
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if meets(mid) else (mid + 1, hi)
    return SamplingPlan(big_n, lo, budget, last)  # the bisection keeps ``hi`` meeting the bound


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


def audit_prefix(outcomes: Any) -> tuple[int, int]:
    """Length of the known prefix of ``outcomes`` (in audit order) and its wrong labels.

    >>> audit_prefix([0, 1, 0, -1, 0])
    (3, 1)
    """
    x = np.asarray(outcomes, dtype=np.int64)
    unknown = np.flatnonzero(x == OUTCOME_UNKNOWN)
    n = int(unknown[0]) if unknown.size else int(x.size)
    return n, int((x[:n] == OUTCOME_WRONG).sum())


@dataclass(frozen=True)
class LotVerdict:
    """What a lot's audits say now (:func:`lot_verdict`).

    Attributes
    ----------
    lot_size : int
        ``N``.
    audited : int
        The known prefix of the audit order: the audited answers that back the statement.
    audit_errors : int
        Wrong frozen labels in that prefix.
    known_wrong : int
        Answered items of the lot (audits or not) whose frozen label was wrong: corrected, not delivered.
    delivered : int
        ``|D|``: the lot's items nobody answered, whose frozen label is handed back if certified.
    high : int
        Upper end of the confidence sequence for the lot's wrong labels ``E``.
    low : int
        Lower end.
    error_bound : float
        ``(high − known_wrong) / delivered``, the bound on the delivered labels' error (1.0
        when nothing is delivered).
    certified : bool
        ``error_bound ≤ target`` and something is delivered.
    hopeless : bool
        More audits of this lot cannot certify it: even the lower end leaves more than
        ``target`` of the delivered labels wrong, or (with the countdown) no number of further
        right audits would do.
    audits_left : int
        How many more audits of this lot, all right, would certify it (0 when certified; a
        lower bound, since an audit may find a wrong label; ``-1`` when hopeless or when
        even auditing every remaining item would not).
    """

    lot_size: int
    audited: int
    audit_errors: int
    known_wrong: int
    delivered: int
    high: int
    low: int
    error_bound: float
    certified: bool
    hopeless: bool
    audits_left: int


def _running_bounds(big_n: int, prefix_errors: np.ndarray, alpha: float, prior: float) -> tuple[int, int]:
    """The running intersection of the sequence's intervals over the prefixes ``1 … n``
    (``prefix_errors[j − 1]`` wrong labels in the first ``j``; module docstring)."""
    low, high = 0, big_n
    for j, errors in enumerate(prefix_errors.tolist(), start=1):
        lo_j, hi_j = _bounds(big_n, j, errors, alpha, prior)
        low, high = max(low, lo_j), min(high, hi_j)
    if prefix_errors.size and (low > high or high < int(prefix_errors[-1])):
        # Empty: the truth is outside some interval, the event of probability ≤ α. Say what
        # the latest interval says rather than a bound below the wrong labels already found.
        return _bounds(big_n, int(prefix_errors.size), int(prefix_errors[-1]), alpha, prior)
    return low, high


def _verdict(
    outcomes: np.ndarray,
    answered: np.ndarray,
    *,
    target: float,
    alpha: float,
    with_countdown: bool,
    prior_target: float | None = None,
    promise: str = "confidence",
) -> LotVerdict:
    prior = target if prior_target is None else prior_target
    big_n = int(outcomes.size)
    n, k = audit_prefix(outcomes)
    known_wrong = int(((outcomes == OUTCOME_WRONG) & answered).sum())
    delivered = int((~answered).sum())
    prefix_errors = np.cumsum(outcomes[:n] == OUTCOME_WRONG)
    low, high = _running_bounds(big_n, prefix_errors, alpha, prior)
    bound = (high - known_wrong) / delivered if delivered else 1.0
    if promise == "average":
        certified, hopeless, left = _average_verdict(
            outcomes,
            answered,
            prefix_errors,
            delivered,
            target=target,
            share=alpha,
            prior=prior,
            with_countdown=with_countdown,
        )
        return LotVerdict(big_n, n, k, known_wrong, delivered, high, low, bound, certified, hopeless, left)

    def certifies(m: int, errs: int, d: int) -> bool:
        if d <= 0:
            return False
        # Audits beyond the prefix (all right, in the countdown) only narrow the intersection.
        return (min(high, _bounds(big_n, m, errs, alpha, prior)[1]) - known_wrong) <= target * d

    certified = certifies(n, k, delivered)
    hopeless = delivered == 0 or (low - known_wrong) > target * delivered
    left = 0 if certified else -1
    if with_countdown and not certified and not hopeless:
        left = _countdown(n, k, delivered, answered, outcomes, certifies)
        hopeless = left < 0
    return LotVerdict(big_n, n, k, known_wrong, delivered, high, low, bound, certified, hopeless, left)


def _average_verdict(
    outcomes: np.ndarray,
    answered: np.ndarray,
    prefix_errors: np.ndarray,
    delivered: int,
    *,
    target: float,
    share: float,
    prior: float,
    with_countdown: bool,
) -> tuple[bool, bool, int]:
    """Certified, hopeless and the countdown under the average promise (module docstring)."""
    big_n = int(outcomes.size)
    plan = average_plan(big_n, AVERAGE_KEPT_SHARE * prior * share)
    if plan is None or target < prior * (1.0 - 1e-9):
        return False, True, -1
    accepted = plan.accepted_at(prefix_errors)
    n = int(prefix_errors.size)
    if accepted >= 0:
        # Answers that extend the prefix keep the rest a uniform sample: only the others count.
        certified = 0 < delivered and AVERAGE_KEPT_SHARE * (big_n - n) <= delivered
        return certified, not certified, 0 if certified else -1
    errors = int(prefix_errors[-1]) if n else 0
    if delivered == 0 or n >= plan.last or errors > int(plan.acceptance_number(plan.last)):
        return False, True, -1
    if not with_countdown:
        return False, False, -1
    # Walking the audit order from the prefix on, as in _countdown: answered items add their
    # known outcome at no cost, the others are audited (assumed right) and leave D.
    rest = np.arange(n, plan.last)
    cost = np.cumsum(~answered[rest])
    wrong = errors + np.cumsum(outcomes[rest] == OUTCOME_WRONG)
    length = rest + 1
    left = delivered - cost
    ok = (wrong <= plan.acceptance_number(length)) & (left > 0) & (AVERAGE_KEPT_SHARE * (big_n - length) <= left)
    first = np.flatnonzero(ok)
    return False, first.size == 0, int(cost[first[0]]) if first.size else -1


def _countdown(
    n: int,
    k: int,
    delivered: int,
    answered: np.ndarray,
    outcomes: np.ndarray,
    certifies: Callable[[int, int, int], bool],
) -> int:
    """Fewest further right audits that certify the lot (each audit removes its item from ``D``
    unless it was answered already); -1 if none suffices."""
    # Walking the audit order from the prefix on: an item already answered adds its known
    # outcome at no audit cost, an unanswered one is audited (assumed right) and leaves D.
    rest = np.arange(n, outcomes.size)
    cost = np.cumsum(~answered[rest])
    wrong = k + np.cumsum(outcomes[rest] == OUTCOME_WRONG)
    # The bound only tightens as the prefix grows while nothing wrong is found: bisect.
    lo, hi = 0, rest.size
    found = -1
    while lo < hi:
        mid = (lo + hi) // 2
        if certifies(n + mid + 1, int(wrong[mid]), delivered - int(cost[mid])):
            found, hi = int(cost[mid]), mid
        else:
            lo = mid + 1
    return found


def lot_verdict(
    outcomes: Any,
    answered: Any,
    *,
    target: float,
    alpha: float,
    prior_target: float | None = None,
    promise: str = "confidence",
    countdown: bool = True,
) -> LotVerdict:
    """Whether a lot's delivered labels are certified at ``target`` (module docstring).

    Parameters
    ----------
    outcomes : int array-like of shape (lot_size,)
        In the lot's audit order: :data:`OUTCOME_RIGHT`, :data:`OUTCOME_WRONG` (the item's
        right label is known and differs from its frozen label, "none of these" included) or
        :data:`OUTCOME_UNKNOWN` (no settled answer: never answered, skipped, or disputed).
    answered : bool array-like of shape (lot_size,)
        Items with an expert verdict, in the same order (they are not delivered). An item
        with a known outcome is answered; a disputed one is answered with an unknown outcome.
    target : float
        The error rate to certify, strictly between 0 and 1.
    alpha : float
        This lot's miscoverage (:func:`lot_alpha`).
    prior_target : float, optional
        The target the lot's prior was set for when it was frozen (``target`` by default);
        the certification may use another ``target`` (a changed setting) without harm.
    promise : {"confidence", "average"}, default="confidence"
        ``"confidence"``: the delivered labels are at most ``target`` wrong at every read, with
        probability ``1 − alpha`` (``alpha`` the lot's miscoverage). ``"average"``: their
        expected share of wrong labels at any read is at most ``target`` (``alpha`` is then
        the lot's share ``c_l`` of the target, :func:`lot_share`; its sampling plan is
        :func:`average_plan` at ``AVERAGE_KEPT_SHARE × prior_target × alpha``).
    countdown : bool, default=True
        Compute :attr:`LotVerdict.audits_left` (a bisection over the audit order).

    Returns
    -------
    LotVerdict

    Examples
    --------
    A lot of 400 labels whose first 75 audits are right, and 20 more items answered elsewhere:

    >>> import numpy as np
    >>> outcomes = np.full(400, -1); outcomes[:75] = 0; outcomes[200:220] = 0
    >>> answered = outcomes != -1
    >>> v = lot_verdict(outcomes, answered, target=0.05, alpha=0.075)
    >>> v.certified, v.delivered, v.high
    (True, 305, 15)
    """
    x = np.asarray(outcomes)
    if x.ndim != 1 or (x.size and x.dtype.kind not in "iu"):
        raise InvalidInput(f"outcomes must be a 1-D integer array, got shape {x.shape} and dtype {x.dtype}")
    if x.size and not np.isin(x, (OUTCOME_UNKNOWN, OUTCOME_RIGHT, OUTCOME_WRONG)).all():
        raise InvalidInput("outcomes must hold only -1 (unknown), 0 (right) and 1 (wrong)")
    done = np.asarray(answered)
    if done.shape != x.shape or done.dtype != bool:
        raise InvalidInput(f"answered must be a boolean array of shape {x.shape}, got {done.shape} {done.dtype}")
    if ((x != OUTCOME_UNKNOWN) & ~done).any():
        raise InvalidInput("an item with a known outcome must be answered")
    return _verdict(
        x.astype(np.int64),
        done,
        target=check_level(target, "target"),
        alpha=check_level(alpha, "alpha"),
        with_countdown=bool(countdown),
        prior_target=None if prior_target is None else check_level(prior_target, "prior_target"),
        promise=check_choice(promise, "promise", PROMISES),
    )


def audits_to_certify(lot_size: int, *, target: float, alpha: float, promise: str = "confidence") -> int:
    """Fewest audits, all right, that certify a lot of ``lot_size`` untouched items.

    >>> audits_to_certify(1000, target=0.05, alpha=0.075)
    64
    """
    big_n = check_count(lot_size, "lot_size")
    outcomes = np.full(big_n, OUTCOME_UNKNOWN, dtype=np.int64)
    v = _verdict(
        outcomes,
        np.zeros(big_n, dtype=bool),
        target=check_level(target, "target"),
        alpha=check_level(alpha, "alpha"),
        with_countdown=True,
        promise=check_choice(promise, "promise", PROMISES),
    )
    return v.audits_left
