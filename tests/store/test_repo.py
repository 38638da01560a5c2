"""Store writes: validation with clear messages, all-or-nothing imports, events and state."""

from __future__ import annotations

from datetime import UTC

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.store import (
    InvalidRecord,
    RecordNotFound,
    create_dataset,
    create_labelling_session,
    event_log,
    get_dataset_by_name,
    get_or_create_annotator,
    get_session_by_name,
    list_datasets,
    list_sessions,
    load_state,
    record_event,
    write_transaction,
)
from app.store import datasets as datasets_module
from app.store.models import decode_candidate_masks, encode_candidate_mask, encode_candidate_masks
from engine.exceptions import InvalidInput

from .conftest import CANDIDATES, LABELS, TRUE_LABELS, row_counts


def dataset_kwargs(**overrides):
    n = len(CANDIDATES)
    kwargs = dict(
        name="other",
        X=np.arange(n * 2, dtype=float).reshape(n, 2),
        candidates=CANDIDATES.copy(),
        label_names=list(LABELS),
        external_ids=[f"x{i}" for i in range(n)],
        true_labels=TRUE_LABELS.copy(),
    )
    kwargs.update(overrides)
    return kwargs


def record(small, **kwargs):
    kwargs.setdefault("session_id", small.session_id)
    kwargs.setdefault("annotator", "ann")
    return write_transaction(small.Session, lambda s: record_event(s, **kwargs))


def state_of(small):
    with small.Session() as s:
        return load_state(s, small.session_id)


# --------------------------------------------------------------------------------------------
# Candidate masks


@pytest.mark.parametrize("m", [1, 4, 8, 9, 100, 1024])
def test_candidate_masks_round_trip(m):
    rng = np.random.default_rng(m)
    Y = rng.random((50, m)) < 0.3
    masks = encode_candidate_masks(Y)
    assert masks == [encode_candidate_mask(row) for row in Y]
    assert np.array_equal(decode_candidate_masks(masks, m), Y)


def test_candidate_mask_format():
    assert encode_candidate_mask(np.array([1, 0, 0, 1], dtype=bool)) == "09"
    assert encode_candidate_mask(np.eye(10, dtype=bool)[9]) == "0002"


# --------------------------------------------------------------------------------------------
# Datasets


def test_dataset_round_trip(small):
    state = state_of(small)
    assert state.label_names == tuple(LABELS)
    assert state.external_ids == tuple(f"item-{i}" for i in range(len(CANDIDATES)))
    assert np.array_equal(state.original_candidates, CANDIDATES)
    assert np.array_equal(state.candidates, CANDIDATES)
    assert np.array_equal(state.true_labels, TRUE_LABELS)
    assert state.X.dtype == np.float64 and state.X.shape == (len(CANDIDATES), 3)
    expected_X = np.random.default_rng(0).normal(size=(len(CANDIDATES), 3))
    assert np.array_equal(state.X, expected_X)  # bit-exact
    assert not state.X.flags.writeable
    assert state.config.name == "first" and state.config.k == 2
    assert state.config.dataset_name == "toy"
    assert state.n_events == 0 and state.conflicts == ()
    assert state.open_items.tolist() == [True, True, False, True, True]
    with small.Session() as s:
        assert [d.name for d in list_datasets(s)] == ["toy"]
        assert get_dataset_by_name(s, "toy").n_labels == 4


def test_dataset_with_metadata_and_no_true_labels(store):
    def work(s):
        ds = create_dataset(
            s,
            **dataset_kwargs(X=np.ones((5, 4)), true_labels=None, feature_names=list("abcd"), layout="image:2x2"),
        )
        return create_labelling_session(s, dataset_id=ds.id, name="s", k=4).id

    session_id = write_transaction(store, work)
    with store() as s:
        state = load_state(s, session_id)
    assert state.true_labels is None
    assert state.feature_names == ("a", "b", "c", "d") and state.layout == "image:2x2"


@pytest.mark.parametrize(
    ("overrides", "error", "match", "row"),
    [
        (
            {"candidates": np.vstack([CANDIDATES[:2], np.zeros((1, 4), bool), CANDIDATES[3:]])},
            InvalidRecord,
            r"row 3 \(external id 'x2'\) has an empty candidate set",
            2,
        ),
        (
            {"external_ids": ["x0", "x1", "x2", "x1", "x4"]},
            InvalidRecord,
            r"row 4 repeats external id 'x1' of row 2",
            3,
        ),
        (
            {"true_labels": np.array([0, 0, 0, -1, 3])},
            InvalidRecord,
            r"row 2 \(external id 'x1'\) has true label 'cat' outside its candidate set \{'dog', 'bird'\}",
            1,
        ),
        ({"true_labels": np.array([0, 2, 0, 9, 3])}, InvalidRecord, r"row 4 .*label 9", 3),
        (
            {"X": np.array([[0, 0], [0, np.nan], [0, 0], [0, 0], [0, 0]])},
            InvalidRecord,
            r"row 2 .*NaN",
            1,
        ),
        ({"external_ids": ["x0", "x1", "", "x3", "x4"]}, InvalidRecord, "row 3 has an empty", 2),
        ({"external_ids": ["x0"]}, InvalidRecord, "external_ids has 1 entries", None),
        ({"candidates": CANDIDATES[:, :3]}, InvalidRecord, r"expected .* \(5, 4\)", None),
        ({"label_names": ["a", "a", "b", "c"]}, InvalidRecord, "repeats", None),
        ({"X": np.ones(5)}, InvalidRecord, "2-D", None),
        ({"feature_names": ["a"]}, InvalidRecord, "feature_names has 1", None),
        ({"layout": "image:3x3"}, InvalidRecord, "does not fit 2 features", None),
        ({"name": "toy"}, InvalidRecord, "already exists", None),
        ({"name": "  "}, InvalidRecord, "name is empty", None),
        # PostgreSQL text cannot hold NUL: rejected on every backend, before the database.
        ({"name": "to\x00y"}, InvalidRecord, "name holds a NUL character", None),
        ({"label_names": ["cat", "d\x00g", "bird", "fish"]}, InvalidRecord, r"label_names\[1\] holds a NUL", None),
        ({"feature_names": ["a", "\x00"]}, InvalidRecord, r"feature_names\[1\] holds a NUL", None),
        ({"layout": "image:1x2\x00"}, InvalidRecord, "layout holds a NUL", None),
        (
            {"external_ids": ["x0", "x1", "x\x002", "x3", "x4"]},
            InvalidRecord,
            r"external_ids: row 3 has an external id holding a NUL character",
            2,
        ),
        ({"candidates": CANDIDATES.astype(float) * 0.5}, TypeError, "candidates", None),
    ],
)
def test_bad_datasets_are_rejected_and_write_nothing(small, overrides, error, match, row):
    before = row_counts(small.Session)
    with pytest.raises(error, match=match) as info:
        write_transaction(small.Session, lambda s: create_dataset(s, **dataset_kwargs(**overrides)))
    if error is InvalidRecord:
        assert isinstance(info.value, InvalidInput) and isinstance(info.value, ValueError)
        assert info.value.row == row
    assert row_counts(small.Session) == before


def test_a_crash_in_the_middle_of_an_import_leaves_no_half_dataset(store, monkeypatch):
    calls = []
    real_insert = datasets_module.insert_instances

    def crash_on_second_chunk(session, rows):
        calls.append(len(rows))
        if len(calls) == 2:
            raise RuntimeError("disk on fire")
        real_insert(session, rows)

    monkeypatch.setattr(datasets_module, "INSERT_CHUNK", 2)
    monkeypatch.setattr(datasets_module, "insert_instances", crash_on_second_chunk)
    with pytest.raises(RuntimeError, match="disk on fire"):
        write_transaction(store, lambda s: create_dataset(s, **dataset_kwargs()))
    assert calls == [2, 2]
    assert row_counts(store)["datasets"] == 0 and row_counts(store)["instances"] == 0

    # Even a caller that swallows the error and commits keeps nothing of the import:
    # create_dataset runs in a SAVEPOINT.
    calls.clear()
    with store.begin() as s:
        with pytest.raises(RuntimeError):
            create_dataset(s, **dataset_kwargs())
        get_or_create_annotator(s, "kept")
    counts = row_counts(store)
    assert counts["datasets"] == 0 and counts["instances"] == 0 and counts["annotators"] == 1


def test_large_import_uses_several_chunks(store, monkeypatch):
    monkeypatch.setattr(datasets_module, "INSERT_CHUNK", 7)
    rng = np.random.default_rng(1)
    n, m = 50, 12
    Y = rng.random((n, m)) < 0.3
    Y[np.arange(n), rng.integers(0, m, n)] = True
    X = rng.normal(size=(n, 5))

    def work(s):
        ds = create_dataset(
            s,
            name="d",
            X=X,
            candidates=Y,
            label_names=[f"l{j}" for j in range(m)],
            external_ids=np.array([f"e{i}" for i in range(n)]),
        )
        return create_labelling_session(s, dataset_id=ds.id, name="s").id

    session_id = write_transaction(store, work)
    with store() as s:
        state = load_state(s, session_id)
    assert np.array_equal(state.X, X) and np.array_equal(state.original_candidates, Y)
    assert state.external_ids[-1] == "e49"


# --------------------------------------------------------------------------------------------
# Labelling sessions


def test_sessions_and_annotators(small):
    with small.Session.begin() as s:
        create_labelling_session(
            s, dataset_id=small.dataset_id, name="second", k=2, criterion="pl", weighting="distance"
        )
        a = get_or_create_annotator(s, "ann")
        assert get_or_create_annotator(s, "ann").id == a.id
    with small.Session() as s:
        assert [x.name for x in list_sessions(s)] == ["first", "second"]
        assert get_session_by_name(s, "second").criterion == "pl"
        with pytest.raises(RecordNotFound, match=r"no labelling session called 'nope'.*'first'"):
            get_session_by_name(s, "nope")
        with pytest.raises(RecordNotFound, match="no dataset called"):
            get_dataset_by_name(s, "nope")
        with pytest.raises(RecordNotFound, match="no dataset called"):
            get_dataset_by_name(s, "to\x00y")
        with pytest.raises(RecordNotFound, match="no labelling session called"):
            get_session_by_name(s, "fir\x00st")


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"name": "first"}, "already exists"),
        ({"k": 0}, "k must be >= 1"),
        # A session that could never be opened (issue 13): k neighbours need k + 1 items.
        ({"k": 5}, r"k=5 must be smaller than the number of items of dataset 'toy' \(5\)"),
        ({"k": 60}, r"k=60 must be smaller than the number of items of dataset 'toy' \(5\)"),
        ({"weighting": "cosine"}, r"weighting must be one of uniform, distance; got 'cosine'"),
        ({"criterion": "entropy"}, "criterion must be one of apl, .*; got 'entropy'"),
        ({"target_set": "some"}, "target_set must be one of all, unlabelled; got 'some'"),
        ({"dataset_id": 999}, "dataset_id 999 does not exist"),
        ({"name": "n\x00"}, "name holds a NUL character"),
    ],
)
def test_bad_sessions_are_rejected(small, overrides, match):
    before = row_counts(small.Session)
    kwargs = {"dataset_id": small.dataset_id, "name": "new", "k": 2, **overrides}
    with pytest.raises(InvalidRecord, match=match):
        write_transaction(small.Session, lambda s: create_labelling_session(s, **kwargs))
    assert row_counts(small.Session) == before


# --------------------------------------------------------------------------------------------
# Events


def test_answer_undo_and_log(small):
    first = record(small, instance_position=0, kind="answer", label="dog")
    assert first.label == 1 and first.created_at.tzinfo is not None
    state = state_of(small)
    assert state.candidates[0].tolist() == [False, True, False, False]
    assert state.answered_by[0] == "ann"
    assert state.answered_at[0] == first.created_at

    undo = record(small, kind="undo")
    assert undo.undoes_event_id == first.id and undo.instance_id == first.instance_id
    state = state_of(small)
    assert np.array_equal(state.candidates, CANDIDATES)
    assert state.n_events == 2

    with small.Session() as s:
        log = event_log(s, small.session_id)
    assert [(r["kind"], r["position"], r["label_name"], r["undone_by_event_id"]) for r in log] == [
        ("answer", 0, "dog", undo.id),
        ("undo", 0, None, None),
    ]
    assert log[0]["external_id"] == "item-0" and log[0]["annotator"] == "ann"
    assert log[0]["created_at"].tzinfo == UTC


def test_undo_walks_back_this_annotators_own_history(small):
    a1 = record(small, instance_position=0, kind="answer", label=0)
    b1 = record(small, instance_position=1, kind="answer", label=2, annotator="bob")
    a2 = record(small, instance_position=3, kind="skip")
    assert record(small, kind="undo").undoes_event_id == a2.id
    assert record(small, kind="undo").undoes_event_id == a1.id
    with pytest.raises(InvalidRecord, match="annotator 'ann' has no event left to undo"):
        record(small, kind="undo")
    assert record(small, kind="undo", annotator="bob").undoes_event_id == b1.id


def test_undo_restricted_to_an_instance(small):
    a1 = record(small, instance_position=0, kind="answer", label=0)
    record(small, instance_position=1, kind="answer", label=1)
    assert record(small, kind="undo", instance_position=0).undoes_event_id == a1.id
    with pytest.raises(InvalidRecord, match="on item 'item-0'"):
        record(small, kind="undo", instance_position=0)


def test_conflict_and_resolve_through_the_store(small):
    record(small, instance_position=3, kind="answer", label="cat")
    record(small, instance_position=3, kind="answer", label="bird", annotator="bob")
    state = state_of(small)
    assert [(c.position, c.labels, c.annotators) for c in state.conflicts] == [(3, (0, 2), ("ann", "bob"))]
    assert state.candidates[3].tolist() == [True, False, True, False]
    assert not state.open_items[3] and state.in_conflict[3]

    record(small, instance_position=3, kind="resolve", label="fish", annotator="expert")
    state = state_of(small)
    assert state.conflicts == () and state.resolved[3] and state.wrong_set[3]
    assert state.candidates[3].tolist() == [False, False, False, True]
    assert state.answered_by[3] == "expert"


def test_flags_through_the_store(small):
    record(small, instance_position=1, kind="other_label", label="fish")
    record(small, instance_position=4, kind="none_of_these")
    record(small, instance_id=int(state_of(small).instance_ids[0]), kind="skip")
    state = state_of(small)
    assert state.wrong_set.tolist() == [False, True, False, False, False]
    assert state.none_of_these.tolist() == [False, False, False, False, True]
    assert state.skipped.tolist() == [True, False, False, False, False]
    assert np.array_equal(state.candidates[4], CANDIDATES[4])
    assert not state.open_items[4]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            {"instance_position": 1, "kind": "answer", "label": "cat"},
            InvalidRecord,
            r"instance at row 2 \(external id 'item-1'\): label 'cat' is not in its candidate set "
            r"\{'dog', 'bird'\}; record kind='other_label'",
        ),
        (
            {"instance_position": 1, "kind": "other_label", "label": "dog"},
            InvalidRecord,
            "is in its candidate set; record kind='answer'",
        ),
        ({"instance_position": 1, "kind": "answer", "label": "cow"}, InvalidRecord, "not in the label vocabulary"),
        ({"instance_position": 1, "kind": "resolve", "label": 4}, InvalidRecord, r"not a label index in \[0, 4\)"),
        ({"instance_position": 1, "kind": "answer"}, InvalidRecord, "needs a label"),
        ({"instance_position": 1, "kind": "skip", "label": 1}, InvalidRecord, "takes no label"),
        ({"instance_position": 1, "kind": "shrug"}, InvalidRecord, "kind must be one of answer, .*; got 'shrug'"),
        ({"kind": "answer", "label": 1}, InvalidRecord, "needs instance_position or instance_id"),
        ({"instance_position": 5, "kind": "skip"}, RecordNotFound, r"instance_position 5 is not in \[0, 5\)"),
        ({"instance_id": 10_000, "kind": "skip"}, RecordNotFound, "instance_id 10000"),
        ({"instance_position": 0, "instance_id": 1, "kind": "skip"}, InvalidRecord, "not both"),
        ({"session_id": 42, "instance_position": 0, "kind": "skip"}, RecordNotFound, "session_id 42"),
        ({"kind": "undo"}, InvalidRecord, "no event left to undo"),
        ({"instance_position": 0, "kind": "skip", "annotator": ""}, InvalidRecord, "annotator is empty"),
        ({"instance_position": 0, "kind": "skip", "annotator": "a\x00"}, InvalidRecord, "annotator holds a NUL"),
        ({"instance_position": 0, "kind": "answer", "label": True}, TypeError, "label must be an int"),
    ],
)
def test_bad_events_are_rejected_and_write_nothing(small, kwargs, error, match):
    record(small, instance_position=0, kind="answer", label=0, annotator="someone")
    before = row_counts(small.Session)
    with pytest.raises(error, match=match):
        record(small, **{"annotator": "newcomer", **kwargs})
    assert row_counts(small.Session) == before  # not even the new annotator


def test_unknown_session_in_reads(small):
    with small.Session() as s:
        with pytest.raises(RecordNotFound, match="session_id 7"):
            load_state(s, 7)
        with pytest.raises(RecordNotFound, match="session_id 7"):
            event_log(s, 7)


def test_sessions_do_not_see_each_others_events(small):
    other = write_transaction(
        small.Session,
        lambda s: create_labelling_session(s, dataset_id=small.dataset_id, name="other", k=2).id,
    )
    record(small, instance_position=0, kind="answer", label=0)
    with pytest.raises(InvalidRecord, match="no event left to undo"):
        record(small, session_id=other, kind="undo")
    with small.Session() as s:
        assert load_state(s, other).n_events == 0


# --------------------------------------------------------------------------------------------
# Property through the store: events recorded, then undone one by one, change nothing.

VALID = {
    position: (np.flatnonzero(row).tolist(), np.flatnonzero(~row).tolist()) for position, row in enumerate(CANDIDATES)
}


@st.composite
def recorded_events(draw, max_size=6):
    events = []
    for _ in range(draw(st.integers(1, max_size))):
        position = draw(st.integers(0, len(CANDIDATES) - 1))
        inside, outside = VALID[position]
        kinds = ["answer", "none_of_these", "skip", "resolve"] + (["other_label"] if outside else [])
        kind = draw(st.sampled_from(kinds))
        label = None
        if kind == "answer":
            label = draw(st.sampled_from(inside))
        elif kind == "other_label":
            label = draw(st.sampled_from(outside or [0]))
        elif kind == "resolve":
            label = draw(st.integers(0, len(LABELS) - 1))
        events.append((position, draw(st.sampled_from(["ann", "bob"])), kind, label))
    return events


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(base=recorded_events(), extra=recorded_events())
def test_recorded_then_undone_events_change_nothing(small, base, extra):
    name = f"prop-{np.random.default_rng().integers(1 << 62)}"
    session_id = write_transaction(
        small.Session,
        lambda s: create_labelling_session(s, dataset_id=small.dataset_id, name=name, k=2).id,
    )

    def add(events):
        for position, annotator, kind, label in events:
            record(
                small, session_id=session_id, instance_position=position, annotator=annotator, kind=kind, label=label
            )

    def state():
        with small.Session() as s:
            return load_state(s, session_id)

    add(base)
    expected = state()
    add([(p, "extra", k, lab) for p, _, k, lab in extra])
    for _ in extra:
        record(small, session_id=session_id, annotator="extra", kind="undo")
    actual = state()
    for field in ("candidates", "resolved", "none_of_these", "wrong_set", "skipped"):
        assert np.array_equal(getattr(actual, field), getattr(expected, field)), field
    assert actual.conflicts == expected.conflicts
    assert actual.answered_by == expected.answered_by
    assert actual.n_events == expected.n_events + 2 * len(extra)


def test_a_rejected_event_leaves_the_callers_transaction_clean(small):
    before = row_counts(small.Session)
    with small.Session.begin() as s:
        with pytest.raises(InvalidRecord):
            record_event(
                s, session_id=small.session_id, instance_position=1, annotator="newcomer", kind="answer", label="cat"
            )
        with pytest.raises(InvalidRecord):
            record_event(s, session_id=small.session_id, annotator="newcomer", kind="undo")
    assert row_counts(small.Session) == before


def test_session_events_feed_derive_state(small):
    from app.store import derive_state, session_events

    record(small, instance_position=0, kind="answer", label=1)
    record(small, instance_position=0, kind="answer", label=0, annotator="bob")
    with small.Session() as s:
        events = session_events(s, small.session_id)
        state = load_state(s, small.session_id)
        with pytest.raises(RecordNotFound):
            session_events(s, 99)
    assert [e.kind for e in events] == ["answer", "answer"]
    derived = derive_state(events, state.original_candidates)
    assert np.array_equal(derived.candidates, state.candidates)
    assert derived.conflicts == state.conflicts
