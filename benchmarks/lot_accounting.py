"""What stating a lot in steps costs the promise on average: its layers' charges summed, or its worst read.

The measurement behind ``DESIGN.alone_layer_fractions`` and
:meth:`engine.promises.AveragePromise.pair_tests`. A lot's labels are stated in nested sets, its
best ones first; on average the promise bounds the expected share wrong at every read
(:mod:`engine.promises`, "Several sets").

* **Floors.** With every set accepted and no audit slack, stating the best ``n_1`` labels and
  then the best ``Y`` costs ``W(n_1) / n_1 + (W(Y) − W(n_1)) / Y`` of the target when each layer
  is charged its wrong labels over the labels stated with it and the charges add up
  (:func:`sum_floor`), and ``max(W(n_1) / n_1, W(Y) / Y)`` at the worst read
  (:func:`worst_read_floor`); ``W(n)``: wrong labels among the best ``n``.
* **Lot 1's two layers** (its best half, then the rest of its best ``--keep``) at a common rate:
  what the sum of their plans' worst outgoing qualities charges, what
  :func:`engine.promises.pair_charges` charges, how likely each layer is to be accepted at its
  true number of wrong labels (:func:`engine.promises.outgoing_quality`, exact) and the labels
  lot 1 then states on average. Lot 1 has ``DESIGN.average_first_lot_share`` of the promise.

The labels are those the model gives before the first answer in a
:class:`benchmarks.replay_lots.Campaign` (the items lot 1 is cut from), ranked by its score.

Run (not part of ``make test``)::

    python -m benchmarks.lot_accounting --sets synthetic50k BirdSong lost MSRCv2 synthetic2k
    python -m benchmarks.lot_accounting --sets synthetic50k sample BirdSong synthetic2k --plans
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

from benchmarks.labels_delivered import pool_by_name
from benchmarks.replay_lots import Campaign
from engine.end_charges import end_distribution
from engine.labelling_loop import LoopSettings
from engine.loop_design import DESIGN, SERIES_FIRST_SHARE
from engine.promises import average_plan, outgoing_quality, pair_charges, pair_plans, worst_outgoing

RATES = (0.0228, 0.025, 0.0275, 0.03, 0.035, 0.04)
#: Plan shapes, ``(slope_factor, audits)``: the loop's, then steeper and longer ones.
PLAN_SHAPES = ((1.0, DESIGN.average_plan_audits), (1.25, 300), (1.5, 250), (1.5, 400), (2.0, 600))
#: Lot 1's share of the promise in the plans' table: the series' first term, one between and the loop's.
FIRST_LOT_SHARES = (SERIES_FIRST_SHARE, 0.7, DESIGN.average_first_lot_share)


def sum_floor(wrong_so_far: np.ndarray, cuts: tuple[int, ...]) -> float:
    """``Σ_k (W(c_k) − W(c_{k−1})) / c_k``; ``wrong_so_far[i]``: wrong among the best ``i + 1``."""
    total, before = 0.0, 0
    for cut in cuts:
        wrong = int(wrong_so_far[cut - 1])
        total += (wrong - before) / cut
        before = wrong
    return total


def worst_read_floor(wrong_so_far: np.ndarray, cuts: tuple[int, ...]) -> float:
    """``max_k W(c_k) / c_k``."""
    return max(int(wrong_so_far[cut - 1]) / cut for cut in cuts)


def wrong_by_rank(name: str, settings: LoopSettings) -> np.ndarray:
    """Wrong labels among the best ``i + 1`` of the items the model labels before the first
    answer (lot 1's items, its worst ones included), by the model's score."""
    pool = pool_by_name(name)
    campaign = Campaign(pool, settings, key=np.random.default_rng([0, 7]).bytes(32), session=0)
    labels, scores, _ = campaign.model(campaign.Y)
    members = np.flatnonzero((campaign.Y.sum(axis=1) >= 2) & (np.asarray(scores) > 0))
    ranked = members[np.argsort(-np.asarray(scores)[members], kind="stable")]
    return np.cumsum(np.asarray(labels)[ranked] != pool.truth[ranked])


def floors_rows(name: str, wrong_so_far: np.ndarray, target: float) -> list[str]:
    size = wrong_so_far.size
    rows = []
    for final in (size, int(round(0.95 * size)), size // 2):
        for first in sorted({size // 4, size // 2, final}):
            if first > final:
                continue
            cuts = (first, final) if first < final else (final,)
            by_sum, by_worst = sum_floor(wrong_so_far, cuts) / target, worst_read_floor(wrong_so_far, cuts) / target
            rows.append(
                f"| {name} | {first:,} ({wrong_so_far[first - 1] / first:.2%} wrong) "
                f"| {final:,} ({wrong_so_far[final - 1] / final:.2%} wrong) | {by_sum:.2f} | {by_worst:.2f} |"
            )
    return rows


def two_layer_rows(name: str, wrong_so_far: np.ndarray, target: float, fractions: tuple[float, float]) -> list[str]:
    size = wrong_so_far.size
    half, kept = (int(math.ceil(f * size)) for f in fractions)  # cut as the loop cuts lot 1
    wrong1, wrong2 = int(wrong_so_far[half - 1]), int(wrong_so_far[kept - 1] - wrong_so_far[half - 1])
    rows = []
    for rate in RATES:
        first, second = average_plan(half, rate), average_plan(kept - half, rate)
        if first is None or second is None:
            continue
        accepted1 = float(outgoing_quality(first, [wrong1])[1][0])
        accepted2 = float(outgoing_quality(second, [wrong2])[1][0])
        by_sum = worst_outgoing(first, 1.0) + worst_outgoing(second, 1.0) * (kept - half) / kept
        by_worst = sum(pair_charges(first, second, half, kept - half))
        rows.append(
            f"| {name} | {half:,} ({wrong1 / half:.2%}), {kept - half:,} ({wrong2 / (kept - half):.2%}) "
            f"| {rate:.2%} | {by_sum / target:.2f} | {by_worst / target:.2f} | {accepted1:.2f}, {accepted2:.2f} "
            f"| {accepted1 * half + accepted1 * accepted2 * (kept - half):,.0f} |"
        )
    return rows


def plan_rows(name: str, wrong_so_far: np.ndarray, target: float, fractions: tuple[float, float]) -> list[str]:
    size = wrong_so_far.size
    half, kept = (int(math.ceil(f * size)) for f in fractions)
    wrong1, wrong2 = int(wrong_so_far[half - 1]), int(wrong_so_far[kept - 1] - wrong_so_far[half - 1])
    rows = []
    for share in FIRST_LOT_SHARES:
        for shape in PLAN_SHAPES:
            slope_factor, audits = shape
            found = pair_plans(half, kept - half, target, target * share, slope_factor=slope_factor, audits=audits)
            if found is None:
                rows.append(f"| {name} | {share:.2f} | {slope_factor}, {audits} | no rate fits | | | |")
                continue
            first, rest, _ = found
            rate = first.slope / slope_factor
            ends = end_distribution(first, [wrong1])[0][0]
            accepted1 = float(ends.sum())
            accepted2 = float(outgoing_quality(rest, [wrong2])[1][0])
            to_accept = float(ends @ np.arange(ends.size)) / accepted1 if accepted1 > 0 else math.nan
            rows.append(
                f"| {name} | {share:.2f} | {slope_factor}, {first.last} | {rate:.2%} | {first.start} "
                f"| {accepted1:.4f}, {accepted2:.4f} | {to_accept:.0f} |"
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=["synthetic50k"])
    parser.add_argument(
        "--keep",
        type=float,
        default=DESIGN.alone_layer_fractions[1],
        help="the share of lot 1 its second layer ends at",
    )
    parser.add_argument("--plans", action="store_true", help="the plan shapes' table instead")
    args = parser.parse_args(argv)
    settings = LoopSettings(promise="average")
    target = settings.max_error
    floors = [
        "| set | first statement: best labels | then: best labels | summed charges (of the target) "
        "| the worst read (of the target) |",
        "|---|---|---|---|---|",
    ]
    layers = [
        "| set | layers (wrong) | both plans' rate "
        f"| summed charges (of the target; lot 1 has {DESIGN.average_first_lot_share:.2f}) "
        "| `pair_charges` | acceptance of each | labels lot 1 states on average |",
        "|---|---|---|---|---|---|---|",
    ]
    plans = [
        "| set | lot 1's share | plans' slope factor, audits | rate | start | acceptance of each layer "
        "| audits to the first layer's acceptance, on average |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in args.sets:
        start = time.perf_counter()
        wrong_so_far = wrong_by_rank(name, settings)
        fractions = (DESIGN.alone_layer_fractions[0], args.keep)
        if args.plans:
            plans += plan_rows(name, wrong_so_far, target, fractions)
        else:
            floors += floors_rows(name, wrong_so_far, target)
            layers += two_layer_rows(name, wrong_so_far, target, fractions)
        print(f"{name}: {time.perf_counter() - start:.0f} s", file=sys.stderr)
    print("\n".join(plans if args.plans else [*floors, "", *layers]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
