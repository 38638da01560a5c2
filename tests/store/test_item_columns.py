"""A dataset's item columns in one piece (issue 32): equal to the rows they are read instead of,
refused when spoilt or out of date, dropped when instances are written, and the graph keys
kept under their token equal to a hash of the features."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import event, select, update

from app.service.graphs import dataset_graph, graph_key, graph_parameters
from app.store import (
    Dataset,
    StoreUnavailable,
    check_dataset,
    create_dataset,
    create_labelling_session,
    find_graph_key,
    load_state,
    make_engine,
    save_graph_key,
    save_item_columns,
    upgrade_database,
    write_transaction,
)
from app.store.datasets import write_instances
from app.store.item_columns import ITEM_COLUMNS, load_item_columns
from app.store.models import ItemColumn

from .conftest import CANDIDATES, LABELS

_names = itertools.count()

#: Ids the store accepts: no control character, no NUL, not blank; quotes, backslashes,
#: separators and characters outside ASCII are what a JSON or a joined encoding could break on.
external_id = st.text(
    alphabet=st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Zs")), min_size=1, max_size=6
).filter(lambda text: bool(text.strip()))


@st.composite
def datasets(draw: st.DrawFn) -> dict:
    n = draw(st.integers(2, 12))
    m = draw(st.integers(1, 4))
    sets = np.array(draw(st.lists(st.lists(st.booleans(), min_size=m, max_size=m), min_size=n, max_size=n)))
    sets[~sets.any(axis=1), 0] = True
    ids = draw(st.lists(external_id, min_size=n, max_size=n, unique=True))
    truth = None
    if draw(st.booleans()):
        # Unknown (-1) or one of the item's candidates, as the store requires.
        truth = np.array([draw(st.sampled_from([-1, *np.flatnonzero(row).tolist()])) for row in sets], dtype=np.int64)
    return {"candidates": sets, "external_ids": ids, "true_labels": truth, "label_names": [f"l{j}" for j in range(m)]}


def _new_session(Session, spec: dict) -> int:
    def work(s) -> int:
        n = len(spec["external_ids"])
        ds = create_dataset(s, name=f"d{next(_names)}", X=np.arange(n * 2, dtype=float).reshape(n, 2), **spec)
        return create_labelling_session(s, dataset_id=ds.id, name=f"s{next(_names)}", k=1).id

    return write_transaction(Session, work)


def _assert_same_items(a, b) -> None:
    assert a.external_ids == b.external_ids
    np.testing.assert_array_equal(a.instance_ids, b.instance_ids)
    np.testing.assert_array_equal(a.original_candidates, b.original_candidates)
    assert (a.true_labels is None) == (b.true_labels is None)
    if a.true_labels is not None:
        np.testing.assert_array_equal(a.true_labels, b.true_labels)
    np.testing.assert_array_equal(a.candidates, b.candidates)
    assert a.instance_ids.dtype == b.instance_ids.dtype and a.original_candidates.dtype == b.original_candidates.dtype


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=datasets())
def test_a_state_read_from_the_columns_equals_the_state_read_from_the_rows(store, spec):
    session_id = _new_session(store, spec)
    with store() as s:
        from_rows = load_state(s, session_id)
    assert from_rows.item_columns_token is None
    token = write_transaction(store, lambda s: save_item_columns(s, from_rows))
    assert token is not None
    with store() as s:
        from_columns = load_state(s, session_id)
    assert from_columns.item_columns_token == token
    _assert_same_items(from_columns, from_rows)
    assert not from_columns.instance_ids.flags.writeable and not from_columns.original_candidates.flags.writeable


def _spoil_data(s, dataset_id, name):
    s.execute(update(ItemColumn).where(ItemColumn.dataset_id == dataset_id, ItemColumn.name == name).values(data=b"x"))


def _spoil_digest_and_data(s, dataset_id, name):
    # Bytes that decode, with a digest that matches them: another shape or kind.
    from app.store.snapshots import encode_array, part_digest

    data = encode_array(np.zeros(3, dtype=np.float64))
    s.execute(
        update(ItemColumn)
        .where(ItemColumn.dataset_id == dataset_id, ItemColumn.name == name)
        .values(data=data, digest=part_digest(data))
    )


def _mix_tokens(s, dataset_id, name):
    s.execute(
        update(ItemColumn).where(ItemColumn.dataset_id == dataset_id, ItemColumn.name == name).values(token="0" * 32)
    )


def _drop_one(s, dataset_id, name):
    s.execute(ItemColumn.__table__.delete().where(ItemColumn.dataset_id == dataset_id, ItemColumn.name == name))


@pytest.mark.parametrize("spoil", [_spoil_data, _spoil_digest_and_data, _mix_tokens, _drop_one])
@pytest.mark.parametrize("name", ITEM_COLUMNS)
def test_spoilt_columns_are_not_used_and_the_rows_are_read(small, spoil, name):
    with small.Session() as s:
        truth = load_state(s, small.session_id)
    write_transaction(small.Session, lambda s: save_item_columns(s, truth))
    write_transaction(small.Session, lambda s: spoil(s, small.dataset_id, name))
    with small.Session() as s:
        assert load_item_columns(s, small.dataset_id, len(CANDIDATES), len(LABELS)) is None
        state = load_state(s, small.session_id)
    assert state.item_columns_token is None
    _assert_same_items(state, truth)


def _add_item(Session, dataset_id: int) -> None:
    n = len(CANDIDATES)
    more = check_dataset(
        name="toy",
        X=np.zeros((n + 1, 3)),
        candidates=CANDIDATES[np.arange(n + 1) % n],
        label_names=LABELS,
        external_ids=[f"item-{i}" for i in range(n + 1)],
    )

    def work(s) -> None:
        write_instances(s, dataset_id, more, n, n + 1)
        s.execute(update(Dataset).where(Dataset.id == dataset_id).values(n_instances=n + 1))

    write_transaction(Session, work)


def test_new_items_drop_the_columns_and_keys_and_a_state_read_before_is_not_stored(small):
    with small.Session() as s:
        before = load_state(s, small.session_id)
    token = write_transaction(small.Session, lambda s: save_item_columns(s, before))
    params = graph_parameters(before.X.shape, k=2, weighting="uniform", algorithm="exact")
    assert write_transaction(small.Session, lambda s: save_graph_key(s, small.dataset_id, token, params, "k" * 64))
    _add_item(small.Session, small.dataset_id)
    with small.Session() as s:
        assert s.scalars(select(ItemColumn.name).where(ItemColumn.dataset_id == small.dataset_id)).all() == []
        assert find_graph_key(s, small.dataset_id, token, params) is None
        after = load_state(s, small.session_id)
    assert after.item_columns_token is None and len(after.external_ids) == len(CANDIDATES) + 1
    # The columns of the state read before the item came are refused; those of the new one kept.
    assert write_transaction(small.Session, lambda s: save_item_columns(s, before)) is None
    assert (
        write_transaction(small.Session, lambda s: save_graph_key(s, small.dataset_id, token, params, "k" * 64))
        is False
    )
    assert write_transaction(small.Session, lambda s: save_item_columns(s, after)) is not None
    with small.Session() as s:
        _assert_same_items(load_state(s, small.session_id), after)


def test_the_graph_key_kept_under_the_token_equals_the_hash_of_the_features(small):
    with small.Session() as s:
        state = load_state(s, small.session_id)
    token = write_transaction(small.Session, lambda s: save_item_columns(s, state))
    first = dataset_graph(
        small.Session, dataset_id=small.dataset_id, X=state.X, k=2, weighting="uniform", item_columns_token=token
    )
    expected = graph_key(state.X, k=2, weighting="uniform", algorithm="exact")
    assert first.key == expected
    params = graph_parameters(state.X.shape, k=2, weighting="uniform", algorithm="exact")
    with small.Session() as s:
        assert find_graph_key(s, small.dataset_id, token, params) == expected
        # Another token (columns written again) does not see it.
        assert find_graph_key(s, small.dataset_id, "f" * 32, params) is None
    # Read back: the same graph, found without hashing (a key that is not the features' hash
    # would find no graph and build one).
    again = dataset_graph(
        small.Session, dataset_id=small.dataset_id, X=state.X, k=2, weighting="uniform", item_columns_token=token
    )
    assert again.key == expected and not again.built
    np.testing.assert_array_equal(again.idx, first.idx)


def test_0020_adds_an_empty_item_columns_table_to_a_0019_store(store_url):
    upgrade_database(store_url, "0019")
    engine = make_engine(store_url)
    try:
        upgrade_database(store_url)
        with engine.connect() as conn:
            assert conn.execute(select(ItemColumn.name)).all() == []
    finally:
        engine.dispose()


def _reads_features(statement: str) -> bool:
    """Whether an SQL statement reads feature values (blocks or rows), not just counts them."""
    return re.search(r"feature_blocks\.data\b|instances\.features\b", statement) is not None


def test_a_state_read_with_the_columns_reads_its_features_on_first_use_and_only_while_current(small):
    with small.Session() as s:
        from_rows = load_state(s, small.session_id)
    write_transaction(small.Session, lambda s: save_item_columns(s, from_rows))
    statements: list[str] = []
    engine = small.Session.kw["bind"]
    listen = lambda conn, cursor, statement, *rest: statements.append(statement)  # noqa: E731
    event.listen(engine, "before_cursor_execute", listen)
    try:
        with small.Session() as s:
            lazy = load_state(s, small.session_id)
        assert not any(map(_reads_features, statements)), statements
        np.testing.assert_array_equal(lazy.X, from_rows.X)
        assert any(map(_reads_features, statements))
    finally:
        event.remove(engine, "before_cursor_execute", listen)
    assert not lazy.X.flags.writeable and lazy.X is lazy.X
    # A state of the same read shares the matrix; one read before the items changed refuses it.
    with small.Session() as s:
        stale = load_state(s, small.session_id)
    _add_item(small.Session, small.dataset_id)
    with pytest.raises(StoreUnavailable, match="changed since the session was opened"):
        stale.X  # noqa: B018


def test_a_session_reopened_finds_its_graph_without_reading_its_features(small):
    from app.service import Workbench

    first = Workbench.open(small.Session, small.session_id)
    statements: list[str] = []
    engine = small.Session.kw["bind"]
    listen = lambda conn, cursor, statement, *rest: statements.append(statement)  # noqa: E731
    event.listen(engine, "before_cursor_execute", listen)
    try:
        # Opening and counting read no feature; freezing a lot of model labels does (its model
        # is a linear model of the features: engine.lot_model), once per process.
        again = Workbench.open(small.Session, small.session_id)
        again.summary()
    finally:
        event.remove(engine, "before_cursor_execute", listen)
    assert not any(map(_reads_features, statements)), statements
    assert again.graph.key == first.graph.key and not again.graph.built
    np.testing.assert_array_equal(again.state.X, first.state.X)
    assert again.summary() == first.summary()


def _flip_first_byte(s, table, name: str) -> None:
    data = s.execute(select(table.c.data).where(table.c.name == name)).scalar_one()
    s.execute(update(table).where(table.c.name == name).values(data=bytes([data[0] ^ 1]) + data[1:]))


def test_snapshot_parts_carry_a_crc32_and_parts_with_the_former_sha256_still_read(small):
    import hashlib

    from app.store import SessionSnapshotPart, SnapshotHeader, load_session_snapshot, save_session_snapshot
    from app.store.snapshots import part_digest

    arrays = {"a": np.arange(5), "b": np.eye(3, dtype=bool)}
    header = SnapshotHeader(1, "id", 0)
    write_transaction(small.Session, lambda s: save_session_snapshot(s, small.session_id, header, arrays))
    parts = SessionSnapshotPart.__table__
    with small.Session() as s:
        digests = s.execute(select(parts.c.digest)).scalars().all()
    assert len(digests) == 2 and all(d.startswith("crc32:") and len(d) == 14 for d in digests)

    def rewrite(s, digest_of) -> None:
        for name, data in s.execute(select(parts.c.name, parts.c.data)).all():
            s.execute(update(parts).where(parts.c.name == name).values(digest=digest_of(data)))

    # A snapshot written before (SHA-256 digests) is read as it is.
    write_transaction(small.Session, lambda s: rewrite(s, lambda data: hashlib.sha256(data).hexdigest()))
    with small.Session() as s:
        kept = load_session_snapshot(s, small.session_id)
    assert kept is not None and kept.arrays["a"].tolist() == [0, 1, 2, 3, 4]
    # A changed byte is caught under either digest.
    for digest_of in (lambda data: hashlib.sha256(data).hexdigest(), part_digest):
        write_transaction(small.Session, lambda s, f=digest_of: rewrite(s, f))
        write_transaction(small.Session, lambda s: _flip_first_byte(s, parts, "a"))
        with small.Session() as s:
            assert load_session_snapshot(s, small.session_id) is None
        write_transaction(small.Session, lambda s: _flip_first_byte(s, parts, "a"))  # back as it was
