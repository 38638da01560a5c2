"""How long an annotator's answer waits while a large file is imported into the same store.

Prints a table: rows imported, import time, and the answers recorded meanwhile (count, median and
maximum latency of one ``winnow answer``-equivalent write transaction). The importer runs
:func:`app.service.import_file` in a child process; the answering loop runs here.

Run: ``python -m benchmarks.bench_import_answers [--rows 300000] [--db /tmp/bench.db]``
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd


def _write_csv(path: Path, rows: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    table = pd.DataFrame(rng.normal(size=(rows, 8)).round(4), columns=[f"f{j}" for j in range(8)])
    table.insert(0, "candidates", np.where(rng.random(rows) < 0.5, "a|b", "b|c"))
    table.insert(0, "id", [f"r{i}" for i in range(rows)])
    table.to_csv(path, index=False)


def _import(db: str, csv: str, started) -> None:
    from app.service import import_file
    from app.store import open_store

    Session = open_store(db)
    started.set()
    import_file(Session, csv, name="big")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--db", default=None)
    args = parser.parse_args()

    from app.service import create_session, import_file, record_answer
    from app.store import open_store

    with tempfile.TemporaryDirectory() as folder:
        db = args.db or str(Path(folder) / "bench.db")
        small, big = Path(folder) / "small.csv", Path(folder) / "big.csv"
        _write_csv(small, 200, seed=1)
        _write_csv(big, args.rows)
        Session = open_store(db)
        dataset_id, _ = import_file(Session, small, name="small")
        create_session(
            Session, dataset_id=dataset_id, name="s", k=5, weighting="uniform", criterion="apl", target_set="all"
        )

        started = multiprocessing.Event()
        importer = multiprocessing.Process(target=_import, args=(db, str(big), started))
        t0 = time.perf_counter()
        importer.start()
        started.wait()
        latencies = []
        i = 0
        while importer.is_alive():
            begin = time.perf_counter()
            record_answer(Session, "s", annotator="bench", kind="skip", item=f"r{i % 200}")
            latencies.append(time.perf_counter() - begin)
            i += 1
        importer.join()
        total = time.perf_counter() - t0

    print("| rows imported | import (s) | answers meanwhile | median answer (ms) | slowest answer (ms) |")
    print("|---:|---:|---:|---:|---:|")
    median = statistics.median(latencies) * 1000 if latencies else float("nan")
    slowest = max(latencies) * 1000 if latencies else float("nan")
    print(f"| {args.rows:,} | {total:.1f} | {len(latencies)} | {median:.1f} | {slowest:.1f} |")


if __name__ == "__main__":
    main()
