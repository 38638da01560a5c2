"""Model labels delivered under a promise that holds whenever the user looks (issue 28).

Every campaign is :func:`benchmarks.replay_lots.replay`: the loop a session runs
(:mod:`engine.labelling_loop`), a simulated expert who is always right, and the statement read
after **every** answer. Two tables:

* **Validity** (``--validity``): for each data set, query order and promise, many seeded
  campaigns of ``--budget`` answers. Reported: the share of campaigns in which some read showed
  delivered labels more than the target wrong (the promise *with confidence* allows at most
  ``1 − confidence`` of them), the same share given that something was stated, and the mean
  share of wrong delivered labels when the person exports at the first statement and at the end
  (the promise *on average* bounds these means by the target; 0 when nothing is delivered).
* **Yield** (``--yield``): per budget (0, 100, 200, 500, 1,000 answers), the labels stated (and
  how many of them are model labels), their true error, the **anchor** of the promise on the
  same state with as many uniform audits (Learn then Test with a binomial test for *with
  confidence*, Conformal Labeling for *on average*: ``benchmarks.anchors``), the *ceiling* (the
  most open items a threshold on the lot score, chosen with the truth, keeps at ≤ target error)
  and the audits spent.

Data: ``sample`` (the bundled ``sample_data/digits_partial.npz``), the digits protocols of
``docs/results_strategy.md`` (800 rows of scikit-learn's digits; the noisy-expert one left out,
since audits assume a right expert), the real sets of ``../shared/data/pll`` (in full: BirdSong's
4,998 items included), and ``synthetic2k`` / ``synthetic50k``
(``benchmarks.synthetic.clustered_problem``: 2,000 or 50,000 items, 20 labels, 60 % partial,
one item in five labelled off its cluster's label, so model labels are wrong often enough to
test the promise). Features are min-max scaled; k = 10 uniform neighbours, no item its own.

Run (not part of ``make test``; two processes)::

    python -m benchmarks.labels_delivered --validity --sets sample lost MSRCv2 --seeds 200 --budget 300
    python -m benchmarks.labels_delivered --yield --sets sample BirdSong synthetic50k --seeds 1
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402 - after the thread limits, which must precede numpy
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from functools import cache  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from benchmarks.replay_lots import Pool, Reads, replay  # noqa: E402
from engine.labelling_loop import LoopSettings  # noqa: E402
from engine.neighbors import knn_graph  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PLL_DIR = ROOT.parent / "shared" / "data" / "pll"
REAL_SETS = ("lost", "MSRCv2", "BirdSong", "FG-NET")
ORDERS = ("default", "apl", "pl", "participation", "most_partial", "random", "easy_first")
PROMISES = ("confidence", "average")
BUDGETS = (0, 100, 200, 500, 1000)
TARGET = 0.05
K = 10


def _minmax(X: np.ndarray) -> np.ndarray:
    low, high = X.min(axis=0), X.max(axis=0)
    return (X - low) / np.where(high > low, high - low, 1.0)


def _with_graph(X: np.ndarray, Y: np.ndarray, truth: np.ndarray) -> Pool:
    X = _minmax(np.asarray(X, dtype=np.float64))
    idx, w = knn_graph(X, k=K)
    return Pool(X, np.asarray(Y, dtype=bool), np.asarray(truth), idx, w)


def _loaders() -> dict[str, Callable[[], Pool]]:
    def sample() -> Pool:
        data = np.load(ROOT / "sample_data" / "digits_partial.npz", allow_pickle=True)
        return _with_graph(data["X"], data["candidates"], data["y"])

    def real(name: str) -> Callable[[], Pool]:
        def load() -> Pool:
            from app.io import read_dataset

            data = read_dataset(PLL_DIR / f"{name}.mat")
            return _with_graph(data.X, data.candidates, data.true_labels)

        return load

    def synthetic(n: int) -> Callable[[], Pool]:
        def load() -> Pool:
            from benchmarks.synthetic import clustered_problem

            idx, w, Y, truth = clustered_problem(n, k=K, n_labels=20, partial_rate=0.6, seed=0)
            return Pool(np.zeros((Y.shape[0], 1)), Y, truth, idx, w)

        return load

    out: dict[str, Callable[[], Pool]] = {"sample": sample}
    out.update({name: real(name) for name in REAL_SETS})
    out["synthetic2k"] = synthetic(2_000)
    out["synthetic50k"] = synthetic(50_000)
    try:
        from benchmarks.compare_peers import all_settings

        for setting in all_settings():
            if setting.name.startswith("digits") and "ε=0.1" not in setting.name:
                out[setting.name] = lambda s=setting: _with_graph(*s.load())
    except ImportError:  # pragma: no cover - scikit-learn's digits are always there
        pass
    return out


@cache
def _pool(name: str) -> Pool:
    return _loaders()[name]()


def pool_by_name(name: str) -> Pool:
    """One of the data sets above by name (``sample``, ``BirdSong``, ``digits · crowd of 3``, …),
    loaded once per process."""
    if name not in _loaders():
        raise ValueError(f"pool_by_name: unknown data set {name!r}; choose one of {sorted(_loaders())}")
    return _pool(name)


def sample_pool() -> Pool:
    """The bundled sample (``sample_data/digits_partial.npz``) with its graph, loaded once per process."""
    return _pool("sample")


def _run(task: tuple[str, str, str, str, int, int, int]) -> dict:
    name, order, promise, player, seed, budget, anchors_every = task
    settings = LoopSettings(max_error=TARGET, promise=promise)
    start = time.perf_counter()
    at = BUDGETS if budget >= max(BUDGETS) else ()
    reads = replay(
        _pool(name),
        order,
        seed=seed,
        budget=budget,
        settings=settings,
        ceiling_at=at,
        player=player,
        anchors_every=anchors_every,
    )
    delivered = np.asarray(reads.stated)
    error = reads.error
    stated = np.flatnonzero(delivered > 0)
    first = int(stated[0]) if stated.size else -1
    row = {
        "set": name,
        "order": order,
        "promise": promise,
        "seed": seed,
        "answers": len(delivered) - 1,
        "seconds": time.perf_counter() - start,
        "first_statement": first,
        "broken_any_read": reads.broken(TARGET),
        "player": player,
        "fdp_first_statement": float(error[first]) if first >= 0 else 0.0,
        "fdp_end": float(error[-1]),
        "fdp_max": float(error.max()),
        "withdrawn": int(np.sum(reads.withdrawn)),
    }
    if anchors_every:
        row.update(anchor_read_figures(reads, promise))
    for b in BUDGETS:
        at = min(b, len(delivered) - 1)
        row[f"delivered_{b}"] = int(delivered[at])
        row[f"model_labels_{b}"] = int(reads.model_labels[at])
        row[f"true_error_{b}"] = float(error[at])
        row[f"audits_{b}"] = int(reads.audits[at])
        row[f"ceiling_{b}"] = reads.ceiling.get(b, np.nan)
        # The anchor of this promise, on the same state with as many uniform audits.
        anchor = (reads.ltt if promise == "confidence" else reads.conformal).get(b, (np.nan, np.nan))
        row[f"anchor_{b}"] = anchor[0]
        row[f"anchor_error_{b}"] = anchor[1] / anchor[0] if anchor[0] else 0.0
    return row


def anchor_read_figures(reads: Reads, promise: str) -> dict:
    """The promise's anchor read every few answers, as the loop's statement is: when it first
    hands labels back, how wrong they are then and at its worst read, whether some read breaks
    the target, and the labels it withdraws (handed back at one read, not at the next, while
    nobody has answered them)."""
    name = "ltt" if promise == "confidence" else "conformal"
    fdp, withdrawn, withdrawing = [], 0, 0
    before = np.zeros(0, dtype=np.int64)
    for _, open_items, choices in reads.anchor_reads:
        items, wrong = choices[name]
        fdp.append(float(wrong.sum()) / items.size if items.size else 0.0)
        gone = np.setdiff1d(np.intersect1d(before, open_items), items).size
        withdrawn += gone
        withdrawing += gone > 0
        before = items
    fdp_read = np.asarray(fdp)
    stated_at = [j for j, (_, _, choices) in enumerate(reads.anchor_reads) if choices[name][0].size]
    return {
        "anchor_first_statement": reads.anchor_reads[stated_at[0]][0] if stated_at else -1,
        "anchor_fdp_first_statement": float(fdp_read[stated_at[0]]) if stated_at else 0.0,
        "anchor_fdp_max": float(fdp_read.max(initial=0.0)),
        "anchor_broken_any_read": bool((fdp_read > TARGET + 1e-12).any()),
        "anchor_withdrawn": withdrawn,
        "anchor_withdrawing_reads": withdrawing,
    }


def anchor_reads_table(df: pd.DataFrame, every: int) -> list[str]:
    out = [
        f"| set | promise | runs | loop: stated | loop: broken at some read | loop: mean FDP at first statement "
        f"| loop: labels withdrawn | anchor read every {every}: stated | anchor: broken at some read "
        f"| anchor: mean FDP at first statement | anchor: mean of the worst read's FDP "
        f"| anchor: campaigns withdrawing | anchor: labels withdrawn a campaign |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (name, promise), g in df.groupby(["set", "promise"], sort=False):
        out.append(
            f"| {name} | {promise} | {len(g)} | {(g['first_statement'] >= 0).mean():.0%} "
            f"| {g['broken_any_read'].mean():.1%} | {g['fdp_first_statement'].mean():.2%} | {g['withdrawn'].sum()} "
            f"| {(g['anchor_first_statement'] >= 0).mean():.0%} | {g['anchor_broken_any_read'].mean():.1%} "
            f"| {g['anchor_fdp_first_statement'].mean():.2%} | {g['anchor_fdp_max'].mean():.2%} "
            f"| {(g['anchor_withdrawn'] > 0).mean():.0%} | {g['anchor_withdrawn'].mean():.0f} |"
        )
    return out


def validity_table(df: pd.DataFrame) -> list[str]:
    out = [
        "| set | order · player | promise | runs | stated | broken at some read | broken, given stated "
        "| mean FDP, export at first statement | mean FDP at the end | mean of the worst read's FDP |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (name, order, promise, player), g in df.groupby(["set", "order", "promise", "player"], sort=False):
        stated = g["first_statement"] >= 0
        given = f"{g.loc[stated, 'broken_any_read'].mean():.1%}" if stated.any() else "–"
        out.append(
            f"| {name} | {order} · {player} | {promise} | {len(g)} | {stated.mean():.0%} "
            f"| {g['broken_any_read'].mean():.1%} | {given} | {g['fdp_first_statement'].mean():.2%} "
            f"| {g['fdp_end'].mean():.2%} | {g['fdp_max'].mean():.2%} |"
        )
    return out


def yield_table(df: pd.DataFrame) -> list[str]:
    out = [
        "| set | promise | answers | stated (model labels) | true error | anchor | anchor's true error "
        "| ceiling | stated / ceiling | audits spent |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (name, promise), g in df.groupby(["set", "promise"], sort=False):
        for b in BUDGETS:
            if b > g["answers"].max():
                continue
            delivered, ceiling = g[f"delivered_{b}"].mean(), g[f"ceiling_{b}"].mean()
            share = f"{delivered / ceiling:.0%}" if ceiling > 0 else "–"
            out.append(
                f"| {name} | {promise} | {b} | {delivered:.0f} ({g[f'model_labels_{b}'].mean():.0f}) "
                f"| {g[f'true_error_{b}'].mean():.2%} | {g[f'anchor_{b}'].mean():.0f} "
                f"| {g[f'anchor_error_{b}'].mean():.2%} | {ceiling:.0f} | {share} | {g[f'audits_{b}'].mean():.0f} |"
            )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--validity", action="store_true", help="many seeds, every order, both promises")
    parser.add_argument("--yield", dest="yield_", action="store_true", help="labels per budget, default order")
    parser.add_argument("--sets", nargs="+", default=["sample"], help="data sets (sample, lost, BirdSong, ...)")
    parser.add_argument("--orders", nargs="+", default=list(ORDERS))
    parser.add_argument("--promises", nargs="+", default=list(PROMISES))
    parser.add_argument("--players", nargs="+", default=["honest"], help="honest, skipper, prober")
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--first-seed", type=int, default=0, help="seeds run from here (to extend an earlier run)")
    parser.add_argument("--budget", type=int, default=300)
    parser.add_argument(
        "--anchor-reads",
        type=int,
        default=0,
        metavar="N",
        help="with --validity: also read the promise's anchor every N answers (labels it withdraws, its worst read)",
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--csv", type=Path, default=None, help="write every campaign's row here")
    args = parser.parse_args(argv)
    known = _loaders()
    missing = [name for name in args.sets if name not in known or (name in REAL_SETS and not PLL_DIR.is_dir())]
    if missing:
        print(f"error: unknown or missing data set(s): {', '.join(missing)}", file=sys.stderr)
        return 2
    orders = args.orders if args.validity else ["default"]
    budget = args.budget if args.validity else max(BUDGETS)
    tasks = [
        (name, order, promise, player, seed, budget, args.anchor_reads if args.validity else 0)
        for name in args.sets
        for order in orders
        for promise in args.promises
        for player in (args.players if args.validity else ["honest"])
        for seed in range(args.first_seed, args.first_seed + args.seeds)
    ]
    start = time.perf_counter()
    rows = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for row in pool.map(_run, tasks, chunksize=max(1, min(4, len(tasks) // (8 * args.jobs)))):
            rows.append(row)
            # Rewritten as campaigns finish, so that a run cut short still leaves its rows.
            if args.csv and (len(rows) % 20 == 0 or len(rows) == len(tasks)):
                pd.DataFrame(rows).to_csv(args.csv, index=False)
    df = pd.DataFrame(rows)
    lines = [f"{len(df)} campaigns, {time.perf_counter() - start:.0f} s wall, target {TARGET:.0%}"]
    lines += validity_table(df) if args.validity else yield_table(df)
    if args.validity and args.anchor_reads:
        lines += ["", *anchor_reads_table(df, args.anchor_reads)]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
