"""The Rejects page: the undecided items (confirm or leave those the model will not label, resolve
conflicts), counted as on the Progress and Query pages; before any model label is stated, the
page says so instead of listing the Query page's queue again."""

from __future__ import annotations

import numpy as np
import pytest

from app.service import ACTION_KEYS, Workbench, change_label_settings
from app.store.db import close_stores, open_store
from app.ui.components import md
from app.ui.state import STATE_KEY, Keys
from tests.ui.conftest import events, no_exception


def go_to_rejects(at):
    at.switch_page("views/rejects.py").run()
    no_exception(at)
    return at


def listed(at) -> list[int]:
    """Positions of the rejected items on the page, in order (from their Leave buttons)."""
    prefix = "rejects_leave_"
    return [int(b.key[len(prefix) :]) for b in at.button if b.key and b.key.startswith(prefix)]


@pytest.fixture
def stated_db(digits_db: str) -> str:
    """The digits session once model labels are stated: a loose target (20 % at 50 %
    confidence: a few audits certify the first lot while open items outside it are still
    undecided), and served items answered with their true labels until model labels appear."""
    Session = open_store(digits_db)
    change_label_settings(Session, "demo", max_error=0.2, confidence=0.5, audit_share=0.5)
    bench = Workbench.open(Session, 1)
    truth = bench.state.true_labels
    assert truth is not None
    while bench.labels().counts["model"] == 0:
        p = int(bench.queue(top=1)[0])
        bench.record("ann", "answer", position=p, label=int(truth[p]), displayed="query")
    close_stores()
    return digits_db


def test_rejected_items_are_listed_by_margin_with_belief_and_plausibility(app, stated_db):
    digits_db = stated_db
    at = go_to_rejects(app(digits_db))
    bench: Workbench = at.session_state[STATE_KEY].workbench
    queue = bench.rejects()
    expected = [int(p) for p in queue.positions[~queue.accepted][:10]]
    assert listed(at) == expected
    assert f"Items the model will not label ({queue.n_rejected})" in [h.value for h in at.subheader]
    assert at.metric[0].value == str(bench.labels().counts["undecided"])
    assert len(at.get("vega_lite_chart")) == len(expected)  # one bar chart per item

    first, second = expected[:2]
    at.button(key=Keys.leave(first)).click().run()
    assert listed(at)[0] == second and first not in listed(at)
    n_events = len(events(digits_db))
    assert len(events(digits_db)) == n_events  # leaving writes nothing

    label = int(np.flatnonzero(bench.state.candidates[second])[0])
    at.button(key=Keys.confirm(second, label)).click().run()
    no_exception(at)
    log = events(digits_db)[n_events:]
    assert [(e["kind"], e["position"], e["label"]) for e in log] == [("answer", second, label)]
    assert second not in listed(at)
    assert "Confirmed" in at.success[0].value


def test_items_being_audited_never_show_the_models_guess(app, digits_db):
    """An item of the lot being audited may be served as an audit: its guess is never shown. The
    service marks exactly the active lot's items; while no model label is stated the page lists
    none of the open items (the Query page asks them) and shows no guess at all."""
    at = go_to_rejects(app(digits_db))
    no_exception(at)
    bench: Workbench = at.session_state[STATE_KEY].workbench
    queue = bench.rejects()
    assert queue.guess_hidden is not None and queue.guess_hidden.any()
    hidden = {int(p) for p in queue.positions[queue.guess_hidden]}
    being_audited = {int(p) for p in np.flatnonzero(bench.items_being_audited())}
    assert being_audited and hidden == being_audited & {int(p) for p in queue.positions}
    assert bench.labels().counts["model"] == 0 and listed(at) == []
    assert not [t.value for t in at.text if t.value.startswith("DST-PLL's best guess")]
    assert bench.labels().statement in [t.value for t in at.text]


def test_conflicts_between_annotators_are_resolved_here(app, small_db):
    Session = open_store(small_db)
    other = Workbench.open(Session, 1)
    position = int(other.queue(top=1)[0])
    a, b = (int(m) for m in np.flatnonzero(other.state.candidates[position])[:2])
    other.record("alice", "answer", position=position, label=a)
    other.record("bob", "answer", position=position, label=b)

    at = go_to_rejects(app(small_db))
    assert "Conflicts between annotators (1)" in at.subheader[0].value
    at.sidebar.text_input(key=Keys.ANNOTATOR).set_value("carol")
    at.button(key=Keys.resolve(position, b)).click().run()
    no_exception(at)
    last = events(small_db)[-1]
    assert (last["kind"], last["position"], last["label"], last["annotator"]) == ("resolve", position, b, "carol")
    assert "Conflicts between annotators (0)" in at.subheader[0].value
    bench = at.session_state[STATE_KEY].workbench
    assert bench.state.resolved[position] and bench.state.candidates[position].sum() == 1


def test_the_first_rejected_item_answers_to_the_keyboard_and_no_guess_is_preselected(app, stated_db):
    digits_db = stated_db
    n_events = len(events(digits_db))
    at = go_to_rejects(app(digits_db))
    bench: Workbench = at.session_state[STATE_KEY].workbench
    first, second = listed(at)[:2]
    for position, keyed in ((first, True), (second, False)):
        for label in np.flatnonzero(bench.state.candidates[position]):
            button = at.button(key=Keys.confirm(position, int(label)))
            assert button.label == md(bench.label_names[label])
            assert button.proto.shortcut == (bench.hotkeys[bench.label_names[label]] if keyed else "")
            assert button.proto.type == "secondary"  # every label looks alike: the guess is not pre-selected
        assert at.button(key=Keys.leave(position)).proto.shortcut == (ACTION_KEYS["leave"] if keyed else "")
    assert "What the model thinks" in [e.label for e in at.expander]

    leave = [b for b in at.button if b.proto.shortcut == ACTION_KEYS["leave"]]
    leave[0].click().run()  # L: the first item is left alone, the second now takes the keys
    assert listed(at)[0] == second
    assert at.button(key=Keys.leave(second)).proto.shortcut == ACTION_KEYS["leave"]
    label = int(np.flatnonzero(bench.state.candidates[second])[-1])
    key = bench.hotkeys[bench.label_names[label]]
    confirm = [b for b in at.button if b.proto.shortcut == key]
    assert [b.key for b in confirm] == [Keys.confirm(second, label)]
    confirm[0].click().run()
    confirm[0].click().run()  # a second press from the page that still showed the item
    no_exception(at)
    log = events(digits_db)[n_events:]
    assert [(e["kind"], e["position"], e["label"]) for e in log] == [("answer", second, label)]


def test_before_any_model_label_the_page_says_so_and_lists_only_the_none_of_these_items(app, texts_db):
    Session = open_store(texts_db)
    bench = Workbench.open(Session, 1)
    flagged = [int(p) for p in bench.queue(top=2)]
    for p in flagged:
        bench.record("ann", "none_of_these", position=p, displayed="query")
    close_stores()
    at = go_to_rejects(app(texts_db))
    bench = at.session_state[STATE_KEY].workbench
    labels = bench.labels()
    assert labels.counts["model"] == 0
    assert any("No model label is stated yet" in i.value for i in at.info)
    assert labels.statement in [t.value for t in at.text]  # the service's own words, as text
    shown = listed(at)
    assert sorted(shown) == sorted(flagged)  # not the whole queue: the Query page asks those
    assert at.metric[0].value == str(labels.counts["undecided"])
    texts = {t.value for t in at.text}
    for position in shown:
        assert bench.item_content(position).text in texts
        assert f"Item {bench.state.external_ids[position]}" in texts


def test_opening_rejects_searches_no_neighbours(app, stated_db, monkeypatch):
    """The page's DST-PLL votes on the session's persisted graph: opening it builds no graph
    (the build counter) and runs no neighbour search (scikit-learn's searches fail if called)."""
    from sklearn.neighbors import NearestNeighbors

    from app.service import graph_builds
    from engine.dst import transductive_decisions

    digits_db = stated_db
    at = app(digits_db)  # the Query page opens the session (its graph persisted by the fixture)
    before = graph_builds()

    def no_search(*args, **kwargs):
        raise AssertionError("the Rejects page searched neighbours")

    monkeypatch.setattr(NearestNeighbors, "kneighbors", no_search)
    monkeypatch.setattr(NearestNeighbors, "radius_neighbors", no_search)
    go_to_rejects(at)
    assert graph_builds() == before
    bench: Workbench = at.session_state[STATE_KEY].workbench
    queue = bench.rejects()
    assert listed(at) == [int(p) for p in queue.positions[~queue.accepted][:10]]
    labels, _, margin = transductive_decisions(np.array(bench.state.candidates), bench.graph.idx, random_state=0)
    np.testing.assert_array_equal(queue.labels, labels[queue.positions])
    # accepted: the model label is delivered by a certified lot (issue 28), not DST-PLL's own rule.
    kept = bench.labels().table["label_source"].to_numpy() == "model"
    np.testing.assert_array_equal(queue.accepted, kept[queue.positions])
    np.testing.assert_array_equal(queue.margin, margin[queue.positions])
