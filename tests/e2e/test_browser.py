"""A person labels items with the keyboard in a real browser, and the database says what they saw.

Each test starts ``winnow ui`` on a free local port with a temporary database, waits for
``/_stcore/health``, drives Debian's headless Chromium with Playwright and checks the rows in
SQLite:

* the bundled digits (``--sample``): three answers by their keys, an undo, a double key press
  that answers only the item on screen, "another label" by keyboard, and a session whose name
  is a Markdown image that the browser never fetches;
* an empty store: a text dataset and a folder of images imported through the upload form,
  then answered with the keyboard.

The Query page of each kind of item is saved for the README (``docs/screenshot.png`` for the
digits, ``docs/screenshot_text.png``, ``docs/screenshot_image.png``). Without Chromium the
tests skip locally and fail in CI (``CI=true``), where ``make browser`` must have installed it.
"""

from __future__ import annotations

import contextlib
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
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deadlines import wait_for
from tests.tools import tool_missing

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path(os.environ.get("WINNOW_CHROMIUM", "/usr/bin/chromium"))
DOCS = ROOT / "docs"
SAMPLES = ROOT / "sample_data"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ANNOTATOR = "e2e-annotator"
#: A session name that a Markdown renderer would turn into an image fetched from this URL.
HOSTILE_NAME = "![x](http://127.0.0.1:9/winnow-e2e-p.png)"

pytestmark = pytest.mark.e2e


def require_chromium() -> None:
    """Skip (fail under ``CI=true``) unless Chromium and Playwright are there."""
    if not CHROMIUM.exists():
        tool_missing(f"Chromium not found at {CHROMIUM}", install="make browser")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        tool_missing("the playwright package is not installed", install="pip install -e '.[dev]'")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(process: subprocess.Popen) -> None:
    """End a ``winnow ui`` started in its own process group (it runs Streamlit as a child, and
    both must go): politely, then by force after 15 s."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def wait_healthy(url: str, process: subprocess.Popen, timeout: float = 180.0) -> None:
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
    """(event id, kind, item id, label name or None, undone event id, annotator), in order."""
    with sqlite3.connect(db) as connection:
        rows = connection.execute(
            "SELECT e.id, e.kind, i.external_id, e.label, e.undoes_event_id, a.name, d.label_names"
            " FROM answer_events e JOIN instances i ON i.id = e.instance_id"
            " JOIN annotators a ON a.id = e.annotator_id JOIN datasets d ON d.id = i.dataset_id ORDER BY e.id"
        ).fetchall()
    return [
        (event, kind, item, None if label is None else json.loads(names)[label], undoes, who)
        for event, kind, item, label, undoes, who, names in rows
    ]


def wait_for_rows(db: Path, n: int) -> list[tuple]:
    """The answer rows, once there are at least ``n`` (the server writes them a moment after
    the key press)."""

    def enough() -> list[tuple]:
        rows = answer_rows(db)
        return rows if len(rows) >= n else []

    return wait_for(enough, what=f"{n} answer_events rows")


def settle(page) -> None:
    """Wait until Streamlit has finished the current run (its "Running" widget is gone)."""
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=60_000)
    page.wait_for_timeout(300)


@contextlib.contextmanager
def serving(args: list[str], tmp_path: Path) -> Iterator[str]:
    """``winnow ui ARGS --port P --headless`` on a free port; yields its base URL; killed after."""
    port = free_port()
    winnow = Path(sys.executable).with_name("winnow")
    command = [str(winnow), "ui", *args, "--port", str(port), "--headless"]
    log = (tmp_path / "streamlit.log").open("wb")
    # Own process group: `winnow ui` runs streamlit as a child, and both must go.
    process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_healthy(f"http://127.0.0.1:{port}/_stcore/health", process)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(process)
        log.close()


@pytest.fixture
def sample_server(tmp_path: Path):
    """``winnow ui --sample``: the bundled digits as session ``demo``; yields (base url, database path)."""
    db = tmp_path / "e2e.db"
    with serving(["--db", str(db), "--sample"], tmp_path) as url:
        yield url, db


@pytest.fixture
def empty_server(tmp_path: Path):
    """``winnow ui`` on an empty store (made by ``winnow init``); yields (base url, database path)."""
    db = tmp_path / "e2e.db"
    subprocess.run(
        [str(Path(sys.executable).with_name("winnow")), "init", "--db", str(db)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    with serving(["--db", str(db)], tmp_path) as url:
        yield url, db


@pytest.fixture
def browser():
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


class QueryPage:
    """The Query page as a person sees it: the item's heading, its label buttons and their keys."""

    def __init__(self, page) -> None:
        self.page = page
        self.heading = page.locator("h3[id^='item-']")

    def item(self) -> str:
        from playwright.sync_api import expect

        # A rerun can show the old and the new drawing of the heading for a moment.
        expect(self.heading).to_have_count(1, timeout=30_000)
        return self.heading.inner_text().split("Item", 1)[1].strip()

    def labels(self) -> list[tuple[str, str]]:
        """(label as displayed, its key) of every answer button, top to bottom."""
        selector = "[class*='st-key-query_answer_'] button"
        self.page.locator(selector).first.wait_for(timeout=60_000)  # drawn a moment after the heading
        settle(self.page)
        # Read in one step in the page: button by button, a rerun in between (the name just
        # typed, a fragment) could redraw the list under the test.
        return [
            tuple(pair)
            for pair in self.page.eval_on_selector_all(
                selector,
                """buttons => buttons.map(b => [
                 (b.querySelector("[data-testid='stMarkdownContainer']")?.innerText ?? "").trim(),
                 (b.querySelector("kbd")?.innerText ?? "").trim().toLowerCase()])""",
            )
        ]

    def wait_for_next(self, item: str) -> None:
        from playwright.sync_api import expect

        expect(self.heading).not_to_have_text(re.compile(rf"^\s*Item {re.escape(item)}\s*$"), timeout=30_000)
        settle(self.page)


#: The README's pictures are rewritten only on request (WINNOW_UPDATE_SCREENSHOTS=1 make test),
#: so that running the tests leaves the working tree as it was.
UPDATE_SCREENSHOTS = os.environ.get("WINNOW_UPDATE_SCREENSHOTS") == "1"


def screenshot(page, path: Path) -> None:
    """The Query page from its top, once its metrics and buttons are drawn; written to ``path``
    with :data:`UPDATE_SCREENSHOTS`, otherwise only checked to be a picture."""
    page.locator("[data-testid='stMetric']").first.wait_for(timeout=60_000)
    page.locator("[class*='st-key-query_answer_'] button").first.wait_for(timeout=60_000)
    settle(page)
    page.evaluate("document.querySelector('[data-testid=\"stMain\"]')?.scrollTo(0, 0)")
    page.mouse.move(1395, 995)  # no hover effects in the picture
    page.wait_for_timeout(500)
    picture = page.screenshot(path=str(path) if UPDATE_SCREENSHOTS else None, full_page=False)
    assert picture.startswith(b"\x89PNG") and len(picture) > 10_000


def sign_in(page, name: str) -> None:
    """Type the annotator's name and press Enter, and nothing else: the page must take the next
    key press as a shortcut, not as more typing in the field."""
    # The page's keyboard helper hands the focus back after Enter; under load it can mount after
    # the field is drawn, and a person would not be typing that fast either.
    page.wait_for_function("() => window.__winnowKeyboard === true", timeout=60_000)
    field = page.locator(".st-key-annotator input")
    field.fill(name)
    field.press("Enter")
    settle(page)


def test_label_digits_with_the_keyboard_undo_and_a_double_press(sample_server, browser):
    from playwright.sync_api import expect

    url, db = sample_server
    fetched: list[str] = []
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.on("request", lambda request: fetched.append(request.url))
    page.goto(url, wait_until="domcontentloaded")
    query = QueryPage(page)
    expect(query.heading).to_be_visible(timeout=90_000)
    settle(page)
    sign_in(page, ANNOTATOR)

    asked = []
    for n in range(1, 4):
        item = query.item()
        label, key = query.labels()[0]
        assert key == label  # digit labels are answered with their own digit
        asked.append((item, label))
        page.keyboard.press(key)
        wait_for_rows(db, n)
        query.wait_for_next(item)
    expect(page.get_by_text("Recorded:")).to_be_visible()
    screenshot(page, DOCS / "screenshot.png")

    page.keyboard.press("u")
    rows = wait_for_rows(db, 4)
    expect(query.heading).to_contain_text(asked[-1][0], timeout=30_000)  # the undone item is asked again
    settle(page)

    # Two presses 0-50 ms apart: the second arrives before the next item is on screen.
    item = query.item()
    label, key = query.labels()[0]
    page.keyboard.press(key)
    page.keyboard.press(key)
    wait_for_rows(db, 5)
    query.wait_for_next(item)
    page.wait_for_timeout(1500)  # time for a wrongly recorded second answer to arrive
    rows = answer_rows(db)
    assert len(rows) == 5 and rows[4][1:4] == ("answer", item, label)

    # "Another label" by keyboard: A opens the search with the focus in it, Enter records.
    item = query.item()
    shown = {label for label, _ in query.labels()}
    outside = next(str(d) for d in range(10) if str(d) not in shown)
    page.keyboard.press("a")
    search = page.locator("[class*='st-key-query_other_label_'] input")
    expect(search).to_be_focused(timeout=30_000)
    page.keyboard.type(outside)
    page.keyboard.press("Enter")
    rows = wait_for_rows(db, 6)
    assert rows[5][1:4] == ("other_label", item, outside)
    query.wait_for_next(item)

    # The Progress page after these answers: the labelled data by source and its charts.
    page.locator("[data-testid='stSidebarNav'] a", has_text="Progress").click()
    page.get_by_role("heading", name="Progress").wait_for(timeout=60_000)
    expect(page.locator("[data-testid='stVegaLiteChart']").first).to_be_visible(timeout=60_000)
    settle(page)
    page.mouse.move(1395, 995)
    page.wait_for_timeout(1000)  # the charts draw after their data arrives
    picture = page.screenshot(path=str(DOCS / "screenshot_progress.png") if UPDATE_SCREENSHOTS else None)
    assert picture.startswith(b"\x89PNG")
    page.locator("[data-testid='stSidebarNav'] a", has_text="Query").click()
    expect(query.heading).to_be_visible(timeout=60_000)
    settle(page)

    # A session named like a Markdown image: the name is shown, the image is never fetched.
    create_session(page, query, HOSTILE_NAME)
    expect(page.locator("[data-testid='stSidebar']").get_by_text(HOSTILE_NAME, exact=False)).to_be_visible()
    page.close()

    assert [(kind, item, who) for _, kind, item, _, _, who in rows[:3]] == [("answer", i, ANNOTATOR) for i, _ in asked]
    assert [label for _, _, _, label, _, _ in rows[:3]] == [label for _, label in asked]
    undo = rows[3]
    assert undo[1] == "undo" and undo[4] == rows[2][0] and undo[5] == ANNOTATOR
    assert not [u for u in fetched if "winnow-e2e-p.png" in u]


def create_session(page, query: QueryPage, name: str, data: Path | None = None, media: list[Path] = ()) -> None:
    """Fill the form of the Sessions page like a person and create the session: from an
    uploaded ``data`` file (and ``media`` files), or from the stored dataset when ``data`` is
    ``None``."""
    from playwright.sync_api import expect

    page.locator("[data-testid='stSidebarNav'] a", has_text="Sessions").click()
    expect(page.locator(".st-key-sessions_upload input[type='file']")).to_be_attached(timeout=60_000)
    settle(page)
    if data is None:
        page.get_by_text("A dataset already in the database").click()
    else:
        page.locator(".st-key-sessions_upload input[type='file']").set_input_files(str(data))
    settle(page)
    if media:
        page.locator(".st-key-sessions_media_upload input[type='file']").set_input_files([str(p) for p in media])
        settle(page)
    # A rerun may briefly show the field twice (the old one fading out): wait for one.
    expect(page.locator(".st-key-sessions_new_name input")).to_have_count(1, timeout=60_000)
    page.locator(".st-key-sessions_new_name input").fill(name)
    page.locator(".st-key-sessions_new_name input").press("Enter")
    settle(page)
    page.locator(".st-key-sessions_create button").click()
    expect(query.heading).to_be_visible(timeout=120_000)
    settle(page)


def test_import_texts_and_an_image_folder_through_the_form_and_answer_with_the_keyboard(empty_server, browser):
    url, db = empty_server
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(url, wait_until="domcontentloaded")
    page.get_by_text("No labelling session is open yet.").wait_for(timeout=90_000)
    query = QueryPage(page)
    sign_in(page, ANNOTATOR)

    answered = []
    photos = sorted((SAMPLES / "photos").glob("*.png"))
    for n, (name, data, media, shot) in enumerate(
        [
            ("texts", SAMPLES / "texts.csv", [], "screenshot_text.png"),
            ("photos", SAMPLES / "photos_labels.csv", photos, "screenshot_image.png"),
        ],
        start=1,
    ):
        create_session(page, query, name, data, media)
        screenshot(page, DOCS / shot)
        item = query.item()
        label, key = query.labels()[-1]
        page.keyboard.press(key)
        rows = wait_for_rows(db, n)
        query.wait_for_next(item)
        answered.append(("answer", item, label, ANNOTATOR))
    page.close()

    assert [(kind, item, label, who) for _, kind, item, label, _, who in rows] == answered
    with sqlite3.connect(db) as connection:
        content = dict(
            connection.execute(
                "SELECT d.name, count(i.text) + count(i.media_path) FROM datasets d"
                " JOIN instances i ON i.dataset_id = d.id"
                " GROUP BY d.name"
            ).fetchall()
        )
    assert content == {"texts": 300, "photos_labels": 96}
