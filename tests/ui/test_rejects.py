"""The Rejects page: confirm or leave DST-PLL's rejected predictions, resolve conflicts."""

from __future__ import annotations

import numpy as np

from app.service import Workbench
from app.store.db import open_store
from app.ui.state import STATE_KEY, Keys
from tests.ui.conftest import events, no_exception


def go_to_rejects(at):
    at.switch_page("views/rejects.py").run()
    no_exception(at)
    return at


def listed(at) -> list[int]:
    """Positions of the rejected items on the page, in order (from their Leave buttons)."""
    prefix = "rejects_leave_"
    return [int(b.key[len(prefix):]) for b in at.button if b.key and b.key.startswith(prefix)]


def test_rejected_items_are_listed_by_margin_with_belief_and_plausibility(app, digits_db):
    at = go_to_rejects(app(digits_db))
    bench: Workbench = at.session_state[STATE_KEY].workbench
    queue = bench.rejects()
    expected = [int(p) for p in queue.positions[~queue.accepted][:10]]
    assert listed(at) == expected
    assert f"({queue.n_rejected} of {queue.positions.size} open items)" in at.subheader[1].value
    assert len(at.get("vega_lite_chart")) == len(expected)  # one bar chart per item

    first, second = expected[:2]
    at.button(key=Keys.leave(first)).click().run()
    assert listed(at)[0] == second and first not in listed(at)
    assert events(digits_db) == []  # leaving writes nothing

    label = int(np.flatnonzero(bench.state.candidates[second])[0])
    at.button(key=Keys.confirm(second, label)).click().run()
    no_exception(at)
    log = events(digits_db)
    assert [(e["kind"], e["position"], e["label"]) for e in log] == [("answer", second, label)]
    assert second not in listed(at)
    assert "Confirmed" in at.success[0].value


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
