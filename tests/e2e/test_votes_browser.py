"""Crowd votes in a real browser (issue 22): a dataset imported with ``winnow import --votes``
shows, on the Query page, the votes of the item on screen as plain text.

The expected line is computed from the votes file and the item the page shows; the votes are
counted in SQLite too. Harness as in tests/e2e/test_browser.py (``winnow ui``, headless Chromium).
"""

from __future__ import annotations

import csv
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.e2e.test_browser import QueryPage, browser, serving, settle  # noqa: F401  (fixtures)

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
ITEMS = ROOT / "sample_data" / "crowd_items.csv"
VOTES = ROOT / "sample_data" / "crowd_votes.csv"
LABELS = ("blues", "jazz", "pop", "rock")  # the crowd sample's labels, in the dataset's order


def test_the_query_page_shows_the_votes_of_the_item_on_screen(tmp_path, browser):  # noqa: F811
    from playwright.sync_api import expect

    db = tmp_path / "e2e.db"
    winnow = Path(sys.executable).with_name("winnow")
    subprocess.run(
        [str(winnow), "import", str(ITEMS), "--votes", str(VOTES), "--db", str(db), "--session", "crowd", "-k", "5"],
        check=True,
        capture_output=True,
        timeout=300,
    )
    with open(VOTES, newline="", encoding="utf-8") as handle:
        votes = list(csv.DictReader(handle))
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT count(*) FROM votes").fetchone()[0] == len(votes)

    with serving(["--db", str(db)], tmp_path) as url:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url, wait_until="domcontentloaded")
        query = QueryPage(page)
        expect(query.heading).to_be_visible(timeout=90_000)
        settle(page)
        item = query.item()
        counts = Counter(row["label"] for row in votes if row["id"] == item)
        assert counts, f"{item} has no votes in {VOTES.name}"
        ranked = sorted(counts.items(), key=lambda pair: (-pair[1], LABELS.index(pair[0])))
        line = f"{sum(counts.values())} votes: " + ", ".join(f"{name} ×{n}" for name, n in ranked)
        shown = page.locator("[data-testid='stText']", has_text=line)
        expect(shown).to_have_count(1, timeout=30_000)
        assert shown.inner_text().strip() == line
