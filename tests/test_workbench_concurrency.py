"""Readers never wait for a write, and an answer is refused only when its own item changed.

Two workbenches on one store stand for two processes (each has its own state and reads the
other's events from the store). Waits use threading.Event with generous timeouts, so a
regression fails instead of hanging; nothing asserts on wall-clock time.
"""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest

from app.service import StaleAnswer, Workbench, create_session, import_file
from app.service import workbench as workbench_module
from app.store import derive_state, open_store, session_events
from tests.cli.conftest import SAMPLE

TIMEOUT = 60.0
_names = itertools.count()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("concurrency")
    small = tmp / "small.csv"
    small.write_text("\n".join(SAMPLE.read_text().splitlines()[:81]) + "\n")
    session_factory = open_store(tmp / "w.db")
    dataset_id, _ = import_file(session_factory, small, name="digits", min_rows=6)
    return session_factory, dataset_id


@pytest.fixture
def session_id(store):
    session_factory, dataset_id = store
    return create_session(
        session_factory, dataset_id=dataset_id, name=f"s{next(_names)}", k=5, weighting="uniform", target_set="all"
    )


def first_label(bench: Workbench, position: int) -> int:
    return int(np.flatnonzero(bench.state.candidates[position])[0])


def assert_state_is_the_logs(bench: Workbench) -> None:
    with bench.session_factory() as s:
        events = session_events(s, bench.session_id)
    expected = derive_state(events, bench.state.original_candidates)
    np.testing.assert_array_equal(bench.state.candidates, expected.candidates)
    assert bench.state.n_events == expected.n_events == len(events)


def test_readers_complete_while_a_writer_holds_its_write_transaction(store, session_id, monkeypatch):
    session_factory, _ = store
    bench = Workbench.open(session_factory, session_id)
    shown = int(bench.queue(top=1)[0])
    before = (bench.queue(top=5), bench.summary(), bench.n_open, bench.latest_event("alice"))
    inside, release = threading.Event(), threading.Event()
    write = workbench_module.write_transaction

    def held_open(factory, work, **kwargs):
        monkeypatch.setattr(workbench_module, "write_transaction", write)  # only this write is held

        def blocking(s):
            result = work(s)  # the event is written, the transaction not yet committed
            inside.set()
            if not release.wait(TIMEOUT):
                raise TimeoutError("the test never released the writer")
            return result

        return write(factory, blocking, **kwargs)

    monkeypatch.setattr(workbench_module, "write_transaction", held_open)
    outcome: dict[str, object] = {}
    writer = threading.Thread(
        target=lambda: outcome.setdefault(
            "event", bench.record("alice", "answer", position=shown, label=first_label(bench, shown), displayed="query")
        )
    )
    read: dict[str, object] = {}

    def reader() -> None:
        read["changed"] = bench.refresh()  # what every page run may do first
        read["queue"] = bench.queue(top=5)
        read["summary"] = bench.summary()
        read["n_open"] = bench.n_open
        read["sets"] = bench.label_sets()
        read["touched"] = bench.touched()
        read["explain"] = bench.explain(shown)
        read["latest"] = bench.latest_event("alice")
        read["dst"] = bench.dst_view([shown])

    writer.start()
    try:
        assert inside.wait(TIMEOUT), "the writer never reached its transaction"
        reading = threading.Thread(target=reader)
        reading.start()
        reading.join(TIMEOUT)
        assert not reading.is_alive(), "a reader waited for the writer"
        assert writer.is_alive() and not release.is_set()  # the write was still held meanwhile
    finally:
        release.set()
        writer.join(TIMEOUT)
    assert read["changed"].size == 0  # nothing committed yet: the readers saw the state before
    np.testing.assert_array_equal(read["queue"], before[0])
    assert read["summary"] == before[1] and read["n_open"] == before[2] and read["latest"] == before[3]
    assert read["explain"].item_id == bench.state.external_ids[shown]
    assert outcome["event"] == bench.latest_event("alice")
    assert bench.summary()["answered"] == before[1]["answered"] + 1
    assert_state_is_the_logs(bench)


def test_another_process_answering_another_item_does_not_refuse_this_answer(store, session_id):
    session_factory, _ = store
    mine, theirs = Workbench.open(session_factory, session_id), Workbench.open(session_factory, session_id)
    shown = int(mine.queue(top=1)[0])  # on alice's screen
    other = next(int(p) for p in theirs.queue(top=10) if int(p) != shown)
    theirs.record("bob", "answer", position=other, label=first_label(theirs, other))
    mine.record("alice", "answer", position=shown, label=first_label(mine, shown), displayed="query")
    assert mine.state.n_events == 2 and mine.has_verdict("alice", shown)

    shown = int(mine.queue(top=1)[0])
    theirs.refresh()
    theirs.record("bob", "answer", position=shown, label=first_label(theirs, shown))  # the same item
    with pytest.raises(StaleAnswer, match="someone settled it"):
        mine.record("alice", "answer", position=shown, label=first_label(mine, shown), displayed="query")
    assert mine.state.n_events == 3
    assert_state_is_the_logs(mine)


def test_an_answer_about_another_item_between_the_check_and_the_write_is_no_reason(store, session_id, monkeypatch):
    """The write re-reads only its own item's events in its transaction."""
    session_factory, _ = store
    mine, theirs = Workbench.open(session_factory, session_id), Workbench.open(session_factory, session_id)
    shown = int(mine.queue(top=1)[0])
    other = int(mine.queue(top=2)[1])
    write = workbench_module.write_transaction

    def someone_answers_first(*args, **kwargs):
        monkeypatch.setattr(workbench_module, "write_transaction", write)
        theirs.record("bob", "answer", position=other, label=first_label(theirs, other))
        return write(*args, **kwargs)

    monkeypatch.setattr(workbench_module, "write_transaction", someone_answers_first)
    event = mine.record("alice", "answer", position=shown, label=first_label(mine, shown), displayed="query")
    assert mine.latest_event("alice") == event
    assert mine.has_verdict("bob", other) and mine.state.n_events == 2
    assert_state_is_the_logs(mine)


def test_an_undo_is_refused_when_the_annotators_latest_event_changed_after_the_check(store, session_id, monkeypatch):
    session_factory, _ = store
    tab, other_tab = Workbench.open(session_factory, session_id), Workbench.open(session_factory, session_id)
    shown = int(tab.queue(top=1)[0])
    offered = tab.record("alice", "skip", position=shown, displayed="query")
    later = int(other_tab.queue(top=3)[2])
    write = workbench_module.write_transaction

    def another_tab_answers_first(*args, **kwargs):
        monkeypatch.setattr(workbench_module, "write_transaction", write)
        other_tab.refresh()
        other_tab.record("alice", "answer", position=later, label=first_label(other_tab, later))
        return write(*args, **kwargs)

    monkeypatch.setattr(workbench_module, "write_transaction", another_tab_answers_first)
    with pytest.raises(StaleAnswer, match="nothing was undone"):
        tab.record("alice", "undo", undoes=offered)
    tab.refresh()
    assert tab.state.n_events == 2 and tab.latest_event("alice") != offered
    assert_state_is_the_logs(tab)


def test_a_quick_second_press_on_the_query_page_is_refused_for_skips_too(store, session_id):
    """Without leases, an item stays answerable while it is the first of the queue or was drawn
    as the first and got no event since: a second skip of the same item is refused."""
    session_factory, _ = store
    bench = Workbench.open(session_factory, session_id)
    shown = int(bench.queue(top=1)[0])
    bench.record("alice", "skip", position=shown, displayed="query")
    assert int(bench.queue(top=1)[0]) != shown
    with pytest.raises(StaleAnswer, match="no longer the one to answer"):
        bench.record("alice", "skip", position=shown, displayed="query")
    never_shown = int(bench.queue(top=3)[2])
    with pytest.raises(StaleAnswer, match="no longer the one to answer"):
        bench.record("alice", "skip", position=never_shown, displayed="query")
    assert bench.state.n_events == 1


def test_catching_up_reads_only_the_events_after_the_last_one_seen(store, session_id, monkeypatch):
    session_factory, _ = store
    mine, theirs = Workbench.open(session_factory, session_id), Workbench.open(session_factory, session_id)
    open_items = theirs.queue()
    for i in range(workbench_module.REREAD_WINDOW + 6):
        theirs.record("bob", "skip", position=int(open_items[i % open_items.size]))
    mine.refresh()
    reads = []
    events_after = workbench_module.events_after

    def spy(s, sid, after_id, **kwargs):
        found = events_after(s, sid, after_id, **kwargs)
        reads.append((after_id, len(found)))
        return found

    last = max(e.id for e in mine_events(mine))
    theirs.record("bob", "skip", position=int(theirs.queue(top=1)[0]))
    monkeypatch.setattr(workbench_module, "events_after", spy)
    mine.refresh()
    assert reads == [(last - workbench_module.REREAD_WINDOW, workbench_module.REREAD_WINDOW + 1)]
    assert_state_is_the_logs(mine)


def mine_events(bench: Workbench):
    with bench.session_factory() as s:
        return session_events(s, bench.session_id)
