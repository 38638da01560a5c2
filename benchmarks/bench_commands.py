"""This tree against a baseline commit on one stored session: the app's open and answers, and the CLI.

The regression guard for the answer path (issue 32: an answer at 1M went from 183 ms to
1,005 ms in one round and no benchmark caught it). Run it before every stop that touches the
answer path or the open::

    python -m benchmarks.bench_commands --n 100000 --baseline main

Both trees run **in this one process's loop, step by step in turn** (the baseline's step,
then this tree's), on copies of the same stored session, so the ratio column holds on a
shared machine where wall times move by a factor of five. The baseline is checked out with
``git worktree add --detach`` into a temporary folder (removed at the end) and runs with the
same interpreter and packages. Steps, each in a fresh process (``os.wait4`` gives its own CPU
time and peak RSS):

1. ``open + answer``: what the app's server does (``bench_scale_app --open-and-answer``):
   open the session's :class:`~app.service.Workbench`, then answer its first item
   ``--answers`` times, timing the work of one Query page run per answer; twice, the second
   open finding what the first left in the store (this tree's snapshot);
2. per round (``--rounds``): ``winnow export s --what ranked``; ``winnow answer s --from``
   a file of the first ``--batch`` (40) items of that export; ``winnow session status s``
   (after the answers of the other process);
3. ``winnow --help`` (the interpreter and the CLI's imports, the floor of any command).

Both trees' modules are compiled to bytecode first (``compileall``), as an installed winnow's
are: without it, a fresh worktree (or ``PYTHONDONTWRITEBYTECODE`` in the environment) made
every step compile every module again.

The store is made once per size with the *baseline's* code (import, then ``rank`` to build
and store the graph) and kept in ``--workdir``; this tree upgrades its copy when it opens it.
Prints one table with wall and CPU seconds per tree and the ratio this/baseline; exits 1 when
``--max-ratio`` is given and the median answer's CPU ratio exceeds it.

Usage: python -m benchmarks.bench_commands [--n 100000] [--baseline main] [--answers 20]
       [--rounds 3] [--batch 40] [--workdir DIR] [--json FILE] [--max-ratio 1.2]
"""

from __future__ import annotations

import argparse
import csv
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

from benchmarks.bench_scale_app import K, write_dataset

ROOT = Path(__file__).resolve().parents[1]


def timed(tree: Path, args: list[str], *, module: str = "app.cli") -> dict[str, object]:
    """One command of ``tree`` in a fresh process: wall and CPU seconds (its own rusage,
    ``os.wait4``), peak RSS and its output."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-m", module, *args], cwd=tree, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        if os.waitstatus_to_exitcode(status):
            raise RuntimeError(f"{module} {' '.join(args)} failed in {tree}:\n{err.read().decode()[-2000:]}")
        return {
            "seconds": seconds,
            "cpu": usage.ru_utime + usage.ru_stime,
            "rss_mb": usage.ru_maxrss / 1024,
            "stdout": out.read().decode(),
        }


def make_store(tree: Path, workdir: Path, n: int) -> Path:
    """The stored session of ``n`` items with its graph, made by ``tree``'s code (kept)."""
    pristine = workdir / f"pristine_{n}.db"
    if pristine.exists():
        return pristine
    data = workdir / f"items_{n}.parquet"
    if not data.exists():
        write_dataset(data, n)
    db = workdir / f"making_{n}.db"
    db.unlink(missing_ok=True)
    timed(tree, ["import", str(data), "--db", str(db), "--session", "s", "--true-label-column", "true_label"])
    timed(tree, ["rank", "--session", "s", "--db", str(db), "-o", str(workdir / "ranked.csv")])
    db.rename(pristine)
    return pristine


def answers_file(ranked_csv: Path, path: Path, batch: int) -> None:
    """The first ``batch`` rows of a ranked export, each answered with its first candidate."""
    with ranked_csv.open(newline="") as f:
        rows = list(csv.DictReader(f))[:batch]
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "label"])
        for row in rows:
            writer.writerow([row["id"], row["candidates"].split("|")[0]])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--baseline", default="main", help="commit or branch to compare with")
    parser.add_argument("--answers", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=40)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "winnow-bench-commands")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--max-ratio", type=float, default=None, help="fail when answer CPU ratio exceeds this")
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    base_rev = subprocess.run(
        ["git", "rev-parse", "--short", args.baseline], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    head_rev = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout)
    base_tree = Path(tempfile.mkdtemp(prefix="winnow-baseline-"))
    subprocess.run(["git", "worktree", "add", "--detach", str(base_tree), base_rev], cwd=ROOT, check=True)
    load_before = os.getloadavg()
    print(f"{platform.node()}: {os.cpu_count()} cores, load average {load_before[0]:.1f} (1 min)", flush=True)
    trees = {"baseline": base_tree, "this": ROOT}
    results: dict[str, dict[str, list[dict[str, object]]]] = {name: {} for name in trees}
    try:
        for tree in trees.values():
            # Bytecode for both trees before the first step: a fresh worktree (or a shell with
            # PYTHONDONTWRITEBYTECODE set) would otherwise compile every module in every step,
            # which an installed winnow never does.
            subprocess.run(
                [sys.executable, "-m", "compileall", "-q", "app", "engine", "benchmarks", "migrations"],
                cwd=tree,
                check=True,
                stdout=subprocess.DEVNULL,
            )
        pristine = make_store(base_tree, args.workdir, args.n)
        dbs = {}
        for name in trees:
            dbs[name] = args.workdir / f"{name}_{args.n}.db"
            shutil.copy(pristine, dbs[name])

        def step(label: str, command: list[str] | None = None, **kw: object) -> None:
            for name, tree in trees.items():
                cmd = [str(c).replace("{db}", str(dbs[name])).replace("{tag}", name) for c in (command or [])]
                got = timed(tree, cmd, **kw)  # type: ignore[arg-type]
                results[name].setdefault(label, []).append(got)
                print(f"  {label:<34} {name:<8} {got['seconds']:7.2f} s wall {got['cpu']:7.2f} s CPU", flush=True)

        for attempt in ("first", "second"):
            step(
                f"open + answer ({attempt})",
                ["--open-and-answer", "{db}", "s", "--answers", str(args.answers)],
                module="benchmarks.bench_scale_app",
            )
        for _ in range(args.rounds):
            step(
                "export --what ranked",
                ["export", "s", "--db", "{db}", "--what", "ranked", "-o", f"{args.workdir}/{{tag}}.csv"],
            )
            for name in trees:
                answers_file(args.workdir / f"{name}.csv", args.workdir / f"{name}_answers.csv", args.batch)
            step(
                f"answer --from ({args.batch} rows)",
                ["answer", "s", "--db", "{db}", "--from", f"{args.workdir}/{{tag}}_answers.csv"],
            )
            step("session status (after answers)", ["session", "status", "s", "--db", "{db}"])
        step("winnow --help", ["--help"])
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(base_tree)], cwd=ROOT, check=False)
    load_after = os.getloadavg()

    def median(name: str, label: str, key: str) -> float:
        return statistics.median(float(r[key]) for r in results[name][label])  # type: ignore[arg-type]

    def detail(name: str, label: str, key: str) -> float:
        return statistics.median(
            float(json.loads(str(r["stdout"]).splitlines()[-1])[key]) for r in results[name][label]
        )

    print(
        f"\n### {args.n:,} items (d = 64, k = {K}): this tree {head_rev}{' + uncommitted changes' if dirty else ''} "
        f"against {args.baseline} = {base_rev}\n"
    )
    print(f"Load average (1, 5, 15 min) before: {load_before}, after: {load_after}.\n")
    print(
        "| step | baseline wall (s) | this wall (s) | wall ratio | baseline CPU (s) | this CPU (s) | CPU ratio "
        "| peak RSS baseline / this (MB) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    for label in results["this"]:
        b_wall, t_wall = median("baseline", label, "seconds"), median("this", label, "seconds")
        b_cpu, t_cpu = median("baseline", label, "cpu"), median("this", label, "cpu")
        b_rss, t_rss = median("baseline", label, "rss_mb"), median("this", label, "rss_mb")
        print(
            f"| {label} | {b_wall:.2f} | {t_wall:.2f} | {t_wall / b_wall:.2f} | {b_cpu:.2f} | {t_cpu:.2f} "
            f"| {t_cpu / b_cpu:.2f} | {b_rss:.0f} / {t_rss:.0f} |"
        )
        rows.append({"step": label, "baseline": [b_wall, b_cpu, b_rss], "this": [t_wall, t_cpu, t_rss]})
    print("\n| in the app | baseline | this | ratio |")
    print("|---|---:|---:|---:|")
    for attempt in ("first", "second"):
        label = f"open + answer ({attempt})"
        for key, unit in (
            ("open_seconds", "s"),
            ("open_cpu_seconds", "s"),
            ("answer_ms_median", "ms"),
            ("answer_cpu_ms_median", "ms"),
            ("answer_ms_max", "ms"),
        ):
            b, t = detail("baseline", label, key), detail("this", label, key)
            print(f"| {attempt} open: {key} | {b:.3g} {unit} | {t:.3g} {unit} | {t / b:.2f} |")
    ratio = detail("this", "open + answer (second)", "answer_cpu_ms_median") / detail(
        "baseline", "open + answer (second)", "answer_cpu_ms_median"
    )
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {"n": args.n, "baseline": base_rev, "this": head_rev, "rows": rows, "load": [load_before, load_after]},
                indent=2,
            )
        )
    if args.max_ratio is not None and ratio > args.max_ratio:
        print(f"\nFAIL: an answer's CPU is {ratio:.2f}x the baseline's (allowed {args.max_ratio})")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
