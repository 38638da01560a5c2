"""How long the Query page takes to show the next item after an answer, at 20,000 instances.

Builds a synthetic partially labelled dataset (default 20,000 x 16 features, 10 labels, about
60 % of the items partial), imports it into a temporary SQLite store as a session (k = 10,
criterion apl), then times three things, each over ``--answers`` answers:

1. the server-side work of one answer: ``Workbench.record`` (one event in its own
   transaction, then the incremental refresh) plus everything the Query page computes
   (the event count, queue, explanation, metrics);
2. ``streamlit.testing.v1.AppTest``: clicking the first candidate button and rerunning the
   app until the next item is drawn (AppTest's own overhead included);
3. with Chromium at ``/usr/bin/chromium`` and Playwright: a real ``winnow ui`` server, pressing
   key ``1`` until the page has drawn the next item and finished its run.

Prints a table and writes it to ``docs/ui_benchmark.md``.

Usage: python benchmarks/bench_ui.py [--n 20000] [--answers 20] [--no-browser]
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
HOME = ROOT / "app" / "ui" / "Home.py"
CHROMIUM = Path("/usr/bin/chromium")


def synthetic_csv(path: Path, n: int, n_features: int, n_labels: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=4.0, size=(n_labels, n_features))
    truth = rng.integers(n_labels, size=n)
    X = centres[truth] + rng.normal(size=(n, n_features))
    sets = []
    for t in truth:
        extra = rng.choice(n_labels, size=rng.integers(0, 4), replace=False)
        sets.append("|".join(f"c{m}" for m in sorted({int(t), *map(int, extra)})))
    table = pd.DataFrame(X, columns=[f"f{j}" for j in range(n_features)])
    table.insert(0, "true_label", [f"c{t}" for t in truth])
    table.insert(0, "candidates", sets)
    table.insert(0, "id", [f"s{i:05d}" for i in range(n)])
    table.to_csv(path, index=False)


def summary(times: list[float]) -> tuple[float, float, float]:
    ms = sorted(1000 * t for t in times)
    return statistics.median(ms), ms[int(0.9 * (len(ms) - 1))], ms[-1]


def time_workbench(db: str, session_id: int, answers: int) -> tuple[float, list[float], list[float]]:
    from app.service import Workbench
    from app.store import open_store

    Session = open_store(db)
    start = time.perf_counter()
    bench = Workbench.open(Session, session_id)
    opened = time.perf_counter() - start
    record_times, page_times = [], []
    for _ in range(answers):
        position = int(bench.queue(top=1)[0])
        label = int(np.flatnonzero(bench.state.candidates[position])[0])
        t0 = time.perf_counter()
        bench.record("bench", "answer", position=position, label=label)
        t1 = time.perf_counter()
        bench.refresh()  # what the next rerun does first (app.ui.state.sync_workbench)
        nxt = int(bench.queue(top=1)[0])
        bench.explain(nxt)
        bench.n_open, int(bench.state.open_items.sum()), sum(a is not None for a in bench.state.answered_by)
        t2 = time.perf_counter()
        record_times.append(t1 - t0)
        page_times.append(t2 - t0)
    return opened, record_times, page_times


def time_apptest(db: str, answers: int) -> tuple[float, list[float]]:
    from streamlit.testing.v1 import AppTest

    sys.argv = [str(HOME), "--", "--db", db]
    at = AppTest.from_file(str(HOME), default_timeout=300)
    start = time.perf_counter()
    at.run()
    first = time.perf_counter() - start
    assert not at.exception, [e.value for e in at.exception]

    def first_answer():
        # Answer buttons are keyed by the item on screen and the label (Keys.answer).
        return next(b for b in at.button if b.key and b.key.startswith("query_answer_"))

    first_answer().click().run()  # warm-up: caches (PCA map) and imports
    times = []
    for _ in range(answers):
        t0 = time.perf_counter()
        first_answer().click().run()
        times.append(time.perf_counter() - t0)
        assert not at.exception, [e.value for e in at.exception]
    return first, times


def time_browser(db: str, answers: int) -> list[tuple[float, float]] | None:
    if not CHROMIUM.exists():
        return None
    from playwright.sync_api import expect, sync_playwright

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    winnow = Path(sys.executable).with_name("winnow")
    process = subprocess.Popen(
        [str(winnow), "ui", "--db", db, "--port", str(port), "--headless"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        idle = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
        times = []
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=str(CHROMIUM),
                headless=True,
                args=[
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--no-first-run",
                ],
            )
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"http://127.0.0.1:{port}")
            heading = page.locator("h3[id^='item-']")
            expect(heading).to_be_visible(timeout=300_000)
            page.wait_for_function(idle, timeout=300_000)
            # Warm-up answer (caches, first-run rerun): press again until it is recorded.
            first = heading.get_attribute("id")
            # The first answer button's key (each label has its own key, shown in a <kbd>).
            first_key = "() => document.querySelector(\"[class*='st-key-query_answer_'] kbd\").innerText.toLowerCase()"
            keycap = page.locator("[class*='st-key-query_answer_'] kbd").first
            for _ in range(60):
                keycap.wait_for(timeout=60_000)  # the buttons are drawn a moment after the heading
                page.keyboard.press(page.evaluate(first_key))
                page.wait_for_timeout(1000)
                if heading.get_attribute("id") != first:
                    break
            page.wait_for_function(idle, timeout=60_000)
            for _ in range(answers):
                item = heading.get_attribute("id")
                keycap.wait_for(timeout=60_000)
                key = page.evaluate(first_key)
                t0 = time.perf_counter()
                page.keyboard.press(key)
                page.wait_for_function(
                    "() => {"
                    f" const h = document.querySelector(\"h3[id^='item-']\"); return h && h.id !== '{item}'; }}",
                    timeout=60_000,
                    polling="raf",
                )
                shown = time.perf_counter() - t0
                page.wait_for_function(idle, timeout=60_000, polling="raf")
                times.append((shown, time.perf_counter() - t0))
            browser.close()
        return times
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--features", type=int, default=16)
    parser.add_argument("--labels", type=int, default=10)
    parser.add_argument("--answers", type=int, default=20)
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "ui_benchmark.md")
    args = parser.parse_args()

    from app.service import create_session, import_file
    from app.store import open_store

    with tempfile.TemporaryDirectory(prefix="winnow-bench-ui-") as folder:
        csv = Path(folder) / "synthetic.csv"
        synthetic_csv(csv, args.n, args.features, args.labels)
        rows = []
        for name in ("workbench", "apptest", "browser"):
            if name == "browser" and args.no_browser:
                continue
            # A fresh store per measurement, so every one starts from the same session.
            db = str(Path(folder) / f"{name}.db")
            Session = open_store(db)
            dataset_id, _ = import_file(Session, csv, name="synthetic", min_rows=11)
            session_id = create_session(
                Session,
                dataset_id=dataset_id,
                name="bench",
                k=10,
                weighting="uniform",
                criterion="apl",
                target_set="all",
            )
            if name == "workbench":
                opened, record_times, page_times = time_workbench(db, session_id, args.answers)
                rows.append(("Workbench.open (k-NN graph + ranker), once per tab", 1000 * opened, None, None))
                rows.append(("record an answer (write + incremental refresh)", *summary(record_times)))
                rows.append(("answer + everything the Query page computes", *summary(page_times)))
            elif name == "apptest":
                first, times = time_apptest(db, args.answers)
                rows.append(("AppTest: first run of the app (opens the session)", 1000 * first, None, None))
                rows.append(("AppTest: click an answer → next item drawn", *summary(times)))
            else:
                times = time_browser(db, args.answers)
                if times is None:
                    rows.append(("Chromium: label key → next item drawn (no Chromium here)", float("nan"), None, None))
                else:
                    rows.append(
                        ("Chromium: label key → next item's heading on screen", *summary([t for t, _ in times]))
                    )
                    rows.append(
                        ("Chromium: label key → whole page drawn, run finished", *summary([t for _, t in times]))
                    )

    fmt = lambda v: "" if v is None else f"{v:,.0f}"  # noqa: E731
    lines = [
        f"# Query page after an answer — {args.n:,} instances × {args.features} features, {args.labels} labels",
        "",
        f"Produced by `python benchmarks/bench_ui.py --n {args.n} --answers {args.answers}`"
        f" on {platform.machine()} / Python {platform.python_version()} ({os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f} at the end: other jobs shared the machine); "
        f"{args.answers} answers each, k = 10, criterion apl, SQLite store. Times in milliseconds.",
        "",
        "| step | median | p90 | max |",
        "|---|---:|---:|---:|",
        *[f"| {label} | {fmt(median)} | {fmt(p90)} | {fmt(worst)} |" for label, median, p90, worst in rows],
        "",
        "The Chromium rows are what a person sees, headless Chromium without GPU on the same machine:",
        "from the key press until the next item's heading is on screen, and until the whole page",
        "(image or PCA map, explanation tables) is drawn and Streamlit's run has finished.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    args.output.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
