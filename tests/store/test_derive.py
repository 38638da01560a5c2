"""The pure event -> state derivation: hand-written tables and properties."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.store import Conflict, EventRecord, derive_item, derive_state
from engine.exceptions import InvalidInput

ORIGINAL = np.array(
    [
        [1, 1, 0, 0],
        [0, 1, 1, 0],
        [1, 0, 0, 0],
        [1, 1, 1, 0],
    ],
    dtype=bool,
)
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def ev(id, position, annotator, kind, label=None, undoes=None):
    return EventRecord(id, position, annotator, kind, label, undoes, T0 + timedelta(seconds=id))


def sets(state):
    return [set(np.flatnonzero(row).tolist()) for row in state.candidates]


def test_no_events_is_the_original_state():
    state = derive_state([], ORIGINAL)
    assert np.array_equal(state.candidates, ORIGINAL)
    assert not state.resolved.any() and not state.none_of_these.any()
    assert not state.wrong_set.any() and not state.skipped.any()
    assert state.conflicts == () and state.n_events == 0
    assert state.answered_by == (None,) * 4 and state.answered_at == (None,) * 4
    assert not state.candidates.flags.writeable


@pytest.mark.parametrize(
    ("events", "expected_sets", "flags"),
    [
        pytest.param(
            [ev(1, 0, "ann", "answer", 1)],
            [{1}, {1, 2}, {0}, {0, 1, 2}],
            {},
            id="answer",
        ),
        pytest.param(
            [ev(1, 0, "ann", "answer", 1), ev(2, 0, "ann", "undo", undoes=1)],
            [{0, 1}, {1, 2}, {0}, {0, 1, 2}],
            {},
            id="undo-of-answer-restores-the-set",
        ),
        pytest.param(
            [ev(1, 1, "ann", "other_label", 3)],
            [{0, 1}, {3}, {0}, {0, 1, 2}],
            {"wrong_set": [1]},
            id="other_label",
        ),
        pytest.param(
            [ev(1, 3, "ann", "none_of_these")],
            [{0, 1}, {1, 2}, {0}, {0, 1, 2}],
            {"none_of_these": [3]},
            id="none_of_these-keeps-the-set",
        ),
        pytest.param(
            [ev(1, 3, "ann", "skip")],
            [{0, 1}, {1, 2}, {0}, {0, 1, 2}],
            {"skipped": [3]},
            id="skip",
        ),
        pytest.param(
            [ev(1, 3, "ann", "skip"), ev(2, 3, "ann", "undo", undoes=1)],
            [{0, 1}, {1, 2}, {0}, {0, 1, 2}],
            {},
            id="undone-skip",
        ),
        pytest.param(
            [ev(1, 3, "ann", "answer", 0), ev(2, 3, "ann", "answer", 2)],
            [{0, 1}, {1, 2}, {0}, {2}],
            {},
            id="same-annotator-corrects-themselves",
        ),
        pytest.param(
            [ev(1, 3, "ann", "answer", 0), ev(2, 3, "bob", "answer", 0)],
            [{0, 1}, {1, 2}, {0}, {0}],
            {},
            id="two-annotators-agree",
        ),
        pytest.param(
            [ev(1, 3, "ann", "answer", 0), ev(2, 3, "bob", "answer", 2)],
            [{0, 1}, {1, 2}, {0}, {0, 2}],
            {"conflict": [3]},
            id="two-annotators-disagree",
        ),
        pytest.param(
            [
                ev(1, 3, "ann", "answer", 0),
                ev(2, 3, "bob", "answer", 2),
                ev(3, 3, "eve", "resolve", 2),
            ],
            [{0, 1}, {1, 2}, {0}, {2}],
            {"resolved": [3]},
            id="resolve-clears-the-conflict",
        ),
        pytest.param(
            [
                ev(1, 3, "ann", "answer", 0),
                ev(2, 3, "bob", "answer", 2),
                ev(3, 3, "eve", "resolve", 2),
                ev(4, 3, "eve", "undo", undoes=3),
            ],
            [{0, 1}, {1, 2}, {0}, {0, 2}],
            {"conflict": [3]},
            id="undone-resolve-brings-the-conflict-back",
        ),
        pytest.param(
            [
                ev(1, 3, "ann", "answer", 0),
                ev(2, 3, "bob", "answer", 2),
                ev(3, 3, "bob", "undo", undoes=2),
            ],
            [{0, 1}, {1, 2}, {0}, {0}],
            {},
            id="undo-of-one-side-ends-the-conflict",
        ),
        pytest.param(
            [ev(1, 3, "eve", "resolve", 1), ev(2, 3, "ann", "answer", 0)],
            [{0, 1}, {1, 2}, {0}, {0, 1}],
            {"conflict": [3]},
            id="answer-after-resolve-disputes-it",
        ),
        pytest.param(
            [ev(1, 3, "ann", "answer", 1), ev(2, 3, "eve", "resolve", 1), ev(3, 3, "ann", "answer", 1)],
            [{0, 1}, {1, 2}, {0}, {1}],
            {"resolved": [3]},
            id="agreeing-answer-after-resolve",
        ),
        pytest.param(
            [ev(1, 0, "ann", "answer", 0), ev(2, 0, "bob", "none_of_these")],
            [{0}, {1, 2}, {0}, {0, 1, 2}],
            {"conflict": [0], "none_of_these": [0]},
            id="label-against-none_of_these-is-a-conflict",
        ),
        pytest.param(
            [ev(1, 0, "ann", "answer", 0), ev(2, 0, "bob", "other_label", 3)],
            [{0, 3}, {1, 2}, {0}, {0, 1, 2}],
            {"conflict": [0], "wrong_set": [0]},
            id="answer-against-other_label",
        ),
        pytest.param(
            [ev(1, 2, "eve", "resolve", 3)],
            [{0, 1}, {1, 2}, {3}, {0, 1, 2}],
            {"resolved": [2], "wrong_set": [2]},
            id="resolve-outside-the-set",
        ),
    ],
)
def test_derivation_table(events, expected_sets, flags):
    state = derive_state(events, ORIGINAL)
    assert sets(state) == expected_sets
    n = len(ORIGINAL)
    for name in ("resolved", "none_of_these", "wrong_set", "skipped"):
        assert np.flatnonzero(getattr(state, name)).tolist() == flags.get(name, []), name
    assert [c.position for c in state.conflicts] == flags.get("conflict", [])
    for conflict in state.conflicts:
        assert set(conflict.labels) == expected_sets[conflict.position]
    assert state.n_events == len(events)
    assert len(state.answered_by) == n


def test_conflict_names_labels_and_annotators():
    events = [ev(1, 3, "ann", "answer", 0), ev(2, 3, "bob", "answer", 2), ev(3, 3, "cy", "answer", 0)]
    state = derive_state(events, ORIGINAL)
    assert state.conflicts == (Conflict(position=3, labels=(0, 2), annotators=("ann", "bob", "cy")),)


def test_answered_by_and_at_follow_the_latest_active_verdict():
    events = [ev(1, 0, "ann", "answer", 0), ev(2, 0, "bob", "answer", 0), ev(3, 0, "bob", "skip")]
    state = derive_state(events, ORIGINAL)
    assert state.answered_by[0] == "bob" and state.answered_at[0] == T0 + timedelta(seconds=2)
    state = derive_state([*events, ev(4, 0, "bob", "undo", undoes=2)], ORIGINAL)
    assert state.answered_by[0] == "ann" and state.answered_at[0] == T0 + timedelta(seconds=1)


def test_derive_item_matches_derive_state_row():
    events = [ev(1, 1, "ann", "answer", 2), ev(2, 1, "bob", "answer", 1)]
    item = derive_item(events, ORIGINAL[1])
    state = derive_state(events, ORIGINAL)
    assert np.array_equal(item.candidates, state.candidates[1])
    assert item.conflict == state.conflicts[0]


@pytest.mark.parametrize(
    ("events", "match"),
    [
        ([ev(1, 9, "a", "skip")], "position 9"),
        ([ev(1, 0, "a", "shrug")], "event 1: kind must be one of answer, .*; got 'shrug'"),
        ([ev(1, 0, "a", "answer", 7)], "label 7"),
        ([ev(1, 0, "a", "answer", None)], "label None"),
        ([ev(2, 0, "a", "undo", undoes=1)], "not an earlier"),
        ([ev(1, 0, "a", "skip"), ev(2, 1, "a", "undo", undoes=1)], "not an earlier"),
        (
            [ev(1, 0, "a", "skip"), ev(2, 0, "a", "undo", undoes=1), ev(3, 0, "a", "undo", undoes=2)],
            "not an earlier non-undo",
        ),
        (
            [ev(1, 0, "a", "skip"), ev(2, 0, "a", "undo", undoes=1), ev(3, 0, "a", "undo", undoes=1)],
            "already undone",
        ),
    ],
)
def test_bad_events_are_rejected(events, match):
    with pytest.raises(InvalidInput, match=match):
        derive_state(events, ORIGINAL)


# --------------------------------------------------------------------------------------------
# Property: events followed by undos of all of them change nothing.

ANNOTATORS = ("ann", "bob", "cy")
M = ORIGINAL.shape[1]


@st.composite
def event_specs(draw, min_size=0, max_size=12):
    """(position, annotator, kind, label) tuples that are valid for ORIGINAL."""
    specs = []
    for _ in range(draw(st.integers(min_size, max_size))):
        position = draw(st.integers(0, len(ORIGINAL) - 1))
        annotator = draw(st.sampled_from(ANNOTATORS))
        kind = draw(st.sampled_from(["answer", "other_label", "none_of_these", "skip", "resolve"]))
        inside = np.flatnonzero(ORIGINAL[position]).tolist()
        outside = np.flatnonzero(~ORIGINAL[position]).tolist()
        if kind == "answer":
            label = draw(st.sampled_from(inside))
        elif kind == "other_label":
            label = draw(st.sampled_from(outside))
        elif kind == "resolve":
            label = draw(st.integers(0, M - 1))
        else:
            label = None
        specs.append((position, annotator, kind, label))
    return specs


def build(specs, *, first_id=1):
    return [ev(first_id + i, p, a, k, lab) for i, (p, a, k, lab) in enumerate(specs)]


def assert_same_state(a, b):
    for name in ("candidates", "resolved", "none_of_these", "wrong_set", "skipped"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert a.conflicts == b.conflicts
    assert a.answered_by == b.answered_by
    assert a.answered_at == b.answered_at


@settings(max_examples=100, deadline=None)
@given(base=event_specs(), extra=event_specs(min_size=1), data=st.data())
def test_undoing_later_events_restores_the_earlier_state(base, extra, data):
    before = build(base)
    # some undos inside the base history too
    undo_base = data.draw(st.lists(st.sampled_from(before), unique_by=lambda e: e.id) if before else st.just([]))
    next_id = len(before) + 1
    for target in undo_base:
        before.append(ev(next_id, target.position, target.annotator, "undo", undoes=target.id))
        next_id += 1
    added = build(extra, first_id=next_id)
    next_id += len(added)
    order = data.draw(st.permutations(added))
    undos = []
    for target in order:
        undos.append(ev(next_id, target.position, target.annotator, "undo", undoes=target.id))
        next_id += 1
    expected = derive_state(before, ORIGINAL)
    actual = derive_state([*before, *added, *undos], ORIGINAL)
    assert_same_state(actual, expected)
    assert actual.n_events == len(before) + 2 * len(added)


@settings(max_examples=100, deadline=None)
@given(specs=event_specs(min_size=1))
def test_invariants(specs):
    state = derive_state(build(specs), ORIGINAL)
    assert state.candidates.any(axis=1).all()  # never an empty set
    # without wrong_set, the current set stays inside the original one
    inside = ~(state.candidates & ~ORIGINAL).any(axis=1)
    assert np.array_equal(inside, ~state.wrong_set)
    conflicted = [c.position for c in state.conflicts]
    assert not state.resolved[conflicted].any()
    for c in state.conflicts:
        assert set(np.flatnonzero(state.candidates[c.position])) == set(c.labels)
    # derivation does not depend on the order events are given in
    shuffled = derive_state(list(reversed(build(specs))), ORIGINAL)
    assert_same_state(shuffled, state)
