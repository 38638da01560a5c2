"""The undo rule has one home (app.store.derive): the SQL that record_event runs to find the
event an undo cancels agrees with derive.event_to_undo on random event logs, on both backends."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.store import (
    InvalidRecord,
    create_labelling_session,
    event_to_undo,
    record_event,
    session_events,
    write_transaction,
)
from tests.store.conftest import CANDIDATES

ANNOTATORS = ("ann", "bob")
_names = itertools.count()

operations = st.lists(
    st.tuples(
        st.sampled_from(ANNOTATORS),
        st.sampled_from(["answer", "skip", "undo", "undo_item"]),
        st.integers(0, len(CANDIDATES) - 1),
    ),
    min_size=1,
    max_size=14,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations)
def test_the_sql_path_undoes_the_event_the_rule_names(small, ops):
    session_id = write_transaction(
        small.Session,
        lambda s: create_labelling_session(s, dataset_id=small.dataset_id, name=f"undo-{next(_names)}", k=2).id,
    )
    n_undone = 0
    for annotator, kind, position in ops:
        with small.Session() as s:
            log = session_events(s, session_id)
        if kind.startswith("undo"):
            on_item = position if kind == "undo_item" else None
            expected = event_to_undo(log, annotator, on_item)

            def undo(s, annotator=annotator, on_item=on_item):
                return record_event(
                    s, session_id=session_id, annotator=annotator, kind="undo", instance_position=on_item
                ).undoes_event_id

            if expected is None:
                try:
                    write_transaction(small.Session, undo)
                except InvalidRecord as refused:
                    assert "no event left to undo" in str(refused)
                else:
                    raise AssertionError(f"an undo by {annotator} was recorded although the rule names no event")
            else:
                assert write_transaction(small.Session, undo) == expected.id
                n_undone += 1
        else:
            label = int(np.flatnonzero(CANDIDATES[position])[0]) if kind == "answer" else None
            write_transaction(
                small.Session,
                lambda s, a=annotator, k=kind, p=position, m=label: record_event(
                    s, session_id=session_id, annotator=a, kind=k, instance_position=p, label=m
                ),
            )
    with small.Session() as s:
        log = session_events(s, session_id)
    assert sum(e.kind == "undo" for e in log) == n_undone
