"""Charges by how a test ended: the least of its share a set's sampling plan must spend, end by end.

Under the average promise (:mod:`engine.promises`) a set of ``N`` labels, ``E`` of them wrong,
is tested by a sequential sampling plan and given a **budget** ``B``: the share of wrong labels
it may add to a read, on average, for the share ``s`` of the promise it holds. The sum over
the sets of a session stays within the target because each set's expected outgoing quality is
at most ``B`` times the share it spends, and the shares spent add up to at most 1 on every
course of the audits.

A plan's test ends in one of these ways, each at one audited prefix ``n``:

* **accepted at** ``n``: the first ``n`` with at most ``acceptance_number(n)`` wrong labels
  (then exactly that many, since the acceptance number rises by at most 1 a step);
* **rejected at** ``n``: the first ``n`` with more wrong labels than the plan's last acceptance
  number (every course ends one way or the other by ``last``).

Spending the whole share whenever the test reads an audit is one valid rule; a cheaper one
charges each end ``x`` a fraction ``c(x)`` of the share, such that at every ``E``

    ``Σ_x P(x | E) c(x) ≥ AOQ(E) / B``,

since the set's contribution to the promise is then at most ``B · E[c]`` at every ``E``, and the
same sum over sets holds with ``c`` in place of 1. A test that has not ended when its lot does
(truncated by the lot's deadline) is charged in full: ``c ≤ 1`` everywhere, so that only
raises its expected charge, while its contribution falls to 0.

The charges come from a linear programme (``scipy.optimize.linprog``, HiGHS): minimise the
expected charge averaged over a few error rates (``DESIGN.end_charge_rates``), subject to the
inequality above at every ``E`` and ``DESIGN.end_charge_floor ≤ c ≤ 1``. It is feasible when the
plan's worst outgoing quality is below ``B`` (charging every end ``max AOQ / B`` meets it); it
pays off when there is room between them, which is why a set charged by its end gets a plan at
``DESIGN.average_plan_headroom`` times its budget. A set 30 % wrong then spends 0.3–21 % of its
share (``benchmarks.bench_lots``), one whose every audit is wrong a thousandth, and one 1 % wrong
most but not all of it.

Every ``E`` is checked, not a grid: the programme starts from a grid of ``E`` and adds every ``E``
where the exact charge (:func:`expected_charge`) falls short, until none does (or charges every
end in full). Past the ``E`` where acceptance is so unlikely that ``AOQ(E) / B`` is below the
floor (acceptance only falls as ``E`` grows), the floor alone meets the inequality.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.loop_design import DESIGN

if TYPE_CHECKING:
    from engine.promises import SamplingPlan

__all__ = ["EndCharges", "end_distribution", "end_charges", "expected_charge"]

#: Error counts whose exact charge is computed at once (bounds the memory of a large set's check).
_CHUNK = 2_048
#: Rounds of the programme before it gives up and charges every end in full.
_ROUNDS = 30
#: Each constraint asks this much more than it needs, so the solver's tolerance never leaves an
#: ``E`` short when the charges are checked exactly.
_SLACK = 1e-7


@dataclass(frozen=True)
class EndCharges:
    """The fraction of its share a set's test spends by how it ended (module docstring).

    ``accepted[n]``: accepted at the audited prefix ``n``; ``rejected[n]``: rejected at ``n``
    (``0 ≤ n ≤ plan.last``).
    """

    accepted: np.ndarray
    rejected: np.ndarray

    def charge(self, plan: SamplingPlan, prefix_errors: np.ndarray, accepted_at: int) -> float:
        """The charge of the test's course so far (``prefix_errors[j − 1]``: wrong labels in the
        first ``j`` audits; ``accepted_at``: ``plan.accepted_at`` of them, which the verdict has
        already read): its end's, or 1 while it has not ended."""
        if accepted_at >= 0:
            return float(self.accepted[accepted_at])
        over = np.flatnonzero(np.asarray(prefix_errors) > plan.last_acceptance_number)
        return float(self.rejected[over[0] + 1]) if over.size else 1.0


def end_distribution(plan: SamplingPlan, errors: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each ``E`` in ``errors``: the probability of each end (accepted at ``n``, rejected at
    ``n``; arrays of shape ``(len(errors), plan.last + 1)``) and ``AOQ(E)``, exactly, over the
    set's uniformly random audit order: a dynamic programme over the prefixes not yet ended, by
    how many wrong labels they hold."""
    big_n, last, top = plan.lot_size, plan.last, plan.last_acceptance_number
    e = np.asarray(errors, dtype=np.float64)[:, None]
    found = np.arange(top + 1, dtype=np.float64)[None, :]
    waiting = np.zeros((e.shape[0], top + 1))
    waiting[:, 0] = 1.0
    accepted = np.zeros((e.shape[0], last + 1))
    rejected = np.zeros((e.shape[0], last + 1))
    aoq = np.zeros(e.shape[0])
    numbers = plan.acceptance_number(np.arange(last + 1))
    for n in range(last + 1):
        a = int(numbers[n])
        if a >= 0:
            now = waiting[:, : a + 1]
            accepted[:, n] = now.sum(axis=1)
            aoq += (now * (e - found[:, : a + 1])).sum(axis=1) / (big_n - n)
            waiting[:, : a + 1] = 0.0
        if n == last:
            break
        moved = waiting * np.clip((e - found) / (big_n - n), 0.0, 1.0)
        waiting -= moved
        waiting[:, 1:] += moved[:, :-1]
        rejected[:, n + 1] = moved[:, -1]
    return accepted, rejected, aoq


def expected_charge(plan: SamplingPlan, charges: EndCharges, errors: Any) -> tuple[np.ndarray, np.ndarray]:
    """``E[c | E]`` and ``AOQ(E)`` for each ``E`` in ``errors``, exactly, in bounded memory."""
    errors = np.asarray(errors, dtype=np.int64)
    mean, aoq = np.empty(errors.size), np.empty(errors.size)
    for lo in range(0, errors.size, _CHUNK):
        accepted, rejected, aoq[lo : lo + _CHUNK] = end_distribution(plan, errors[lo : lo + _CHUNK])
        mean[lo : lo + _CHUNK] = accepted @ charges.accepted + rejected @ charges.rejected
    return mean, aoq


def _reach(plan: SamplingPlan, budget: float) -> int:
    """The largest ``E`` that needs checking: past it, ``AOQ(E) / B ≤ E P_acc(E) / ((N − last) B)``
    is below the floor every end is charged."""
    big_n = plan.lot_size
    points = np.unique(np.geomspace(1, big_n, 200).round().astype(np.int64))
    accepted = end_distribution(plan, points)[0].sum(axis=1)
    below = np.flatnonzero(accepted * big_n / ((big_n - plan.last) * budget) <= DESIGN.end_charge_floor)
    return int(points[below[0]]) if below.size else big_n


@functools.lru_cache(maxsize=1024)
def end_charges(plan: SamplingPlan, budget: float) -> EndCharges:
    """The cheapest charges of ``plan``'s ends that keep its outgoing quality within ``budget``
    times its expected charge at every ``E`` (module docstring); every end charged in full when
    the programme finds none.

    >>> from engine.promises import average_plan
    >>> plan = average_plan(1000, 0.9 * 0.03)
    >>> charges = end_charges(plan, 0.03)
    >>> mean, aoq = expected_charge(plan, charges, [0, 30, 300])
    >>> bool((mean * 0.03 >= aoq).all()), round(float(mean[2]), 2)  # a set 30 % wrong: 3 % of its share
    (True, 0.03)
    """
    from scipy.optimize import linprog  # scipy.optimize: only when a set's test has ended

    width = plan.last + 1
    full = EndCharges(np.ones(width), np.ones(width))
    reach = _reach(plan, budget)
    everything = np.arange(reach + 1)
    grid = np.unique(np.concatenate([np.arange(min(reach, 400) + 1), np.geomspace(1, reach, 400).round()]))
    prior = np.unique(np.round(np.asarray(DESIGN.end_charge_rates) * plan.lot_size).astype(np.int64))
    accepted, rejected, _ = end_distribution(plan, prior)
    objective = np.concatenate([accepted.mean(axis=0), rejected.mean(axis=0)])
    rows = grid.astype(np.int64)
    for _ in range(_ROUNDS):
        accepted, rejected, aoq = end_distribution(plan, rows)
        found = linprog(
            objective,
            A_ub=-np.hstack([accepted, rejected]),
            b_ub=-(aoq / budget + _SLACK),
            bounds=(DESIGN.end_charge_floor, 1.0),
            method="highs",
        )
        if found.status != 0:
            return full
        charges = EndCharges(np.minimum(found.x[:width], 1.0), np.minimum(found.x[width:], 1.0))
        mean, aoq_all = expected_charge(plan, charges, everything)
        short = everything[mean * budget < aoq_all]
        if short.size == 0:
            return charges
        rows = np.union1d(rows, short)
    return full
