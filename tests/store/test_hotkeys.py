"""A session's keyboard keys: the default mapping, the checks before a mapping is stored, and
migration 0005 (``labelling_sessions.hotkeys``) on a store that already holds sessions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import inspect, text

from app.store import (
    ACTION_KEYS,
    LABEL_KEYS,
    RESERVED_KEYS,
    InvalidRecord,
    check_hotkeys,
    default_hotkeys,
    downgrade_database,
    load_state,
    make_engine,
    set_session_hotkeys,
    upgrade_database,
    write_transaction,
)

from .conftest import LABELS


@pytest.mark.parametrize(
    "labels",
    [
        [str(d) for d in range(10)],
        ["1", "2", "3"],
        ["3", "2", "1", "0"],
        ["cat", "dog", "3", "1"],
        ["n", "s", "u", "a", "l", "c", "r", "b", "B"],
        [f"label {i}" for i in range(40)],
        ["10", "1", "0", "yes", "no"],
    ],
)
def test_the_default_keys_never_collide_and_digit_labels_keep_their_digit(labels):
    keys = default_hotkeys(labels)
    assert len(set(keys.values())) == len(keys)  # no key twice
    assert not set(keys.values()) & (set(ACTION_KEYS.values()) | set(RESERVED_KEYS))
    assert set(keys.values()) <= set(LABEL_KEYS)
    lowered = [name.lower() for name in labels]
    for name in labels:
        if name.lower() in LABEL_KEYS and lowered.count(name.lower()) == 1:
            assert keys[name] == name.lower()  # label "1" is key 1, never another label's
    assert check_hotkeys(keys, labels) == keys  # the default passes its own checks
    assert len(keys) == min(len(labels), len(LABEL_KEYS))


def test_digit_labels_get_their_own_digit():
    assert default_hotkeys([str(d) for d in range(10)]) == {str(d): str(d) for d in range(10)}
    assert default_hotkeys(["1", "0"]) == {"1": "1", "0": "0"}


@pytest.mark.parametrize(
    ("mapping", "match"),
    [
        ({"cat": "1", "dog": "1"}, "key '1' is given to both 'cat' and 'dog'"),
        ({"cat": "n"}, "key 'n' of 'cat' is the key of the action 'none_of_these'"),
        ({"cat": "S"}, "key 's' of 'cat' is the key of the action 'skip'"),
        ({"cat": "u"}, "'undo'"),
        ({"cat": "r"}, "reserved by Streamlit"),
        ({"cat": "12"}, "must be one letter or digit, got '12'"),
        ({"cat": "é"}, "must be one letter or digit"),
        ({"cat": "."}, "must be one letter or digit"),
        ({"lion": "1"}, "'lion' is not a label of this dataset"),
    ],
)
def test_a_bad_mapping_is_refused_with_the_reason(mapping, match):
    with pytest.raises(InvalidRecord, match=match):
        check_hotkeys(mapping, LABELS)


def test_keys_are_normalised_and_blank_keys_mean_no_key():
    assert check_hotkeys({"dog": " X ", "cat": "", "fish": None, "bird": "7"}, LABELS) == {"dog": "x", "bird": "7"}
    with pytest.raises(TypeError, match="mapping"):
        check_hotkeys([("cat", "1")], LABELS)  # type: ignore[arg-type]


def test_a_session_stores_its_keys_and_a_bad_mapping_writes_nothing(small):
    Session, session_id = small.Session, small.session_id
    with Session() as s:
        assert load_state(s, session_id).config.hotkeys is None
    stored = write_transaction(Session, lambda s: set_session_hotkeys(s, session_id, {"cat": "k", "dog": "9"}))
    assert stored == {"cat": "k", "dog": "9"}
    with Session() as s:
        assert load_state(s, session_id).config.hotkeys == {"cat": "k", "dog": "9"}
    with pytest.raises(InvalidRecord, match="given to both"):
        write_transaction(Session, lambda s: set_session_hotkeys(s, session_id, {"cat": "1", "fish": "1"}))
    with Session() as s:
        assert load_state(s, session_id).config.hotkeys == {"cat": "k", "dog": "9"}
    assert write_transaction(Session, lambda s: set_session_hotkeys(s, session_id, None)) == default_hotkeys(LABELS)
    with Session() as s:
        assert load_state(s, session_id).config.hotkeys is None


def test_0005_adds_the_hotkeys_column_and_keeps_an_older_store(store_url):
    """0005 follows 0009 (the head of main when it was written)."""
    upgrade_database(store_url, "0009")
    engine = make_engine(store_url)
    now = datetime(2026, 11, 24, tzinfo=UTC)
    try:
        with engine.begin() as conn:
            assert "hotkeys" not in {c["name"] for c in inspect(conn).get_columns("labelling_sessions")}
            conn.execute(
                text(
                    "INSERT INTO datasets (id, name, created_at, label_names, n_instances, n_features)"
                    " VALUES (1, 'old', :now, '[\"a\", \"b\"]', 0, 1)"
                ),
                {"now": now},
            )
            conn.execute(
                text(
                    "INSERT INTO labelling_sessions (id, name, dataset_id, k, weighting, criterion, target_set,"
                    " created_at, updated_at) VALUES (1, 's', 1, 3, 'uniform', 'apl', 'all', :now, :now)"
                ),
                {"now": now},
            )
        upgrade_database(store_url)
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT name, hotkeys FROM labelling_sessions").all() == [("s", None)]
        downgrade_database(store_url, "0009")
        with engine.connect() as conn:
            assert "hotkeys" not in {c["name"] for c in inspect(conn).get_columns("labelling_sessions")}
            assert conn.exec_driver_sql("SELECT name FROM labelling_sessions").all() == [("s",)]
        upgrade_database(store_url)
    finally:
        engine.dispose()
