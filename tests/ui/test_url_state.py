"""Who answers and in which session survive a reload: both live in the URL (``?session=`` and, in
single-user mode, ``annotator=``), a deep link opens the session it names, nobody is named by
default, and the Progress, Rejects and Query pages (and ``winnow session status``) count the
undecided items alike."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from app.service import Workbench, change_label_settings, create_session, dataset_id_by_name, session_id_by_name
from app.store import write_transaction
from app.store.db import close_stores, open_store
from app.store.labels import AUDIT_ORDER_KEY
from app.store.models import StoreSecret
from app.ui.state import STATE_KEY, Keys
from tests.ui.conftest import events, no_exception, plain, position_on_screen


@pytest.fixture
def two_sessions_db(small_db: str) -> str:
    """``small`` and a second session, ``other``, on the same dataset (``other`` is the newer)."""
    Session = open_store(small_db)
    dataset_id = dataset_id_by_name(Session, "small")
    create_session(
        Session, dataset_id=dataset_id, name="other", k=7, weighting="uniform", criterion="apl", target_set="all"
    )
    return small_db


def open_session_name(at) -> str:
    return at.session_state[STATE_KEY].workbench.config.name


def test_a_first_visit_names_nobody_and_records_nothing_until_a_name_is_given(app, small_db):
    at = app(small_db, annotator=None)
    field = at.sidebar.text_input(key=Keys.ANNOTATOR)
    assert field.value == ""  # never the operating system's user name
    assert any("Enter your name" in w.value for w in at.warning)
    position = position_on_screen(at)
    answers = [b for b in at.button if b.key and b.key.startswith(f"query_answer_{position}_")]
    assert answers and all(b.disabled for b in answers)
    assert at.button(key=Keys.none_of_these(position)).disabled and at.button(key=Keys.skip(position)).disabled
    assert "annotator" not in at.query_params

    field.set_value("dana").run()
    no_exception(at)
    assert at.query_params == {"session": "small", "annotator": "dana"}
    assert not at.warning
    label = next(b for b in at.button if b.key and b.key.startswith(f"query_answer_{position}_"))
    assert not label.disabled
    label.click().run()
    assert [e["annotator"] for e in events(small_db)] == ["dana"]


def test_a_reload_keeps_the_session_and_the_annotator(app, two_sessions_db):
    at = app(two_sessions_db, annotator=None)
    assert open_session_name(at) == "other"  # the most recently active session opens first
    at.sidebar.text_input(key=Keys.ANNOTATOR).set_value("erin").run()
    at.switch_page("views/sessions.py").run()
    small = session_id_by_name(open_store(two_sessions_db), "small")
    at.selectbox(key=Keys.OPEN_SESSION).set_value(small).run()
    at.button(key=Keys.OPEN_BUTTON).click().run()
    no_exception(at)
    assert at.query_params == {"session": "small", "annotator": "erin"}

    # F5: a new tab state on the same URL. Meanwhile another tab answers in "other", which
    # makes it the most recently active session: the URL still wins.
    other = Workbench.open(open_store(two_sessions_db), session_id_by_name(open_store(two_sessions_db), "other"))
    p = int(other.queue(top=1)[0])
    other.record("zoe", "answer", position=p, label=int(np.flatnonzero(other.state.candidates[p])[0]))
    reloaded = app(two_sessions_db, annotator=None, run=False)
    reloaded.query_params.update(at.query_params)
    reloaded.run()
    no_exception(reloaded)
    assert open_session_name(reloaded) == "small"
    assert reloaded.sidebar.text_input(key=Keys.ANNOTATOR).value == "erin"
    reloaded.switch_page("views/progress.py").run()
    assert open_session_name(reloaded) == "small" and reloaded.query_params["session"] == "small"


def test_a_deep_link_opens_the_session_it_names_and_an_unknown_name_is_said(app, two_sessions_db):
    at = app(two_sessions_db, run=False)
    at.query_params["session"] = "small"
    at.run()
    no_exception(at)
    assert open_session_name(at) == "small"

    stale = app(two_sessions_db, run=False)
    stale.query_params["session"] = "gone"
    stale.run()
    no_exception(stale)
    assert any("No session is called" in e.value and "gone" in e.value for e in stale.error)
    assert open_session_name(stale) == "other" and stale.query_params["session"] == "other"


def test_two_tabs_in_two_sessions_stay_in_their_own(app, two_sessions_db):
    tab_a = app(two_sessions_db, run=False)
    tab_a.query_params["session"] = "small"
    tab_a.run()
    tab_b = app(two_sessions_db, run=False)
    tab_b.query_params["session"] = "other"
    tab_b.run()
    position = position_on_screen(tab_b)
    label = next(b for b in tab_b.button if b.key and b.key.startswith(f"query_answer_{position}_"))
    label.click().run()
    tab_a.run()  # a rerun of the first tab after the second one answered
    assert open_session_name(tab_a) == "small" and tab_a.query_params["session"] == "small"
    assert events(two_sessions_db, "small") == [] and len(events(two_sessions_db, "other")) == 1


# -- one count of the undecided items ------------------------------------------------------


@pytest.fixture
def busy_db(digits_db: str) -> str:
    """The digits session with model labels stated (audited answers), an item flagged "none of
    these" and a conflict between two annotators."""
    Session = open_store(digits_db)
    # The store's audit key, fixed: with a random one, some keys certify a lot only once
    # nearly every item is answered (bytes(range(32)): after 482 answers, one open item
    # left), and fewer than two open items are left for the flags. This one certifies after
    # 124 answers and leaves 359.
    write_transaction(Session, lambda s: s.merge(StoreSecret(name=AUDIT_ORDER_KEY, value=b"\x01" * 32)))
    change_label_settings(Session, "demo", audit_share=0.5)
    bench = Workbench.open(Session, 1)
    truth = bench.state.true_labels
    assert truth is not None
    while bench.labels().counts["model"] == 0:
        p = int(bench.queue(top=1)[0])
        bench.record("ann", "answer", position=p, label=int(truth[p]), displayed="query")
    open_now = np.flatnonzero(bench.state.open_items)
    bench.record("ann", "none_of_these", position=int(open_now[0]))
    p = int(open_now[1])
    a, b = np.flatnonzero(bench.state.candidates[p])[:2]
    bench.record("ann", "answer", position=p, label=int(a))
    bench.record("bob", "answer", position=p, label=int(b))
    close_stores()
    return digits_db


def metric(at, label: str) -> int:
    return int(next(m.value for m in at.metric if m.label == label))


def test_progress_rejects_query_and_the_cli_count_the_undecided_items_alike(app, busy_db):
    at = app(busy_db)
    bench = at.session_state[STATE_KEY].workbench
    labels = bench.labels()
    undecided = labels.counts["undecided"]
    assert labels.counts["model"] > 0 and undecided > 0 and bench.state.conflicts
    on_query = metric(at, "Undecided items")
    at.switch_page("views/rejects.py").run()
    no_exception(at)
    on_rejects = metric(at, "Undecided items")
    queue = bench.rejects()
    # The page lists them: the conflicts and the items the model will not label.
    assert len(bench.state.conflicts) + queue.n_rejected == undecided
    at.switch_page("views/progress.py").run()
    no_exception(at)
    # Once on Progress (issue 46: it was shown twice), in the labelled data's row of sources.
    assert [m.label for m in at.metric].count("Undecided items") == 1
    on_progress = metric(at, "Undecided items")
    assert on_query == on_rejects == on_progress == undecided
    winnow = Path(sys.executable).with_name("winnow")
    status = subprocess.run(
        [str(winnow), "session", "status", "demo", "--db", busy_db, "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert json.loads(status.stdout)["labels"]["undecided"] == undecided


def test_a_new_tab_shows_an_answer_given_elsewhere_and_an_unknown_session_is_said_on_every_page(app, two_sessions_db):
    """Issue 46, item 6: a tab opened after an answer recorded from the command line took the
    process's workbench as it was (the old counts until a second click), and an address naming
    no session showed another one on the Progress page without a word."""
    from app.service import record_answer

    first = app(two_sessions_db)  # opens "other": the process now keeps its workbench
    assert open_session_name(first) == "other" and metric(first, "Answered items") == 0
    bench = first.session_state[STATE_KEY].workbench
    p = int(bench.queue(top=1)[0])
    record_answer(  # what `winnow answer` does: a write to the store, outside every tab
        open_store(two_sessions_db),
        "other",
        annotator="cli",
        kind="answer",
        item=bench.state.external_ids[p],
        label=bench.label_names[int(np.flatnonzero(bench.state.candidates[p])[0])],
    )
    fresh = app(two_sessions_db)  # a new tab, or F5
    no_exception(fresh)
    assert fresh.session_state[STATE_KEY].workbench is bench  # the same process-wide workbench
    assert metric(fresh, "Answered items") == 1
    fresh.switch_page("views/progress.py").run()
    assert metric(fresh, "Events") == 1

    stale = app(two_sessions_db, run=False)
    stale.query_params["session"] = "nosuch"
    stale.switch_page("views/progress.py").run()
    no_exception(stale)
    assert stale.title[0].value == "Progress"
    (said,) = [plain(e.value) for e in stale.error]
    assert "No session is called 'nosuch'" in said and "shows session 'other' instead" in said
    assert stale.query_params["session"] == "other"
