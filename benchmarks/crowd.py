"""Crowd-made sets: winnow's final labels against majority vote, Dawid–Skene and CROWDLAB (issue 22).

The setting
-----------
A data set with features and known labels; a simulated crowd
(:func:`engine.noise.crowd_votes`, every annotator voting once per item) labels every item.
Each method turns the votes into a **final label for every item**, with the help of an
expert who answers the true label of the items the method asks, at budgets of 0, 50, 100
and 200 answers. The score is the accuracy of the final labels over all items (transductive:
the items to label are the items the methods learn from). An expert answer always becomes
that item's final label, for every method.

``winnow``
    What a winnow session does with the votes: the candidate set of an item is the union of
    its votes (the default of ``winnow import --votes``), the expert is asked in the order
    of the session's query criterion (``engine.simulate``'s ``default`` strategy, one answer
    at a time, the order updated after each answer), and the final labels are DST-PLL's
    transductive labels (:func:`engine.dst.transductive_decisions` on the k = 10 neighbour
    graph of :func:`engine.neighbors.knn_graph`, uniform weights, the session defaults; the
    model app/service/delivery.py labels open items with). An answered item's set is its
    answer; a single-candidate set is its own label; an open item gets DST-PLL's label,
    accepted or not (the reject option is ignored here so that every item has a label and
    the accuracies compare). Like a session, winnow asks only items with two or more
    candidates: when none is left it stops early, and the answers it used are reported.
``winnow + suspect``
    Only when ``engine.suspect`` exists (branch ``suspect``): the same, with the items it
    flags as ``suspect`` (sets that probably miss the truth) served first, then the
    criterion's order.
``majority vote``
    The most voted label, ties broken at random (seeded). The expert is asked the items of
    lowest agreement first (share of the votes for the majority label; ties at random).
``Dawid–Skene``
    ``crowdkit.aggregation.DawidSkene`` (100 EM iterations at most), the label of highest
    posterior. The expert is asked the items of lowest posterior first, in batches of
    ``BATCH`` with a new fit after every batch; the expert's answers enter the fit as one
    more annotator (so they inform the estimated confusion matrices) **and** replace the
    asked items' labels after aggregation (so an answer is never overruled).
``CROWDLAB``
    ``cleanlab.multiannotator.get_label_quality_multiannotator`` with the out-of-fold
    predicted probabilities (5 folds) of a scikit-learn ``KNeighborsClassifier`` (k = 10,
    the same scaled features as winnow) trained on the majority-vote labels, the expert's
    answers replacing those of the asked items; its consensus label. The expert is asked
    the items of lowest consensus quality score first, in batches of ``BATCH`` with a new
    fit after every batch; the answers enter as one more annotator and replace the asked
    items' consensus labels, as for Dawid–Skene.

Data: scikit-learn's bundled digits (1,797 items, 10 labels), wine (178, 3), breast cancer
(569, 2) and iris (150, 3), and one generated set (``make_classification``: 1,000 items,
6 labels, 20 features of which 8 informative, ``random_state=0``), since scikit-learn
bundles no other classification set and nothing is downloaded. Features min-max scaled.
Two crowds per data set (:data:`CROWDS`): the generator's default crowd and a weaker one
whose union of votes misses the truth more often. A seed draws the crowd (its accuracies,
confusions and votes) and every tie-break; the features do not change.

No parameter was tuned on the truth: the crowds, budgets, k and the selection rules were
fixed before the first run.

Not part of ``make test``. One thread per process (set before numpy loads).

Run (with the peers installed, see ``benchmarks/requirements.txt``):
``python -m benchmarks.crowd [--seeds 10] [--jobs 2] [--output docs/results_crowd.md]``.
A peer whose package is missing is skipped with a message.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse  # noqa: E402 - after the thread limits, which must precede numpy
import importlib  # noqa: E402
import importlib.metadata  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from engine.dst import transductive_decisions  # noqa: E402
from engine.neighbors import knn_graph  # noqa: E402
from engine.noise import crowd_votes  # noqa: E402
from engine.simulate import CampaignContext, make_strategy  # noqa: E402

BUDGETS: tuple[int, ...] = (0, 50, 100, 200)
SEEDS = 10
K = 10
BATCH = 50  # answers between two fits of the peers that re-rank (Dawid–Skene, CROWDLAB)
CV_FOLDS = 5


@dataclass(frozen=True)
class Crowd:
    """A simulated crowd's parameters (:func:`engine.noise.crowd_votes`)."""

    name: str
    n_annotators: int
    accuracy: tuple[float, float]


CROWDS: tuple[Crowd, ...] = (
    Crowd("crowd of 3, accuracy 0.6–0.9", 3, (0.6, 0.9)),
    Crowd("weak crowd of 3, accuracy 0.4–0.8", 3, (0.4, 0.8)),
)
"""The generator's default crowd, and a weaker one whose sets miss the truth more often."""


def _minmax(X: np.ndarray) -> np.ndarray:
    low, high = X.min(axis=0), X.max(axis=0)
    return (X - low) / np.where(high > low, high - low, 1.0)


def _bundled(loader: str) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
    def load() -> tuple[np.ndarray, np.ndarray]:
        from sklearn import datasets

        X, y = getattr(datasets, loader)(return_X_y=True)
        return np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.intp)

    return load


def _generated() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import make_classification

    X, y = make_classification(
        n_samples=1000, n_features=20, n_informative=8, n_redundant=4, n_classes=6, random_state=0
    )
    return X, np.asarray(y, dtype=np.intp)


DATASETS: dict[str, Callable[[], tuple[np.ndarray, np.ndarray]]] = {
    "digits": _bundled("load_digits"),
    "wine": _bundled("load_wine"),
    "breast cancer": _bundled("load_breast_cancer"),
    "iris": _bundled("load_iris"),
    "generated (make_classification)": _generated,
}
"""Name → loader of (features, labels); nothing is downloaded."""


@dataclass(frozen=True)
class CrowdSet:
    """One data set labelled by one crowd on one seed.

    Attributes
    ----------
    X : array of shape (n_items, n_features)
        Min-max scaled features.
    y : int array of shape (n_items,)
        The truth: what the expert answers, and what the final labels are scored against.
    votes : int array of shape (n_items, n_annotators)
        Every annotator's vote on every item.
    n_labels : int
    seed : int
    """

    X: np.ndarray
    y: np.ndarray
    votes: np.ndarray
    n_labels: int
    seed: int

    @property
    def candidates(self) -> np.ndarray:
        """Bool array of shape (n_items, n_labels): the union of each item's votes."""
        Y = np.zeros((self.y.shape[0], self.n_labels), dtype=bool)
        Y[np.arange(self.y.shape[0])[:, None], self.votes] = True
        return Y


def make_crowd_set(X: np.ndarray, y: np.ndarray, crowd: Crowd, seed: int) -> CrowdSet:
    """The votes of ``crowd`` on the items ``(X, y)``, drawn from ``seed``."""
    n_labels = int(y.max()) + 1
    votes = crowd_votes(
        y,
        n_labels,
        n_annotators=crowd.n_annotators,
        accuracy=crowd.accuracy,
        n_confusions=min(2, n_labels - 1),
        seed=np.random.default_rng([seed, 22]),
    )
    return CrowdSet(_minmax(X), y, np.asarray(votes), n_labels, seed)


# --------------------------------------------------------------------------- methods

#: A method's labels at each budget: budget → (final labels, expert answers used).
Curve = dict[int, tuple[np.ndarray, int]]


def _vote_counts(votes: np.ndarray, n_labels: int) -> np.ndarray:
    counts = np.zeros((votes.shape[0], n_labels))
    np.add.at(counts, (np.arange(votes.shape[0])[:, None], votes), 1.0)
    return counts


def _lowest_first(score: np.ndarray, allowed: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """The ``size`` allowed items of lowest ``score``, ties broken by seeded random keys."""
    keys = rng.random(score.shape)
    order = np.lexsort((keys, score))
    return order[allowed[order]][:size]


def winnow_labels(cs: CrowdSet, budgets: Sequence[int], *, first: Sequence[int] | np.ndarray = ()) -> Curve:
    """Votes → union sets → the session's query order → DST-PLL's labels (see the module doc).

    ``first`` lists items served, in that order, before the criterion's order (the
    ``suspect`` ones), whatever their set's size.
    """
    Y = cs.candidates
    idx, w = knn_graph(cs.X, k=K)
    view = Y.view()
    view.flags.writeable = False  # the strategy reads the sets, the loop writes them
    context = CampaignContext(cs.X, view, idx, w)
    strategy = make_strategy("default", fresh=True)
    rng = np.random.default_rng([cs.seed, 1])
    strategy.start(context, rng)
    queue = [int(item) for item in first]
    answered = np.zeros(Y.shape[0], dtype=bool)
    curve: Curve = {}
    for budget in sorted(budgets):
        while context.n_answers < budget:
            queue = [item for item in queue if not answered[item]]
            if queue:
                item = queue[0]
            elif context.partial.any():
                item = int(strategy.select(context, 1, rng)[0])
            else:
                break  # like a session: nothing open is left to ask
            Y[item] = False
            Y[item, cs.y[item]] = True
            answered[item] = True
            strategy.observe(item, Y[item].copy())
            context.n_answers += 1
        labels, _, _ = transductive_decisions(Y, idx, random_state=cs.seed)
        curve[budget] = (np.asarray(labels, dtype=np.intp), context.n_answers)
    return curve


def majority_labels(cs: CrowdSet, budgets: Sequence[int]) -> Curve:
    """Majority vote (seeded random ties); the expert asked lowest agreement first."""
    rng = np.random.default_rng([cs.seed, 2])
    counts = _vote_counts(cs.votes, cs.n_labels)
    top = counts.max(axis=1, keepdims=True)
    keys = np.where(counts == top, rng.random(counts.shape), -1.0)
    majority = keys.argmax(axis=1)
    agreement = top[:, 0] / counts.sum(axis=1)
    order = _lowest_first(agreement, np.ones(agreement.shape[0], dtype=bool), agreement.shape[0], rng)
    curve: Curve = {}
    for budget in budgets:
        asked = order[:budget]
        labels = majority.copy()
        labels[asked] = cs.y[asked]
        curve[budget] = (labels, int(asked.size))
    return curve


def _batched(
    cs: CrowdSet,
    budgets: Sequence[int],
    fit: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    seed_tag: int,
) -> Curve:
    """A peer that re-ranks: ask the lowest-scored items in batches, refit, fix answers.

    ``fit(asked)`` returns (labels, score) of every item given the expert's answers to
    ``asked``; the next batch is the lowest-scored items not asked yet.
    """
    rng = np.random.default_rng([cs.seed, seed_tag])
    n = cs.y.shape[0]
    asked = np.zeros(0, dtype=np.intp)
    labels, score = fit(asked)
    curve: Curve = {}
    for budget in sorted(budgets):
        while asked.size < min(budget, n):
            size = min(BATCH, budget - asked.size)
            allowed = np.ones(n, dtype=bool)
            allowed[asked] = False
            asked = np.concatenate([asked, _lowest_first(score, allowed, size, rng)])
            labels, score = fit(asked)
        final = labels.copy()
        final[asked] = cs.y[asked]  # an answer is never overruled
        curve[budget] = (final, int(asked.size))
    return curve


def dawid_skene_labels(cs: CrowdSet, budgets: Sequence[int]) -> Curve:
    """Dawid–Skene (crowd-kit); the expert is one more annotator, asked lowest posterior first."""
    from crowdkit.aggregation import DawidSkene  # type: ignore[import-not-found]  # benchmark-only peer

    n, m = cs.votes.shape
    crowd = pd.DataFrame({"task": np.repeat(np.arange(n), m), "worker": np.tile(np.arange(m), n)})
    crowd["label"] = cs.votes.ravel()

    def fit(asked: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        expert = pd.DataFrame({"task": asked, "worker": m, "label": cs.y[asked]})
        data = pd.concat([crowd, expert], ignore_index=True) if asked.size else crowd
        model = DawidSkene(n_iter=100).fit(data)
        proba = model.probas_.reindex(index=np.arange(n), columns=np.arange(cs.n_labels), fill_value=0.0)
        proba = proba.to_numpy(dtype=np.float64)
        return proba.argmax(axis=1), proba.max(axis=1)

    return _batched(cs, budgets, fit, 3)


def _out_of_fold_proba(X: np.ndarray, labels: np.ndarray, n_labels: int, seed: int) -> np.ndarray:
    """Out-of-fold ``predict_proba`` of a k-NN classifier, one column per label (absent labels 0)."""
    from sklearn.model_selection import KFold
    from sklearn.neighbors import KNeighborsClassifier

    proba = np.zeros((X.shape[0], n_labels))
    for train, test in KFold(CV_FOLDS, shuffle=True, random_state=seed).split(X):
        model = KNeighborsClassifier(n_neighbors=min(K, train.size)).fit(X[train], labels[train])
        proba[np.ix_(test, model.classes_)] = model.predict_proba(X[test])
    return proba


def crowdlab_labels(cs: CrowdSet, budgets: Sequence[int]) -> Curve:
    """CROWDLAB (cleanlab) with a k-NN's out-of-fold probabilities; asked lowest quality first."""
    from cleanlab.multiannotator import get_label_quality_multiannotator  # type: ignore[import-not-found]

    majority = majority_labels(cs, [0])[0][0]
    n = cs.y.shape[0]

    def fit(asked: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        annotations = cs.votes.astype(np.float64)
        trained_on = majority.copy()
        if asked.size:
            expert = np.full((n, 1), np.nan)
            expert[asked, 0] = cs.y[asked]
            annotations = np.hstack([annotations, expert])
            trained_on[asked] = cs.y[asked]
        proba = _out_of_fold_proba(cs.X, trained_on, cs.n_labels, cs.seed)
        with warnings.catch_warnings():
            # cleanlab warns about labels no annotator used; they simply get no consensus.
            warnings.simplefilter("ignore")
            quality = get_label_quality_multiannotator(
                annotations,
                proba,
                verbose=False,
                return_detailed_quality=False,
                return_annotator_stats=False,
            )["label_quality"]
        return (
            quality["consensus_label"].to_numpy(dtype=np.intp),
            quality["consensus_quality_score"].to_numpy(dtype=np.float64),
        )

    return _batched(cs, budgets, fit, 4)


@dataclass(frozen=True)
class Method:
    """A way to turn votes (and expert answers) into final labels."""

    name: str
    labels: Callable[[CrowdSet, Sequence[int]], Curve]
    needs: str | None = None  # the import a peer needs (its package may be missing)
    package: str | None = None  # that package's distribution name, for its version


def _suspect_first() -> Callable[[CrowdSet, Sequence[int]], Curve] | None:
    """``winnow + suspect`` when ``engine.suspect`` has landed (branch ``suspect``), else None.

    The flags are those of a session before any answer: :func:`engine.suspect.suspect_sets`
    (its default criterion and false-alarm rate) on the session's graph and the union sets,
    its threshold calibrated on the single given labels (``app.service.suspects`` does the
    same until enough answers exist). The flagged items are served most suspect first.
    """
    try:
        suspect = importlib.import_module("engine.suspect")
    except ImportError:
        return None

    def labels(cs: CrowdSet, budgets: Sequence[int]) -> Curve:
        Y = cs.candidates
        idx, w = knn_graph(cs.X, k=K)
        found = suspect.suspect_sets(idx, w, Y, trusted=Y.sum(axis=1) == 1)
        flagged = np.flatnonzero(found.suspect)
        order = flagged[np.argsort(-found.scores[flagged], kind="stable")]
        return winnow_labels(cs, budgets, first=order)

    return labels


def methods() -> list[Method]:
    """Every method, winnow's first; ``winnow + suspect`` only when ``engine.suspect`` exists."""
    out = [Method("winnow", winnow_labels)]
    suspect = _suspect_first()
    if suspect is not None:
        out.append(Method("winnow + suspect", suspect))
    out += [
        Method("majority vote", majority_labels),
        Method("Dawid–Skene", dawid_skene_labels, "crowdkit.aggregation", "crowd-kit"),
        Method("CROWDLAB", crowdlab_labels, "cleanlab.multiannotator", "cleanlab"),
    ]
    return out


def missing_peers(candidates: Sequence[Method]) -> dict[str, str]:
    """Method name → why it is skipped, for the peers whose package cannot be imported."""
    missing = {}
    for method in candidates:
        if method.needs is None:
            continue
        try:
            importlib.import_module(method.needs)
        except ImportError as error:
            missing[method.name] = (
                f"{method.name} skipped: {method.needs} cannot be imported ({error}); "
                f"install the peers of benchmarks/requirements.txt to compare with it"
            )
    return missing


# --------------------------------------------------------------------------- run


def _setting_task(
    dataset: str, crowd: Crowd, seed: int, budgets: tuple[int, ...], names: tuple[str, ...]
) -> list[dict[str, Any]]:
    """Every method on one (data set, crowd, seed); runs in a worker with ``--jobs`` > 1."""
    X, y = DATASETS[dataset]()
    cs = make_crowd_set(X, y, crowd, seed)
    Y = cs.candidates
    in_set = float(Y[np.arange(y.shape[0]), y].mean())
    rows = []
    for method in methods():
        if method.name not in names:
            continue
        started = time.perf_counter()
        curve = method.labels(cs, budgets)
        seconds = time.perf_counter() - started
        for budget, (labels, n_answers) in curve.items():
            rows.append(
                {
                    "dataset": dataset,
                    "crowd": crowd.name,
                    "seed": seed,
                    "method": method.name,
                    "budget": budget,
                    "n_answers": n_answers,
                    "accuracy": float((labels == y).mean()),
                    "seconds": seconds,
                    "n_items": int(y.shape[0]),
                    "truth_in_set": in_set,
                    "partial": float((Y.sum(axis=1) >= 2).mean()),
                }
            )
    return rows


def run(
    datasets: Sequence[str],
    crowds: Sequence[Crowd],
    seeds: Sequence[int],
    budgets: Sequence[int] = BUDGETS,
    *,
    n_jobs: int = 1,
    log: Callable[[str], None] = print,
) -> tuple[pd.DataFrame, dict[str, str]]:
    """All methods on every (data set, crowd, seed); returns the rows and the skipped peers.

    Returns
    -------
    rows : DataFrame
        One row per (dataset, crowd, seed, method, budget): ``n_answers`` the expert answers
        used, ``accuracy`` of the final labels, ``seconds`` of the method's whole curve, and
        the set's ``truth_in_set`` and ``partial`` shares.
    skipped : dict of str to str
        Peer → the message saying why it was skipped (its package is missing).
    """
    unknown = sorted(set(datasets) - set(DATASETS))
    if unknown:
        raise ValueError(f"unknown data sets {unknown}; valid: {sorted(DATASETS)}")
    every = methods()
    skipped = missing_peers(every)
    for message in skipped.values():
        log(message)
    names = tuple(m.name for m in every if m.name not in skipped)
    budgets = tuple(sorted(set(int(b) for b in budgets)))
    tasks = [(d, c, int(s), budgets, names) for d in datasets for c in crowds for s in seeds]
    if n_jobs == 1:
        results = (_setting_task(*task) for task in tasks)
    else:
        from joblib import Parallel, delayed

        results = Parallel(n_jobs=n_jobs, return_as="generator")(delayed(_setting_task)(*t) for t in tasks)
    rows: list[dict[str, Any]] = []
    for task, result in zip(tasks, results, strict=True):
        rows += result
        log(f"{task[0]} · {task[1].name} · seed {task[2]}: done")
    return pd.DataFrame(rows), skipped


# --------------------------------------------------------------------------- report


def _mean_sd(values: pd.Series) -> str:
    return f"{100 * values.mean():.1f} ± {100 * values.std(ddof=1) if len(values) > 1 else 0.0:.1f}"


def setting_table(rows: pd.DataFrame, order: Sequence[str]) -> list[str]:
    """Markdown table of one (data set, crowd): accuracy (%) mean ± sd per method and budget."""
    budgets = sorted(rows["budget"].unique())
    lines = [
        "| method | " + " | ".join(f"{b} answers" for b in budgets) + " |",
        "|---|" + "---:|" * len(budgets),
    ]
    for name in order:
        mine = rows[rows["method"] == name]
        if mine.empty:
            continue
        cells = []
        for b in budgets:
            at = mine[mine["budget"] == b]
            cell = _mean_sd(at["accuracy"])
            used = at["n_answers"].mean()
            if used < b - 1e-9:
                cell += f" ({used:.0f} used)"
            cells.append(cell)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def comparisons(rows: pd.DataFrame, ours: str = "winnow") -> pd.DataFrame:
    """Paired differences (ours − peer) per (dataset, crowd, budget, peer), over the seeds."""
    key = ["dataset", "crowd", "seed", "budget"]
    mine = rows[rows["method"] == ours].set_index(key)["accuracy"]
    out = []
    for peer in rows["method"].unique():
        if peer.startswith("winnow"):
            continue  # winnow's variants are not peers
        theirs = rows[rows["method"] == peer].set_index(key)["accuracy"]
        diff = (mine - theirs).dropna().reset_index()
        for (dataset, crowd, budget), d in diff.groupby(["dataset", "crowd", "budget"], sort=False):
            out.append(
                {
                    "dataset": dataset,
                    "crowd": crowd,
                    "budget": budget,
                    "peer": peer,
                    "mean": float(d["accuracy"].mean()),
                    "sd": float(d["accuracy"].std(ddof=1)) if len(d) > 1 else 0.0,
                    "wins": int((d["accuracy"] > 0).sum()),
                    "seeds": len(d),
                }
            )
    return pd.DataFrame(out)


TIE = 1e-12  # mean accuracy differences closer to 0 are ties (sums of float shares)


def verdict(rows: pd.DataFrame, ours: str = "winnow") -> tuple[bool, list[str]]:
    """Whether ``ours`` has the higher mean accuracy than every peer at every budget, and where not."""
    table = comparisons(rows, ours)
    if table.empty:
        return False, ["no peer ran"]
    losses = table[table["mean"] < TIE]
    lines = []
    for _, r in losses.iterrows():
        if abs(r["mean"]) < TIE:
            how = f"tied with {r.peer} (same accuracy on every seed)" if r.sd == 0 else f"tied with {r.peer} on average"
        else:
            how = f"behind {r.peer} by {100 * -r['mean']:.1f} points (sd {100 * r.sd:.1f})"
        lines.append(
            f"{r.dataset} · {r.crowd} · {r.budget} answers: {how}; {ours} ahead on {r.wins} of {r.seeds} seeds"
        )
    return losses.empty, lines


SHORT_NAMES = {"majority vote": "MV", "Dawid–Skene": "DS", "CROWDLAB": "CL"}
"""Peer → the abbreviation of the verdict matrix."""


def verdict_matrix(rows: pd.DataFrame, ours: str = "winnow") -> list[str]:
    """Markdown table: per setting and budget, the peers ``ours`` is not ahead of (points behind)."""
    table = comparisons(rows, ours)
    budgets = sorted(rows["budget"].unique())
    lines = [
        "| setting | " + " | ".join(f"{b} answers" for b in budgets) + " |",
        "|---|" + "---|" * len(budgets),
    ]
    for (dataset, crowd), part in table.groupby(["dataset", "crowd"], sort=False):
        cells = []
        for budget in budgets:
            behind = part[(part["budget"] == budget) & (part["mean"] < TIE)]
            if behind.empty:
                cells.append("ahead")
                continue
            cells.append(
                ", ".join(
                    f"{SHORT_NAMES.get(r.peer, r.peer)} "
                    + ("tie" if abs(r["mean"]) < TIE else f"−{100 * -r['mean']:.1f}")
                    for _, r in behind.sort_values("mean").iterrows()
                )
            )
        lines.append(f"| {dataset} · {crowd} | " + " | ".join(cells) + " |")
    return lines


def error_sources(datasets: Sequence[str], crowds: Sequence[Crowd], seeds: Sequence[int]) -> pd.DataFrame:
    """Where winnow's wrong labels come from before any answer, per (dataset, crowd, seed).

    A diagnosis after the fact (it reads the truth, and nothing is chosen from it): shares of
    the items whose winnow label is wrong (``errors``) because the union of the votes misses
    the truth (``truth_missing``: no label inside the set can be right), or although the
    truth is in the set and a strict majority of the votes named it (``majority_right``:
    what the union of the votes forgets), or otherwise (``other``).
    """
    out = []
    for dataset in datasets:
        X, y = DATASETS[dataset]()
        for crowd in crowds:
            for seed in seeds:
                cs = make_crowd_set(X, y, crowd, int(seed))
                labels = winnow_labels(cs, [0])[0][0]
                counts = _vote_counts(cs.votes, cs.n_labels)
                wrong = labels != y
                missing = ~cs.candidates[np.arange(y.shape[0]), y]
                majority_right = (counts[np.arange(y.shape[0]), y] > cs.votes.shape[1] / 2) & ~missing & wrong
                out.append(
                    {
                        "dataset": dataset,
                        "crowd": crowd.name,
                        "seed": int(seed),
                        "errors": float(wrong.mean()),
                        "truth_missing": float((wrong & missing).mean()),
                        "majority_right": float(majority_right.mean()),
                        "other": float((wrong & ~missing & ~majority_right).mean()),
                    }
                )
    return pd.DataFrame(out)


def error_table(sources: pd.DataFrame) -> list[str]:
    """Markdown table of :func:`error_sources`: % of the items, mean ± sd over the seeds."""
    lines = [
        "| setting | winnow wrong | truth not in the set | a strict majority named the truth | other |",
        "|---|---:|---:|---:|---:|",
    ]
    for (dataset, crowd), part in sources.groupby(["dataset", "crowd"], sort=False):
        cells = [_mean_sd(part[c]) for c in ("errors", "truth_missing", "majority_right", "other")]
        lines.append(f"| {dataset} · {crowd} | " + " | ".join(cells) + " |")
    return lines


def versions() -> dict[str, str]:
    """Versions of the packages the numbers depend on (missing ones named so)."""
    out = {"python": platform.python_version()}
    for package in ("numpy", "scikit-learn", "pandas", "crowd-kit", "cleanlab"):
        try:
            out[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            out[package] = "not installed"
    return out


METHOD_NOTES: list[str] = [
    "## Method",
    "",
    "- **Data**: scikit-learn's bundled digits, wine, breast cancer and iris, and a generated set "
    "(`make_classification`, 1,000 items, 6 labels, 20 features of which 8 informative, `random_state=0`); "
    "features min-max scaled; nothing downloaded. All items are both learned from and scored (transductive).",
    "- **Crowds** (`engine.noise.crowd_votes`): every annotator votes once per item; each label has 2 confusable "
    "labels shared by the crowd (1 for breast cancer's 2 labels), an annotator errs only towards them. "
    "A seed draws the crowd, its votes and every tie-break.",
    "- **Expert**: always right; every method's asked items take the expert's answer as final label.",
    "- **winnow**: candidate set = union of the votes; the expert is asked in the order of the sessions' default "
    "strategy (`engine.simulate`'s `default`), one answer at a time, only items with two or more candidates "
    "(like a session; it stops early when none is left, shown as *(n used)*); final labels = DST-PLL's "
    "transductive labels (`engine.dst.transductive_decisions`, k = 10, uniform), rejected or not.",
    "- **winnow + suspect** (when `engine.suspect` is present): the items `engine.suspect.suspect_sets` flags before "
    "any answer (default criterion and false-alarm rate, threshold calibrated on the single given labels) are "
    "asked first, most suspect first, then winnow's order.",
    "- **majority vote**: ties at random; the expert is asked the lowest agreement first.",
    "- **Dawid–Skene** (`crowdkit.aggregation.DawidSkene`, 100 iterations at most): the expert is asked the lowest "
    f"posterior first, {BATCH} at a time with a new fit after each batch; the answers are fed as one more "
    "annotator (informing the confusion matrices) and also fixed after aggregation.",
    "- **CROWDLAB** (`cleanlab.multiannotator.get_label_quality_multiannotator`): out-of-fold (5-fold) "
    "probabilities of a `KNeighborsClassifier(n_neighbors=10)` on the same features, trained on the majority "
    "labels with the answers substituted; the expert is asked the lowest consensus quality first, "
    f"{BATCH} at a time with a new fit after each batch; answers fed as one more annotator and fixed after "
    "aggregation.",
    "- Crowds, budgets, k and selection rules were fixed before the first run; nothing was tuned on the truth.",
    "",
]
"""The method section of the report (the module docstring has the details)."""


def report(
    rows: pd.DataFrame,
    skipped: dict[str, str],
    meta: dict[str, str],
    *,
    sources: pd.DataFrame | None = None,
    notes: Sequence[str] = (),
) -> list[str]:
    """The markdown of docs/results_crowd.md: verdict, one table per setting, method notes.

    ``sources`` (:func:`error_sources`) adds the table of winnow's error causes; ``notes``
    are markdown lines placed after the verdict (a reading of the numbers).
    """
    order = list(dict.fromkeys(["winnow", "winnow + suspect", *(m.name for m in methods()), *rows["method"]]))
    lines = ["# Crowd-made sets: winnow beside majority vote, Dawid–Skene and CROWDLAB", ""]
    lines += [
        "Generated by `python -m benchmarks.crowd` (issue 22). Accuracy (%) of the **final labels of all items**, "
        "mean ± sd over the seeds, at each expert budget; an expert answer is always right and becomes its "
        "item's label for every method. How each method uses the votes and the answers: see "
        "`benchmarks/crowd.py`'s docstring, summarised under *Method* below.",
        "",
    ]
    for message in skipped.values():
        lines += [f"**{message}**", ""]
    lines += ["## Verdict", ""]
    ours_names = [name for name in order if name.startswith("winnow") and name in set(rows["method"])]
    details: list[str] = []
    for ours in ours_names:
        ok, where = verdict(rows, ours)
        lines.append(f"{ours} better than every peer at every budget: **{'yes' if ok else 'no'}**.")
        lines.append("")
        if where:
            lines.append(
                f"Where not: the peers {ours} is not ahead of, and by how many points of mean accuracy "
                f"({', '.join(f'{v} = {k}' for k, v in SHORT_NAMES.items())}; *ahead*: ahead of every peer):"
            )
            lines.append("")
            lines += verdict_matrix(rows, ours)
            lines.append("")
            details += [f"### {ours}", ""] + [f"- {line}" for line in where] + [""]
    if notes:
        lines += notes
    lines += ["## Results", ""]
    for (dataset, crowd), part in rows.groupby(["dataset", "crowd"], sort=False):
        first = part.iloc[0]
        lines.append(f"### {dataset} · {crowd}")
        lines.append("")
        lines.append(
            f"{int(first['n_items'])} items; the union of the votes holds the truth for "
            f"{_mean_sd(part.drop_duplicates('seed')['truth_in_set'])} % of them and has two or more labels for "
            f"{_mean_sd(part.drop_duplicates('seed')['partial'])} %."
        )
        lines.append("")
        lines += setting_table(part, order)
        lines.append("")
    if sources is not None and not sources.empty:
        lines += [
            "## Where winnow's errors come from (0 answers)",
            "",
            "Share of the items (%, mean ± sd over the seeds) whose winnow label is wrong before any answer, by "
            "cause: the union of the votes misses the truth (no label inside the set can be right), or the truth "
            "is in the set and a strict majority of the votes named it (what the union forgets), or otherwise. "
            "A diagnosis read from the truth after the run (`error_sources`); nothing was chosen from it.",
            "",
        ]
        lines += error_table(sources)
        lines.append("")
    lines += METHOD_NOTES
    if details:
        lines += ["## Paired differences where winnow is not ahead", ""]
        lines += details
    lines += ["## Run", ""]
    lines += [f"- {key}: {value}" for key, value in meta.items()]
    lines.append("")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, default=SEEDS, help="seeds 0..N-1 (default %(default)s)")
    parser.add_argument("--datasets", nargs="*", default=list(DATASETS), help="subset of the data sets")
    parser.add_argument("--budgets", nargs="*", type=int, default=list(BUDGETS))
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default %(default)s)")
    parser.add_argument("--output", type=Path, help="write the markdown report here")
    parser.add_argument("--raw", type=Path, help="write every row as CSV here (and the run's facts beside it as JSON)")
    parser.add_argument(
        "--from-raw", type=Path, help="rebuild the report from a --raw CSV (and its JSON) without running"
    )
    parser.add_argument("--notes", type=Path, help="markdown placed after the verdict (a reading of the numbers)")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.jobs < 1:
        parser.error("--seeds and --jobs must be at least 1")
    unknown = sorted(set(args.datasets) - set(DATASETS))
    if unknown:
        parser.error(f"unknown data sets {unknown}; valid: {sorted(DATASETS)}")

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    if args.from_raw is not None:
        if not args.from_raw.is_file():
            parser.error(f"--from-raw: no file {args.from_raw}")
        rows = pd.read_csv(args.from_raw)
        facts_path = args.from_raw.with_suffix(".json")
        facts = json.loads(facts_path.read_text()) if facts_path.is_file() else {}
        skipped, meta = facts.get("skipped", {}), facts.get("meta", {})
        meta["report"] = f"rebuilt from the rows of that run ({args.from_raw.name})"
    else:
        load_before = os.getloadavg()
        started = time.perf_counter()
        rows, skipped = run(args.datasets, CROWDS, range(args.seeds), args.budgets, n_jobs=args.jobs, log=log)
        seconds = time.perf_counter() - started
        load_after = os.getloadavg()
        meta = {
            "seeds": f"{args.seeds} (0..{args.seeds - 1})",
            "wall time": f"{seconds:.0f} s with {args.jobs} worker process(es), one thread each",
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, shared; load average (1 min) "
            f"{load_before[0]:.1f} before, {load_after[0]:.1f} after",
            "method time per curve (s of wall time, mean over settings and seeds)": ", ".join(
                f"{name} {t:.2f}" for name, t in rows.groupby("method", sort=False)["seconds"].mean().items()
            ),
            **{f"version of {k}": v for k, v in versions().items()},
        }
        if args.raw:
            rows.to_csv(args.raw, index=False)
            args.raw.with_suffix(".json").write_text(json.dumps({"meta": meta, "skipped": skipped}, indent=1))
    settings = rows.drop_duplicates(["dataset", "crowd"])
    crowds = [c for c in CROWDS if c.name in set(settings["crowd"])]
    sources = error_sources(list(dict.fromkeys(settings["dataset"])), crowds, sorted(rows["seed"].unique()))
    notes = args.notes.read_text().splitlines() + [""] if args.notes else []
    text = "\n".join(report(rows, skipped, meta, sources=sources, notes=notes))
    if args.output:
        args.output.write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
