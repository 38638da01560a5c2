"""What one answer costs the workbench as the event log grows: incremental catch-up vs. full replay.

Builds a synthetic dataset (default 20,000 items x 16 features, 10 labels, as
``bench_ui.py``), imports it into a temporary SQLite store, and for each log size (default
20,000 and 100,000 events) makes a session (k = 10, criterion apl) whose log is filled with
that many events (skips and answers by eight annotators, inserted in bulk), opens a
:class:`app.service.Workbench` on it and times, over ``--answers`` answers:

* ``full refresh``: what every answer cost before, the baseline measured in the same process:
  reading the whole log (``session_events``) and deriving the state from it (``derive_state``);
* ``catch-up``: :meth:`Workbench.refresh` after another workbench (another process) recorded
  one event: reads the events after the last one seen (:func:`app.store.events_after`),
  re-derives their items and patches the ranking;
* ``record``: :meth:`Workbench.record` of an answer from the Query page (``displayed="query"``):
  catch-up, per-item checks, the write transaction with its per-item re-check, catch-up.

Prints a table (median and 90th percentile in milliseconds). Nothing here is a test.

Usage: python -m benchmarks.bench_record [--n 20000] [--logs 20000 100000] [--answers 30]
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from sqlalchemy import insert, select

from app.service import Workbench, create_session, import_file
from app.store import (
    Annotator,
    AnswerEvent,
    Instance,
    derive_state,
    get_or_create_annotator,
    open_store,
    session_events,
    write_transaction,
)
from app.store.models import utcnow
from benchmarks.bench_ui import synthetic_csv

ANNOTATORS = [f"ann{i}" for i in range(8)]


def fill_log(Session, session_id: int, dataset_id: int, n_events: int, original: np.ndarray, seed: int) -> None:
    """``n_events`` events in bulk: 80 % skips, 20 % answers naming a label of the item's set."""
    rng = np.random.default_rng(seed)

    def work(s):
        who = [get_or_create_annotator(s, name).id for name in ANNOTATORS]
        s.flush()
        ids = dict(s.execute(select(Instance.position, Instance.id).where(Instance.dataset_id == dataset_id)).all())
        positions = rng.integers(original.shape[0], size=n_events)
        answers = rng.random(n_events) < 0.2
        now = utcnow()
        rows = []
        annotators = rng.integers(len(who), size=n_events)
        for p, answer, a in zip(positions.tolist(), answers.tolist(), annotators.tolist(), strict=True):
            label = int(rng.choice(np.flatnonzero(original[p]))) if answer else None
            rows.append(
                {
                    "session_id": session_id,
                    "instance_id": ids[p],
                    "annotator_id": who[a],
                    "kind": "answer" if answer else "skip",
                    "label": label,
                    "created_at": now,
                }
            )
        s.execute(insert(AnswerEvent), rows)

    write_transaction(Session, work)


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def stats(times: list[float]) -> str:
    ms = sorted(1000 * t for t in times)
    p90 = ms[min(len(ms) - 1, int(round(0.9 * (len(ms) - 1))))]
    return f"{statistics.median(ms):9.1f} {p90:9.1f}"


def bench_log(Session, dataset_id: int, n_log: int, answers: int) -> dict[str, object]:
    session_id = create_session(
        Session, dataset_id=dataset_id, name=f"log{n_log}", k=10, weighting="uniform", criterion="apl", target_set="all"
    )
    probe = Workbench.open(Session, session_id)  # builds (or loads) the graph once
    fill_log(Session, session_id, dataset_id, n_log, np.asarray(probe.state.original_candidates), seed=n_log)
    open_time, bench = timed(lambda: Workbench.open(Session, session_id))
    other = Workbench.open(Session, session_id)

    full, catch_up, record = [], [], []
    for _ in range(answers):
        # Baseline: the full replay every answer used to cost.
        def replay():
            with Session() as s:
                events = session_events(s, session_id)
            return derive_state(events, bench.state.original_candidates)

        full.append(timed(replay)[0])
        # Another process answers: this workbench catches up.
        other.refresh()
        head = int(other.queue(top=1)[0])
        other.record("bob", "skip", position=head)
        catch_up.append(timed(bench.refresh)[0])
        # This workbench's own answer from the Query page.
        shown = int(bench.queue(top=1)[0])
        label = int(np.flatnonzero(bench.state.candidates[shown])[0])
        answer = functools.partial(bench.record, "alice", "answer", position=shown, label=label, displayed="query")
        record.append(timed(answer)[0])
    with Session() as s:
        n_annotators = len(s.scalars(select(Annotator.id)).all())
    return {
        "log": n_log,
        "events": bench.state.n_events,
        "open": open_time,
        "full": full,
        "catch_up": catch_up,
        "record": record,
        "annotators": n_annotators,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="items in the dataset")
    parser.add_argument("--logs", type=int, nargs="+", default=[20_000, 100_000], help="event-log sizes")
    parser.add_argument("--answers", type=int, default=30, help="answers timed per log size")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "synthetic.csv"
        synthetic_csv(csv, args.n, 16, 10)
        Session = open_store(Path(tmp) / "bench.db")
        dataset_id, _ = import_file(Session, csv, name="synthetic")
        results = [bench_log(Session, dataset_id, n_log, args.answers) for n_log in args.logs]
    print(
        f"# {args.n} items x 16 features, 10 labels, k = 10, apl; SQLite; {args.answers} answers per row; "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}"
    )
    print(
        "| events in log | open (s) | full refresh ms: median p90 | catch-up ms: median p90 | record ms: median p90 |"
    )
    print("|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['log']:,} | {r['open']:.1f} | {stats(r['full'])} | {stats(r['catch_up'])} | {stats(r['record'])} |"
        )


if __name__ == "__main__":
    main()
