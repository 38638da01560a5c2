"""Layers audited one after another, or nested sets read from one uniform audit order (issue 42).

A simulation before a build: how many labels of the first lot a session freezes the promise *with
confidence* certifies after ``n`` audits, under two designs.

* **layered** (the loop as shipped, :mod:`engine.labelling_loop`): the lot's best quarter, best
  half and all of it by score; each layer audited in its own random order, one after another;
  each layer's confidence sequence at its share of the lot's level; a set certified when its
  layers' upper bounds add up to at most the target (:func:`engine.labelling_loop.judge_lot`).
* **layered, sets in sequence**: audited as the loop does, but set ``j`` is certified when its
  ``j`` layers' upper bounds, each at the lot's level divided by ``j``, add up to at most the
  target, the sets tested in sequence: the best quarter gets the whole level, not half of it.
  Valid for the same reason as the next design.
* **fixed sequence**: the lot audited in one uniformly random order; nested sets, its best 5 %,
  10 %, … 100 % by score, each read from the audits that fall in it (a uniform sample of it,
  in a uniformly random order) by a confidence sequence at the lot's **whole** level (those
  that could only be certified by auditing most of them left out); the certified set is the
  largest whose smaller sets are all certified. Valid: a bad set is
  certified only if the first bad set of the sequence is, since every set after it waits for
  it, and that sequence leaves its truth with probability at most the level (fixed-sequence
  testing; Angelopoulos et al., Learn then Test, Section 3).

The lots are the ones :class:`benchmarks.replay_lots.Campaign` freezes before the first answer,
with the store key of seed 0. The audits are the lot's own items in random orders (``--orders``
of them). The expert is always right; nothing is served, so this measures the tests, not the
loop.

Run (not part of ``make test``)::

    python -m benchmarks.nested_sets --sets sample BirdSong synthetic50k --orders 20
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import numpy as np

from benchmarks.labels_delivered import pool_by_name
from benchmarks.replay_lots import Campaign
from engine.labelling_loop import LoopSettings, Lot, judge_lot, lot_share
from engine.promises import ConfidenceTest, audits_to_certify

BUDGETS = (25, 50, 100, 200, 400)
FRACTIONS = tuple(np.round(np.arange(0.05, 1.0001, 0.05), 2))


def first_lot(name: str, settings: LoopSettings) -> tuple[Lot, np.ndarray, np.ndarray]:
    """The first lot of ``name`` (seed 0's key), whether each of its labels (in audit order) is
    wrong, and its items' scores."""
    pool = pool_by_name(name)
    campaign = Campaign(pool, settings, key=np.random.default_rng([0, 7]).bytes(32), session=0)
    lot = campaign.loop().lots[0].lot
    _, scores, _ = campaign.model(campaign.Y)
    return lot, lot.labels != pool.truth[lot.items], np.asarray(scores)[lot.items]


def layered(lot: Lot, wrong: np.ndarray, rng: np.random.Generator) -> dict[int, int]:
    """Labels certified after each budget of audits, the layers audited in turn."""
    spans = lot.layer_spans
    order = np.concatenate([lo + rng.permutation(hi - lo) for lo, hi in spans])
    shuffled = dataclasses.replace(lot, items=lot.items[order], labels=lot.labels[order])
    is_wrong = wrong[order]
    known = np.zeros(order.size, dtype=bool)
    cache: dict = {}
    out: dict[int, int] = {}
    certified, current = 0, 0
    for n in range(1, max(BUDGETS) + 1):
        if current is not None:
            lo, hi = spans[current]
            left = np.flatnonzero(~known[lo:hi])
            if left.size:
                known[lo + left[0]] = True
            _, certified, current = judge_lot(shuffled, known, known & is_wrong, cache)
        if n in BUDGETS:
            out[n] = lot.set_sizes[certified - 1] if certified else 0
    return out


def layered_in_sequence(
    lot: Lot, wrong: np.ndarray, alpha: float, target: float, rng: np.random.Generator
) -> dict[int, int]:
    """As :func:`layered`, but set ``j`` (layers ``1 … j``) is certified when its layers' upper
    bounds, each at ``alpha / j``, add up to at most the target, and the sets are tested in
    sequence: set ``j`` is wrong with probability at most ``alpha``, and only the first bad set
    of the sequence can be certified first."""
    spans = lot.layer_spans
    sizes = [hi - lo for lo, hi in spans]
    orders = [lo + rng.permutation(hi - lo) for lo, hi in spans]
    taken = [0] * len(spans)
    out: dict[int, int] = {}
    certified = 0
    for n in range(1, max(BUDGETS) + 1):
        if certified < len(spans):
            taken[certified] += 1 if taken[certified] < sizes[certified] else 0
            while certified < len(spans):
                j = certified + 1
                bound = sum(
                    ConfidenceTest(sizes[i], target, alpha / j)
                    .verdict(np.cumsum(wrong[orders[i][: taken[i]]]))
                    .wrong_bound
                    or 0
                    for i in range(j)
                )
                if bound > target * sum(sizes[:j]):
                    break
                certified = j
        if n in BUDGETS:
            out[n] = sum(sizes[:certified])
    return out


def fixed_sequence(
    wrong: np.ndarray, scores: np.ndarray, alpha: float, target: float, rng: np.random.Generator
) -> dict[int, int]:
    """Labels certified after each budget of audits: one uniform order, nested sets tested in sequence."""
    by_score = np.argsort(-scores, kind="stable")
    rank = np.empty(by_score.size, dtype=np.int64)
    rank[by_score] = np.arange(by_score.size)
    audited = rng.permutation(by_score.size)[: max(BUDGETS)]
    # A set that could only be certified by auditing most of it would stop the sequence at once
    # and hand back little: left out, as the loop leaves out such a layer.
    sizes = [
        size
        for size in (int(np.ceil(f * by_score.size)) for f in FRACTIONS)
        if 0 <= audits_to_certify(size, target=target, alpha=alpha) <= size // 2
    ]
    out: dict[int, int] = {}
    for n in BUDGETS:
        seen = audited[:n]
        stated = 0
        for size in sizes:
            inside = seen[rank[seen] < size]
            prefix_errors = np.cumsum(wrong[inside])
            if not ConfidenceTest(size, target, alpha).verdict(prefix_errors).certified:
                break
            stated = size
        out[n] = stated
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=["sample", "BirdSong", "synthetic50k"])
    parser.add_argument("--orders", type=int, default=20, help="random audit orders per design")
    args = parser.parse_args(argv)
    settings = LoopSettings()
    alpha = (1.0 - settings.confidence) * lot_share(1)
    print(
        "| set | lot: labels, wrong | design | "
        + " | ".join(f"certified after {n} audits" for n in BUDGETS)
        + " |\n|---|---|---|"
        + "---|" * len(BUDGETS)
    )
    for name in args.sets:
        start = time.perf_counter()
        lot, wrong, scores = first_lot(name, settings)
        rng = np.random.default_rng(0)
        runs = {
            "layered": [layered(lot, wrong, rng) for _ in range(args.orders)],
            "layered, sets in sequence": [
                layered_in_sequence(lot, wrong, alpha, settings.max_error, rng) for _ in range(args.orders)
            ],
            "fixed sequence": [
                fixed_sequence(wrong, scores, alpha, settings.max_error, rng) for _ in range(args.orders)
            ],
        }
        for design, results in runs.items():
            cells = " | ".join(f"{np.mean([r[n] for r in results]):,.0f}" for n in BUDGETS)
            print(f"| {name} | {wrong.size:,}, {int(wrong.sum())} | {design} | {cells} |")
        print(f"{name}: {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
