"""A lot's verdict, as every page run and command computes it, three ways in the same process.

The verdict now takes the running intersection of the intervals of every audited prefix, so each
prefix's interval is computed once (then cached). ``engine.lots`` finds each interval by bisection
around the likelihood's mode; the full scan over every error count (``O(N)`` per prefix) is what the
running intersection would cost without it; the round before computed one interval, by full scan.

    python -m benchmarks.bench_lots --sizes 20000 200000 600000 --audits 300
"""

from __future__ import annotations

import argparse
import math
import time
from unittest import mock

import numpy as np

import engine.lots as lots


def full_scan_bounds(lot_size: int, audited: int, errors: int, alpha: float, target: float) -> tuple[int, int]:
    """The interval the way it was computed before: ``log L_n`` at every ``E`` in ``0 … N``."""
    if audited == 0:
        return 0, lot_size
    log_lik, log_marginal = lots._log_evidence(lot_size, audited, errors, target)
    inside = np.flatnonzero(log_lik > math.log(alpha) + log_marginal)
    if inside.size == 0:
        return errors, lot_size - (audited - errors)
    return int(inside[0]), int(inside[-1])


def last_interval_only(lot_size: int, prefix_errors: np.ndarray, alpha: float, prior: float) -> tuple[int, int]:
    """The round before's verdict: the latest prefix's interval alone."""
    if prefix_errors.size == 0:
        return 0, lot_size
    return lots._bounds(lot_size, int(prefix_errors.size), int(prefix_errors[-1]), alpha, prior)


def verdict_seconds(lot_size: int, audits: int, *, seed: int = 0) -> tuple[float, float, object]:
    """CPU seconds of a first (cold caches) and a second verdict of a lot 2 % wrong."""
    rng = np.random.default_rng(seed)
    outcomes = np.full(lot_size, lots.OUTCOME_UNKNOWN, dtype=np.int64)
    outcomes[:audits] = (rng.random(audits) < 0.02).astype(np.int64)
    answered = outcomes != lots.OUTCOME_UNKNOWN
    lots._bounds.cache_clear()
    lots._log_evidence.cache_clear()
    times = []
    for _ in range(2):
        start = time.process_time()
        verdict = lots.lot_verdict(outcomes, answered, target=0.05, alpha=0.075)
        times.append(time.process_time() - start)
    return times[0], times[1], verdict


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000, 200_000, 600_000])
    parser.add_argument("--audits", type=int, default=300)
    args = parser.parse_args(argv)
    print(f"lot verdict with {args.audits} audits, 2 % wrong (CPU s, first read with cold caches, then again)")
    print(
        "| lot size | round before: one interval, full scan | running intersection, full scan "
        "| running intersection, bisection (now) | now / round before | now, again |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    scan = lots.functools.lru_cache(maxsize=65536)(full_scan_bounds)
    for size in args.sizes:
        now_cold, now_warm, now = verdict_seconds(size, args.audits)
        with mock.patch.object(lots, "_bounds", scan):
            scan_cold, _, scanned = verdict_seconds(size, args.audits)
            with mock.patch.object(lots, "_running_bounds", last_interval_only):
                before_cold, _, _ = verdict_seconds(size, args.audits)
        scan.cache_clear()
        assert (now.low, now.high) == (scanned.low, scanned.high), "bisection and full scan disagree"
        print(
            f"| {size:,} | {before_cold:.3f} | {scan_cold:.3f} | {now_cold:.3f} | {now_cold / before_cold:.2f} "
            f"| {now_warm:.3f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
