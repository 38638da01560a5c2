"""Stored crowd votes: written with the instances (all or nothing), read back, and the 0015
migration on a store that already holds data. SQLite and PostgreSQL (``store_url``)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from sqlalchemy import inspect, text

from app.store import (
    InvalidRecord,
    StoredVote,
    VoteSpec,
    check_dataset,
    dataset_has_votes,
    dataset_vote_counts,
    dataset_votes,
    downgrade_database,
    import_dataset,
    make_engine,
    open_store,
    upgrade_database,
    votes_of_item,
)

from .conftest import CANDIDATES, LABELS, row_counts
from .test_migrations import _write_rows_of_0001

T0 = datetime(2026, 11, 20, 14, 3, tzinfo=UTC)
# Item 3 gets three votes, item 0 one, item 4 none; given out of position order on purpose.
VOTES = VoteSpec(
    positions=np.array([3, 0, 3, 3]),
    annotators=["ann", "ann", "bob", "cid"],
    labels=np.array([1, 0, 2, 1]),
    times=[T0, None, None, T0],
    source="votes.csv",
)


def _checked(name="crowd", votes=VOTES):
    rng = np.random.default_rng(0)
    return check_dataset(
        name=name,
        X=rng.normal(size=(len(CANDIDATES), 2)),
        candidates=CANDIDATES,
        label_names=LABELS,
        external_ids=[f"s{i}" for i in range(len(CANDIDATES))],
        votes=votes,
    )


def test_votes_round_trip_across_staging_batches(store_url):
    Session = open_store(store_url)
    dataset_id = import_dataset(Session, _checked(), batch_rows=2).dataset_id
    with Session() as s:
        assert dataset_votes(s, dataset_id) == [
            StoredVote(0, "s0", "ann", 0, None, "votes.csv"),
            StoredVote(3, "s3", "ann", 1, T0, "votes.csv"),
            StoredVote(3, "s3", "bob", 2, None, "votes.csv"),
            StoredVote(3, "s3", "cid", 1, T0, "votes.csv"),
        ]
        assert votes_of_item(s, dataset_id, 3) == [("ann", 1), ("bob", 2), ("cid", 1)]
        assert votes_of_item(s, dataset_id, 4) == []
        counts = dataset_vote_counts(s, dataset_id, len(CANDIDATES), len(LABELS))
        assert counts[3].tolist() == [0, 2, 1, 0] and counts[0].tolist() == [1, 0, 0, 0] and counts.sum() == 4
        assert dataset_has_votes(s, dataset_id)
    other = import_dataset(Session, _checked("plain", votes=None)).dataset_id
    with Session() as s:
        assert not dataset_has_votes(s, other) and dataset_votes(s, other) == []


def test_a_failed_import_leaves_no_vote(store_url):
    Session = open_store(store_url)
    before = row_counts(Session)

    def crash(done, total):
        if done == 2:
            raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError, match="disk on fire"):
        import_dataset(Session, _checked(), batch_rows=2, on_batch=crash)
    assert row_counts(Session) == before
    with Session() as s:
        assert s.execute(text("SELECT count(*) FROM votes")).scalar_one() == 0


@pytest.mark.parametrize(
    ("votes", "match"),
    [
        (VoteSpec(np.array([5]), ["a"], np.array([0]), [None], "v"), r"vote 1 is for position 5, not in \[0, 5\)"),
        (VoteSpec(np.array([0]), ["a"], np.array([4]), [None], "v"), r"vote 1 has label 4, not in \[0, 4\)"),
        (VoteSpec(np.array([0]), [" "], np.array([0]), [None], "v"), "annotator of vote 1 is empty"),
        (VoteSpec(np.array([0, 1]), ["a"], np.array([0, 0]), [None, None], "v"), "one entry per vote"),
        (
            VoteSpec(np.array([0]), ["a"], np.array([0]), [datetime(2026, 1, 1)], "v"),
            "timezone-aware",
        ),
    ],
)
def test_bad_votes_are_refused_before_anything_is_written(votes, match):
    with pytest.raises(InvalidRecord, match=match):
        _checked(votes=votes)


def test_0015_adds_votes_to_a_0014_store_with_data(store_url):
    """A store at 0014 holding a dataset, a session and an event upgrades: every row is kept,
    the dataset has no votes, the table takes votes; down to 0014 and up again keeps the rows."""
    from sqlalchemy.orm import sessionmaker

    from app.store import event_log

    upgrade_database(store_url, "0014")
    engine = make_engine(store_url)
    now = datetime(2026, 11, 25, tzinfo=UTC)
    try:
        with engine.begin() as conn:
            assert "votes" not in inspect(conn).get_table_names()
            _write_rows_of_0001(conn, now)
            conn.execute(
                text(
                    "INSERT INTO answer_events (session_id, instance_id, annotator_id, kind, label, created_at)"
                    " VALUES (1, 2, 1, 'answer', 1, :now)"
                ),
                {"now": now},
            )
        upgrade_database(store_url)
        Session = sessionmaker(bind=engine, expire_on_commit=False)
        with Session() as s:
            before = event_log(s, 1)
            assert not dataset_has_votes(s, 1)
        with engine.connect() as conn:
            assert "ix_votes_instance_id" in {i["name"] for i in inspect(conn).get_indexes("votes")}
        with engine.begin() as conn:
            conn.execute(
                text("INSERT INTO votes (instance_id, annotator, label, source) VALUES (2, 'crowd-7', 1, 'old.csv')")
            )
        with Session() as s:
            assert votes_of_item(s, 1, 1) == [("crowd-7", 1)]
        downgrade_database(store_url, "0014")
        with engine.connect() as conn:
            assert "votes" not in inspect(conn).get_table_names()
            assert conn.exec_driver_sql("SELECT count(*) FROM instances").scalar() == len(CANDIDATES)
        upgrade_database(store_url)
        with Session() as s:
            assert event_log(s, 1) == before
    finally:
        engine.dispose()
