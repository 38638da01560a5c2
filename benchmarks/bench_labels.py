"""The labelled dataset and its statement after an answer, at 100,000 items (issue 20, part 6).

Writes the clustered Gaussian dataset of :mod:`benchmarks.bench_scale_app` (d = 64, 20 labels,
30 % of the rows partial), imports it with a session whose served items are half audits (so
that the audits needed for a statement arrive in a few dozen answers), opens the session's
:class:`~app.service.Workbench` and answers the next served item (its true label) ``answers``
times. After each answer it times :meth:`~app.service.Workbench.labels` (the labelled table,
the counts per source, the calibration from the audited answers and the statement), the
:meth:`~app.service.Workbench.queue` head with the audits interleaved, and the ranked export's
table. DST-PLL is updated incrementally after an answer (only the items it touches); the
table itself (one row per item) is rebuilt.

Prints one table; the figures go to ``docs/benchmarks.md`` by hand.

Usage: python -m benchmarks.bench_labels [--size 100000] [--answers 60] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.bench_scale_app import write_dataset


def run(size: int, answers: int, workdir: Path) -> dict[str, object]:
    from app.service import Workbench, change_label_settings, import_file, session_id_by_name
    from app.store import SessionSpec, open_store

    data = workdir / "items.parquet"
    write_dataset(data, size)
    Session = open_store(workdir / "bench.db", create=True)
    t0 = time.perf_counter()
    import_file(Session, data, name="items", true_label_column="true_label", session=SessionSpec("s"))
    change_label_settings(Session, "s", audit_share=0.5)
    imported = time.perf_counter() - t0
    t0 = time.perf_counter()
    bench = Workbench.open(Session, session_id_by_name(Session, "s"))
    opened = time.perf_counter() - t0
    t0 = time.perf_counter()
    first = bench.labels()
    first_labels = time.perf_counter() - t0
    truth = bench.state.true_labels
    times: dict[str, list[float]] = {"record": [], "labels": [], "queue head": [], "ranked table": []}
    last = first
    for i in range(answers):
        p = int(bench.queue(top=1)[0])
        t0 = time.perf_counter()
        bench.record("bench", "answer", position=p, label=int(truth[p]), displayed="query")
        times["record"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        last = bench.labels()
        times["labels"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        bench.queue(top=1)
        times["queue head"].append(time.perf_counter() - t0)
        if i % 10 == 9:
            t0 = time.perf_counter()
            bench.ranked_table()
            times["ranked table"].append(time.perf_counter() - t0)
    return {
        "size": size,
        "answers": answers,
        "import": imported,
        "open": opened,
        "first labels": first_labels,
        "times": times,
        "first": first.statement,
        "last": last.statement,
        "counts": last.counts,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--answers", type=int, default=60)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="winnow-bench-labels-", dir=args.workdir) as folder:
        result = run(args.size, args.answers, Path(folder))
    print(
        f"{result['size']:,} items, {result['answers']} answers (half the served items audits); "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    )
    print(
        f"import {result['import']:.1f} s, open {result['open']:.1f} s, first labels() {result['first labels']:.2f} s"
    )
    print()
    print("| after each answer | median (s) | max (s) |")
    print("|---|---|---|")
    for name, values in result["times"].items():  # type: ignore[union-attr]
        if values:
            print(f"| {name} | {statistics.median(values):.3f} | {max(values):.3f} |")
    print()
    print(f"before any answer: {result['first']}")
    print(f"after the last: {result['last']}; counts {result['counts']}")


if __name__ == "__main__":
    main()
