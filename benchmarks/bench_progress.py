"""The Progress page, the first open and a lease, old against new in one process (issue 21).

Writes the clustered Gaussian dataset of :mod:`benchmarks.bench_scale_app` (d = 64, 20 labels,
30 % of the rows partial) at each size, imports it into a SQLite store as a team session
(an admin and three annotators, overlap 1), builds the session's graph once, then:

* **first open**: :meth:`app.service.Workbench.open` of the session whose graph is stored (what
  every new tab or process pays), timed over a few runs and profiled once (cProfile: the
  functions of ``app`` and ``engine`` by cumulative time are printed);
* **Progress page**: ``events`` answers are recorded (the annotators in turn, the true label,
  every 20th a skip, every 50th followed by an undo), then the page's history is computed the
  old way (the whole log read and replayed, :func:`app.service.replay_progress`, as every visit
  did before, with the replay of that time, kept in ``tests/ui/test_progress_cache.py`` as the
  oracle; a visit 10 answers later costs the same) and the new way
  (:func:`app.service.session_progress`, which keeps the replay in the process and counts
  item by item): its first visit, a visit after 10 more answers, and one with nothing new;
* **lease**: one reservation of the next item (:func:`app.store.next_item`) against the one
  that replayed the whole log (kept in ``tests/store/test_leases.py`` as the oracle), at
  overlap 1 and 2, each in a transaction rolled back (the median of a few runs), after a first
  reservation that is kept (at overlap 2 it builds the digest of started items from the whole
  log, a cost paid once per session, timed apart).

Prints one table per size; the figures go to ``docs/benchmarks.md`` by hand.

Usage: python -m benchmarks.bench_progress [--sizes 20000 100000] [--events-share 0.05] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import platform
import pstats
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.bench_scale_app import write_dataset

PASSWORD = "correct horse battery"
ANNOTATORS = ("ann", "bob", "cyd")


def timed(work: Callable[[], Any], runs: int = 1) -> tuple[float, Any]:
    """Median wall time of ``runs`` calls of ``work`` and the last result."""
    times, result = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def record_answers(Session: Any, session_id: int, truth: np.ndarray, positions: np.ndarray, start: int) -> None:
    """Answers to ``positions`` in one transaction (see the module docstring for the mix)."""
    from app.store import InvalidRecord, record_event, write_transaction

    def work(s: Any) -> None:
        for i, p in enumerate(positions.tolist(), start=start):
            who = ANNOTATORS[i % len(ANNOTATORS)]
            kind = "skip" if i % 20 == 19 else "answer"
            label = int(truth[p]) if kind == "answer" else None
            try:
                record_event(s, session_id=session_id, annotator=who, kind=kind, instance_position=p, label=label)
            except InvalidRecord:  # the true label outside an item's set: record it as another label
                record_event(
                    s, session_id=session_id, annotator=who, kind="other_label", instance_position=p, label=label
                )
            if i % 50 == 49:
                record_event(s, session_id=session_id, annotator=who, kind="undo")

    write_transaction(Session, work)


def run(size: int, events_share: float, workdir: Path) -> dict[str, Any]:
    from app.service import Workbench, import_file, session_id_by_name, session_progress
    from app.store import (
        SessionSpec,
        add_user,
        assign_users,
        next_item,
        open_store,
        session_events,
        set_overlap,
        write_transaction,
    )
    from tests.store.test_leases import next_item_by_replay
    from tests.ui.test_progress_cache import replay_from_scratch

    figures: dict[str, Any] = {"size": size}
    data = workdir / f"items-{size}.parquet"
    write_dataset(data, size)
    Session = open_store(workdir / f"bench-{size}.db", create=True)
    import_file(Session, data, name="items", true_label_column="true_label", session=SessionSpec("s"))
    session_id = session_id_by_name(Session, "s")

    def team(s: Any) -> None:
        add_user(s, name="ada", role="admin", password=PASSWORD)
        for name in ANNOTATORS:
            add_user(s, name=name, role="annotator", password=PASSWORD, actor="ada")
        assign_users(s, session_id=session_id, names=list(ANNOTATORS), actor="ada")

    write_transaction(Session, team)
    figures["first build"], _ = timed(lambda: Workbench.open(Session, session_id))
    figures["first open"], bench = timed(lambda: Workbench.open(Session, session_id), runs=3)
    profile = cProfile.Profile()
    profile.enable()
    Workbench.open(Session, session_id)
    profile.disable()
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(r"/(app|engine)/", 20)
    figures["open profile"] = out.getvalue()

    truth = np.asarray(bench.state.true_labels)
    n_events = int(size * events_share)
    rng = np.random.default_rng(1)
    order = rng.permutation(size)
    record_answers(Session, session_id, truth, order[:n_events], 0)
    with Session() as s:
        figures["events"] = len(session_events(s, session_id))

    def old_progress() -> Any:
        with Session() as s:
            events = session_events(s, session_id)
        return replay_from_scratch(
            X=bench.state.X,
            original=np.asarray(bench.state.original_candidates),
            targets=bench.targets,
            idx=bench.idx,
            w=bench.w,
            k=bench.config.k,
            events=events,
            true_labels=truth,
            dst_idx=bench.graph.idx,
        )

    figures["progress old"], old = timed(old_progress)
    figures["progress new, first visit"], new = timed(lambda: session_progress(bench, actor=None))
    assert old.equals(new), "the kept replay differs from the full replay"
    record_answers(Session, session_id, truth, order[n_events : n_events + 10], n_events)
    figures["progress new, 10 answers later"], new = timed(lambda: session_progress(bench, actor=None))
    assert old.equals(new.iloc[: len(old)]), "the kept replay differs from the full replay"
    figures["progress new, nothing new"], _ = timed(lambda: session_progress(bench, actor=None), runs=3)

    preferred = bench.queue()
    for overlap in (1, 2):
        write_transaction(Session, lambda s, o=overlap: set_overlap(s, session_id=session_id, overlap=o, actor="ada"))
        # Once for real, by a user without a lease (one with a lease gets it back and reads
        # no digest): at overlap 2 the new digest catches up with the whole log, once per
        # session, ever.
        figures[f"lease new, overlap {overlap}, first call"], _ = timed(
            lambda who=("bob", "cyd")[overlap - 1]: write_transaction(
                Session, lambda s: next_item(s, session_id=session_id, user=who, preferred=preferred)
            )
        )
        for name, reserve in (("old", next_item_by_replay), ("new", next_item)):

            def once(reserve: Any = reserve) -> int | None:
                with Session() as s:
                    got = reserve(s, session_id=session_id, user="ann", preferred=preferred)
                    s.rollback()
                return got

            figures[f"lease {name}, overlap {overlap}"], got = timed(once, runs=5)
            figures[f"lease {name}, overlap {overlap}, item"] = got
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000, 100_000])
    parser.add_argument("--events-share", type=float, default=0.05)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    results = []
    for size in args.sizes:
        with tempfile.TemporaryDirectory(prefix="winnow-bench-progress-", dir=args.workdir) as folder:
            results.append(run(size, args.events_share, Path(folder)))
    for r in results:
        print(f"\n## {r['size']:,} items, {r['events']:,} events")
        print(r["open profile"])
    rows = [
        ("first open (graph stored), median of 3", "first open", None),
        ("Progress: full replay (old, every visit)", "progress old", None),
        ("Progress: first visit (new)", "progress new, first visit", None),
        ("Progress, 10 answers later: kept replay (new)", "progress new, 10 answers later", None),
        ("Progress, nothing new (new), median of 3", "progress new, nothing new", None),
        ("lease, overlap 1: old / new, median of 5", "lease old, overlap 1", "lease new, overlap 1"),
        ("lease, overlap 2: old / new, median of 5", "lease old, overlap 2", "lease new, overlap 2"),
        (
            "lease, overlap 2, new: the first call, digest built from the whole log",
            "lease new, overlap 2, first call",
            None,
        ),
    ]
    print()
    print("| | " + " | ".join(f"{r['size']:,} items, {r['events']:,} events" for r in results) + " |")
    print("|---|" + "---:|" * len(results))
    for title, key, other in rows:
        cells = []
        for r in results:
            if other is None:
                cells.append(f"{r[key]:.3f} s")
            else:
                cells.append(f"{r[key] * 1000:.1f} ms / {r[other] * 1000:.1f} ms")
        print(f"| {title} | " + " | ".join(cells) + " |")
    for r in results:
        print(f"first build of the graph at {r['size']:,}: {r['first build']:.1f} s")
        for overlap in (1, 2):
            old, new = r[f"lease old, overlap {overlap}, item"], r[f"lease new, overlap {overlap}, item"]
            assert old == new, f"overlap {overlap}: the old lease gave {old}, the new {new}"


if __name__ == "__main__":
    main()
