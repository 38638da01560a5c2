"""The bundled sample from its first item to "done", in Chromium (issue 46): every count shown for
one quantity agrees across the Query, Progress, Rejects and Sessions pages, ``winnow session
status`` and the labelled export's metadata, and the pages say when the work is done.

One walk, on ``winnow ui --sample`` (harness of tests/e2e/test_browser.py), at 1280×720:

* the annotator answers every item the Query page serves with the keyboard, from the first until
  the page says the work is done ("Another label…" above the fold); each key press records one
  answer, on the item shown;
* the done page, Progress, Rejects and Sessions are read, the labelled JSON downloaded through the
  done page's link, ``winnow session status --json`` run, and every figure compared;
* then an answer recorded with ``winnow answer`` (a model-labelled item) and another session made
  the most recently active: a new tab on the bare address opens the session this browser was in,
  with the new counts at once.

With ``WINNOW_UPDATE_SCREENSHOTS=1`` the done page and the Progress page are saved to ``docs/``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.e2e.test_browser import (  # noqa: F401  (fixtures)
    ANNOTATOR,
    DOCS,
    SAMPLES,
    UPDATE_SCREENSHOTS,
    QueryPage,
    answer_rows,
    browser,
    sample_server,
    settle,
    sign_in,
    wait_for_rows,
)

pytestmark = pytest.mark.e2e

WINNOW = Path(sys.executable).with_name("winnow")
VIEWPORT = {"width": 1280, "height": 720}
#: A bound on the keyboard answers (a page that never says done must not loop forever).
MOST_ANSWERS = 800
SOURCE_TITLES = {
    "expert": "Expert labels",
    "given": "Given labels",
    "model": "Model labels",
    "undecided": "Undecided items",
}
DONE = re.compile(
    r"Done: all (?P<total>[\d,]+) items have a label — (?P<expert>[\d,]+) answered by experts, "
    r"(?P<given>[\d,]+) given in the data(?:, (?P<model>[\d,]+) from the model)?\."
)


def number(text: str) -> int:
    return int(text.replace(",", ""))


def metric_value(page, title: str) -> str:
    metric = page.locator("[data-testid='stMetric']", has=page.get_by_text(title, exact=True))
    return metric.locator("[data-testid='stMetricValue']").first.inner_text().strip()


def go_to(page, title: str) -> None:
    page.locator("[data-testid='stSidebarNav'] a", has_text=title).click()
    page.get_by_role("heading", name=title).first.wait_for(timeout=60_000)
    settle(page)


def done_counts(page) -> dict[str, int]:
    """The counts the done line names (items per label source)."""
    line = page.locator("[data-testid='stAlert']", has_text="Done: all").first.inner_text()
    found = DONE.search(" ".join(line.split()))
    assert found, line
    return {key: number(value or "0") for key, value in found.groupdict().items()}


def save_picture(page, name: str) -> None:
    """The page as it is, for the README (only with WINNOW_UPDATE_SCREENSHOTS=1), in 128 colours:
    a quarter of the bytes, and the pages have few colours."""
    from PIL import Image

    page.mouse.move(VIEWPORT["width"] - 5, VIEWPORT["height"] - 5)  # no hover effects in the picture
    page.wait_for_timeout(500)
    picture = page.screenshot(full_page=False)
    assert picture.startswith(b"\x89PNG")
    if UPDATE_SCREENSHOTS:
        import io

        image = Image.open(io.BytesIO(picture)).convert("RGB").quantize(colors=128)
        image.save(DOCS / name, optimize=True)


def true_labels() -> dict[str, str]:
    table = pd.read_csv(SAMPLES / "digits_partial.csv", usecols=["id", "true_label"], dtype=str)
    return dict(zip(table["id"], table["true_label"], strict=True))


def next_item_or_done(page, item: str) -> None:
    """Wait until the Query page shows another item than ``item``, or none (done), and has redrawn
    everything else (no element left stale from the run before, none running): the next key press
    then reaches the next item's buttons. No fixed pause (:func:`settle` waits 0.3 s more): this
    runs once per answer, a few hundred times."""
    page.wait_for_function(
        """old => {
            const headings = document.querySelectorAll("h3[id^='item-']");
            if (headings.length > 1) return false;  // a rerun drawing the old and the new heading
            if (headings.length === 1 && headings[0].innerText.split("Item")[1].trim() === old) return false;
            if (document.querySelector("[data-testid='stStatusWidget']")) return false;
            return !document.querySelector("[data-testid='stElementContainer'][data-stale='true']");
        }""",
        arg=item,
        timeout=30_000,
    )


def winnow(*args: str) -> str:
    done = subprocess.run([str(WINNOW), *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_sample_from_its_first_item_to_done_with_one_set_of_numbers(sample_server, browser, tmp_path):  # noqa: F811
    from playwright.sync_api import expect

    url, db = sample_server
    truth = true_labels()
    context = browser.new_context(viewport=VIEWPORT, accept_downloads=True)
    page = context.new_page()
    page.goto(url, wait_until="domcontentloaded")
    query = QueryPage(page)
    expect(query.heading).to_be_visible(timeout=90_000)
    settle(page)
    sign_in(page, ANNOTATOR)
    # What the demo data is, in the sidebar.
    expect(page.locator("[data-testid='stSidebar']").get_by_text("Demo data: 800 handwritten digits")).to_be_visible()

    # Every item, with the keyboard, from the first until the Query page says the work is done;
    # every action in reach on a 1280×720 screen.
    done_line = page.locator("[data-testid='stAlert']", has_text="Done: all")
    shown: list[str] = []
    while not done_line.count():
        assert len(shown) < MOST_ANSWERS, "the Query page never said the work is done"
        if len(shown) < 3:
            another = page.locator("[class*='st-key-query_other_']:not([class*='st-key-query_other_label_']) button")
            box = another.bounding_box()
            assert box is not None and box["y"] + box["height"] <= VIEWPORT["height"], box
        item = query.item()
        page.keyboard.press(truth[item])  # digit labels are answered with their own digit
        shown.append(item)
        wait_for_rows(db, len(shown))
        next_item_or_done(page, item)
        if len(shown) == 3:
            expect(page.get_by_text("(event 3 of this session)", exact=False)).to_be_visible()
    # One answer per key press, on the item the page showed, by this annotator, none undone.
    recorded = [(kind, item, label, undoes, who) for _, kind, item, label, undoes, who in answer_rows(db)]
    assert recorded == [("answer", i, truth[i], None, ANNOTATOR) for i in shown]

    # Done: what is labelled and by whom, the promise, what more answers would buy, the export.
    on_query = done_counts(page)
    statement = page.locator("[data-testid='stText']", has_text="model labels:").first.inner_text().strip()
    expect(page.get_by_text("More answers change no statement", exact=False)).to_be_visible()
    expect(query.heading).to_have_count(0)  # no item is served as if nothing had happened
    save_picture(page, "screenshot_done.png")
    downloads: list = []
    context.on("page", lambda tab: tab.on("download", lambda download: downloads.append(download)))
    page.on("download", lambda download: downloads.append(download))
    page.locator(".st-key-export_labelled_json a").click()
    deadline = time.monotonic() + 60
    while not downloads and time.monotonic() < deadline:
        page.wait_for_timeout(200)
    assert downloads, "the done page's JSON link downloaded nothing"
    metadata = json.loads(downloads[-1].path().read_bytes())["metadata"]

    go_to(page, "Progress")
    on_progress = {source: number(metric_value(page, title)) for source, title in SOURCE_TITLES.items()}
    expect(page.get_by_text(statement, exact=True)).to_be_visible()
    expect(page.locator("[data-testid='stAlert']", has_text="Done: all")).to_be_visible()
    events_shown = number(metric_value(page, "Events"))
    save_picture(page, "screenshot_progress_done.png")

    go_to(page, "Rejects")
    on_rejects = number(metric_value(page, "Undecided items"))

    go_to(page, "Sessions")
    share_field = page.locator(".st-key-sessions_audit_share_1 input")
    expect(share_field).to_be_visible(timeout=30_000)
    on_sessions_share = float(share_field.input_value())
    expect(page.get_by_text("Done: all", exact=False).first).to_be_visible()

    status = json.loads(winnow("session", "status", "demo", "--db", str(db), "--json"))
    counts = {source: status["labels"][source] for source in SOURCE_TITLES}

    # One set of numbers: pages, command line and export metadata.
    assert on_query["total"] == 800 and status["done"] is True and metadata["done"] is True
    assert {k: v for k, v in on_query.items() if k != "total"} == {s: counts[s] for s in ("expert", "given", "model")}
    assert on_progress == counts == {source: metadata["counts"][source] for source in SOURCE_TITLES}
    assert counts["undecided"] == on_rejects == 0
    assert statement == status["statement"] == metadata["statement"]
    assert status["stated_labels"] == metadata["stated_labels"] and status["stated_labels"] >= counts["model"]
    assert status["audited_answers"] == metadata["audited_answers"] > 0
    assert f"from {metadata['audited_answers']} audited answers" in statement
    assert (
        on_sessions_share == pytest.approx(metadata["audit_share"] * 100) == pytest.approx(status["audit_share"] * 100)
    )
    assert status["events"] == events_shown
    assert status["work"].startswith("Done: all 800 items have a label")

    # An answer from the command line on a model-labelled item, then another session made the
    # most recently active: a new tab on the bare address opens the session this browser was in,
    # with the answer counted at once (issue 46, item 6).
    from app.service import Workbench, create_session, dataset_id_by_name, session_id_by_name
    from app.store.db import close_stores, open_store

    Session = open_store(str(db))
    try:
        bench = Workbench.open(Session, session_id_by_name(Session, "demo"))
        model_rows = np.flatnonzero(bench.labels().table["label_source"].to_numpy() == "model")
        item = bench.state.external_ids[int(model_rows[0])]
        winnow("answer", "demo", item, truth[item], "--annotator", "cli", "--db", str(db))
        other_id = create_session(
            Session,
            dataset_id=dataset_id_by_name(Session, "digits_partial"),
            name="other",
            k=10,
            weighting="uniform",
            criterion="apl",
            target_set="all",
        )
        other = Workbench.open(Session, other_id)
        first = int(other.queue(top=1)[0])
        other.record("someone", "skip", position=first)
    finally:
        close_stores()
    fresh = context.new_page()
    fresh.goto(url, wait_until="domcontentloaded")
    expect(fresh.locator("[data-testid='stAlert']", has_text="Done: all")).to_be_visible(timeout=90_000)
    settle(fresh)
    assert fresh.locator("[data-testid='stSidebar'] [data-testid='stText']").first.inner_text().startswith("demo")
    after = done_counts(fresh)
    assert (after["expert"], after["model"]) == (on_query["expert"] + 1, on_query["model"] - 1)
    go_to(fresh, "Progress")
    assert number(metric_value(fresh, "Events")) == events_shown + 1
    context.close()
