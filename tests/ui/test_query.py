"""The Query page, driven by widget keys; every check ends in the answer_events table."""

from __future__ import annotations

import numpy as np
import pytest

from app.service import Workbench, create_session, import_file
from app.store.db import open_store
from app.store.models import AnswerEvent
from app.ui.state import STATE_KEY, Keys
from engine.decision_change import DecisionChangeRanker
from tests.ui.conftest import LABELS, count_rows, events, no_exception, small_csv_bytes


def shown_item(at) -> str:
    """The id of the item the page asks about (from its subheader ``Item `id```)."""
    heads = [h.value for h in at.subheader if h.value.startswith("Item ")]
    assert len(heads) == 1, heads
    return heads[0].split("`")[1]


def metric(at, label: str) -> int:
    return int(next(m.value for m in at.metric if m.label == label))


def bench_of(at) -> Workbench:
    return at.session_state[STATE_KEY].workbench


def test_first_run_opens_the_latest_session_and_asks_the_top_item(app, small_db):
    at = app(small_db)
    bench = bench_of(at)
    top = int(bench.queue(top=1)[0])
    assert shown_item(at) == bench.state.external_ids[top]
    candidates = [LABELS[m] for m in np.flatnonzero(bench.state.candidates[top])]
    assert [at.button(key=Keys.answer(i + 1)).label.strip("*") for i in range(len(candidates))] == candidates
    assert metric(at, "Answered items") == 0
    assert metric(at, "Open targets") == bench.n_open
    assert any("can change the decision of" in m.value for m in at.markdown)


def test_answer_records_one_event_and_moves_on(app, small_db):
    at = app(small_db)
    bench = bench_of(at)
    first = int(bench.queue(top=1)[0])
    first_id = shown_item(at)
    label = int(np.flatnonzero(bench.state.candidates[first])[1])  # the second button
    at.sidebar.text_input(key=Keys.ANNOTATOR).set_value("alice")
    at.button(key=Keys.answer(2)).click().run()
    no_exception(at)

    log = events(small_db)
    assert [(e["kind"], e["position"], e["label"], e["annotator"]) for e in log] == [("answer", first, label, "alice")]
    assert shown_item(at) != first_id
    assert metric(at, "Answered items") == 1
    assert any(f"{first_id} is **{LABELS[label]}**" in s.value for s in at.success)
    # The page's workbench was patched incrementally and agrees with a fresh one.
    fresh = Workbench.open(open_store(small_db), bench.session_id)
    np.testing.assert_array_equal(bench_of(at).scores, fresh.scores)
    assert bench_of(at).n_open == fresh.n_open


def test_skip_undo_none_of_these_and_other_label(app, small_db):
    at = app(small_db)
    bench = bench_of(at)
    first = int(bench.queue(top=1)[0])
    at.button(key=Keys.SKIP).click().run()
    second = int(bench_of(at).queue(top=1)[0])
    assert second != first  # skipped items go last
    at.button(key=Keys.NONE_OF_THESE).click().run()
    third = int(bench_of(at).queue(top=1)[0])
    outside = [LABELS[m] for m in range(len(LABELS)) if not bench_of(at).state.candidates[third, m]]
    at.selectbox(key=Keys.OTHER_LABEL).set_value(outside[0]).run()
    at.button(key=Keys.OTHER_SUBMIT).click().run()
    no_exception(at)
    kinds = [(e["kind"], e["position"], e["label_name"]) for e in events(small_db)]
    assert kinds == [("skip", first, None), ("none_of_these", second, None), ("other_label", third, outside[0])]
    assert bench_of(at).state.wrong_set[third]

    at.button(key=Keys.UNDO).click().run()
    no_exception(at)
    log = events(small_db)
    assert log[-1]["kind"] == "undo" and log[-1]["undoes_event_id"] == log[2]["event_id"]
    assert log[2]["undone_by_event_id"] == log[-1]["event_id"]
    assert shown_item(at) == bench_of(at).state.external_ids[third]  # the undone item is asked again
    assert count_rows(small_db, AnswerEvent) == 4


def test_undo_with_nothing_to_undo_shows_an_error_and_writes_nothing(app, small_db):
    at = app(small_db)
    at.button(key=Keys.UNDO).click().run()
    no_exception(at)
    assert at.error and count_rows(small_db, AnswerEvent) == 0


def test_a_second_tab_sees_the_first_tabs_answers_once(app, small_db):
    tab_a, tab_b = app(small_db), app(small_db)
    asked = shown_item(tab_a)
    assert shown_item(tab_b) == asked
    tab_a.sidebar.text_input(key=Keys.ANNOTATOR).set_value("alice")
    tab_a.button(key=Keys.answer(1)).click().run()
    tab_a.button(key=Keys.answer(1)).click().run()

    tab_b.run()  # any rerun picks up the other tab's events
    no_exception(tab_b)
    assert metric(tab_b, "Answered items") == 2
    assert shown_item(tab_b) == shown_item(tab_a) != asked
    tab_b.run()
    tab_b.run()
    assert metric(tab_b, "Answered items") == 2  # no double counting on later reruns
    np.testing.assert_array_equal(bench_of(tab_b).scores, bench_of(tab_a).scores)
    np.testing.assert_array_equal(bench_of(tab_b).state.candidates, bench_of(tab_a).state.candidates)

    tab_b.sidebar.text_input(key=Keys.ANNOTATOR).set_value("bob")
    tab_b.button(key=Keys.answer(1)).click().run()
    tab_a.run()
    assert metric(tab_a, "Answered items") == 3
    assert [e["annotator"] for e in events(small_db)] == ["alice", "alice", "bob"]


def test_image_layout_draws_the_digit(app, digits_db):
    at = app(digits_db)
    assert len(at.get("image")) == 1
    at.button(key=Keys.answer(1)).click().run()
    no_exception(at)
    assert len(events(digits_db)) == 1


def test_without_sessions_the_page_points_to_the_sessions_page(app, db):
    at = app(db)
    assert at.info and "No labelling session" in at.info[0].value
    assert at.session_state[STATE_KEY].workbench is None


@pytest.fixture
def default_db(db: str, tmp_path) -> str:
    """The clustered dataset of ``small_db`` with a session made without a criterion: the
    default, decision_change."""
    csv = tmp_path / "small.csv"
    csv.write_bytes(small_csv_bytes())
    Session = open_store(db)
    dataset_id, _ = import_file(Session, csv, name="small", min_rows=6)
    create_session(Session, dataset_id=dataset_id, name="default", k=5, weighting="uniform", target_set="all")
    return db


def test_decision_change_session_asks_explains_and_answers(app, default_db):
    at = app(default_db)
    bench = bench_of(at)
    assert bench.config.criterion == "decision_change" and isinstance(bench.ranker, DecisionChangeRanker)
    top = int(bench.queue(top=1)[0])
    assert shown_item(at) == bench.state.external_ids[top]
    why = bench.explain(top)
    assert why.n_targets_changed > 0 and why.example is not None
    texts = [m.value for m in at.markdown]
    assert any(f"change the decision of **{why.n_targets_changed}** target(s)" in t and "decision_change" in t for t in texts)
    assert any(f"For example target `{why.example.target_id}`" in t for t in texts)
    assert metric(at, "Open targets") == bench.n_open

    label = int(np.flatnonzero(bench.state.candidates[top])[0])
    at.button(key=Keys.answer(1)).click().run()
    no_exception(at)
    assert [(e["kind"], e["position"], e["label"]) for e in events(default_db)] == [("answer", top, label)]
    assert shown_item(at) != bench.state.external_ids[top]
    fresh = Workbench.open(open_store(default_db), bench.session_id)
    np.testing.assert_array_equal(bench_of(at).scores, fresh.scores)
    np.testing.assert_array_equal(bench_of(at).queue(), fresh.queue())
    assert metric(at, "Open targets") == fresh.n_open
