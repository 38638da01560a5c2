"""Engine timings: apl query scores at 1M targets, pl scores, incremental re-ranking.

Run: ``.venv/bin/python -m benchmarks.bench_engine [--quick]``. Prints tables for
docs/benchmarks.md. Times are wall-clock on whatever machine runs it; every row also gives
a ratio to a baseline measured in the same process, which travels better between machines.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.synthetic import clustered_problem
from engine.query import IncrementalRanker, query_scores
from engine.winners import vote_bounds


def best_of(repeats: int, fn, *args, **kwargs) -> tuple[float, object]:
    best, result = np.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        best = min(best, time.perf_counter() - start)
    return best, result


def table(title: str, header: list[str], rows: list[list]) -> None:
    print(f"\n### {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in row) + " |")


def bench_apl(n_targets: int, repeats: int) -> None:
    rows = []
    for note, weights in (("clustered, uniform weights", "uniform"), ("clustered, random float weights", "random")):
        idx, w, Y, _ = clustered_problem(n_targets, k=10, n_labels=20, partial_rate=0.3, seed=0, weights=weights)
        floor, _ = best_of(repeats, np.take, Y, idx, axis=0)
        bounds, _ = best_of(repeats, vote_bounds, idx, w, Y)  # includes the input validation
        apl, scores = best_of(repeats, query_scores, idx, w, Y, criterion="apl")
        rows.append(
            [note, n_targets, 10, 20, floor, bounds, apl, n_targets / apl, apl / floor, int((scores > 0).sum())]
        )
    table(
        "apl query scores (one core, after the kNN graph)",
        [
            "data",
            "T",
            "K",
            "M",
            "take (T,K,M) s",
            "bounds s",
            "apl scores s",
            "targets/s",
            "ratio to take",
            "items scored > 0",
        ],
        rows,
    )


def bench_pl(n_targets: int) -> None:
    rows = []
    for weights in ("uniform", "random"):
        idx, w, Y, _ = clustered_problem(n_targets, k=10, n_labels=10, partial_rate=0.3, seed=1, weights=weights)
        t_apl, apl = best_of(1, query_scores, idx, w, Y, criterion="apl")
        t_pl, pl = best_of(1, query_scores, idx, w, Y, criterion="pl")
        rows.append([weights, n_targets, t_apl, t_pl, t_pl / t_apl, int((pl > 0).sum()), int((apl > 0).sum())])
    table("pl vs apl query scores", ["weights", "T", "apl s", "pl s", "pl/apl", "items pl > 0", "items apl > 0"], rows)


def bench_incremental(n: int, n_answers: int) -> None:
    idx, w, Y, truth = clustered_problem(n, k=10, n_labels=20, partial_rate=0.3, seed=2)
    t_init, ranker = best_of(1, IncrementalRanker, idx, w, Y, criterion="apl")
    rng = np.random.default_rng(0)
    partial = np.flatnonzero(Y.sum(axis=1) >= 2)
    answered = rng.choice(partial, size=n_answers, replace=False)
    times = []
    for item in answered:
        row = np.zeros(Y.shape[1], bool)
        row[truth[item]] = True
        start = time.perf_counter()
        ranker.update(int(item), row)
        ranker.ranking(top=10)
        times.append(time.perf_counter() - start)
    t_full, _ = best_of(1, query_scores, idx, w, ranker.Y, criterion="apl")
    times = np.array(times) * 1000
    table(
        "incremental re-ranking after one answer (update + top-10)",
        [
            "n",
            "K",
            "M",
            "answers",
            "build s",
            "median ms",
            "p95 ms",
            "max ms",
            "full recompute ms",
            "speed-up (median)",
        ],
        [
            [
                n,
                10,
                20,
                n_answers,
                t_init,
                float(np.median(times)),
                float(np.percentile(times, 95)),
                float(times.max()),
                t_full * 1000,
                t_full * 1000 / float(np.median(times)),
            ]
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    bench_apl(1_000_000 // scale, repeats=1 if args.quick else 3)
    bench_pl(2_000)
    bench_incremental(100_000 // scale, n_answers=200)
    try:
        from benchmarks.bench_exact_pl import main as bench_exact_pl
    except ImportError:
        return
    bench_exact_pl()


if __name__ == "__main__":
    main()
