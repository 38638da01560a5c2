"""The labelled dataset a session hands back (issues 20, 28 and 42) through the service layer:
label sources and counts, model labels only from certified sets, the app running the very loop
the replay runs (the same lots, audits and served order, item for item), audits nobody can find
by skipping or steer by undoing, a promise kept with its lot, statement strings."""

from __future__ import annotations

import json
import math

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
from app.service.delivery import LABEL_SOURCES, LabelSummary, label_statement
from app.store import (
    LabelSettings,
    SessionSpec,
    create_dataset,
    create_labelling_session,
    label_settings_history,
    open_store,
    stored_audit_secret,
    write_transaction,
)
from app.store.labels import AUDIT_ORDER_KEY
from app.store.models import StoreSecret
from benchmarks.replay_lots import Campaign, Pool
from engine.labelling_loop import LoopSettings, served_order, slot_uniforms
from engine.loop_design import DESIGN
from engine.promises import ConfidencePromise
from tests.cli.conftest import ROOT, run_winnow

N_PER_CLASS = 200
LABELS = ["a", "b", "c"]
#: Answers after which the first set on the synthetic set must be certified.
ANSWER_BUDGET = 300


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
    when given), under ``promise``."""
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
    return open_bench(tmp_path / "w.db", key=bytes(range(32)))


def answer_served(bench: Workbench, n: int) -> None:
    """Answer the next ``n`` served items with their true labels, as the Query page does."""
    truth = bench.state.true_labels
    for _ in range(n):
        p = int(bench.queue(top=1)[0])
        bench.record("ann", "answer", position=p, label=int(truth[p]), displayed="query")


def answer_until_stated(bench: Workbench) -> None:
    for _ in range(ANSWER_BUDGET):
        if bench.labels().counts["model"]:
            return
        answer_served(bench, 1)
    raise AssertionError(f"no model label after {ANSWER_BUDGET} answers: {bench.labels().statement}")


def secret_of(bench: Workbench) -> bytes:
    with bench.session_factory() as s:
        secret = stored_audit_secret(s)
    assert secret is not None and len(secret) == 32
    return secret


def expected_served_order(bench: Workbench):
    """The served order as the store's key and the loop say it."""
    st = bench.state
    ranked = bench.ranked_queue()
    return served_order(
        ranked,
        bench.loop().audit_queue(st.answered, st.skipped),
        base=int(np.asarray(st.answered).sum() + np.asarray(st.skipped).sum()),
        audit_share=bench.label_settings.audit_share,
        uniforms=lambda n: slot_uniforms(secret_of(bench), bench.session_id, n),
        skipped_at_end=int(np.asarray(st.skipped)[ranked].sum()),
    )


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
    lot = bench.loop().active.lot
    assert lot.number == 1 and lot.items.size >= 20
    assert np.asarray(bench.state.open_items)[lot.items].all()
    assert isinstance(lot.promise, ConfidencePromise) and lot.promise.target == 0.05
    summary = labels.summary
    assert (summary.lots, summary.active_lot_size, summary.lot_ends_in) == (1, lot.items.size, DESIGN.lot_answers)
    assert summary.error_bound is None and summary.model_labels == 0 and labels.n_audited == 0
    assert labels.statement == (
        f"model labels: none yet — 50% of the served items are audits of the model's labels on {lot.items.size} "
        f"items, for at most {DESIGN.lot_answers} more answers; undecided: {int((~singles).sum())}"
    )
    table = labels.table
    assert list(table.columns[:6]) == ["id", "candidates", "n_candidates", "label", "label_source", "model_margin"]
    np.testing.assert_array_equal(table["label_source"].to_numpy() == "given", singles)
    assert table.loc[~singles, "label"].isna().all() and table["model_margin"].isna().all()
    meta = table.attrs["metadata"]
    assert meta["statement_confidence"] == 0.9 and meta["target_error"] == 0.05 and meta["audited_answers"] == 0
    assert meta["lots"] == 1 and meta["stated_error_bound"] is None and meta["statement"] == labels.statement


def test_model_labels_arrive_from_a_certified_set_with_its_frozen_labels(bench):
    answer_until_stated(bench)
    labels = bench.labels()
    loop = bench.loop()
    table = labels.table
    model = table["label_source"].to_numpy() == "model"
    assert model.sum() == labels.counts["model"] == labels.summary.model_labels > 0
    member, frozen, _ = loop.delivered(bench.state.n_instances)
    answered = np.asarray(bench.state.answered)
    np.testing.assert_array_equal(model, member & ~answered)
    assert table["label"].to_numpy()[model].tolist() == [LABELS[f] for f in frozen[model]]
    summary = labels.summary
    assert summary.stated == int(member.sum()) and summary.error_bound <= 0.05
    assert labels.statement.startswith(f"model labels: {labels.counts['model']} — these")
    assert "at most 5% wrong, with 90% confidence" in labels.statement and "assumed right" in labels.statement
    np.testing.assert_array_equal(table["label_source"].to_numpy() == "expert", answered)
    assert sum(labels.counts.values()) == bench.state.n_instances
    truth = np.asarray(LABELS, dtype=object)[bench.state.true_labels[model]]
    assert (table.loc[model, "label"].to_numpy() == truth).mean() >= 0.95


def test_no_audit_still_to_answer_has_a_model_label_in_the_download(bench):
    """Whoever is served audits (a reviewer or admin may also download) never finds the model's
    label of an audit still to answer in the labelled data (issue 44, item 4)."""
    truth = bench.state.true_labels
    seen_audits = 0
    for _ in range(160):
        order = expected_served_order(bench)
        pending = order.positions[order.audit]
        seen_audits += pending.size > 0
        source = bench.labels().table["label_source"].to_numpy()
        assert not (source[pending] == "model").any()
        p = int(order.positions[0])
        bench.record("ann", "answer", position=p, label=int(truth[p]), displayed="query")
    assert seen_audits > 100 and bench.labels().counts["model"] > 0  # audits served, labels stated


def test_undecided_items_are_exactly_those_the_rejects_page_lists(bench):
    answer_until_stated(bench)
    open_now = np.flatnonzero(bench.state.open_items)
    bench.record("ann", "none_of_these", position=int(open_now[0]))
    p = int(open_now[1])
    a, b = np.flatnonzero(bench.state.candidates[p])[:2]
    bench.record("ann", "answer", position=p, label=int(a))
    bench.record("bob", "answer", position=p, label=int(b))
    src = bench.labels().table["label_source"].to_numpy()
    assert (src == "model").any() and (src == "undecided").any()
    queue = bench.rejects()
    listed = set(queue.positions[~queue.accepted].tolist()) | {c.position for c in bench.state.conflicts}
    assert listed == set(np.flatnonzero(src == "undecided").tolist())
    assert set(queue.positions[queue.accepted].tolist()) == set(np.flatnonzero(src == "model").tolist())


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
    assert singles.any() and labels.counts["crowd"] == int(singles.sum()) and labels.counts["given"] == 0
    assert labels.statement.endswith(
        f"; crowd labels: {int(singles.sum())} (single labels left by the votes; their error is not measured)"
    )


# ------------------------------------------------------------------------------ one loop


def test_the_app_runs_the_loop_the_replay_runs_item_for_item(bench):
    """A scripted campaign (answers, skips, undos, a wrong answer undone) played on the app and on
    the replay's Campaign with the store's key: after every step the same lots, the same verdicts,
    the same statement and the same served order."""
    st = bench.state
    pool = Pool(np.asarray(st.X), np.asarray(st.original_candidates), np.asarray(st.true_labels), bench.graph.idx, None)
    replayed = Campaign(pool, LoopSettings(audit_share=0.5), key=secret_of(bench), session=bench.session_id)
    truth = st.true_labels
    rng = np.random.default_rng(5)
    for step in range(120):
        move = rng.choice(["answer"] * 6 + ["skip", "undo", "wrong"])
        p = int(bench.queue(top=1)[0])
        if move == "undo":
            if replayed._history:
                bench.record("ann", "undo")
                replayed.undo()
        elif move == "skip":
            bench.record("ann", "skip", position=p, displayed="query")
            replayed.skip(p)
        else:
            label = int(truth[p]) if move == "answer" else int(np.flatnonzero(pool.Y[p])[-1])
            bench.record("ann", "answer", position=p, label=label, displayed="query")
            replayed.answer(p, label)
        app_loop, replay_loop = bench.loop(), replayed.loop()
        assert [s.lot.items.tolist() for s in app_loop.lots] == [s.lot.items.tolist() for s in replay_loop.lots]
        assert [s.verdicts for s in app_loop.lots] == [s.verdicts for s in replay_loop.lots], step
        assert app_loop.checkpoint == replay_loop.checkpoint
        served = replayed.served(bench.ranked_queue(), replay_loop, top=30)
        np.testing.assert_array_equal(bench.queue(top=30), served.positions)
    assert sum(s.audited for s in bench.loop().lots) > 5  # audits were served and read


def test_every_view_and_process_serves_the_same_audits_in_the_same_slots(bench, tmp_path):
    served = bench.queue()
    assert np.unique(served).size == served.size
    assert np.array_equal(bench.queue(top=10), served[:10])
    expected = expected_served_order(bench)
    np.testing.assert_array_equal(expected.positions, served)
    assert 0 < expected.audit.sum() < served.size
    assert np.isin(served[expected.audit], bench.loop().active.lot.items).all()
    np.testing.assert_array_equal(Workbench.open(bench.session_factory, bench.session_id).queue(), served)
    ids = np.asarray(bench.state.external_ids)
    assert bench.ranked_table()["id"].tolist() == ids[served].tolist()
    db = bench.session_factory.kw["bind"].url.database
    status = run_winnow("session", "status", "s", "--db", db, "--json", "--top", "8").stdout
    assert [q["id"] for q in json.loads(status)["next"]] == ids[served[:8]].tolist()
    run_winnow("export", "s", "--what", "ranked", "-o", tmp_path / "ranked.csv", "--db", db)
    assert pd.read_csv(tmp_path / "ranked.csv", dtype=str)["id"].tolist() == ids[served].tolist()


def test_two_stores_audit_the_same_dataset_in_different_orders(tmp_path, random_audit_key):
    one, two = open_bench(tmp_path / "one.db"), open_bench(tmp_path / "two.db")
    assert secret_of(one) != secret_of(two)
    lot_one, lot_two = one.loop().active.lot, two.loop().active.lot
    assert sorted(lot_one.items.tolist()) == sorted(lot_two.items.tolist())
    assert lot_one.items.tolist() != lot_two.items.tolist()
    assert one.queue().tolist() != two.queue().tolist()


# ------------------------------------------------------------------------------ attacks


def separation_p_value(values: pd.Series, audit: np.ndarray) -> float:
    """How surely a column's values tell the audit rows from the others (1.0: it holds nothing)."""
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
    assert audit.sum() > 20 and (~audit).sum() > 20 and bench.lot_audits_served()
    ranked = bench.ranked_table()
    assert ranked["score"].isna().all() and ranked["open_targets_touched"].isna().all()
    # Where audits are served at all (up to the last audit slot), nothing winnow adds tells them
    # apart (the other columns are the items themselves: audits are drawn among the items the
    # model labels, so they may look easier than the ranked ones).
    mixed = slice(0, int(np.flatnonzero(audit)[-1]) + 1)
    for column in ("rank", "score", "open_targets_touched"):
        assert separation_p_value(ranked[column].iloc[mixed], audit[mixed]) > 0.001, column
    for position in (served[audit][0], served[~audit][0]):
        why = bench.explain(int(position))
        assert why.withheld and math.isnan(why.score) and not why.effects and why.example is None


def test_skip_look_undo_finds_no_audit(bench):
    """The attack: skip the item on screen, look where it comes back in the ranked export, undo.
    Every skipped item comes back last, audit or not, and the undo restores the order."""
    answer_served(bench, 3)
    places = {True: [], False: []}
    for _ in range(30):
        order = expected_served_order(bench)
        p, is_audit = int(order.positions[0]), bool(order.audit[0])
        bench.record("ann", "skip", position=p, displayed="query")
        served = bench.queue()
        places[is_audit].append(int(np.flatnonzero(served == p)[0]) - served.size)
        bench.record("ann", "undo")
        np.testing.assert_array_equal(bench.queue(), order.positions)
        answer_served(bench, 1)
    assert places[True] and places[False]
    assert set(places[True]) == set(places[False]) == {-1}


def test_answer_undo_answer_changes_no_verdict_and_no_statement(tmp_path):
    """The attack: answer an item, undo, try another label, read the statement each time. The lot
    reads the first answer, so the statement and the verdicts are those of the honest run."""
    honest, prober = (
        open_bench(tmp_path / "h.db", key=bytes(range(32))),
        open_bench(tmp_path / "p.db", key=bytes(range(32))),
    )
    truth = honest.state.true_labels
    for _ in range(130):
        for bench, probe in ((honest, False), (prober, True)):
            p = int(bench.queue(top=1)[0])
            bench.record("ann", "answer", position=p, label=int(truth[p]), displayed="query")
            if probe:
                before = bench.label_statement().statement
                for other in np.flatnonzero(bench.state.original_candidates[p]):
                    bench.record("ann", "undo")
                    bench.record("ann", "answer", position=p, label=int(other))
                    assert bench.label_statement().statement == before
                bench.record("ann", "undo")
                bench.record("ann", "answer", position=p, label=int(truth[p]))
        assert honest.label_statement().statement == prober.label_statement().statement
        assert [s.verdicts for s in honest.loop().lots] == [s.verdicts for s in prober.loop().lots]
    assert honest.labels().counts["model"] > 0


def test_a_promise_is_kept_with_its_lot_and_a_change_applies_to_later_lots(bench):
    answer_served(bench, 40)
    before = bench.labels()
    lot = bench.loop().lots[0].lot
    change_label_settings(bench.session_factory, "s", promise="average", max_error=0.2)
    bench.refresh()
    after = bench.labels()
    assert bench.loop().lots[0].lot.promise == lot.promise and isinstance(lot.promise, ConfidencePromise)
    assert after.counts == before.counts and after.summary.stated == before.summary.stated
    assert bench.label_settings.promise == "average"  # in force for the lots frozen from now on
    with bench.session_factory() as s:
        history = label_settings_history(s, bench.session_id)
    # Recorded after the answers given so far: the lots frozen before keep their settings.
    assert history[-1][1].promise == "average" and history[-1][0] > history[0][0] == 0


def test_with_audit_share_zero_nothing_is_audited_and_the_statement_says_so(tmp_path):
    bench = open_bench(tmp_path / "w.db", audit_share=0.0)
    np.testing.assert_array_equal(bench.queue(), bench.ranked_queue())
    answer_served(bench, 20)
    labels = bench.labels()
    assert labels.counts["model"] == 0 and labels.counts["expert"] == 20
    assert "audits are off (audit share 0%): no more model labels can be stated" in labels.statement


def test_settings_through_the_service(bench):
    assert session_label_settings(bench.session_factory, "s") == LabelSettings(audit_share=0.5)
    assert change_label_settings(bench.session_factory, "s", max_error=0.1) == LabelSettings(0.1, 0.9, 0.5)
    bench.refresh()
    assert bench.label_settings.max_error == 0.1


def summary_of(**given) -> LabelSummary:
    values = {
        "target": 0.05,
        "confidence": 0.9,
        "promise": "confidence",
        "model_labels": 0,
        "stated": 0,
        "error_bound": None,
        "audited": 0,
        "lots": 0,
        "active_lot_size": 0,
        "lot_ends_in": None,
        "audit_share": 0.5,
        "open_items": 0,
    }
    values.update(given)
    return LabelSummary(**values)


def test_statement_strings():
    stated = summary_of(model_labels=612, stated=640, error_bound=0.041, audited=61, lots=1, open_items=211)
    assert label_statement({"model": 612, "undecided": 211}, stated) == (
        "model labels: 612 — these and the 28 expert answers on the same items are at most 5% wrong, with 90% "
        "confidence (bound now 4.1%, from 61 audited answers, assumed right); undecided: 211"
    )
    average = summary_of(
        promise="average", model_labels=300, stated=300, audited=30, lots=2, active_lot_size=120, lot_ends_in=12
    )
    assert label_statement({"model": 300, "undecided": 5}, average) == (
        "model labels: 300 — these are at most 5% wrong on average (from 30 audited answers, assumed right); "
        "50% of the served items are audits of the model's labels on 120 more items, for at most 12 more answers; "
        "undecided: 5"
    )
    waiting = summary_of(open_items=15, lot_ends_in=40)
    assert label_statement({"model": 0, "undecided": 15}, waiting) == (
        "model labels: none yet — the model is sure of too few open items to check; winnow looks again in 40 "
        "answers; undecided: 15"
    )
    assert label_statement({"model": 0, "undecided": 0}, summary_of()) == (
        "model labels: none yet — nothing is left open; undecided: 0"
    )
    crowd = label_statement({"model": 0, "undecided": 10, "crowd": 7}, summary_of(open_items=10))
    assert crowd.endswith("; crowd labels: 7 (single labels left by the votes; their error is not measured)")


def test_label_studio_tasks_leave_out_the_model_labels_of_the_lot_being_audited(tmp_path):
    """Annotators open the tasks in Label Studio: a model label there would be the answer to the
    audit it checks. The labelled CSV (reviewers and admins) keeps them."""
    db = tmp_path / "w.db"
    bench = open_bench(db, key=bytes(range(32)), texts=True)
    answer_until_stated(bench)
    model = bench.labelled_table()["label_source"].to_numpy() == "model"
    withheld = model & bench.items_being_audited()
    assert withheld.any()  # a certified set's lot goes on being audited
    files = export_label_studio(bench, tmp_path / "tasks.json", actor=None)
    tasks = {t["data"]["id"]: t for t in json.loads(files.tasks.read_text())}
    ids = bench.state.external_ids
    assert files.n_withheld == int(withheld.sum())
    assert files.n_predictions == int((model & ~withheld).sum())
    for p in np.flatnonzero(withheld):
        task = tasks[ids[p]]
        assert task["predictions"] == [] and task["meta"]["winnow"]["label"] is None
