"""A failing lot gives way to a clearly cleaner one, chosen by the score that lets in most items, and a
lot whose items a later lot took again is never certified (app.service.lots), on hand-made lots where
every outcome is known; the scores of audited items do not depend on their own answers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.service.lots import (
    ESTIMATED_ERROR_SHARE,
    FAILING_MIN_AUDITS,
    FIRST_LOT_LEARNING_AUDITS,
    FIRST_STATEMENT_AUDIT_SHARE,
    ItemStatus,
    SelectionScore,
    failing,
    freeze_lot,
    lot_items_in_audit_order,
    lots_now,
    selection_scores,
)
from app.store import LabelLotRecord, LabelSettings
from engine.dst_evidence import transductive_decisions
from engine.learners import EmLogisticPllClassifier
from engine.lots import LotVerdict, lot_alpha

N_ITEMS = 1_000
N_LABELS = 2
SETTINGS = LabelSettings(max_error=0.05, audit_share=0.05)


def verdict(audited: int, errors: int, *, certified: bool = False) -> LotVerdict:
    return LotVerdict(500, audited, errors, errors, 500 - audited, 0, 0, 1.0, certified, False, 10)


@pytest.mark.parametrize(
    ("audited", "errors", "certified", "expected"),
    [
        (FAILING_MIN_AUDITS, 1, False, True),  # 5 % wrong: more than half the 5 % target
        (FAILING_MIN_AUDITS - 1, 1, False, False),  # too few audits to say
        (40, 1, False, False),  # 2.5 %: exactly half the target is not more
        (41, 2, False, True),
        (FAILING_MIN_AUDITS, 1, True, False),  # a certified lot is delivering, not failing
    ],
)
def test_a_lot_fails_when_its_audits_are_more_than_half_the_target_wrong(audited, errors, certified, expected):
    assert failing(verdict(audited, errors, certified=certified), 0.05) is expected


def test_under_the_average_promise_the_sampling_plan_ends_a_lot_not_failing():
    assert failing(verdict(41, 2), 0.05, "confidence")
    assert not failing(verdict(41, 2), 0.05, "average")


def make_lot(number: int, positions: np.ndarray, threshold: float = 1e-9) -> LabelLotRecord:
    positions = np.asarray(positions, dtype=np.int64)
    return LabelLotRecord(
        number=number,
        positions=positions,
        labels=np.zeros(positions.size, dtype=np.int64),  # every frozen label says 0
        margins=np.full(positions.size, 0.5),
        alpha=lot_alpha(0.1, number),
        target=0.05,
        threshold=threshold,
        after_event_id=0,
    )


def status(right: np.ndarray, wrong: np.ndarray) -> ItemStatus:
    """Every item open with both labels as candidates, except the answered ones: ``right`` were
    answered 0 (the frozen label), ``wrong`` were answered 1."""
    candidates = np.ones((N_ITEMS, N_LABELS), dtype=bool)
    candidates[right, 1] = False
    candidates[wrong, 0] = False
    answered = np.zeros(N_ITEMS, dtype=bool)
    answered[right] = answered[wrong] = True
    nothing = np.zeros(N_ITEMS, dtype=bool)
    return ItemStatus(candidates, answered, nothing, nothing, ~answered)


def first_lot_audited(right: int, wrong: int) -> tuple[LabelLotRecord, ItemStatus]:
    """A lot of the first 600 items, whose audit prefix holds ``wrong`` wrong labels first."""
    lot = make_lot(1, np.arange(600))
    order = lot.positions
    return lot, status(order[wrong : wrong + right], order[:wrong])


def freeze(lot, items, learned, margins):
    now = lots_now([lot], items, SETTINGS)
    return now, freeze_lot(
        now,
        items,
        np.zeros(N_ITEMS, dtype=np.int64),
        margins,
        SETTINGS,
        scores=[SelectionScore("dst_margin", margins, learned)],
        secret=b"k" * 32,
        session_id=1,
        last_event_id=1,
    )


def test_a_failing_lot_is_still_audited_until_a_clearly_cleaner_lot_replaces_it():
    lot, items = first_lot_audited(right=36, wrong=4)  # 10 % wrong on 40 audits
    margins = np.linspace(0.0, 1.0, N_ITEMS)
    now = lots_now([lot], items, SETTINGS)
    assert now.failing and now.active == 0 and now.new_lot_due
    assert now.audit_share(SETTINGS) == 0.5  # audits go on at the first statement's share

    # The audits rescored: the four wrong ones low, so the learned threshold sits above them.
    m = np.r_[np.full(4, 0.2), np.linspace(0.6, 1.0, 36)]
    right = np.r_[np.zeros(4, dtype=bool), np.ones(36, dtype=bool)]
    _, fresh = freeze(lot, items, (m, right), margins)
    assert fresh is not None and fresh.number == 2
    assert fresh.threshold > lot.threshold and (margins[fresh.positions] >= fresh.threshold).all()
    assert not items.answered[fresh.positions].any()
    after = lots_now([lot, fresh], items, SETTINGS)
    assert after.active == 1 and not after.failing

    # Clean above, but fewer than FAILING_MIN_AUDITS audited items there: no new lot.
    m_few = np.r_[np.full(40 - FAILING_MIN_AUDITS + 1, 0.2), np.linspace(0.6, 1.0, FAILING_MIN_AUDITS - 1)]
    right_few = m_few > 0.5
    assert freeze(lot, items, (m_few, right_few), margins)[1] is None


def test_a_lot_that_is_not_failing_is_not_replaced():
    lot, items = first_lot_audited(right=40, wrong=0)
    m, right = np.linspace(0.6, 1.0, 40), np.ones(40, dtype=bool)
    now, fresh = freeze(lot, items, (m, right), np.linspace(0.0, 1.0, N_ITEMS))
    assert not now.failing and not now.new_lot_due and fresh is None


def test_a_lot_whose_items_a_later_lot_took_again_is_never_certified():
    # 80 right audits certify a lot of 600 on their own (lot_verdict's doctest certifies 400 on 75).
    lot, items = first_lot_audited(right=80, wrong=0)
    assert lots_now([lot], items, SETTINGS).verdicts[0].certified
    overlapping = make_lot(2, np.arange(500, 900), threshold=0.5)
    now = lots_now([lot, overlapping], items, SETTINGS)
    assert not now.verdicts[0].certified and now.verdicts[0].audits_left == -1
    kept, _, _ = now.delivered(N_ITEMS)
    assert not kept.any()
    disjoint = make_lot(2, np.arange(600, 900), threshold=0.5)
    now = lots_now([lot, disjoint], items, SETTINGS)
    assert now.verdicts[0].certified
    kept, _, _ = now.delivered(N_ITEMS)
    assert kept.sum() == 600 - 80 and kept[lot.positions[80:]].all()


def test_a_lot_above_a_higher_threshold_but_nearly_as_wrong_does_not_replace_a_failing_one():
    lot, items = first_lot_audited(right=58, wrong=2)  # 3.3 % wrong on 60 audits: failing
    assert lots_now([lot], items, SETTINGS).failing
    m = np.linspace(0.3, 1.0, 60)
    right = np.ones(60, dtype=bool)
    right[[0, 55]] = False  # one wrong at the bottom, one near the top
    # The learned threshold drops the bottom one; above it 1 of 59 are wrong (1.7 %), more than
    # half the failing lot's 3.3 %: the failing lot goes on.
    assert freeze(lot, items, (m, right), np.linspace(0.0, 1.0, N_ITEMS))[1] is None
    right[55] = True  # now clean above: it replaces the failing lot
    assert freeze(lot, items, (m, right), np.linspace(0.0, 1.0, N_ITEMS))[1] is not None


def test_the_next_lot_is_chosen_by_the_score_that_lets_in_most_items_and_keeps_dst_labels():
    lot, items = first_lot_audited(right=36, wrong=4)  # failing
    margins = np.linspace(0.0, 1.0, N_ITEMS)
    labels = np.arange(N_ITEMS) % N_LABELS
    # The same 40 audits under two scores: DST-PLL's margin puts the 4 wrong ones at the top,
    # the other score at the bottom, so its learned threshold lets in far more items.
    right = np.r_[np.zeros(4, dtype=bool), np.ones(36, dtype=bool)]
    dst = SelectionScore("dst_margin", margins, (np.r_[np.full(4, 0.99), np.linspace(0.1, 0.9, 36)], right))
    other_items = np.linspace(1.0, 0.0, N_ITEMS)
    other = SelectionScore("agreement", other_items, (np.r_[np.full(4, 0.05), np.linspace(0.2, 1.0, 36)], right))
    now = lots_now([lot], items, SETTINGS)

    def freeze_with(scores):
        return freeze_lot(
            now, items, labels, margins, SETTINGS, scores=scores, secret=b"k" * 32, session_id=1, last_event_id=1
        )

    fresh = freeze_with([dst, other])
    assert fresh is not None
    assert (other_items[fresh.positions] >= fresh.threshold).all()
    expected = np.flatnonzero(items.open_items & ~items.answered & (other_items >= fresh.threshold))
    np.testing.assert_array_equal(np.sort(fresh.positions), expected)
    # Its labels and kept margins are DST-PLL's, whatever score chose the items.
    np.testing.assert_array_equal(fresh.labels, labels[fresh.positions])
    np.testing.assert_array_equal(fresh.margins, margins[fresh.positions])
    # DST-PLL's margin alone finds no clearly cleaner lot: the failing lot goes on.
    assert freeze_with([dst]) is None


def grouped_problem(seed: int):
    """Items in groups of five that share a candidate set {truth, distractor} and are each
    other's only neighbours (the segments of one recording): the neighbour vote ties, but the
    features (one centre per label) tell the labels apart."""
    rng = np.random.default_rng(seed)
    n_labels, n = 4, 400
    truth = np.repeat(rng.integers(0, n_labels, n // 5), 5)
    distractor = (truth + rng.integers(1, n_labels, n // 5).repeat(5)) % n_labels
    X = np.eye(n_labels)[truth] * 3.0 + rng.normal(0.0, 1.0, (n, n_labels))
    original = np.zeros((n, n_labels), dtype=bool)
    original[np.arange(n), truth] = original[np.arange(n), distractor] = True
    labelled = rng.random(n) < 0.2
    original[labelled] = False
    original[labelled, truth[labelled]] = True
    group = np.arange(n) // 5 * 5
    idx = group[:, None] + (np.arange(n)[:, None] - group[:, None] + np.arange(1, 5)) % 5
    return X, original, truth, idx


@given(seed=st.integers(0, 1_000), n_audited=st.integers(1, 30))
@settings(max_examples=15, deadline=None)
def test_an_audited_item_is_scored_without_its_own_answer(seed, n_audited):
    X, original, truth, idx = grouped_problem(seed)
    partial = np.flatnonzero(original.sum(axis=1) > 1)
    audited = np.random.default_rng(seed).choice(partial, min(n_audited, partial.size), replace=False)
    labels, _, margins = transductive_decisions(original, idx, random_state=0)
    first, answers = audited[0], truth[audited]

    def scored(answer_of_first):
        current = original.copy()
        current[audited] = False
        current[audited, np.r_[answer_of_first, answers[1:]]] = True
        return selection_scores(lambda: X, original, current, idx, audited, labels, margins)

    candidates = np.flatnonzero(original[first])
    by_answer = [scored(answer) for answer in candidates]
    assert {len(scores) for scores in by_answer} <= {1, 2}
    # Its own scores whatever its answer (another audit's may move: it has this one among its
    # neighbours, whose answers count).
    for under_one, under_other in zip(*by_answer, strict=False):
        assert under_one.learned[0][0] == under_other.learned[0][0]
    # Whether the audit is right follows its answer: right under exactly one of the two answers.
    right_first = [scores[0].learned[1][0] for scores in by_answer]
    assert sum(right_first) == 1


def test_the_agreement_score_is_the_linear_margin_where_both_models_name_the_label():
    X, original, truth, idx = grouped_problem(7)
    labels, _, margins = transductive_decisions(original, idx, random_state=0)
    sure = np.flatnonzero((original.sum(axis=1) > 1) & (margins > 0))
    audited = sure[:12]
    current = original.copy()
    current[audited] = False
    current[audited, labels[audited]] = True  # every audit right: DST-PLL's margin alone
    (dst,) = selection_scores(lambda: X, original, current, idx, audited, labels, margins)
    np.testing.assert_array_equal(dst.items, margins)
    assert dst.learned[1].all()

    current[audited[0]] = original[audited[0]] & (np.arange(original.shape[1]) != labels[audited[0]])
    dst, scored = selection_scores(lambda: X, original, current, idx, audited, labels, margins)
    assert scored.name == "agreement" and not dst.learned[1][0]  # the first audit, now wrong
    # The oracle: the linear model fitted with every audited item's set as before its answer.
    model = EmLogisticPllClassifier().fit(X, original)
    proba = model.predict_proba(X) * original
    proba /= proba.sum(axis=1, keepdims=True)
    top = np.sort(proba, axis=1)
    agree = (proba.argmax(axis=1) == labels) & (margins > 0)
    # Read only where an item may still join a lot (two or more candidates) or was audited.
    read = (current.sum(axis=1) > 1) | np.isin(np.arange(X.shape[0]), audited)
    expected = np.where(agree & read, top[:, -1] - top[:, -2], 0.0)
    np.testing.assert_allclose(scored.items, expected)
    assert (agree & read).any() and (~agree & read).any() and (agree & ~read).any()
    # Both scores now carry the linear model's estimate of how often DST-PLL's label is wrong:
    # 1 - p where the two agree, at least p (the linear model's own label's) where they do not.
    p_top = np.where(read, top[:, -1], 0.0)
    np.testing.assert_allclose(scored.wrong_probability, 1.0 - p_top)
    np.testing.assert_allclose(dst.wrong_probability, np.where(expected > 0, 1.0 - p_top, p_top))
    np.testing.assert_array_equal(dst.items, margins)
    # A caller that does not fit the model gets no score once an audit is wrong (no lot now).
    assert selection_scores(lambda: X, original, current, idx, audited, labels, margins, with_features=False) == ()
    # Features that say nothing leave DST-PLL's margin alone.
    flat = np.ones((X.shape[0], 3))
    assert [s.name for s in selection_scores(lambda: flat, original, current, idx, audited, labels, margins)] == [
        "dst_margin"
    ]


@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 60),
    target=st.sampled_from([0.02, 0.05, 0.1]),
    promise=st.sampled_from(["confidence", "average"]),
)
@settings(max_examples=200, deadline=None)
def test_a_score_with_wrong_probabilities_stops_where_their_mean_would_pass_the_share_of_the_target(
    seed, n, target, promise
):
    rng = np.random.default_rng(seed)
    items = rng.choice([0.0, 0.2, 0.4, 0.6, 0.8, 1.0], n)  # ties: equal scores enter together
    wrong = rng.random(n) * 0.06
    free = rng.random(n) < 0.8
    no_audits = (np.zeros(0), np.zeros(0, dtype=bool))  # the learned threshold is the reject rule
    got = SelectionScore("agreement", items, no_audits, wrong).threshold(free, target, promise)
    # Brute force: the lowest positive score whose free items at or above it average at most
    # the share of the target.
    best = float("inf")
    for t in np.unique(items[items > 0]):
        above = free & (items >= t)
        if above.any() and wrong[above].mean() <= ESTIMATED_ERROR_SHARE[promise] * target:
            best = min(best, float(t))
    np.testing.assert_array_equal(free & (items >= got), free & (items >= best))  # the same lot
    assert SelectionScore("dst_margin", items, no_audits).threshold(free, target, promise) == np.nextafter(0.0, 1.0)


def test_a_score_whose_lot_is_not_clearly_cleaner_gives_way_to_one_whose_lot_is():
    lot, items = first_lot_audited(right=36, wrong=4)  # failing, 10 % wrong
    margins = np.linspace(0.0, 1.0, N_ITEMS)
    labels = np.zeros(N_ITEMS, dtype=np.int64)
    right = np.r_[np.zeros(4, dtype=bool), np.ones(36, dtype=bool)]
    # DST-PLL's margin would let in every item (all score 1), but it ranks the 4 wrong audits
    # highest: its threshold lands just above them, with no audit above it to show a cleaner lot.
    # The other score's audits are clean above a higher threshold.
    big = SelectionScore("dst_margin", np.ones(N_ITEMS), (np.r_[np.full(4, 0.95), np.linspace(0.1, 0.9, 36)], right))
    clean = SelectionScore("agreement", margins, (np.r_[np.full(4, 0.1), np.linspace(0.5, 1.0, 36)], right))
    now = lots_now([lot], items, SETTINGS)
    fresh = freeze_lot(
        now, items, labels, margins, SETTINGS, scores=[big, clean], secret=b"k" * 32, session_id=1, last_event_id=1
    )
    assert fresh is not None and (margins[fresh.positions] >= fresh.threshold).all() and fresh.threshold > 0.1
    assert (
        freeze_lot(now, items, labels, margins, SETTINGS, scores=[big], secret=b"k" * 32, session_id=1, last_event_id=1)
        is None
    )


@pytest.mark.parametrize(("right", "wrong", "replaced"), [(36, 4, True), (58, 2, False)])
def test_a_score_that_estimates_its_error_replaces_a_lot_worse_than_the_target_on_fewer_audits(right, wrong, replaced):
    lot, items = first_lot_audited(right=right, wrong=wrong)  # failing: 10 % or 3.3 % wrong
    n = right + wrong
    margins = np.linspace(0.0, 1.0, N_ITEMS)
    # The wrong audits just below 0.6, 12 clean ones above it: the learned threshold, with fewer
    # than FAILING_MIN_AUDITS audits above it and at least LEARN_MIN_AUDITS.
    learned_scores = np.r_[np.full(wrong, 0.55), np.linspace(0.1, 0.5, n - 12 - wrong), np.linspace(0.6, 1.0, 12)]
    learned_right = np.arange(n) >= wrong
    now = lots_now([lot], items, SETTINGS)
    assert now.failing

    def freeze_by(score):
        return freeze_lot(
            now,
            items,
            np.zeros(N_ITEMS, dtype=np.int64),
            margins,
            SETTINGS,
            scores=[score],
            secret=b"k" * 32,
            session_id=1,
            last_event_id=1,
        )

    estimating = SelectionScore("agreement", margins, (learned_scores, learned_right), np.zeros(N_ITEMS))
    assert (freeze_by(estimating) is not None) is replaced
    assert freeze_by(SelectionScore("dst_margin", margins, (learned_scores, learned_right))) is None


@pytest.mark.parametrize("promise", ["confidence", "average"])
def test_under_the_average_promise_the_first_lot_waits_for_its_learning_audits(promise):
    settings = LabelSettings(max_error=0.05, audit_share=0.05, promise=promise)
    learning = np.random.default_rng(3).permutation(N_ITEMS)
    needed = FIRST_LOT_LEARNING_AUDITS[promise]
    assert FIRST_LOT_LEARNING_AUDITS["average"] > 0  # the average case below is not vacuous
    for answered_first in sorted({0, max(needed - 1, 0), needed}):
        # The learning order's first items answered (its prefix), each with the label 0.
        items = status(learning[:answered_first], np.zeros(0, dtype=np.int64))
        now = lots_now([], items, settings, learning=learning)
        waits = answered_first < needed
        assert now.learned.size == answered_first
        assert now.learning_needed == needed - answered_first
        assert now.new_lot_due is not waits
        # Under a promise that learns first, learning audits are what the first statement waits
        # for: served at its share until it is made; otherwise at the session's share.
        learns_first = needed > 0
        assert now.audit_share(settings) == (FIRST_STATEMENT_AUDIT_SHARE if learns_first else settings.audit_share)
    # Once a lot exists, later learning audits neither hold a lot back nor go faster.
    later = lots_now(
        [make_lot(1, np.arange(30))], status(np.arange(30), np.zeros(0, dtype=np.int64)), settings, learning=learning
    )
    assert later.learning_needed == 0
    # With audits off nothing waits (nothing can be certified anyway).
    off = lots_now(
        [],
        status(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)),
        LabelSettings(max_error=0.05, audit_share=0.0, promise=promise),
        learning=learning,
    )
    assert off.learning_needed == 0


def test_a_certified_lot_is_served_in_its_audit_order_and_keeps_delivering_under_average():
    """Answers that reach a certified lot take its next items in its audit order: under the average
    promise those only extend its audited prefix, so the lot goes on delivering to its last item;
    answers out of that order take it out of delivery once a tenth of the rest is gone."""
    average = LabelSettings(max_error=0.05, audit_share=0.05, promise="average")
    lot = make_lot(1, np.arange(600))
    order = lot.positions
    now = lots_now([lot], status(order[:60], order[:0]), average)
    assert now.verdicts[0].certified
    queue = lot_items_in_audit_order(now)
    assert np.array_equal(queue, order[60:])
    in_order = lots_now([lot], status(order[:500], order[:0]), average)
    assert in_order.verdicts[0].certified and in_order.verdicts[0].delivered == 100
    elsewhere = np.r_[order[:60], order[-60:]]  # 60 of the 540 past the prefix, out of order
    assert not lots_now([lot], status(elsewhere, order[:0]), average).verdicts[0].certified
    fewer = np.r_[order[:60], order[-50:]]  # 50 of 540: nine in ten stay
    assert lots_now([lot], status(fewer, order[:0]), average).verdicts[0].certified
