"""``winnow simulate``: replay a querying campaign with a simulated expert and compare strategies.

The command only reads the file, calls :func:`engine.simulate.simulate` and writes the table
(and a plot); the campaign logic lives in the engine. Registered in :mod:`app.cli` as
``app.command("simulate")(simulate_command)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from engine import check_choice
from engine.choices import NOISE_MODES, STRATEGY_NAMES
from engine.exceptions import InvalidInput

if TYPE_CHECKING:
    import pandas as pd

# The campaign engine pulls in scikit-learn and OR-Tools; it is imported when the command
# runs so that every other `winnow` command starts fast. The strategy and noise names come
# from engine.choices, the engine's single list of them.

__all__ = ["simulate_command", "plot_learning_curves", "parse_strategies"]

DEFAULT_STRATEGIES = "default,decision_change,participation,random,margin,dst_margin"

_out = Console()
_err = Console(stderr=True)


def parse_strategies(text: str) -> list[str]:
    """Comma-separated strategy names, each one of :data:`engine.choices.STRATEGY_NAMES`."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise InvalidInput(f"--strategies is empty; valid strategies: {', '.join(STRATEGY_NAMES)}")
    for name in names:
        check_choice(name, "--strategies", STRATEGY_NAMES)
    if len(set(names)) != len(names):
        raise InvalidInput(f"--strategies names a strategy twice: {text!r}")
    return names


def plot_learning_curves(
    results: pd.DataFrame,
    path: str | Path,
    *,
    metric: str = "accuracy",
    title: str | None = None,
    ylabel: str | None = None,
) -> Path:
    """Save ``metric`` vs ``n_answers`` per strategy, mean ± one std over seeds, as an image."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    if not path.parent.is_dir():
        raise InvalidInput(f"--plot {path}: folder {str(path.parent)!r} does not exist")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    try:
        for name, run in results.groupby("strategy", sort=False):
            curve = run.groupby("n_answers")[metric].agg(["mean", "std"]).fillna({"std": 0.0})
            x = curve.index.to_numpy(dtype=float)
            line = ax.plot(x, curve["mean"], marker="o", markersize=2.5, linewidth=1.4, label=name)[0]
            ax.fill_between(
                x, curve["mean"] - curve["std"], curve["mean"] + curve["std"], color=line.get_color(), alpha=0.12
            )
        n_seeds = results["seed"].nunique()
        ax.set_xlabel("number of answers")
        ax.set_ylabel(ylabel or metric.replace("_", " "))
        ax.set_title(title or f"{metric.replace('_', ' ')} vs answers (mean ± std over {n_seeds} seeds)", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, ncol=2)
        fig.tight_layout()
        try:
            fig.savefig(path, dpi=110)
        except (OSError, ValueError) as exc:
            raise InvalidInput(f"--plot {path}: cannot be written ({exc})") from None
    finally:
        plt.close(fig)
    return path


def simulate_command(
    data: Path = typer.Argument(
        ..., help="Dataset with candidate sets AND true labels (CSV/TSV, Parquet, .mat, .npz)."
    ),
    strategies: str = typer.Option(
        DEFAULT_STRATEGIES, "--strategies", "-s", help=f"Comma-separated, from: {', '.join(STRATEGY_NAMES)}."
    ),
    budget: int = typer.Option(100, help="Answers per campaign (stops earlier when nothing partial is left)."),
    batch: int = typer.Option(10, help="Items asked per step; metrics are recorded after each batch."),
    seeds: int = typer.Option(5, help="Campaigns per strategy, each on its own random train/test split."),
    test_fraction: float = typer.Option(0.25, help="Share of the rows held out as the test set."),
    k: int = typer.Option(10, "-k", help="Neighbours of PL-kNN, DST-PLL and the query scores."),
    epsilon: float = typer.Option(0.0, help="Probability that the simulated expert answers a wrong label."),
    noise: str = typer.Option(
        "candidate", help="Where wrong answers come from: 'candidate' (another label of the set) or 'any'."
    ),
    output: Path = typer.Option(
        Path("results.csv"), "-o", "--output", help="Result table: .csv, .tsv, .json or .parquet."
    ),
    plot: Path | None = typer.Option(
        None, "--plot", help="Also save learning curves (mean ± std per strategy) to this .png."
    ),
    eval_k: int | None = typer.Option(
        None, "--eval-k", help="Neighbours of the evaluation (PL-kNN, DST-PLL); default: -k."
    ),
    dst: bool = typer.Option(True, "--dst/--no-dst", help="Also score DST-PLL on the test set (--no-dst is faster)."),
    initial_labels: int = typer.Option(
        0,
        "--initial-labels",
        help="Random training items given their true label before the start (not counted in the budget).",
    ),
    n_jobs: int = typer.Option(1, "--n-jobs", help="Campaigns run in parallel processes."),
) -> None:
    """Simulate querying campaigns with a (noisy) expert and compare query strategies.

    The true labels in DATA play the expert: each step a strategy picks BATCH partial items, the expert
    answers, and PL-kNN / DST-PLL are scored on a held-out test set. 'default' names the strategy labelling
    sessions use by default; the table's 'picked' column lists the rows each step asked.

    Example:
    winnow simulate sample_data/digits_partial.csv -s apl,random,margin \\
      --budget 200 --batch 20 --seeds 5 -o results.csv --plot curves.png
    """
    names = parse_strategies(strategies)
    if budget < 1:
        raise InvalidInput(f"--budget must be at least 1; got {budget}")
    if batch < 1:
        raise InvalidInput(f"--batch must be at least 1; got {batch}")
    if seeds < 1:
        raise InvalidInput(f"--seeds must be at least 1; got {seeds}")
    if k < 1:
        raise InvalidInput(f"-k must be at least 1; got {k}")
    if not 0.0 < test_fraction < 1.0:
        raise InvalidInput(f"--test-fraction must be strictly between 0 and 1; got {test_fraction}")
    if not 0.0 <= epsilon <= 1.0:
        raise InvalidInput(f"--epsilon must be between 0 and 1; got {epsilon}")
    if eval_k is not None and eval_k < 1:
        raise InvalidInput(f"--eval-k must be at least 1; got {eval_k}")
    if initial_labels < 0:
        raise InvalidInput(f"--initial-labels must be at least 0; got {initial_labels}")
    if n_jobs < 1:
        raise InvalidInput(f"--n-jobs must be at least 1; got {n_jobs}")
    from app.io import read_dataset, write_table
    from engine.simulate import learning_curve_area, simulate

    check_choice(noise, "--noise", NOISE_MODES)
    if plot is not None and plot.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise InvalidInput(f"--plot must end in .png, .svg or .pdf; got {str(plot)!r}")

    loaded = read_dataset(data, min_rows=k + 2)
    truth = loaded.true_labels
    known = np.zeros(loaded.n_instances, dtype=bool) if truth is None else truth >= 0
    if truth is None or not known.any():
        raise InvalidInput(
            f"{data} has no true labels; simulate needs them to play the expert (add a true_label column)"
        )
    X, Y, y = loaded.X, loaded.candidates, truth
    if not known.all():
        _err.print(
            f"note: using the {int(known.sum())} of {loaded.n_instances} rows whose true label is known",
            highlight=False,
        )
        X, Y, y = X[known], Y[known], y[known]

    total = len(names) * seeds
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_err,
        transient=True,
    ) as bar:
        task = bar.add_task("simulating", total=total)

        def done(name: str, seed: int) -> None:
            bar.update(task, advance=1, description=f"{name} seed {seed}")

        results = simulate(
            X,
            Y,
            y,
            strategies=names,
            seeds=seeds,
            test_fraction=test_fraction,
            budget=budget,
            batch=batch,
            k=k,
            epsilon=epsilon,
            noise=noise,
            on_campaign_done=done,
            eval_k=eval_k,
            dst=dst,
            initial_labels=initial_labels,
            n_jobs=n_jobs,
        )
    path = write_table(results, output)
    _out.print(f"Wrote {len(results)} rows ({len(names)} strategies x {seeds} seeds) to {path}.")
    if plot is not None:
        plot_learning_curves(results, plot, title=f"{data.name}: PL-kNN test accuracy (mean ± std over {seeds} seeds)")
        _out.print(f"Wrote learning curves to {plot}.")

    area = learning_curve_area(results).groupby("strategy", sort=False)["area"].agg(["mean", "std"])
    final = results[results["step"] == results.groupby(["strategy", "seed"])["step"].transform("max")]
    final = final.groupby("strategy", sort=False)[["n_answers", "accuracy", "reject_rate", "open_targets"]].mean()
    # The strategy's own time: median per step (selection + updates) next to its one-off set-up.
    step_time = results[results["step"] > 0].groupby("strategy")["seconds_per_step"].median()
    setup_time = results[results["step"] == 0].groupby("strategy")["setup_seconds"].median()
    table = Table(
        "strategy",
        "area (mean acc.)",
        "final acc.",
        "final reject",
        "open targets left",
        "answers",
        "s/step",
        "set-up s",
    )
    for name in area.sort_values("mean", ascending=False).index:
        table.add_row(
            name,
            f"{area.loc[name, 'mean']:.3f} ± {np.nan_to_num(area.loc[name, 'std']):.3f}",
            f"{final.loc[name, 'accuracy']:.3f}",
            f"{final.loc[name, 'reject_rate']:.3f}",
            f"{final.loc[name, 'open_targets']:.0f}",
            f"{final.loc[name, 'n_answers']:.0f}",
            f"{step_time.get(name, float('nan')):.4f}",
            f"{setup_time.get(name, float('nan')):.4f}",
        )
    _out.print(table)
