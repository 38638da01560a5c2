"""The simulator as a tool for choosing a strategy: picks, fresh objects, start states, evaluation, jobs."""

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_digits

from engine.choices import DEFAULT_STRATEGY
from engine.exceptions import InvalidInput
from engine.learners import PlKnnClassifier
from engine.noise import uniform_candidates
from engine.simulate import RESULT_COLUMNS, Strategy, make_strategy, run_campaign, simulate

TIMING = ["seconds_per_step", "setup_seconds"]


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    X, y = X[:240] / 16.0, y[:240]
    return X, uniform_candidates(y, 10, n_false=3, fraction=0.8, seed=1), y


class _Counting(Strategy):
    """Remembers every item it was told about: state that must not leak between campaigns."""

    name = "counting"

    def __init__(self):
        self.heard = []

    def start(self, context, rng):
        self.started_with = len(self.heard)

    def observe(self, instance, candidates):
        self.heard.append(instance)

    def scores(self, context):
        # Prefer items never heard of: with leaked state the choice would change.
        return -np.isin(np.arange(context.candidates.shape[0]), self.heard).astype(float) + len(self.heard)


def test_picked_items_are_recorded_as_dataset_rows(digits):
    X, Y, y = digits
    df = simulate(X, Y, y, strategies=["decision_change"], seeds=[3], budget=25, batch=10, k=5)
    picked = [row.split() for row in df["picked"]]
    assert picked[0] == [] and [len(p) for p in picked[1:]] == [10, 10, 5]
    rows = np.array([int(item) for p in picked for item in p])
    assert np.unique(rows).size == 25
    assert (Y[rows].sum(axis=1) >= 2).all()  # dataset rows whose original set is partial
    assert list(df.columns[: len(RESULT_COLUMNS)]) == list(RESULT_COLUMNS)
    assert {"setup_seconds", "picked"} <= set(RESULT_COLUMNS)
    assert df.loc[df.step == 0, "seconds_per_step"].isna().all() and (df["setup_seconds"] >= 0).all()


def test_every_campaign_gets_a_fresh_strategy_object(digits):
    X, Y, y = digits
    strategy = _Counting()
    df = simulate(X, Y, y, strategies=[strategy], seeds=[0, 0], budget=10, batch=5, k=5)
    assert strategy.heard == []  # the caller's object is never used
    first, second = (run.drop(columns=TIMING).reset_index(drop=True) for _, run in df.groupby(df.index // 3))
    pd.testing.assert_frame_equal(first, second)  # same seed twice: nothing carried over


def test_duplicate_strategy_names_are_refused(digits):
    X, Y, y = digits
    with pytest.raises(InvalidInput, match="strategies must have distinct names; 'apl' given more than once"):
        simulate(X, Y, y, strategies=["apl", "random", "apl"], seeds=1, budget=5, k=5)
    with pytest.raises(InvalidInput, match="'counting' given more than once"):
        simulate(X, Y, y, strategies=[_Counting(), _Counting()], seeds=1, budget=5, k=5)


def test_default_is_the_strategy_sessions_use(digits):
    X, Y, y = digits
    df = simulate(X, Y, y, strategies=["default", DEFAULT_STRATEGY], seeds=[1], budget=20, batch=10, k=5)
    assert set(df["strategy"]) == {"default", DEFAULT_STRATEGY}
    same = [run.drop(columns=TIMING + ["strategy"]).reset_index(drop=True) for _, run in df.groupby("strategy")]
    pd.testing.assert_frame_equal(*same)
    assert make_strategy("default").name == "default"


def test_cold_start_without_any_precise_item(digits):
    X, _, y = digits
    Y = np.ones((X.shape[0], 10), dtype=bool)
    for name in ("decision_change", "apl", "margin", "dst_margin", "random"):
        rows = run_campaign(
            X[:180], Y[:180], y[:180], X[180:], y[180:], strategy=name, budget=20, batch=10, k=5, seed=0
        )
        assert rows[0]["n_partial"] == 180 and rows[-1]["n_answers"] == 20


def test_initial_labelled_set(digits):
    X, Y, y = digits
    Xtr, Ytr, ytr = X[:180], Y[:180], y[:180]
    start = {
        n: run_campaign(Xtr, Ytr, ytr, X[180:], y[180:], strategy="random", budget=5, k=5, seed=2, initial_labels=n)[0]
        for n in (0, 40)
    }
    partial = int((Ytr.sum(axis=1) >= 2).sum())
    assert start[0]["n_partial"] == partial
    assert partial - 40 <= start[40]["n_partial"] < partial  # 40 random items, some already precise
    assert start[40]["n_answers"] == 0  # not counted in the budget
    again = run_campaign(Xtr, Ytr, ytr, X[180:], y[180:], strategy="apl", budget=5, k=5, seed=2, initial_labels=40)[0]
    assert again["n_partial"] == start[40]["n_partial"]  # the same set for every strategy of a seed
    with pytest.raises(InvalidInput, match="initial_labels"):
        run_campaign(Xtr, Ytr, ytr, X[180:], y[180:], budget=5, k=5, initial_labels=181)


def test_evaluation_k_and_classifier_are_independent_of_the_query(digits):
    X, Y, y = digits
    Xtr, Ytr, ytr, Xte, yte = X[:180], Y[:180], y[:180], X[180:], y[180:]
    base = run_campaign(Xtr, Ytr, ytr, Xte, yte, strategy="apl", budget=20, batch=10, k=5, seed=1)
    wide = run_campaign(Xtr, Ytr, ytr, Xte, yte, strategy="apl", budget=20, batch=10, k=5, seed=1, eval_k=15)
    assert [r["picked"] for r in wide] == [r["picked"] for r in base]  # the query still uses k = 5
    expected = (PlKnnClassifier(n_neighbors=15, random_state=1).fit(Xtr, Ytr).predict(Xte) == yte).mean()
    assert wide[0]["accuracy"] == pytest.approx(expected)
    other = run_campaign(
        Xtr,
        Ytr,
        ytr,
        Xte,
        yte,
        strategy="apl",
        budget=20,
        batch=10,
        k=5,
        seed=1,
        classifier=PlKnnClassifier(n_neighbors=3, random_state=0),
    )
    expected = (PlKnnClassifier(n_neighbors=3, random_state=0).fit(Xtr, Ytr).predict(Xte) == yte).mean()
    assert other[0]["accuracy"] == pytest.approx(expected)
    assert [r["picked"] for r in other] == [r["picked"] for r in base]
    with pytest.raises(InvalidInput, match="classifier must have fit"):
        run_campaign(Xtr, Ytr, ytr, Xte, yte, budget=5, k=5, classifier=object())


def test_dst_evaluation_can_be_turned_off(digits):
    X, Y, y = digits
    on = run_campaign(X[:180], Y[:180], y[:180], X[180:], y[180:], strategy="margin", budget=10, batch=5, k=5, seed=0)
    off = run_campaign(
        X[:180], Y[:180], y[:180], X[180:], y[180:], strategy="margin", budget=10, batch=5, k=5, seed=0, dst=False
    )
    for a, b in zip(on, off, strict=True):
        assert np.isnan([b["dst_accuracy"], b["reject_rate"], b["accepted_accuracy"]]).all()
        assert (a["accuracy"], a["picked"]) == (b["accuracy"], b["picked"])
        assert not np.isnan(a["dst_accuracy"])


def test_parallel_seeds_give_the_same_rows(digits):
    X, Y, y = digits
    options = dict(strategies=["decision_change", "random"], seeds=[0, 1, 2], budget=20, batch=10, k=5)
    done = []
    serial = simulate(X, Y, y, **options)
    parallel = simulate(X, Y, y, n_jobs=2, on_campaign_done=lambda name, seed: done.append((name, seed)), **options)
    pd.testing.assert_frame_equal(serial.drop(columns=TIMING), parallel.drop(columns=TIMING))
    assert sorted(done) == sorted((name, seed) for seed in (0, 1, 2) for name in ("decision_change", "random"))
    with pytest.raises(InvalidInput, match="n_jobs"):
        simulate(X, Y, y, strategies=["random"], seeds=1, budget=5, k=5, n_jobs=0)
