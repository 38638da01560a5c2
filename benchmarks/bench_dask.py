"""``apl`` query scores of 10 million targets through Dask on this machine.

Synthetic problem in the spirit of ``benchmarks.synthetic.clustered_problem`` (K = 10,
M = 20, clusters of 50 rows, 30 % partial rows, uniform weights) but built chunk by chunk:
``Y`` on the client (it is scattered to every worker once), the neighbour graph ``(idx,
w)`` on the workers, one chunk of targets per task, so no process ever holds the whole
graph. No k-NN search: the graph is drawn inside each cluster.

Every configuration runs in a fresh subprocess so that peak memory (``ru_maxrss``) is its
own: the client's, and each worker's (read with ``client.run``). The single-process path
(``engine.query.query_scores`` on the whole graph in memory) is run at 1,000,000 targets
for the ratio.

Run:  python -m benchmarks.bench_dask --workers 2 --sizes 1000000 10000000
Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np

from benchmarks.synthetic import partial_candidates

K, N_LABELS, CLUSTER, CHUNK = 10, 20, 50, 250_000


def candidate_sets(n: int, seed: int = 0) -> np.ndarray:
    """Y of shape (n, M), built in chunks of CHUNK rows (row i belongs to cluster i // CLUSTER)."""
    Y = np.empty((n, N_LABELS), dtype=bool)
    for number, start in enumerate(range(0, n, CHUNK)):
        rng = np.random.default_rng([seed, number])
        rows = np.arange(start, min(n, start + CHUNK))
        cluster_label = np.random.default_rng([seed, 10**9 + 1]).integers(0, N_LABELS, size=n // CLUSTER + 1)
        true = np.where(
            rng.random(rows.size) < 0.8, cluster_label[rows // CLUSTER], rng.integers(0, N_LABELS, size=rows.size)
        )
        Y[rows] = partial_candidates(true, N_LABELS, partial_rate=0.3, rng=rng)
    return Y


def graph_chunk(n: int, start: int, stop: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """K distinct other members of each target's cluster, uniform weights: (idx, w) of rows start..stop."""
    rng = np.random.default_rng([seed, 2, start])
    rows = np.arange(start, stop)
    first = rows // CLUSTER * CLUSTER
    size = np.minimum(CLUSTER, n - first)
    shifts = (rng.permutation(CLUSTER - 1)[:K] + rng.integers(0, CLUSTER, size=(rows.size, 1))) % (CLUSTER - 1) + 1
    idx = first[:, None] + (rows[:, None] - first[:, None] + shifts) % size[:, None]
    return idx.astype(np.intp), np.ones((rows.size, K))


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_single(n: int) -> dict:
    from engine.query import query_scores

    t = time.perf_counter()
    Y = candidate_sets(n)
    parts = [graph_chunk(n, s, min(n, s + CHUNK)) for s in range(0, n, CHUNK)]
    idx, w = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    del parts
    generate = time.perf_counter() - t
    t = time.perf_counter()
    scores = query_scores(idx, w, Y, criterion="apl")
    score = time.perf_counter() - t
    return {
        "mode": "single process",
        "n": n,
        "generate_s": generate,
        "score_s": score,
        "client_peak_mb": peak_mb(),
        "worker_peak_mb": [],
        "checksum": float(scores.sum()),
        "top": int(scores.argmax()),
    }


def run_dask(n: int, workers: int) -> dict:
    from engine.distributed import dask_client, distributed_query_scores_from_chunks

    t = time.perf_counter()
    Y = candidate_sets(n)
    generate = time.perf_counter() - t
    with dask_client(n_workers=workers) as client:
        t = time.perf_counter()
        chunks = (client.submit(graph_chunk, n, s, min(n, s + CHUNK), pure=False) for s in range(0, n, CHUNK))
        scores = distributed_query_scores_from_chunks(chunks, Y, criterion="apl", client=client)
        score = time.perf_counter() - t
        worker_peaks = sorted(
            v / 1024 for v in client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss).values()
        )
    return {
        "mode": f"Dask, {workers} workers",
        "n": n,
        "generate_s": generate,
        "score_s": score,
        "client_peak_mb": peak_mb(),
        "worker_peak_mb": worker_peaks,
        "checksum": float(scores.sum()),
        "top": int(scores.argmax()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--one", nargs=2, metavar=("MODE", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        mode, n = args.one[0], int(args.one[1])
        print(json.dumps(run_single(n) if mode == "single" else run_dask(n, args.workers)))
        return
    configs = [("single", 1_000_000)] + [("dask", n) for n in args.sizes]
    rows = []
    for mode, n in configs:
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.bench_dask", "--workers", str(args.workers), "--one", mode, str(n)],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(rows[-1], file=sys.stderr, flush=True)
    base = rows[0]
    per_target = base["score_s"] / base["n"]
    print(
        "| path | targets | Y built on client (s) | scoring wall time (s) | vs single process at 1M, per target | "
        "client peak RSS (MB) | worker peak RSS (MB) | Σ scores |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        ratio = (r["score_s"] / r["n"]) / per_target
        workers = ", ".join(f"{m:.0f}" for m in r["worker_peak_mb"]) or "–"
        print(
            f"| {r['mode']} | {r['n']:,} | {r['generate_s']:.1f} | {r['score_s']:.1f} | {ratio:.2f}× | "
            f"{r['client_peak_mb']:.0f} | {workers} | {r['checksum']:.0f} |"
        )


if __name__ == "__main__":
    main()
