"""events_after: the events a long-lived view reads to catch up. Both backends."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from app.service import Workbench
from app.store import (
    AnswerEvent,
    Instance,
    RecordNotFound,
    create_labelling_session,
    events_after,
    get_or_create_annotator,
    record_event,
    session_events,
    write_transaction,
)
from app.store.models import utcnow


def record(small, session_id, annotator, kind, position, label=None):
    return write_transaction(
        small.Session,
        lambda s: (
            record_event(
                s, session_id=session_id, annotator=annotator, kind=kind, instance_position=position, label=label
            ).id
        ),
    )


def test_events_after_gives_the_later_events_of_the_session_oldest_first(small):
    other = write_transaction(
        small.Session, lambda s: create_labelling_session(s, dataset_id=small.dataset_id, name="second", k=2).id
    )
    # Two sessions take turns: the ids of one session have gaps.
    for annotator, position in [("alice", 0), ("bob", 1), ("alice", 3), ("bob", 0)]:
        record(small, small.session_id, annotator, "skip", position)
        record(small, other, annotator, "skip", position)
    record(small, small.session_id, "alice", "answer", 0, "dog")
    record(small, small.session_id, "alice", "undo", None)
    with small.Session() as s:
        log = session_events(s, small.session_id)
        assert events_after(s, small.session_id, 0) == log
        for after in [-5, log[0].id, log[3].id, log[-1].id, log[-1].id + 100]:
            assert events_after(s, small.session_id, after) == [e for e in log if e.id > after]
        assert events_after(s, small.session_id, log[1].id, position=0) == [
            e for e in log if e.id > log[1].id and e.position == 0
        ]
        assert [e.kind for e in events_after(s, small.session_id, 0, position=0)] == ["skip", "skip", "answer", "undo"]
        assert events_after(s, small.session_id, 0, position=2) == []
        with pytest.raises(TypeError, match="after_id must be an int"):
            events_after(s, small.session_id, "3")
        with pytest.raises(RecordNotFound):
            events_after(s, 999, 0)


# PostgreSQL only: SQLite has one writer at a time, so its ids are committed in order.
@pytest.mark.postgresql
@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_a_workbench_catches_an_event_committed_out_of_id_order(small, store_url):
    """PostgreSQL hands out an id when a row is inserted, so a transaction that holds a lower
    id can commit after a higher one was read. The workbench reads a window of recent ids
    again (app.service.workbench.REREAD_WINDOW) and counts each id once."""
    bench = Workbench.open(small.Session, small.session_id)
    with small.Session() as s:
        carol = get_or_create_annotator(s, "carol").id
        s.commit()
    late = small.Session()  # a writer that does not take the store's write lock
    try:
        instance_id = late.scalar(
            select(Instance.id).where(Instance.dataset_id == small.dataset_id, Instance.position == 3)
        )
        event = AnswerEvent(
            session_id=small.session_id, instance_id=instance_id, annotator_id=carol, kind="skip", created_at=utcnow()
        )
        late.add(event)
        late.flush()  # its id is taken, not committed
        later = bench.record("bob", "skip", position=4)  # commits a higher id; the bench reads it
        assert later > event.id
        assert bench.state.n_events == 1 and not bench.state.skipped[3]
        late.commit()
    finally:
        late.close()
    bench.refresh()
    assert bench.state.n_events == 2
    assert bench.state.skipped[3] and bench.state.skipped[4]
    bench.refresh()  # read again: counted once
    assert bench.state.n_events == 2
