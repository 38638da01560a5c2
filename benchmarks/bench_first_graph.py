"""The first k-NN graph of a large session: the current HNSW builder against other faiss indexes.

Issue 32 asks for the first graph at 1M items in at most 60 s at recall@10 ≥ 0.99. For each
size, on clustered Gaussian data like ``bench_scale_app``'s (200 centres N(0, 4²), unit
noise, d = 64, float32), every item's 10 nearest other items (the self graph, as
:func:`engine.neighbors.knn_graph` builds it), with:

* ``current``: ``faiss.IndexHNSWFlat`` with the shipped parameters
  (:data:`engine.neighbors.HNSW_LINKS`, ``HNSW_EF_CONSTRUCTION``, ``HNSW_EF_SEARCH``);
* ``hnsw``: HNSW with fewer links or a shorter build list (``M``, ``efConstruction``),
  ``efSearch`` tuned;
* ``ivf-flat``: ``faiss.IndexIVFFlat``, a coarse quantiser of ``nlist ≈ 4·sqrt(n)`` k-means
  centroids trained on a sample of 64 rows per list (faiss's k-means, seeded, 25
  iterations), ``nprobe`` tuned; ``ivf-flat-quick``: the same trained on 39 rows per list
  (faiss's least without a warning) in 10 iterations (the builder shipped before ``ivf-join``);
* ``ivf-join``: what :func:`engine.neighbors.knn_graph` builds from ``IVF_THRESHOLD`` rows on
  (lowered to 0 in its process so that it runs at every size), called as the app calls it
  (float64 features): ``sqrt(n)`` lists, each list's rows searched as one block against the
  rows of its nearest lists, their number tuned to the recall on the engine's own sample.
  Its build is the training and the sorting of rows into lists; its search includes the
  tuning (an exact search of 1,000 rows), which the other methods' ladders leave out.

"Tuned": the smallest value of a fixed ladder whose recall@10 reaches ``--recall`` (0.99)
on one random sample of ``--sample`` (2,000) rows is used for the whole search (the ladder's
searches are not counted in the search time: a shipped builder fixes the value); recall@10
is then measured on another such sample, against exact neighbours (``faiss.IndexFlatL2``,
brute force, self left out by identity). Each method runs in a fresh process that loads the
data from one ``.npy`` file (written by another child: a child's peak RSS starts from its
parent's at the fork), so its peak RSS (``os.wait4``) is its own; CPU is that
process's user + system time, which moves less with the load than the wall time. The ratio
columns are the method's build + search time over ``current``'s and ``ivf-flat-quick``'s in the
same run (wall and CPU).

Run:  python -m benchmarks.bench_first_graph --sizes 100000 300000 1000000
Prints a markdown table per size.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from engine.neighbors import HNSW_EF_CONSTRUCTION, HNSW_EF_SEARCH, HNSW_LINKS

K, D, N_CENTRES = 10, 64, 200
EF_LADDER = (16, 24, 32, 48, 64, 96, 128, 192, 256)
NPROBE_LADDER = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
#: Rows searched per call (faiss parallelises inside each call).
CHUNK = 50_000

#: (method, build parameters); ``current`` first: the ratios are to it.
METHODS: tuple[tuple[str, dict[str, int]], ...] = (
    ("current", {"M": HNSW_LINKS, "efConstruction": HNSW_EF_CONSTRUCTION}),
    ("hnsw", {"M": 16, "efConstruction": 40}),
    ("hnsw", {"M": 32, "efConstruction": 40}),
    ("ivf-flat", {"train_per_list": 64, "niter": 25}),
    ("ivf-flat-quick", {"train_per_list": 39, "niter": 10}),
    ("ivf-join", {}),
)


def clustered(n: int, seed: int = 0) -> np.ndarray:
    """``bench_scale_app``'s features: 200 centres N(0, 4²) in d = 64, unit noise (float32)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=4.0, size=(N_CENTRES, D)).astype(np.float32)
    cluster = rng.integers(N_CENTRES, size=n)
    return centres[cluster] + rng.normal(size=(n, D)).astype(np.float32)


def drop_self(idx: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The first ``K`` of ``K + 1`` neighbours other than the row itself (by identity)."""
    is_self = idx == rows[:, None]
    drop = np.where(is_self.any(axis=1), is_self.argmax(axis=1), K)
    keep = np.ones_like(is_self)
    keep[np.arange(idx.shape[0]), drop] = False
    return idx[keep].reshape(-1, K)


def recall(found: np.ndarray, exact: np.ndarray) -> float:
    """Mean share of the exact ``K`` neighbours found, per row."""
    hits = (found[:, :, None] == exact[:, None, :]).any(axis=2).sum(axis=1)
    return float(hits.mean() / K)


def nlist_for(n: int) -> int:
    """``4·sqrt(n)`` rounded to a multiple of 16."""
    return max(16, int(round(4 * np.sqrt(n) / 16)) * 16)


def child(method: str, params: dict[str, int], data: Path, sample_file: Path, target: float) -> dict[str, object]:
    """One method in this (fresh) process: build, tune on the sample, search every row."""
    import faiss

    X = np.load(data)
    n = X.shape[0]
    if method == "ivf-join":
        return join_child(X, sample_file)
    drawn = np.load(sample_file)
    exact_drawn = np.load(sample_file.with_name(sample_file.stem + "_exact.npy"))
    half = drawn.size // 2
    tune, tune_exact = drawn[:half], exact_drawn[:half]
    sample, exact = drawn[half:], exact_drawn[half:]
    t0, c0 = time.perf_counter(), time.process_time()
    if method in ("current", "hnsw"):
        index = faiss.IndexHNSWFlat(D, params["M"])
        index.hnsw.efConstruction = params["efConstruction"]
        index.add(X)
        ladder, knob = EF_LADDER, "efSearch"
    else:
        nlist = nlist_for(n)
        quantiser = faiss.IndexFlatL2(D)
        index = faiss.IndexIVFFlat(quantiser, D, nlist)
        # faiss's k-means draws at most 256 training points per centroid and iterates 25
        # times; fewer points (seeded) and iterations make the training cheaper.
        rng = np.random.default_rng(1)
        train = X[np.sort(rng.choice(n, size=min(n, params.get("train_per_list", 64) * nlist), replace=False))]
        index.cp.seed = 1234
        index.cp.niter = params.get("niter", 25)
        index.train(train)
        index.add(X)
        params = {"nlist": nlist, "train": int(train.shape[0]), "niter": index.cp.niter}
        ladder, knob = NPROBE_LADDER, "nprobe"
    build_s, build_cpu = time.perf_counter() - t0, time.process_time() - c0

    def set_knob(value: int) -> None:
        if knob == "efSearch":
            index.hnsw.efSearch = value
        else:
            index.nprobe = value

    if method == "current":
        chosen = HNSW_EF_SEARCH
    else:
        chosen = ladder[-1]
        for value in ladder:
            set_knob(value)
            _, got = index.search(X[tune], K + 1)
            if recall(drop_self(got, tune), tune_exact) >= target:
                chosen = value
                break
    set_knob(chosen)
    t1, c1 = time.perf_counter(), time.process_time()
    idx = np.empty((n, K + 1), dtype=np.int64)
    for start in range(0, n, CHUNK):
        idx[start : start + CHUNK] = index.search(X[start : start + CHUNK], K + 1)[1]
    search_s, search_cpu = time.perf_counter() - t1, time.process_time() - c1
    graph = drop_self(idx[sample], sample)
    return {
        "method": method,
        "params": {**params, knob: chosen},
        "build_s": build_s,
        "build_cpu": build_cpu,
        "search_s": search_s,
        "search_cpu": search_cpu,
        "recall": recall(graph, exact),
    }


def join_child(X: np.ndarray, sample_file: Path) -> dict[str, object]:
    """``ivf-join`` in this process: :func:`engine.neighbors.knn_graph` on every row, timed by
    its progress reports (build: the ``train`` and ``index`` stages; search: ``check`` and
    ``search``)."""
    from engine import neighbors

    neighbors.IVF_THRESHOLD = 0
    X64 = X.astype(np.float64)
    del X
    drawn = np.load(sample_file)
    exact_drawn = np.load(sample_file.with_name(sample_file.stem + "_exact.npy"))
    half = drawn.size // 2
    sample, exact = drawn[half:], exact_drawn[half:]
    clocks: dict[str, tuple[float, float]] = {}

    def progress(stage: str, done: int, total: int) -> None:
        if done == 0 or stage not in clocks:
            clocks[stage] = (time.perf_counter(), time.process_time())
        if done == total:
            started, cpu_started = clocks[stage]
            clocks[stage] = (time.perf_counter() - started, time.process_time() - cpu_started)

    idx, _ = neighbors.knn_graph(X64, k=K, algorithm="approx", progress=progress)
    build, search = ("train", "index"), ("check", "search")
    return {
        "method": "ivf-join",
        "params": {"engine": neighbors.approx_parameters(X64.shape[0])},
        "build_s": sum(clocks[stage][0] for stage in build),
        "build_cpu": sum(clocks[stage][1] for stage in build),
        "search_s": sum(clocks[stage][0] for stage in search),
        "search_cpu": sum(clocks[stage][1] for stage in search),
        "recall": recall(idx[sample], exact),
    }


def exact_neighbours(X: np.ndarray, sample: np.ndarray) -> np.ndarray:
    """Exact ``K`` nearest other rows of the sampled rows (brute force, self left out)."""
    import faiss

    flat = faiss.IndexFlatL2(D)
    flat.add(X)
    _, idx = flat.search(X[sample], K + 1)
    return drop_self(idx, sample)


def write_data(n: int, data: Path, sample_file: Path, sample_size: int) -> None:
    """The data, both samples and their exact neighbours, written by a child process: a
    child's peak RSS starts from its parent's at the fork, so the parent stays small."""
    X = clustered(n)
    np.save(data, X)
    # Two disjoint samples: the parameter is tuned on the first, the recall measured on the second.
    drawn = np.random.default_rng(2).choice(n, size=min(2 * sample_size, n), replace=False)
    np.save(sample_file, drawn)
    np.save(sample_file.with_name(sample_file.stem + "_exact.npy"), exact_neighbours(X, drawn))


def run_size(n: int, workdir: Path, sample_size: int, target: float, methods: list[str]) -> list[dict[str, object]]:
    data = workdir / f"first_graph_{n}.npy"
    sample_file = workdir / f"first_graph_{n}_sample.npy"
    spec = json.dumps({"n": n, "data": str(data), "sample": str(sample_file), "size": sample_size})
    subprocess.run([sys.executable, "-m", "benchmarks.bench_first_graph", "--write", spec], check=True)
    rows = []
    for method, params in METHODS:
        if method not in methods:
            continue
        spec = json.dumps({"method": method, "params": params, "data": str(data), "sample": str(sample_file)})
        with tempfile.TemporaryFile() as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.bench_first_graph", "--child", spec, "--recall", str(target)],
                stdout=out,
            )
            _, status, usage = os.wait4(proc.pid, 0)
            if os.waitstatus_to_exitcode(status):
                raise RuntimeError(f"{method} {params} failed at n={n}")
            out.seek(0)
            row = json.loads(out.read().decode().splitlines()[-1])
        row["n"] = n
        row["rss_mb"] = usage.ru_maxrss / 1024
        rows.append(row)
        print(
            f"  {n:>9,} {method:<9} {row['params']} build {row['build_s']:.1f} s search {row['search_s']:.1f} s "
            f"recall {row['recall']:.4f}",
            flush=True,
        )
    for path in (data, sample_file, sample_file.with_name(sample_file.stem + "_exact.npy")):
        path.unlink(missing_ok=True)
    return rows


def print_table(rows: list[dict[str, object]]) -> None:
    """One line per method and size; the ratios are build + search over ``current``'s and over
    ``ivf-flat-quick``'s (the builder shipped before ``ivf-join``) in the same run, wall / CPU."""
    print(
        "| n | method | parameters | build s (CPU) | search s (CPU) | recall@10 | peak RSS MB "
        "| ratio to current (wall / CPU) | ratio to ivf-flat-quick (wall / CPU) |"
    )
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|")

    def totals(row: dict[str, object]) -> tuple[float, float]:
        return float(row["build_s"]) + float(row["search_s"]), float(row["build_cpu"]) + float(row["search_cpu"])

    baselines = {
        name: {r["n"]: totals(r) for r in rows if r["method"] == name} for name in ("current", "ivf-flat-quick")
    }
    for r in rows:
        wall, cpu = totals(r)
        ratios = []
        for name in ("current", "ivf-flat-quick"):
            base = baselines[name].get(r["n"])
            ratios.append(f"{wall / base[0]:.2f} / {cpu / base[1]:.2f}" if base else "–")
        params = ", ".join(f"{k}={v}" for k, v in r["params"].items())  # type: ignore[union-attr]
        print(
            f"| {r['n']:,} | {r['method']} | {params} | {r['build_s']:.1f} ({r['build_cpu']:.1f}) "
            f"| {r['search_s']:.1f} ({r['search_cpu']:.1f}) | {r['recall']:.4f} | {r['rss_mb']:.0f} "
            f"| {ratios[0]} | {ratios[1]} |"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 300_000])
    parser.add_argument("--sample", type=int, default=2_000)
    parser.add_argument("--recall", type=float, default=0.99)
    parser.add_argument("--methods", nargs="+", default=["current", "hnsw", "ivf-flat", "ivf-flat-quick", "ivf-join"])
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--write", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.write is not None:
        spec = json.loads(args.write)
        write_data(spec["n"], Path(spec["data"]), Path(spec["sample"]), spec["size"])
        return
    if args.child is not None:
        spec = json.loads(args.child)
        print(json.dumps(child(spec["method"], spec["params"], Path(spec["data"]), Path(spec["sample"]), args.recall)))
        return
    print(f"{os.cpu_count()} cores; load average before: {os.getloadavg()}", flush=True)
    rows = []
    for n in args.sizes:
        rows += run_size(n, args.workdir, args.sample, args.recall, args.methods)
    print(f"\nLoad average after: {os.getloadavg()}\n")
    print_table(rows)


if __name__ == "__main__":
    main()
