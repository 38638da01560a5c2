"""The labelled dataset a session hands back (issue 20) through the service layer: label sources
and counts, model labels only after enough audited answers, undecided items == the Rejects page,
audits interleaved the same way in every view, leave-one-out audit labels, statement strings."""

from __future__ import annotations

import re

import numpy as np
import pytest

from app.service import Workbench, change_label_settings, session_label_settings
from app.service.audits import served_order
from app.service.delivery import LABEL_SOURCES, audited_answers, label_statement
from app.store import (
    LabelSettings,
    create_dataset,
    create_labelling_session,
    open_store,
    write_transaction,
)
from engine.calibration import Calibration, audits_needed, calibrate_threshold
from engine.dst import transductive_decisions

N_PER_CLASS = 60
LABELS = ["a", "b", "c"]


def synthetic(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Three well separated blobs; one item in four keeps a single candidate (its true label),
    the others get one wrong candidate besides the true one."""
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    truth = np.repeat(np.arange(3), N_PER_CLASS)
    X = centres[truth] + rng.normal(scale=0.5, size=(truth.size, 2))
    Y = np.zeros((truth.size, 3), dtype=bool)
    Y[np.arange(truth.size), truth] = True
    partial = rng.random(truth.size) >= 0.25
    other = (truth + rng.integers(1, 3, size=truth.size)) % 3
    Y[np.flatnonzero(partial), other[partial]] = True
    return X, Y, truth


@pytest.fixture
def bench(tmp_path):
    """A session on the synthetic set; half of the served items are audits (the fastest way to
    reach the 45 audits a 5 % target needs)."""
    X, Y, truth = synthetic()
    session_factory = open_store(tmp_path / "w.db")

    def work(s):
        ds = create_dataset(
            s,
            name="blobs",
            X=X,
            candidates=Y,
            label_names=LABELS,
            external_ids=[f"i{p:03d}" for p in range(len(Y))],
            true_labels=truth,
        )
        return create_labelling_session(s, dataset_id=ds.id, name="s", k=5).id

    session_id = write_transaction(session_factory, work)
    change_label_settings(session_factory, "s", audit_share=0.5)
    return Workbench.open(session_factory, session_id)


def answer_served(bench: Workbench, n: int) -> None:
    """Answer the next ``n`` served items with their true labels, as the Query page does."""
    truth = bench.state.true_labels
    for _ in range(n):
        p = int(bench.queue(top=1)[0])
        bench.record("ann", "answer", position=p, label=int(truth[p]), displayed="query")


def sources(bench: Workbench) -> np.ndarray:
    return bench.labels().table["label_source"].to_numpy()


def test_before_any_answer_the_singletons_are_given_and_nothing_is_stated(bench):
    labels = bench.labels()
    singles = np.asarray(bench.state.candidates).sum(axis=1) == 1
    assert labels.counts == {"expert": 0, "given": int(singles.sum()), "model": 0, "undecided": int((~singles).sum())}
    assert list(labels.counts) == list(LABEL_SOURCES)
    assert labels.n_audited == 0 and labels.calibration.threshold is None
    assert labels.statement == (
        f"model labels: not yet measured — {audits_needed(0.05, 0.9)} more audited answers "
        f"needed; undecided: {int((~singles).sum())}"
    )
    table = labels.table
    assert list(table.columns[:6]) == ["id", "candidates", "n_candidates", "label", "label_source", "confidence"]
    np.testing.assert_array_equal(table["label_source"].to_numpy() == "given", singles)
    assert table.loc[singles, "label"].tolist() == [LABELS[t] for t in bench.state.true_labels[singles]]
    assert table.loc[~singles, "label"].isna().all() and table["confidence"].isna().all()
    assert bench.labelled_table().equals(table)


def test_model_labels_appear_only_after_enough_audited_answers(bench):
    needed = audits_needed(0.05, 0.9)
    seen_before = False
    while bench.labels().n_audited < needed:
        labels = bench.labels()
        assert labels.counts["model"] == 0 and "not yet measured" in labels.statement
        seen_before = True
        answer_served(bench, 1)
    assert seen_before
    labels = bench.labels()
    assert labels.n_audited >= needed
    assert labels.counts["model"] > 0
    assert re.fullmatch(
        rf"model labels: {labels.counts['model']}, error ≤ 5\.0% at 90% confidence "
        rf"\({labels.n_audited} audited answers\); undecided: {labels.counts['undecided']}",
        labels.statement,
    )
    table = labels.table
    model = table["label_source"] == "model"
    confidence = table.loc[model, "confidence"].to_numpy()
    assert ((confidence >= 0) & (confidence <= 1)).all() and table.loc[~model, "confidence"].isna().all()
    # The model labels are DST-PLL's, on items nobody answered; every answered item is expert.
    answered = np.array([a is not None for a in bench.state.answered_by])
    np.testing.assert_array_equal(table["label_source"].to_numpy() == "expert", answered)
    assert not (answered & model.to_numpy()).any()
    assert table.loc[table["label_source"] != "undecided", "label"].notna().all()
    assert sum(labels.counts.values()) == bench.state.n_instances
    # On these separated blobs the kept labels are right.
    truth = np.asarray(LABELS, dtype=object)[bench.state.true_labels[model.to_numpy()]]
    assert (table.loc[model, "label"].to_numpy() == truth).mean() >= 0.95


def test_answers_to_ranked_items_are_not_audits(bench):
    change_label_settings(bench.session_factory, "s", audit_share=0.0)
    bench.refresh()
    answer_served(bench, 20)
    labels = bench.labels()
    assert labels.n_audited == 0 and labels.counts["model"] == 0 and labels.counts["expert"] == 20


def test_undecided_items_are_exactly_those_the_rejects_page_lists(bench):
    while bench.labels().n_audited < audits_needed(0.05, 0.9):
        answer_served(bench, 1)
    open_now = np.flatnonzero(bench.state.open_items)
    bench.record("ann", "none_of_these", position=int(open_now[0]))
    p = int(open_now[1])
    a, b = np.flatnonzero(bench.state.candidates[p])[:2]
    bench.record("ann", "answer", position=p, label=int(a))
    bench.record("bob", "answer", position=p, label=int(b))
    assert bench.state.conflicts
    src = sources(bench)
    assert (src == "model").any() and (src == "undecided").any()
    queue = bench.rejects()
    listed = set(queue.positions[~queue.accepted].tolist()) | {c.position for c in bench.state.conflicts}
    assert listed == set(np.flatnonzero(src == "undecided").tolist())
    assert set(queue.positions[queue.accepted].tolist()) == set(np.flatnonzero(src == "model").tolist())


def test_every_view_serves_the_same_audits_in_the_same_slots(bench):
    served = bench.queue()
    assert np.array_equal(bench.queue(top=10), served[:10])
    assert sorted(served.tolist()) == sorted(bench.ranked_queue().tolist())  # the same items, reordered
    audits = np.array([bench.is_audit(p) for p in served])
    assert 0 < audits.sum() < served.size
    other = Workbench.open(bench.session_factory, bench.session_id)  # another process: the stored draws
    np.testing.assert_array_equal(other.queue(), served)
    ids = np.asarray(bench.state.external_ids)
    ranked = bench.ranked_table()
    assert ranked["id"].tolist() == ids[served].tolist()
    assert ranked["rank"].tolist() == list(range(1, len(served) + 1))
    assert [q["id"] for q in bench.next_queries(5)] == ids[served[:5]].tolist()
    assert "audit" not in " ".join(ranked.columns)
    # An answer moves the order on by one slot; the ranking around them may change, the
    # audits keep their slots and items.
    answer_served(bench, 1)
    after = bench.queue()
    slots = np.flatnonzero(audits[1:41])
    assert slots.size and after[slots].tolist() == served[1:41][slots].tolist()


def test_without_audits_the_queue_is_the_ranking(bench):
    change_label_settings(bench.session_factory, "s", audit_share=0.0)
    bench.refresh()
    np.testing.assert_array_equal(bench.queue(), bench.ranked_queue())


def test_served_order_draws_uniformly_among_unserved_eligible_items():
    """Every item an audit slot may draw comes up about equally often over many sessions."""
    eligible = np.ones(20, dtype=bool)
    ranked = np.arange(20)
    counts = np.zeros(20)
    for session_id in range(2000):
        order = served_order(ranked[:2], eligible, {}, base=0, audit_share=0.5, session_id=session_id, top=2)
        for pos in order.new_draws.values():
            counts[pos] += 1
    # The two ranked items may be served before the draw; the other 18 are drawn alike.
    rest = counts[2:]
    assert rest.sum() > 1000 and rest.min() > 0.6 * rest.mean() and rest.max() < 1.4 * rest.mean()


def test_an_audited_answer_does_not_vote_for_itself(bench):
    answer_served(bench, 30)
    drawn = np.array([p for p in range(bench.state.n_instances) if bench.is_audit(p)])
    positions, margin, correct = audited_answers(bench.state, drawn, bench.graph.idx)
    assert positions.size > 5
    for i, p in enumerate(positions):
        Y = np.array(bench.state.candidates)
        Y[p] = bench.state.original_candidates[p]  # its own answer taken back
        labels, _, expected = transductive_decisions(Y, bench.graph.idx, [p], random_state=0)
        assert margin[i] == pytest.approx(expected[0])
        assert correct[i] == (labels[0] == bench.state.true_labels[p])


def test_settings_through_the_service(bench):
    assert session_label_settings(bench.session_factory, "s") == LabelSettings(audit_share=0.5)
    assert change_label_settings(bench.session_factory, "s", max_error=0.1) == LabelSettings(0.1, 0.9, 0.5)
    bench.refresh()
    assert bench.label_settings.max_error == 0.1
    assert f"{audits_needed(0.1, 0.9)} more audited answers" in bench.labels().statement


def test_statement_strings():
    cal = Calibration(
        threshold=0.4,
        bound=0.041,
        audits=38,
        errors=0,
        more_audits_needed=0,
        target=0.041,
        confidence=0.9,
        observed_error=0.0,
        clopper_pearson=0.05,
    )
    assert label_statement({"model": 612, "undecided": 211}, cal, 38) == (
        "model labels: 612, error ≤ 4.1% at 90% confidence (38 audited answers); undecided: 211"
    )
    none = calibrate_threshold(np.linspace(1, 0, 28), np.ones(28, dtype=bool), target=0.05)
    assert label_statement({"model": 0, "undecided": 823}, none, 28) == (
        "model labels: not yet measured — 17 more audited answers needed; undecided: 823"
    )


def test_served_order_is_a_permutation_whose_prefixes_agree():
    """On random queues, eligibility and stored draws: every ranked item is served exactly once,
    an audit serves a stored or a new draw, and a shorter view is a prefix of the full one."""
    rng = np.random.default_rng(1)
    for case in range(300):
        n = int(rng.integers(1, 40))
        ranked = rng.permutation(n)[: int(rng.integers(0, n + 1))]
        eligible = np.zeros(n, dtype=bool)
        eligible[ranked] = rng.random(ranked.size) < 0.8  # the rest: skipped
        base = int(rng.integers(0, 5))
        draws = {}
        for slot in rng.choice(60, size=int(rng.integers(0, 6)), replace=False):
            pos = int(rng.integers(n))
            if pos not in draws.values():
                draws[int(slot)] = pos
        share = float(rng.choice([0.0, 0.2, 0.5]))
        full = served_order(ranked, eligible, draws, base=base, audit_share=share, session_id=case)
        assert sorted(full.positions.tolist()) == sorted(ranked.tolist())
        audited = set(draws.values()) | set(full.new_draws.values())
        assert all(int(p) in audited for p in full.positions[full.audit])
        assert not set(full.new_draws.values()) & set(draws.values())
        stored = {**draws, **full.new_draws}
        for top in (1, 3, 10):
            head = served_order(ranked, eligible, stored, base=base, audit_share=share, session_id=case, top=top)
            assert head.positions.tolist() == full.positions[:top].tolist()
            assert head.new_draws == {}
