"""The labelled dataset a session hands back (issues 20 and 28) through the service layer: label
sources and counts, model labels only from certified lots, lots audited in an order only the
store's key gives, undecided items == the Rejects page, the same served order in every view and
process, statement strings."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chi2_contingency, mannwhitneyu

from app.service import (
    Workbench,
    change_label_settings,
    export_label_studio,
    import_file,
    session_id_by_name,
    session_label_settings,
)
from app.service import lots as lots_module
from app.service.audits import served_base, served_order
from app.service.delivery import LABEL_SOURCES, LabelSummary, label_statement
from app.service.lots import (
    FIRST_LOT_LEARNING_AUDITS,
    FIRST_STATEMENT_AUDIT_SHARE,
    ItemStatus,
    audit_queue,
    lots_now,
    slot_uniforms,
)
from app.store import (
    LabelSettings,
    SessionSpec,
    create_dataset,
    create_labelling_session,
    label_lots,
    open_store,
    stored_audit_secret,
    write_transaction,
)
from app.store.labels import AUDIT_ORDER_KEY
from app.store.models import StoreSecret
from engine.lots import audits_to_certify, lot_alpha
from tests.cli.conftest import ROOT, run_winnow

#: 600 items, about 450 open: a first lot of about 400 needs about 70 audits (a lot of 125
#: would need 122, leaving almost nothing to deliver).
N_PER_CLASS = 200
LABELS = ["a", "b", "c"]
#: Answers after which the first lot on the synthetic set must be certified.
ANSWER_BUDGET = 400


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


def open_bench(
    path, *, audit_share: float = 0.5, key: bytes | None = None, texts: bool = False, promise: str = "confidence"
) -> Workbench:
    """A session 's' on the synthetic set in the store at ``path`` (with the audit key ``key``
    when given; a new store draws a random one; each item a text of its own with ``texts``)
    under ``promise``."""
    X, Y, truth = synthetic()
    session_factory = open_store(path)
    if key is not None:
        write_transaction(session_factory, lambda s: s.merge(StoreSecret(name=AUDIT_ORDER_KEY, value=key)))

    def work(s):
        ds = create_dataset(
            s,
            name="blobs",
            X=X,
            candidates=Y,
            label_names=LABELS,
            external_ids=[f"i{p:03d}" for p in range(len(Y))],
            true_labels=truth,
            texts=[f"item {p}" for p in range(len(Y))] if texts else None,
        )
        return create_labelling_session(s, dataset_id=ds.id, name="s", k=5).id

    session_id = write_transaction(session_factory, work)
    change_label_settings(session_factory, "s", audit_share=audit_share, promise=promise)
    return Workbench.open(session_factory, session_id)


@pytest.fixture
def bench(tmp_path):
    """A session on the synthetic set with an audit share of 0.5 (the first statement's share)
    and a fixed audit key, so that every run audits the same items."""
    return open_bench(tmp_path / "w.db", key=bytes(range(32)))


def answer_served(bench: Workbench, n: int) -> None:
    """Answer the next ``n`` served items with their true labels, as the Query page does."""
    truth = bench.state.true_labels
    for _ in range(n):
        p = int(bench.queue(top=1)[0])
        bench.record("ann", "answer", position=p, label=int(truth[p]), displayed="query")


def answer_until_certified(bench: Workbench) -> None:
    for _ in range(ANSWER_BUDGET):
        if bench.labels().counts["model"]:
            return
        answer_served(bench, 1)
    raise AssertionError(f"no model label after {ANSWER_BUDGET} answers: {bench.labels().statement}")


def sources(bench: Workbench) -> np.ndarray:
    return bench.labels().table["label_source"].to_numpy()


def stored_lots(bench: Workbench):
    bench.queue(top=1)  # a read of the served order freezes a lot when one is due
    with bench.session_factory() as s:
        return label_lots(s, bench.session_id)


def lots_of(bench: Workbench):
    """The session's lots and their verdicts now, recomputed from the store and the state."""
    return lots_now(stored_lots(bench), ItemStatus.of(bench.state), bench.label_settings)


def secret_of(bench: Workbench) -> bytes:
    with bench.session_factory() as s:
        secret = stored_audit_secret(s)
    assert secret is not None and len(secret) == 32
    return secret


def first_audit_slot(bench: Workbench) -> int:
    """The first served slot (0 = the head of the queue) that is an audit, from the store's key."""
    now = lots_of(bench)
    share = now.audit_share(bench.label_settings)
    assert share > 0
    base = served_base(bench.state.answered_by, bench.state.skipped)
    u = slot_uniforms(secret_of(bench), bench.session_id, base + 200)[base:]
    return int(np.flatnonzero(u < share)[0])


# ------------------------------------------------------------------------------ label sources


def test_before_any_answer_the_singletons_are_given_and_a_first_lot_waits_for_audits(bench):
    labels = bench.labels()
    singles = np.asarray(bench.state.candidates).sum(axis=1) == 1
    assert labels.counts == {
        "expert": 0,
        "given": int(singles.sum()),
        "crowd": 0,
        "model": 0,
        "undecided": int((~singles).sum()),
    }
    assert list(labels.counts) == list(LABEL_SOURCES)
    # A first lot is frozen from the open items DST-PLL would label; nothing is audited yet.
    lots = stored_lots(bench)
    assert len(lots) == 1
    lot = lots[0]
    assert lot.number == 1 and lot.positions.size >= 20
    assert np.asarray(bench.state.open_items)[lot.positions].all() and (lot.margins > 0).all()
    assert lot.alpha == pytest.approx(lot_alpha(0.1, 1)) and lot.target == 0.05
    summary = labels.summary
    needed = audits_to_certify(lot.positions.size, target=0.05, alpha=lot_alpha(0.1, 1))
    assert (summary.lots, summary.active_lot_size, summary.audits_left) == (1, lot.positions.size, needed)
    assert summary.audit_share == FIRST_STATEMENT_AUDIT_SHARE and labels.n_audited == 0
    assert summary.error_bound is None and summary.model_labels == 0
    assert labels.statement == (
        f"model labels: none yet — the first {lot.positions.size} the model would label need at least "
        f"{needed} more audited answers, all right (about {math.ceil(needed / 0.5)} answers at the current "
        f"audit share of 50%); undecided: {int((~singles).sum())}"
    )
    table = labels.table
    assert list(table.columns[:6]) == ["id", "candidates", "n_candidates", "label", "label_source", "model_margin"]
    np.testing.assert_array_equal(table["label_source"].to_numpy() == "given", singles)
    assert table.loc[singles, "label"].tolist() == [LABELS[t] for t in bench.state.true_labels[singles]]
    assert table.loc[~singles, "label"].isna().all() and table["model_margin"].isna().all()
    assert bench.labelled_table().equals(table)
    meta = table.attrs["metadata"]
    assert meta["statement_confidence"] == 0.9 and meta["target_error"] == 0.05
    assert meta["more_audited_answers_needed"] == needed and meta["audited_answers"] == 0
    assert meta["lots"] == 1 and meta["stated_error_bound"] is None and meta["statement"] == labels.statement
    assert "confidence" not in meta


def test_on_average_the_first_lot_is_frozen_once_its_learning_audits_are_in(tmp_path):
    bench = open_bench(tmp_path / "w.db", key=bytes(range(32)), audit_share=0.05, promise="average")
    needed = FIRST_LOT_LEARNING_AUDITS["average"]
    labels = bench.labels()
    assert stored_lots(bench) == [] and labels.summary.learning_left == needed
    assert labels.summary.audit_share == FIRST_STATEMENT_AUDIT_SHARE  # not the session's 5 %
    undecided = labels.counts["undecided"]
    assert labels.statement == (
        f"model labels: none yet — winnow first audits {needed} more items drawn at random (about "
        f"{math.ceil(needed / FIRST_STATEMENT_AUDIT_SHARE)} answers at the current audit share of 50%), to "
        f"learn which of the model's labels to put forward; undecided: {undecided}"
    )
    assert labels.table.attrs["metadata"]["learning_audits_needed"] == needed
    answers = 0
    while bench.labels().summary.learning_left:
        left = bench.labels().summary.learning_left
        assert stored_lots(bench) == []
        answer_served(bench, 1)
        answers += 1
        assert bench.labels().summary.learning_left <= left
    # The learning audits came at about the first statement's share, and a lot followed them.
    assert needed <= answers <= 3 * needed
    assert len(stored_lots(bench)) == 1


def test_while_a_lot_is_audited_its_items_are_undecided_and_their_guess_hidden(bench):
    answer_served(bench, 10)
    now = lots_of(bench)
    assert now.active == 0 and not now.verdicts[0].certified
    lot = now.lots[0]
    labels = bench.labels()
    table = labels.table
    unanswered = np.array([bench.state.answered_by[p] is None for p in lot.positions])
    assert unanswered.any()
    assert (table["label_source"].to_numpy()[lot.positions[unanswered]] == "undecided").all()
    assert table["label"].iloc[lot.positions[unanswered]].isna().all()
    assert table["model_margin"].isna().all() and labels.counts["model"] == 0
    queue = bench.rejects()
    assert queue.guess_hidden is not None
    np.testing.assert_array_equal(queue.guess_hidden, np.isin(queue.positions, lot.positions))
    assert queue.guess_hidden.any() and not queue.guess_hidden.all()
    assert not queue.accepted.any()


def test_model_labels_arrive_from_a_certified_lot_with_its_frozen_labels(bench):
    seen_before = False
    while not bench.labels().counts["model"]:
        labels = bench.labels()
        assert labels.statement.startswith("model labels: none yet") and labels.n_audited == 0
        assert (labels.table["label_source"] != "model").all()
        seen_before = True
        answer_until_certified(bench)
    assert seen_before
    labels = bench.labels()
    now = lots_of(bench)
    certified = [i for i, v in enumerate(now.verdicts) if v.certified]
    assert certified
    table = labels.table
    model = table["label_source"].to_numpy() == "model"
    assert model.sum() == labels.counts["model"] == labels.summary.model_labels > 0
    # Every model label is an unanswered item of a certified lot, with the lot's frozen label.
    frozen: dict[int, int] = {}
    for i in certified:
        lot = now.lots[i]
        for p, label in zip(lot.positions.tolist(), lot.labels.tolist(), strict=True):
            if bench.state.answered_by[p] is None:
                frozen[p] = label
    assert set(np.flatnonzero(model).tolist()) == set(frozen)
    assert table["label"].iloc[np.flatnonzero(model)].tolist() == [LABELS[frozen[p]] for p in np.flatnonzero(model)]
    margins = table["model_margin"].to_numpy()
    assert ((margins[model] > 0) & (margins[model] <= 1)).all() and np.isnan(margins[~model]).all()
    # The statement and what backs it.
    summary = labels.summary
    assert summary.error_bound is not None and summary.error_bound <= 0.05
    assert labels.n_audited == sum(now.verdicts[i].audited for i in certified) >= 20
    assert "at most 5% wrong, with 90% confidence" in labels.statement
    assert re.match(
        rf"model labels: {labels.counts['model']}, at most 5% wrong, with 90% confidence "
        rf"\(bound now {summary.error_bound * 100:.1f}%, from {labels.n_audited} audited answers\)",
        labels.statement,
    )
    assert labels.statement.endswith(f"; undecided: {labels.counts['undecided']}")
    assert "at least 0 more" not in labels.statement
    # The answered items are expert, every other item has one source.
    answered = np.array([a is not None for a in bench.state.answered_by])
    np.testing.assert_array_equal(table["label_source"].to_numpy() == "expert", answered)
    assert table.loc[table["label_source"] != "undecided", "label"].notna().all()
    assert sum(labels.counts.values()) == bench.state.n_instances
    # On these separated blobs the delivered labels are right.
    truth = np.asarray(LABELS, dtype=object)[bench.state.true_labels[model]]
    assert (table.loc[model, "label"].to_numpy() == truth).mean() >= 0.95
    meta = table.attrs["metadata"]
    assert meta["stated_error_bound"] == summary.error_bound and meta["audited_answers"] == labels.n_audited
    assert meta["counts"] == labels.counts


def test_undecided_items_are_exactly_those_the_rejects_page_lists(bench):
    answer_until_certified(bench)
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


# ------------------------------------------------------------------------------ crowd labels


def test_single_labels_left_by_crowd_votes_are_crowd_and_their_error_is_not_claimed(tmp_path):
    session_factory = open_store(tmp_path / "w.db")
    import_file(
        session_factory,
        ROOT / "sample_data" / "crowd_items.csv",
        name="crowd",
        session=SessionSpec(name="crowd", k=3),
        votes=ROOT / "sample_data" / "crowd_votes.csv",
        min_votes=2,
    )
    bench = Workbench.open(session_factory, session_id_by_name(session_factory, "crowd"))
    labels = bench.labels()
    singles = np.asarray(bench.state.candidates).sum(axis=1) == 1
    assert singles.any()
    assert labels.counts["crowd"] == int(singles.sum()) and labels.counts["given"] == 0
    table = labels.table
    np.testing.assert_array_equal(table["label_source"].to_numpy() == "crowd", singles)
    names = np.asarray(bench.label_names, dtype=object)
    assert table.loc[singles, "label"].tolist() == names[np.asarray(bench.state.candidates)[singles].argmax(1)].tolist()
    assert labels.statement.endswith(
        f"; crowd labels: {int(singles.sum())} (single labels left by the votes; their error is not measured)"
    )
    # An answered single becomes expert, the rest stay crowd.
    p = int(np.flatnonzero(singles)[0])
    bench.record("ann", "answer", position=p, label=int(np.flatnonzero(bench.state.candidates[p])[0]))
    after = bench.labels()
    assert (after.counts["crowd"], after.counts["expert"]) == (int(singles.sum()) - 1, 1)
    assert after.table["label_source"].iloc[p] == "expert"


# ------------------------------------------------------------------------------ audits


def test_two_stores_audit_the_same_dataset_in_different_orders(tmp_path, random_audit_key):
    one, two = open_bench(tmp_path / "one.db"), open_bench(tmp_path / "two.db")
    assert secret_of(one) != secret_of(two)
    lot_one, lot_two = stored_lots(one)[0], stored_lots(two)[0]
    # The same items, labels and thresholds (the same data and model), in different audit orders.
    assert sorted(lot_one.positions.tolist()) == sorted(lot_two.positions.tolist())
    assert lot_one.positions.tolist() != lot_two.positions.tolist()
    assert not np.array_equal(
        slot_uniforms(secret_of(one), one.session_id, 50), slot_uniforms(secret_of(two), two.session_id, 50)
    )
    assert one.queue().tolist() != two.queue().tolist()
    # The ranking itself is the same for the items of no lot, served first by the ranked slots;
    # the lot's items come after them in the lot's own order.
    ranked_one, ranked_two = one.ranked_queue(), two.ranked_queue()
    outside = ~np.isin(ranked_one, lot_one.positions)
    assert outside.any() and not outside[outside.sum() :].any()
    np.testing.assert_array_equal(ranked_one[outside], ranked_two[~np.isin(ranked_two, lot_two.positions)])


def expected_served_order(bench: Workbench):
    """The served order as the store's key says it: the ranked queue with the audit slots filled
    from the active lot's audit queue."""
    now = lots_of(bench)
    return served_order(
        bench.ranked_queue(),
        audit_queue(now),
        base=served_base(bench.state.answered_by, bench.state.skipped),
        audit_share=now.audit_share(bench.label_settings),
        uniforms=lambda n: slot_uniforms(secret_of(bench), bench.session_id, n),
    )


def separation_p_value(values: pd.Series, audit: np.ndarray) -> float:
    """How surely a column's values tell the audit rows from the others: the smaller p-value of a
    rank test (values in their natural order, strings sorted) and, for a column of few values, a
    test of independence; 1.0 for a column that holds nothing."""
    if values.isna().all():
        return 1.0
    codes = values.astype("category").cat.codes if values.dtype == object else values
    p = mannwhitneyu(np.asarray(codes, dtype=float)[audit], np.asarray(codes, dtype=float)[~audit]).pvalue
    if 1 < values.nunique() <= 20:
        p = min(p, chi2_contingency(pd.crosstab(values.astype(str).to_numpy(), audit)).pvalue)
    return float(p)


def test_no_export_column_and_no_explanation_tells_an_audit_from_a_ranked_item(bench):
    served = bench.queue()
    audit = expected_served_order(bench).audit
    assert audit.sum() > 50 and (~audit).sum() > 50 and bench.lot_audits_served()
    ranked = bench.ranked_table()
    assert ranked["score"].isna().all() and ranked["open_targets_touched"].isna().all()
    for column in ranked.columns:
        assert separation_p_value(ranked[column], audit) > 0.001, column
    # The Query page's "Why this item" says the same of both: the neighbours, nothing of the ranking.
    for position in (served[audit][0], served[~audit][0]):
        why = bench.explain(int(position))
        assert why.withheld and math.isnan(why.score) and not why.effects and why.example is None
        assert len(why.neighbours) == bench.config.k
    assert not bench.explain(int(served[0]), while_auditing=True).withheld


def test_every_view_and_process_serves_the_same_audits_in_the_same_slots(bench, tmp_path):
    served = bench.queue()
    assert np.unique(served).size == served.size  # each item served once
    assert np.array_equal(bench.queue(top=10), served[:10])
    assert sorted(served.tolist()) == sorted(bench.ranked_queue().tolist())  # the same items, reordered
    # The audit slots are those the store's key says, and they serve the lot in its audit order.
    now = lots_of(bench)
    expected = expected_served_order(bench)
    np.testing.assert_array_equal(expected.positions, served)
    assert 0 < expected.audit.sum() < served.size
    assert served[expected.audit].tolist() == audit_queue(now)[: expected.audit.sum()].tolist()
    assert all(bench.is_audit(int(p)) for p in served[expected.audit])
    # Another workbench on the same store (another tab, another process) serves the same order.
    other = Workbench.open(bench.session_factory, bench.session_id)
    np.testing.assert_array_equal(other.queue(), served)
    ids = np.asarray(bench.state.external_ids)
    ranked = bench.ranked_table()
    assert ranked["id"].tolist() == ids[served].tolist()
    assert ranked["rank"].tolist() == list(range(1, len(served) + 1))
    assert [q["id"] for q in bench.next_queries(5)] == ids[served[:5]].tolist()
    assert "audit" not in " ".join(ranked.columns)
    # So does `winnow session status` in a process of its own, and `winnow export --what ranked`.
    db = bench.session_factory.kw["bind"].url.database
    status = run_winnow("session", "status", "s", "--db", db, "--json", "--top", "8").stdout
    assert [q["id"] for q in json.loads(status)["next"]] == ids[served[:8]].tolist()
    run_winnow("export", "s", "--what", "ranked", "-o", tmp_path / "ranked.csv", "--db", db)
    assert pd.read_csv(tmp_path / "ranked.csv", dtype=str)["id"].tolist() == ids[served].tolist()
    # An answer moves the order on by one slot: the audits keep their slots, and serve the lot's
    # next items in its order.
    answer_served(bench, 1)
    after = bench.queue()
    slots = np.flatnonzero(expected.audit[1:41])
    assert slots.size and after[slots].tolist() == served[1:41][slots].tolist()


def test_an_audit_skipped_stays_first_in_the_audit_queue(bench):
    head = int(audit_queue(lots_of(bench))[0])
    slot = first_audit_slot(bench)
    assert int(bench.queue()[slot]) == head
    answer_served(bench, slot)  # the ranked items before it
    assert int(bench.queue(top=1)[0]) == head
    skipped_in = served_base(bench.state.answered_by, bench.state.skipped)
    bench.record("ann", "skip", position=head, displayed="query")
    assert int(audit_queue(lots_of(bench))[0]) == head  # not replaced by the lot's next item
    # Served again at the next audit slot, never in the slot it was skipped in.
    slot = first_audit_slot(bench)
    served = bench.queue()
    assert int(served[slot]) == head and head not in served[:slot].tolist()
    assert served_base(bench.state.answered_by, bench.state.skipped) + slot > skipped_in
    if slot > 0:
        assert int(served[0]) != head
    assert lots_of(bench).verdicts[0].audited == 0  # the prefix waits for it
    # Answering it at its next slot extends the prefix.
    answer_served(bench, slot + 1)
    assert bench.state.answered_by[head] is not None and lots_of(bench).verdicts[0].audited >= 1


def test_an_audit_answered_none_of_these_counts_as_a_wrong_model_label(bench):
    now = lots_of(bench)
    head = int(audit_queue(now)[0])
    slot = first_audit_slot(bench)
    answer_served(bench, slot)
    assert int(bench.queue(top=1)[0]) == head
    bench.record("ann", "none_of_these", position=head, displayed="query")
    after = lots_of(bench)
    verdict = after.verdicts[0]
    assert (verdict.audited, verdict.audit_errors, verdict.known_wrong) == (1, 1, 1)
    assert int(audit_queue(after)[0]) != head
    fresh = audits_to_certify(after.lots[0].positions.size, target=0.05, alpha=after.lots[0].alpha)
    assert bench.labels().summary.audits_left > fresh - 1  # a wrong label costs audits


def test_with_audit_share_zero_no_lot_is_audited_and_the_statement_says_audits_are_off(tmp_path):
    bench = open_bench(tmp_path / "w.db", audit_share=0.0)
    np.testing.assert_array_equal(bench.queue(), bench.ranked_queue())
    # Every open item once (no learning audit is moved, or served twice).
    assert sorted(bench.queue().tolist()) == np.flatnonzero(bench.state.open_items).tolist()
    answer_served(bench, 20)
    labels = bench.labels()
    assert stored_lots(bench) == [] and labels.summary.lots == 0 and labels.summary.audit_share == 0.0
    assert labels.n_audited == 0 and labels.counts["model"] == 0 and labels.counts["expert"] == 20
    np.testing.assert_array_equal(bench.queue(), bench.ranked_queue())  # still no audit slot
    assert labels.statement == (
        "model labels: none yet — audits are off (audit share 0): no model label can be stated; "
        f"undecided: {labels.counts['undecided']}"
    )
    assert labels.table.attrs["metadata"]["more_audited_answers_needed"] is None


def test_turning_audits_off_after_a_lot_was_frozen_stops_the_audits_and_says_so(bench):
    answer_served(bench, 4)
    assert stored_lots(bench)
    change_label_settings(bench.session_factory, "s", audit_share=0.0)
    bench.refresh()
    np.testing.assert_array_equal(bench.queue(), bench.ranked_queue())
    labels = bench.labels()
    assert labels.summary.audit_share == 0.0 and labels.counts["model"] == 0
    assert "audits are off (audit share 0)" in labels.statement
    assert "more audited answers" not in labels.statement


def test_settings_through_the_service(bench):
    assert stored_lots(bench)[0].target == 0.05  # frozen at the first read, before the change
    assert session_label_settings(bench.session_factory, "s") == LabelSettings(audit_share=0.5)
    assert change_label_settings(bench.session_factory, "s", max_error=0.1) == LabelSettings(0.1, 0.9, 0.5)
    bench.refresh()
    assert bench.label_settings.max_error == 0.1
    labels = bench.labels()
    lot = stored_lots(bench)[0]
    # The lot keeps the target its prior was frozen with; its certification uses the new one.
    assert lot.target == 0.05 and labels.summary.target == 0.1
    assert "at most 10% wrong" not in labels.statement  # nothing certified yet


# ------------------------------------------------------------------------------ served order


def test_served_order_is_a_permutation_whose_prefixes_agree():
    """On random ranked queues, audit queues and shares: every ranked item is served once, the
    audit slots serve the audit queue's head in order where the uniforms fall below the share,
    and a shorter view is a prefix of the full one."""
    rng = np.random.default_rng(1)
    for case in range(300):
        n = int(rng.integers(1, 40))
        items = rng.permutation(n)
        ranked = items[: int(rng.integers(0, n + 1))]
        queue = rng.permutation(items)[: int(rng.integers(0, n + 1))]
        base = int(rng.integers(0, 5))
        share = float(rng.choice([0.0, 0.2, 0.5]))
        u = np.random.default_rng(case).random(200)

        def uniforms(m, u=u):
            return u[:m]

        full = served_order(ranked, queue, base=base, audit_share=share, uniforms=uniforms)
        a = int(full.audit.sum())
        assert full.positions[full.audit].tolist() == queue[:a].tolist()
        assert len(set(full.positions.tolist())) == full.positions.size
        assert set(full.positions.tolist()) == set(ranked.tolist()) | set(queue[:a].tolist())
        rest = [p for p in ranked.tolist() if p not in set(queue[:a].tolist())]
        assert full.positions[~full.audit].tolist() == rest[: (~full.audit).sum()]
        if share == 0.0 or queue.size == 0:
            assert a == 0 and full.positions.tolist() == ranked.tolist()
        else:
            flags = u[base : base + full.positions.size] < share
            assert not (full.audit & ~flags).any()  # an audit only in an audit slot
            if a < queue.size:  # the queue is not used up: every audit slot serves it
                np.testing.assert_array_equal(full.audit, flags)
        for top in (1, 3, 10):
            head = served_order(ranked, queue, base=base, audit_share=share, uniforms=uniforms, top=top)
            assert head.positions.tolist() == full.positions[:top].tolist()
            assert head.audit.tolist() == full.audit[:top].tolist()


def summary_of(**given) -> LabelSummary:
    """A LabelSummary with the values a statement reads; the rest as before any lot."""
    values = {
        "target": 0.05,
        "confidence": 0.9,
        "model_labels": 0,
        "error_bound": None,
        "audited": 0,
        "audits_total": 0,
        "lots": 0,
        "active_lot_size": 0,
        "audits_left": -1,
        "audit_share": 0.0,
        "open_items": 0,
    }
    names = set(LabelSummary.__dataclass_fields__)
    if "promise" in names:
        values["promise"] = "confidence"
    values.update(given)
    return LabelSummary(**{k: v for k, v in values.items() if k in names})


def test_statement_strings():
    certified = summary_of(
        model_labels=612,
        error_bound=0.041,
        audited=61,
        audits_total=61,
        lots=1,
        audits_left=-1,
        audit_share=0.05,
        open_items=211,
    )
    assert label_statement({"model": 612, "undecided": 211}, certified) == (
        "model labels: 612, at most 5% wrong, with 90% confidence (bound now 4.1%, from 61 audited answers); "
        "undecided: 211"
    )
    waiting = summary_of(
        audited=3, audits_total=3, lots=1, active_lot_size=402, audits_left=49, audit_share=0.5, open_items=520
    )
    assert label_statement({"model": 0, "undecided": 520}, waiting) == (
        "model labels: none yet — the first 402 the model would label need at least 49 more audited answers, "
        "all right (about 98 answers at the current audit share of 50%); undecided: 520"
    )
    failing = replace(waiting, audited=0, audits_total=24, failing=(2, 24))
    assert label_statement({"model": 0, "undecided": 520}, failing) == (
        "model labels: none yet — the first 402 the model would label need at least 49 more audited answers, "
        "all right (about 98 answers at the current audit share of 50%); their audits found 2 wrong in 24, more "
        "than half the target, so winnow looks in them for a cleaner lot the model is surer of; undecided: 520"
    )
    crowd = label_statement({"model": 0, "undecided": 10, "crowd": 7}, waiting)
    assert crowd.endswith(
        "; undecided: 10; crowd labels: 7 (single labels left by the votes; their error is not measured)"
    )
    done = summary_of()
    assert (
        label_statement({"model": 0, "undecided": 0}, done)
        == "model labels: none yet — nothing is left open; undecided: 0"
    )
    # A certified lot still audited (nothing more to wait for): no "at least 0 more audited answers".
    certified = {
        "model_labels": 261,
        "error_bound": 0.0498,
        "audited": 90,
        "audits_total": 90,
        "lots": 1,
        "active_lot_size": 414,
        "audits_left": 0,
    }
    still = summary_of(**certified, audit_share=0.05)
    assert label_statement({"model": 261, "undecided": 0}, still) == (
        "model labels: 261, at most 5% wrong, with 90% confidence (bound now 5.0%, from 90 audited answers) — "
        "nothing is left open; undecided: 0"
    )
    off = summary_of(audits_total=12, lots=1, active_lot_size=402, audits_left=49, open_items=520, audits_off=True)
    assert label_statement({"model": 0, "undecided": 520}, off) == (
        "model labels: none yet — audits are off (audit share 0): no model label can be stated; undecided: 520"
    )
    off_after = summary_of(**certified, open_items=30, audits_off=True)
    assert label_statement({"model": 261, "undecided": 30}, off_after) == (
        "model labels: 261, at most 5% wrong, with 90% confidence (bound now 5.0%, from 90 audited answers); "
        "audits are off (audit share 0): no more model labels can be stated; undecided: 30"
    )
    # No lot yet although audits are on (too few items the model would label): not "audits are off".
    none_yet = summary_of(open_items=15)
    assert label_statement({"model": 0, "undecided": 15}, none_yet) == "model labels: none yet; undecided: 15"


def test_label_studio_tasks_leave_out_the_model_labels_of_the_lot_being_audited(tmp_path):
    """Annotators open the tasks in Label Studio: a model label there would be the answer to the
    audit it checks. The labelled CSV (reviewers and admins) keeps them."""
    db = tmp_path / "w.db"
    bench = open_bench(db, key=bytes(range(32)), texts=True)
    answer_until_certified(bench)
    model = bench.labelled_table()["label_source"].to_numpy() == "model"
    withheld = model & bench.items_being_audited()
    assert withheld.any()  # a certified lot goes on being audited
    files = export_label_studio(bench, tmp_path / "tasks.json", actor=None)
    tasks = {t["data"]["id"]: t for t in json.loads(files.tasks.read_text())}
    ids = bench.state.external_ids
    assert files.n_withheld == int(withheld.sum())
    assert files.n_predictions == int((model & ~withheld).sum())
    for p in np.flatnonzero(withheld):
        task = tasks[ids[p]]
        assert task["predictions"] == [] and task["meta"]["winnow"]["label"] is None
        assert task["meta"]["winnow"]["label_source"] == "undecided"
    said = run_winnow(
        "export", "s", "--what", "labelled", "--format", "label-studio", "-o", tmp_path / "cli.json", "--db", db
    ).stdout
    assert f"{int(withheld.sum())} model labels of the lot still being audited are written as undecided" in said
    # With audits off no audit is pending: they go out as predictions.
    change_label_settings(bench.session_factory, "s", audit_share=0.0)
    bench = Workbench.open(bench.session_factory, bench.session_id)
    files = export_label_studio(bench, tmp_path / "off.json", actor=None)
    assert files.n_withheld == 0 and files.n_predictions == int(model.sum())


def test_a_command_that_only_reads_leaves_a_failing_lot_to_the_next_answer(bench, monkeypatch):
    truth = bench.state.true_labels
    wrong = 0
    for _ in range(ANSWER_BUDGET):  # the first two audits answered wrong: after 20, the lot fails
        now = lots_of(bench)
        if now.failing:
            break
        p = int(bench.queue(top=1)[0])
        in_lot = [lot for lot in now.lots if p in lot.positions]
        label = int(truth[p])
        if in_lot and wrong < 2:  # another candidate than the frozen label
            wrong += 1
            frozen = int(in_lot[-1].labels[in_lot[-1].positions == p][0])
            label = int(np.flatnonzero(bench.state.candidates[p] & (np.arange(len(LABELS)) != frozen))[0])
        bench.record("ann", "answer", position=p, label=label, displayed="query")
    assert lots_of(bench).failing
    fitted = []
    real = lots_module.linear_decisions
    monkeypatch.setattr(lots_module, "linear_decisions", lambda *a, **k: fitted.append(1) or real(*a, **k))
    before = len(stored_lots(bench))
    reader = Workbench.open(bench.session_factory, bench.session_id, fits_lot_models=False)
    reader.queue(top=1)
    assert reader.labels().summary.failing is not None and not fitted
    assert len(stored_lots(reader)) == before
    Workbench.open(bench.session_factory, bench.session_id).queue(top=1)
    assert fitted  # an answering process looks for a cleaner lot
