"""Each dataset's feature matrix in blocks: written when the dataset is published, equal to the
rows, read by load_state instead of the rows, dropped when instances are written, and made by
migration 0010 for the datasets of an older store."""

from __future__ import annotations

import importlib.util
import io
import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import event, func, select, text, update
from sqlalchemy.orm import sessionmaker

from app.store import (
    Dataset,
    FeatureBlock,
    StoreUnavailable,
    check_dataset,
    create_dataset,
    feature_matrix_stored,
    features,
    import_dataset,
    load_feature_matrix,
    load_state,
    make_engine,
    save_feature_matrix,
    upgrade_database,
    write_transaction,
)
from app.store.datasets import write_instances
from app.store.features import decode_block, encode_block, features_from_rows

from .conftest import CANDIDATES, LABELS

ROOT = Path(__file__).resolve().parents[2]


def _checked(n: int, d: int = 3, seed: int = 0, name: str = "blocks"):
    rng = np.random.default_rng(seed)
    return check_dataset(
        name=name,
        X=rng.normal(size=(n, d)),
        candidates=CANDIDATES[np.arange(n) % len(CANDIDATES)],
        label_names=LABELS,
        external_ids=[f"e{i}" for i in range(n)],
    )


def _blocks(Session, dataset_id: int) -> list[tuple[int, int]]:
    with Session() as s:
        return [
            tuple(r)
            for r in s.execute(
                select(FeatureBlock.start, FeatureBlock.n_rows)
                .where(FeatureBlock.dataset_id == dataset_id)
                .order_by(FeatureBlock.start)
            )
        ]


@pytest.fixture
def three_row_blocks(monkeypatch):
    """Blocks of 3 rows of 3 features, so that a small dataset spans several."""
    monkeypatch.setattr(features, "BLOCK_BYTES", 3 * 3 * 8)


def test_create_dataset_stores_blocks_equal_to_the_rows(store, three_row_blocks):
    checked = _checked(11)
    dataset_id = write_transaction(
        store,
        lambda s: (
            create_dataset(
                s,
                name="blocks",
                X=checked.X,
                candidates=checked.candidates,
                label_names=LABELS,
                external_ids=checked.external_ids,
            ).id
        ),
    )
    assert _blocks(store, dataset_id) == [(0, 3), (3, 3), (6, 3), (9, 2)]
    with store() as s:
        from_blocks = load_feature_matrix(s, dataset_id, 11, 3)
        from_rows = features_from_rows(s, dataset_id, 11, 3)
        assert feature_matrix_stored(s, dataset_id)
    assert from_blocks.dtype == np.float64
    np.testing.assert_array_equal(from_blocks, from_rows)
    np.testing.assert_array_equal(from_blocks, checked.X)


def test_an_import_publishes_the_blocks_with_the_dataset(store, three_row_blocks):
    checked = _checked(10, name="staged")
    seen = []

    def during(done: int, total: int) -> None:
        with store() as s:
            seen.append(s.scalar(select(func.count()).select_from(FeatureBlock)))

    result = import_dataset(store, checked, batch_rows=4, on_batch=during)
    assert seen == [0, 0, 0]  # nothing while the rows are staged
    assert _blocks(store, result.dataset_id) == [(0, 3), (3, 3), (6, 3), (9, 1)]
    with store() as s:
        np.testing.assert_array_equal(load_feature_matrix(s, result.dataset_id, 10, 3), checked.X)


def test_load_state_reads_the_blocks_and_not_the_feature_rows(small):
    statements = []
    engine = small.Session.kw["bind"]
    listen = lambda conn, cursor, statement, *rest: statements.append(statement)  # noqa: E731
    event.listen(engine, "before_cursor_execute", listen)
    try:
        with small.Session() as s:
            state = load_state(s, small.session_id)
    finally:
        event.remove(engine, "before_cursor_execute", listen)
    assert any("feature_blocks" in q for q in statements)
    assert not any("instances.features" in q for q in statements), statements
    with small.Session() as s:
        np.testing.assert_array_equal(state.X, features_from_rows(s, small.dataset_id, len(CANDIDATES), 3))


def test_new_instances_drop_the_blocks_and_saving_covers_the_rows_again(small):
    """A dataset that gets items is read from its rows until its blocks are written again."""
    n = len(CANDIDATES)
    with small.Session() as s:
        old = features_from_rows(s, small.dataset_id, n, 3)
    more = check_dataset(
        name="toy",
        X=np.vstack([old, [[7.0, 8.0, 9.0]]]),
        candidates=CANDIDATES[np.arange(n + 1) % n],
        label_names=LABELS,
        external_ids=[f"item-{i}" for i in range(n + 1)],
    )

    def add_item(s) -> None:
        write_instances(s, small.dataset_id, more, n, n + 1)
        s.execute(update(Dataset).where(Dataset.id == small.dataset_id).values(n_instances=n + 1))

    write_transaction(small.Session, add_item)
    assert _blocks(small.Session, small.dataset_id) == []
    with small.Session() as s:
        assert not feature_matrix_stored(s, small.dataset_id)
        assert load_feature_matrix(s, small.dataset_id, n + 1, 3) is None
        state = load_state(s, small.session_id)
    np.testing.assert_array_equal(state.X, more.X)
    # A matrix read before the item came has the wrong number of rows: refused, not stored.
    assert write_transaction(small.Session, lambda s: save_feature_matrix(s, small.dataset_id, old)) is False
    assert write_transaction(small.Session, lambda s: save_feature_matrix(s, small.dataset_id, state.X)) is True
    with small.Session() as s:
        assert feature_matrix_stored(s, small.dataset_id)
        np.testing.assert_array_equal(load_feature_matrix(s, small.dataset_id, n + 1, 3), more.X)


def test_blocks_that_do_not_cover_the_dataset_are_not_used(small):
    n = len(CANDIDATES)
    with small.Session() as s:
        assert load_feature_matrix(s, small.dataset_id, n + 1, 3) is None  # a row more than stored
    write_transaction(
        small.Session,
        lambda s: s.execute(update(FeatureBlock).where(FeatureBlock.dataset_id == small.dataset_id).values(start=1)),
    )
    with small.Session() as s:
        assert load_feature_matrix(s, small.dataset_id, n, 3) is None  # a gap at row 0
        assert load_state(s, small.session_id).X.shape == (n, 3)  # read from the rows


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, allow_pickle=False)
    return buffer.getvalue()


@pytest.mark.parametrize(
    "data, match",
    [
        (b"junk", "feature block 0 of dataset 1 is not .npy data"),
        (encode_block(np.zeros((4, 3))), r"holds a <f8 array of shape \(4, 3\); expected <f8 of shape \(5, 3\)"),
        (_npy(np.zeros((5, 3), dtype=np.float32)), r"holds a <f4 array"),
        (_npy(np.zeros((5, 3), order="F")), r"holds a Fortran-ordered <f8 array"),
        (encode_block(np.zeros((5, 3)))[:-8], "holds 112 bytes of data for 5 x 3 float64"),
    ],
)
def test_a_damaged_block_is_reported_with_its_place(data, match):
    with pytest.raises(StoreUnavailable, match=match):
        decode_block(data, 5, 3, where="feature block 0 of dataset 1")


def test_a_block_is_read_without_pickle_and_without_copying():
    X = np.arange(15.0).reshape(5, 3)
    data = encode_block(X)
    assert data.startswith(b"\x93NUMPY")
    block = decode_block(data, 5, 3)
    np.testing.assert_array_equal(block, X)
    assert not block.flags.writeable and not block.flags.owndata
    pickled = io.BytesIO()
    np.lib.format.write_array(pickled, np.full((5, 3), None, dtype=object), allow_pickle=True)
    with pytest.raises(StoreUnavailable, match=r"holds a \|O array"):  # refused before any unpickling
        decode_block(pickled.getvalue(), 5, 3)


def _make_0007_store(url: str, datasets: dict[int, np.ndarray]) -> None:
    """Datasets written with SQL at revision 0007, with a session on the first one."""
    from app.store.models import encode_candidate_mask

    upgrade_database(url, "0007")
    engine = make_engine(url)
    now = datetime(2026, 11, 23, tzinfo=UTC)
    try:
        with engine.begin() as conn:
            for dataset_id, X in datasets.items():
                conn.execute(
                    text(
                        "INSERT INTO datasets (id, name, created_at, label_names, n_instances, n_features, published)"
                        " VALUES (:id, :name, :now, :labels, :n, :d, true)"
                    ),
                    {
                        "id": dataset_id,
                        "name": f"d{dataset_id}",
                        "now": now,
                        "labels": json.dumps(LABELS),
                        "n": X.shape[0],
                        "d": X.shape[1],
                    },
                )
                for position, row in enumerate(X):
                    conn.execute(
                        text(
                            "INSERT INTO instances (dataset_id, position, external_id, features, candidate_mask)"
                            " VALUES (:d, :p, :e, :f, :m)"
                        ),
                        {
                            "d": dataset_id,
                            "p": position,
                            "e": f"e{position}",
                            "f": row.astype("<f8").tobytes(),
                            "m": encode_candidate_mask(CANDIDATES[position % len(CANDIDATES)]),
                        },
                    )
            conn.execute(
                text(
                    "INSERT INTO labelling_sessions (id, name, dataset_id, k, weighting, criterion, target_set,"
                    " created_at, updated_at) VALUES (1, 's', :d, 2, 'uniform', 'apl', 'all', :now, :now)"
                ),
                {"d": min(datasets), "now": now},
            )
    finally:
        engine.dispose()


def test_0010_fills_the_blocks_of_a_0007_store_from_its_rows(store_url):
    rng = np.random.default_rng(3)
    X1 = rng.normal(size=(23, 4))
    X2 = rng.integers(-5, 5, size=(7, 2)).astype(float)
    _make_0007_store(store_url, {1: X1, 2: X2, 3: np.zeros((0, 5))})
    engine = make_engine(store_url)
    try:
        with engine.begin() as conn:  # dataset 2 claims a row it does not have
            conn.execute(text("UPDATE datasets SET n_instances = 8 WHERE id = 2"))
        upgrade_database(store_url)
        Session = sessionmaker(bind=engine)
        with Session() as s:
            np.testing.assert_array_equal(load_feature_matrix(s, 1, 23, 4), X1)
            np.testing.assert_array_equal(load_feature_matrix(s, 1, 23, 4), features_from_rows(s, 1, 23, 4))
            assert not feature_matrix_stored(s, 2) and not feature_matrix_stored(s, 3)
            state = load_state(s, 1)
        np.testing.assert_array_equal(state.X, X1)
        assert _blocks(Session, 1) == [(0, 23)]
    finally:
        engine.dispose()


def test_0010_fills_a_block_at_a_time(store_url):
    """The migration's fill with blocks of 5 rows (its block size set small for the test)."""
    X = np.random.default_rng(4).normal(size=(17, 3))
    _make_0007_store(store_url, {1: X})
    upgrade_database(store_url)
    spec = importlib.util.spec_from_file_location("m0010", ROOT / "migrations" / "versions" / "0010_feature_blocks.py")
    migration = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(migration)
    migration._BLOCK_BYTES = 5 * 3 * 8
    engine = make_engine(store_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM feature_blocks"))
            migration._fill(conn, 1, 17, 3)
        Session = sessionmaker(bind=engine)
        assert _blocks(Session, 1) == [(0, 5), (5, 5), (10, 5), (15, 2)]
        with Session() as s:
            np.testing.assert_array_equal(load_feature_matrix(s, 1, 17, 3), X)
    finally:
        engine.dispose()
