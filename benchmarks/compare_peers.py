"""winnow's query strategies beside the established active-learning libraries, through one simulator.

Peers (benchmark-only dependencies, ``benchmarks/requirements.txt``):

* scikit-activeml: ``ProbabilisticAL`` (McPAL, with its Parzen-window classifier and the
  kernel density as utility weight), ``Clue`` and ``UncertaintySampling`` (margin) with a
  k-NN classifier;
* modAL: margin sampling and ranked batch-mode sampling with a k-NN classifier.

Natural adaptation: a peer sees an item as *labelled* when its candidate set is a single
label (that label) and as unlabelled otherwise; it may only ask unlabelled items. Everything
else is shared with winnow's strategies: :func:`engine.simulate.simulate`, the same splits
(seeds), the same oracle, and the same evaluation (PL-kNN on the current candidate sets,
``k`` = 10). With no labelled item of two different labels a peer cannot fit its classifier
and asks at random (seeded), as their own examples start with a random batch.

Usage (run with a Python that has the peers installed, e.g. a separate venv)::

    python benchmarks/compare_peers.py --seeds 5 --n-jobs 2 --raw /tmp/peers.csv
    python benchmarks/compare_peers.py --report-from /tmp/peers.csv   # writes docs/results_strategy.md
"""

from __future__ import annotations

import argparse
import platform
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from engine.simulate import CampaignContext, Strategy, learning_curve_area, simulate

ROOT = Path(__file__).resolve().parent.parent
PEERS = ("skal_pal", "skal_clue", "skal_margin", "modal_margin", "modal_ranked")
WINNOW = ("decision_change", "apl", "margin", "dst_margin", "random")
NEW_SETTINGS = ("digits · crowd of 3", "digits · crowd of 5", "digits · weak rules")  # not among the 17 of issue 15
PEER_GOAL_SETTINGS = ("lost", "MSRCv2", "BirdSong", "digits · instance · high")


def _labelled(context: CampaignContext) -> tuple[np.ndarray, np.ndarray]:
    """Peers' view: labels of the precise items, NaN for the partial ones; and the partial mask."""
    Y = np.asarray(context.candidates)
    partial = Y.sum(axis=1) >= 2
    y = np.where(partial, np.nan, Y.argmax(axis=1).astype(float))
    return y, partial


class PeerStrategy(Strategy):
    """One peer query strategy behind winnow's :class:`engine.simulate.Strategy` interface.

    Parameters
    ----------
    kind : one of :data:`PEERS`
    k : int
        Neighbours of the peers' k-NN classifier (capped by the number of labelled items).
    """

    def __init__(self, kind: str, *, k: int = 10) -> None:
        if kind not in PEERS:
            raise ValueError(f"kind must be one of {', '.join(PEERS)}; got {kind!r}")
        self.kind = kind
        self.name = kind
        self.k = k

    def select(self, context: CampaignContext, batch: int, rng: np.random.Generator) -> np.ndarray:
        y, partial = _labelled(context)
        pool = np.flatnonzero(partial)
        batch = min(batch, pool.size)
        known = np.flatnonzero(~partial)
        if np.unique(y[known]).size < 2:
            return rng.choice(pool, size=batch, replace=False)
        seed = int(rng.integers(2**31 - 1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if self.kind.startswith("skal"):
                picks = self._skactiveml(context, y, pool, batch, seed)
            else:
                picks = self._modal(context, y, known, pool, batch)
        picks = np.asarray(picks, dtype=np.intp).ravel()
        picks = picks[(picks >= 0) & (picks < partial.size)]
        picks = picks[partial[picks]]
        picks = picks[np.sort(np.unique(picks, return_index=True)[1])][:batch]
        if picks.size < batch:
            # A peer may return fewer items (e.g. skactiveml drops candidates whose utility is
            # NaN); the rest of the batch is filled at random so every strategy spends the
            # same budget. self.filled counts those items.
            rest = np.setdiff1d(pool, picks)
            fill = rng.choice(rest, size=batch - picks.size, replace=False)
            self.filled = getattr(self, "filled", 0) + int(fill.size)
            picks = np.concatenate([picks, fill])
        return picks

    def _knn(self, n_known: int):
        from sklearn.neighbors import KNeighborsClassifier

        return KNeighborsClassifier(n_neighbors=max(1, min(self.k, n_known)))

    def _skactiveml(self, context, y, pool, batch, seed):
        from skactiveml.classifier import ParzenWindowClassifier, SklearnClassifier
        from skactiveml.pool import Clue, ProbabilisticAL, UncertaintySampling

        X = context.X
        classes = np.arange(context.candidates.shape[1])
        n_known = int(np.isfinite(y).sum())
        if self.kind == "skal_pal":
            clf = ParzenWindowClassifier(classes=classes, random_state=seed)
            # McPAL weights the gain by the density of the candidate: the kernel frequency
            # estimate over all items (labelled or not), as in the library's examples.
            density = (
                ParzenWindowClassifier(classes=classes, missing_label=-1)
                .fit(X, np.zeros(len(X), int))
                .predict_freq(X)[:, 0]
            )
            return ProbabilisticAL(random_state=seed).query(
                X, y, clf, utility_weight=density, candidates=pool, batch_size=batch
            )
        clf = SklearnClassifier(self._knn(n_known), classes=classes, random_state=seed)
        if self.kind == "skal_clue":
            return Clue(random_state=seed).query(X, y, clf, candidates=pool, batch_size=batch)
        return UncertaintySampling(method="margin_sampling", random_state=seed).query(
            X, y, clf, candidates=pool, batch_size=batch
        )

    def _modal(self, context, y, known, pool, batch):
        from modAL.batch import uncertainty_batch_sampling
        from modAL.models import ActiveLearner
        from modAL.uncertainty import margin_sampling

        X = context.X
        strategy = margin_sampling if self.kind == "modal_margin" else uncertainty_batch_sampling
        learner = ActiveLearner(
            estimator=self._knn(known.size),
            query_strategy=strategy,
            X_training=X[known],
            y_training=y[known].astype(int),
        )
        chosen, _ = learner.query(X[pool], n_instances=batch)
        return pool[np.asarray(chosen, dtype=np.intp)]


# --------------------------------------------------------------------------- settings


def all_settings():
    """The 17 settings of results_campaigns.md (real sets in full), then crowd and weak rules."""
    from sklearn.datasets import load_digits

    from app.io import read_dataset
    from benchmarks.simulate_campaigns import PLL_DIR, Setting, settings

    out = []
    for setting in settings(False):
        if setting.family == "real":
            path = PLL_DIR / f"{setting.name}.mat"

            def load(path=path):
                data = read_dataset(path)
                return data.X, data.candidates, data.true_labels

            out.append(Setting(setting.name, "real", load, "real candidate sets, all rows"))
        else:
            out.append(setting)

    def digits(generator, **options):
        def load():
            X, y = load_digits(return_X_y=True)
            rows = np.sort(np.random.default_rng(0).choice(X.shape[0], size=800, replace=False))
            X, y = X[rows].astype(float), y[rows]
            return X, generator(X, y, 10, seed=0, **options), y

        return load

    def crowd(X, y, m, **options):
        from engine.noise import crowd_candidates

        return crowd_candidates(y, m, **options)

    def rules(X, y, m, **options):
        from engine.noise import weak_rule_candidates

        return weak_rule_candidates(X, y, m, **options)

    out.append(
        Setting(
            "digits · crowd of 3",
            "new",
            digits(crowd, n_annotators=3),
            "3 simulated annotators (accuracy 0.6–0.9, confusions on 2 labels), set = union of votes",
        )
    )
    out.append(
        Setting(
            "digits · crowd of 5", "new", digits(crowd, n_annotators=5), "5 simulated annotators, set = union of votes"
        )
    )
    out.append(
        Setting(
            "digits · weak rules",
            "new",
            digits(rules),
            "3 threshold rules per label (coverage 0.5), set = labels of the firing rules",
        )
    )
    return out


# --------------------------------------------------------------------------- run


def run(names: list[str] | None, strategies: list[str], seeds: int, n_jobs: int, raw: Path) -> None:
    from engine.simulate import STRATEGIES

    objects = [PeerStrategy(s) if s in PEERS else s for s in strategies]
    unknown = [s for s in strategies if s not in PEERS and s not in STRATEGIES]
    if unknown:
        raise SystemExit(f"unknown strategies {unknown}; valid: {', '.join(PEERS + tuple(STRATEGIES))}")
    done = set()
    if raw.exists():
        done = set(pd.read_csv(raw, usecols=["setting"])["setting"].unique())
    for setting in all_settings():
        if (names and setting.name not in names) or setting.name in done:
            continue
        X, Y, y = setting.load()
        started = time.perf_counter()
        table = simulate(
            X,
            Y,
            y,
            strategies=objects,
            seeds=seeds,
            test_fraction=0.3,
            budget=200,
            batch=20,
            k=10,
            epsilon=setting.epsilon,
            dst=False,
            n_jobs=n_jobs,
        )
        table.insert(0, "setting", setting.name)
        table["setting_seconds"] = time.perf_counter() - started
        table["n"], table["M"] = X.shape[0], Y.shape[1]
        table["partial_share"] = float((Y.sum(axis=1) >= 2).mean())
        table["true_in_set"] = float(Y[np.arange(len(y)), y].mean())
        table["note"] = setting.note
        table.to_csv(raw, mode="a", header=not raw.exists(), index=False)
        print(f"{setting.name:35s} n={X.shape[0]:5d} {time.perf_counter() - started:7.1f} s", flush=True)


# --------------------------------------------------------------------------- report


def _stats(results: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    parts = []
    for setting, table in results.groupby("setting", sort=False):
        area = learning_curve_area(table)
        area.insert(0, "setting", setting)
        parts.append(area)
    areas = pd.concat(parts, ignore_index=True)
    stats = areas.groupby(["setting", "strategy"], sort=False)["area"].agg(["mean", "std", "count"])
    stats["se"] = stats["std"] / np.sqrt(stats["count"])
    base = areas[areas.strategy == "random"].set_index(["setting", "seed"])["area"]
    paired = areas.set_index(["setting", "seed"]).join(base.rename("base"))
    paired["gain"] = paired["area"] - paired["base"]
    gains = paired.reset_index().groupby(["setting", "strategy"], sort=False)["gain"].agg(["mean", "std", "count"])
    gains["se"] = gains["std"] / np.sqrt(gains["count"])
    return stats, gains


def write_report(results: pd.DataFrame, path: Path, timing: str | None) -> None:
    stats, gains = _stats(results)
    # The real sets first, then the order the run wrote them in (FG-NET may come last).
    seen = list(dict.fromkeys(results["setting"]))
    settings_order = [x for x in PEER_GOAL_SETTINGS[:3] + ("FG-NET",) if x in seen] + [
        x for x in seen if x not in PEER_GOAL_SETTINGS[:3] + ("FG-NET",)
    ]
    present = set(results["strategy"])
    order = [s for s in WINNOW + PEERS if s in present]
    seeds = results["seed"].nunique()
    lines: list[str] = []
    add = lines.append
    add("# Which strategy to use: decision_change beside winnow's strategies and the active-learning peers")
    add("")
    add(
        f"Produced by `benchmarks/compare_peers.py` ({time.strftime('%Y-%m-%d')}, Python {platform.python_version()}); "
        "every figure below comes from that run (`--report-from` rewrites this page from its CSV)."
    )
    add("")
    add("## Protocol")
    add("")
    add(
        f"- {seeds} seeds; each seed a random 70/30 train/test split shared by every strategy; features min-max scaled "
        "on the training part; k = 10 (uniform weights) for the query graph and the evaluation."
    )
    add("- Budget 200 answers in batches of 20; perfect expert except `digits · uniform · high · ε=0.1`.")
    add(
        "- Evaluation fixed for every strategy: PL-kNN test accuracy from the current candidate sets. **AUC** = mean "
        "accuracy over the campaign (area under accuracy vs answers / budget)."
    )
    add(
        "- Peers see an item as labelled when its set is a single label; see the module docstring of "
        "`benchmarks/compare_peers.py` for the adaptation. `default` is the strategy sessions use today (`apl`)."
    )
    add(
        "- Real sets (lost, MSRCv2, BirdSong, FG-NET) in full (all rows); digits subsets of 800 rows as in "
        "`docs/results_campaigns.md`. The last three settings are the new generators of `engine.noise` "
        "(`crowd_candidates`, `weak_rule_candidates`), not among the 17 of issue 15."
    )
    add(
        "- `skal_pal` (McPAL) was not run on FG-NET: with 78 labels one query asks scikit-activeml for a "
        "7.3 GiB array (shape (4196322, 3, 78)), beyond the machine shared by two workers."
    )
    add("- DST-PLL evaluation is off here (`dst=False`): the comparison is on PL-kNN accuracy only.")
    add("")
    add("## AUC per setting (mean ± standard error over seeds; bold = best mean; † = within one SE of the best)")
    add("")
    add("| setting | n | M | " + " | ".join(order) + " |")
    add("|---|---|---|" + "---|" * len(order))
    best_count = {s: 0 for s in order}
    shortfalls = []
    for setting in settings_order:
        sub = results[results.setting == setting].iloc[0]
        means = {s: stats.loc[(setting, s), "mean"] for s in order if (setting, s) in stats.index}
        best = max(means, key=means.get)
        cells = []
        for s in order:
            if s not in means:
                cells.append("–")
                continue
            m, se = means[s], stats.loc[(setting, s), "se"]
            within = means[best] - m <= stats.loc[(setting, best), "se"] or m == means[best]
            best_count[s] += int(within)
            text = f"{m:.3f} ± {se:.3f}"
            cells.append(f"**{text}**" if s == best else (f"{text} †" if within else text))
        if "decision_change" in means and not (
            means[best] - means["decision_change"] <= stats.loc[(setting, best), "se"]
        ):
            shortfalls.append((setting, best, means[best] - means["decision_change"]))
        add(f"| {setting} | {int(sub['n'])} | {int(sub['M'])} | " + " | ".join(cells) + " |")
    add("")
    add(
        "Best or within one SE of the best (of "
        + str(len(settings_order))
        + " settings): "
        + ", ".join(f"{s} {best_count[s]}" for s in order)
        + "."
    )
    add("")
    add("## Paired AUC gain over random (mean ± SE; * = beyond 2 SE)")
    add("")
    shown = [s for s in order if s != "random"]
    add("| setting | " + " | ".join(shown) + " |")
    add("|---|" + "---|" * len(shown))
    below = {s: [] for s in shown}
    above = {s: 0 for s in shown}
    for setting in settings_order:
        cells = []
        for s in shown:
            if (setting, s) not in gains.index:
                cells.append("–")
                continue
            m, se = gains.loc[(setting, s), "mean"], gains.loc[(setting, s), "se"]
            star = abs(m) > 2 * se and se > 0
            if star and m < 0:
                below[s].append(f"{setting} ({m:+.3f})")
            above[s] += int(star and m > 0)
            cells.append(f"{m:+.3f} ± {se:.3f}{'*' if star else ''}")
        add(f"| {setting} | " + " | ".join(cells) + " |")
    add("")
    for s in shown:
        add(
            f"- **{s}**: significantly above random in {above[s]} settings; significantly below in "
            f"{len(below[s])}{': ' + '; '.join(below[s]) if below[s] else ''}."
        )
    add("")
    add("## The goals of issue 15 for decision_change")
    add("")
    core = [x for x in settings_order if x not in NEW_SETTINGS]
    dc_below = [x for x in below.get("decision_change", []) if x.split(" (")[0] in core]
    within = 0
    for setting in core:
        means = {s: stats.loc[(setting, s), "mean"] for s in order if (setting, s) in stats.index}
        best = max(means, key=means.get)
        within += int(means[best] - means.get("decision_change", -np.inf) <= stats.loc[(setting, best), "se"])
    add(
        f"- Never significantly below random: {'met' if not dc_below else 'missed: ' + '; '.join(dc_below)} "
        f"({len(core)} settings)."
    )
    add(
        f"- Best or within one SE of the best in ≥ 15 of 17: {within} of {len(core)} "
        f"({'met' if within >= 15 else 'missed'})."
    )
    for setting in PEER_GOAL_SETTINGS:
        if setting not in settings_order:
            continue
        dc = stats.loc[(setting, "decision_change"), "mean"]
        peers = {p: stats.loc[(setting, p), "mean"] for p in PEERS if (setting, p) in stats.index}
        best_peer = max(peers, key=peers.get)
        add(
            f"- Ahead of every peer on {setting}: {'yes' if dc > peers[best_peer] else 'no'} "
            f"(decision_change {dc:.3f}, best peer {best_peer} {peers[best_peer]:.3f}, difference "
            f"{dc - peers[best_peer]:+.3f})."
        )
    add("")
    add("## Where decision_change falls short of the best (beyond one SE)")
    add("")
    if shortfalls:
        for setting, best, loss in shortfalls:
            add(f"- {setting}: {best} is ahead by {loss:.3f} AUC.")
    else:
        add("- nowhere.")
    add("")
    add("## Strategy time per step (batch of 20) and set-up, all settings")
    add("")
    add("| strategy | median s/step | p90 s/step | median set-up s |")
    add("|---|---|---|---|")
    steps = results[results.step > 0]
    starts = results[results.step == 0]
    for s in order:
        t = steps.loc[steps.strategy == s, "seconds_per_step"]
        u = starts.loc[starts.strategy == s, "setup_seconds"]
        add(f"| {s} | {t.median():.4f} | {t.quantile(0.9):.4f} | {u.median():.4f} |")
    add("")
    if timing:
        add(timing)
    # Learning curves of every setting, drawn by the campaign report's own grid plot.
    from benchmarks.simulate_campaigns import grid_plot

    figure = path.parent / "strategy" / "accuracy.png"
    figure.parent.mkdir(parents=True, exist_ok=True)
    grid_plot(results, settings_order, figure, "accuracy", "PL-kNN test accuracy")
    add("")
    add("## Learning curves")
    add("")
    add(f"![PL-kNN test accuracy vs answers, every setting]({figure.relative_to(path.parent).as_posix()})")
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--settings", default="", help="'|'-separated setting names (default: all)")
    parser.add_argument("--strategies", default=",".join(WINNOW + PEERS))
    parser.add_argument(
        "--raw", type=Path, default=Path("/tmp/compare_peers.csv"), help="result rows, appended per setting"
    )
    parser.add_argument("--report-from", type=Path, default=None, help="write the markdown from a --raw CSV")
    parser.add_argument(
        "--timing", type=Path, default=None, help="markdown table from bench_decision_change.py to append"
    )
    parser.add_argument("-o", "--output", type=Path, default=ROOT / "docs" / "results_strategy.md")
    args = parser.parse_args()
    if args.report_from is not None:
        timing = args.timing.read_text() if args.timing else None
        write_report(pd.read_csv(args.report_from, keep_default_na=True), args.output, timing)
        print(f"wrote {args.output}")
        return
    names = [n for n in args.settings.split("|") if n]
    run(names or None, args.strategies.split(","), args.seeds, args.n_jobs, args.raw)


if __name__ == "__main__":
    main()
