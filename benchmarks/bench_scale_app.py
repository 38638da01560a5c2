"""A large dataset end to end: import, rank (first build, then reopen), open, answer 20 items.

For each size (default 100,000 and 1,000,000 items; d = 64 features, 20 labels, clustered
Gaussian data, 30 % of the rows partial) this writes a Parquet file and runs, each step in a
fresh process so its wall time and peak RSS (``os.wait4``) are its own:

1. ``winnow import FILE --db bench.db --session s``
2. ``winnow rank --session s -o ranked.csv``: the first open of the session builds the k-NN
   graph (faiss HNSW past 100k items) and stores it;
3. the same command again: the graph is loaded, not built;
4. "open in the app and answer": what the app's server does in a new process: open the
   session's :class:`~app.service.Workbench` (load the items, hash the features, load the
   graph, first scoring; each stage timed through the progress callback), then answer the
   best-ranked item 20 times (its true label), timing for each answer the work of one Query
   page run: recording the event and refreshing the ranking, the event count, the metrics,
   the next item and its explanation;
5. optionally (``--workers N``) ``winnow rank FILE`` without and with ``--workers N``, to
   see what scoring over a local Dask cluster wins (the graph is built in-process in both).

Prints one table per size and, with ``--json FILE``, writes the figures. Run it in the
background for 1M: the first graph build alone takes minutes on 2 shared cores.

Usage: python -m benchmarks.bench_scale_app [--sizes 100000 1000000] [--workers 2]
       [--workdir DIR] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
N_FEATURES, N_LABELS, K = 64, 20, 10


def write_dataset(path: Path, n: int, *, seed: int = 0) -> None:
    """Clustered Gaussian items (200 centres, N(0, 4²)), labels by cluster, 30 % partial."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from benchmarks.synthetic import partial_candidates

    rng = np.random.default_rng(seed)
    n_clusters = 200
    centres = rng.normal(scale=4.0, size=(n_clusters, N_FEATURES)).astype(np.float32)
    cluster = rng.integers(n_clusters, size=n)
    cluster_label = rng.integers(N_LABELS, size=n_clusters)
    truth = np.where(rng.random(n) < 0.8, cluster_label[cluster], rng.integers(N_LABELS, size=n))
    X = centres[cluster] + rng.normal(size=(n, N_FEATURES)).astype(np.float32)
    Y = partial_candidates(truth, N_LABELS, partial_rate=0.3, rng=rng)
    names = np.array([f"L{m:02d}" for m in range(N_LABELS)])
    sets = ["|".join(names[row]) for row in Y]
    columns = {
        "id": pa.array([f"x{i:07d}" for i in range(n)]),
        "candidates": pa.array(sets),
        "true_label": pa.array(names[truth].tolist()),
    }
    for j in range(N_FEATURES):
        columns[f"f{j:02d}"] = pa.array(X[:, j].astype(np.float64))
    pq.write_table(pa.table(columns), path)


def run_step(command: list[str], *, env: dict[str, str]) -> dict[str, object]:
    """Run one step in a child process; its wall time, peak RSS and last line of output."""
    started = time.perf_counter()
    child = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # wait4 gives this child's own rusage (RUSAGE_CHILDREN would be the max over all children).
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    stdout, stderr = child.stdout.read(), child.stderr.read()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{' '.join(command)} failed with status {code}:\n{stderr[-2000:]}")
    return {"seconds": seconds, "peak_rss_mb": usage.ru_maxrss / 1024, "stdout": stdout.strip()}


def open_and_answer(db: str, session: str, answers: int) -> dict[str, object]:
    """Step 4, run inside the child: open the workbench, then answer ``answers`` items."""
    import resource

    from app.service import Workbench, graph_builds, session_id_by_name
    from app.store import count_events, open_store

    Session = open_store(db)
    session_id = session_id_by_name(Session, session)
    stages: dict[str, float] = {}

    def report(update) -> None:
        stages[update.stage] = update.elapsed

    started, cpu_started = time.perf_counter(), time.process_time()
    bench = Workbench.open(Session, session_id, progress=report)
    open_seconds, open_cpu = time.perf_counter() - started, time.process_time() - cpu_started
    rss_after_open = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    per_answer, per_answer_cpu = [], []
    truth = bench.state.true_labels
    for _ in range(answers):
        position = int(bench.queue(top=1)[0])
        candidates = np.flatnonzero(bench.state.candidates[position])
        label = int(truth[position]) if truth is not None and truth[position] in candidates else int(candidates[0])
        t0, c0 = time.perf_counter(), time.process_time()
        bench.record("bench", "answer", position=position, label=label)
        # What one run of the Query page computes after the answer.
        with Session() as s:
            count_events(s, session_id)
        bench.summary()
        nxt = bench.queue(top=1)
        if nxt.size:
            bench.explain(int(nxt[0]))
        per_answer.append(time.perf_counter() - t0)
        per_answer_cpu.append(time.process_time() - c0)
    return {
        "open_seconds": open_seconds,
        # CPU time of the process (all its threads): on a shared machine the wall time
        # also counts the time other jobs held the cores.
        "open_cpu_seconds": open_cpu,
        "stages": stages,
        "graph_built": bench.graph.built,
        "graph_builds_in_process": graph_builds(),
        "stored_build_seconds": bench.graph.build_seconds,
        "algorithm": bench.graph.algorithm,
        "rss_after_open_mb": rss_after_open,
        "answer_ms_median": 1000 * statistics.median(per_answer),
        "answer_ms_max": 1000 * max(per_answer),
        "answer_cpu_ms_median": 1000 * statistics.median(per_answer_cpu),
        "answers": len(per_answer),
    }


def bench_size(n: int, workdir: Path, *, workers: int | None, answers: int) -> dict[str, object]:
    data = workdir / f"items_{n}.parquet"
    db = workdir / f"bench_{n}.db"
    for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        path.unlink(missing_ok=True)
    t0 = time.perf_counter()
    if not data.exists():
        write_dataset(data, n)
    generated = time.perf_counter() - t0
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    winnow = [sys.executable, "-m", "app.cli"]
    steps: dict[str, dict[str, object]] = {}
    steps["import"] = run_step(
        [
            *winnow,
            "import",
            str(data),
            "--db",
            str(db),
            "--session",
            "s",
            "--true-label-column",
            "true_label",
            "-k",
            str(K),
        ],
        env=env,
    )
    print(f"  n={n:,} import {steps['import']['seconds']:.1f} s", flush=True)
    ranked = workdir / f"ranked_{n}.csv"
    steps["rank, first build"] = run_step(
        [*winnow, "rank", "--session", "s", "--db", str(db), "-o", str(ranked)], env=env
    )
    print(f"  n={n:,} rank (first build) {steps['rank, first build']['seconds']:.1f} s", flush=True)
    steps["rank, reopen"] = run_step([*winnow, "rank", "--session", "s", "--db", str(db), "-o", str(ranked)], env=env)
    print(f"  n={n:,} rank (reopen) {steps['rank, reopen']['seconds']:.1f} s", flush=True)
    opened = run_step(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_scale_app",
            "--open-and-answer",
            str(db),
            "s",
            "--answers",
            str(answers),
        ],
        env=env,
    )
    opened["detail"] = json.loads(opened.pop("stdout").splitlines()[-1])
    steps["open + answer"] = opened
    print(f"  n={n:,} open {opened['detail']['open_seconds']:.1f} s", flush=True)
    if workers:
        for label, extra in (("rank FILE", []), (f"rank FILE --workers {workers}", ["--workers", str(workers)])):
            steps[label] = run_step(
                [*winnow, "rank", str(data), "-k", str(K), "-o", str(workdir / "file_ranked.csv"), *extra], env=env
            )
            print(f"  n={n:,} {label} {steps[label]['seconds']:.1f} s", flush=True)
    for step in steps.values():
        step.pop("stdout", None)
    return {"n": n, "generate_seconds": generated, "db_mb": db.stat().st_size / 2**20, "steps": steps}


def print_table(result: dict[str, object]) -> None:
    n = result["n"]
    print(f"\n### {n:,} items (d = {N_FEATURES}, {N_LABELS} labels, k = {K}); store {result['db_mb']:.0f} MB\n")
    print("| step | wall time (s) | peak RSS (MB) |")
    print("|---|---:|---:|")
    for name, step in result["steps"].items():
        print(f"| {name} | {step['seconds']:.1f} | {step['peak_rss_mb']:.0f} |")
    d = result["steps"]["open + answer"]["detail"]
    stages = ", ".join(f"{k} {v:.2f} s" for k, v in d["stages"].items())
    print(
        f"\nopen: {d['open_seconds']:.2f} s wall, {d['open_cpu_seconds']:.2f} s CPU (graph built here: "
        f"{d['graph_built']}; stages: {stages}); "
        f"first build had taken {d['stored_build_seconds']:.1f} s ({d['algorithm']}); "
        f"RSS after open {d['rss_after_open_mb']:.0f} MB; "
        f"work per answer median {d['answer_ms_median']:.0f} ms wall ({d['answer_cpu_ms_median']:.0f} ms CPU), "
        f"max {d['answer_ms_max']:.0f} ms over {d['answers']}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--workers", type=int, default=None, help="also time `winnow rank FILE --workers N`")
    parser.add_argument("--answers", type=int, default=20)
    parser.add_argument("--workdir", type=Path, default=None, help="keep data and stores here (default: a temp dir)")
    parser.add_argument("--json", type=Path, default=None, help="write the figures to this file")
    parser.add_argument("--open-and-answer", nargs=2, metavar=("DB", "SESSION"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.open_and_answer:
        print(json.dumps(open_and_answer(*args.open_and_answer, args.answers)))
        return
    print(f"{platform.node()}: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}", flush=True)
    temporary = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="winnow-scale-")) if temporary else args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for n in args.sizes:
            result = bench_size(n, workdir, workers=args.workers, answers=args.answers)
            result["load_average_after"] = os.getloadavg()[0]
            results.append(result)
            print_table(result)
            if args.json is not None:
                args.json.write_text(json.dumps(results, indent=2))
    finally:
        if temporary:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
