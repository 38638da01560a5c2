"""A session's working-state snapshot (issue 32), on SQLite and PostgreSQL.

* brought up to date from the events after it, it equals a derivation from the whole log
  (hypothesis over random logs with answers, other labels, none-of-these, skips and undos
  by two annotators, for each kind of ranker);
* so are DST-PLL's decisions kept with it (what freezing a lot reads): the margins equal a
  fit's on the current sets, and the labels too wherever they are not drawn among ties;
* a corrupt, foreign, mixed or ahead-of-the-log snapshot is rebuilt, never used;
* two processes answering alternately through the installed ``winnow`` see each other's
  answers, and the second reads the first's snapshot instead of scoring afresh.
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select, update

from app.service import Workbench, import_file
from app.service.model_view import ModelDecisions
from app.service.working_state import SNAPSHOT_FORMAT, open_ranking
from app.store import (
    InvalidRecord,
    RecordNotFound,
    SessionSnapshotPart,
    create_dataset,
    create_labelling_session,
    load_session_snapshot,
    open_store,
    write_transaction,
)
from engine import suspect_scores
from engine.dst import DstPllClassifier
from engine.exceptions import InvalidInput
from tests.ui.conftest import small_csv_bytes

N_ITEMS, N_LABELS, K = 30, 4, 4
_names = itertools.count()


def _session(store, criterion: str, seed: int) -> int:
    """A fresh dataset (random features and partial sets) and a session on it."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N_ITEMS, 3))
    Y = rng.random((N_ITEMS, N_LABELS)) < 0.45
    Y[np.arange(N_ITEMS), rng.integers(N_LABELS, size=N_ITEMS)] = True
    name = f"d{next(_names)}"

    def work(s):
        ds = create_dataset(
            s,
            name=name,
            X=X,
            candidates=Y,
            label_names=[f"L{m}" for m in range(N_LABELS)],
            external_ids=[f"i{i}" for i in range(N_ITEMS)],
        )
        return create_labelling_session(s, dataset_id=ds.id, name=name, k=K, criterion=criterion).id

    return write_transaction(store, work)


def _assert_same_working_state(bench: Workbench, fresh: Workbench) -> None:
    """``bench`` (from a snapshot) ranks exactly as ``fresh`` (derived from the whole log)."""
    np.testing.assert_array_equal(bench.state.candidates, fresh.state.candidates)
    np.testing.assert_array_equal(bench.scores, fresh.scores)
    for got, want in zip(bench.label_sets(), fresh.label_sets(), strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(bench.ranked_queue(), fresh.ranked_queue())
    np.testing.assert_array_equal(bench.queue(), fresh.queue())
    assert bench.summary() == fresh.summary()
    # The suspect scores kept with the snapshot against a full pass over the current sets.
    from app.service import workbench_suspects

    full = suspect_scores(bench.graph.idx, bench.graph.w, np.asarray(bench.state.candidates))
    np.testing.assert_allclose(workbench_suspects(bench).scores, full, rtol=0, atol=1e-12)
    _assert_same_model_decisions(bench)


def _assert_same_model_decisions(bench: Workbench) -> None:
    """DST-PLL's decisions ``bench`` would freeze a lot from, against a fit on the current sets."""
    st = bench.state
    labels, margins = bench._model.decisions(lambda: st.X, st.candidates, bench.config.k)
    fit = DstPllClassifier(n_neighbors=bench.config.k, random_state=0).fit(
        st.X, np.array(st.candidates), neighbors=bench.graph.idx
    )
    np.testing.assert_array_equal(margins, fit.disambiguate_margin_)
    decided = ~fit.disambiguate_guess_
    np.testing.assert_array_equal(labels[decided], fit.disambiguate_[decided])
    # A guess is never a lot's: its margin is not positive.
    assert (fit.disambiguate_margin_[~decided] <= 0).all()


def _play(bench: Workbench, ops: list[tuple[str, int, int, str]]) -> None:
    """Record ``ops`` (kind, item, label choice, annotator); the store refuses the invalid ones."""
    for kind, position, choice, annotator in ops:
        candidates = np.flatnonzero(bench.state.candidates[position])
        if kind == "answer":
            label: int | None = int(candidates[choice % candidates.size])
        elif kind == "other_label":
            label = choice % N_LABELS
        else:
            label = None
        try:
            bench.record(annotator, kind, position=None if kind == "undo" else position, label=label)
        except (InvalidInput, InvalidRecord, RecordNotFound):
            pass


op = st.tuples(
    st.sampled_from(["answer", "answer", "other_label", "none_of_these", "skip", "undo"]),
    st.integers(0, N_ITEMS - 1),
    st.integers(0, N_LABELS - 1),
    st.sampled_from(["ann", "bob"]),
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    criterion=st.sampled_from(["decision_change", "apl", "participation"]),
    seed=st.integers(0, 2**16),
    first=st.lists(op, max_size=12),
    second=st.lists(op, max_size=12),
)
def test_a_snapshot_brought_up_to_date_equals_a_derivation_from_the_whole_log(store, criterion, seed, first, second):
    session_id = _session(store, criterion, seed)
    writer = Workbench.open(store, session_id)
    assert writer.opened.source == "built" and writer.opened.saved
    _play(writer, first)
    # Another process: the snapshot of the empty log, brought up to date with the first ops.
    later = Workbench.open(store, session_id)
    assert later.opened.source == "snapshot"
    _assert_same_working_state(later, Workbench.open(store, session_id, use_snapshot=False))
    _play(later, second)
    if later.reads_votes:
        # Kept up to date in process as well (a baseline's scores stay those it was built with).
        _assert_same_working_state(later, Workbench.open(store, session_id, use_snapshot=False))
    again = Workbench.open(store, session_id)
    assert again.opened.source == "snapshot"
    _assert_same_working_state(again, Workbench.open(store, session_id, use_snapshot=False))


def test_a_snapshot_resaved_past_the_threshold_is_read_back_whole(store, monkeypatch):
    from app.service import working_state

    session_id = _session(store, "decision_change", 7)
    bench = Workbench.open(store, session_id)
    _play(bench, [("answer", p, 0, "ann") for p in range(6)])
    monkeypatch.setattr(working_state, "RESAVE_AFTER", 2)
    with store() as s:
        before = load_session_snapshot(s, session_id)
    resaved = Workbench.open(store, session_id)
    assert resaved.opened.source == "snapshot" and resaved.opened.saved and resaved.opened.applied > 2
    with store() as s:
        after = load_session_snapshot(s, session_id)
    assert before is not None and after is not None
    assert after.header.last_event_id > before.header.last_event_id
    # The new snapshot holds the sets as they are now: nothing left to apply.
    monkeypatch.setattr(working_state, "RESAVE_AFTER", 1000)
    reread = Workbench.open(store, session_id)
    assert reread.opened.source == "snapshot" and reread.opened.applied == 0
    _assert_same_working_state(reread, Workbench.open(store, session_id, use_snapshot=False))


def test_a_large_array_is_stored_in_pieces_and_read_back_whole(store, monkeypatch):
    # Past PIECE_BYTES an array is written as slices of its first axis, so that a writer or a
    # reader holds one piece's bytes besides the arrays (at 1M items a part was 160 MB).
    from app.store import snapshots

    monkeypatch.setattr(snapshots, "PIECE_BYTES", 200)
    session_id = _session(store, "decision_change", 8)
    bench = Workbench.open(store, session_id)
    with store() as s:
        names = {
            str(n): len(d)
            for n, d in s.execute(
                select(SessionSnapshotPart.name, SessionSnapshotPart.data).where(
                    SessionSnapshotPart.session_id == session_id
                )
            )
        }
        stored = load_session_snapshot(s, session_id)
    votes = sorted(n for n in names if n.startswith("ranker.votes#"))
    assert votes == [f"ranker.votes#{i:04d}" for i in range(len(votes))] and len(votes) > 1
    assert "ranker.votes" not in names
    assert max(names[n] for n in votes) <= 200 + 128  # a piece's data and its .npy header
    assert stored is not None
    for name, array in bench.ranking.state_arrays().items():
        np.testing.assert_array_equal(stored.arrays[name], array)
        assert stored.arrays[name].flags.writeable
    reopened = Workbench.open(store, session_id)
    assert reopened.opened.source == "snapshot"
    _assert_same_working_state(reopened, Workbench.open(store, session_id, use_snapshot=False))

    # A piece missing, or one of another kind, is no snapshot.
    def drop_a_piece(s):
        s.execute(
            SessionSnapshotPart.__table__.delete().where(
                SessionSnapshotPart.session_id == session_id, SessionSnapshotPart.name == votes[1]
            )
        )

    write_transaction(store, drop_a_piece)
    with store() as s:
        assert load_session_snapshot(s, session_id) is None


def _flip_a_byte(s, session_id):
    part = s.scalars(select(SessionSnapshotPart).where(SessionSnapshotPart.session_id == session_id)).first()
    data = bytearray(part.data)
    data[-1] ^= 0xFF
    part.data = bytes(data)


def _other_format(s, session_id):
    s.execute(
        update(SessionSnapshotPart)
        .where(SessionSnapshotPart.session_id == session_id)
        .values(format_version=SNAPSHOT_FORMAT + 1)
    )


def _ahead_of_the_log(s, session_id):
    s.execute(
        update(SessionSnapshotPart).where(SessionSnapshotPart.session_id == session_id).values(last_event_id=10**9)
    )


def _two_writes_mixed(s, session_id):
    part = s.scalars(select(SessionSnapshotPart).where(SessionSnapshotPart.session_id == session_id)).first()
    part.token = "0" * 32


def _wrong_shape(s, session_id):
    from app.store.snapshots import encode_array

    part = s.scalars(
        select(SessionSnapshotPart).where(
            SessionSnapshotPart.session_id == session_id, SessionSnapshotPart.name == "ranker.scores"
        )
    ).one()
    import hashlib

    part.data = encode_array(np.zeros(N_ITEMS + 1))
    part.digest = hashlib.sha256(part.data).hexdigest()


def _model_labels_out_of_range(s, session_id):
    """A part whose bytes match its digest but whose labels are no label of the session."""
    import hashlib

    from app.store.snapshots import encode_array

    part = s.scalars(
        select(SessionSnapshotPart).where(
            SessionSnapshotPart.session_id == session_id, SessionSnapshotPart.name == "model.labels"
        )
    ).one()
    part.data = encode_array(np.full(N_ITEMS, N_LABELS, dtype=np.int64))
    part.digest = hashlib.sha256(part.data).hexdigest()


def _reopened_after(store, k: int, events, spoil) -> tuple[int, Workbench]:
    """A session played through ``events``, its snapshot spoiled by ``spoil``, opened again:
    the working state must equal one derived from the whole log, with no snapshot."""
    session_id = _session(store, "decision_change", k)
    _play(Workbench.open(store, session_id), events)
    write_transaction(store, lambda s: spoil(s, session_id))
    reopened = Workbench.open(store, session_id)
    _assert_same_working_state(reopened, Workbench.open(store, session_id, use_snapshot=False))
    return session_id, reopened


def test_refused_model_decisions_are_decided_again_and_saved(store):
    events = [("answer", 0, 0, "ann"), ("answer", 5, 1, "bob")]
    session_id, reopened = _reopened_after(store, 4, events, _model_labels_out_of_range)
    # The ranking is the snapshot's; the decisions it refused are made afresh and saved.
    assert reopened.opened.source == "snapshot" and reopened.opened.saved
    with store() as s:
        stored = load_session_snapshot(s, session_id)
    assert stored is not None and (stored.arrays["model.labels"] < N_LABELS).all()


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), n_changed=st.integers(0, 12))
def test_model_decisions_brought_up_to_date_equal_decisions_made_afresh(seed, n_changed):
    rng = np.random.default_rng(seed)
    n, m, k = 40, 5, 4
    Y = rng.random((n, m)) < 0.4
    Y[np.arange(n), rng.integers(m, size=n)] = True
    idx = np.array([rng.choice(np.delete(np.arange(n), i), size=k, replace=False) for i in range(n)])
    then = ModelDecisions.decide(Y, idx)
    now_sets = Y.copy()
    for i in rng.choice(n, size=n_changed, replace=False):
        now_sets[i] = False
        now_sets[i, rng.integers(m)] = True  # an answer leaves one label
    updated = then.brought_to(now_sets, idx)
    fresh = ModelDecisions.decide(now_sets, idx)
    np.testing.assert_array_equal(updated.candidates, now_sets)
    np.testing.assert_array_equal(updated.margins, fresh.margins)
    fit = DstPllClassifier(n_neighbors=k, random_state=0).fit(np.zeros((n, 1)), now_sets, neighbors=idx)
    np.testing.assert_array_equal(fresh.labels, fit.disambiguate_)
    decided = ~fit.disambiguate_guess_
    np.testing.assert_array_equal(updated.labels[decided], fresh.labels[decided])
    # The decisions it was brought from are left as they were.
    np.testing.assert_array_equal(then.candidates, Y)


@pytest.mark.parametrize(
    "spoil", [_flip_a_byte, _other_format, _ahead_of_the_log, _two_writes_mixed, _wrong_shape], ids=lambda f: f.__name__
)
def test_a_corrupt_or_stale_snapshot_is_rebuilt_not_used(store, spoil):
    session_id, rebuilt = _reopened_after(store, 3, [("answer", 0, 0, "ann"), ("skip", 1, 0, "ann")], spoil)
    assert rebuilt.opened.source == "built" and rebuilt.opened.saved
    # The rebuilt snapshot is whole again.
    assert Workbench.open(store, session_id).opened.source == "snapshot"


def test_a_foreign_snapshot_is_rebuilt_not_used(store):
    """The parts of another session's snapshot (another dataset, another criterion) copied
    under this session's id do not match its identity."""
    mine = _session(store, "decision_change", 1)
    theirs = _session(store, "apl", 2)
    Workbench.open(store, mine)
    Workbench.open(store, theirs)

    def swap(s):
        s.execute(SessionSnapshotPart.__table__.delete().where(SessionSnapshotPart.session_id == mine))
        for part in s.scalars(select(SessionSnapshotPart).where(SessionSnapshotPart.session_id == theirs)).all():
            s.add(
                SessionSnapshotPart(
                    session_id=mine,
                    name=part.name,
                    token=part.token,
                    format_version=part.format_version,
                    identity=part.identity,
                    last_event_id=part.last_event_id,
                    digest=part.digest,
                    data=part.data,
                )
            )

    write_transaction(store, swap)
    rebuilt = Workbench.open(store, mine)
    assert rebuilt.opened.source == "built"
    _assert_same_working_state(rebuilt, Workbench.open(store, mine, use_snapshot=False))


def test_without_snapshots_nothing_is_read_or_written(store):
    session_id = _session(store, "decision_change", 5)
    bench = Workbench.open(store, session_id, use_snapshot=False)
    assert bench.opened.source == "built" and not bench.opened.saved
    with store() as s:
        assert load_session_snapshot(s, session_id) is None
    opened = open_ranking(store, bench.state, bench.graph, 0, use_snapshot=False)
    assert opened.source == "built"


# ------------------------------------------------------------------ two processes, the CLI

WINNOW = shutil.which("winnow") or str(Path(sys.executable).with_name("winnow"))


def _winnow(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([WINNOW, *args], capture_output=True, text=True, timeout=300, check=False)


def test_two_processes_answering_alternately_see_each_others_answers(tmp_path, store_url):
    csv = tmp_path / "small.csv"
    csv.write_bytes(small_csv_bytes())
    Session = open_store(store_url)
    dataset_id, _ = import_file(Session, csv, name="small", min_rows=6)
    write_transaction(Session, lambda s: create_labelling_session(s, dataset_id=dataset_id, name="s", k=5))
    with Session() as s:
        assert s.scalars(select(SessionSnapshotPart)).first() is None

    def status() -> dict:
        done = _winnow("session", "status", "s", "--db", store_url, "--json", "--top", "3")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def tokens() -> set[str]:
        with Session() as s:
            return set(s.scalars(select(SessionSnapshotPart.token)).all())

    first = status()  # scores afresh and saves the snapshot
    saved = tokens()
    assert len(saved) == 1
    for turn, annotator in enumerate(["ann", "bob"]):
        item = first["next"][0]
        label = item["candidates"][0]
        done = _winnow("answer", "s", item["id"], label, "--annotator", annotator, "--db", store_url)
        assert done.returncode == 0, done.stderr
        after = status()
        # The other process's answer is seen: one more event and answer, the item no longer next.
        assert after["events"] == first["events"] + 1
        assert after["answered"] == first["answered"] + 1
        assert item["id"] not in [row["id"] for row in after["next"]]
        # ... from the saved snapshot, brought up to date (not saved again: nothing rebuilt).
        assert tokens() == saved, turn
        first = after
