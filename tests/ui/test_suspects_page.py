"""Suspect sets on the Query and Rejects pages: the neighbours' suggestion shown as text, and its
"another label" button recording an ``other_label`` event."""

from __future__ import annotations

import pytest

from app.service import create_session, import_file, workbench_suspects
from app.store.db import open_store
from app.ui.components import md
from app.ui.state import STATE_KEY, Keys
from tests.ui.conftest import LABELS, events, no_exception, position_on_screen, small_table


@pytest.fixture
def suspect_db(db: str, tmp_path) -> str:
    """The clustered 90 items with every set its true label alone, except two sets that miss
    it: i000 (an ant) is "cat|dog", the only open item, so the Query page serves it; i006
    (a bee) is "eel", a single wrong label that only the Rejects page lists."""
    table = small_table()
    table["candidates"] = table["true_label"]
    table.loc[0, "candidates"] = "cat|dog"
    table.loc[6, "candidates"] = "eel"
    table = table.drop(columns="true_label")  # a set missing its true label would be refused
    csv = tmp_path / "suspect.csv"
    table.to_csv(csv, index=False)
    Session = open_store(db)
    dataset_id, _ = import_file(Session, csv, name="suspect", min_rows=6)
    create_session(
        Session, dataset_id=dataset_id, name="suspect", k=5, weighting="uniform", criterion="apl", target_set="all"
    )
    return db


def texts(at) -> list[str]:
    return [t.value for t in at.text]


def test_a_suspect_item_on_the_query_page_shows_the_suggestion_and_records_another_label(app, suspect_db):
    at = app(suspect_db)
    assert position_on_screen(at) == 0
    assert "Suspect: the neighbours suggest ant (5 of 5)" in texts(at)
    button = at.button(key=Keys.suggest(0, LABELS.index("ant")))
    assert button.label == f"another label: {md('ant')}"
    button.click().run()
    no_exception(at)
    log = events(suspect_db)
    assert [(e["kind"], e["position"], e["label_name"]) for e in log] == [("other_label", 0, "ant")]
    assert workbench_suspects(at.session_state[STATE_KEY].workbench).item(0) is None  # settled


def test_the_rejects_page_lists_suspect_sets_the_ranking_never_serves(app, suspect_db):
    at = app(suspect_db)
    at.switch_page("views/rejects.py").run()
    no_exception(at)
    heading = next(h.value for h in at.subheader if h.value.startswith("Sets that may miss"))
    assert heading == "Sets that may miss the true label (2)"
    assert "Item i006: set {eel}\nSuspect: the neighbours suggest bee (5 of 5)" in texts(at)
    at.button(key=Keys.suspect_other(6, LABELS.index("bee"))).click().run()
    no_exception(at)
    log = events(suspect_db)
    assert [(e["kind"], e["position"], e["label_name"]) for e in log] == [("other_label", 6, "bee")]
    assert "Sets that may miss the true label (1)" in [h.value for h in at.subheader]
    assert any("i006 is bee" in s.value for s in at.success)
