"""A team in real browsers: two annotators, one conflict, one reviewer.

A store with the sample digits, four accounts made with ``winnow user add --password-stdin``
is served by ``winnow ui`` on localhost; since users exist, every
browser context (a separate person: its own cookies and tabs) sees only the sign-in page
until it signs in. Two annotators are shown different items; after the first answers, the
second is given the same item (overlap 2), answers differently and is told a reviewer will
settle it; the reviewer signs in, opens the Review page and resolves it with a key. The rows
are checked in SQLite.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_browser import CHROMIUM, CHROMIUM_ARGS, ROOT, QueryPage, require_chromium, serving, settle

pytestmark = pytest.mark.e2e

WINNOW = Path(sys.executable).with_name("winnow")
SAMPLE = ROOT / "sample_data" / "digits_partial.csv"
SECRET = "e2e team password"


def winnow(*args: str, stdin: str | None = None) -> None:
    result = subprocess.run([str(WINNOW), *args], input=stdin, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


@pytest.fixture
def team_server(tmp_path: Path):
    db = tmp_path / "team.db"
    winnow("import", str(SAMPLE), "--db", str(db), "--session", "demo")
    for name, role in (("ada", "admin"), ("ann", "annotator"), ("bob", "annotator"), ("rev", "reviewer")):
        winnow("user", "add", name, "--role", role, "--password-stdin", "--db", str(db), stdin=SECRET + "\n")
    winnow("session", "assign", "demo", "ann", "bob", "--db", str(db))
    with serving(["--db", str(db)], tmp_path) as url:
        yield url, db


def rows(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as connection:
        return connection.execute(
            "SELECT e.kind, i.external_id, e.label, a.name FROM answer_events e"
            " JOIN instances i ON i.id = e.instance_id"
            " JOIN annotators a ON a.id = e.annotator_id ORDER BY e.id"
        ).fetchall()


def test_two_annotators_a_conflict_and_a_reviewer(team_server):
    require_chromium()
    from playwright.sync_api import expect, sync_playwright

    url, db = team_server
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:

            def open_page():
                page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
                page.goto(url, wait_until="domcontentloaded")
                expect(page.locator("h1", has_text="Sign in to winnow")).to_be_visible(timeout=60_000)
                return page

            def sign_in(page, name: str) -> None:
                # The gate's HTML form (not a Streamlit page): it sets the HttpOnly cookie.
                page.locator("#name").fill(name)
                page.locator("#password").fill(SECRET)
                page.locator("#password").press("Enter")
                expect(page.get_by_test_id("stText").get_by_text(f"Signed in as {name}")).to_be_visible(timeout=30_000)
                settle(page)

            def item(page) -> str:
                heading = page.locator("h3[id^='item-']")
                expect(heading).to_be_visible(timeout=60_000)
                return heading.inner_text().split("Item", 1)[1].strip()

            # Not signed in: the sign-in page only (no item, no other page in the navigation).
            visitor = open_page()
            settle(visitor)
            assert visitor.locator("h3[id^='item-']").count() == 0
            assert visitor.locator("[data-testid='stSidebarNav']").count() == 0

            ann, bob = open_page(), open_page()
            sign_in(ann, "ann")
            sign_in(bob, "bob")
            first_ann, first_bob = item(ann), item(bob)
            assert first_ann != first_bob

            # From now on each item is answered by two annotators.
            winnow("session", "overlap", "demo", "2", "--db", str(db))
            # Each label is answered with the session's key for it, shown on its button.
            ann_label, ann_key = QueryPage(ann).labels()[0]
            ann.keyboard.press(ann_key)
            expect(ann.get_by_text("Recorded:")).to_be_visible(timeout=30_000)
            bob.keyboard.press("s")  # bob skips his own item and is given ann's (overlap 2)
            expect(bob.locator("h3[id^='item-']")).to_contain_text(first_ann, timeout=30_000)
            settle(bob)
            bob_label, bob_key = next((label, key) for label, key in QueryPage(bob).labels() if label != ann_label)
            bob.keyboard.press(bob_key)
            expect(bob.get_by_text("Conflict recorded")).to_be_visible(timeout=30_000)
            expect(bob.get_by_text("A reviewer will settle it")).to_be_visible()

            rev = open_page()
            sign_in(rev, "rev")
            rev.locator("[data-testid='stSidebarNav'] a", has_text="Review").click()
            expect(rev.locator("h1", has_text="Review")).to_be_visible(timeout=30_000)
            expect(rev.locator("h3[id^='item-']")).to_contain_text(first_ann, timeout=60_000)
            settle(rev)
            # The reviewer settles it with the session's key of one of the disputed labels.
            rev_key = rev.locator("[class*='st-key-conflict_resolve_'] button kbd").first.inner_text().strip().lower()
            rev.keyboard.press(rev_key)
            expect(rev.get_by_text("No conflict left to settle")).to_be_visible(timeout=60_000)
        finally:
            browser.close()

    log = rows(db)
    assert [(kind, who) for kind, _, _, who in log] == [
        ("answer", "ann"),
        ("skip", "bob"),
        ("answer", "bob"),
        ("resolve", "rev"),
    ]
    assert log[0][1] == log[2][1] == log[3][1] == first_ann and log[1][1] == first_bob
