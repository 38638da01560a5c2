"""How clean the top of each lot score is: DST-PLL's margin against its agreement with a linear
model of the features (issue 28; ``app.service.lots.selection_scores``).

On the real partially labelled sets of ``../shared/data/pll`` (relative to the repository root;
features min-max scaled, k = 10 uniform neighbours, as ``benchmarks.labels_delivered``): an
expert settles ``--answers`` partial items drawn at random (a third of the partial items when
fewer), then every open item (two or more candidates, not answered) gets DST-PLL's label and
each score. For the items each score ranks highest, the table gives the share whose label is
wrong (top 50, 100, 200, 400), the *ceiling* (the most top items at ≤ 5 % error, chosen with the
truth), and for the agreement score the linear model's own estimate of that share (the mean of
one minus its probability of the label), which ``ESTIMATED_ERROR_SHARE`` stops a lot at.

Not part of ``make test``. About a minute a set on one core.

Run: ``python -m benchmarks.lot_scores --sets BirdSong lost MSRCv2 --seeds 3``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402 - after the thread limits, which must precede numpy

import numpy as np  # noqa: E402

from app.service.lots import agreement, linear_decisions  # noqa: E402
from benchmarks.labels_delivered import PLL_DIR  # noqa: E402
from engine.dst_evidence import transductive_decisions  # noqa: E402
from engine.neighbors import knn_graph  # noqa: E402

TOPS = (50, 100, 200, 400)
TARGET = 0.05


def top_errors(wrong_sorted: np.ndarray) -> tuple[list[float], int]:
    """The share wrong among the top 50/100/200/400 and the ceiling at the target."""
    share = np.cumsum(wrong_sorted) / np.arange(1, wrong_sorted.size + 1)
    within = np.flatnonzero(share <= TARGET)
    tops = [float(share[min(t, share.size) - 1]) if share.size else float("nan") for t in TOPS]
    return tops, int(within[-1] + 1) if within.size else 0


def one_run(name: str, seed: int, answers: int) -> list[dict]:
    from app.io import read_dataset

    data = read_dataset(PLL_DIR / f"{name}.mat")
    X = np.asarray(data.X, dtype=np.float64)
    low, high = X.min(axis=0), X.max(axis=0)
    X = (X - low) / np.where(high > low, high - low, 1.0)
    original, truth = np.asarray(data.candidates, dtype=bool), np.asarray(data.true_labels)
    idx, _ = knn_graph(X, k=10)
    partial = original.sum(axis=1) > 1
    rng = np.random.default_rng(seed)
    answered = rng.choice(np.flatnonzero(partial), min(answers, int(partial.sum()) // 3), replace=False)
    current = original.copy()
    current[answered] = False
    current[answered, truth[answered]] = True
    open_items = np.flatnonzero(current.sum(axis=1) > 1)
    labels, _, margins = transductive_decisions(current, idx, random_state=0)
    linear_labels, linear_margins, probability = linear_decisions(X, current)
    scores = {
        "DST-PLL margin": margins,
        "agreement": agreement(linear_labels, linear_margins, labels, margins),
    }
    rows = []
    for score_name, score in scores.items():
        ranked = open_items[np.argsort(-score[open_items], kind="stable")]
        ranked = ranked[score[ranked] > 0]  # DST-PLL's reject rule (agreement: both agree)
        wrong = labels[ranked] != truth[ranked]
        tops, ceiling = top_errors(wrong)
        row = {
            "set": name,
            "seed": seed,
            "answers": answered.size,
            "score": score_name,
            "tops": tops,
            "ceiling": ceiling,
        }
        if score_name == "agreement":
            estimate = np.cumsum(1.0 - probability[ranked]) / np.arange(1, ranked.size + 1)
            row["estimate"] = [float(estimate[min(t, ranked.size) - 1]) for t in TOPS]
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", default=["BirdSong", "lost", "MSRCv2"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--answers", type=int, default=500)
    args = parser.parse_args(argv)
    print(
        "| set | seed | answers | score | top 50 | top 100 | top 200 | top 400 | ceiling at 5 % "
        "| model's estimate, top 50 / 100 / 200 / 400 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.sets:
        for seed in range(args.seeds):
            for row in one_run(name, seed, args.answers):
                tops = " | ".join(f"{t:.1%}" for t in row["tops"])
                estimate = " / ".join(f"{e:.1%}" for e in row.get("estimate", [])) or "–"
                head = f"| {row['set']} | {row['seed']} | {row['answers']} | {row['score']}"
                print(f"{head} | {tops} | {row['ceiling']:,} | {estimate} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
