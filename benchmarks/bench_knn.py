"""Exact versus approximate (faiss HNSW) k-NN graphs, and what the difference does downstream.

Synthetic clustered Gaussian data (200 centres in d = 50, unit noise), k = 10, every point a
target with itself left out. For each size: HNSW build-and-query time (``knn_graph(...,
algorithm="approx")``), exact search time,
recall@10 of the approximate graph against the exact one, then with synthetic candidate
sets (``benchmarks.synthetic.partial_candidates``, label mostly set by the centre, 30 %
partial, M = 20): the fraction of targets whose NL or APL set differs between the graphs,
and the overlap of the top-100 items by ``query_scores(..., criterion="apl")``.

When the exact graph of every point is too slow (``--exact-sample``), exact neighbours
are computed for a random sample of targets only: recall and NL/APL changes are then
measured on that sample, and the top-100 overlap (which needs every target) is not.

``--pynndescent`` adds the library comparison behind the choice of faiss: pynndescent's
self graph (``NNDescent(n_neighbors=30)``, the setting that matched HNSW's recall) built
twice in one process, the first build paying numba's compilation.

Run:  python -m benchmarks.bench_knn --sizes 100000 1000000 --exact-sample 10000
Prints a markdown table.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.synthetic import partial_candidates
from engine.neighbors import knn_graph
from engine.query import query_scores
from engine.winners import label_sets

K, D, N_LABELS, N_CENTRES = 10, 50, 20, 200


def clustered_gaussian(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=4.0, size=(N_CENTRES, D))
    centre = rng.integers(0, N_CENTRES, size=n)
    X = (centres[centre] + rng.normal(size=(n, D))).astype(np.float32)
    centre_label = rng.integers(0, N_LABELS, size=N_CENTRES)
    true = np.where(rng.random(n) < 0.8, centre_label[centre], rng.integers(0, N_LABELS, size=n))
    Y = partial_candidates(true, N_LABELS, partial_rate=0.3, rng=rng)
    return X, Y


def exact_neighbours_of(X, sample):
    """Exact K nearest other rows of the sampled targets (self left out by identity, as knn_graph does)."""
    idx, _ = knn_graph(X, X[sample], k=K + 1, algorithm="exact")
    is_self = idx == sample[:, None]
    drop = np.where(is_self.any(axis=1), is_self.argmax(axis=1), K)
    keep = np.ones_like(is_self)
    keep[np.arange(len(sample)), drop] = False
    return idx[keep].reshape(-1, K)


def run(n: int, exact_sample: int | None, seed: int = 0) -> dict:
    X, Y = clustered_gaussian(n, seed)
    row = {"n": n}
    t = time.perf_counter()
    approx_idx, _ = knn_graph(X, k=K, algorithm="approx")
    row["hnsw_s"] = time.perf_counter() - t

    sample = None
    if exact_sample is not None and exact_sample < n:
        sample = np.sort(np.random.default_rng(seed + 1).choice(n, exact_sample, replace=False))
    t = time.perf_counter()
    if sample is None:
        exact_idx, _ = knn_graph(X, k=K, algorithm="exact")
        rows = np.arange(n)
    else:
        exact_idx = exact_neighbours_of(X, sample)
        rows = sample
    row["exact_s"] = time.perf_counter() - t
    row["exact_targets"] = len(rows)

    a = approx_idx[rows]
    row["recall@10"] = np.mean([len(set(p) & set(q)) for p, q in zip(a, exact_idx, strict=True)]) / K
    ones = np.ones(a.shape)
    nl_a, apl_a = label_sets(a, ones, Y)
    nl_e, apl_e = label_sets(exact_idx, ones, Y)
    row["nl_changed"] = (nl_a != nl_e).any(axis=1).mean()
    row["apl_changed"] = (apl_a != apl_e).any(axis=1).mean()
    row["nl_or_apl_changed"] = ((nl_a != nl_e) | (apl_a != apl_e)).any(axis=1).mean()
    if sample is None:
        s_a = query_scores(approx_idx, np.ones(approx_idx.shape), Y, criterion="apl")
        s_e = query_scores(exact_idx, np.ones(exact_idx.shape), Y, criterion="apl")
        top_a = np.argsort(-s_a, kind="stable")[:100]
        top_e = np.argsort(-s_e, kind="stable")[:100]
        row["top100_overlap"] = len(np.intersect1d(top_a, top_e)) / 100
    else:
        row["top100_overlap"] = float("nan")
    return row


def pynndescent_rows(n: int, seed: int = 0) -> list[str]:
    import pynndescent

    X, _ = clustered_gaussian(n, seed)
    sample = np.sort(np.random.default_rng(seed + 1).choice(n, 2000, replace=False))
    idx = exact_neighbours_of(X, sample)
    out = []
    for attempt in ("first build (numba compiles)", "second build, same process"):
        t = time.perf_counter()
        graph_idx, _ = pynndescent.NNDescent(X, n_neighbors=30, random_state=seed).neighbor_graph
        build = time.perf_counter() - t
        found = [len(set(g[g != q][:K]) & set(e)) for g, e, q in zip(graph_idx[sample], idx, sample, strict=True)]
        out.append(f"| pynndescent, {attempt} | {n:,} | {build:.1f} | {np.mean(found) / K:.4f} |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument(
        "--exact-sample",
        type=int,
        default=None,
        help="exact neighbours for this many random targets only (sizes above it)",
    )
    parser.add_argument("--pynndescent", action="store_true", help="also time pynndescent at the first size")
    args = parser.parse_args()
    print(
        "| n | HNSW build + query (s) | exact search (s) | exact targets | recall@10 | NL changed | APL changed | NL "
        "or APL changed | top-100 overlap (apl) |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        r = run(n, args.exact_sample if n > (args.exact_sample or n) else None)
        top = "n/a" if np.isnan(r["top100_overlap"]) else f"{r['top100_overlap']:.2f}"
        print(
            f"| {r['n']:,} | {r['hnsw_s']:.1f} | {r['exact_s']:.1f} | {r['exact_targets']:,} "
            f"| {r['recall@10']:.4f} | {r['nl_changed']:.4%} | {r['apl_changed']:.4%} | {r['nl_or_apl_changed']:.4%} | "
            f"{top} |",
            flush=True,
        )
    if args.pynndescent:
        print()
        print("| library | n | self-graph build incl. search (s) | recall@10 (2,000 sampled targets) |")
        print("|---|---:|---:|---:|")
        for line in pynndescent_rows(args.sizes[0]):
            print(line, flush=True)


if __name__ == "__main__":
    main()
