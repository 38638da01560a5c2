"""The labelled dataset in a real browser (issues 20 and 28): after an answer given with the
keyboard, the Progress page shows the labels by source and the service's statement, and the
labelled data downloaded through the browser has the final label, its source and the model
margin (model rows only).

The figures are checked against :meth:`app.service.Workbench.labels` on the same SQLite file.
Harness as in tests/e2e/test_browser.py (``winnow ui --sample``, headless Chromium).
"""

from __future__ import annotations

import io
import json
import time

import pandas as pd
import pytest

from tests.e2e.test_browser import (  # noqa: F401  (fixtures)
    ANNOTATOR,
    QueryPage,
    browser,
    sample_server,
    settle,
    sign_in,
    wait_for_rows,
)

pytestmark = pytest.mark.e2e

#: The sources the Progress page shows as metrics (the sample has no crowd votes).
SOURCES = {"expert": "Expert labels", "given": "Given labels", "model": "Model labels", "undecided": "Undecided items"}


def metric_value(page, title: str) -> str:
    metric = page.locator("[data-testid='stMetric']", has=page.get_by_text(title, exact=True))
    return metric.locator("[data-testid='stMetricValue']").inner_text().strip()


def test_the_progress_page_shows_the_labels_by_source_and_downloads_them(sample_server, browser):  # noqa: F811
    from playwright.sync_api import expect

    from app.service import Workbench, session_id_by_name
    from app.store.db import close_stores, open_store

    url, db = sample_server
    page = browser.new_page(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page.goto(url, wait_until="domcontentloaded")
    query = QueryPage(page)
    expect(query.heading).to_be_visible(timeout=90_000)
    settle(page)
    sign_in(page, ANNOTATOR)
    item = query.item()
    _, key = query.labels()[0]
    page.keyboard.press(key)
    wait_for_rows(db, 1)
    query.wait_for_next(item)

    page.locator("[data-testid='stSidebarNav'] a", has_text="Progress").click()
    expect(page.get_by_text("Expert labels", exact=True)).to_be_visible(timeout=90_000)
    settle(page)

    Session = open_store(str(db))
    try:
        labels = Workbench.open(Session, session_id_by_name(Session, "demo")).labels()
    finally:
        close_stores()
    assert labels.counts["expert"] == 1 and labels.counts["crowd"] == 0
    # One answer certifies no lot: the statement says what the first model labels wait for.
    assert labels.counts["model"] == 0 and labels.statement.startswith("model labels: none yet")
    shown = {source: metric_value(page, title) for source, title in SOURCES.items()}
    assert shown == {source: str(labels.counts[source]) for source in SOURCES}
    expect(page.get_by_text(labels.statement, exact=True)).to_be_visible()

    tables = {}
    # An export is a link (app/ui/downloads.py) that opens a new tab whose response is the file.
    downloads: list = []
    page.on("download", lambda download: downloads.append(download))
    page.context.on("page", lambda tab: tab.on("download", lambda download: downloads.append(download)))
    for fmt in ("csv", "jsonl"):
        before = len(downloads)
        page.locator(f".st-key-export_labelled_{fmt} a").click()
        deadline = time.monotonic() + 60
        while len(downloads) == before and time.monotonic() < deadline:
            page.wait_for_timeout(200)
        assert len(downloads) == before + 1, f"the {fmt} link downloaded nothing"
        download = downloads[-1]
        assert download.suggested_filename == f"demo-labelled.{fmt}"
        tables[fmt] = download.path().read_bytes()
    page.close()

    frame = pd.read_csv(io.BytesIO(tables["csv"]), keep_default_na=False)
    assert {"label", "label_source", "model_margin"} <= set(frame.columns) and "confidence" not in frame.columns
    assert (frame["model_margin"] == "").all()  # no model row, so no margin
    assert len(frame) == 800
    assert frame["label_source"].value_counts().to_dict() == {s: n for s, n in labels.counts.items() if n}
    rows = [json.loads(line) for line in tables["jsonl"].decode().splitlines()]
    assert len(rows) == 800 and [r["label_source"] for r in rows] == list(frame["label_source"])
