"""IncrementalDerivation equals derive_state on the whole log, however the events arrive."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.store import EventRecord, IncrementalDerivation, derive_state, event_to_undo
from engine.exceptions import InvalidInput

N_ITEMS, N_LABELS = 4, 4
ANNOTATORS = ("ann", "bob", "cy")
KINDS = ("answer", "other_label", "none_of_these", "skip", "resolve", "undo")
START = datetime(2026, 1, 1, tzinfo=UTC)


def random_log(draw: st.DrawFn) -> tuple[np.ndarray, list[EventRecord]]:
    """A valid log: undos cancel the annotator's latest active event (the undo rule), ids
    increase with gaps (other sessions' events take ids too)."""
    original = np.array(
        draw(
            st.lists(st.lists(st.booleans(), min_size=N_LABELS, max_size=N_LABELS), min_size=N_ITEMS, max_size=N_ITEMS)
        ),
        dtype=bool,
    )
    original[np.arange(N_ITEMS), 0] = True  # every set holds a label
    steps = draw(
        st.lists(
            st.tuples(
                st.sampled_from(ANNOTATORS),
                st.sampled_from(KINDS),
                st.integers(0, N_ITEMS - 1),
                st.integers(0, N_LABELS - 1),
                st.integers(1, 3),
            ),
            min_size=15,
            max_size=40,
        )
    )
    log: list[EventRecord] = []
    next_id = 0
    for annotator, kind, position, label, gap in steps:
        next_id += gap
        when = START + timedelta(seconds=next_id)
        if kind == "undo":
            target = event_to_undo(log, annotator)
            if target is None:
                continue
            log.append(EventRecord(next_id, target.position, annotator, "undo", None, target.id, when))
        else:
            labelled = kind in ("answer", "other_label", "resolve")
            log.append(EventRecord(next_id, position, annotator, kind, label if labelled else None, None, when))
    return original, log


@st.composite
def deliveries(draw: st.DrawFn) -> tuple[np.ndarray, list[EventRecord], list[list[EventRecord]]]:
    """A log, and the chunks a reader receives it in: out of id order (a transaction may commit
    a lower id late), with events it already has read again (an overlapping window), but never
    an undo before the event it cancels (that one was committed before the undo was written)."""
    original, log = random_log(draw)
    keys = {e.id: draw(st.floats(0, 1)) for e in log}
    for e in log:  # ids ascend, so a target's key is final when its undo comes
        if e.kind == "undo":
            keys[e.id] = max(keys[e.id], keys[e.undoes_event_id] + 1e-6)
    order = sorted(log, key=lambda e: keys[e.id])
    cuts = sorted(draw(st.lists(st.integers(0, len(order)), max_size=6)))
    chunks, start = [], 0
    for cut in [*cuts, len(order)]:
        repeated = draw(st.lists(st.sampled_from(order[:start]), max_size=3)) if start else []
        chunk = order[start:cut] + repeated
        chunks.append(draw(st.permutations(chunk)))
        start = cut
    return original, log, chunks


def assert_same_state(actual, expected) -> None:
    for name in ("candidates", "resolved", "none_of_these", "wrong_set", "skipped"):
        np.testing.assert_array_equal(getattr(actual, name), getattr(expected, name), err_msg=name)
    assert actual.conflicts == expected.conflicts
    assert actual.answered_by == expected.answered_by
    assert actual.answered_at == expected.answered_at
    assert actual.n_events == expected.n_events


@settings(max_examples=60, deadline=None)
@given(deliveries())
def test_incremental_derivation_equals_the_full_derivation_after_every_chunk(delivery):
    original, _, chunks = delivery
    incremental = IncrementalDerivation(original)
    seen: dict[int, EventRecord] = {}
    for chunk in chunks:
        touched = incremental.add(chunk)
        new = {e.id: e for e in chunk if e.id not in seen}
        assert sorted(touched.tolist()) == sorted({e.position for e in new.values()})
        seen.update(new)
        everything = sorted(seen.values(), key=lambda e: e.id)
        assert_same_state(incremental.derived, derive_state(everything, original))
        assert incremental.max_id == max(seen, default=0)
        for annotator in ANNOTATORS:
            assert incremental.latest_event(annotator) == event_to_undo(everything, annotator)
        for position in range(N_ITEMS):
            assert incremental.item_events(position) == tuple(e for e in everything if e.position == position)


def test_a_late_event_with_a_lower_id_is_taken_in_and_repeats_count_once():
    """The case PostgreSQL produces when two transactions commit out of id order: event 2
    arrives after event 3 has been read; reading 3 again changes nothing."""
    original = np.array([[True, True, False], [True, False, True]])
    incremental = IncrementalDerivation(original)
    incremental.add([EventRecord(1, 0, "ann", "answer", 0), EventRecord(3, 1, "bob", "answer", 2)])
    changed = incremental.add([EventRecord(3, 1, "bob", "answer", 2), EventRecord(2, 0, "bob", "answer", 1)])
    assert changed.tolist() == [0]
    log = [
        EventRecord(1, 0, "ann", "answer", 0),
        EventRecord(2, 0, "bob", "answer", 1),
        EventRecord(3, 1, "bob", "answer", 2),
    ]
    assert_same_state(incremental.derived, derive_state(log, original))
    assert incremental.derived.conflicts[0].labels == (0, 1)  # ann and bob disagree on item 0
    assert incremental.n_events == 3
    assert incremental.latest_event("bob").id == 3


def test_an_invalid_event_leaves_the_derivation_as_it_was():
    original = np.array([[True, True], [True, True]])
    incremental = IncrementalDerivation(original)
    incremental.add([EventRecord(1, 0, "ann", "answer", 0)])
    before = incremental.derived
    with pytest.raises(InvalidInput, match="position 5"):
        incremental.add([EventRecord(2, 1, "ann", "skip"), EventRecord(3, 5, "ann", "skip")])
    with pytest.raises(InvalidInput, match="event 4: undoes_event_id 9"):
        incremental.add([EventRecord(4, 1, "ann", "undo", None, 9)])
    assert incremental.derived is before
    assert incremental.n_events == 1 and incremental.item_events(1) == ()


@settings(max_examples=60, deadline=None)
@given(deliveries(), st.data())
def test_the_sets_after_the_first_events_equal_a_derivation_of_those_events_alone(delivery, data):
    """What the suspicion's models of the features are fitted to (a checkpoint of the log):
    only the items of the later events derived again, the same sets as the prefix derived."""
    original, log, chunks = delivery
    incremental = IncrementalDerivation(original)
    for chunk in chunks:
        incremental.add(chunk)
    everything = sorted(log, key=lambda e: e.id)
    n_events = data.draw(st.integers(0, len(everything)))
    last_id, candidates = incremental.candidates_after(n_events)
    np.testing.assert_array_equal(candidates, derive_state(everything[:n_events], original).candidates)
    assert last_id == (everything[n_events - 1].id if n_events else 0)
    assert not candidates.flags.writeable
    with pytest.raises(ValueError, match="n_events must be in"):
        incremental.candidates_after(len(everything) + 1)
