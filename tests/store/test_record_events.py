"""record_events: a batch of answers checked as record_event checks one, then written whole
or not at all (both backends)."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from app.store import (
    AnswerEvent,
    EventRequest,
    RequestRefused,
    add_user,
    record_events,
    write_transaction,
)

from .conftest import row_counts


def test_every_batch_kind_is_recorded_once(small):
    requests = [
        EventRequest("ada", "answer", "item-0", "dog"),
        EventRequest("ada", "other_label", "item-2", "fish"),
        EventRequest("bob", "none_of_these", "item-3"),
        EventRequest("bob", "skip", "item-4"),
    ]
    assert (
        write_transaction(small.Session, lambda s: record_events(s, session_id=small.session_id, requests=requests))
        == 4
    )
    with small.Session() as s:
        events = s.scalars(select(AnswerEvent).order_by(AnswerEvent.id)).all()
    assert [(e.kind, e.label) for e in events] == [
        ("answer", 1),
        ("other_label", 3),
        ("none_of_these", None),
        ("skip", None),
    ]


@pytest.mark.parametrize(
    "bad, match",
    [
        (EventRequest("ada", "answer", "item-9", "cat"), r"no item with id 'item-9'"),
        (EventRequest("ada", "answer", "item-2", "dog"), r"label 'dog' is not in its candidate set"),
        (EventRequest("ada", "other_label", "item-2", "cat"), r"label 'cat' is in its candidate set"),
        (EventRequest("ada", "skip", "item-2", "cat"), r"kind='skip' takes no label"),
        (EventRequest("ada", "answer", "item-2"), r"kind='answer' needs a label"),
        (EventRequest("ada", "undo", "item-2"), r"kind must be one of answer, other_label, none_of_these, skip"),
        (EventRequest("\x1b[2Jada", "skip", "item-2"), r"annotator .* holds the control character U\+001B"),
        (EventRequest("ada\udfff", "skip", "item-2"), r"annotator .* holds a lone surrogate \(U\+DFFF\)"),
    ],
)
def test_a_refused_request_names_its_index_and_writes_nothing(small, bad, match):
    before = row_counts(small.Session)
    requests = [EventRequest("ada", "answer", "item-0", "cat"), bad]
    with pytest.raises(RequestRefused, match=match) as info:
        write_transaction(small.Session, lambda s: record_events(s, session_id=small.session_id, requests=requests))
    assert info.value.index == 1
    assert row_counts(small.Session) == before


def test_team_mode_checks_who_may_answer_once_per_annotator(small):
    write_transaction(
        small.Session, lambda s: add_user(s, name="eve", role="annotator", password="correct horse battery")
    )
    requests = [EventRequest("eve", "skip", "item-0")]
    with pytest.raises(RequestRefused, match="eve") as info:
        write_transaction(small.Session, lambda s: record_events(s, session_id=small.session_id, requests=requests))
    assert info.value.index == 0
