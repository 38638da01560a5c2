"""A suspect item in a real browser: the Query page serves an item whose set misses its true
label, says what its neighbours suggest, and the "another label" button records it in SQLite.

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
from tests.ui.conftest import small_table

pytestmark = pytest.mark.e2e


@pytest.fixture
def suspect_server(tmp_path):
    """90 clustered items, each set its true label alone, except i000 (an ant) whose set is
    "cat|dog": the only open item, so the Query page serves it."""
    from app.service import create_session, import_file
    from app.store.db import close_stores, open_store

    table = small_table()
    table["candidates"] = table["true_label"]
    table.loc[0, "candidates"] = "cat|dog"
    csv = tmp_path / "suspect.csv"
    table.drop(columns="true_label").to_csv(csv, index=False)
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


def test_a_suspect_item_is_offered_with_the_neighbours_suggestion(suspect_server, browser):  # noqa: F811
    from playwright.sync_api import expect

    url, db = suspect_server
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(url, wait_until="domcontentloaded")
    query = QueryPage(page)
    expect(query.heading).to_be_visible(timeout=90_000)
    settle(page)
    sign_in(page, ANNOTATOR)
    assert query.item() == "i000"
    assert [label for label, _ in query.labels()] == ["cat", "dog"]
    expect(page.get_by_text("Suspect: the neighbours suggest ant (5 of 5)", exact=True)).to_be_visible()
    button = page.locator(".st-key-query_suggest_0_0 button")
    expect(button).to_have_text("another label: ant")
    button.click()
    rows = wait_for_rows(db, 1)
    page.close()
    assert [(kind, item, label, who) for _, kind, item, label, _, who in rows] == [
        ("other_label", "i000", "ant", ANNOTATOR)
    ]
