"""Suspect items through the service layer: a generated session where some sets miss the truth."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.service import (
    StaleAnswer,
    Workbench,
    change_label_settings,
    check_still_open,
    session_table,
    workbench_most_suspect,
    workbench_suspects,
    workbench_suspicion,
)
from app.service import suspects as suspects_module
from app.service.suspects import SUSPECT_EVERY, interleave_suspects, suspects_to_serve
from app.store import create_dataset, create_labelling_session, open_store, write_transaction
from engine import (
    benjamini_hochberg,
    conformal_p_values,
    feature_evidence,
    open_targets,
    suspect_scores,
    suspicion_scores,
)

LABELS = ["ant", "bee", "cat"]
N_PER_CLASS = 150
#: Items whose set misses the truth: eight per class, the two other labels. The test controls
#: the false-discovery rate over all 180 items against about 115 correct singletons, so it
#: flags only a group of clear outliers: with conformal p-values no smaller than 1/(n + 1), k
#: flags among m tested items need 1/(n + 1) <= 0.1 k / m. (A given single label that misses
#: the truth is itself a calibration set and raises every p-value: none here.)
MISSES = {
    int(p): [m for m in range(3) if m != p // N_PER_CLASS]
    for p in [c * N_PER_CLASS + q for c in range(3) for q in range(3, N_PER_CLASS, 19)]
}


def synthetic() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Three separated blobs; a third of the sets get a wrong label besides the true one, the
    rest are the true label alone; the sets of MISSES hold only wrong labels."""
    rng = np.random.default_rng(5)
    truth = np.repeat(np.arange(3), N_PER_CLASS)
    X = np.array([[0.0, 0.0], [8.0, 0.0], [0.0, 8.0]])[truth] + rng.normal(scale=0.7, size=(truth.size, 2))
    Y = np.zeros((truth.size, 3), dtype=bool)
    Y[np.arange(truth.size), truth] = True
    partial = np.flatnonzero(rng.random(truth.size) < 0.33)
    Y[partial, (truth[partial] + 1) % 3] = True
    for position, labels in MISSES.items():
        Y[position] = False
        Y[position, labels] = True
    return X, Y, truth


def open_bench(tmp_path, *, Y=None) -> Workbench:
    X, Y0, truth = synthetic()
    Y = Y0 if Y is None else Y
    session_factory = open_store(tmp_path / "w.db")

    def work(s):
        ds = create_dataset(
            s,
            name="blobs",
            X=X,
            candidates=Y,
            label_names=LABELS,
            external_ids=[f"i{p:03d}" for p in range(len(Y))],
        )  # no true labels: the store refuses one outside its set, which is the point here
        return create_labelling_session(s, dataset_id=ds.id, name="s", k=6).id

    return Workbench.open(session_factory, write_transaction(session_factory, work))


@pytest.fixture
def bench(tmp_path) -> Workbench:
    return open_bench(tmp_path)


TRUTH = synthetic()[2]


def test_the_flagged_items_include_every_set_that_misses_the_truth(bench):
    found = workbench_suspects(bench)
    truth = TRUTH
    flagged = {item.position for item in found.items}
    # No false alarm here; most misses found (those that score no higher than some correct
    # singletons next to other misses stay unflagged: their p-values are not small enough).
    assert flagged <= set(MISSES) and len(flagged) >= 0.75 * len(MISSES)
    assert {3, 22, 153} <= flagged
    assert np.array_equal(np.flatnonzero(found.flags), np.array(sorted(flagged)))
    scores = [item.score for item in found.items]
    assert scores == sorted(scores, reverse=True)
    for position in flagged:
        item = found.item(position)
        assert item is not None
        best = item.suggestions[0]
        assert best.name == LABELS[truth[position]] and best.label == truth[position]
        assert best.n_neighbours == 6 and best.holders >= 5
        assert item.text().startswith(f"Suspect: the neighbours suggest {best.name} ({best.holders} of 6)")
        assert set(item.candidates) == {LABELS[m] for m in MISSES[position]}
    assert found.calibrated_on == "single given labels and expert answers"
    assert found.n_tested == len(truth) and found.fdr == 0.1
    assert "on average at most one in 10 is a false alarm" in found.summary()


def test_an_answer_settles_a_suspect_item_and_the_record_check_goes_stale(bench):
    position = 3
    truth = int(TRUTH[position])
    check_still_open(bench.state, position, answered=False)  # not settled: no error
    found_before = workbench_suspects(bench).scores[position]
    with pytest.raises(StaleAnswer, match="answered that item"):
        check_still_open(bench.state, position, answered=True)  # this annotator answered it
    bench.record("ann", "other_label", position=position, label=truth)
    after = workbench_suspects(bench)
    assert after.item(position) is None and not after.flags[position]
    # Only the items the answer can change were scored again: the same scores as a full pass.
    full = suspect_scores(bench.graph.idx, bench.graph.w, np.asarray(bench.state.candidates))
    np.testing.assert_array_equal(after.scores, full)
    assert after.scores[position] < found_before  # its neighbours (mostly ants) back its new set
    with pytest.raises(StaleAnswer, match="answered that item"):
        check_still_open(bench.state, position, answered=False)
    # "none of these" does not settle: the item stays suspect (the suggestions say where the truth is).
    bench.record("ann", "none_of_these", position=22)
    assert workbench_suspects(bench).item(22) is not None


def test_the_labelled_export_gets_suspect_and_suspicion_columns_and_keeps_its_columns(bench):
    table = session_table(bench, "labelled", actor=None)
    columns = list(table.columns)
    assert columns[:6] == ["id", "candidates", "n_candidates", "label", "label_source", "model_margin"]
    assert columns[6:8] == ["suspect", "suspicion"] and table["suspect"].dtype == bool
    assert {"resolved", "none_of_these", "answered_by", "answered_at"} <= set(columns)
    flags, suspicion = workbench_suspects(bench).flags, workbench_suspicion(bench)
    ids = list(bench.state.external_ids)
    assert table["suspect"].tolist() == [bool(flags[ids.index(i)]) for i in table["id"]]
    assert table["suspicion"].tolist() == [float(suspicion[ids.index(i)]) for i in table["id"]]
    assert table.loc[table["id"] == "i153", "suspect"].item()
    # The planted misses hold the top of the column: sorting by it is the most-suspect list.
    top = set(table.sort_values("suspicion", ascending=False, kind="stable")["id"][: len(MISSES)])
    assert len(top & {f"i{p:03d}" for p in MISSES}) >= 0.9 * len(MISSES)


@pytest.mark.parametrize("fmt", ["csv", "json", "jsonl", "parquet"])
def test_every_export_format_carries_the_suspicion_and_the_metadata_says_what_it_is(bench, tmp_path, fmt):
    import json

    import pandas as pd
    import pyarrow.parquet as pq

    from app.io import write_table

    table = session_table(bench, "labelled", actor=None)
    path = write_table(table, tmp_path / f"labelled.{fmt}")
    if fmt == "csv":
        written = pd.read_csv(path)
    elif fmt == "jsonl":
        written = pd.DataFrame([json.loads(line) for line in path.read_text().splitlines()])
    elif fmt == "json":
        payload = json.loads(path.read_text())
        written, metadata = pd.DataFrame(payload["rows"]), payload["metadata"]
    else:
        written = pd.read_parquet(path)
        metadata = json.loads(pq.read_schema(path).metadata[b"winnow"])
    np.testing.assert_allclose(written["suspicion"].to_numpy(dtype=float), table["suspicion"].to_numpy(), rtol=1e-15)
    assert written["suspect"].astype(bool).tolist() == table["suspect"].tolist()
    if fmt in ("json", "parquet"):  # the formats with metadata
        assert "most suspect first" in metadata["suspicion_column"]
        assert "Benjamini-Hochberg" in metadata["suspect_column"] and metadata["fdr"] == 0.1
        assert "target_error" in metadata  # the label statement's notes are kept


def test_the_most_suspect_list_ranks_every_item_not_settled_from_the_first_minute(bench):
    """No answer yet: every item is listed, by suspicion; the planted misses come first, and
    the flagged ones say so."""
    ranked = workbench_most_suspect(bench)
    suspicion = workbench_suspicion(bench)
    assert len(ranked) == len(TRUTH)
    assert np.all(np.diff(suspicion[ranked.positions]) <= 0)
    assert set(ranked.positions[: len(MISSES)].tolist()) == set(MISSES)
    flags = workbench_suspects(bench).flags
    for item in ranked[:30]:
        assert item.suspicion == suspicion[item.position] and item.flagged == flags[item.position]
        assert item.text().startswith("Suspect:" if item.flagged else "The neighbours suggest")
    quiet = [item for item in ranked if not item.suggestions]
    assert quiet and all(item.text() == "The neighbours hold no label outside the set" for item in quiet)
    # An answer settles its item: it leaves the list, and the record check goes stale.
    bench.record("ann", "other_label", position=3, label=int(TRUTH[3]))
    after = workbench_most_suspect(bench)
    assert 3 not in after.positions.tolist() and len(after) == len(TRUTH) - 1
    with pytest.raises(StaleAnswer, match="answered that item"):
        check_still_open(bench.state, 3, answered=False)
    check_still_open(bench.state, 22, answered=False)  # not settled: no error
    with pytest.raises(StaleAnswer, match="answered that item"):
        check_still_open(bench.state, 22, answered=True)


def suspicion_by_definition(bench: Workbench) -> np.ndarray:
    """The suspicion of the workbench's state from its definition alone: the models of the
    features fitted to the sets as the first evidence_checkpoint events left them (derived
    afresh from that part of the log), the neighbours on the current sets."""
    from app.store import derive_state, session_events

    state = bench.state
    with bench.session_factory() as s:
        events = sorted(session_events(s, bench.session_id), key=lambda e: e.id)[: state.n_events]
    counted = suspects_module.evidence_checkpoint(state.n_events, state.n_instances)
    fitted_to = derive_state(events[:counted], state.original_candidates).candidates
    evidence = feature_evidence(state.X, bench.graph.idx, bench.graph.w, fitted_to)
    return suspicion_scores(bench.graph.idx, bench.graph.w, np.asarray(state.candidates), features=evidence)


def test_the_models_of_the_features_are_fitted_again_at_checkpoints_of_the_event_log(bench, monkeypatch):
    """The models of the features are fitted to the sets after the first multiple of
    ceil(EVIDENCE_REFIT_SHARE · n) events: kept between checkpoints (the neighbours' part
    patched), fitted again at the next; either way the bits of the definition."""
    monkeypatch.setattr(suspects_module, "EVIDENCE_REFIT_SHARE", 3 / len(TRUTH))
    assert suspects_module.evidence_checkpoint(5, len(TRUTH)) == 3
    suspects_module.forget_kept()
    first = np.asarray(bench.state.candidates)
    partial = [p for p in np.flatnonzero(first.sum(axis=1) >= 2).tolist() if p not in MISSES][:7]
    np.testing.assert_array_equal(workbench_suspicion(bench), suspicion_by_definition(bench))
    for position in partial:  # checkpoints after the third and the sixth event
        bench.record("ann", "answer", position=position, label=int(TRUTH[position]))
        np.testing.assert_array_equal(workbench_suspicion(bench), suspicion_by_definition(bench))
    # After seven events the models are those fitted after six: not to the current sets.
    idx, w = bench.graph.idx, bench.graph.w
    current = feature_evidence(bench.state.X, idx, w, np.asarray(bench.state.candidates))
    now = suspicion_scores(idx, w, np.asarray(bench.state.candidates), features=current)
    assert not np.array_equal(workbench_suspicion(bench), now)


@pytest.mark.parametrize("share", [suspects_module.EVIDENCE_REFIT_SHARE, 4 / (3 * N_PER_CLASS)])
def test_the_suspicion_is_the_same_in_a_process_that_saw_every_answer_and_in_a_fresh_one(tmp_path, share):
    """The determinism the export promises: a workbench that computed the suspicion after
    every answer, one event at a time (the app), and one opened afresh on the same store with
    nothing kept (``winnow export``) give the same bits, whatever checkpoints lie between;
    and so does one that read it only at a few of those states."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(suspects_module, "EVIDENCE_REFIT_SHARE", share)
        suspects_module.forget_kept()
        app = open_bench(tmp_path)
        rng = np.random.default_rng(3)
        order = rng.permutation(len(TRUTH))[:23]
        workbench_suspicion(app)
        for step, position in enumerate(order.tolist()):
            if step % 5 == 4:
                app.record("ann", "skip", position=position)
            elif step % 7 == 6:
                app.record("ann", "undo", position=None)
            else:
                truth = int(TRUTH[position])
                kind = "answer" if app.state.candidates[position, truth] else "other_label"
                app.record("ann", kind, position=position, label=truth)
            workbench_suspicion(app)
        seen_by_app = np.array(workbench_suspicion(app))
        suspects_module.forget_kept()
        fresh = Workbench.open(app.session_factory, app.session_id, use_snapshot=False)
        np.testing.assert_array_equal(workbench_suspicion(fresh), seen_by_app)
        np.testing.assert_array_equal(seen_by_app, suspicion_by_definition(fresh))
        # The export's column, from a third process's view.
        suspects_module.forget_kept()
        table = session_table(Workbench.open(app.session_factory, app.session_id), "labelled", actor=None)
        ids = list(app.state.external_ids)
        assert table["suspicion"].tolist() == [float(seen_by_app[ids.index(i)]) for i in table["id"]]


def test_without_trusted_sets_nothing_is_flagged_and_the_page_says_why(tmp_path):
    X, Y, truth = synthetic()
    Y = Y.copy()
    singles = Y.sum(axis=1) == 1
    Y[singles, (truth[singles] + 2) % 3] = True  # no single given label left
    Y[3] = [False, True, True]  # and one set missing the truth
    bench = open_bench(tmp_path, Y=Y)
    found = workbench_suspects(bench)
    assert len(found.items) == 0 and not found.flags.any() and (found.p_values == 1.0).all()
    assert found.summary().startswith("Nothing can be flagged yet: 0 sets are known to be right")
    assert "at least 9 are needed" in found.summary()


def test_a_clean_session_raises_no_flag(tmp_path):
    X, Y, truth = synthetic()
    Y = Y.copy()
    for position in MISSES:  # every set holds its truth again
        Y[position, truth[position]] = True
    found = workbench_suspects(open_bench(tmp_path, Y=Y))
    assert len(found.items) == 0 and not found.flags.any()
    assert found.summary().startswith("No item is flagged.")


def test_once_there_are_enough_expert_answers_they_alone_calibrate(bench, monkeypatch):
    monkeypatch.setattr(suspects_module, "EXPERT_CALIBRATION", 19)
    partial = [p for p in np.flatnonzero(bench.state.candidates.sum(axis=1) == 2) if p not in MISSES][:19]
    for p in partial:
        bench.record("ann", "answer", position=int(p), label=int(TRUTH[p]))
    found = workbench_suspects(bench)
    assert found.calibrated_on == "expert answers" and found.n_trusted == 19
    # 19 answers give p-values of at least 1/20: too coarse to flag 24 of 161 items at 10 %.
    assert found.n_tested == len(TRUTH) - 19 and not found.flags.any()


@settings(max_examples=60, deadline=None)
@given(
    order=st.permutations(range(30)),
    n_suspects=st.integers(0, 12),
    n_from_ranked=st.integers(0, 6),
    skipped=st.sets(st.integers(0, 39), max_size=8),
    every=st.integers(2, 5),
)
def test_interleaving_gives_every_slot_its_item_and_keeps_skipped_items_last(
    order, n_suspects, n_from_ranked, skipped, every
):
    """Against a slot-by-slot construction: suspect slots every-th while ranked items last, the
    rest after; a suspect that was ranked moves to its slot; skipped ranked items stay last."""
    ranked = np.array(order[:20])
    suspects = np.array([*order[20 : 20 + n_suspects], *order[:n_from_ranked]][:n_suspects], dtype=np.int64)
    suspects = np.array(list(dict.fromkeys(suspects.tolist())), dtype=np.int64)
    deferred = np.isin(np.arange(40), sorted(skipped))
    # Skipped ranked items come last in a ranked queue (ranking_order's promise).
    ranked = np.concatenate([ranked[~deferred[ranked]], ranked[deferred[ranked]]])
    served = interleave_suspects(ranked, suspects, deferred=deferred, every=every)

    fresh = [p for p in ranked.tolist() if p not in set(suspects.tolist()) and not deferred[p]]
    later = [p for p in ranked.tolist() if p not in set(suspects.tolist()) and deferred[p]]
    expected: list[int] = []
    waiting = list(suspects.tolist())
    while fresh or waiting:
        if waiting and ((len(expected) + 1) % every == 0 or not fresh):
            expected.append(waiting.pop(0))
        else:
            expected.append(fresh.pop(0))
    assert served.tolist() == expected + later
    assert sorted(served.tolist()) == sorted(set(ranked.tolist()) | set(suspects.tolist()))


def test_suspect_items_take_their_slots_in_the_served_order_and_leave_it_once_answered(bench):
    # Audit slots (tests/test_delivery.py) would take slots of their own: none here.
    change_label_settings(bench.session_factory, "s", audit_share=0.0)
    bench.refresh()
    asked = suspects_to_serve(workbench_suspects(bench), bench.state)
    assert asked.size >= 2  # the generated misses are flagged (see the first test)
    queue = bench.queue()
    np.testing.assert_array_equal(queue, bench.ranked_queue())
    ranked_alone = queue[~np.isin(queue, asked)]
    assert queue.size == ranked_alone.size + asked.size
    first = int(asked[0])
    slot = int(np.flatnonzero(queue == first)[0])
    assert slot == min(SUSPECT_EVERY - 1, ranked_alone.size)
    assert bench.summary()["suspects"] == asked.size
    truth = int(np.flatnonzero(~bench.state.candidates[first])[0])  # a label outside the set
    bench.record("ann", "other_label", position=first, label=truth)
    # Settled by the expert: out of the served order and of the items to ask (the others may
    # change: the answer also changes its neighbours' evidence).
    assert first not in bench.queue().tolist()
    assert first not in suspects_to_serve(workbench_suspects(bench), bench.state).tolist()


def _suspects_from_scratch(bench: Workbench, fdr: float = 0.1) -> dict[str, object]:
    """The suspects of the workbench's state by the definitions alone: every score afresh, the
    calibration rule, a conformal p-value for every item and Benjamini–Hochberg on them all."""
    state = bench.state
    scores = suspect_scores(bench.graph.idx, bench.graph.w, np.asarray(state.candidates))
    settled = suspects_module.settled_items(state)
    expert = settled & ~state.in_conflict & (np.asarray(state.candidates).sum(axis=1) == 1)
    if expert.sum() >= suspects_module.EXPERT_CALIBRATION:
        trusted, calibrated_on = expert, "expert answers"
    else:
        given_single = (np.asarray(state.original_candidates).sum(axis=1) == 1) & ~settled & ~state.none_of_these
        trusted, calibrated_on = expert | given_single, "single given labels and expert answers"
    p_values = conformal_p_values(scores[trusted], scores)
    flags = np.zeros(scores.size, dtype=bool)
    flags[~settled] = benjamini_hochberg(p_values[~settled], level=fdr)
    order = np.flatnonzero(flags)
    order = order[np.argsort(-scores[order], kind="stable")]
    return {
        "scores": scores,
        "p_values": p_values,
        "flags": flags,
        "positions": order,
        "n_trusted": int(trusted.sum()),
        "n_tested": int((~settled).sum()),
        "calibrated_on": calibrated_on,
    }


def _assert_same_suspects(found, expected: dict[str, object]) -> None:
    np.testing.assert_allclose(found.scores, expected["scores"], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(found.p_values, expected["p_values"])
    np.testing.assert_array_equal(found.flags, expected["flags"])
    np.testing.assert_array_equal(found.items.positions, expected["positions"])
    assert (found.n_trusted, found.n_tested, found.calibrated_on) == (
        expected["n_trusted"],
        expected["n_tested"],
        expected["calibrated_on"],
    )


_suspect_op = st.tuples(
    st.sampled_from(["answer", "answer", "other_label", "other_label", "none_of_these", "skip", "undo"]),
    # Half the ops on the generated misses (the flagged items and their neighbourhoods).
    st.one_of(st.sampled_from(sorted(MISSES)), st.integers(0, 3 * N_PER_CLASS - 1)),
    st.integers(0, 2),
    st.sampled_from(["ann", "bob"]),
)


@settings(max_examples=15, deadline=None)
@given(
    ops=st.lists(_suspect_op, min_size=1, max_size=25),
    expert_calibration=st.sampled_from([4, 100]),
    resort_share=st.sampled_from([1.0, 0.0]),
    fdr=st.sampled_from([0.1, 0.3]),
    scan_max=st.sampled_from([suspects_module.SCAN_MAX_ENTRIES, 0]),
)
def test_suspects_kept_between_answers_equal_suspects_from_scratch(
    ops, expert_calibration, resort_share, fdr, scan_max
):
    """Answers, other labels, none-of-these flags, skips and undos by two annotators: after each,
    the suspects kept from the previous state (scores of the touched items, sorted samples
    patched) equal the definitions applied afresh, and the served order, the counts and the
    label statement equal those of a workbench opened from the whole log with nothing kept."""
    import tempfile
    from pathlib import Path

    from app.store import InvalidRecord, RecordNotFound
    from engine.exceptions import InvalidInput

    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        patch.setattr(suspects_module, "EXPERT_CALIBRATION", expert_calibration)
        # 1.0: the samples are always patched (and the suspicion of the touched items); 0.0:
        # always sorted (and scored) afresh.
        patch.setattr(suspects_module, "RESORT_SHARE", resort_share)
        patch.setattr(suspects_module, "SUSPICION_RESCORE_SHARE", resort_share)
        # The models of the features stay those fitted at the first call (their refits:
        # test_the_models_of_the_features_are_fitted_again_past_their_share).
        patch.setattr(suspects_module, "EVIDENCE_REFIT_SHARE", 1.0)
        # 0: the touched rows through the reverse index (from each graph's second update in
        # the process on; its first scans), as at 1M items.
        patch.setattr(suspects_module, "SCAN_MAX_ENTRIES", scan_max)
        bench = open_bench(Path(tmp))
        suspects_module.forget_kept()  # the models of the features kept by an earlier example's session
        workbench_suspects(bench, fdr=fdr)
        workbench_suspicion(bench)
        evidence = feature_evidence(bench.state.X, bench.graph.idx, bench.graph.w, bench.state.candidates)
        for kind, position, choice, annotator in ops:
            candidates = np.flatnonzero(bench.state.candidates[position])
            label = int(candidates[choice % candidates.size]) if kind == "answer" else choice
            try:
                bench.record(
                    annotator,
                    kind,
                    position=None if kind == "undo" else position,
                    label=label if kind in ("answer", "other_label") else None,
                )
            except (InvalidInput, InvalidRecord, RecordNotFound, StaleAnswer):
                continue
            _assert_same_suspects(workbench_suspects(bench, fdr=fdr), _suspects_from_scratch(bench, fdr))
            # The suspicion patched from the last state's: the bits of a full pass.
            np.testing.assert_array_equal(
                workbench_suspicion(bench),
                suspicion_scores(bench.graph.idx, bench.graph.w, np.asarray(bench.state.candidates), features=evidence),
            )
            # The open targets the new view patched (RankingState.view), against a full pass.
            assert bench.n_open == int(open_targets(*bench.label_sets()).sum())
            # The set sizes the new state carried over (SessionState.with_derived), patched.
            np.testing.assert_array_equal(bench.state.set_sizes, np.asarray(bench.state.candidates).sum(axis=1))
            np.testing.assert_array_equal(
                bench.state.original_sizes, np.asarray(bench.state.original_candidates).sum(axis=1)
            )
        served, counts, statement = bench.queue(), bench.summary(), bench.label_statement()
        suspects_module.forget_kept()
        fresh = Workbench.open(bench.session_factory, bench.session_id, use_snapshot=False)
        np.testing.assert_array_equal(fresh.queue(), served)
        assert fresh.summary() == counts
        assert fresh.label_statement() == statement


def test_a_dataset_made_from_votes_reads_them_in_the_suspicion_the_same_in_every_process(tmp_path):
    """Votes of three annotators who confuse ants with bees: the suspicion multiplies each
    item's posterior by its votes' likelihood under the crowd's confusion matrix, fitted at
    the checkpoint with the models of the features; a workbench that saw every answer and a
    fresh one give the same bits, and those of the definition."""
    from app.store import VoteSpec, check_dataset, derive_state, import_dataset, session_events
    from engine import crowd_evidence, pooled_posterior

    X, _, truth = synthetic()
    rng = np.random.default_rng(8)
    votes = np.where(rng.random((truth.size, 3)) < 0.8, truth[:, None], (truth[:, None] + 1) % 3)
    Y = np.zeros((truth.size, 3), dtype=bool)
    Y[np.arange(truth.size)[:, None], votes] = True
    spec = VoteSpec(
        positions=np.repeat(np.arange(truth.size), 3),
        annotators=["ann", "bob", "cid"] * truth.size,
        labels=votes.ravel(),
        times=[None] * votes.size,
        source="votes.csv",
    )
    session_factory = open_store(tmp_path / "v.db")
    checked = check_dataset(
        name="voted",
        X=X,
        candidates=Y,
        label_names=LABELS,
        external_ids=[f"i{p:03d}" for p in range(truth.size)],
        votes=spec,
    )
    dataset_id = import_dataset(session_factory, checked).dataset_id
    session_id = write_transaction(
        session_factory, lambda s: create_labelling_session(s, dataset_id=dataset_id, name="s", k=6).id
    )
    suspects_module.forget_kept()
    app = Workbench.open(session_factory, session_id)
    items, labels = app.vote_arrays()
    assert items.size == votes.size
    without = suspicion_scores(
        app.graph.idx, app.graph.w, Y, features=feature_evidence(X, app.graph.idx, app.graph.w, Y)
    )
    assert not np.array_equal(workbench_suspicion(app), without)
    for position in rng.permutation(truth.size)[:25].tolist():
        app.record(
            "ann",
            "other_label" if not Y[position, truth[position]] else "answer",
            position=position,
            label=int(truth[position]),
        )
        workbench_suspicion(app)
    seen_by_app = np.array(workbench_suspicion(app))
    suspects_module.forget_kept()
    fresh = Workbench.open(session_factory, session_id, use_snapshot=False)
    np.testing.assert_array_equal(workbench_suspicion(fresh), seen_by_app)
    # The definition: everything fitted to the sets after the checkpoint's events.
    state, idx, w = fresh.state, fresh.graph.idx, fresh.graph.w
    with session_factory() as s:
        events = session_events(s, session_id)
    fitted_to = derive_state(events[: suspects_module.evidence_checkpoint(state.n_events, truth.size)], Y).candidates
    evidence = feature_evidence(X, idx, w, fitted_to)
    answers = np.where((fitted_to != Y).any(axis=1) & (fitted_to.sum(axis=1) == 1), fitted_to.argmax(axis=1), -1)
    crowd = crowd_evidence(items, labels, pooled_posterior(idx, w, fitted_to, features=evidence), answers=answers)
    expected = suspicion_scores(idx, w, np.asarray(state.candidates), features=evidence, crowd=crowd)
    np.testing.assert_array_equal(seen_by_app, expected)
