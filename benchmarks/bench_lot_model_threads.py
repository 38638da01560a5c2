"""A lot's model on one BLAS thread (as shipped) against the machine's BLAS threads.

:class:`engine.lot_model.LotModel` runs on one BLAS thread so that every machine freezes the
same lots from the same answers. This measures what that costs a freeze, and whether the scores
with the machine's threads differ, on generated items with BirdSong's shape and larger.

    python -m benchmarks.bench_lot_model_threads --sizes 5000 20000 50000
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_info

from engine.lot_model import LotModel
from engine.neighbors import knn_graph


def generated(n: int, features: int, classes: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Items in ``classes`` Gaussian clusters, each candidate set its true label and a third of the others."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, classes, n)
    X = rng.normal(scale=2.0, size=(classes, features))[truth] + rng.normal(scale=2.5, size=(n, features))
    Y = rng.random((n, classes)) < 0.35
    Y[np.arange(n), truth] = True
    idx, _ = knn_graph(X, k=10)
    return X, Y, idx


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[5000, 20000, 50000])
    parser.add_argument("--features", type=int, default=38)
    parser.add_argument("--classes", type=int, default=13)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    threads = max((int(lib["num_threads"]) for lib in threadpool_info() if lib["user_api"] == "blas"), default=1)
    print(f"machine's BLAS threads: {threads}; best of {args.repeats}")
    print("| items | one thread (shipped), s | machine's threads (baseline), s | ratio | scores identical |")
    print("|---:|---:|---:|---:|---|")
    for n in args.sizes:
        X, Y, idx = generated(n, args.features, args.classes)
        shipped, baseline = LotModel(idx, X), LotModel(idx, X, one_blas_thread=False)
        timings: dict[str, float] = {}
        outputs = {}
        for name, run in (("one", shipped), ("machine", baseline)):
            best = float("inf")
            for _ in range(args.repeats):
                start = time.perf_counter()
                outputs[name] = run(Y)
                best = min(best, time.perf_counter() - start)
            timings[name] = best
        same = all(np.array_equal(a, b) for a, b in zip(outputs["one"], outputs["machine"], strict=True))
        print(
            f"| {n:,} | {timings['one']:.2f} | {timings['machine']:.2f} "
            f"| {timings['one'] / timings['machine']:.2f} | {'yes' if same else 'no'} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
