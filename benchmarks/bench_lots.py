"""A set's verdict, as every page run and command computes it, against the ways it could be computed.

The verdict intersects the confidence sequence's intervals over every audited prefix
(``engine.promises.ConfidenceTest``), finding each interval by bisection around the likelihood's
mode. Two references, written out here from the definition in ``engine.promises``'s docstring (a
beta-binomial prior ``a = 1``, ``b = 4 / target``; an interval is every error count whose
likelihood exceeds ``α`` times the mixture's): the same running intersection with each interval
found by a full scan over the ``N + 1`` error counts, and the round before's verdict, one
interval (the latest prefix's) by full scan. The bounds are checked equal to the references'.
A second table times the average promise's verdict, whose first read designs the lot's plan; a
third, the charges by how a set's test ended (``engine.end_charges``), computed once a set's test
ends, against designing its plan, and what each charges a set 1 %, 5 % and 30 % wrong.

    python -m benchmarks.bench_lots --sizes 20000 200000 600000 --audits 300 \
        --charge-sizes 258 2000 8000 25000
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy.special import betaln, gammaln

from engine.end_charges import end_charges, expected_charge
from engine.loop_design import DESIGN
from engine.promises import AverageTest, ConfidenceTest, average_plan

TARGET, ALPHA = 0.05, 0.075


def full_scan_interval(big_n: int, n: int, k: int) -> tuple[int, int]:
    """``C_n`` by evaluating the likelihood at every error count ``0 … N``."""
    e = np.arange(big_n + 1, dtype=np.float64)
    possible = (e >= k) & (big_n - e >= n - k)
    ep = e[possible]
    log_lik = (
        gammaln(ep + 1)
        - gammaln(ep - k + 1)
        + gammaln(big_n - ep + 1)
        - gammaln(big_n - ep - (n - k) + 1)
        - (gammaln(big_n + 1) - gammaln(big_n - n + 1))
    )
    level = math.log(ALPHA) + float(betaln(1 + k, 4 / TARGET + n - k) - betaln(1, 4 / TARGET))
    inside = ep[log_lik > level]
    return (int(inside[0]), int(inside[-1])) if inside.size else (k, big_n - (n - k))


def running_full_scan(big_n: int, errors: np.ndarray) -> tuple[int, int]:
    low, high = 0, big_n
    for n, k in enumerate(errors.tolist(), start=1):
        lo, hi = full_scan_interval(big_n, n, k)
        low, high = max(low, lo), min(high, hi)
    return low, high


def cpu(work, *args, **kwargs):
    """CPU seconds of ``work(*args, **kwargs)``, and its result."""
    start = time.process_time()
    result = work(*args, **kwargs)
    return time.process_time() - start, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000, 200_000, 600_000])
    parser.add_argument("--audits", type=int, default=300)
    parser.add_argument("--charge-sizes", type=int, nargs="+", default=[258, 2_000, 8_000, 25_000])
    args = parser.parse_args(argv)
    print(f"lot verdict with {args.audits} audits, 2 % wrong (CPU s; the verdict read twice in one process)")
    print(
        "| lot size | round before: one interval, full scan | running intersection, full scan "
        "| running intersection, bisection (now) | now / round before | now, again |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for size in args.sizes:
        rng = np.random.default_rng(size)
        errors = np.cumsum(rng.random(args.audits) < 0.02)
        test = ConfidenceTest(size, TARGET, ALPHA)

        now_first, now = cpu(test.verdict, errors)
        now_again, _ = cpu(test.verdict, errors)
        scan_seconds, scanned = cpu(running_full_scan, size, errors)
        before_seconds, _ = cpu(full_scan_interval, size, args.audits, int(errors[-1]))
        if now.wrong_bound != scanned[1]:
            raise SystemExit(f"bisection and full scan disagree at {size}: {now.wrong_bound} != {scanned[1]}")
        print(
            f"| {size:,} | {before_seconds:.3f} | {scan_seconds:.3f} | {now_first:.3f} "
            f"| {now_first / before_seconds:.2f} | {now_again:.3f} |"
        )
    average_table(args.sizes, args.audits)
    charges_table(args.charge_sizes)
    return 0


def average_table(sizes: list[int], audits: int) -> None:
    """The average promise's verdict: its first read designs the set's sampling plan
    (``engine.promises.average_plan``, cached per process); the promise with confidence's verdict
    of the same set, in the same process, is the baseline."""
    print(f"\naverage promise, first lot's share, {audits} audits (CPU s)")
    print("| lot size | confidence (baseline) | average, first read (plan designed) | ratio | average, again |")
    print("|---:|---:|---:|---:|---:|")
    for size in sizes:
        size += 1  # not the first table's lots: nothing of theirs is cached
        rng = np.random.default_rng(size)
        errors = np.cumsum(rng.random(audits) < 0.02)
        baseline, _ = cpu(ConfidenceTest(size, TARGET, ALPHA).verdict, errors)

        def average_verdict(size: int = size, errors: np.ndarray = errors) -> object:
            plan = average_plan(size, TARGET * 0.5)
            return None if plan is None else AverageTest(size, plan).verdict(errors)

        first, _ = cpu(average_verdict)
        again, _ = cpu(average_verdict)
        print(f"| {size:,} | {baseline:.3f} | {first:.3f} | {first / baseline:.2f} | {again:.4f} |")


def charges_table(sizes: list[int]) -> None:
    """A set's end charges at three budgets: the plan's design (at ``DESIGN.average_plan_headroom``
    times the budget) is the baseline; the charges are checked at every error count, so a
    failure stops the table."""
    print("\nend charges of a set tested on its own (CPU s; expected charge, a fraction of its share)")
    print("| set size | budget | plan designed (baseline) | end charges | ratio | charge at 1 % wrong | 5 % | 30 % |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    cpu(end_charges, average_plan(1000, 0.9 * 0.03), 0.03)  # scipy.optimize imported once, outside the table
    for size in sizes:
        for budget in (0.01, 0.02, 0.05):
            design, plan = cpu(average_plan, size, DESIGN.average_plan_headroom * budget)
            if plan is None:
                print(f"| {size:,} | {budget:.0%} | {design:.3f} | no plan | | | | |")
                continue
            seconds, charges = cpu(end_charges, plan, budget)
            mean, aoq = expected_charge(plan, charges, np.arange(size + 1))
            if (mean * budget < aoq).any():
                raise SystemExit(f"the charges of a set of {size} at {budget} miss an error count")
            at = [mean[round(rate * size)] for rate in (0.01, 0.05, 0.3)]
            print(
                f"| {size:,} | {budget:.0%} | {design:.3f} | {seconds:.3f} | {seconds / max(design, 1e-3):.1f} "
                f"| {at[0]:.3f} | {at[1]:.3f} | {at[2]:.3f} |"
            )


if __name__ == "__main__":
    raise SystemExit(main())
