"""How much of a dataset winnow can hand back labelled, and how wrong its model labels are (issue 20, part 5).

The setting
-----------
One pool per data set and seed (transductive: the items to label are the items the model
learns from). A simulated expert, always right, answers one item at a time:

* with probability ``AUDIT_SHARE`` (5 %: every 20th served item on average) the served item
  is an **audit**, drawn uniformly at random among the items the model would label (open
  items: neither answered nor a single given candidate);
* otherwise it is the top of the query order: winnow's (``engine.simulate``'s ``default``
  strategy, i.e. ``decision_change``) or, for the *random querying* baseline, a uniformly
  random open item.

Every answer replaces the item's candidate set by the true label and feeds the model
(audits too). After 0, 50, 100, 200 and 500 answers (fewer when the data has fewer partial
items) every item is given a source:

``expert``
    answered (queries and audits);
``given``
    a single candidate from the start (answers do not shrink other items' sets);
``model``
    an open item whose model label is kept by the calibrated threshold;
``undecided``
    the rest.

The model label and the accept score
------------------------------------
DST-PLL (:class:`engine.dst.DstPllClassifier`) fitted on the current candidate sets and the
k-NN graph of :func:`engine.neighbors.knn_graph` (k = 10, uniform, every item left out of
its own neighbourhood by identity). Its transductive label of an item combines the item's
*own* candidate set with the sets of its 10 nearest *other* items; the score is
:func:`engine.accept_scores.dst_margin` (``bel(ŷ) − max pl``).

Audits are scored **leave-one-out**: an audited item's answer must not vote for itself.
With a self-excluding graph the item never votes as its own neighbour, but the transductive
decision also uses the item's own set, which after the answer *is* the answer. So the
audited item's label and score are computed from the candidate set it had before the answer
combined with its neighbours' current sets (answers elsewhere included) — exactly how the
open items it stands for are labelled. In code: the audited rows are appended to the pool
with their original sets and their neighbour rows, and one classifier is fitted on the
augmented pool (the appended rows vote for nobody, since no row lists them as neighbours).

:func:`engine.calibration.calibrate_threshold` then picks, from the audits' scores and
whether their LOO label was right, the threshold whose kept labels have error ≤ target
with 90 % confidence (targets 2 %, 5 %, 10 %); open items at or above it get a model label.

Compared, at the same budgets and targets:

``winnow``
    winnow's order, DST-PLL's label, DST margin, calibrated;
``random querying``
    random order (own campaign, own audits), DST-PLL's label, DST margin, calibrated;
``PL-kNN posterior``
    winnow's order (the same campaign as ``winnow``), PL-kNN's vote of the 10 neighbours
    restricted to the item's own set (:func:`engine.accept_scores.posterior_scores`): its
    arg-max as label, its share as score, calibrated;
``DST-PLL rule``
    winnow's order, DST-PLL's fixed reject rule (accept when ``bel(ŷ) > max pl(y ≠ ŷ)``
    and the label is no guess): all accepted open items are delivered if the audits that
    the rule accepts (LOO) bound their error at ≤ target with the exact Clopper–Pearson
    bound at 90 % (:func:`engine.calibration.binomial_upper_bound`; a rule fixed in advance
    needs no sequence), otherwise none.

Data: the real sets of ``../shared/data/pll`` (relative to the repository root; the script
stops with a message when it is missing) capped at ``CAP`` = 2,000 items by a seeded
random subset (only BirdSong, 4,998 items, is cut), features min-max scaled; and the digits
settings of ``docs/results_strategy.md`` (800 rows of scikit-learn's bundled digits, the
candidate protocols of ``benchmarks.compare_peers.all_settings``; the noisy-expert setting
``ε=0.1`` is left out, since the audits here assume a right expert). 5 seeds; a seed sets
the subset (BirdSong), the strategies' tie-breaking and the audit draws, all through
``numpy.random.default_rng``.

Beyond the issue's protocol, the same campaigns also report the state after 1,000 answers
(capped by the data), a sensitivity run with a 20 % audit share, and an *oracle* share: the
most open items a perfect calibration could keep with each score at the target (top by
score, true error ≤ target), which tells whether the score or the number of audits limits
what is delivered.

Not part of ``make test``. One thread (set before numpy loads). About 3 minutes on one core.

Run: ``python -m benchmarks.labels_delivered [--output docs/results_labels.md] [--plot docs/results_labels.png]``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse  # noqa: E402 - after the thread limits, which must precede numpy
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from app.io import read_dataset  # noqa: E402
from engine.accept_scores import dst_margin, posterior_scores  # noqa: E402
from engine.calibration import audits_needed, binomial_upper_bound, calibrate_threshold  # noqa: E402
from engine.dst import DstPllClassifier  # noqa: E402
from engine.neighbors import knn_graph  # noqa: E402
from engine.simulate import CampaignContext, make_strategy  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PLL_DIR = ROOT.parent / "shared" / "data" / "pll"
REAL_SETS = ("lost", "MSRCv2", "BirdSong", "FG-NET")
LEFT_OUT = ("digits · uniform · high · ε=0.1",)  # a noisy expert: audits assume a right one
CAP = 2000
BUDGETS = (0, 50, 100, 200, 500)
EXTRA_BUDGET = 1000  # beyond the budgets: where a 5 % audit share reaches 45 audits
SEEDS = tuple(range(5))
TARGETS = (0.02, 0.05, 0.10)
MAIN_TARGET = 0.05
CONFIDENCE = 0.9
AUDIT_SHARE = 0.05
HIGH_AUDIT_SHARE = 0.20  # a sensitivity run: what four times the audits buy
VARIANTS = ((AUDIT_SHARE, (*BUDGETS, EXTRA_BUDGET)), (HIGH_AUDIT_SHARE, BUDGETS))
K = 10
METHODS = ("winnow", "random querying", "PL-kNN posterior", "DST-PLL rule")
SOURCES = ("expert", "given", "model", "undecided")
GENERATED = "<!-- generated by benchmarks/labels_delivered.py: everything below this line -->"


@dataclass(frozen=True)
class Pool:
    """One data set as the benchmark sees it: features, candidate sets, hidden truth."""

    name: str
    X: np.ndarray
    Y: np.ndarray
    truth: np.ndarray
    note: str


@dataclass(frozen=True)
class Checkpoint:
    """What an answer log looks like after a number of answers: sets, who answered what."""

    budget: int  # the budget asked for; n_answers is smaller when the partial items ran out
    n_answers: int
    Y: np.ndarray
    answered: np.ndarray  # bool (n_items,)
    audited: np.ndarray  # int rows, in the order they were served


def _minmax(X: np.ndarray) -> np.ndarray:
    low, high = X.min(axis=0), X.max(axis=0)
    return (X - low) / np.where(high > low, high - low, 1.0)


def _real_loader(name: str) -> Callable[[int], Pool]:
    cache: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def load(seed: int) -> Pool:
        if name not in cache:
            data = read_dataset(PLL_DIR / f"{name}.mat")
            cache[name] = (
                np.asarray(data.X, dtype=np.float64),
                np.asarray(data.candidates, dtype=bool),
                np.asarray(data.true_labels),
            )
        X, Y, y = cache[name]
        note = f"all {X.shape[0]} items"
        if X.shape[0] > CAP:
            rows = np.sort(np.random.default_rng([seed, 2000]).choice(X.shape[0], size=CAP, replace=False))
            X, Y, y = X[rows], Y[rows], y[rows]
            note = f"random {CAP} of {cache[name][0].shape[0]} items per seed"
        return Pool(name, _minmax(X), Y, y, note)

    return load


def _digits_loader(setting) -> Callable[[int], Pool]:
    cache: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def load(seed: int) -> Pool:
        if not cache:
            X, Y, y = setting.load()
            cache.append((_minmax(np.asarray(X, dtype=np.float64)), np.asarray(Y, dtype=bool), np.asarray(y)))
        X, Y, y = cache[0]
        return Pool(setting.name, X, Y, y, setting.note)

    return load


def data_sets(only: list[str] | None) -> list[tuple[str, Callable[[int], Pool]]]:
    """(name, loader by seed) of every data set, real ones first."""
    from benchmarks.compare_peers import all_settings

    out = [(name, _real_loader(name)) for name in REAL_SETS if (PLL_DIR / f"{name}.mat").is_file()]
    out += [
        (s.name, _digits_loader(s)) for s in all_settings() if s.name.startswith("digits") and s.name not in LEFT_OUT
    ]
    return [(n, f) for n, f in out if not only or n in only]


# --------------------------------------------------------------------------- the campaign


def run_campaign(
    pool: Pool, idx: np.ndarray, w: np.ndarray, order: str, seed: int, audit_share: float, budgets: tuple[int, ...]
) -> Iterator[Checkpoint]:
    """Answer in ``order`` ("default" or "random") with audits; yield the state at each budget."""
    Y = pool.Y.copy()
    n = Y.shape[0]
    view = Y.view()
    view.flags.writeable = False  # the strategy reads the sets, the loop writes them
    context = CampaignContext(pool.X, view, idx, w)
    strategy = make_strategy(order, fresh=True)
    # The audit coins and draws have their own stream, shared by both orders of a seed.
    rng = np.random.default_rng([seed, 11])
    audit_rng = np.random.default_rng([seed, 12])
    strategy.start(context, rng)
    answered = np.zeros(n, dtype=bool)
    audited: list[int] = []
    last = min(max(budgets), int(context.partial.sum()))
    for t in range(last + 1):
        for budget in budgets:
            if min(budget, last) == t:
                yield Checkpoint(budget, t, Y.copy(), answered.copy(), np.array(audited, dtype=np.intp))
        if t == last:
            break
        if audit_rng.random() < audit_share:
            item = int(audit_rng.choice(np.flatnonzero(context.partial)))
            audited.append(item)
        else:
            item = int(strategy.select(context, 1, rng)[0])
        Y[item] = False
        Y[item, pool.truth[item]] = True
        answered[item] = True
        strategy.observe(item, Y[item].copy())
        context.n_answers += 1


# --------------------------------------------------------------------------- labels at a checkpoint


@dataclass(frozen=True)
class Scored:
    """A model label and an accept score for every open item and every audit (LOO)."""

    open_labels: np.ndarray
    open_scores: np.ndarray
    audit_labels: np.ndarray
    audit_scores: np.ndarray


def score_checkpoint(
    pool: Pool, idx: np.ndarray, w: np.ndarray, cp: Checkpoint, open_rows: np.ndarray
) -> tuple[dict[str, Scored], np.ndarray, np.ndarray]:
    """DST-PLL margin and PL-kNN posterior for the open items and the audits; DST-PLL's accept flags.

    The audits are appended to the pool with their pre-answer candidate sets and their own
    neighbour rows (see the module docstring): the appended rows are nobody's neighbours,
    and the original rows' decisions do not change.
    """
    n, a = pool.Y.shape[0], cp.audited.size
    Y_aug = np.vstack([cp.Y, pool.Y[cp.audited]])
    idx_aug = np.vstack([idx, idx[cp.audited]])
    w_aug = np.vstack([w, w[cp.audited]])
    X_aug = np.vstack([pool.X, pool.X[cp.audited]])
    rows = np.concatenate([open_rows, n + np.arange(a)])
    dst = DstPllClassifier(n_neighbors=K, random_state=0).fit(X_aug, Y_aug, neighbors=idx_aug)
    dst_labels, margin = dst_margin(dst.disambiguate_belief_[rows], dst.disambiguate_plausibility_[rows])
    accepted = dst.disambiguate_accepted_[rows]
    votes = np.einsum("tk,tkm->tm", w_aug[rows], cp.Y[idx_aug[rows]].astype(np.float64))
    knn_labels, knn_post = posterior_scores(votes, Y_aug[rows])
    m = open_rows.size

    def split(labels: np.ndarray, scores: np.ndarray) -> Scored:
        return Scored(labels[:m], scores[:m], labels[m:], scores[m:])

    return (
        {"DST margin": split(dst_labels, margin), "PL-kNN posterior": split(knn_labels, knn_post)},
        accepted[:m],
        accepted[m:],
    )


def oracle_share(labels: np.ndarray, scores: np.ndarray, truth: np.ndarray, target: float) -> int:
    """Most open items a perfect calibration could keep with this score.

    That is the top items by score (ties together) whose true error is at most ``target``.
    """
    if labels.size == 0:
        return 0
    order = np.argsort(-scores, kind="stable")
    s, wrong = scores[order], labels[order] != truth[order]
    ends = np.flatnonzero(np.r_[s[1:] != s[:-1], True])
    ok = np.flatnonzero(np.cumsum(wrong)[ends] <= target * (ends + 1))
    return int(ends[ok[-1]] + 1) if ok.size else 0


def deliver(cp: Checkpoint, pool: Pool, idx: np.ndarray, w: np.ndarray, methods: tuple[str, ...]) -> list[dict]:
    """One result row per method and target at this checkpoint."""
    given = (pool.Y.sum(axis=1) == 1) & ~cp.answered
    open_rows = np.flatnonzero(~given & ~cp.answered)
    scored, open_accepted, audit_accepted = score_checkpoint(pool, idx, w, cp, open_rows)
    truth_open, truth_audit = pool.truth[open_rows], pool.truth[cp.audited]
    n = pool.Y.shape[0]
    base = dict(
        dataset=pool.name,
        n=n,
        budget=cp.budget,
        answers=cp.n_answers,
        audits=int(cp.audited.size),
        expert=int(cp.answered.sum()),
        given=int(given.sum()),
        open=int(open_rows.size),
    )
    out = []
    for method in methods:
        score = scored["PL-kNN posterior" if method == "PL-kNN posterior" else "DST margin"]
        labels = score.open_labels
        for target in TARGETS:
            if method == "DST-PLL rule":
                wrong = score.audit_labels[audit_accepted] != truth_audit[audit_accepted]
                bound = binomial_upper_bound(int(wrong.sum()), int(wrong.size), CONFIDENCE)
                keep = open_accepted if bound <= target else np.zeros(open_rows.size, dtype=bool)
                stated = bound if bound <= target else np.nan
                used, errors, more = int(wrong.size), int(wrong.sum()), np.nan
            else:
                cal = calibrate_threshold(
                    score.audit_scores, score.audit_labels == truth_audit, target=target, confidence=CONFIDENCE
                )
                keep = (
                    (score.open_scores >= cal.threshold)
                    if cal.threshold is not None
                    else np.zeros(open_rows.size, bool)
                )
                stated = cal.bound if cal.bound is not None else np.nan
                used, errors, more = cal.audits, cal.errors, cal.more_audits_needed
            oracle = np.nan if method == "DST-PLL rule" else oracle_share(labels, score.open_scores, truth_open, target)
            n_model = int(keep.sum())
            true_error = float((labels[keep] != truth_open[keep]).mean()) if n_model else np.nan
            out.append(
                dict(
                    base,
                    method=method,
                    target=target,
                    model=n_model,
                    undecided=int(open_rows.size - n_model),
                    true_error=true_error,
                    stated=stated,
                    oracle=oracle,
                    calibration_audits=used,
                    calibration_errors=errors,
                    more_audits_needed=more,
                    rule_share=float(open_accepted.mean()) if open_rows.size else np.nan,
                    rule_error=float((labels[open_accepted] != truth_open[open_accepted]).mean())
                    if open_accepted.any()
                    else np.nan,
                )
            )
    return out


def evaluate(name: str, load: Callable[[int], Pool], seeds: tuple[int, ...], log) -> list[dict]:
    rows = []
    for seed in seeds:
        pool = load(seed)
        idx, w = knn_graph(pool.X, k=K, weights="uniform", exclude_self=True)
        partial = int((pool.Y.sum(axis=1) >= 2).sum())
        for audit_share, budgets in VARIANTS:
            start = time.perf_counter()
            new = []
            for order, methods in (
                ("default", ("winnow", "PL-kNN posterior", "DST-PLL rule")),
                ("random", ("random querying",)),
            ):
                for cp in run_campaign(pool, idx, w, order, seed, audit_share, budgets):
                    new += [dict(r, seed=seed, audit_share=audit_share) for r in deliver(cp, pool, idx, w, methods)]
            rows += new
            seconds = time.perf_counter() - start
            last = [r for r in new if r["budget"] == BUDGETS[-1] and r["target"] == MAIN_TARGET]
            shares = "  ".join(f"{r['method']} {100 * r['model'] / r['n']:4.1f}" for r in last)
            log(
                f"{name:32s} seed {seed} audit {audit_share:.0%}  n {pool.X.shape[0]:4d}  partial {partial:4d}  "
                f"answers {last[0]['answers']:3d}  audits {last[0]['audits']:3d}  model % at {MAIN_TARGET:.0%}: "
                f"{shares}  "
                f"{seconds:5.1f} s"
            )
    return rows


# --------------------------------------------------------------------------- report


def _pct(values, digits: int = 1) -> str:
    arr = np.asarray(values, dtype=float)
    arr = arr[~np.isnan(arr)]
    return f"{100 * arr.mean():.{digits}f}" if arr.size else "–"


def _err(values) -> str:
    arr = np.asarray(values, dtype=float)
    arr = arr[~np.isnan(arr)]
    return f"{100 * arr.mean():.1f} (max {100 * arr.max():.1f}, {arr.size} runs)" if arr.size else "–"


def labelled_share(df: pd.DataFrame) -> pd.Series:
    return (df["expert"] + df["given"] + df["model"]) / df["n"]


def source_table(df: pd.DataFrame, target: float) -> list[str]:
    """winnow's sources per data set and budget, and the other methods' model shares, at ``target``."""
    lines = [
        "| data set | answers (audits) | expert % | given % | winnow: model % | undecided % | true error of model "
        "labels, % "
        "(mean, max, runs) | stated bound | runs within bound | random querying: model % (true error %) | "
        "PL-kNN posterior: model % (true error %) | DST-PLL rule: model % (true error %) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    sub = df[df["target"] == target]
    for (name, _budget), g in sub.groupby(["dataset", "budget"], sort=False):
        win = g[g["method"] == "winnow"]
        n = win["n"]
        delivered = win[win["model"] > 0]
        covered = (delivered["true_error"] <= delivered["stated"]).sum()
        stated = f"{100 * target:.0f} %" if len(delivered) else "none stated"
        cells = []
        for method in METHODS[1:]:
            m = g[g["method"] == method]
            cells.append(f"{_pct(m['model'] / m['n'])} ({_pct(m['true_error'])})")
        lines.append(
            f"| {name} | {_answers(win)} ({win['audits'].mean():.1f}) | {_pct(win['expert'] / n)} | "
            f"{_pct(win['given'] / n)} | "
            f"{_pct(win['model'] / n)} | {_pct(win['undecided'] / n)} | {_err(win['true_error'])} | {stated} | "
            f"{covered}/{len(delivered)} | " + " | ".join(cells) + " |"
        )
    return lines


def _answers(rows: pd.DataFrame) -> str:
    low, high = int(rows["answers"].min()), int(rows["answers"].max())
    return str(low) if low == high else f"{low}–{high}"


def goal_labelled(df: pd.DataFrame) -> tuple[list[str], dict]:
    """Goal 1: at 5 %, winnow labels more of the data set than every alternative, per data set and budget."""
    sub = df[df["target"] == MAIN_TARGET].copy()
    sub["share"] = labelled_share(sub)
    means = sub.groupby(["dataset", "budget", "method"], sort=False)["share"].mean().unstack("method")
    lines = [
        "| data set | budget | winnow labelled % | best alternative | its labelled % | winnow − best, points | goal |",
        "|---|---|---|---|---|---|---|",
    ]
    tally = {"more": 0, "tie": 0, "less": 0}
    for (name, budget), row in means.iterrows():
        others = row.drop("winnow")
        best = others.idxmax()
        diff = row["winnow"] - others.max()
        verdict = "more" if diff > 1e-12 else ("tie" if abs(diff) <= 1e-12 else "less")
        tally[verdict] += 1
        lines.append(
            f"| {name} | {budget} | {100 * row['winnow']:.1f} | {best} | {100 * others.max():.1f} | "
            f"{100 * diff:+.2f} | "
            f"{'met' if verdict == 'more' else ('tie: not more' if verdict == 'tie' else 'missed')} |"
        )
    return lines, tally


def goal_coverage(df: pd.DataFrame) -> list[str]:
    """Goal 2: share of runs with model labels whose true error is within the stated bound."""
    lines = [
        "| method | target | runs with model labels | within the stated bound | share | worst true error, % |",
        "|---|---|---|---|---|---|",
    ]
    for method in METHODS:
        for target in TARGETS:
            g = df[(df["method"] == method) & (df["target"] == target) & (df["model"] > 0)]
            within = int((g["true_error"] <= g["stated"]).sum())
            share = f"{100 * within / len(g):.1f} %" if len(g) else "–"
            worst = f"{100 * g['true_error'].max():.1f}" if len(g) else "–"
            lines.append(f"| {method} | {target:.0%} | {len(g)} | {within} | {share} | {worst} |")
    return lines


def oracle_table(df: pd.DataFrame, target: float) -> list[str]:
    """Model labels a perfect calibration could keep (true error ≤ target), against what the audits let through."""
    scored = ("winnow", "random querying", "PL-kNN posterior")
    lines = [
        "| data set | budget | " + " | ".join(f"{m}: kept % | {m}: oracle %" for m in scored) + " |",
        "|---|---|" + "---|---|" * len(scored),
    ]
    sub = df[df["target"] == target]
    for (name, budget), g in sub.groupby(["dataset", "budget"], sort=False):
        cells = []
        for method in scored:
            m = g[g["method"] == method]
            cells += [_pct(m["model"] / m["n"]), _pct(m["oracle"] / m["n"])]
        lines.append(f"| {name} | {budget} | " + " | ".join(cells) + " |")
    return lines


def rule_table(df: pd.DataFrame) -> list[str]:
    """What DST-PLL's rule would deliver without any audit, and how wrong (winnow's order)."""
    sub = df[(df["method"] == "DST-PLL rule") & (df["target"] == MAIN_TARGET)]
    lines = [
        "| data set | budget | share of open items the rule accepts, % | true error of those labels, % |",
        "|---|---|---|---|",
    ]
    for (name, budget), g in sub.groupby(["dataset", "budget"], sort=False):
        lines.append(f"| {name} | {budget} | {_pct(g['rule_share'])} | {_pct(g['rule_error'])} |")
    return lines


def plot(df: pd.DataFrame, path: Path) -> None:
    """Labelled share against answers per data set at the main target: both audit shares, every method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = list(dict.fromkeys(df["dataset"]))
    cols = 4
    rows = int(np.ceil(len(sets) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
    colors = dict(zip(METHODS, ("C0", "C1", "C2", "C3"), strict=True))
    sub = df[df["target"] == MAIN_TARGET].copy()
    sub["share"] = labelled_share(sub)
    for ax, name in zip(axes.ravel(), sets, strict=False):
        g = sub[sub["dataset"] == name]
        for share, style in ((AUDIT_SHARE, "-"), (HIGH_AUDIT_SHARE, "--")):
            v = g[g["audit_share"] == share]
            for method in METHODS:
                m = v[v["method"] == method].groupby("budget")[["answers", "share"]].mean()
                ax.plot(
                    m["answers"],
                    100 * m["share"],
                    style,
                    color=colors[method],
                    marker="o",
                    ms=2.5,
                    lw=1.8 if method == "winnow" else 1.0,
                    label=f"{method}, {share:.0%} audits",
                )
        base = g[(g["audit_share"] == AUDIT_SHARE) & (g["method"] == "winnow")].copy()
        base["eg"] = (base["expert"] + base["given"]) / base["n"]
        eg = base.groupby("budget")[["answers", "eg"]].mean()
        ax.plot(eg["answers"], 100 * eg["eg"], color="0.5", lw=0.8, ls=":", label="expert + given only")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("answers (audits included)", fontsize=8)
        ax.set_ylabel("labelled, % of items", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in axes.ravel()[len(sets) :]:
        ax.axis("off")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower right", fontsize=7, ncol=2)
    fig.suptitle(
        f"Items carrying a label (expert + given + model) at a {MAIN_TARGET:.0%} target, {CONFIDENCE:.0%} "
        f"confidence; mean of the seeds (benchmarks/labels_delivered.py)",
        fontsize=10,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def method_table(df: pd.DataFrame) -> list[str]:
    """Per data set: model share and true error of every method at every target (one budget)."""
    head = " | ".join(f"{m}: {t:.0%}" for t in TARGETS for m in METHODS)
    lines = [
        "| data set | answers (audits) | expert + given % | " + head + " |",
        "|---|---|---|" + "---|" * (len(TARGETS) * len(METHODS)),
    ]
    for name, g in df.groupby("dataset", sort=False):
        win = g[(g["method"] == "winnow") & (g["target"] == TARGETS[0])]
        cells = []
        for t in TARGETS:
            for m in METHODS:
                r = g[(g["method"] == m) & (g["target"] == t)]
                cells.append(f"{_pct(r['model'] / r['n'])} ({_pct(r['true_error'])})")
        lines.append(
            f"| {name} | {_answers(win)} ({win['audits'].mean():.1f}) | "
            f"{_pct((win['expert'] + win['given']) / win['n'])} | " + " | ".join(cells) + " |"
        )
    return lines


def report(df: pd.DataFrame, seconds: float, notes: dict[str, str]) -> list[str]:
    main = df[(df["audit_share"] == AUDIT_SHARE) & df["budget"].isin(BUDGETS)]
    extra = df[(df["audit_share"] == AUDIT_SHARE) & (df["budget"] == EXTRA_BUDGET)]
    high = df[df["audit_share"] == HIGH_AUDIT_SHARE]
    goal1, tally = goal_labelled(main)
    goal1_high, tally_high = goal_labelled(high)
    out = [
        "## Data sets",
        "",
        "| data set | items | partial items | note |",
        "|---|---|---|---|",
    ]
    for name, g in main.groupby("dataset", sort=False):
        first = g[(g["answers"] == 0) & (g["method"] == "winnow")]
        out.append(f"| {name} | {int(first['n'].mean())} | {int(first['open'].mean())} | {notes[name]} |")
    out += [
        "",
        f"Audits needed before a target can be stated at {CONFIDENCE:.0%} (all right): "
        + ", ".join(f"{t:.0%}: {audits_needed(t, CONFIDENCE)}" for t in TARGETS)
        + f"; at a {AUDIT_SHARE:.0%} audit share that is about "
        + ", ".join(f"{audits_needed(t, CONFIDENCE) / AUDIT_SHARE:.0f}" for t in TARGETS)
        + f" answers, at {HIGH_AUDIT_SHARE:.0%} about "
        + ", ".join(f"{audits_needed(t, CONFIDENCE) / HIGH_AUDIT_SHARE:.0f}" for t in TARGETS)
        + ".",
        "",
    ]
    out += [
        f"## Goal 1: at {MAIN_TARGET:.0%}, more of the data set labelled than every alternative ({AUDIT_SHARE:.0%} "
        "audits)",
        "",
        f"Met (strictly more) in {tally['more']} of {sum(tally.values())} (data set, budget) pairs; "
        f"tied in {tally['tie']}; fewer in {tally['less']}. Labelled = expert + given + model, mean of the seeds.",
        "",
        *goal1,
        "",
    ]
    out += [
        "## Goal 2: true error of delivered model labels within the stated bound (≥ 90 % of runs)",
        "",
        "A run is one (data set, seed, budget) with at least one model label; runs that deliver nothing state nothing.",
        "",
        f"### {AUDIT_SHARE:.0%} audits, budgets {', '.join(map(str, BUDGETS))}",
        "",
        *goal_coverage(main),
        "",
        f"### {AUDIT_SHARE:.0%} audits, {EXTRA_BUDGET} answers",
        "",
        *goal_coverage(extra),
        "",
        f"### {HIGH_AUDIT_SHARE:.0%} audits, budgets {', '.join(map(str, BUDGETS))}",
        "",
        *goal_coverage(high),
        "",
    ]
    for target in TARGETS:
        out += [
            f"## Labels by source at a {target:.0%} target ({CONFIDENCE:.0%} confidence, {AUDIT_SHARE:.0%} audits), "
            f"mean of the seeds",
            "",
            "Shares are of all items of the data set. *answers* counts audits.",
            "",
            *source_table(main, target),
            "",
        ]
    out += [
        f"## Beyond the issue's budgets: {EXTRA_BUDGET} answers (capped by the data), {AUDIT_SHARE:.0%} audits",
        "",
        "Model labels, % of items (true error of those labels, %), per method and target; mean of the seeds.",
        "",
        *method_table(extra),
        "",
    ]
    out += [
        f"## Sensitivity: {HIGH_AUDIT_SHARE:.0%} audits",
        "",
        f"Goal 1 at {MAIN_TARGET:.0%} with {HIGH_AUDIT_SHARE:.0%} audits: met in {tally_high['more']} of "
        f"{sum(tally_high.values())} (data set, budget) pairs; tied in {tally_high['tie']}; fewer in "
        f"{tally_high['less']}.",
        "",
        *goal1_high,
        "",
    ]
    for target in (MAIN_TARGET, TARGETS[-1]):
        out += [
            f"### Labels by source at {target:.0%}, {HIGH_AUDIT_SHARE:.0%} audits",
            "",
            *source_table(high, target),
            "",
        ]
    out += [
        f"## The score or the audits? What a perfect calibration could keep at {MAIN_TARGET:.0%} ({AUDIT_SHARE:.0%} "
        "audits)",
        "",
        "*oracle*: the largest top share of the open items by accept score (ties together) whose true error is "
        f"≤ {MAIN_TARGET:.0%}, as % of all items; *kept*: what the audits let through. Mean of the seeds.",
        "",
        *oracle_table(main, MAIN_TARGET),
        "",
    ]
    out += [
        f"## DST-PLL's rule without audits (what it would deliver with no evidence), winnow's order, {AUDIT_SHARE:.0%} "
        "audits",
        "",
        *rule_table(main),
        "",
    ]
    out.append(f"{seconds:.0f} s in all, one thread.")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="write the Markdown report here (the text above the 'generated' marker of an existing file is kept)",
    )
    parser.add_argument("--plot", type=Path, default=None, help="write the PNG plot here")
    parser.add_argument("--csv", type=Path, default=None, help="write every result row here")
    parser.add_argument("--sets", nargs="*", default=None, help="only these data sets (names as in the report)")
    parser.add_argument("--seeds", type=int, default=len(SEEDS), help="number of seeds (default 5)")
    args = parser.parse_args(argv)
    if not PLL_DIR.is_dir():
        print(
            f"error: {PLL_DIR} is missing; the real PLL sets live in ../shared/data/pll beside the repository",
            file=sys.stderr,
        )
        return 2
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    start = time.perf_counter()
    rows, notes = [], {}
    for name, load in data_sets(args.sets):
        notes[name] = load(0).note
        for row in evaluate(name, load, tuple(range(args.seeds)), log):
            rows.append(row)
    df = pd.DataFrame(rows)
    seconds = time.perf_counter() - start
    out = report(df, seconds, notes)
    print("\n".join(out))
    if args.csv:
        df.to_csv(args.csv, index=False)
    if args.plot:
        plot(df, args.plot)
    if args.output:
        head = ""
        if args.output.is_file() and GENERATED in args.output.read_text():
            head = args.output.read_text().split(GENERATED)[0]
        args.output.write_text(head + "\n".join([GENERATED, "", *out, ""]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
