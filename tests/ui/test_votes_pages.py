"""Crowd votes in the browser: uploaded with the items, then shown on the Query page as text."""

from __future__ import annotations

import csv
from collections import Counter, defaultdict

from app.store import SessionSpec
from app.store.db import open_store
from app.store.models import Dataset, Instance, LabellingSession, Vote
from app.ui.state import STATE_KEY, Keys
from tests.ui.conftest import ROOT, count_rows, no_exception, plain, position_on_screen

ITEMS = ROOT / "sample_data" / "crowd_items.csv"
VOTES = ROOT / "sample_data" / "crowd_votes.csv"


def _upload(at, votes: bytes, min_votes: int | None = None, min_share: float | None = None):
    at.switch_page("views/sessions.py").run()
    no_exception(at)
    at.file_uploader(key=Keys.UPLOAD).set_value(("crowd_items.csv", ITEMS.read_bytes(), "text/csv"))
    at.file_uploader(key="sessions_votes_upload").set_value(("crowd_votes.csv", votes, "text/csv"))
    at.run()
    if min_votes is not None:
        at.number_input(key="sessions_min_votes").set_value(min_votes)
    if min_share is not None:
        at.number_input(key="sessions_min_share").set_value(min_share)
    at.number_input(key=Keys.K).set_value(3)
    at.button(key=Keys.CREATE).click().run()
    no_exception(at)
    return at


def test_uploaded_votes_make_the_sets_and_the_query_page_shows_them(app, db):
    at = _upload(app(db), VOTES.read_bytes(), min_votes=2)
    assert count_rows(db, Vote) == len(VOTES.read_text().splitlines()) - 1
    at.switch_page("views/query.py").run()  # where creating a session leads; reruns stay there
    no_exception(at)
    with open(VOTES, newline="") as handle:
        votes_of = defaultdict(Counter)
        for row in csv.DictReader(handle):
            votes_of[row["id"]][row["label"]] += 1
    # The served order may open with an item nobody voted on (an audit slot drawn from the store's
    # key): such an item shows no vote line, and skipping it brings the next one.
    for _ in range(10):
        bench = at.session_state[STATE_KEY].workbench
        position = position_on_screen(at)
        counts = votes_of[bench.state.external_ids[position]]
        if counts:
            break
        assert not any(" votes: " in plain(t.value) for t in at.text)
        at.button(key=Keys.skip(position)).click().run()
        no_exception(at)
    assert counts, "an item with votes is served within ten skips"
    ranked = sorted(counts.items(), key=lambda pair: (-pair[1], bench.label_names.index(pair[0])))
    expected = f"{sum(counts.values())} votes: " + ", ".join(f"{name} ×{n}" for name, n in ranked)
    assert expected in [plain(t.value) for t in at.text]
    # --min-votes 2 through the form: the set is the labels with 2+ votes, or the most voted.
    top = ranked[0][1]
    kept = {n for n, c in counts.items() if c >= 2} or {n for n, c in counts.items() if c == top}
    assert {bench.label_names[j] for j in bench.state.original_candidates[position].nonzero()[0]} == kept


def test_a_vote_for_an_unknown_item_names_the_votes_file_and_writes_nothing(app, db):
    votes = VOTES.read_bytes() + b"song999,crowd01,jazz,\n"
    at = _upload(app(db), votes)
    errors = [plain(e.value) for e in at.error]
    assert len(errors) == 1 and "crowd_votes.csv, row 300" in errors[0] and "unknown item 'song999'" in errors[0]
    assert "winnow-votes-" not in errors[0]
    assert count_rows(db, Dataset) == count_rows(db, LabellingSession) == count_rows(db, Instance) == 0
    assert count_rows(db, Vote) == 0


def test_a_minimum_of_votes_and_a_minimum_share_together_are_refused(app, db):
    """Issue 44: both thresholds at once kept only the labels meeting both, unannounced."""
    at = _upload(app(db), VOTES.read_bytes(), min_votes=2, min_share=0.5)
    errors = [plain(e.value) for e in at.error]
    assert len(errors) == 1 and "give one, not both" in errors[0], errors
    assert count_rows(db, Dataset) == count_rows(db, Instance) == count_rows(db, Vote) == 0


def test_the_review_page_shows_the_votes_of_the_conflict_on_screen(app, db):
    from app.service import import_file, record_answer

    Session = open_store(db)
    import_file(Session, ITEMS, name="crowd", votes=VOTES, session=SessionSpec("crowd", k=3), min_rows=4)
    # In the sample, song000 has 2 votes for jazz and 1 for blues; two experts disagree on it.
    with open(VOTES, newline="") as handle:
        counts = Counter(row["label"] for row in csv.DictReader(handle) if row["id"] == "song000")
    first, second = sorted(counts)[:2]
    record_answer(Session, "crowd", annotator="ann", kind="answer", item="song000", label=first)
    record_answer(Session, "crowd", annotator="bob", kind="answer", item="song000", label=second)
    at = app(db)
    at.switch_page("views/review.py").run()
    no_exception(at)
    assert [plain(h.value) for h in at.subheader if plain(h.value).startswith("Item ")] == ["Item song000"]
    labels = ("blues", "jazz", "pop", "rock")
    ranked = sorted(counts.items(), key=lambda pair: (-pair[1], labels.index(pair[0])))
    expected = f"{sum(counts.values())} votes: " + ", ".join(f"{name} ×{n}" for name, n in ranked)
    assert expected == "3 votes: jazz ×2, blues ×1"
    assert expected in [plain(t.value) for t in at.text]
