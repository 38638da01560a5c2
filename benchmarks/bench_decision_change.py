"""Per-answer cost of the decision_change ranker beside apl's IncrementalRanker, same process.

For each size: build both rankers on the same synthetic graph (``benchmarks/synthetic.py``:
k = 10, 20 labels, 30 % partial rows of 2-4 labels, and a harder variant with 90 % partial),
then answer the same 300 random partial items with their true label one by one, timing each
``update`` (and, separately, the greedy selection of a batch of 20 and a top-10 ranking).
Prints a markdown table with medians, 90th percentiles and the ratio to apl.

Usage::

    python benchmarks/bench_decision_change.py                # 20k and 100k
    python benchmarks/bench_decision_change.py --sizes 20000 -o docs/decision_change_timing.md
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np

from benchmarks.synthetic import clustered_problem
from engine.decision_change import DecisionChangeRanker
from engine.query import IncrementalRanker


def _answers(Y: np.ndarray, truth: np.ndarray, count: int, seed: int) -> list[tuple[int, np.ndarray]]:
    partial = np.flatnonzero(Y.sum(axis=1) >= 2)
    items = np.random.default_rng(seed).choice(partial, size=min(count, partial.size), replace=False)
    out = []
    for item in items:
        row = np.zeros(Y.shape[1], dtype=bool)
        row[truth[item]] = True
        out.append((int(item), row))
    return out


def _time_updates(ranker, answers) -> np.ndarray:
    times = []
    for item, row in answers:
        started = time.perf_counter()
        ranker.update(item, row)
        times.append(time.perf_counter() - started)
    return np.array(times)


def measure(n: int, partial_rate: float, n_answers: int) -> list[dict]:
    idx, w, Y, truth = clustered_problem(n, k=10, n_labels=20, partial_rate=partial_rate, seed=0)
    answers = _answers(Y, truth, n_answers, seed=1)
    rows = []
    for name, build in (
        ("apl", lambda: IncrementalRanker(idx, w, Y, criterion="apl")),
        ("decision_change", lambda: DecisionChangeRanker(idx, w, Y, random_state=0)),
    ):
        started = time.perf_counter()
        ranker = build()
        setup = time.perf_counter() - started
        updates = _time_updates(ranker, answers)
        started = time.perf_counter()
        for _ in range(5):
            ranker.ranking(top=10)
        top10 = (time.perf_counter() - started) / 5
        batch = float("nan")
        if name == "decision_change":
            started = time.perf_counter()
            for _ in range(5):
                ranker.select(20)
            batch = (time.perf_counter() - started) / 5
        rows.append(
            {
                "n": n,
                "partial": partial_rate,
                "strategy": name,
                "setup_s": setup,
                "median_ms": 1e3 * np.median(updates),
                "p90_ms": 1e3 * np.quantile(updates, 0.9),
                "top10_ms": 1e3 * top10,
                "batch20_ms": 1e3 * batch,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20000,100000")
    parser.add_argument("--answers", type=int, default=300)
    parser.add_argument("-o", "--output", type=Path, default=None, help="also write the table to this markdown file")
    args = parser.parse_args()
    lines = [
        f"Per-answer update of the incremental rankers ({time.strftime('%Y-%m-%d')}, Python "
        f"{platform.python_version()}, "
        f"shared 2-core machine; `benchmarks/bench_decision_change.py`, {args.answers} answers per row, same process):",
        "",
        "| n | partial | strategy | set-up s | update median ms | update p90 ms | ratio to apl (median) | top-10 ms | "
        "greedy batch of 20 ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n in (int(s) for s in args.sizes.split(",")):
        for partial_rate in (0.3, 0.9):
            rows = measure(n, partial_rate, args.answers)
            apl = rows[0]["median_ms"]
            for r in rows:
                batch = "–" if np.isnan(r["batch20_ms"]) else f"{r['batch20_ms']:.1f}"
                lines.append(
                    f"| {r['n']:,} | {r['partial']:.0%} | {r['strategy']} | {r['setup_s']:.2f} | "
                    f"{r['median_ms']:.2f} | "
                    f"{r['p90_ms']:.2f} | {r['median_ms'] / apl:.2f} | {r['top10_ms']:.1f} | {batch} |"
                )
            print("\n".join(lines[-2:]), flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output is not None:
        args.output.write_text(text)


if __name__ == "__main__":
    main()
