"""A person labels three digits with the keyboard in a real browser, then undoes one.

Starts ``winnow ui --sample`` on a free local port with a temporary database, waits for
``/_stcore/health``, drives Debian's headless Chromium with Playwright, checks the rows in
SQLite, and saves ``docs/screenshot.png`` for the README. Without Chromium the test skips
locally and fails in CI (``CI=true``), where ``make browser`` must have installed it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path(os.environ.get("WINNOW_CHROMIUM", "/usr/bin/chromium"))
SCREENSHOT = ROOT / "docs" / "screenshot.png"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run",
]
ANNOTATOR = "e2e-annotator"

pytestmark = pytest.mark.e2e


def _missing(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: run `make browser` first)")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, process: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"streamlit exited with status {process.returncode} before it was healthy")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f} s")


def answer_rows(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as connection:
        return connection.execute(
            "SELECT e.id, e.kind, i.external_id, e.label, e.undoes_event_id, a.name FROM answer_events e "
            "JOIN instances i ON i.id = e.instance_id JOIN annotators a ON a.id = e.annotator_id ORDER BY e.id"
        ).fetchall()


def wait_for_rows(db: Path, n: int, timeout: float = 30.0) -> list[tuple]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = answer_rows(db)
        if len(rows) >= n:
            return rows
        time.sleep(0.1)
    raise AssertionError(f"expected {n} answer_events rows, found {answer_rows(db)}")


def settle(page) -> None:
    """Wait until Streamlit has finished the current run (its "Running" widget is gone)."""
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=30_000)
    page.wait_for_timeout(300)


@pytest.fixture
def server(tmp_path: Path):
    """``winnow ui --sample`` on a free port; yields (base url, database path); killed after."""
    db = tmp_path / "e2e.db"
    port = free_port()
    winnow = Path(sys.executable).with_name("winnow")
    command = [str(winnow), "ui", "--db", str(db), "--sample", "--port", str(port), "--headless"]
    log = (tmp_path / "streamlit.log").open("wb")
    # Own process group: `winnow ui` runs streamlit as a child, and both must go.
    process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_healthy(f"http://127.0.0.1:{port}/_stcore/health", process)
        yield f"http://127.0.0.1:{port}", db
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        log.close()


def test_label_three_digits_with_the_keyboard_and_undo_one(server):
    if not CHROMIUM.exists():
        _missing(f"Chromium not found at {CHROMIUM}; install it with `make browser`")
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        _missing("the playwright package is not installed (pip install -e '.[dev]')")

    url, db = server
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(url, wait_until="domcontentloaded")
            heading = page.locator("h3[id^='item-']")
            expect(heading).to_be_visible(timeout=60_000)

            annotator = page.locator(".st-key-annotator input")
            annotator.fill(ANNOTATOR)
            annotator.press("Enter")
            page.locator("h1", has_text="Query").click()  # leave the text field, like a person would

            asked = []
            for n in range(1, 4):
                settle(page)
                item = heading.inner_text().split("Item", 1)[1].strip()
                first_label = page.locator(".st-key-query_answer_1 button").inner_text().split("\n")[0].strip()  # then the key hint
                asked.append((item, first_label))
                page.keyboard.press("1")
                wait_for_rows(db, n)
                expect(heading).not_to_have_text(re.compile(rf"^\s*Item {re.escape(item)}\s*$"), timeout=30_000)
            expect(page.get_by_text("Recorded:")).to_be_visible()
            settle(page)
            page.screenshot(path=str(SCREENSHOT), full_page=False)

            page.keyboard.press("u")
            rows = wait_for_rows(db, 4)
            expect(heading).to_contain_text(asked[-1][0], timeout=30_000)  # the undone item is asked again
        finally:
            browser.close()

    assert [(kind, item, who) for _, kind, item, _, _, who in rows[:3]] == [("answer", i, ANNOTATOR) for i, _ in asked]
    with sqlite3.connect(db) as connection:
        names = [row[0] for row in connection.execute("SELECT label_names FROM datasets")]
    label_names = json.loads(names[0])
    assert [label_names[label] for _, _, _, label, _, _ in rows[:3]] == [label for _, label in asked]
    undo = rows[3]
    assert undo[1] == "undo" and undo[4] == rows[2][0] and undo[5] == ANNOTATOR
    assert len(rows) == 4
