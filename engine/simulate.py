"""Simulated querying campaigns: which strategy makes the k-NN right with the fewest answers.

A campaign starts from a partially labelled training set whose true labels are hidden from
the strategy, and a held-out test set with known labels. At every step a *strategy* picks a
batch of still-partial training items, an *oracle* answers each with a label, the answered
candidate sets become that single label, and the state is measured:

``accuracy``
    PL-kNN accuracy on the test set: every one of the ``k`` nearest training items adds
    its (uniform) vote to every label of its current candidate set; ties are broken at
    random with a fixed seed, exactly as
    :class:`engine.learners.PlKnnClassifier` (``random_state`` = the evaluation seed).
``dst_accuracy``, ``reject_rate``, ``accepted_accuracy``
    DST-PLL on the test set (:class:`engine.dst.DstPllClassifier` with the same ``k`` and
    evaluation seed): accuracy of all predictions, the fraction the reject option refuses,
    and the accuracy of the accepted ones (NaN when nothing is accepted).
``open_targets``
    Training targets (each instance, left out of its own neighbourhood) that are still
    *open*: ``NL ≠ APL``, the cheap superset of the ambiguous ones (``NL ≠ PL``).

The neighbour graphs (training→training and test→training) never change during a
campaign, so they are computed once and the evaluation per step is ``O((n + m)·k·M)``
plus DST-PLL's combination on the ``m`` test rows.

Oracle
------
:class:`NoisyOracle` answers the true label, except that with probability ``epsilon``
(independently per item) it answers a *wrong* label, never the true one:

* ``noise="candidate"`` (default): a label drawn uniformly from the item's current
  candidate set minus the true label (an expert confusing two plausible labels). When that
  set is empty (only possible when the true label is not a candidate, e.g. under
  :func:`engine.noise.cluster_candidates` noise) it falls back to ``"any"``;
* ``noise="any"``: a label drawn uniformly from all labels except the true one.

The oracle draws each item's coin and wrong-label choice once, when it is built, from its
own seeded stream: an item gets the same answer whatever strategy asks it and whenever, so
strategies are compared on common random numbers. The answer replaces the candidate set by
``{answer}`` (the expert is not bound by the candidate set).

Strategies
----------
The strategies live in :mod:`engine.strategies` (:data:`STRATEGIES`, :class:`Strategy`,
:func:`make_strategy`); their names are importable from here too.

A campaign's result rows record which items were ``picked`` at each step, so the overlap of
two strategies' choices can be measured.

References
----------
.. [1] V.-L. Nguyen, S. Destercke and M.-H. Masson, "Querying partially labelled data to
       improve a K-nn classifier", AAAI 2017.
.. [2] T. Fuchs, F. Kalinke and K. Böhm, "Partial-Label Learning with a Reject Option",
       Transactions on Machine Learning Research, 2025.
.. [3] B. Settles, "Active Learning Literature Survey", University of Wisconsin-Madison,
       Computer Sciences Technical Report 1648, 2009 (uncertainty sampling).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np
import pandas as pd

from engine._kernels import argmax_random_ties, candidate_votes
from engine._validation import check_candidates, check_choice, check_features, check_labels, check_scalar
from engine.choices import NOISE_MODES, STRATEGY_NAMES
from engine.dst import predict_from_neighbors
from engine.exceptions import InvalidInput
from engine.neighbors import knn_graph
from engine.strategies import (
    STRATEGIES,
    AmbiguityStrategy,
    BaselineStrategy,
    CampaignContext,
    DecisionChangeStrategy,
    DstMarginStrategy,
    RankerStrategy,
    Strategy,
    VoteUncertaintyStrategy,
    candidate_vote_scores,
    make_strategy,
)
from engine.winners import label_sets, open_targets

__all__ = [
    "RESULT_COLUMNS",
    "STRATEGIES",
    "STRATEGY_NAMES",
    "NOISE_MODES",
    "CampaignContext",
    "Strategy",
    "RankerStrategy",
    "AmbiguityStrategy",
    "BaselineStrategy",
    "VoteUncertaintyStrategy",
    "DstMarginStrategy",
    "DecisionChangeStrategy",
    "candidate_vote_scores",
    "NoisyOracle",
    "make_strategy",
    "run_campaign",
    "simulate",
    "learning_curve_area",
]

RESULT_COLUMNS: tuple[str, ...] = (
    "strategy",
    "seed",
    "step",
    "n_answers",
    "n_wrong_answers",
    "n_partial",
    "accuracy",
    "dst_accuracy",
    "reject_rate",
    "accepted_accuracy",
    "open_targets",
    "seconds_per_step",
    "setup_seconds",
    "picked",
)
"""Columns of every result row, in order."""


# --------------------------------------------------------------------------- oracle


class NoisyOracle:
    """Answers the true label, or with probability ``epsilon`` a wrong one (see module doc).

    Parameters
    ----------
    true_labels : int array of shape (n_instances,)
    n_labels : int
    epsilon : float in [0, 1]
    noise : {"candidate", "any"}
    seed : int, Generator or None
    """

    def __init__(
        self,
        true_labels: np.ndarray,
        n_labels: int,
        *,
        epsilon: float = 0.0,
        noise: str = "candidate",
        seed: Any = None,
    ) -> None:
        check_scalar(epsilon, "epsilon", kind=Real, min_value=0.0, max_value=1.0)
        check_choice(noise, "noise", NOISE_MODES)
        if n_labels < 2 and epsilon > 0:
            raise InvalidInput("a noisy oracle needs at least two labels")
        self.true_labels = np.asarray(true_labels, dtype=np.intp)
        self.n_labels = int(n_labels)
        self.epsilon = float(epsilon)
        self.noise = noise
        rng = np.random.default_rng(seed)
        n = int(self.true_labels.shape[0])
        self._wrong = rng.random(n) < self.epsilon
        self._pick = rng.random(n)

    def answer(self, items: np.ndarray, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Labels for ``items`` given their current candidate rows (len(items), n_labels).

        Returns ``(labels, wrong)``: int and bool arrays of shape (len(items),).
        """
        items = np.asarray(items, dtype=np.intp)
        labels = self.true_labels[items].copy()
        wrong = self._wrong[items]
        for i in np.flatnonzero(wrong):
            truth = labels[i]
            options = np.flatnonzero(candidates[i]) if self.noise == "candidate" else np.empty(0, np.intp)
            options = options[options != truth]
            if options.size == 0:
                options = np.delete(np.arange(self.n_labels), truth)
            labels[i] = options[int(self._pick[items[i]] * options.size)]
        return labels, wrong


# --------------------------------------------------------------------------- campaign


@dataclass
class _Evaluator:
    """Test-set and training-target measurements for the current candidate sets."""

    idx: np.ndarray  # training graph of the query (n, k)
    w: np.ndarray
    test_idx: np.ndarray  # test → training graph of the evaluation (m, eval_k)
    test_w: np.ndarray
    y_test: np.ndarray
    seed: int
    dst: bool = True
    classifier: Any = None  # an estimator with fit(X, Y) / predict(X) instead of PL-kNN
    X_train: np.ndarray | None = None
    X_test: np.ndarray | None = None

    def measure(self, Y: np.ndarray) -> dict[str, float]:
        if self.classifier is None:
            votes = candidate_votes(self.test_idx, self.test_w, Y)
            knn_pred = argmax_random_ties(votes, np.random.default_rng(self.seed))
        else:
            from sklearn.base import clone

            knn_pred = np.asarray(clone(self.classifier).fit(self.X_train, Y).predict(self.X_test))
        out = {
            "accuracy": float((knn_pred == self.y_test).mean()),
            "dst_accuracy": float("nan"),
            "reject_rate": float("nan"),
            "accepted_accuracy": float("nan"),
            "open_targets": int(open_targets(*label_sets(self.idx, self.w, Y)).sum()),
        }
        if self.dst:
            dst_pred, accepted, _ = predict_from_neighbors(Y, self.test_idx, random_state=self.seed)
            dst_right = dst_pred == self.y_test
            out["dst_accuracy"] = float(dst_right.mean())
            out["reject_rate"] = float(1.0 - accepted.mean())
            out["accepted_accuracy"] = float(dst_right[accepted].mean()) if accepted.any() else float("nan")
        return out


def run_campaign(
    X_train: Any,
    Y_train: Any,
    y_train: Any,
    X_test: Any,
    y_test: Any,
    *,
    strategy: str | Strategy = "apl",
    budget: int = 100,
    batch: int = 1,
    k: int = 10,
    epsilon: float = 0.0,
    noise: str = "candidate",
    seed: int = 0,
    eval_k: int | None = None,
    classifier: Any = None,
    dst: bool = True,
    initial_labels: int = 0,
    item_ids: Any = None,
) -> list[dict[str, Any]]:
    """Run one querying campaign and return one result row per batch (plus the start).

    Parameters
    ----------
    X_train : array of shape (n_instances, n_features)
    Y_train : bool array of shape (n_instances, n_labels)
        Initial candidate sets (not modified).
    y_train : int array of shape (n_instances,)
        Hidden true labels, seen only by the oracle.
    X_test : array of shape (n_test, n_features)
    y_test : int array of shape (n_test,)
    strategy : str or Strategy
        A name of :data:`STRATEGIES` or a strategy object.
    budget : int
        Most answers to ask; the campaign also stops when no partial item is left.
    batch : int
        Items asked per step (the last batch may be smaller).
    k : int
        Neighbours of PL-kNN, DST-PLL and the query scores.
    epsilon : float in [0, 1]
        Probability that the oracle answers a wrong label.
    noise : {"candidate", "any"}
        Where wrong answers come from (see :class:`NoisyOracle`).
    seed : int
        Seeds the strategy's sampling and tie-breaking, the oracle, the initial labels and
        the evaluation.
    eval_k : int, optional
        Neighbours of the evaluation (PL-kNN and DST-PLL on the test set); default ``k``.
        The query strategies always use ``k``.
    classifier : estimator, optional
        Evaluate with this partial-label classifier instead of PL-kNN: a fresh
        :func:`sklearn.base.clone` is fitted on (training features, current candidate sets)
        at every step and its ``predict`` on the test set gives ``accuracy``.
    dst : bool
        Measure DST-PLL on the test set (``False``: its columns are NaN, and it costs nothing).
    initial_labels : int
        Training items (drawn at random from the seed) answered with their true label before
        the start and not counted in the budget: an initial labelled set. ``0`` starts from the
        candidate sets as given, which may hold no precise item at all (a cold start).
    item_ids : array of shape (n_instances,), optional
        Names of the training rows written to ``picked`` (default: the row numbers).

    Returns
    -------
    rows : list of dict
        Keys :data:`RESULT_COLUMNS`: ``seconds_per_step`` is the strategy's time for the
        batch (selection and incremental updates; NaN on the starting row),
        ``setup_seconds`` its one-off start (e.g. building a ranker), ``picked`` the items it
        asked in that step, best first, as space-separated ``item_ids`` (empty at the start).
    """
    X_train = check_features(X_train, name="X_train")
    n = X_train.shape[0]
    Y = check_candidates(Y_train, name="Y_train", n_rows=n).copy()
    n_labels = Y.shape[1]
    y_train, _ = check_labels(y_train, n_labels=n_labels, n_rows=n, name="y_train")
    X_test = check_features(X_test, name="X_test")
    if X_test.shape[1] != X_train.shape[1]:
        raise InvalidInput(f"X_test has {X_test.shape[1]} features but X_train has {X_train.shape[1]}")
    y_test, _ = check_labels(y_test, n_labels=n_labels, n_rows=X_test.shape[0], name="y_test")
    check_scalar(budget, "budget", kind=Integral, min_value=1)
    check_scalar(batch, "batch", kind=Integral, min_value=1)
    check_scalar(k, "k", kind=Integral, min_value=1)
    check_scalar(seed, "seed", kind=Integral, min_value=0)
    eval_k = k if eval_k is None else eval_k
    check_scalar(eval_k, "eval_k", kind=Integral, min_value=1)
    check_scalar(initial_labels, "initial_labels", kind=Integral, min_value=0, max_value=n)
    if k >= n:
        raise InvalidInput(f"k={k} must be smaller than the number of training instances ({n})")
    if eval_k > n:
        raise InvalidInput(f"eval_k={eval_k} exceeds the number of training instances ({n})")
    if classifier is not None and not (hasattr(classifier, "fit") and hasattr(classifier, "predict")):
        raise InvalidInput(f"classifier must have fit(X, Y) and predict(X); got {type(classifier).__name__}")
    ids = np.arange(n) if item_ids is None else np.asarray(item_ids)
    if ids.shape != (n,):
        raise InvalidInput(f"item_ids must name the {n} training rows; got shape {ids.shape}")
    strategy = make_strategy(strategy)
    strategy_seed, oracle_seed, initial_seed = np.random.SeedSequence([int(seed), 20170204]).spawn(3)
    rng = np.random.default_rng(strategy_seed)
    oracle = NoisyOracle(y_train, n_labels, epsilon=epsilon, noise=noise, seed=oracle_seed)
    if initial_labels:
        # The initial labelled set is the truth (as a gold standard would be), not the oracle.
        first = np.random.default_rng(initial_seed).choice(n, size=int(initial_labels), replace=False)
        Y[first] = False
        Y[first, y_train[first]] = True

    idx, w = knn_graph(X_train, k=k)
    test_idx, test_w = knn_graph(X_train, X_test, k=eval_k)
    evaluator = _Evaluator(
        idx,
        w,
        test_idx,
        test_w,
        y_test,
        int(seed),
        dst=bool(dst),
        classifier=classifier,
        X_train=X_train,
        X_test=X_test,
    )
    view = Y.view()
    view.flags.writeable = False
    context = CampaignContext(X_train, view, idx, w)
    started = time.perf_counter()
    strategy.start(context, rng)
    setup = time.perf_counter() - started

    def row(step: int, seconds: float, n_wrong: int, picks: np.ndarray) -> dict[str, Any]:
        return {
            "strategy": strategy.name,
            "seed": int(seed),
            "step": step,
            "n_answers": context.n_answers,
            "n_wrong_answers": n_wrong,
            "n_partial": int(context.partial.sum()),
            **evaluator.measure(Y),
            "seconds_per_step": seconds,
            "setup_seconds": setup,
            "picked": " ".join(str(item) for item in ids[picks].tolist()),
        }

    n_wrong = 0
    rows = [row(0, float("nan"), 0, np.empty(0, dtype=np.intp))]
    step = 0
    while context.n_answers < budget:
        partial = context.partial
        if not partial.any():
            break
        size = min(batch, budget - context.n_answers)
        started = time.perf_counter()
        picks = np.asarray(strategy.select(context, size, rng), dtype=np.intp).ravel()
        if picks.size == 0 or picks.size > size or np.unique(picks).size != picks.size or not partial[picks].all():
            raise InvalidInput(
                f"strategy {strategy.name!r} must pick 1..{size} distinct partial items; picked {picks.tolist()}"
            )
        elapsed = time.perf_counter() - started
        labels, wrong = oracle.answer(picks, Y[picks])
        for item, label in zip(picks, labels, strict=True):
            Y[item] = False
            Y[item, label] = True
        started = time.perf_counter()
        for item in picks:
            strategy.observe(int(item), Y[item].copy())
        elapsed += time.perf_counter() - started
        context.n_answers += int(picks.size)
        n_wrong += int(wrong.sum())
        step += 1
        rows.append(row(step, elapsed, n_wrong, picks))
    return rows


def _split(n: int, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.random.default_rng([int(seed), 7]).permutation(n)
    n_test = int(round(test_fraction * n))
    return np.sort(order[n_test:]), np.sort(order[:n_test])


def _minmax(X_train: np.ndarray, X_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    low = X_train.min(axis=0)
    span = X_train.max(axis=0) - low
    span[span == 0] = 1.0
    return (X_train - low) / span, (X_test - low) / span


def _campaign_task(
    X: np.ndarray,
    Y: np.ndarray,
    y: np.ndarray,
    test_fraction: float,
    scale: bool,
    seed: int,
    spec: str | Strategy,
    options: dict[str, Any],
) -> list[dict[str, Any]]:
    """One campaign of :func:`simulate` on seed ``seed``'s split (runs in a worker with n_jobs > 1)."""
    train, test = _split(X.shape[0], test_fraction, seed)
    X_train, X_test = _minmax(X[train], X[test]) if scale else (X[train], X[test])
    return run_campaign(
        X_train,
        Y[train],
        y[train],
        X_test,
        y[test],
        strategy=make_strategy(spec, fresh=True),
        seed=seed,
        item_ids=train,
        **options,
    )


def simulate(
    X: Any,
    Y: Any,
    y: Any,
    *,
    strategies: Sequence[str | Strategy] = ("apl", "random"),
    seeds: int | Iterable[int] = 5,
    test_fraction: float = 0.25,
    budget: int = 100,
    batch: int = 1,
    k: int = 10,
    epsilon: float = 0.0,
    noise: str = "candidate",
    scale: bool = True,
    on_campaign_done: Callable[[str, int], None] | None = None,
    eval_k: int | None = None,
    classifier: Any = None,
    dst: bool = True,
    initial_labels: int = 0,
    n_jobs: int = 1,
) -> pd.DataFrame:
    """Run every strategy on every seed's train/test split; return all rows as a DataFrame.

    Each seed draws one random split (``test_fraction`` of the rows held out), shared by
    every strategy, so strategies are compared on the same data. With ``scale`` the
    features are min-max scaled on the training part (the protocol of the PLL benchmarks).

    Parameters
    ----------
    X : array of shape (n_instances, n_features)
    Y : bool array of shape (n_instances, n_labels)
        Candidate sets.
    y : int array of shape (n_instances,)
        True labels (all known).
    strategies : sequence of str or Strategy
        Names of :data:`STRATEGIES` (``"default"`` is the strategy sessions use) or objects;
        two with the same ``name`` are refused. Every campaign gets a new object (a name's
        factory, or a deep copy of an object), so nothing carries over between seeds.
    seeds : int or iterable of int
        ``5`` means seeds 0..4.
    test_fraction : float in (0, 1)
    budget, batch, k, epsilon, noise, eval_k, classifier, dst, initial_labels
        As in :func:`run_campaign`.
    scale : bool
        Min-max scale the features, fitted on the training part.
    on_campaign_done : callable(strategy_name, seed), optional
        Called after each campaign (progress bars), in the calling process.
    n_jobs : int
        Campaigns run at once in worker processes (joblib); ``1`` runs them here, one after
        the other. The rows do not depend on it: each campaign is seeded on its own.

    Returns
    -------
    results : DataFrame
        One row per (strategy, seed, step), columns :data:`RESULT_COLUMNS` first, ordered by
        seed, then strategy as given.
    """
    X = check_features(X, name="X")
    Y = check_candidates(Y, name="Y", n_rows=X.shape[0])
    y, _ = check_labels(y, n_labels=Y.shape[1], n_rows=X.shape[0], name="y")
    check_scalar(test_fraction, "test_fraction", kind=Real, min_value=0.0, max_value=1.0)
    if not 0.0 < test_fraction < 1.0:
        raise InvalidInput(f"test_fraction must be strictly between 0 and 1; got {test_fraction!r}")
    # int named beside the Integral ABC (numpy integers) for type checkers, which cannot narrow by an ABC.
    if isinstance(seeds, (int, Integral)):
        check_scalar(seeds, "seeds", kind=Integral, min_value=1)
        seeds = range(int(seeds))
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise InvalidInput("seeds is empty")
    if isinstance(strategies, (str, Strategy)):
        strategies = [strategies]
    objects = [make_strategy(s) for s in strategies]  # unknown names fail before any work
    if not objects:
        raise InvalidInput(f"strategies is empty; valid strategies: {', '.join(STRATEGIES)}")
    names = [strategy.name for strategy in objects]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise InvalidInput(f"strategies must have distinct names; {', '.join(map(repr, twice))} given more than once")
    check_scalar(n_jobs, "n_jobs", kind=Integral, min_value=1)
    n_test = int(round(test_fraction * X.shape[0]))
    if n_test < 1 or X.shape[0] - n_test <= k:
        raise InvalidInput(
            f"test_fraction={test_fraction} leaves {n_test} test and {X.shape[0] - n_test} training rows; "
            f"need at least 1 test row and more than k={k} training rows"
        )
    options = dict(
        budget=budget,
        batch=batch,
        k=k,
        epsilon=epsilon,
        noise=noise,
        eval_k=eval_k,
        classifier=classifier,
        dst=dst,
        initial_labels=initial_labels,
    )
    # A name goes to the worker as a name (its factory builds a new object there); an object
    # is deep-copied per campaign.
    tasks = [(X, Y, y, test_fraction, scale, seed, spec, options) for seed in seeds for spec in strategies]
    rows: list[dict[str, Any]] = []
    if n_jobs == 1:
        results = (_campaign_task(*task) for task in tasks)
    else:
        from joblib import Parallel, delayed

        results = Parallel(n_jobs=int(n_jobs), return_as="generator")(delayed(_campaign_task)(*task) for task in tasks)
    for campaign in results:
        rows += campaign
        if on_campaign_done is not None:
            on_campaign_done(campaign[0]["strategy"], campaign[0]["seed"])
    table = pd.DataFrame(rows)
    return table[list(RESULT_COLUMNS) + [c for c in table.columns if c not in RESULT_COLUMNS]]


def learning_curve_area(results: pd.DataFrame, metric: str = "accuracy") -> pd.DataFrame:
    """Normalised area under ``metric`` vs ``n_answers`` for every (strategy, seed).

    The trapezoid area from 0 answers to the largest ``n_answers`` in ``results``, divided
    by that length: the campaign's mean ``metric`` per answer. A campaign that ran out of
    partial items early keeps its last value to the end (nothing is left to ask).

    Returns
    -------
    DataFrame with columns ``strategy``, ``seed``, ``area``.
    """
    missing = {"strategy", "seed", "n_answers", metric} - set(results.columns)
    if missing:
        raise InvalidInput(f"results lacks the columns {sorted(missing)}")
    end = float(results["n_answers"].max())
    out = []
    for (strategy, seed), run in results.groupby(["strategy", "seed"], sort=False):
        run = run.sort_values("n_answers")
        x = run["n_answers"].to_numpy(dtype=np.float64)
        v = run[metric].to_numpy(dtype=np.float64)
        if x[-1] < end:
            x, v = np.append(x, end), np.append(v, v[-1])
        area = float(np.sum((x[1:] - x[:-1]) * (v[1:] + v[:-1]) / 2) / end) if end > 0 else float(v[0])
        out.append({"strategy": strategy, "seed": seed, "area": area})
    return pd.DataFrame(out)
