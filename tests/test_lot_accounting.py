"""The floors ``benchmarks.lot_accounting`` prints, on a worked example."""

from __future__ import annotations

import math

import numpy as np

from benchmarks.lot_accounting import sum_floor, worst_read_floor


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
