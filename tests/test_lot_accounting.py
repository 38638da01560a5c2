"""The floors ``benchmarks.lot_accounting`` prints, on a worked example, and its plans' table
searching as the loop does."""

from __future__ import annotations

import math

import numpy as np

from benchmarks.lot_accounting import pair_at_share, sum_floor, worst_read_floor
from engine.loop_design import DESIGN
from engine.promises import AveragePromise


def test_stating_in_two_steps_is_charged_more_than_its_worst_read():
    """Ten labels ranked by score. With the 9th and 10th wrong, stating the best 5 and then all
    10 costs 0/5 + 2/10 summed, and the worst read holds 2/10: the same. With the 1st and 10th
    wrong, stating the best 4 first costs 1/4 + 1/10 summed, while the worst read holds 1/4 (the
    first); stated at once, both are 2/10."""
    wrong_so_far = np.cumsum([0, 0, 0, 0, 0, 0, 0, 0, 1, 1])
    assert math.isclose(sum_floor(wrong_so_far, (5, 10)), 0.2)
    assert math.isclose(worst_read_floor(wrong_so_far, (5, 10)), 0.2)
    early = np.cumsum([1, 0, 0, 0, 0, 0, 0, 0, 0, 1])
    assert math.isclose(sum_floor(early, (4, 10)), 1 / 4 + 1 / 10)
    assert math.isclose(worst_read_floor(early, (4, 10)), 1 / 4)
    assert math.isclose(sum_floor(early, (10,)), worst_read_floor(early, (10,)))


def test_at_the_loops_plan_shape_the_table_finds_the_loops_pair():
    """The plans' table reads other shapes through the same search: at the loop's shape it must
    find the very plans :meth:`AveragePromise.pair_tests` gives the loop."""
    (first_test, second_test), _ = AveragePromise(0.05).pair_tests(1000, 900, 0.6)
    rate, first, second = pair_at_share(1000, 900, 0.05 * 0.6, 0.05, (1.0, DESIGN.average_plan_audits))
    assert (first, second) == (first_test.plan, second_test.plan)
    assert rate == first.slope
    steeper = pair_at_share(1000, 900, 0.05 * 0.6, 0.05, (1.5, 300))
    assert steeper[1].slope == 1.5 * steeper[0] and steeper[1].last == 300
