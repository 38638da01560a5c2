"""engine.promises: the confidence sequence against a direct computation and its coverage over
every prefix; the average promise's sampling plans against an enumeration of audit orders."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.stats import betabinom, binom

from engine.exceptions import InvalidInput
from engine.loop_design import DESIGN
from engine.promises import (
    EXACT_LOT_SIZE,
    AveragePromise,
    ConfidencePromise,
    ConfidenceTest,
    PilotedTest,
    SamplingPlan,
    average_plan,
    lot_error_bounds,
    outgoing_quality,
    pair_charges,
    pair_plans,
    part_test,
    pilot_allowance,
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


@pytest.mark.parametrize(
    ("big_n", "budget", "shape"),
    [
        (40, 0.05, {}),
        (1000, 0.03, {}),
        (3000, 0.0075, {}),
        (1000, 0.03, {"slope_factor": 1.5, "audits": 400}),
        (3000, 0.02, {"slope_factor": 2.0, "audits": 300}),
    ],
)
def test_a_designed_plan_keeps_its_budget_at_every_error_count(big_n, budget, shape):
    plan = average_plan(big_n, budget, **shape)
    assert plan.slope == pytest.approx(shape.get("slope_factor", 1.0) * budget)
    aoq, _ = outgoing_quality(plan, np.arange(big_n + 1))
    assert aoq.max() <= budget
    earlier = SamplingPlan(big_n, plan.start - 1, plan.slope, plan.last)
    assert plan.start == 1 or outgoing_quality(earlier, np.arange(big_n + 1))[0].max() > budget


@pytest.mark.parametrize("shape", [{}, {"slope_factor": 1.5, "audits": 300}])
def test_a_pair_of_any_shape_is_charged_within_its_limit_at_the_highest_rate_that_fits(shape):
    plan1, plan2, charges = pair_plans(1000, 900, 0.05, 0.03, **shape)
    factor = shape.get("slope_factor", 1.0)
    rate = plan1.slope / factor
    assert plan1.slope == plan2.slope and plan1.last == min(shape.get("audits", DESIGN.average_plan_audits), 999)
    assert charges == pair_charges(plan1, plan2, 1000, 900) and sum(charges) <= 0.03
    step = 0.045 / 64  # the grid's next rate up no longer fits
    higher = [average_plan(n, rate + step, slope_factor=factor, audits=shape.get("audits")) for n in (1000, 900)]
    assert sum(pair_charges(*higher, 1000, 900)) > 0.03


@pytest.mark.parametrize("slope_factor", [0.5, float("nan"), float("inf")])
def test_a_plan_refuses_a_slope_below_its_budget(slope_factor):
    with pytest.raises(InvalidInput, match="slope_factor"):
        average_plan(1000, 0.03, slope_factor=slope_factor)


@settings(max_examples=60, deadline=None)
@given(budget=st.floats(0.004, 0.3), data=st.data())
def test_no_plan_certifies_a_set_smaller_than_one_over_its_budget(budget, data):
    """A set of ``N`` labels with one wrong label its audits missed hands back ``1 / N`` of it
    wrong when accepted, and no plan tells it from a clean set on those orders, so a set with
    ``N < 1 / budget`` can never meet its budget: the design must find no plan."""
    big_n = data.draw(st.integers(2, max(2, math.ceil(1.0 / budget) - 1)))
    assume(big_n < 1.0 / budget)
    assert average_plan(big_n, budget) is None


def test_the_grid_bound_of_a_large_lot_is_above_every_exact_value():
    """Past EXACT_LOT_SIZE the worst case is bounded on a grid of E: never below the exact one."""
    big_n = EXACT_LOT_SIZE + 1000
    for start in (5, 15, 30):
        plan = SamplingPlan(big_n, start, 0.03, 60)
        exact = outgoing_quality(plan, np.arange(big_n + 1))[0].max()
        assert exact <= worst_outgoing(plan, 1.0) <= exact * 1.05


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


@settings(max_examples=100, deadline=None)
@given(
    big_n=st.integers(2, 60),
    data=st.data(),
    alpha=st.sampled_from([0.05, 0.1]),
)
def test_the_running_bounds_kept_between_reads_equal_the_walk_over_the_whole_prefix(big_n, data, alpha):
    """A set's verdict is read after every answer and its intersection extended from the last
    read's; reads in any order (growing, repeated, shorter again) give the walk from scratch."""
    wrong = data.draw(st.lists(st.booleans(), min_size=1, max_size=big_n))
    errors = np.cumsum(np.asarray(wrong, dtype=np.int64))
    lengths = data.draw(st.lists(st.integers(0, errors.size), min_size=1, max_size=12))
    test = ConfidenceTest(big_n, 0.1, alpha)
    for n in lengths:
        low, high = 0, big_n
        for j in range(1, n + 1):
            lo_j, hi_j = lot_error_bounds(big_n, j, int(errors[j - 1]), alpha=alpha, target=0.1)
            low, high = max(low, lo_j), min(high, hi_j)
        if n and (low > high or high < errors[n - 1]):
            low, high = lot_error_bounds(big_n, n, int(errors[n - 1]), alpha=alpha, target=0.1)
        verdict = test.verdict(errors[:n])
        assert (verdict.wrong_floor, verdict.wrong_bound) == (low, high)


@settings(max_examples=100, deadline=None)
@given(target=st.floats(0.001, 0.5), audits=st.integers(1, 60))
def test_the_pilot_allowance_is_the_binomial_quantile(target, audits):
    allowed = pilot_allowance(target, audits)
    assert binom.cdf(allowed, audits, target) >= DESIGN.pilot_pass - 1e-12
    assert allowed == 0 or binom.cdf(allowed - 1, audits, target) < DESIGN.pilot_pass + 1e-12


def test_a_pilot_allows_what_its_test_would_accept_at_its_own_rate():
    """With confidence a part is tested against the target; on average against its plan's rate,
    ``DESIGN.average_plan_headroom`` times its budget, which a part's share makes smaller than the
    target."""
    confident = part_test(ConfidencePromise(0.05, 0.9), 1000, 0.3, piloted=True)
    average = part_test(AveragePromise(0.05), 1000, 0.3, piloted=True)
    assert confident is not None and average is not None
    assert confident.allowed == pilot_allowance(0.05) == 2
    assert average.inner.budget == pytest.approx(0.015)
    assert average.inner.plan.slope == pytest.approx(0.015 * DESIGN.average_plan_headroom)
    assert average.allowed == pilot_allowance(average.inner.plan.slope) == 1
    assert (confident.size, confident.inner.size) == (1000, 1000 - DESIGN.pilot_audits)


@settings(max_examples=150, deadline=None)
@given(wrong=st.lists(st.booleans(), min_size=0, max_size=120), pilot=st.integers(1, 30), allowed=st.integers(0, 3))
def test_a_piloted_test_reads_its_inner_test_on_the_items_after_the_pilot(wrong, pilot, allowed):
    """Before its end the pilot certifies nothing and risks nothing; too many wrong labels in it
    make the set hopeless for good; after it, the verdict is the inner test's on the rest of the
    prefix alone, and the share is at risk once that test has read an audit."""
    inner = ConfidenceTest(400, 0.1, 0.1)
    test = PilotedTest(400 + pilot, pilot, allowed, inner)
    errors = np.cumsum(np.asarray(wrong, dtype=np.int64))
    verdict = test.verdict(errors)
    assert (verdict.audited, verdict.wrong) == (len(wrong), int(sum(wrong)))
    in_pilot = int(sum(wrong[:pilot]))
    if in_pilot > allowed:
        assert verdict.hopeless and not verdict.certified and not verdict.at_risk
    elif len(wrong) <= pilot:
        assert not verdict.hopeless and not verdict.certified and not verdict.at_risk
    else:
        alone = inner.verdict(np.cumsum(np.asarray(wrong[pilot:], dtype=np.int64)))
        assert verdict.at_risk
        assert (verdict.certified, verdict.hopeless, verdict.wrong_bound, verdict.wrong_floor) == (
            alone.certified,
            alone.hopeless,
            alone.wrong_bound,
            alone.wrong_floor,
        )


@pytest.mark.parametrize("wrong", [2, 4, 8])
def test_given_a_passed_pilot_the_sequence_still_covers_the_rest(wrong):
    """The share of a set is spent only when its pilot passed, so its sequence must cover the
    wrong labels after the pilot with probability 1 − α given that it passed: over 3,000 random
    audit orders of a set of 60 labels, read after every audit, the share of passed pilots whose
    sequence missed at some read stays within three standard errors of α."""
    promise = ConfidencePromise(0.1, 0.8)
    test = part_test(promise, 60, 1.0, piloted=True)
    assert test is not None
    alpha = test.inner.alpha
    rng = np.random.default_rng(wrong)
    passed = missed = 0
    for _ in range(3000):
        order = rng.permutation(60) < wrong
        verdict = test.verdict(np.cumsum(order))
        if not verdict.at_risk:
            continue
        passed += 1
        after = int(order[test.pilot :].sum())
        reads = (test.verdict(np.cumsum(order[:n])) for n in range(test.pilot + 1, 61))
        missed += any(read.wrong_bound < after for read in reads)
    assert passed > 500
    rate = missed / passed
    assert rate <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / passed)


def _handed_back(test, size: int, wrong: int, rng: np.random.Generator, runs: int) -> tuple[np.ndarray, np.ndarray]:
    """Brute force: ``runs`` uniformly random audit orders of a layer of ``size`` labels,
    ``wrong`` of them wrong, read by ``test`` (an ``AverageTest``, or one after a pilot) until it
    accepts; whether it did and how many wrong labels it hands back (those not audited by then)."""
    orders = rng.permuted(np.tile(np.arange(size) < wrong, (runs, 1)), axis=1)
    found = np.cumsum(orders, axis=1)
    pilot = test.pilot if isinstance(test, PilotedTest) else 0
    plan = (test.inner if pilot else test).plan
    passed = found[:, pilot - 1] <= test.allowed if pilot else np.ones(runs, dtype=bool)
    before = found[:, pilot - 1] if pilot else np.zeros(runs, dtype=np.int64)
    inner = found[:, pilot : pilot + plan.last] - before[:, None]
    hits = inner <= plan.acceptance_number(np.arange(1, inner.shape[1] + 1))[None, :]
    accepted = passed & hits.any(axis=1)
    at = hits.argmax(axis=1)
    return accepted, wrong - (before + inner[np.arange(runs), at])


@pytest.mark.parametrize("piloted", [False, True])
def test_two_layers_never_hold_more_at_their_worst_read_than_they_spend(piloted):
    """``pair_charges`` against brute force. Two layers audited in independent random orders,
    the second only once the first is accepted; at each number of wrong labels ``E_1, E_2`` on a
    grid, the lot's worst read (after its first layer is accepted, and after both) averaged over
    many orders stays within what the lot spends on average: ``c_1``, plus ``c_2`` whenever the
    second layer is audited; and also when the second layer is never audited. Somewhere it comes
    within a tenth of it (a fifth after a pilot, whose pass leaves a range of ``E_1``), so the
    charges are not slack."""
    first, second = (320, 270) if piloted else (300, 250)
    pair = AveragePromise(0.2).pair_tests(first, second, 0.6, piloted=piloted)
    assert pair is not None
    tests, shares = pair
    charges = pair_charges(*[(t.inner if piloted else t).plan for t in tests], first, second)
    assert math.isclose(shares[0] * 0.2, charges[0]) and sum(charges) <= 0.2 * 0.6 + 1e-12
    rng = np.random.default_rng(5)
    runs, closest = 4000, 0.0
    for wrong1, wrong2 in itertools.product(range(0, 120, 10), range(0, 120, 10)):
        accepted1, back1 = _handed_back(tests[0], first, wrong1, rng, runs)
        accepted2, back2 = _handed_back(tests[1], second, wrong2, rng, runs)
        first_only = accepted1 * back1 / first
        both = accepted1 * np.maximum(back1 / first, accepted2 * (back1 + back2) / (first + second))
        spent = charges[0] + accepted1 * charges[1]
        for read, budget in ((first_only, np.full(runs, charges[0])), (both, spent)):
            over = read - budget
            assert over.mean() <= 4 * over.std() / math.sqrt(runs) + 1e-12, (wrong1, wrong2, read.mean(), budget.mean())
            closest = max(closest, read.mean() / budget.mean())
    assert closest > (0.8 if piloted else 0.9)


@pytest.mark.parametrize("piloted", [False, True])
def test_layers_of_thousands_get_the_steep_plans_and_smaller_ones_the_loops(piloted):
    """A pair whose layers each hold ``DESIGN.steep_pair_labels`` labels past their pilots is
    tested with the steeper, longer plans; one label fewer in either layer, with the loop's."""
    promise, pilot = AveragePromise(0.05), DESIGN.pilot_audits if piloted else 0
    n = DESIGN.steep_pair_labels + pilot
    shape = {"slope_factor": DESIGN.steep_pair_slope_factor, "audits": DESIGN.steep_pair_audits}
    for first, second, steep in ((2 * n, n, True), (2 * n, n - 1, False), (n - 1, n, False)):
        pair = promise.pair_tests(first, second, 0.8, piloted=piloted)
        assert pair is not None
        plans = tuple(test.inner.plan if piloted else test.plan for test in pair[0])
        expected = pair_plans(first, second, 0.05, 0.04, pilot, **(shape if steep else {}))
        assert expected is not None and plans == expected[:2]
        assert plans[0].last == (DESIGN.steep_pair_audits if steep else DESIGN.average_plan_audits)


def test_two_layers_charged_by_their_worst_read_take_a_higher_rate_than_their_sum_gives():
    """Where the layers are alike, a lot's share buys both layers a higher rate than the sum of
    their worst outgoing qualities would (``engine.promises``, "Several sets"); the first layer
    holds about its plan's worst outgoing quality; a share too small for any plan gives no tests."""
    promise = AveragePromise(0.05)
    (first, second), shares = promise.pair_tests(8000, 7000, 0.6)
    plans = first.plan, second.plan
    by_sum = worst_outgoing(plans[0], 1.0) + worst_outgoing(plans[1], 1.0) * 7000 / 15000
    charges = pair_charges(*plans, 8000, 7000)
    assert sum(charges) <= 0.05 * 0.6 < by_sum
    assert math.isclose(charges[0], worst_outgoing(plans[0], 1.0), rel_tol=0.02)
    assert first.rate == second.rate > 0.05 * 0.6 * 0.75
    assert promise.pair_tests(30, 30, 0.6) is None
