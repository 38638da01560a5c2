"""engine.lots: the confidence sequence against a direct computation, its coverage over every
prefix, and the promise on delivered labels under every-answer reading and adversarial orders."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.stats import betabinom

from engine.exceptions import InvalidInput
from engine.lots import (
    AVERAGE_KEPT_SHARE,
    EXACT_LOT_SIZE,
    OUTCOME_RIGHT,
    OUTCOME_UNKNOWN,
    OUTCOME_WRONG,
    SamplingPlan,
    audit_prefix,
    audits_to_certify,
    average_plan,
    lot_alpha,
    lot_error_bounds,
    lot_verdict,
    outgoing_quality,
    worst_outgoing,
)


def direct_evidence(big_n: int, n: int, k: int, target: float) -> tuple[list[float], float]:
    """``L_n(E)`` for every ``E`` by explicit products, and ``m_n`` as an explicit mixture over the prior."""
    a, b = 1.0, 4.0 / target

    def likelihood(e: int) -> float:  # probability of one sequence with k wrong in n draws
        p = 1.0
        wrong, right = e, big_n - e
        for i in range(k):
            p *= (wrong - i) / (big_n - i)
        for j in range(n - k):
            p *= (right - j) / (big_n - k - j)
        return max(p, 0.0)

    prior = betabinom(big_n, a, b)
    likelihoods = [likelihood(e) for e in range(big_n + 1)]
    return likelihoods, sum(prior.pmf(e) * lik for e, lik in enumerate(likelihoods))


def direct_interval(big_n: int, n: int, k: int, alpha: float, target: float) -> tuple[int, int]:
    """{E : L_n(E) > α m_n}."""
    likelihoods, marginal = direct_evidence(big_n, n, k, target)
    inside = [e for e, lik in enumerate(likelihoods) if lik > alpha * marginal]
    return inside[0], inside[-1]


@settings(max_examples=150, deadline=None)
@given(
    big_n=st.integers(1, 40),
    data=st.data(),
    alpha=st.sampled_from([0.05, 0.1, 0.2]),
    target=st.sampled_from([0.02, 0.05, 0.1]),
)
def test_bounds_equal_the_direct_computation(big_n, data, alpha, target):
    n = data.draw(st.integers(1, big_n))
    k = data.draw(st.integers(0, n))
    likelihoods, marginal = direct_evidence(big_n, n, k, target)
    # An exact tie with the level (e.g. N = 26, 24 right audits, E = 1: 2/26 against 0.1 · 80/104)
    # falls either way in floating point, in both computations.
    assume(all(abs(lik - alpha * marginal) > 1e-9 * alpha * marginal for lik in likelihoods))
    assert lot_error_bounds(big_n, n, k, alpha=alpha, target=target) == direct_interval(big_n, n, k, alpha, target)


def direct_outgoing(plan: SamplingPlan, wrong: int) -> tuple[float, float]:
    """AOQ and acceptance by enumerating every placement of ``wrong`` wrong labels in the audit
    order (all equally likely), each walked prefix by prefix."""
    total = accepted = 0.0
    places = list(itertools.combinations(range(plan.lot_size), wrong))
    for place in places:
        x = np.zeros(plan.lot_size, dtype=int)
        x[list(place)] = 1
        for n in range(plan.start, plan.last + 1):
            found = int(x[:n].sum())
            if found <= math.floor(plan.slope * (n - plan.start) + 1e-9):
                total += (wrong - found) / (plan.lot_size - n)
                accepted += 1
                break
    return total / len(places), accepted / len(places)


@settings(max_examples=120, deadline=None)
@given(big_n=st.integers(2, 9), data=st.data(), slope=st.sampled_from([0.0, 0.1, 0.25, 0.5]))
def test_outgoing_quality_equals_the_enumeration(big_n, data, slope):
    last = data.draw(st.integers(1, big_n - 1))
    plan = SamplingPlan(big_n, data.draw(st.integers(1, last)), slope, last)
    aoq, accepted = outgoing_quality(plan, np.arange(big_n + 1))
    for wrong in range(big_n + 1):
        direct = direct_outgoing(plan, wrong)
        assert aoq[wrong] == pytest.approx(direct[0], abs=1e-12)
        assert accepted[wrong] == pytest.approx(direct[1], abs=1e-12)


@pytest.mark.parametrize(("big_n", "budget"), [(40, 0.05), (1000, 0.03), (3000, 0.0075)])
def test_a_designed_plan_keeps_its_budget_at_every_error_count(big_n, budget):
    plan = average_plan(big_n, budget)
    aoq, _ = outgoing_quality(plan, np.arange(big_n + 1))
    assert aoq.max() <= budget
    earlier = SamplingPlan(big_n, plan.start - 1, plan.slope, plan.last)
    assert plan.start == 1 or outgoing_quality(earlier, np.arange(big_n + 1))[0].max() > budget


def test_the_grid_bound_of_a_large_lot_is_above_every_exact_value():
    """Past EXACT_LOT_SIZE the worst case is bounded on a grid of E: never below the exact one."""
    big_n = EXACT_LOT_SIZE + 1000
    for start in (5, 15, 30):
        plan = SamplingPlan(big_n, start, 0.03, 60)
        exact = outgoing_quality(plan, np.arange(big_n + 1))[0].max()
        assert exact <= worst_outgoing(plan, 1.0) <= exact * 1.05


def direct_average_verdict(outcomes, answered, share: float, target: float) -> bool:
    """Certified under the average promise, walked prefix by prefix from the plan's definition."""
    big_n = outcomes.size
    plan = average_plan(big_n, AVERAGE_KEPT_SHARE * target * share)
    if plan is None:  # a lot too small for the budget
        return False
    known = np.flatnonzero(outcomes == OUTCOME_UNKNOWN)
    prefix = int(known[0]) if known.size else big_n
    found = 0
    for n in range(1, prefix + 1):
        found += int(outcomes[n - 1] == OUTCOME_WRONG)
        if plan.start <= n <= plan.last and found <= math.floor(plan.slope * (n - plan.start) + 1e-9):
            delivered = int((~answered).sum())
            # Answers past the prefix out of its order count against the delivery, not those in it.
            return 0 < delivered and delivered >= AVERAGE_KEPT_SHARE * (big_n - prefix)
    return False


@settings(max_examples=150, deadline=None)
@given(big_n=st.integers(60, 400), data=st.data(), share=st.sampled_from([0.75, 0.1875]))
def test_average_verdict_equals_the_plan_walked_by_hand(big_n, data, share):
    n = data.draw(st.integers(0, big_n - 1))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    outcomes = np.full(big_n, OUTCOME_UNKNOWN)
    outcomes[:n] = np.where(rng.random(n) < data.draw(st.sampled_from([0.0, 0.02, 0.1])), OUTCOME_WRONG, OUTCOME_RIGHT)
    answered = outcomes != OUTCOME_UNKNOWN
    elsewhere = rng.random(big_n) < data.draw(st.sampled_from([0.0, 0.1, 0.4]))
    answered |= elsewhere
    outcomes[elsewhere & (outcomes == OUTCOME_UNKNOWN)] = OUTCOME_RIGHT
    verdict = lot_verdict(outcomes, answered, target=0.05, alpha=share, promise="average")
    assert verdict.certified == direct_average_verdict(outcomes, answered, share, 0.05)


def test_no_audit_bounds_nothing_and_the_worked_example():
    assert lot_error_bounds(1000, 0, 0, alpha=0.1, target=0.05) == (0, 1000)
    low, high = lot_error_bounds(1000, 56, 0, alpha=0.1, target=0.05)
    assert low == 0 and high / 1000 <= 0.05 < lot_error_bounds(1000, 50, 0, alpha=0.1, target=0.05)[1] / 1000


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((10, 11, 0), InvalidInput, "audited must be <= lot_size"),
        ((10, 3, 4), InvalidInput, "errors must be <= audited"),
        ((10, -1, 0), InvalidInput, "audited"),
        ((10.5, 1, 0), TypeError, "lot_size"),
    ],
)
def test_bounds_refuse_bad_counts(args, error, match):
    with pytest.raises(error, match=match):
        lot_error_bounds(*args, alpha=0.1, target=0.05)


@pytest.mark.parametrize("alpha", [0.0, 1.0, 1.5])
def test_bounds_refuse_bad_levels(alpha):
    with pytest.raises(InvalidInput, match="alpha"):
        lot_error_bounds(10, 1, 0, alpha=alpha, target=0.05)


def test_lot_alphas_sum_to_alpha():
    assert math.isclose(sum(lot_alpha(0.1, number) for number in range(1, 200)), 0.1, rel_tol=1e-9)
    assert lot_alpha(0.1, 1) > lot_alpha(0.1, 2) > lot_alpha(0.1, 3)


@pytest.mark.parametrize("wrong", [2, 8, 15, 30])
def test_every_prefix_is_covered_with_probability_at_least_one_minus_alpha(wrong):
    """The sequence must hold at every prefix at once: read after every audit, in 1,500 random orders."""
    big_n, alpha, runs = 150, 0.1, 1500
    rng = np.random.default_rng(wrong)
    missed = 0
    for _ in range(runs):
        x = np.zeros(big_n, dtype=np.int64)
        x[rng.permutation(big_n)[:wrong]] = 1
        errors = np.cumsum(x)
        for n in range(1, big_n + 1):
            low, high = lot_error_bounds(big_n, n, int(errors[n - 1]), alpha=alpha, target=0.05)
            if not low <= wrong <= high:
                missed += 1
                break
    # Ville's inequality: at most alpha; the binomial noise of 1,500 runs is below 0.025.
    assert missed / runs <= alpha + 0.025


def adversarial_campaign(
    rng: np.random.Generator,
    big_n: int,
    wrong: int,
    target: float,
    alpha: float,
    steps: int,
    *,
    cherry_pick: bool,
    promise: str = "confidence",
    until_stated: bool = False,
) -> tuple[bool, bool, float]:
    """One lot read after every answer while answers elsewhere take items out of it.

    Each step is an audit (the next item of the random order) or an answer to another item of
    the lot, chosen by an adversary: with ``cherry_pick`` it only ever takes right labels out
    (leaving every wrong one to be delivered), otherwise an item at random. Returns whether a
    statement was ever made, whether a made statement was ever false, and the share of wrong
    labels delivered to a person who exports at the first statement (0 if none); with
    ``until_stated`` the campaign ends there.
    """
    truth_wrong = np.zeros(big_n, dtype=bool)
    truth_wrong[rng.permutation(big_n)[:wrong]] = True
    outcomes = np.full(big_n, OUTCOME_UNKNOWN, dtype=np.int64)
    answered = np.zeros(big_n, dtype=bool)
    stated = broken = False
    exported = 0.0
    head = 0
    for _ in range(steps):
        if rng.random() < 0.5:
            while head < big_n and answered[head]:
                head += 1
            if head == big_n:
                break
            item = head
        else:
            pool = np.flatnonzero(~answered & (~truth_wrong if cherry_pick else True))
            if pool.size == 0:
                break
            item = int(rng.choice(pool))
        answered[item] = True
        outcomes[item] = OUTCOME_WRONG if truth_wrong[item] else OUTCOME_RIGHT
        verdict = lot_verdict(outcomes, answered, target=target, alpha=alpha, promise=promise, countdown=False)
        if verdict.certified:
            delivered_wrong = int((truth_wrong & ~answered).sum())
            if not stated:
                exported = delivered_wrong / verdict.delivered
            stated = True
            if delivered_wrong > target * verdict.delivered:
                broken = True
            if until_stated:
                break
    return stated, broken, exported


@pytest.mark.parametrize("cherry_pick", [False, True])
@pytest.mark.parametrize("wrong", [10, 14, 20])
def test_delivered_labels_are_within_target_at_every_read_whatever_answers_take_out(wrong, cherry_pick):
    """The promise on the labels delivered, read after every answer, with the lot drained by an
    adversary who leaves every wrong label in: false statements in at most alpha of the runs."""
    big_n, target, alpha, runs = 200, 0.05, 0.1, 300
    rng = np.random.default_rng(100 * wrong + cherry_pick)
    results = [
        adversarial_campaign(rng, big_n, wrong, target, alpha, steps=180, cherry_pick=cherry_pick) for _ in range(runs)
    ]
    broken = sum(b for _, b, _ in results)
    assert broken / runs <= alpha + 0.05
    if wrong == 10 and not cherry_pick:  # 5 % wrong: statements are made, and sometimes rightly
        assert sum(s for s, _, _ in results) > 0


@pytest.mark.parametrize(("wrong", "cherry_pick"), [(4, False), (10, True), (20, True), (40, True)])
def test_average_promise_holds_when_exporting_at_the_first_statement(wrong, cherry_pick):
    """The average promise, read after every answer, the person exporting at the first statement
    (a stopping time chosen to catch a lucky run of clean audits): the mean share of wrong
    labels delivered is at most the target, even for lots far worse than it."""
    big_n, target, share, runs = 200, 0.05, 0.75, 300
    rng = np.random.default_rng(1000 + 100 * wrong + cherry_pick)
    results = [
        adversarial_campaign(
            rng, big_n, wrong, target, share, steps=150, cherry_pick=cherry_pick, promise="average", until_stated=True
        )
        for _ in range(runs)
    ]
    exported = np.array([e for _, _, e in results])
    # Monte Carlo: 300 runs of a share in [0, 1] with a small spread; 4 standard errors of slack.
    assert exported.mean() <= target + 4 * exported.std() / math.sqrt(runs)
    if wrong == 4:  # 2 % wrong: the average promise states it
        assert sum(s for s, _, _ in results) > runs // 2


def test_verdict_counts_the_prefix_and_the_answers_elsewhere():
    outcomes = np.full(400, OUTCOME_UNKNOWN)
    outcomes[:60] = OUTCOME_RIGHT
    outcomes[200:220] = OUTCOME_RIGHT
    outcomes[300] = OUTCOME_WRONG  # found wrong by a ranked answer: corrected, not delivered
    answered = outcomes != OUTCOME_UNKNOWN
    verdict = lot_verdict(outcomes, answered, target=0.05, alpha=0.075)
    assert (verdict.audited, verdict.audit_errors, verdict.known_wrong, verdict.delivered) == (60, 0, 1, 319)
    assert verdict.error_bound == pytest.approx((verdict.high - 1) / 319)
    assert verdict.certified == (verdict.error_bound <= 0.05)


def test_countdown_is_what_clean_audits_need():
    big_n, target, alpha = 300, 0.05, 0.075
    needed = audits_to_certify(big_n, target=target, alpha=alpha)
    outcomes = np.full(big_n, OUTCOME_UNKNOWN)
    outcomes[: needed - 1] = OUTCOME_RIGHT
    assert not lot_verdict(outcomes, outcomes != OUTCOME_UNKNOWN, target=target, alpha=alpha).certified
    outcomes[needed - 1] = OUTCOME_RIGHT
    verdict = lot_verdict(outcomes, outcomes != OUTCOME_UNKNOWN, target=target, alpha=alpha)
    assert verdict.certified and verdict.audits_left == 0


def test_a_hopeless_lot_is_said_to_be_so():
    outcomes = np.full(300, OUTCOME_UNKNOWN)
    outcomes[:60] = np.where(np.arange(60) % 3 == 0, OUTCOME_WRONG, OUTCOME_RIGHT)  # a third wrong
    verdict = lot_verdict(outcomes, outcomes != OUTCOME_UNKNOWN, target=0.05, alpha=0.075)
    assert verdict.hopeless and not verdict.certified


def test_prefix_stops_at_the_first_unknown_outcome():
    assert audit_prefix([OUTCOME_RIGHT, OUTCOME_WRONG, OUTCOME_UNKNOWN, OUTCOME_WRONG]) == (2, 1)
    assert audit_prefix([]) == (0, 0)


def test_verdict_refuses_inconsistent_input():
    with pytest.raises(InvalidInput, match="answered"):
        lot_verdict(np.array([OUTCOME_RIGHT]), np.array([False]), target=0.05, alpha=0.1)
    with pytest.raises(InvalidInput, match="only -1"):
        lot_verdict(np.array([2]), np.array([True]), target=0.05, alpha=0.1)


@settings(max_examples=80, deadline=None)
@given(
    big_n=st.integers(20, 300),
    rate=st.floats(0.0, 0.3),
    audited=st.integers(1, 120),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_verdict_uses_the_running_intersection_of_every_prefix_interval(big_n, rate, audited, seed):
    """high/low are the smallest upper and largest lower end over the prefixes 1 … n, each
    computed on its own by lot_error_bounds; a wrong audit never raises the upper end."""
    rng = np.random.default_rng(seed)
    n = min(audited, big_n)
    outcomes = np.full(big_n, OUTCOME_UNKNOWN, dtype=np.int64)
    outcomes[:n] = (rng.random(n) < rate).astype(np.int64)
    errors = np.cumsum(outcomes[:n])
    intervals = [lot_error_bounds(big_n, j, int(errors[j - 1]), alpha=0.1, target=0.05) for j in range(1, n + 1)]
    low, high = max(lo for lo, _ in intervals), min(hi for _, hi in intervals)
    verdict = lot_verdict(outcomes, outcomes != OUTCOME_UNKNOWN, target=0.05, alpha=0.1, countdown=False)
    nonempty = low <= high and high >= errors[-1]
    if nonempty:
        assert (verdict.low, verdict.high) == (low, high)
    else:  # empty: the truth left some interval (probability ≤ α); the latest interval is said
        assert (verdict.low, verdict.high) == intervals[-1]
    if n >= 2 and nonempty:
        shorter = outcomes.copy()
        shorter[n - 1] = OUTCOME_UNKNOWN
        before = lot_verdict(shorter, shorter != OUTCOME_UNKNOWN, target=0.05, alpha=0.1, countdown=False)
        assert verdict.high <= before.high
