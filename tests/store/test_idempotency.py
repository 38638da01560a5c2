"""A request retried with the same idempotency key is recorded once (issue 13, item 6).

A client that lost the reply to "record this answer" cannot tell whether it was recorded; with
an idempotency key it sends the request again and the store answers with the event it already
recorded. Both backends.
"""

from __future__ import annotations

import pytest

from app.store import (
    IDEMPOTENCY_KEY_MAX,
    InvalidRecord,
    count_events,
    create_labelling_session,
    event_log,
    load_state,
    record_event,
    write_transaction,
)

from .conftest import row_counts


def record(small, session_id=None, **kwargs):
    kwargs.setdefault("annotator", "alice")
    return write_transaction(
        small.Session, lambda s: record_event(s, session_id=session_id or small.session_id, **kwargs)
    )


def n_events(small, session_id=None):
    with small.Session() as s:
        return count_events(s, session_id or small.session_id)


def test_a_retried_answer_is_recorded_once(small):
    first = record(small, kind="answer", instance_position=0, label="dog", idempotency_key="req-1")
    again = record(small, kind="answer", instance_position=0, label="dog", idempotency_key="req-1")
    assert again.id == first.id
    assert n_events(small) == 1
    # The same label given by index is the same request.
    assert record(small, kind="answer", instance_position=0, label=1, idempotency_key="req-1").id == first.id
    with small.Session() as s:
        assert [e["event_id"] for e in event_log(s, small.session_id)] == [first.id]


def test_a_new_key_records_a_new_event(small):
    first = record(small, kind="skip", instance_position=0, idempotency_key="a")
    second = record(small, kind="skip", instance_position=0, idempotency_key="b")
    unkeyed = record(small, kind="skip", instance_position=0)
    assert len({first.id, second.id, unkeyed.id}) == 3
    assert n_events(small) == 3


def test_a_retried_undo_does_not_undo_a_second_event(small):
    kept = record(small, kind="answer", instance_position=0, label="cat")
    undone = record(small, kind="answer", instance_position=1, label="dog")
    undo = record(small, kind="undo", idempotency_key="undo-1")
    assert undo.undoes_event_id == undone.id
    assert record(small, kind="undo", idempotency_key="undo-1").id == undo.id
    # A retry that names the instance the undo was about is the same request too.
    assert record(small, kind="undo", instance_position=1, idempotency_key="undo-1").id == undo.id
    with small.Session() as s:
        state = load_state(s, small.session_id)
        log = event_log(s, small.session_id)
    assert [e["event_id"] for e in log] == [kept.id, undone.id, undo.id]
    assert log[0]["undone_by_event_id"] is None
    assert state.candidates[0].tolist() == [True, False, False, False]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"label": "cat"}, r"label 'dog', not 'cat'"),
        ({"annotator": "bob"}, r"annotator 'alice', not 'bob'"),
        ({"instance_position": 3}, r"item 'item-0', not 'item-3'"),
        ({"kind": "other_label", "label": "bird"}, r"kind 'answer', not 'other_label'"),
    ],
)
def test_a_key_reused_for_another_request_is_refused(small, change, message):
    request = {"kind": "answer", "instance_position": 0, "label": "dog", "idempotency_key": "req-7"}
    first = record(small, **request)
    before = row_counts(small.Session)
    with pytest.raises(
        InvalidRecord,
        match=rf"idempotency_key 'req-7' was already used in session 'first'"
        rf" for another request \(event {first.id}: .*{message}",
    ):
        record(small, **{**request, **change})
    assert row_counts(small.Session) == before


def test_keys_are_per_session(small):
    other = write_transaction(
        small.Session, lambda s: create_labelling_session(s, dataset_id=small.dataset_id, name="second", k=2)
    ).id
    a = record(small, kind="skip", instance_position=0, idempotency_key="same")
    b = record(small, session_id=other, kind="skip", instance_position=0, idempotency_key="same")
    assert a.id != b.id
    assert n_events(small) == 1 and n_events(small, other) == 1


@pytest.mark.parametrize(
    ("key", "error", "message"),
    [
        ("", InvalidRecord, "idempotency_key is empty"),
        ("   ", InvalidRecord, "idempotency_key is empty"),
        ("k" * (IDEMPOTENCY_KEY_MAX + 1), InvalidRecord, f"longer than {IDEMPOTENCY_KEY_MAX} characters"),
        ("a\x00b", InvalidRecord, "NUL"),
        (17, TypeError, "idempotency_key must be a str"),
    ],
)
def test_bad_keys_are_refused(small, key, error, message):
    with pytest.raises(error, match=message):
        record(small, kind="skip", instance_position=0, idempotency_key=key)
    assert n_events(small) == 0


def test_a_key_is_stored_stripped(small):
    first = record(small, kind="skip", instance_position=0, idempotency_key=" k ")
    assert first.idempotency_key == "k"
    assert record(small, kind="skip", instance_position=0, idempotency_key="k").id == first.id
