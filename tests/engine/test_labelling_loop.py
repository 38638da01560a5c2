"""engine.labelling_loop and engine.promises: the loop is a function of the answers alone.

Checked against oracles: the served order against a slot-by-slot construction, the loop's reuse
of lots frozen earlier against a run from scratch, reads interleaved at random against none,
the promises' tests against their definitions; and the rules a person can play against: the
first verdict is the outcome, a skip sends any item to the end, a lot keeps its settings.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.replay_lots import Campaign, Pool
from engine.end_charges import end_charges
from engine.labelling_loop import (
    ItemsAt,
    LoopSettings,
    VerdictLog,
    audits_to_state,
    judge_lot,
    lot_parts,
    lot_share,
    run_loop,
    served_order,
    share_left_by_series,
)
from engine.loop_design import DESIGN
from engine.neighbors import knn_graph
from engine.promises import (
    AveragePromise,
    ConfidencePromise,
    ConfidenceTest,
    PilotedTest,
    SetVerdict,
    lot_error_bounds,
    pair_charges,
    part_test,
    pilot_allowance,
)


def blobs(n_per: int = 60, flipped: float = 0.02, seed: int = 0) -> Pool:
    """Three separated blobs, most items with a second candidate; a few truly of another class."""
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    blob = np.repeat(np.arange(3), n_per)
    X = centres[blob] + rng.normal(scale=0.7, size=(blob.size, 2))
    truth = blob.copy()
    off = rng.random(blob.size) < flipped
    truth[off] = (blob[off] + 1) % 3
    Y = np.zeros((blob.size, 3), dtype=bool)
    Y[np.arange(blob.size), truth] = True
    partial = rng.random(blob.size) < 0.85
    other = np.where(off, blob, (truth + rng.integers(1, 3, size=blob.size)) % 3)
    Y[np.flatnonzero(partial), other[partial]] = True
    idx, w = knn_graph(X, k=8)
    return Pool(X, Y, truth, idx, w)


POOL = blobs()
KEY = b"k" * 32
LOOSE = LoopSettings(max_error=0.2, confidence=0.6)  # a few audits state something on 180 items


def test_the_shares_sum_to_one():
    fractions, shares = DESIGN.layer_fractions, DESIGN.layer_shares
    assert math.isclose(sum(shares), 1.0) and fractions[-1] == 1.0 and list(fractions) == sorted(fractions)
    assert math.isclose(sum(lot_share(n) for n in range(1, 200_000)), 1.0, abs_tol=1e-5)


@settings(max_examples=50, deadline=None)
@given(first=st.floats(0.01, 0.99), number=st.integers(2, 50), wealth=st.floats(0.01, 1.0))
def test_lot_ones_share_changes_nothing_a_later_lot_is_offered_of_the_wealth(first, number, wealth):
    """Whatever lot 1 takes, the series still sums to 1 and a later lot is offered the same part
    of the wealth left (``lot_share(l) / R_l``), so lot 1's share is one number, not a new series."""
    assert math.isclose(sum(lot_share(n, first) for n in range(1, 200_000)), 1.0, abs_tol=1e-5)
    assert lot_share(1, first) == first and math.isclose(share_left_by_series(2, first), 1.0 - first)
    assert np.allclose(lot_parts(wealth, number, first), lot_parts(wealth, number))


def test_first_verdicts_are_the_first_per_item():
    log = VerdictLog(np.array([3, 1, 3, 0]), np.array([2, -1, 0, 1]))
    at, label = log.first_verdicts(5)
    assert at.tolist() == [3, 1, 4, 0, 4] and label.tolist() == [1, -1, -1, 2, -1]


def slot_by_slot(ranked, queue, base, share, u, skipped_at_end=0):
    """The served order by brute force: the most audits ``a`` such that the first ``a`` queue
    items fit the audit slots of an order made of them and the ranked items left; then each
    audit slot takes the next of them, every other slot the next ranked item left; the
    skipped items after all of them."""
    ranked, queue = list(ranked), list(queue)
    skipped = ranked[len(ranked) - skipped_at_end :]
    ranked = ranked[: len(ranked) - skipped_at_end]
    flags = [x < share for x in u[base:]] if share > 0 else [False] * (len(ranked) + len(queue))
    for a in range(len(queue), -1, -1):
        rest = [r for r in ranked if r not in queue[:a]]
        length = len(rest) + a
        if sum(flags[:length]) >= a:
            break
    out, audit, q, r = [], [], 0, 0
    for j in range(length):
        if flags[j] and q < a:
            out.append(queue[q])
            audit.append(True)
            q += 1
        else:
            out.append(rest[r])
            audit.append(False)
            r += 1
    return out + skipped, audit + [False] * len(skipped)


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 30),
    q=st.integers(0, 10),
    base=st.integers(0, 20),
    share=st.sampled_from([0.0, 0.2, 0.5]),
    n_skipped=st.integers(0, 5),
    seed=st.integers(0, 10_000),
)
def test_served_order_against_a_slot_by_slot_construction(n, q, base, share, n_skipped, seed):
    rng = np.random.default_rng(seed)
    items = rng.permutation(60)
    queue = items[:q]
    skipped = items[50 : 50 + n_skipped]
    ranked = rng.permutation(np.concatenate([items[q : q + n], queue[rng.random(q) < 0.5]]))
    ranked = np.concatenate([ranked, skipped])
    u = rng.random(200)
    order = served_order(
        ranked, queue, base=base, audit_share=share, uniforms=lambda m: u[:m], skipped_at_end=n_skipped
    )
    positions = order.positions.tolist()
    assert len(set(positions)) == len(positions)  # nothing served twice
    assert set(positions) == set(ranked.tolist()) | set(queue.tolist()[: int(order.audit.sum())])
    assert positions[len(positions) - n_skipped :] == skipped.tolist()  # skipped items come back last
    served_audits = [p for p, a in zip(positions, order.audit.tolist(), strict=True) if a]
    assert served_audits == queue.tolist()[: len(served_audits)]  # audits in the queue's order
    if share > 0 and q:
        expected = slot_by_slot(ranked.tolist(), queue.tolist(), base, share, u, n_skipped)
        assert (positions, order.audit.tolist()) == expected
    top = int(rng.integers(0, len(positions) + 2))
    cut = served_order(
        ranked, queue, base=base, audit_share=share, uniforms=lambda m: u[:m], skipped_at_end=n_skipped, top=top
    )
    assert (cut.positions.tolist(), cut.audit.tolist()) == (positions[:top], order.audit.tolist()[:top])


def campaign(pool: Pool = POOL, settings: LoopSettings = LOOSE, key: bytes = KEY) -> Campaign:
    return Campaign(pool, settings, key=key, session=7)


def play(c: Campaign, moves: list[int], *, read_between: bool) -> None:
    """Moves: 0 answer the served item truthfully, 1 skip it, 2 undo, 3 answer it wrongly."""
    for move in moves:
        loop = c.loop() if read_between else None
        if move == 2:
            if c._history:
                c.undo()
            continue
        served = c.served(c.ranked(None, None, np.random.default_rng(0), loop or c.loop()), loop or c.loop())
        if served.positions.size == 0:
            return
        item = int(served.positions[0])
        if move == 1:
            c.skip(item)
        else:
            truth = int(c.pool.truth[item])
            c.answer(item, truth if move == 0 else (truth + 1) % c.Y.shape[1])


def same_loop(a, b) -> bool:
    if len(a.lots) != len(b.lots) or a.next_lot_at != b.next_lot_at:
        return False
    for x, y in zip(a.lots, b.lots, strict=True):
        if not (np.array_equal(x.lot.items, y.lot.items) and np.array_equal(x.lot.labels, y.lot.labels)):
            return False
        if (x.certified, x.current, x.ended_at, x.verdicts) != (y.certified, y.current, y.ended_at, y.verdicts):
            return False
    return True


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(moves=st.lists(st.sampled_from([0, 0, 0, 0, 1, 2, 3]), min_size=20, max_size=70))
def test_reads_change_nothing_and_the_loop_reuses_lots_exactly(moves):
    """The same answers, read after every move or never: the same lots, verdicts and order; and a
    loop run from scratch on the final log equals the one that reused earlier lots."""
    watched, unwatched = campaign(), campaign()
    play(watched, moves, read_between=True)
    play(unwatched, moves, read_between=False)
    assert watched._positions == unwatched._positions
    seen = watched.loop()
    assert same_loop(seen, unwatched.loop())
    assert same_loop(watched.loop(reuse=False), seen)


def test_the_first_verdict_is_the_outcome_whatever_is_answered_after_an_undo():
    """Answer an audit, undo, answer it otherwise: the lot reads the first answer."""
    honest, probing = campaign(), campaign()
    for c, probe in ((honest, False), (probing, True)):
        for _ in range(3 * DESIGN.statement_every):
            loop = c.loop()
            queue = loop.audit_queue(c.answered, c.skipped)
            item = int(queue[0])
            truth = int(c.pool.truth[item])
            c.answer(item, truth)
            if probe:  # try the other labels: one of them may be the frozen one
                for other in range(c.Y.shape[1]):
                    c.undo()
                    c.answer(item, other)
                c.undo()
                c.answer(item, truth)
    a, b = honest.loop(), probing.loop()
    assert [s.verdicts for s in a.lots] == [s.verdicts for s in b.lots]
    assert [s.certified for s in a.lots] == [s.certified for s in b.lots]


def test_a_skipped_item_goes_to_the_end_behind_earlier_skips_whatever_it_is():
    c = campaign()
    skipped, audits = [], 0
    for _ in range(20):
        loop = c.loop()
        ranked = c.ranked(None, None, np.random.default_rng(0), loop)
        served = c.served(ranked, loop, top=None)
        item = int(served.positions[0])
        audits += int(served.audit[0])
        c.skip(item)
        skipped.append(item)
        loop = c.loop()
        order = c.served(c.ranked(None, None, np.random.default_rng(0), loop), loop, top=None).positions
        assert order[-len(skipped) :].tolist() == skipped
    assert 0 < audits < 20  # both kinds were skipped


def test_a_lot_keeps_the_settings_it_was_frozen_with():
    """settings_at(v) is read for the lot frozen at v; a change after its first audit is not."""
    pool = POOL
    log_positions, log_labels = [], []
    items = ItemsAt(pool.Y, np.zeros(pool.Y.shape[0], dtype=bool))

    def model(candidates):
        return np.asarray(pool.truth), np.ones(pool.Y.shape[0]), np.ones(pool.Y.shape[0])

    def loop(settings_at):
        log = VerdictLog(np.asarray(log_positions, dtype=np.int64), np.asarray(log_labels, dtype=np.int64))
        return run_loop(
            log,
            n_items=pool.Y.shape[0],
            items_at=lambda v: items,
            model=model,
            settings_at=settings_at,
            key=KEY,
            session=1,
        )

    strict = lambda v: LoopSettings(max_error=0.05)  # noqa: E731
    average = lambda v: LoopSettings(max_error=0.05, promise="average")  # noqa: E731
    first = loop(strict).lots[0].lot
    assert isinstance(first.promise, ConfidencePromise)
    assert isinstance(loop(average).lots[0].lot.promise, AveragePromise)  # not sealed: the change counts
    # Once a verdict follows its freeze, the lot is what it was frozen with, for any later reader.
    item = int(first.items[0])
    log_positions.append(item)
    log_labels.append(int(pool.truth[item]))
    changed_after = lambda v: LoopSettings(max_error=0.05) if v == 0 else LoopSettings(promise="average")  # noqa: E731
    assert isinstance(loop(changed_after).lots[0].lot.promise, ConfidencePromise)


def test_the_confidence_judge_adds_the_parts_bounds():
    promise = ConfidencePromise(0.05, 0.9)
    parts = (SetVerdict(60, 0, True, False, 4, 0), SetVerdict(60, 1, False, False, 8, 1))
    assert promise.judge(parts, 200) == (False, False)  # 4 + 8 wrong at most, above 5 % of 200
    assert promise.judge(parts, 240) == (True, False)
    assert promise.judge((SetVerdict(60, 9, False, False, 30, 11),), 200) == (False, True)


def test_a_confidence_test_is_the_running_intersection_of_the_sequence():
    test = ConfidenceTest(1000, 0.05, 0.075)
    errors = np.cumsum(np.r_[np.zeros(50, int), 1, np.zeros(30, int)])
    verdict = test.verdict(errors)
    highs = [lot_error_bounds(1000, n, int(errors[n - 1]), alpha=0.075, target=0.05)[1] for n in range(1, 82)]
    assert verdict.wrong_bound == min(highs) and verdict.certified == (min(highs) <= 50)


def test_audits_to_state_is_the_first_statement_of_an_untouched_lot():
    needed = audits_to_state(1000, LoopSettings())
    assert needed is not None and 30 < needed < 120
    assert audits_to_state(1000, LoopSettings(promise="average")) < needed
    assert audits_to_state(10, LoopSettings()) is None
    # A pilot adds its audits; the test after it, on a layer 20 items smaller, needs one fewer.
    assert audits_to_state(1000, LoopSettings(), piloted=True) == needed + DESIGN.pilot_audits - 1


@pytest.mark.parametrize("promise", ["confidence", "average"])
def test_labels_once_stated_stay_stated(promise):
    c = campaign(settings=LoopSettings(max_error=0.2, confidence=0.6, promise=promise))
    stated_before = 0
    for _ in range(150):
        loop = c.loop()
        member, _, _ = loop.delivered(c.Y.shape[0])
        assert member.sum() >= stated_before
        stated_before = int(member.sum())
        served = c.served(c.ranked(None, None, np.random.default_rng(0), loop), loop)
        if served.positions.size == 0:
            break
        item = int(served.positions[0])
        c.answer(item, int(c.pool.truth[item]))
    assert stated_before > 0


def test_what_is_stated_changes_only_at_checkpoints():
    """No single answer shows its effect on a statement: between two multiples of
    DESIGN.statement_every verdicts, the stated labels and every lot's verdicts stay as they were."""
    c = campaign(settings=LoopSettings(max_error=0.2, confidence=0.6))
    before, changes = None, 0
    for _ in range(120):
        loop = c.loop()
        member, label, _ = loop.delivered(c.Y.shape[0])
        now = (member.tolist(), label.tolist(), [(s.certified, s.verdicts) for s in loop.lots])
        if before is not None and now != before:
            assert len(c._positions) % DESIGN.statement_every == 0
            changes += 1
        before = now
        served = c.served(c.ranked(None, None, np.random.default_rng(0), loop), loop)
        item = int(served.positions[0])
        c.answer(item, int(c.pool.truth[item]))
    assert changes >= 3  # not vacuous: statements did change


def scripted_loop(
    n_items: int,
    accepted: int,
    wrong_in_lot: np.ndarray,
    verdicts: list[tuple[int, int]],
    settings: LoopSettings = LoopSettings(),  # noqa: B008 - frozen, never changed
):
    """The loop over ``n_items`` two-candidate items whose model accepts the first ``accepted``,
    labelling them 0 (``wrong_in_lot``: those of them whose truth is 1), after ``verdicts``
    (item, label) given in order, under ``settings``. The lots are frozen from the start's sets:
    only the answers decide what the loop does."""
    candidates = np.zeros((n_items, 2), dtype=bool)
    candidates[:] = True
    truth = np.zeros(n_items, dtype=np.int64)
    truth[wrong_in_lot] = 1
    scores = np.where(np.arange(n_items) < accepted, 1.0 - np.arange(n_items) / n_items, 0.0)

    def items_at(v):
        settled = np.zeros(n_items, dtype=bool)
        settled[[item for item, _ in verdicts[:v]]] = True
        return ItemsAt(candidates, settled)

    def model(sets):
        return np.zeros(n_items, dtype=np.int64), scores, scores

    given = np.asarray(verdicts, dtype=np.int64).reshape(-1, 2)
    log = VerdictLog(given[:, 0], given[:, 1])
    return run_loop(
        log, n_items=n_items, items_at=items_at, model=model, settings_at=lambda v: settings, key=KEY, session=3
    ), truth


def test_a_lot_the_series_cannot_certify_takes_what_is_left_of_the_promise_and_then_says_it_is_spent():
    """60 items the model accepts: at the series' share (0.61) the confidence sequence could not
    certify them before half were audited, so lot 1 takes all of the promise. All of them wrong,
    it fails on its first audits and spends it: from then on the loop says that what is missing is
    the promise (not the model's certainty), and looks again every retry_answers verdicts."""
    settings = LoopSettings(promise="confidence")
    series, rest = lot_parts(1.0, 1)
    assert part_test(settings.make_promise(), 60, series) is None and part_test(settings.make_promise(), 60, rest)
    loop, _ = scripted_loop(400, 60, np.zeros(0, dtype=np.int64), [], settings)
    lot = loop.lots[0].lot
    assert lot.set_sizes == (60,) and lot.shares == (1.0,) and not loop.out_of_promise
    wrong = np.arange(60)
    audits = [(int(i), 1) for i in lot.items[: 2 * DESIGN.statement_every]]
    loop, _ = scripted_loop(400, 60, wrong, audits, settings)
    (failed,) = loop.lots
    assert failed.ended_at == DESIGN.statement_every and failed.certified == 0  # hopeless at once
    assert math.isclose(failed.share_spent, 1.0) and loop.promise_left == 0.0 and loop.out_of_promise
    assert loop.next_lot_at == failed.ended_at + DESIGN.retry_answers
    # Where the promise is whole but the model accepts too few items, the loop says so instead.
    few, _ = scripted_loop(400, 40, np.zeros(0, dtype=np.int64), [], settings)
    assert few.lots == () and few.promise_left == 1.0 and not few.out_of_promise


@pytest.mark.parametrize("promise", ["confidence", "average"])
def test_a_lot_is_cut_into_layers_by_its_promise_and_what_is_stated(promise):
    """Lot 1, frozen with nothing stated, is cut with confidence into quarters, each layer with its
    share of the lot's; on average into its best half and the rest of its best 95 %, charged
    by their worst read at one rate (the worst 5 % left out). Each layer holds the items
    the model is surest of that the layers before it left."""
    loop, _ = scripted_loop(3000, 2000, np.zeros(0, dtype=np.int64), [], LoopSettings(promise=promise))
    lot = loop.lots[0].lot
    if promise == "average":
        assert lot.set_sizes == tuple(math.ceil(f * 2000) for f in DESIGN.alone_layer_fractions) == (1000, 1900)
        plans = [test.plan for test in lot.tests]
        charges = pair_charges(*plans, 1000, 900)
        first = lot.promise.first_lot_share
        assert first == DESIGN.average_first_lot_share
        assert np.allclose(lot.shares, [c / lot.promise.target for c in charges])
        assert lot_share(1) < sum(lot.shares) <= lot_share(1, first)  # more than the series' first term
        assert lot.tests[0].rate == lot.tests[1].rate
    else:
        assert lot.set_sizes == tuple(math.ceil(f * 2000) for f in DESIGN.layer_fractions)
        assert np.allclose(lot.shares, [lot_share(1) * s for s in DESIGN.layer_shares])
    for (lo, hi), size in zip(lot.layer_spans, lot.set_sizes, strict=True):
        assert set(lot.items[lo:hi].tolist()) == set(range(lo, size))  # scores fall with the index


HALF_WRONG_ITEMS, HALF_WRONG_ACCEPTED = 3000, 2000


def half_wrong_lot_audited():
    """Lot 1 of :func:`scripted_loop` over 3,000 items, 2,000 accepted, every other one wrong, after
    60 audits of its best layer: the wrong items, the truth, those verdicts and the loop after them."""
    bad = np.arange(0, HALF_WRONG_ACCEPTED, 2)
    first, truth = scripted_loop(HALF_WRONG_ITEMS, HALF_WRONG_ACCEPTED, bad, [])
    lot = first.lots[0].lot
    verdicts = [(int(i), int(truth[i])) for i in lot.items[lot.layers == 0][:60]]
    loop, _ = scripted_loop(HALF_WRONG_ITEMS, HALF_WRONG_ACCEPTED, bad, verdicts)
    return bad, truth, verdicts, loop


def test_a_lot_that_fails_before_its_lower_layers_leaves_their_share_to_the_next():
    """Lot 1's best layer is half wrong: its audits make it hopeless, its other layers are never
    audited, so the next lot gets the series' share scaled by the wealth left (module
    docstring, "The promise's shares"), and the shares at risk never pass 1."""
    _, _, _, loop = half_wrong_lot_audited()
    one, two = loop.lots[0], loop.lots[1]
    assert one.ended_at is not None and one.certified == 0
    assert [v.audited > 0 for v in one.verdicts] == [True, False, False]
    spent = one.share_spent
    assert math.isclose(spent, lot_share(1) * DESIGN.layer_shares[0])
    expected = (1.0 - spent) * lot_share(2) / share_left_by_series(2)
    assert math.isclose(sum(two.lot.shares), expected) and expected > lot_share(2)
    assert spent + sum(two.lot.shares) <= 1.0


def test_a_lot_after_one_that_certified_nothing_is_piloted_and_a_failed_pilot_spends_nothing():
    """Lot 1 certified nothing, so lot 2 is piloted (engine.promises, "Pilots"): its best layer,
    half wrong, fails its pilot, its test reads no audit and it spends nothing; lot 3 then takes
    lot 2's place in the series with the same wealth, and is piloted too."""
    bad, truth, verdicts, second = half_wrong_lot_audited()
    one, two = second.lots
    assert not any(isinstance(test, PilotedTest) for test in one.lot.tests)
    assert all(isinstance(test, PilotedTest) for test in two.lot.tests)
    assert two.lot.tests[0].allowed == pilot_allowance(LoopSettings().max_error)
    pilot = [(int(i), int(truth[i])) for i in two.lot.items[two.lot.layers == 0][: DESIGN.pilot_audits]]
    third, _ = scripted_loop(HALF_WRONG_ITEMS, HALF_WRONG_ACCEPTED, bad, verdicts + pilot)
    one, two, three = third.lots[:3]
    assert two.ended_at is not None and two.certified == 0 and two.verdicts[0].hopeless
    assert [v.at_risk for v in two.verdicts] == [False] * len(two.verdicts)
    assert two.share_spent == 0.0
    assert math.isclose(sum(three.lot.shares), sum(two.lot.shares))
    assert all(isinstance(test, PilotedTest) for test in three.lot.tests)


@pytest.mark.parametrize("wrong_found", [0, 2, 4])
def test_a_lot_ends_once_its_set_could_not_be_certified_before_its_deadline(wrong_found):
    """Lot 1's best layer (500 items) has ``wrong_found`` wrong labels among its first 40 audits;
    then only items outside the lot are answered, so no audit is served. The lot ends at the
    first checkpoint where its first set could not be certified even if each of the audits the
    audit share still allots it before the deadline named the frozen label (found here by
    reading the layer's own test on that prefix), and the next lot is frozen there. Its
    verdicts are those of its test alone: the rule decides when the lot ends, nothing else."""
    n, accepted = 3000, 2000
    first, _ = scripted_loop(n, accepted, np.zeros(0, dtype=np.int64), [])
    lot = first.lots[0].lot
    best = lot.items[lot.layers == 0]
    wrong_items = best[: 8 * wrong_found : 8]
    _, truth = scripted_loop(n, accepted, wrong_items, [])
    audited = [(int(i), int(truth[i])) for i in best[:40]]
    outside = [(int(i), 0) for i in range(accepted, n)][: DESIGN.lot_answers - 40]
    loop, _ = scripted_loop(n, accepted, wrong_items, audited + outside)
    wrong = truth[best[:40]] != 0
    share = LoopSettings().audit_share
    expected = next(
        point
        for point in range(40, DESIGN.lot_answers + 1, DESIGN.statement_every)
        if not lot.tests[0]
        .verdict(
            np.cumsum(np.concatenate([wrong, np.zeros(math.ceil((DESIGN.lot_answers - point) * share), dtype=bool)]))
        )
        .certified
    )
    one = loop.lots[0]
    assert 40 < expected < DESIGN.lot_answers  # the rule, not the deadline, ends it
    assert one.ended_at == expected and loop.lots[1].lot.frozen_at == expected
    known = np.zeros(lot.items.size, dtype=bool)
    known[:40] = True
    alone, certified, current = judge_lot(lot, known, known & (truth[lot.items] != lot.labels))
    assert certified == 0 and current == 0 and not alone[0].hopeless  # the test alone goes on
    assert one.verdicts == alone and one.verdicts[0].wrong == wrong_found


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(moves=st.lists(st.sampled_from([0, 0, 0, 1, 2, 3, 3]), min_size=30, max_size=160), seed=st.integers(0, 50))
def test_the_shares_at_risk_never_sum_past_one(moves, seed):
    """Whatever is answered (wrong answers end lots fast), the ended lots' shares spent and the
    active lot's shares sum to at most 1, and each lot takes its place's part of the wealth (its
    place in the series: 1 + the lots before it that spent some)."""
    c = campaign(pool=blobs(seed=seed), key=bytes([seed]) * 32)
    play(c, moves, read_between=False)
    loop = c.loop()
    wealth, rank = 1.0, 1
    for state in loop.lots:
        first = state.lot.promise.first_lot_share
        part = wealth * min(lot_share(rank, first) / share_left_by_series(rank, first), 1.0)
        assert sum(state.lot.shares) <= part + 1e-12
        wealth -= state.share_spent
        rank += state.share_spent > 0
        assert wealth >= -1e-12


def test_on_average_a_dirty_lot_spends_its_share_times_how_its_test_ended():
    """On average, lot 1 (a pair) is audited clean and certified; lot 2, frozen from the 100
    accepted labels it left, all wrong, has layers charged by their end (engine.end_charges). Its
    best layer is rejected after a few audits and the lot ends: it spends that end's charge of the
    layer's share, a thousandth, not the share, and the rest stays with the promise."""
    average, n_items, accepted = LoopSettings(promise="average"), 3000, 2000
    bad = np.arange(1900, accepted)  # the accepted labels lot 1 leaves (its best 95 % kept)

    def audit(verdicts, lot_index, layer, until):
        loop, truth = scripted_loop(n_items, accepted, bad, verdicts, average)
        lot = loop.lots[lot_index].lot
        for item in lot.items[lot.layers == layer]:
            verdicts.append((int(item), int(truth[item])))
            loop, _ = scripted_loop(n_items, accepted, bad, verdicts, average)
            if until(loop.lots[lot_index].verdicts[layer]):
                return loop, truth
        raise AssertionError("the layer's test never ended")

    def to_next_checkpoint(verdicts, truth, first):
        padding = range(first, first + (-len(verdicts)) % DESIGN.statement_every + DESIGN.statement_every)
        verdicts += [(item, int(truth[item])) for item in padding]  # items no lot takes
        return scripted_loop(n_items, accepted, bad, verdicts, average)[0]

    verdicts: list[tuple[int, int]] = []
    audit(verdicts, 0, 0, lambda v: v.certified)
    _, truth = audit(verdicts, 0, 1, lambda v: v.certified)
    loop = to_next_checkpoint(verdicts, truth, accepted)
    one, two = loop.lots
    assert one.certified == 2 and math.isclose(one.share_spent, sum(one.lot.shares))
    assert all(test.budget is None for test in one.lot.tests)  # the pair: charged by its worst read
    assert all(test.budget is not None for test in two.lot.tests) and two.lot.items.size == bad.size
    audit(verdicts, 1, 0, lambda v: v.hopeless)
    loop = to_next_checkpoint(verdicts, truth, accepted + 100)
    two = loop.lots[1]
    first = two.verdicts[0]
    assert two.ended_at is not None and two.certified == 0 and first.hopeless and first.wrong == first.audited
    plan = two.lot.tests[0].plan  # every audit wrong: rejected once they pass its last acceptance number
    charge = end_charges(plan, two.lot.tests[0].budget).rejected[plan.last_acceptance_number + 1]
    assert first.charge == charge <= 0.01
    assert math.isclose(two.share_spent, two.lot.shares[0] * charge)
    assert math.isclose(loop.promise_left, 1.0 - sum(one.lot.shares) - two.share_spent)
