"""engine.end_charges: the end distribution against an enumeration of audit orders, and the end
charges, read through the verdict the loop reads, against the outgoing quality they must cover."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from engine.end_charges import end_charges, end_distribution, expected_charge
from engine.loop_design import DESIGN
from engine.promises import AveragePromise, AverageTest, SamplingPlan, average_plan


def every_order(size: int, wrong: int):
    """Each placement of ``wrong`` wrong labels in an audit order of ``size`` (all equally likely),
    as its cumulative wrong counts."""
    for place in itertools.combinations(range(size), wrong):
        x = np.zeros(size, dtype=np.int64)
        x[list(place)] = 1
        yield np.cumsum(x)


def walked(test: AverageTest, errors: np.ndarray) -> tuple[int, float, float]:
    """The test's verdict read after every audit until it ends, as the loop reads it: where it
    ended, what it hands back wrong as a share of the set (0 unless accepted) and its charge."""
    for n in range(1, errors.size + 1):
        verdict = test.verdict(errors[:n])
        if verdict.certified or verdict.hopeless:
            back = (int(errors[-1]) - verdict.wrong) / (test.size - n) if verdict.certified else 0.0
            return n, back, verdict.charge
    raise AssertionError("every course ends by the plan's last audit")


@settings(max_examples=100, deadline=None)
@given(big_n=st.integers(2, 9), data=st.data(), slope=st.sampled_from([0.0, 0.1, 0.25, 0.5]))
def test_the_end_distribution_equals_the_enumeration(big_n, data, slope):
    last = data.draw(st.integers(1, big_n - 1))
    plan = SamplingPlan(big_n, data.draw(st.integers(1, last)), slope, last)
    test = AverageTest(big_n, plan)
    accepted, rejected, aoq = end_distribution(plan, np.arange(big_n + 1))
    for wrong in range(big_n + 1):
        ends = np.zeros((2, plan.last + 1))
        back = []
        for errors in every_order(big_n, wrong):
            n, handed, _ = walked(test, errors)
            ends[0 if test.verdict(errors[:n]).certified else 1, n] += 1
            back.append(handed)
        ends /= ends.sum()
        assert np.allclose(accepted[wrong], ends[0], atol=1e-12) and np.allclose(rejected[wrong], ends[1], atol=1e-12)
        assert aoq[wrong] == pytest.approx(np.mean(back), abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(big_n=st.integers(6, 13), budget=st.floats(0.12, 0.45))
def test_charged_by_its_end_a_set_never_hands_back_more_than_its_budget_times_what_it_spends(big_n, budget):
    """Brute force over every audit order at every number of wrong labels: the mean share a
    set hands back wrong is at most its budget times the mean charge its verdicts carried when
    the test ended, and every charge is at most the whole share."""
    plan = average_plan(big_n, DESIGN.average_plan_headroom * budget)
    assume(plan is not None)
    test = AverageTest(big_n, plan, budget)
    for wrong in range(big_n + 1):
        courses = [walked(test, errors) for errors in every_order(big_n, wrong)]
        back = np.mean([handed for _, handed, _ in courses])
        charged = np.array([charge for _, _, charge in courses])
        assert back <= budget * charged.mean() + 1e-9
        assert (charged >= DESIGN.end_charge_floor - 1e-12).all() and (charged <= 1.0).all()


@pytest.mark.parametrize(("big_n", "budget"), [(258, 0.05), (2000, 0.05), (8000, 0.02)])
def test_the_charges_cover_every_error_count_and_a_dirty_set_spends_little(big_n, budget):
    """Checked at every ``E`` of sets the loop makes; a set a third wrong, rejected within a few
    audits, spends under a fifth of its share, a set 1 % wrong less than all of it,
    and the expected charge never passes what spending the whole share would."""
    plan = average_plan(big_n, DESIGN.average_plan_headroom * budget)
    charges = end_charges(plan, budget)
    mean, aoq = expected_charge(plan, charges, np.arange(big_n + 1))
    assert (mean * budget >= aoq).all() and (mean <= 1.0 + 1e-12).all()
    assert mean[big_n // 3] < 0.2 and mean[big_n // 100] < 0.95


def test_a_test_that_has_not_ended_is_charged_in_full_and_a_pair_layer_always():
    """A course cut short by its lot's deadline has no end: it spends its whole share. A layer
    of a pair (charged by its lot's worst read, engine.promises) carries no budget: charge 1."""
    test = AveragePromise(0.05).test(2000, 0.5, among=4000)
    assert test is not None and test.budget is not None
    ongoing = np.cumsum(np.r_[np.zeros(test.plan.start - 1, dtype=np.int64), 1])
    verdict = test.verdict(ongoing)
    assert not verdict.certified and not verdict.hopeless and verdict.charge == 1.0
    (first, _), _ = AveragePromise(0.05).pair_tests(1000, 900, 0.6)
    assert first.budget is None
    rejected = first.verdict(np.arange(1, 11))
    assert rejected.hopeless and rejected.charge == 1.0
