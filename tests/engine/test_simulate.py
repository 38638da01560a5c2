"""Querying campaigns: the loop on hand-checkable problems, strategies, the noisy oracle."""

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_digits

from engine.dst import DstPllClassifier
from engine.exceptions import InvalidInput
from engine.learners import PlKnnClassifier
from engine.neighbors import knn_graph
from engine.noise import uniform_candidates
from engine.simulate import (
    RESULT_COLUMNS,
    STRATEGIES,
    CampaignContext,
    DstMarginStrategy,
    NoisyOracle,
    Strategy,
    VoteUncertaintyStrategy,
    learning_curve_area,
    make_strategy,
    run_campaign,
    simulate,
)

TIMING = ["seconds_per_step", "setup_seconds"]

# Two well separated classes on a line; every training item but the two ends is {0, 1}.
X_LINE = np.array([[0.0], [1], [2], [3], [4], [10], [11], [12], [13], [14]])
Y_LINE_TRUE = np.array([0, 0, 0, 0, 0, 1, 1, 1, 1, 1])
Y_LINE = np.ones((10, 2), dtype=bool)
Y_LINE[0] = [True, False]
Y_LINE[5] = [False, True]
X_LINE_TEST = np.array([[2.2], [12.2], [3.1], [10.9]])
Y_LINE_TEST = np.array([0, 1, 0, 1])


def _one_hot(y, m):
    out = np.zeros((y.size, m), dtype=bool)
    out[np.arange(y.size), y] = True
    return out


@pytest.fixture(scope="module")
def digits_problem():
    X, y = load_digits(return_X_y=True)
    X, y = X[:400] / 16.0, y[:400]
    Y = uniform_candidates(y, 10, n_false=3, fraction=0.8, seed=1)
    return X[:300], Y[:300], y[:300], X[300:], y[300:]


# --------------------------------------------------------------------------- the loop


def test_perfect_oracle_answering_everything_reaches_fully_labelled_accuracy():
    rows = run_campaign(
        X_LINE, Y_LINE, Y_LINE_TRUE, X_LINE_TEST, Y_LINE_TEST, strategy="random", budget=50, batch=8, k=3, seed=0
    )
    assert len(rows) == 2  # the start and one batch with all 8 partial items; then nothing is left
    start, end = rows
    assert (start["n_answers"], start["n_partial"]) == (0, 8)
    assert (end["n_answers"], end["n_partial"], end["n_wrong_answers"]) == (8, 0, 0)
    assert end["accuracy"] == 1.0 and end["dst_accuracy"] == 1.0
    assert end["reject_rate"] == 0.0 and end["accepted_accuracy"] == 1.0
    assert end["open_targets"] == 0
    # Before any answer, every test point's 3 neighbours hold {0,1} at least twice: many ties.
    assert start["open_targets"] > 0
    assert start["reject_rate"] > 0


def test_rows_match_the_public_classifiers(digits_problem):
    Xtr, Ytr, ytr, Xte, yte = digits_problem
    n_partial = int((Ytr.sum(axis=1) >= 2).sum())
    rows = run_campaign(Xtr, Ytr, ytr, Xte, yte, strategy="apl", budget=n_partial, batch=n_partial, k=5, seed=3)
    for Y, row in ((Ytr, rows[0]), (_one_hot(ytr, 10), rows[-1])):
        knn = PlKnnClassifier(n_neighbors=5, random_state=3).fit(Xtr, Y)
        assert row["accuracy"] == pytest.approx((knn.predict(Xte) == yte).mean())
        labels, accepted = DstPllClassifier(n_neighbors=5, random_state=3).fit(Xtr, Y).predict_with_reject(Xte)
        assert row["dst_accuracy"] == pytest.approx((labels == yte).mean())
        assert row["reject_rate"] == pytest.approx(1 - accepted.mean())
        assert row["accepted_accuracy"] == pytest.approx((labels == yte)[accepted].mean())
    assert rows[-1]["n_partial"] == 0


class _Recorder(Strategy):
    """Wraps a strategy and keeps a copy of the candidate sets it was shown."""

    def __init__(self, inner):
        self.inner, self.name, self.seen, self.picks = inner, inner.name, [], []

    def start(self, context, rng):
        self.inner.start(context, rng)

    def observe(self, instance, candidates):
        self.inner.observe(instance, candidates)

    def select(self, context, batch, rng):
        self.seen.append(context.candidates.copy())
        picks = self.inner.select(context, batch, rng)
        self.picks.append(np.asarray(picks))
        return picks


@pytest.mark.parametrize("epsilon", [0.0, 0.3])
def test_candidate_sets_only_shrink_and_answers_count_by_batch(digits_problem, epsilon):
    Xtr, Ytr, ytr, Xte, yte = digits_problem
    recorder = _Recorder(make_strategy("apl"))
    rows = run_campaign(Xtr, Ytr, ytr, Xte, yte, strategy=recorder, budget=47, batch=10, k=5, epsilon=epsilon, seed=1)
    assert [r["n_answers"] for r in rows] == [0, 10, 20, 30, 40, 47]
    assert [r["n_partial"] for r in rows] == [rows[0]["n_partial"] - r["n_answers"] for r in rows]
    if epsilon == 0:
        # A perfect oracle answers inside the set: every new set is a subset of the old one.
        for before, after in zip(recorder.seen[:-1], recorder.seen[1:], strict=True):
            assert not (after & ~before).any()
        assert all(r["n_wrong_answers"] == 0 for r in rows)
    for before, after, picks in zip(recorder.seen[:-1], recorder.seen[1:], recorder.picks[:-1], strict=True):
        assert (after.sum(axis=1)[picks] == 1).all()  # answered items are precise
        unchanged = np.setdiff1d(np.arange(len(Ytr)), picks)
        np.testing.assert_array_equal(after[unchanged], before[unchanged])
    assert list(rows[0])[: len(RESULT_COLUMNS)] == list(RESULT_COLUMNS)


def test_same_seed_same_rows(digits_problem):
    Xtr, Ytr, ytr, Xte, yte = digits_problem

    def table(seed, strategy="random", budget=30):
        rows = run_campaign(
            Xtr, Ytr, ytr, Xte, yte, strategy=strategy, budget=budget, batch=10, k=5, epsilon=0.2, seed=seed
        )
        return pd.DataFrame(rows).drop(columns=TIMING)

    pd.testing.assert_frame_equal(table(4), table(4))
    pd.testing.assert_frame_equal(table(4, "pl", 10), table(4, "pl", 10))
    assert not table(4).equals(table(5))


def test_simulate_shares_splits_and_returns_all_columns():
    X, y = load_digits(return_X_y=True)
    X, y = X[:240], y[:240]
    Y = uniform_candidates(y, 10, fraction=0.7, seed=0)
    seen = []
    df = simulate(
        X,
        Y,
        y,
        strategies=["apl", "margin"],
        seeds=[0, 1],
        budget=20,
        batch=10,
        k=5,
        on_campaign_done=lambda name, seed: seen.append((name, seed)),
    )
    assert seen == [("apl", 0), ("margin", 0), ("apl", 1), ("margin", 1)]
    assert list(df.columns[: len(RESULT_COLUMNS)]) == list(RESULT_COLUMNS)
    assert len(df) == 2 * 2 * 3
    start = df[df.step == 0].set_index(["seed", "strategy"])
    # Both strategies start from the same split and state.
    for seed in (0, 1):
        assert start.loc[(seed, "apl"), "accuracy"] == start.loc[(seed, "margin"), "accuracy"]
    assert df.groupby("seed")["n_partial"].max().nunique() == 2  # different splits per seed


# --------------------------------------------------------------------------- strategies


def _context(Ytr, Xtr, k=5):
    idx, w = knn_graph(Xtr, k=k)
    return CampaignContext(Xtr, Ytr.copy(), idx, w)


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_each_strategy_picks_distinct_partial_items(digits_problem, name):
    Xtr, Ytr, *_ = digits_problem
    context = _context(Ytr, Xtr)
    strategy = make_strategy(name)
    assert strategy.name == name
    strategy.start(context, np.random.default_rng(0))
    picks = strategy.select(context, 7, np.random.default_rng(0))
    assert len(picks) == 7 and len(set(picks.tolist())) == 7
    assert context.partial[picks].all()
    # Fewer partial items than the batch: all of them.
    few = Ytr.copy()
    partial_rows = np.flatnonzero(few.sum(axis=1) >= 2)
    few[partial_rows[3:]] = _one_hot(np.argmax(few[partial_rows[3:]], axis=1), 10)
    context = _context(few, Xtr)
    strategy.start(context, np.random.default_rng(0))
    assert sorted(strategy.select(context, 10, np.random.default_rng(1)).tolist()) == sorted(partial_rows[:3].tolist())


def test_ties_are_broken_by_the_seed():
    Y = np.ones((50, 3), dtype=bool)
    X = np.arange(50.0)[:, None]
    context = _context(Y, X)
    random = make_strategy("random")
    first = random.select(context, 5, np.random.default_rng(0))
    np.testing.assert_array_equal(first, random.select(context, 5, np.random.default_rng(0)))
    assert not np.array_equal(first, random.select(context, 5, np.random.default_rng(1)))


def test_a_new_strategy_is_a_small_class():
    class HighestRow(Strategy):
        name = "highest_row"

        def scores(self, context):
            return np.arange(context.candidates.shape[0], dtype=float)

    rows = run_campaign(
        X_LINE, Y_LINE, Y_LINE_TRUE, X_LINE_TEST, Y_LINE_TEST, strategy=HighestRow(), budget=3, batch=2, k=3
    )
    assert [r["strategy"] for r in rows] == ["highest_row"] * 3
    assert [r["n_answers"] for r in rows] == [0, 2, 3]


def test_a_strategy_must_say_how_it_chooses_and_each_way_gives_the_other():
    from engine.strategies import RankerStrategy

    with pytest.raises(TypeError, match="Silent must override scores\\(\\) or select\\(\\)"):

        class Silent(Strategy):
            name = "silent"

    with pytest.raises(TypeError, match="Rankless must define make_ranker"):

        class Rankless(RankerStrategy):
            name = "rankless"

    class Fixed(Strategy):
        name = "fixed"

        def select(self, context, batch, rng):
            return np.array([7, 2, 5])[:batch]

    Y = Y_LINE.copy()
    Y[[0, 1]] = [[True, False], [False, True]]  # settled: not partial
    context = CampaignContext(X=X_LINE, candidates=Y, idx=np.zeros((10, 1), dtype=int), w=np.ones((10, 1)))
    scores = Fixed().scores(context)
    assert scores[[7, 2, 5]].tolist() == [3.0, 2.0, 1.0] and scores[[0, 1, 3, 4, 6, 8, 9]].tolist() == [0.0] * 7


def test_observe_refuses_an_answer_outside_the_campaign():
    strategy = make_strategy("random")
    context = CampaignContext(X=X_LINE, candidates=Y_LINE.copy(), idx=np.zeros((10, 1), dtype=int), w=np.ones((10, 1)))
    with pytest.raises(RuntimeError, match="start\\(\\) was not called"):
        strategy.observe(0, np.array([True, False]))
    strategy.start(context, np.random.default_rng(0))
    strategy.observe(0, np.array([True, False]))
    for instance, row in [(10, [True, False]), (0, [False, False]), (0, [True, False, False]), (0, [1, 0])]:
        with pytest.raises(InvalidInput):
            strategy.observe(instance, np.array(row))


def test_vote_uncertainty_hand_computed():
    # Item 0 = {0, 1} with neighbours {0}, {0, 1}, {1, 2}: votes on its set 0 → 2, 1 → 2 (label 2
    # is outside the set) so p = (1/2, 1/2). Item 3 = {0, 1, 2} sees {0}, {0}, {0,1}: p = (3, 1, 0)/4.
    Y = np.array([[1, 1, 0], [1, 0, 0], [1, 1, 0], [1, 1, 1], [1, 1, 0], [0, 1, 1]], dtype=bool)
    idx = np.array([[1, 2, 5], [0, 2, 3], [0, 1, 3], [1, 1, 2], [0, 1, 2], [0, 1, 2]])
    context = CampaignContext(np.zeros((6, 1)), Y, idx, np.ones((6, 3)))
    lc = VoteUncertaintyStrategy("least_confidence").scores(context)
    margin = VoteUncertaintyStrategy("margin").scores(context)
    entropy = VoteUncertaintyStrategy("entropy").scores(context)
    assert lc[0] == pytest.approx(0.5) and lc[3] == pytest.approx(0.25)
    assert margin[0] == pytest.approx(1.0) and margin[3] == pytest.approx(0.5)
    assert entropy[0] == pytest.approx(np.log(2)) and entropy[3] == pytest.approx(
        -(0.75 * np.log(0.75) + 0.25 * np.log(0.25))
    )


def test_dst_margin_asks_rejected_items_first(digits_problem):
    Xtr, Ytr, *_ = digits_problem
    context = _context(Ytr, Xtr)
    clf = DstPllClassifier(n_neighbors=5, random_state=0).fit(Xtr, Ytr)
    picks = DstMarginStrategy().select(context, 20, np.random.default_rng(0))
    rejected_partial = (~clf.disambiguate_accepted_ & context.partial).sum()
    assert rejected_partial >= 20
    assert (~clf.disambiguate_accepted_[picks]).all()


# --------------------------------------------------------------------------- oracle


def test_perfect_oracle_answers_the_truth():
    y = np.arange(10) % 3
    labels, wrong = NoisyOracle(y, 3, epsilon=0.0, seed=0).answer(np.arange(10), np.ones((10, 3), dtype=bool))
    np.testing.assert_array_equal(labels, y)
    assert not wrong.any()


@pytest.mark.parametrize("noise", ["candidate", "any"])
def test_noisy_oracle_statistics(noise):
    n, m = 20_000, 5
    rng = np.random.default_rng(0)
    y = rng.integers(0, m, n)
    candidates = np.zeros((n, m), dtype=bool)
    candidates[np.arange(n), y] = True
    candidates[np.arange(n), (y + 1) % m] = True  # set = {y, y+1}
    oracle = NoisyOracle(y, m, epsilon=0.2, noise=noise, seed=1)
    labels, wrong = oracle.answer(np.arange(n), candidates)
    assert abs(wrong.mean() - 0.2) < 0.015  # sd 0.003
    np.testing.assert_array_equal(labels == y, ~wrong)  # wrong answers are never the truth
    bad = labels[wrong]
    if noise == "candidate":
        np.testing.assert_array_equal(bad, (y[wrong] + 1) % m)  # the only other candidate
    else:
        offsets = (bad - y[wrong]) % m
        counts = np.bincount(offsets, minlength=m)
        assert counts[0] == 0
        np.testing.assert_allclose(counts[1:] / wrong.sum(), 0.25, atol=0.03)
    # Answers belong to the item, not to the order of asking.
    order = rng.permutation(n)
    again, _ = NoisyOracle(y, m, epsilon=0.2, noise=noise, seed=1).answer(order, candidates[order])
    np.testing.assert_array_equal(again, labels[order])


def test_candidate_noise_falls_back_to_any_label_when_the_set_is_the_truth():
    y = np.zeros(200, dtype=np.intp)
    candidates = np.zeros((200, 4), dtype=bool)
    candidates[:, 0] = True
    labels, wrong = NoisyOracle(y, 4, epsilon=1.0, noise="candidate", seed=0).answer(np.arange(200), candidates)
    assert wrong.all() and (labels != 0).all() and set(labels.tolist()) == {1, 2, 3}


def test_campaign_counts_wrong_answers(digits_problem):
    Xtr, Ytr, ytr, Xte, yte = digits_problem
    rows = run_campaign(Xtr, Ytr, ytr, Xte, yte, strategy="random", budget=200, batch=50, k=5, epsilon=0.5, seed=2)
    assert 60 <= rows[-1]["n_wrong_answers"] <= 140  # Binomial(200, 0.5)


# --------------------------------------------------------------------------- areas and errors


def test_learning_curve_area_hand_computed():
    df = pd.DataFrame(
        {
            "strategy": ["a", "a", "a", "b", "b"],
            "seed": [0, 0, 0, 0, 0],
            "n_answers": [0, 10, 20, 0, 10],
            "accuracy": [0.5, 1.0, 1.0, 0.2, 0.6],
        }
    )
    area = learning_curve_area(df).set_index("strategy")["area"]
    assert area["a"] == pytest.approx((0.75 * 10 + 1.0 * 10) / 20)
    assert area["b"] == pytest.approx((0.4 * 10 + 0.6 * 10) / 20)  # last value kept to the end


@pytest.mark.parametrize(
    "change, match",
    [
        (
            {"strategy": "smartest"},
            "strategy must be one of apl, pl, participation, most_partial, random, least_confidence, margin, entropy, "
            "dst_margin, decision_change, default; got 'smartest'",
        ),
        ({"budget": 0}, "budget"),
        ({"batch": 0}, "batch"),
        ({"epsilon": 1.5}, "epsilon"),
        ({"noise": "loud"}, "noise must be one of candidate, any"),
        ({"k": 10}, "k=10 must be smaller"),
        ({"y_train": np.r_[-1, Y_LINE_TRUE[1:]]}, r"y_train\[0\] = -1 is not a known label"),
    ],
)
def test_bad_inputs(change, match):
    args = {"y_train": Y_LINE_TRUE, "strategy": "apl", "budget": 5, "batch": 1, "k": 3}
    args.update(change)
    y_train = args.pop("y_train")
    with pytest.raises(InvalidInput, match=match):
        run_campaign(X_LINE, Y_LINE, y_train, X_LINE_TEST, Y_LINE_TEST, **args)


def test_simulate_bad_inputs():
    with pytest.raises(InvalidInput, match="test_fraction"):
        simulate(X_LINE, Y_LINE, Y_LINE_TRUE, test_fraction=1.0)
    with pytest.raises(InvalidInput, match="strategy must be one of apl, .*; got 'nope'"):
        simulate(X_LINE, Y_LINE, Y_LINE_TRUE, strategies=["apl", "nope"])
    with pytest.raises(InvalidInput, match="training rows"):
        simulate(X_LINE, Y_LINE, Y_LINE_TRUE, test_fraction=0.5, k=5)


def test_a_misbehaving_strategy_is_caught():
    class Repeats(Strategy):
        name = "repeats"

        def select(self, context, batch, rng):
            return np.array([1, 1])

    with pytest.raises(InvalidInput, match="distinct partial items"):
        run_campaign(X_LINE, Y_LINE, Y_LINE_TRUE, X_LINE_TEST, Y_LINE_TEST, strategy=Repeats(), budget=4, batch=2, k=3)
