"""A suspect item in a real browser: the Query page serves an item whose set misses its true
label and says what its neighbours suggest; the label outside the set is recorded only by a
deliberate choice (A, then the label), never by one click on a suggestion.

Harness as in tests/e2e/test_browser.py (``winnow ui`` on a prepared store, headless Chromium).
"""

from __future__ import annotations

import pytest

from tests.e2e.test_browser import (  # noqa: F401  (fixtures)
    ANNOTATOR,
    QueryPage,
    browser,
    serving,
    settle,
    sign_in,
    wait_for_rows,
)
from tests.ui.conftest import LABELS
from tests.ui.test_suspects_page import MISSES, N_ITEMS, suspect_table

pytestmark = pytest.mark.e2e


@pytest.fixture
def suspect_server(tmp_path):
    """The store of tests/ui/test_suspects_page.py: 400 clustered items, every 16th an open set
    that misses its true label (the only open items, so the Query page serves one)."""
    from app.service import create_session, import_file
    from app.store.db import close_stores, open_store

    csv = tmp_path / "suspect.csv"
    suspect_table().to_csv(csv, index=False)
    db = tmp_path / "e2e.db"
    Session = open_store(str(db))
    try:
        dataset_id, _ = import_file(Session, csv, name="suspect", min_rows=6)
        create_session(
            Session, dataset_id=dataset_id, name="suspect", k=5, weighting="uniform", criterion="apl", target_set="all"
        )
    finally:
        close_stores()
    with serving(["--db", str(db)], tmp_path) as url:
        yield url, db


def test_a_suspect_item_says_what_the_neighbours_suggest_and_is_answered_deliberately(suspect_server, browser):  # noqa: F811
    from playwright.sync_api import expect

    url, db = suspect_server
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(url, wait_until="domcontentloaded")
    query = QueryPage(page)
    expect(query.heading).to_be_visible(timeout=90_000)
    settle(page)
    sign_in(page, ANNOTATOR)
    item = query.item()
    position = int(item[1:])
    assert position in MISSES and len(MISSES) and N_ITEMS == 400
    truth = LABELS[position % len(LABELS)]
    expect(page.get_by_text(f"Suspect: the neighbours suggest {truth} (5 of 5)", exact=True)).to_be_visible()
    expect(page.locator("button", has_text="another label:")).to_have_count(0)  # no one-click label
    page.keyboard.press("a")
    search = page.locator("[class*='st-key-query_other_label_'] input")
    expect(search).to_be_focused(timeout=30_000)
    page.keyboard.type(truth)
    page.keyboard.press("Enter")
    rows = wait_for_rows(db, 1)
    page.close()
    assert [(kind, answered, label, who) for _, kind, answered, label, _, who in rows] == [
        ("other_label", item, truth, ANNOTATOR)
    ]
