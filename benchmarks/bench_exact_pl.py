"""Exact possible labels at 20,000 targets: staged pipeline against two baselines.

Synthetic problem (seeded): 20,000 training rows in clusters of 50 whose true labels follow a
Zipf-like skew over M = 10 labels (80% of a cluster shares its label); 40% of the rows are
partial, the true label plus 1-3 false labels drawn from the same skew (frequent labels are
the usual confusions). Each of the 20,000 targets takes K = 10 distinct neighbours, 8 from
one cluster and 2 from anywhere, with random float weights in [0.1, 1) sorted decreasingly
as distance weights would be.

Printed table (wall-clock seconds on this machine; the ratio column travels better):

* ``staged``: ``possible_labels(method="auto")`` on all targets -- bounds, greedy, then
  flow / CP-SAT / enumeration on what is left -- with counts per decision path;
* ``cpsat-only``: every pair not decided by the bounds goes straight to CP-SAT on the
  unreduced instance (no greedy, no free-label reduction). Timed on a random subset of those
  pairs and **extrapolated** linearly to all of them;
* ``brute force``: enumerate every completion of a target with numpy (neighbour-order sums),
  timed on a random subset of targets and **extrapolated**; its answers are checked against
  the staged ones on that subset.

Run: ``.venv/bin/python benchmarks/bench_exact_pl.py`` (or ``-m benchmarks.bench_exact_pl``)
from the repository root; about a minute.
"""

from __future__ import annotations

import itertools
import time

import numpy as np

from engine.winners import label_sets, possible_by_cpsat_alone, possible_labels, vote_bounds

N_TARGETS = 20_000
K = 10
N_LABELS = 10
CPSAT_SUBSET = 2_000
BRUTE_SUBSET = 4_000


def skewed_problem(
    n_targets: int,
    *,
    k: int,
    n_labels: int,
    n_train: int = 20_000,
    partial_rate: float = 0.4,
    cluster_size: int = 50,
    seed: int = 0,
):
    """(idx, w, Y) of a clustered problem with Zipf-like label skew and partial rows."""
    rng = np.random.default_rng(seed)
    prior = 1.0 / np.arange(1, n_labels + 1)
    prior /= prior.sum()
    n_clusters = n_train // cluster_size
    cluster = np.arange(n_train) // cluster_size
    cluster_label = rng.choice(n_labels, size=n_clusters, p=prior)
    true = np.where(rng.random(n_train) < 0.8, cluster_label[cluster], rng.choice(n_labels, size=n_train, p=prior))
    Y = np.zeros((n_train, n_labels), dtype=bool)
    Y[np.arange(n_train), true] = True
    for i in np.flatnonzero(rng.random(n_train) < partial_rate):
        extra = rng.integers(1, 4)
        others = np.delete(np.arange(n_labels), true[i])
        p = np.delete(prior, true[i])
        Y[i, rng.choice(others, size=extra, replace=False, p=p / p.sum())] = True
    home = rng.integers(0, n_clusters, size=n_targets)
    local = np.argsort(rng.random((n_targets, cluster_size)), axis=1)[:, : k - 2] + home[:, None] * cluster_size
    far = rng.integers(0, n_train, size=(n_targets, 2))
    idx = np.concatenate([local, far], axis=1).astype(np.intp)
    w = -np.sort(-rng.uniform(0.1, 1.0, size=(n_targets, k)), axis=1)
    return idx, w, Y


def brute_force_row(idx_row: np.ndarray, w_row: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Possible labels of one target by enumerating every completion (numpy per target)."""
    choices = [np.flatnonzero(Y[i]) for i in idx_row]
    comps = np.array(list(itertools.product(*choices)), dtype=np.intp)
    totals = np.zeros((comps.shape[0], Y.shape[1]))
    rows = np.arange(comps.shape[0])
    for j in range(comps.shape[1]):  # neighbour order, as everywhere else
        totals[rows, comps[:, j]] += w_row[j]
    return (totals == totals.max(axis=1, keepdims=True)).any(axis=0)


def main() -> None:
    idx, w, Y = skewed_problem(N_TARGETS, k=K, n_labels=N_LABELS)
    rng = np.random.default_rng(1)
    n_pairs = N_TARGETS * N_LABELS
    print(f"# exact PL: {N_TARGETS} targets, K={K}, M={N_LABELS}, {n_pairs} (target, label) pairs")
    print(
        f"# partial rows: {(Y.sum(1) > 1).mean():.0%}, completions per target: median "
        f"{int(np.median(np.prod(Y[idx].sum(2), axis=1)))}, max {int(np.prod(Y[idx].sum(2), axis=1).max())}"
    )

    start = time.perf_counter()
    possible, stats = possible_labels(idx, w, Y, method="auto", return_stats=True)
    staged = time.perf_counter() - start

    _, smax = vote_bounds(idx, w, Y)
    nl, apl = label_sets(idx, w, Y)
    open_t, open_l = np.nonzero(apl & ~nl)
    pick = rng.choice(open_t.size, size=min(CPSAT_SUBSET, open_t.size), replace=False)
    start = time.perf_counter()
    for p in pick:
        t, lam = int(open_t[p]), int(open_l[p])
        found = possible_by_cpsat_alone(idx[t], w[t], Y, lam, time_limit=10.0)
        assert found == possible[t, lam], f"CP-SAT baseline disagrees at target {t}, label {lam}"
    cpsat_sample = time.perf_counter() - start
    cpsat_total = cpsat_sample / max(pick.size, 1) * open_t.size

    targets = rng.choice(N_TARGETS, size=BRUTE_SUBSET, replace=False)
    start = time.perf_counter()
    for t in targets:
        got = brute_force_row(idx[t], w[t], Y)
        assert (got == possible[t]).all(), f"brute force disagrees at target {t}"
    brute_sample = time.perf_counter() - start
    brute_total = brute_sample / BRUTE_SUBSET * N_TARGETS

    counts = {key: stats[key] for key in ("bounds", "greedy", "flow", "cpsat", "enumeration")}
    print("\n| method | seconds | vs staged | decided by |")
    print("|---|---|---|---|")
    print(
        f"| staged (bounds → greedy → flow/CP-SAT) | {staged:.2f} | 1.0 | "
        + ", ".join(f"{k} {v}" for k, v in counts.items())
        + f"; solver {stats['solver_seconds']:.2f} s |"
    )
    print(
        f"| CP-SAT on every pair open after bounds (extrapolated from {pick.size} of {open_t.size} pairs, "
        f"{cpsat_sample:.2f} s) | {cpsat_total:.1f} | {cpsat_total / staged:.1f} | bounds {n_pairs - open_t.size}, "
        f"cpsat {open_t.size} |"
    )
    print(
        f"| brute-force enumeration (extrapolated from {BRUTE_SUBSET} targets, {brute_sample:.2f} s) | "
        f"{brute_total:.1f} | {brute_total / staged:.1f} | all {n_pairs} |"
    )
    print(
        f"\n# possible labels per target: mean {possible.sum(1).mean():.2f}; ambiguous targets "
        f"(NL ≠ PL): {(nl != possible).any(1).mean():.1%}; PL ≠ APL pairs: {int((apl & ~possible).sum())}"
    )


if __name__ == "__main__":
    main()
