"""Peak memory of the installed ``winnow`` refusing the hostile files of issue 29, how long
a 60,000-answer file holds the store's write lock, and names on the command line that are not
UTF-8 (issue 44).

Three tables:

1. For each file: its size on disk, the outcome (one line, exit 2) and the peak resident memory
   of that one ``winnow`` child (``os.wait4``), with the ratio to a 6-row CSV imported in the
   same run (the interpreter and its libraries). Every refusal must stay under the documented
   1 GiB limit (``WINNOW_MAX_DECOMPRESSED_BYTES``, default).
2. Recording a file of answers in one transaction: the store's batch path
   (:func:`app.store.record_events`, what ``winnow answer --from`` runs) against answers recorded
   one at a time with :func:`app.store.record_event` (the path before issue 29), on the same
   items, in this process; the time is what the write lock is held.
3. Each command given a name with the byte 0xff (``winnow session status $'s\\xff'``): its exit
   status, the lines it wrote on stderr, whether one was a traceback, and whether the store
   changed (it must not: one line, exit 2).

Run: ``python -m benchmarks.bench_hostile_files [--answers 60000] [--keep FOLDER] [--only memory|lock|arguments]``
(needs about 250 MB of disk for the files).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

WINNOW = Path(sys.executable).parent / "winnow"
MiB = 1 << 20


def run_measured(args: list[str]) -> tuple[int, str, int]:
    """Exit status, last line of stderr and peak RSS (bytes) of one ``winnow`` child."""
    code, lines, peak = run_lines(args)
    return code, lines[-1] if lines else "", peak


def run_lines(args: list[str]) -> tuple[int, list[str], int]:
    """Exit status, the lines of stderr and peak RSS (bytes) of one ``winnow`` child."""
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    env.pop("WINNOW_MAX_DECOMPRESSED_BYTES", None)
    child = subprocess.Popen([str(WINNOW), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    streams: dict[str, bytes] = {}
    readers = [
        threading.Thread(target=lambda name=name, pipe=pipe: streams.__setitem__(name, pipe.read()))
        for name, pipe in (("out", child.stdout), ("err", child.stderr))
    ]
    for reader in readers:
        reader.start()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    for reader in readers:
        reader.join(timeout=60)
    lines = streams["err"].decode(errors="replace").strip().splitlines()
    return child.returncode, lines, usage.ru_maxrss * 1024


def votes_parquet_40m(folder: Path) -> Path:
    """40 million identical votes, dictionary-encoded: a few hundred KB on disk."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 40_000_000
    import numpy as np

    column = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int8)), pa.array(["x1"]))
    path = folder / "votes_40m.parquet"
    pq.write_table(pa.table({"id": column, "annotator": column, "label": column}), path, compression="zstd")
    return path


def label_studio_115mb(folder: Path) -> Path:
    """A Label Studio export of about 680,000 small text tasks, 115 MB."""
    path = folder / "label_studio_115mb.json"
    with path.open("w") as handle:
        handle.write("[")
        number = 0
        while handle.tell() < 115_000_000:
            task = {
                "id": number,
                "data": {"text": f"t{number} w"},
                "annotations": [
                    {
                        "completed_by": number % 7,
                        "result": [
                            {"type": "choices", "from_name": "label", "to_name": "text", "value": {"choices": ["a"]}}
                        ],
                    }
                ],
            }
            handle.write(("," if number else "") + json.dumps(task, separators=(",", ":")))
            number += 1
        handle.write("]")
    return path


def answers_9m_columns(folder: Path) -> Path:
    path = folder / "answers_9m_columns.csv"
    with path.open("w") as handle:
        handle.write("id,label," + ",".join("c" for _ in range(9_000_000)) + "\nx1,a\n")
    return path


def answers_unknown_ids(folder: Path) -> Path:
    """As many answers as a file may hold (``MAX_ANSWERS``), none for an item of the session:
    read and checked whole, looked up in the store, then refused at the first row."""
    from app.io.limits import MAX_ANSWERS

    path = folder / "answers_max_rows.csv"
    with path.open("w") as handle:
        handle.write("id,label,kind,annotator\n")
        for i in range(MAX_ANSWERS):
            handle.write(f"unknown-item-{i},a,label,annotator-{i % 50}\n")
    return path


def items_csv(folder: Path, rows: int, name: str = "items.csv") -> Path:
    path = folder / name
    with path.open("w") as handle:
        handle.write("id,x1,x2,candidates\n")
        for i in range(rows):
            handle.write(f"x{i},{(i * 7919) % 1000 / 1000},{(i * 104729) % 1000 / 1000},{'a|b' if i % 2 else 'b|c'}\n")
    return path


def memory_table(folder: Path) -> None:
    db = folder / "w.db"
    seed = items_csv(folder, 6, "seed.csv")
    code, message, baseline = run_measured(["import", str(seed), "--db", str(db), "--session", "s", "-k", "2"])
    assert code == 0, message
    cases: list[tuple[str, Callable[[Path], Path], Callable[[Path], list[str]]]] = [
        ("votes Parquet, 40M identical rows", votes_parquet_40m,
         lambda p: ["import", str(seed), "--votes", str(p), "--name", "v"]),
        ("Label Studio JSON, 115 MB", label_studio_115mb, lambda p: ["import", str(p)]),
        ("answers CSV, 9M-column header", answers_9m_columns, lambda p: ["answer", "s", "--from", str(p)]),
        ("answers CSV, 200,000 unknown items", answers_unknown_ids, lambda p: ["answer", "s", "--from", str(p)]),
    ]  # fmt: skip
    print(f"| file | size on disk (bytes) | outcome | peak RSS (MB) | x the 6-row CSV ({baseline / MiB:.0f} MB) |")
    print("|---|---:|---|---:|---:|")
    for name, make, args in cases:
        path = make(folder)
        code, message, peak = run_measured([*args(path), "--db", str(db)])
        outcome = "refused: " + message.split(": ", 2)[-1][:70] if code == 2 else f"exit {code}: {message[:60]}"
        print(f"| {name} | {path.stat().st_size:,} | {outcome} | {peak / MiB:.0f} | {peak / baseline:.2f} |")
        path.unlink()


def lock_table(folder: Path, n_answers: int) -> None:
    from app.service import import_file, session_id_by_name
    from app.store import EventRequest, open_store, record_event, record_events, write_transaction

    items = items_csv(folder, n_answers, "answer_items.csv")
    Session = open_store(folder / "answers.db")
    import_file(Session, items, name="items")
    from app.service import create_session, dataset_id_by_name

    dataset_id = dataset_id_by_name(Session, "items")
    for name in ("batch", "one_by_one"):
        create_session(
            Session, dataset_id=dataset_id, name=name, k=2, weighting="uniform", criterion="apl", target_set="all"
        )
    requests = [EventRequest("ada", "answer", f"x{i}", "b") for i in range(n_answers)]

    started = time.perf_counter()
    batch_id = session_id_by_name(Session, "batch")
    write_transaction(Session, lambda s: record_events(s, session_id=batch_id, requests=requests))
    batch = time.perf_counter() - started

    one_id = session_id_by_name(Session, "one_by_one")

    def one_by_one(s) -> None:
        from app.store import instance_position

        for request in requests:
            position = instance_position(s, one_id, request.external_id)
            record_event(s, session_id=one_id, annotator="ada", kind="answer", instance_position=position, label="b")
            s.flush()

    started = time.perf_counter()
    write_transaction(Session, one_by_one)
    single = time.perf_counter() - started
    print()
    print("| answers in one file | record_events, lock held (s) | record_event one by one (s) | ratio |")
    print("|---:|---:|---:|---:|")
    print(f"| {n_answers:,} | {batch:.1f} | {single:.1f} | {single / batch:.1f} |")


#: What Python makes of the byte 0xff in an argument (``os.fsdecode(b"\\xff")``).
NOT_UTF8 = "\udcff"


def arguments_table(folder: Path) -> None:
    """Every command that looks a name up, given one that is not UTF-8."""
    import hashlib

    db = folder / "names.db"
    seed = items_csv(folder, 20, "names_seed.csv")
    code, lines, _ = run_lines(["import", str(seed), "--db", str(db), "--name", "d", "--session", "s", "-k", "2"])
    assert code == 0, lines
    bad = f"x{NOT_UTF8}"
    cases = [
        ["export", bad, "-o", str(folder / "out.csv")],
        ["session", "status", bad],
        ["session", "settings", bad],
        ["session", "settings", bad, "--audit", "0.1"],
        ["answer", bad, "x1", "a"],
        ["answer", "s", bad, "a"],
        ["answer", "s", "x1", bad],
        ["session", "overlap", bad, "2"],
        ["session", "new", "t", "--dataset", bad],
        ["session", "assign", "s", bad],
        ["rank", "--session", bad, "-o", str(folder / "r.csv")],
        ["user", "add", bad],
        ["import", str(seed), "--name", bad],
    ]
    print()
    print("| command (x\\xff: the byte 0xff) | exit | stderr lines | traceback | store changed |")
    print("|---|---:|---:|---|---|")
    for args in cases:
        before = hashlib.sha256(db.read_bytes()).hexdigest()
        code, lines, _ = run_lines([*args, "--db", str(db)])
        changed = hashlib.sha256(db.read_bytes()).hexdigest() != before
        shown = " ".join("x\\xff" if a == bad else Path(a).name if a.startswith(str(folder)) else a for a in args)
        traceback = any(line.startswith("Traceback") for line in lines)
        print(f"| `{shown}` | {code} | {len(lines)} | {'yes' if traceback else 'no'} | {'yes' if changed else 'no'} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=60_000)
    parser.add_argument("--keep", default=None, help="Folder for the files (default: a temporary one).")
    parser.add_argument(
        "--only", choices=("memory", "lock", "arguments"), default=None, help="Print one of the three tables."
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(args.keep or temporary)
        folder.mkdir(parents=True, exist_ok=True)
        if args.only in (None, "memory"):
            memory_table(folder)
        if args.only in (None, "lock"):
            lock_table(folder, args.answers)
        if args.only in (None, "arguments"):
            arguments_table(folder)


if __name__ == "__main__":
    main()
