"""Querying campaigns on real and synthetic partial-label data: which strategy helps the k-NN most.

Runs :func:`engine.simulate.simulate` (perfect expert unless stated, k = 10, min-max scaling on
the training part) for every strategy on

* the PLL benchmark files in ``/work/shared/data/pll`` (a fixed random subset of each), and
* scikit-learn's bundled digits / wine / breast-cancer sets made partial with the candidate
  protocols of :mod:`engine.noise` at a low and a high ambiguity level,

and writes ``docs/results_campaigns.md`` with learning-curve plots under ``docs/campaigns/``.
Every number in the markdown comes from this run; nothing is typed in by hand.

Usage::

    .venv/bin/python benchmarks/simulate_campaigns.py            # full run (~5 min on 2 cores)
    .venv/bin/python benchmarks/simulate_campaigns.py --quick    # 2 seeds, 3 settings: a smoke test
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.datasets import load_breast_cancer, load_digits, load_wine

from app.cli_simulate import plot_learning_curves
from app.io import read_dataset
from engine.neighbors import knn_graph
from engine.noise import (
    class_dependent_candidates,
    cluster_candidates,
    instance_dependent_candidates,
    uniform_candidates,
)
from engine.query import query_scores
from engine.simulate import learning_curve_area, simulate

ROOT = Path(__file__).resolve().parent.parent
PLL_DIR = Path("/work/shared/data/pll")
DOCS = ROOT / "docs"
FIGURES = DOCS / "campaigns"

CHEAP = ["apl", "participation", "most_partial", "random", "least_confidence", "margin", "entropy", "dst_margin"]
PL_SETTINGS = {"lost", "digits · uniform · high"}  # exact PL is costly: run it on two settings only


@dataclass
class Setting:
    name: str
    family: str  # "real", "digits", "small"
    load: Callable[[], tuple[np.ndarray, np.ndarray, np.ndarray]]
    note: str
    epsilon: float = 0.0


def _subset(n: int, size: int | None, seed: int = 0) -> np.ndarray:
    if size is None or size >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=size, replace=False))


def _pll(name: str, size: int) -> Callable:
    def load():
        data = read_dataset(PLL_DIR / f"{name}.mat")
        rows = _subset(data.n_instances, size)
        return data.X[rows], data.candidates[rows], data.true_labels[rows]

    return load


def _bundled(loader, protocol: str, level: str, size: int | None = None) -> Callable:
    def load():
        X, y = loader(return_X_y=True)
        rows = _subset(X.shape[0], size)
        X, y = X[rows].astype(float), y[rows]
        m = int(y.max()) + 1
        high = level == "high"
        if protocol == "uniform":
            Y = uniform_candidates(y, m, n_false=min(3 if high else 1, m - 1), fraction=0.9 if high else 0.3, seed=0)
        elif protocol == "class":
            Y = class_dependent_candidates(
                y, m, fraction=0.9 if high else 0.3, partner_prob=0.9 if high else 0.7, seed=0
            )
        elif protocol == "instance":
            Y = instance_dependent_candidates(X / max(X.max(), 1e-12), y, m, mean_rate=0.4 if high else 0.1, seed=0)
        else:
            Y = cluster_candidates(X, y, m, alpha_max=0.9 if high else 0.3, noise_rate=0.0, seed=0)
        return X, Y, y

    return load


PROTOCOL_NOTES = {
    "uniform": {"low": "uniform: 30 % of items get 1 false label", "high": "uniform: 90 % of items get 3 false labels"},
    "class": {
        "low": "class-dependent: 30 % get one false label (partner w.p. 0.7)",
        "high": "class-dependent: 90 % get one false label (partner w.p. 0.9)",
    },
    "instance": {
        "low": "instance-dependent (MLP confusions), mean flip rate 0.1",
        "high": "instance-dependent (MLP confusions), mean flip rate 0.4",
    },
    "cluster": {
        "low": "cluster-based bags (5 k-means clusters), α_max = 0.3",
        "high": "cluster-based bags (5 k-means clusters), α_max = 0.9",
    },
}


def settings(quick: bool) -> list[Setting]:
    out = []
    for name, size in (("lost", 800), ("MSRCv2", 800), ("BirdSong", 800), ("FG-NET", 800)):
        if (PLL_DIR / f"{name}.mat").exists():
            out.append(Setting(name, "real", _pll(name, size), f"real candidate sets, random subset of {size}"))
    for protocol in ("uniform", "class", "instance", "cluster"):
        for level in ("low", "high"):
            out.append(
                Setting(
                    f"digits · {protocol} · {level}",
                    "digits",
                    _bundled(load_digits, protocol, level, 800),
                    PROTOCOL_NOTES[protocol][level] + "; random subset of 800",
                )
            )
    out.append(
        Setting(
            "digits · uniform · high · ε=0.1",
            "digits",
            _bundled(load_digits, "uniform", "high", 800),
            PROTOCOL_NOTES["uniform"]["high"] + "; expert wrong w.p. 0.1 (another candidate)",
            epsilon=0.1,
        )
    )
    for label, loader in (("wine", load_wine), ("breast-cancer", load_breast_cancer)):
        for level in ("low", "high"):
            out.append(
                Setting(
                    f"{label} · uniform · {level}",
                    "small",
                    _bundled(loader, "uniform", level),
                    PROTOCOL_NOTES["uniform"][level].replace("3 false", "min(3, M−1) false") + "; all rows",
                )
            )
    if quick:
        out = [s for s in out if s.name in ("lost", "digits · uniform · high", "wine · uniform · high")]
    return out


def run(quick: bool, seeds: int, budget: int, batch: int, k: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows, info = [], []
    for setting in settings(quick):
        X, Y, y = setting.load()
        strategies = CHEAP + (["pl"] if setting.name in PL_SETTINGS else [])
        started = time.perf_counter()
        table = simulate(
            X,
            Y,
            y,
            strategies=strategies,
            seeds=seeds,
            test_fraction=0.3,
            budget=budget,
            batch=batch,
            k=k,
            epsilon=setting.epsilon,
        )
        seconds = time.perf_counter() - started
        table.insert(0, "setting", setting.name)
        rows.append(table)
        n_test = int(round(0.3 * X.shape[0]))
        # How many partial items can move some target's NL/APL at all (apl score > 0) at the start.
        span = np.where(np.ptp(X, axis=0) > 0, np.ptp(X, axis=0), 1.0)
        idx, w = knn_graph((X - X.min(axis=0)) / span, k=k)
        partial = Y.sum(axis=1) >= 2
        apl_positive = float((query_scores(idx, w, Y, criterion="apl")[partial] > 0).mean())
        info.append(
            {
                "setting": setting.name,
                "family": setting.family,
                "note": setting.note,
                "n": X.shape[0],
                "n_train": X.shape[0] - n_test,
                "n_test": n_test,
                "d": X.shape[1],
                "M": Y.shape[1],
                "partial": float((Y.sum(axis=1) >= 2).mean()),
                "mean_set": float(Y.sum(axis=1).mean()),
                "apl_positive": apl_positive,
                "seconds": seconds,
                "equal_partial_sizes": bool(partial.any() and np.unique(Y.sum(axis=1)[partial]).size == 1),
            }
        )
        print(
            f"{setting.name:40s} n={X.shape[0]:5d} M={Y.shape[1]:3d} partial={info[-1]['partial']:.2f} "
            f"{len(strategies)} strategies x {seeds} seeds in {seconds:6.1f} s",
            flush=True,
        )
    return pd.concat(rows, ignore_index=True), pd.DataFrame(info)


def batch_check(names: list[str], quick: bool, k: int) -> pd.DataFrame:
    """apl vs random with batch 1 and batch 20 (budget 100, 3 seeds) on the given settings."""
    out = []
    for setting in [s for s in settings(quick) if s.name in names]:
        X, Y, y = setting.load()
        for batch in (1, 20):
            table = simulate(
                X, Y, y, strategies=["apl", "random"], seeds=3, test_fraction=0.3, budget=100, batch=batch, k=k
            )
            area = learning_curve_area(table).groupby("strategy")["area"].mean()
            final = table[table.n_answers == table.n_answers.max()].groupby("strategy")["accuracy"].mean()
            out.append(
                {
                    "setting": setting.name,
                    "batch": batch,
                    "apl_auc": area["apl"],
                    "random_auc": area["random"],
                    "apl_final": final["apl"],
                    "random_final": final["random"],
                }
            )
        print(f"batch check: {setting.name}", flush=True)
    return pd.DataFrame(out)


# --------------------------------------------------------------------------- reporting


def _areas(results: pd.DataFrame) -> pd.DataFrame:
    parts = []
    for setting, table in results.groupby("setting", sort=False):
        area = learning_curve_area(table)
        area.insert(0, "setting", setting)
        parts.append(area)
    return pd.concat(parts, ignore_index=True)


def _paired_gain(areas: pd.DataFrame, baseline: str = "random") -> pd.DataFrame:
    """Per (setting, strategy): AUC minus the baseline's AUC on the same seed, mean and SE."""
    base = areas[areas.strategy == baseline].set_index(["setting", "seed"])["area"]
    diff = areas.set_index(["setting", "seed"]).join(base.rename("base"))
    diff["gain"] = diff["area"] - diff["base"]
    out = diff.reset_index().groupby(["setting", "strategy"], sort=False)["gain"].agg(["mean", "std", "count"])
    out["se"] = out["std"] / np.sqrt(out["count"])
    return out.reset_index()


def grid_plot(results: pd.DataFrame, names: list[str], path: Path, metric: str, ylabel: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, len(names))
    rows = int(np.ceil(len(names) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.6 * rows), squeeze=False)
    colours = {}
    for ax, name in zip(axes.ravel(), names, strict=False):
        table = results[results.setting == name]
        for strategy, run in table.groupby("strategy", sort=False):
            curve = run.groupby("n_answers")[metric].agg(["mean", "std"]).fillna({"std": 0.0})
            x = curve.index.to_numpy(dtype=float)
            style = {"linewidth": 2.2} if strategy in ("apl", "pl") else {"linewidth": 1.1}
            line = ax.plot(x, curve["mean"], label=strategy, color=colours.get(strategy), **style)[0]
            colours.setdefault(strategy, line.get_color())
            if strategy in ("apl", "random"):
                ax.fill_between(
                    x, curve["mean"] - curve["std"], curve["mean"] + curve["std"], color=line.get_color(), alpha=0.12
                )
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("answers", fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in axes.ravel()[len(names) :]:
        ax.axis("off")
    handles, labels = axes.ravel()[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(9, len(labels)), fontsize=8, frameon=False)
    fig.suptitle(f"{ylabel} vs answers, mean over seeds (band: ± 1 std for apl and random)", fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 0.97))
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _fmt(mean: float, std: float, digits: int = 3) -> str:
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def write_report(
    results: pd.DataFrame, info: pd.DataFrame, args, elapsed: float, batch_table: pd.DataFrame | None = None
) -> Path:
    FIGURES.mkdir(parents=True, exist_ok=True)
    areas = _areas(results)
    gains = _paired_gain(areas)
    order = [s for s in ["apl", "pl"] + CHEAP if s in set(results.strategy)]
    order = list(dict.fromkeys(order))
    stats = areas.groupby(["setting", "strategy"], sort=False)["area"].agg(["mean", "std"])
    settings_order = list(info.setting)
    seeds = results["seed"].nunique()

    figures = []
    for family, title in (
        ("real", "real PLL benchmark sets"),
        ("digits", "digits with engine.noise protocols"),
        ("small", "wine and breast cancer"),
    ):
        names = [s for s in settings_order if info.set_index("setting").loc[s, "family"] == family]
        if not names:
            continue
        acc = FIGURES / f"accuracy_{family}.png"
        grid_plot(results, names, acc, "accuracy", "PL-kNN test accuracy")
        figures.append((title, acc))
        if family == "real":
            amb = FIGURES / "open_targets_real.png"
            grid_plot(results, names, amb, "open_targets", "open training targets")
            figures.append(("real sets: open targets (NL ≠ APL) left", amb))
    # One example with the CLI's own plot function (what `winnow simulate --plot` draws).
    example = settings_order[0]
    plot_learning_curves(
        results[results.setting == example],
        FIGURES / "cli_example.png",
        title=f"{example}: PL-kNN test accuracy (mean ± std over {seeds} seeds)",
    )

    lines = []
    add = lines.append
    add("# Querying campaigns: which items should the expert settle first?")
    add("")
    add(
        f"Produced by `benchmarks/simulate_campaigns.py{' --quick' if args.quick else ''}` "
        f"({time.strftime('%Y-%m-%d')}, {platform.python_version()}, {elapsed / 60:.1f} min "
        f"{'summed over the settings' if args.report_from else 'wall'} on a shared 2-core machine). "
        "Every figure below comes from that run."
    )
    add("")
    add("## Protocol")
    add("")
    add(
        f"- For each seed (0..{seeds - 1}) a random 70/30 train/test split, shared by all strategies; "
        "features min-max scaled on the training part; k = "
        f"{args.k} (uniform weights) for PL-kNN, DST-PLL and the query scores."
    )
    add(
        f"- Budget {args.budget} answers, batch {args.batch}: metrics after every batch. The expert answers the true "
        "label "
        "(one setting with ε = 0.1: a wrong label from the candidate set with probability 0.1)."
    )
    add(
        "- Bundled sets: candidate sets generated once (seed 0) by `engine.noise`; the seeds vary the split, the "
        "strategies' tie-breaking and the evaluation's tie-breaking."
    )
    add(
        "- `accuracy` is PL-kNN's test accuracy from the current candidate sets. **AUC** is the area under "
        "accuracy vs answers divided by the budget (the mean accuracy over the campaign), mean ± std over seeds. "
        "`gain` is a strategy's AUC minus random's on the same seed (paired), mean ± standard error; "
        "a gain beyond 2 SE is called significant below."
    )
    add(
        f"- `pl` (exact possible labels, scored on a random sample of 100 targets) is costly and was run on "
        f"{', '.join(sorted(PL_SETTINGS & set(settings_order))) or 'no setting'} only."
    )
    add("")
    add(
        "`apl > 0`: share of the partial items whose apl score is positive at the start (all rows, k-NN on the "
        "scaled features), i.e. items for which *some* answer changes some target's NL or APL."
    )
    add("")
    add("| setting | n (train/test) | d | M | partial | mean set size | apl > 0 | candidates | run time |")
    add("|---|---|---|---|---|---|---|---|---|")
    for r in info.itertuples():
        add(
            f"| {r.setting} | {r.n} ({r.n_train}/{r.n_test}) | {r.d} | {r.M} | {r.partial:.0%} | {r.mean_set:.2f} | "
            f"{r.apl_positive:.0%} | {r.note} | {r.seconds:.0f} s |"
        )
    add("")

    first = (
        results[results.step == 0]
        .groupby("setting", sort=False)[["accuracy", "dst_accuracy", "reject_rate", "open_targets"]]
        .mean()
    )
    # -- verdict, from the numbers
    add("## Where apl / pl win and where they do not")
    add("")
    g = gains.set_index(["setting", "strategy"])
    best_of = {s: stats.loc[s]["mean"].idxmax() for s in settings_order}
    apl_sig_win = [s for s in settings_order if g.loc[(s, "apl"), "mean"] > 2 * g.loc[(s, "apl"), "se"] > 0]
    apl_sig_loss = [s for s in settings_order if g.loc[(s, "apl"), "mean"] < -2 * g.loc[(s, "apl"), "se"] < 0]
    apl_best = [s for s in settings_order if best_of[s] == "apl"]

    def runner_up_gap(s: str) -> str:
        means = stats.loc[s]["mean"]
        return f"{means['apl'] - means.drop('apl').max():+.3f}"

    add(
        f"- **apl beats random significantly** (paired AUC gain > 2 SE) in {len(apl_sig_win)} of {len(settings_order)} "
        "settings"
        + (": " + "; ".join(f"{s} ({g.loc[(s, 'apl'), 'mean']:+.3f})" for s in apl_sig_win) if apl_sig_win else "")
        + "."
    )
    add(
        f"- **apl is worse than random** (gain < −2 SE) in {len(apl_sig_loss)} settings"
        + (": " + "; ".join(f"{s} ({g.loc[(s, 'apl'), 'mean']:+.3f})" for s in apl_sig_loss) if apl_sig_loss else "")
        + "."
    )
    add(
        f"- **apl has the best mean AUC** of all strategies in {len(apl_best)} settings"
        + (": " + "; ".join(f"{s} (margin over the next {runner_up_gap(s)})" for s in apl_best) if apl_best else "")
        + "."
    )
    others = {}
    for s in settings_order:
        if best_of[s] != "apl":
            others.setdefault(best_of[s], []).append(s)
    for strategy, names in sorted(others.items(), key=lambda kv: -len(kv[1])):
        add(f"- **{strategy}** has the best mean AUC in {len(names)}: {'; '.join(names)}.")
    for s in sorted(PL_SETTINGS & set(settings_order)):
        add(
            f"- **pl** on {s}: AUC {_fmt(*stats.loc[(s, 'pl')])} vs apl {_fmt(*stats.loc[(s, 'apl')])}, "
            f"gain over random {g.loc[(s, 'pl'), 'mean']:+.3f} ± {g.loc[(s, 'pl'), 'se']:.3f} (SE)."
        )
    # Ambiguity reduction is what apl optimises: report it.
    last = results[results.step == results.groupby(["setting", "strategy", "seed"])["step"].transform("max")]
    amb = last.groupby(["setting", "strategy"], sort=False)["open_targets"].mean()
    fewest = [s for s in settings_order if amb.loc[s].idxmin() in ("apl", "pl")]
    add(
        f"- apl/pl leave the **fewest open training targets** (NL ≠ APL) at the end of the budget in "
        f"{len(fewest)} of {len(settings_order)} settings: they do what they optimise. Whether that buys test "
        "accuracy depends on the data (see the tables)."
    )
    add("")
    if apl_sig_loss:
        pos = info.set_index("setting")["apl_positive"]
        big = [s for s in apl_sig_loss if g.loc[(s, "apl"), "mean"] < -0.01]
        small = [s for s in apl_sig_loss if s not in big]
        if small:
            add(
                f"- The loss on {', '.join(small)} is below 0.01 AUC: significant over the paired seeds, "
                "but of no practical size."
            )
        if big:
            shares = (
                "Share of partial items with a positive apl score at the start: "
                + ", ".join(f"{pos[s]:.0%} on {s}" for s in big)
                + " (large losses)"
                + (
                    ", against " + ", ".join(f"{pos[s]:.0%} on {s}" for s in apl_sig_win) + " (wins)"
                    if apl_sig_win
                    else ""
                )
                + "."
            )
            if apl_sig_win and max(pos[big]) < min(pos[apl_sig_win]):
                add(
                    "- **Why apl loses badly where it does.** The score counts targets whose NL or APL a *single* "
                    "answer can change. When most neighbours of a target are partial, no single answer changes "
                    "anything, so most items score 0 (ties, broken at random) and the rest sit in neighbourhoods that "
                    "are already nearly settled; apl spends its budget there, while random, margin or dst_margin "
                    "also send answers into the ambiguous regions where the test errors are. " + shares
                )
            else:
                add(
                    "- **Where apl loses badly**, the share of items it can score is not uniformly lower than where it "
                    "wins, so the one-answer look-ahead is not the whole story: apl optimises the training targets' "
                    "NL/APL, not test accuracy. " + shares
                )
    equal_sizes = [r.setting for r in info.itertuples() if r.equal_partial_sizes]
    if equal_sizes:
        add(
            "- `most_partial` equals `random` wherever every partial set has the same size "
            f"({', '.join(equal_sizes)}): "
            "all scores tie and the seeded tie-break is the same random order."
        )
    always_reject = [s for s in settings_order if first.loc[s, "reject_rate"] >= 0.95]
    if always_reject:
        end_reject = last.groupby("setting")["reject_rate"].mean()
        add(
            f"- DST-PLL (k = {args.k}) rejects at least 95 % of the test predictions from the start on "
            + ", ".join(f"{s} ({end_reject[s]:.0%} after the budget, mean over strategies)" for s in always_reject)
            + "; its accepted accuracy is mostly undefined (nan) there."
        )
    add("")
    if batch_table is not None and len(batch_table):
        add(
            "Is it the batch? apl re-scores only between batches, so a batch of 20 may pick redundant items. "
            "apl vs random with batch 1 and batch 20 (budget 100, 3 seeds, AUC and final accuracy):"
        )
        add("")
        add("| setting | batch | apl AUC | random AUC | apl acc. @100 | random acc. @100 |")
        add("|---|---|---|---|---|---|")
        for r in batch_table.itertuples():
            add(
                f"| {r.setting} | {r.batch} | {r.apl_auc:.3f} | {r.random_auc:.3f} | {r.apl_final:.3f} | "
                f"{r.random_final:.3f} |"
            )
        add("")
        one = batch_table[batch_table.batch == 1]
        if (one.apl_auc < one.random_auc).all():
            add(
                "With batch 1 (re-scored after every answer) apl still trails random on "
                + ", ".join(f"{r.setting} by {r.random_auc - r.apl_auc:.3f} AUC" for r in one.itertuples())
                + ": the loss is not an artefact of batching."
            )
        else:
            add("With batch 1 apl no longer trails random everywhere: part of the loss comes from batching.")
        add("")

    # -- AUC table
    add("## Area under the accuracy curve (mean ± std over seeds)")
    add("")
    add("| setting | " + " | ".join(order) + " |")
    add("|---|" + "---|" * len(order))
    for s in settings_order:
        cells = []
        best = stats.loc[s]["mean"].max()
        for strategy in order:
            if (s, strategy) not in stats.index:
                cells.append("–")
                continue
            mean, std = stats.loc[(s, strategy)]
            text = _fmt(mean, std)
            cells.append(f"**{text}**" if mean == best else text)
        add(f"| {s} | " + " | ".join(cells) + " |")
    add("")
    add("## Paired AUC gain over random (mean ± SE; * = beyond 2 SE)")
    add("")
    shown = [x for x in order if x != "random"]
    add("| setting | " + " | ".join(shown) + " |")
    add("|---|" + "---|" * len(shown))
    for s in settings_order:
        cells = []
        for strategy in shown:
            if (s, strategy) not in g.index:
                cells.append("–")
                continue
            mean, se = g.loc[(s, strategy), "mean"], g.loc[(s, strategy), "se"]
            star = "*" if abs(mean) > 2 * se and se > 0 else ""
            cells.append(f"{mean:+.3f} ± {se:.3f}{star}")
        add(f"| {s} | " + " | ".join(cells) + " |")
    add("")

    # -- start / end
    add(f"## Accuracy before and after {args.budget} answers, reject rate and ambiguity at the end (means)")
    add("")
    first = (
        results[results.step == 0]
        .groupby("setting", sort=False)[["accuracy", "dst_accuracy", "reject_rate", "open_targets"]]
        .mean()
    )
    end = last.groupby(["setting", "strategy"], sort=False)[
        ["n_answers", "accuracy", "dst_accuracy", "reject_rate", "accepted_accuracy", "open_targets"]
    ].mean()
    add(
        "| setting | start acc. | start DST acc. / reject | start open | "
        + " | ".join(f"{x} acc. / open" for x in order)
        + " |"
    )
    add("|---|---|---|---|" + "---|" * len(order))
    for s in settings_order:
        f0 = first.loc[s]
        cells = [
            f"{end.loc[(s, x), 'accuracy']:.3f} / {end.loc[(s, x), 'open_targets']:.0f}" if (s, x) in end.index else "–"
            for x in order
        ]
        add(
            f"| {s} | {f0['accuracy']:.3f} | {f0['dst_accuracy']:.3f} / {f0['reject_rate']:.2f} | "
            f"{f0['open_targets']:.0f} | " + " | ".join(cells) + " |"
        )
    add("")
    add("DST-PLL at the end of the budget (accuracy / reject rate / accuracy on accepted):")
    add("")
    add("| setting | " + " | ".join(order) + " |")
    add("|---|" + "---|" * len(order))
    for s in settings_order:
        cells = [
            f"{end.loc[(s, x), 'dst_accuracy']:.3f} / {end.loc[(s, x), 'reject_rate']:.2f} / "
            f"{end.loc[(s, x), 'accepted_accuracy']:.3f}"
            if (s, x) in end.index
            else "–"
            for x in order
        ]
        add(f"| {s} | " + " | ".join(cells) + " |")
    add("")

    # -- runtime
    add("## Runtime of one step per strategy")
    add("")
    add(
        f"Strategy time for one batch of {args.batch} (selection plus incremental updates after the answers; "
        "the evaluation is not included), median and 90th percentile over all steps of all settings where it ran, "
        "and the one-off set-up per campaign (e.g. building the IncrementalRanker). Train sets of 125–560 items; "
        "the machine was shared with other work, so treat these as orders of magnitude."
    )
    add("")
    add("| strategy | median s/step | p90 s/step | median set-up s |")
    add("|---|---|---|---|")
    steps = results[results.step > 0]
    setup = results[results.step == 0]
    for strategy in order:
        t = steps.loc[steps.strategy == strategy, "seconds_per_step"]
        u = setup.loc[setup.strategy == strategy, "setup_seconds"]
        add(f"| {strategy} | {t.median():.4f} | {t.quantile(0.9):.4f} | {u.median():.4f} |")
    add("")
    add("## Figures")
    add("")
    for title, path in figures:
        add(f"### {title}")
        add("")
        add(f"![{title}]({path.relative_to(DOCS).as_posix()})")
        add("")
    add(
        f"`winnow simulate --plot` draws the same curves for one dataset, e.g. {example}: "
        f"![cli example]({(FIGURES / 'cli_example.png').relative_to(DOCS).as_posix()})"
    )
    add("")
    add("Reproduce one row from the command line, e.g.:")
    add("")
    add("```")
    add(
        f"winnow simulate /work/shared/data/pll/lost.mat -s apl,random,margin,dst_margin --budget {args.budget} "
        f"--batch {args.batch} --seeds {seeds} --test-fraction 0.3 -o lost.csv --plot lost.png"
    )
    add("```")
    add("(the CLI uses all rows of the file; the table above uses a random subset of 800).")
    path = DOCS / "results_campaigns.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 settings, 2 seeds")
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument(
        "--raw", type=Path, default=None, help="also write every result row to this CSV (+ .settings/.batch CSVs)"
    )
    parser.add_argument(
        "--report-from", type=Path, default=None, help="rewrite the markdown from a --raw CSV without rerunning"
    )
    args = parser.parse_args()
    if args.quick:
        args.seeds = 2
    if args.report_from is not None:
        raw = args.report_from
        results = pd.read_csv(raw)
        info = pd.read_csv(raw.with_suffix(".settings.csv"))
        batch_table = pd.read_csv(raw.with_suffix(".batch.csv"))
        elapsed = float(info["seconds"].sum())
        print(f"wrote {write_report(results, info, args, elapsed, batch_table)}")
        return
    started = time.perf_counter()
    results, info = run(args.quick, args.seeds, args.budget, args.batch, args.k)
    gains = _paired_gain(_areas(results)).set_index(["setting", "strategy"])
    apl_gain = gains.xs("apl", level="strategy")["mean"].sort_values()
    worst = list(apl_gain.index[:2]) if (apl_gain < 0).any() else []
    batch_table = batch_check([w for w in worst if apl_gain[w] < 0], args.quick, args.k)
    elapsed = time.perf_counter() - started
    if args.raw is not None:
        results.to_csv(args.raw, index=False)
        info.to_csv(args.raw.with_suffix(".settings.csv"), index=False)
        batch_table.to_csv(args.raw.with_suffix(".batch.csv"), index=False)
    path = write_report(results, info, args, elapsed, batch_table)
    print(f"wrote {path} in {elapsed / 60:.1f} min")


if __name__ == "__main__":
    main()
