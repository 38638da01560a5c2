"""Who answers and in which session survive what a browser does: F5, a new tab, a deep link, and
two tabs in two sessions (Chromium, ``winnow ui`` on a prepared store, as tests/e2e/test_browser.py).
"""

from __future__ import annotations

import re

import pytest

from tests.e2e.test_browser import (  # noqa: F401  (fixtures)
    QueryPage,
    answer_rows,
    browser,
    serving,
    settle,
    sign_in,
    wait_for_rows,
)
from tests.ui.conftest import small_table

pytestmark = pytest.mark.e2e


@pytest.fixture
def two_sessions_server(tmp_path):
    """The 90 clustered items as two sessions, ``small`` and then ``other`` (the newer one, which
    a bare address opens)."""
    from app.service import create_session, import_file
    from app.store.db import close_stores, open_store

    csv = tmp_path / "small.csv"
    small_table().to_csv(csv, index=False)
    db = tmp_path / "e2e.db"
    Session = open_store(str(db))
    try:
        dataset_id, _ = import_file(Session, csv, name="small", min_rows=6)
        for name in ("small", "other"):
            create_session(
                Session, dataset_id=dataset_id, name=name, k=5, weighting="uniform", criterion="apl", target_set="all"
            )
    finally:
        close_stores()
    with serving(["--db", str(db)], tmp_path) as url:
        yield url, db


def open_query(page, url: str) -> QueryPage:
    from playwright.sync_api import expect

    page.goto(url, wait_until="domcontentloaded")
    query = QueryPage(page)
    expect(query.heading).to_be_visible(timeout=90_000)
    settle(page)
    return query


def session_shown(page) -> str:
    """The session's name as the sidebar shows it (the first line of its text)."""
    text = page.locator("[data-testid='stSidebar'] [data-testid='stText']").first.inner_text()
    return text.splitlines()[0].strip()


def annotator_shown(page) -> str:
    return page.locator(".st-key-annotator input").input_value()


def answer_first_label(page, query: QueryPage) -> str:
    item = query.item()
    _, key = query.labels()[0]
    page.keyboard.press(key)
    query.wait_for_next(item)
    return item


def test_reload_and_a_new_tab_keep_the_annotator_and_the_session(two_sessions_server, browser):  # noqa: F811
    from playwright.sync_api import expect

    url, db = two_sessions_server
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    query = open_query(page, f"{url}/?session=small")  # a deep link to the older session
    assert session_shown(page) == "small"
    assert annotator_shown(page) == ""  # nobody is named by default
    expect(page.get_by_text("Who is answering?")).to_be_visible()
    sign_in(page, "frank")
    expect(page).to_have_url(re.compile(r"[?&]annotator=frank(&|$)"), timeout=30_000)
    expect(page).to_have_url(re.compile(r"[?&]session=small(&|$)"))
    answer_first_label(page, query)

    page.reload(wait_until="domcontentloaded")  # F5
    expect(query.heading).to_be_visible(timeout=90_000)
    settle(page)
    expect(page.locator(".st-key-annotator input")).to_have_value("frank", timeout=30_000)
    assert session_shown(page) == "small"
    undo = page.locator("[class*='st-key-query_undo_'] button")
    expect(undo).to_be_enabled()  # the reloaded tab still undoes frank's answer
    answer_first_label(page, query)

    # A new tab on the bare address: the browser remembers who answers; the session it opens is
    # the most recently active one, and the tab's URL names it from then on.
    fresh = context.new_page()
    fresh_query = open_query(fresh, url)
    expect(fresh.locator(".st-key-annotator input")).to_have_value("frank", timeout=30_000)
    expect(fresh).to_have_url(re.compile(r"[?&]session=small(&|$)"), timeout=30_000)
    answer_first_label(fresh, fresh_query)
    rows = wait_for_rows(db, 3)
    context.close()
    assert [(kind, who) for _, kind, _, _, _, who in rows] == [("answer", "frank")] * 3


def test_two_tabs_in_two_sessions_do_not_leak_into_each_other(two_sessions_server, browser):  # noqa: F811
    from playwright.sync_api import expect

    url, db = two_sessions_server
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    first = context.new_page()
    first_query = open_query(first, f"{url}/?session=small&annotator=gail")
    second = context.new_page()
    second_query = open_query(second, f"{url}/?session=other&annotator=hugo")
    assert session_shown(first) == "small" and session_shown(second) == "other"

    item = answer_first_label(second, second_query)  # "other" is now the most recently active
    wait_for_rows(db, 1)
    first.reload(wait_until="domcontentloaded")
    first_query.heading.wait_for(timeout=90_000)
    settle(first)
    expect(first.locator(".st-key-annotator input")).to_have_value("gail", timeout=30_000)
    assert session_shown(first) == "small"
    first.locator("[data-testid='stSidebarNav'] a", has_text="Progress").click()
    first.get_by_role("heading", name="Progress").wait_for(timeout=60_000)
    settle(first)
    assert session_shown(first) == "small"
    assert re.search(r"[?&]session=small(&|$)", first.url)
    answer_item = first_query  # back to the Query page of "small": nothing of "other" shows
    first.locator("[data-testid='stSidebarNav'] a", has_text="Query").click()
    answer_item.heading.wait_for(timeout=60_000)
    settle(first)
    assert session_shown(first) == "small"
    context.close()
    rows = answer_rows(db)
    assert [(kind, answered, who) for _, kind, answered, _, _, who in rows] == [("answer", item, "hugo")]
