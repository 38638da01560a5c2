"""Issue 46 on the pages: the Query page says when the work is done (and serves nothing until asked
to go on), the Review page's key caps do not repeat a label named like its key, and the accuracy
chart stays within 0–100 % and ends at the last event."""

from __future__ import annotations

import json

import numpy as np

from app.service import Workbench
from app.store.db import close_stores, open_store
from app.ui.state import STATE_KEY, Keys
from tests.ui.conftest import no_exception, plain


def answer_every_open_item(db: str) -> Workbench:
    """An expert answers every open item of the only session with its true label."""
    bench = Workbench.open(open_store(db), 1)
    truth = bench.state.true_labels
    assert truth is not None
    for position in np.flatnonzero(bench.state.open_items):
        bench.record("ann", "answer", position=int(position), label=int(truth[position]))
    return bench


def test_the_query_page_says_the_work_is_done_and_serves_nothing_until_asked(app, small_db):
    bench = answer_every_open_item(small_db)
    assert bench.work_status().done and bench.work_status().counts["model"] == 0
    close_stores()
    at = app(small_db)
    texts = [plain(s.value) for s in at.success] + [t.value for t in at.text]
    counts = bench.work_status().counts
    assert (
        f"Done: all 90 items have a label — {counts['expert']} answered by experts, {counts['given']} given in "
        "the data." in texts
    )
    assert "More answers would change nothing: every item was answered by an expert or given in the data." in texts
    assert not [b for b in at.button if b.key and b.key.startswith("query_answer_")]  # no item is served
    assert {b.key for b in at.get("link_button")} >= {Keys.export("labelled", "csv"), Keys.export("labelled", "json")}
    # Nothing is left with a model label: no offer to go on checking.
    assert not [b for b in at.button if b.key == Keys.KEEP_ANSWERING]


def test_review_key_caps_do_not_repeat_a_label_named_like_its_key(app, digits_db):
    bench = Workbench.open(open_store(digits_db), 1)
    position = int(bench.queue(top=1)[0])
    a, b = (int(m) for m in np.flatnonzero(bench.state.candidates[position])[:2])
    bench.record("alice", "answer", position=position, label=a)
    bench.record("bob", "answer", position=position, label=b)
    close_stores()
    at = app(digits_db)
    at.switch_page("views/review.py").run()
    no_exception(at)
    for label in (a, b):  # digit labels have their own digit as key: the cap would read "3 3"
        assert at.button(key=Keys.resolve(position, label)).proto.shortcut == str(label)
    hidden = " ".join(h.proto.body for h in at.get("html"))
    assert all(f".st-key-{Keys.resolve(position, label)} kbd" in hidden for label in (a, b)), hidden


def test_the_accuracy_chart_stays_between_0_and_100_percent_and_ends_at_the_last_event(app, digits_db):
    at = app(digits_db)
    bench: Workbench = at.session_state[STATE_KEY].workbench
    for _ in range(2):
        position = int(bench.queue(top=1)[0])
        at.button(key=Keys.answer(position, int(np.flatnonzero(bench.state.candidates[position])[0]))).click().run()
    at.switch_page("views/progress.py").run()
    no_exception(at)
    specs = [json.loads(chart.proto.spec) for chart in at.get("vega_lite_chart")]
    (accuracy,) = [s for s in specs if s["encoding"]["y"].get("field") == "accuracy"]
    assert accuracy["encoding"]["y"]["scale"]["domain"] == [0, 1]
    assert accuracy["encoding"]["x"]["scale"]["nice"] is False and accuracy["mark"]["clip"] is True
