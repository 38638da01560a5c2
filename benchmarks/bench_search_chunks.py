"""What reporting the k-NN search in steps costs (issue 29).

An exact search of a few tens of thousands of rows is one :data:`engine.neighbors.SEARCH_CHUNK`,
so its progress bar used to move once, at the end. It is now cut in up to
:data:`engine.neighbors.PROGRESS_STEPS` chunks of at least
:data:`engine.neighbors.MIN_SEARCH_CHUNK` rows (2,048 per core). This times :func:`engine.neighbors.knn_graph`
(exact, k = 10, every row a target with itself left out) on clustered Gaussian data the old way
(one chunk: the step set to ``SEARCH_CHUNK``) and the new way, alternating, best of ``--runs``
each, and prints one table with the ratio new / old; the graphs must be equal.

Usage: python -m benchmarks.bench_search_chunks [--sizes 20000 50000] [--dims 64 384] [--runs 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from engine import neighbors


def clustered(n: int, d: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=4.0, size=(200, d))
    return centres[rng.integers(0, 200, n)] + rng.normal(size=(n, d))


def timed(X: np.ndarray, min_chunk: int) -> tuple[float, np.ndarray, int]:
    neighbors.MIN_SEARCH_CHUNK = min_chunk
    reports: list[int] = []
    started = time.perf_counter()
    idx, _ = neighbors.knn_graph(X, k=10, algorithm="exact", progress=lambda _s, done, _t: reports.append(done))
    return time.perf_counter() - started, idx, len(reports)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000, 50_000])
    parser.add_argument("--dims", type=int, nargs="+", default=[64, 384])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    new_min = neighbors.MIN_SEARCH_CHUNK
    print("| n | d | reports old | reports new | old: one chunk (s) | new: chunked (s) | new / old |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        for d in args.dims:
            X = clustered(n, d)
            old, new = [], []
            for _ in range(args.runs):
                seconds, old_idx, old_reports = timed(X, neighbors.SEARCH_CHUNK)
                old.append(seconds)
                seconds, new_idx, new_reports = timed(X, new_min)
                new.append(seconds)
                assert np.array_equal(old_idx, new_idx), "the chunking changed the graph"
            print(
                f"| {n:,} | {d} | {old_reports} | {new_reports} | {min(old):.2f} | {min(new):.2f} "
                f"| {min(new) / min(old):.2f} |"
            )
    neighbors.MIN_SEARCH_CHUNK = new_min


if __name__ == "__main__":
    main()
