"""The Progress page's replay is kept and extended (issue 21): after every round of new events
on a seeded random log, :func:`app.service.session_progress` equals the full replay of the log
from the start (the replay as it was before, kept here as the oracle), and it replays only the
new events."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

import app.service.progress as progress
from app.service import Workbench, replay_progress, session_progress
from app.store import (
    EventRecord,
    InvalidRecord,
    derive_item,
    list_sessions,
    open_store,
    record_event,
    session_events,
    write_transaction,
)
from engine.dst import transductive_decisions
from engine.neighbors import ReverseIndex, knn_graph
from engine.winners import label_sets, open_targets


def replay_from_scratch(
    *,
    X: np.ndarray,
    original: np.ndarray,
    targets: np.ndarray,
    idx: np.ndarray,
    w: np.ndarray,
    k: int,
    events: Sequence[EventRecord],
    true_labels: np.ndarray | None,
    dst_idx: np.ndarray | None = None,
) -> pd.DataFrame:
    """The replay as it was before issue 21 (one pass over the whole log), the oracle."""
    n = original.shape[0]
    Y = np.array(original, dtype=bool)
    votes = ReverseIndex(idx, n)
    if dst_idx is None and targets.size == n and np.array_equal(targets, np.arange(n)) and w.shape[1] == k:
        dst_idx = idx
    elif dst_idx is None:
        dst_idx, _ = knn_graph(X, k=k, weights="uniform", exclude_self=True)
    dst = ReverseIndex(dst_idx, n)

    is_open = open_targets(*label_sets(idx, w, Y))
    labels, accepted, _ = transductive_decisions(Y, dst_idx)
    answered = np.zeros(n, dtype=bool)
    set_aside = np.zeros(n, dtype=bool)  # conflicts and none-of-these
    known = None if true_labels is None else np.asarray(true_labels) >= 0
    if known is not None and not known.any():
        known = None

    per_item: dict[int, list[EventRecord]] = {}
    records: list[dict[str, object]] = []

    def measure(step: int, event: EventRecord | None) -> None:
        open_items = (Y.sum(axis=1) > 1) & ~set_aside
        row: dict[str, object] = {
            "step": step,
            "event_id": None if event is None else event.id,
            "time": None if event is None else event.created_at,
            "kind": None if event is None else event.kind,
            "answered": int(answered.sum()),
            "open": int(open_items.sum()),
            "open_targets": int(is_open.sum()),
            "rejects": int((open_items & ~accepted).sum()),
            "expert_or_given": int(((Y.sum(axis=1) == 1) & ~set_aside).sum()),
        }
        if known is not None and true_labels is not None:  # the second test is for the type checker
            right = labels[known] == true_labels[known]
            row["dst_accuracy"] = float(right.mean())
            kept = accepted[known]
            row["accepted_accuracy"] = float(right[kept].mean()) if kept.any() else np.nan
        records.append(row)

    measure(0, None)
    for step, event in enumerate(events, start=1):
        item = event.position
        per_item.setdefault(item, []).append(event)
        derived = derive_item(per_item[item], original[item])
        answered[item] = derived.answered_by is not None
        set_aside[item] = derived.none_of_these or derived.conflict is not None
        if not np.array_equal(derived.candidates, Y[item]):
            Y[item] = derived.candidates
            rows = votes.rows_holding(item)
            if rows.size:
                is_open[rows] = open_targets(*label_sets(idx[rows], w[rows], Y))
            touched = np.union1d(dst.rows_holding(item), [item])
            labels[touched], accepted[touched], _ = transductive_decisions(Y, dst_idx, touched)
        measure(step, event)
    return pd.DataFrame.from_records(records)


def full_replay(bench: Workbench, n_events: int | None = None) -> pd.DataFrame:
    with bench.session_factory() as s:
        events = session_events(s, bench.session_id)
    return replay_from_scratch(
        X=bench.state.X,
        original=np.asarray(bench.state.original_candidates),
        targets=bench.targets,
        idx=bench.idx,
        w=bench.w,
        k=bench.config.k,
        events=events if n_events is None else events[:n_events],
        true_labels=np.asarray(bench.state.true_labels),
        dst_idx=bench.graph.idx,
    )


def random_round(Session, session_id: int, original: np.ndarray, rng: np.random.Generator, n: int) -> None:
    """``n`` random events by two annotators: answers (some outside the set), skips,
    none-of-these, resolves and undos; refused ones (nothing to undo) are left out."""
    n_labels = original.shape[1]
    for _ in range(n):
        who = str(rng.choice(["alice", "bob"]))
        kind = str(
            rng.choice(["answer", "answer", "answer", "other_label", "skip", "none_of_these", "resolve", "undo"])
        )
        position = int(rng.integers(12))  # a few items, so that answers meet and conflict
        inside = np.flatnonzero(original[position])
        outside = np.flatnonzero(~original[position])
        label = None
        if kind == "answer":
            label = int(rng.choice(inside))
        elif kind == "other_label":
            if not outside.size:
                continue
            label = int(rng.choice(outside))
        elif kind == "resolve":
            label = int(rng.integers(n_labels))
        try:
            write_transaction(
                Session,
                lambda s, who=who, kind=kind, position=position, label=label: record_event(
                    s,
                    session_id=session_id,
                    annotator=who,
                    kind=kind,
                    instance_position=None if kind == "undo" else position,
                    label=label,
                ),
            )
        except InvalidRecord:
            pass


def test_the_kept_replay_equals_the_full_replay_after_every_round(small_db, monkeypatch):
    Session = open_store(small_db)
    with Session() as s:
        session_id = list_sessions(s)[0].id
    bench = Workbench.open(Session, session_id)
    made = []

    class Counting(progress.ProgressReplay):
        def __init__(self, **kwargs):
            made.append(kwargs["k"])
            super().__init__(**kwargs)

    monkeypatch.setattr(progress, "ProgressReplay", Counting)
    rng = np.random.default_rng(7)
    original = np.asarray(bench.state.original_candidates)
    pd.testing.assert_frame_equal(session_progress(bench, actor=None), full_replay(bench))
    for n in (5, 1, 12, 0, 9):
        random_round(Session, session_id, original, rng, n)
        history = session_progress(bench, actor=None)
        pd.testing.assert_frame_equal(history, full_replay(bench))
    assert len(made) == 1  # every round extended the replay made at the first visit
    n_events = len(history) - 1
    assert n_events >= 20
    # An earlier point of the history is a prefix of the kept one.
    pd.testing.assert_frame_equal(session_progress(bench, 10, actor=None), full_replay(bench, 10))

    # Another weighting changes the inputs: the replay is made again, and still agrees.
    with Session.begin() as s:
        list_sessions(s)[0].weighting = "distance"
    reweighted = Workbench.open(Session, session_id)
    assert not np.array_equal(reweighted.w, bench.w)
    pd.testing.assert_frame_equal(session_progress(reweighted, actor=None), full_replay(reweighted))
    assert made == [bench.config.k, reweighted.config.k]
    # The one-pass function is the kept replay fed everything at once.
    with Session() as s:
        events = session_events(s, session_id)
    once = replay_progress(
        X=reweighted.state.X,
        original=original,
        targets=reweighted.targets,
        idx=reweighted.idx,
        w=reweighted.w,
        k=reweighted.config.k,
        events=events,
        true_labels=np.asarray(reweighted.state.true_labels),
        dst_idx=reweighted.graph.idx,
    )
    pd.testing.assert_frame_equal(once, full_replay(reweighted))


def test_an_event_committed_behind_the_kept_ones_makes_the_replay_again(small_db, monkeypatch):
    """When the store holds more events up to the last one replayed than the replay saw (on
    PostgreSQL, an event whose transaction committed after a later one's), the replay is made
    again from the start, and still equals the full replay."""
    Session = open_store(small_db)
    with Session() as s:
        session_id = list_sessions(s)[0].id
    bench = Workbench.open(Session, session_id)
    original = np.asarray(bench.state.original_candidates)
    random_round(Session, session_id, original, np.random.default_rng(3), 6)
    session_progress(bench, actor=None)
    random_round(Session, session_id, original, np.random.default_rng(4), 3)
    made = []

    class Counting(progress.ProgressReplay):
        def __init__(self, **kwargs):
            made.append(kwargs["k"])
            super().__init__(**kwargs)

    monkeypatch.setattr(progress, "ProgressReplay", Counting)
    # The count the store reports up to the last replayed event: one more than replayed.
    counted = progress.count_events_up_to
    monkeypatch.setattr(progress, "count_events_up_to", lambda s, sid, last: counted(s, sid, last) + 1)
    pd.testing.assert_frame_equal(session_progress(bench, actor=None), full_replay(bench))
    assert made == [bench.config.k]
