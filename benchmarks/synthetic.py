"""Synthetic partially labelled problems for the benchmarks (seeded, no files).

Instances live in clusters; a cluster's members mostly share one true label (80%), the rest
are uniform. A fraction of the rows are partial: the true label plus 1-3 false labels.
Neighbourhoods are drawn inside the cluster, which is what a k-NN graph on clustered data
looks like, without paying for the search when only the vote kernels are measured.
"""

from __future__ import annotations

import numpy as np


def partial_candidates(
    true_labels: np.ndarray,
    n_labels: int,
    *,
    partial_rate: float,
    rng: np.random.Generator,
    min_size: int = 2,
    max_size: int = 4,
) -> np.ndarray:
    n = true_labels.shape[0]
    Y = np.zeros((n, n_labels), dtype=bool)
    Y[np.arange(n), true_labels] = True
    partial = np.flatnonzero(rng.random(n) < partial_rate)
    sizes = rng.integers(min_size, max_size + 1, size=partial.size)
    # Random keys per label; the true label gets −1 so it is never drawn as a false label.
    keys = rng.random((partial.size, n_labels))
    keys[np.arange(partial.size), true_labels[partial]] = -1.0
    order = np.argsort(-keys, axis=1)
    for extra in range(max_size - 1):
        take = sizes - 1 > extra
        Y[partial[take], order[take, extra]] = True
    return Y


def clustered_problem(
    n: int,
    *,
    k: int = 10,
    n_labels: int = 20,
    partial_rate: float = 0.3,
    cluster_size: int = 50,
    seed: int = 0,
    weights: str = "uniform",
):
    """(idx, w, Y, true_labels) with every instance a target, itself excluded."""
    rng = np.random.default_rng(seed)
    cluster = np.arange(n) // cluster_size
    n_clusters = cluster[-1] + 1
    cluster_label = rng.integers(0, n_labels, size=n_clusters)
    true_labels = np.where(rng.random(n) < 0.8, cluster_label[cluster], rng.integers(0, n_labels, size=n))
    Y = partial_candidates(true_labels, n_labels, partial_rate=partial_rate, rng=rng)
    start = cluster * cluster_size
    size = np.minimum(cluster_size, n - start)
    # k distinct other members of the same cluster: shift by 1..size-1 without repetition.
    shifts = np.stack([rng.permutation(cluster_size - 1)[:k] + 1 for _ in range(1)]).repeat(n, axis=0)
    shifts = (shifts + rng.integers(0, cluster_size, size=(n, 1))) % (cluster_size - 1) + 1
    idx = start[:, None] + (np.arange(n)[:, None] - start[:, None] + shifts) % size[:, None]
    w = np.ones((n, k)) if weights == "uniform" else rng.uniform(0.1, 1.0, size=(n, k))
    return idx.astype(np.intp), w, Y, true_labels
