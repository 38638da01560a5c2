"""Throughput of DST-PLL: the engine's kernel against the literal dict reference and k-NN.

Prints one table. Columns:

* ``combine/s``: instances per second of the evidence combination alone (same neighbour
  indices for both implementations), engine and dict reference, and their ratio;
* ``predict ms``: ``DstPllClassifier.predict`` on the test rows, and
  ``KNeighborsClassifier.predict`` (scikit-learn, same k, same data, true labels) — the
  ratio shows how much the combination adds to the neighbour search;
* accuracy of all predictions, fraction accepted, accuracy of the accepted ones.

Run: ``.venv/bin/python -m benchmarks.bench_dst`` from the repository root.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import scipy.io
from sklearn.neighbors import KNeighborsClassifier, NearestNeighbors

from engine.dst import DstPllClassifier, predict_from_neighbors
from tests.engine import dst_reference as ref

DATA = Path("/work/shared/data/pll")
K = 10


def synthetic(n_train=5000, n_test=1000, d=30, n_labels=10, seed=0):
    """Gaussian clusters, one per label; candidate sets = true label + each other w.p. 0.15."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=0.7, size=(n_labels, d))
    y = rng.integers(0, n_labels, n_train + n_test)
    X = centres[y] + rng.normal(size=(y.size, d))
    Y = rng.random((y.size, n_labels)) < 0.15
    Y[np.arange(y.size), y] = True
    return X[:n_train], Y[:n_train], y[:n_train], X[n_train:], y[n_train:]


def mat_dataset(name, seed=0):
    """80/20 split, min-max scaling fitted on the training part (as in the paper)."""
    raw = scipy.io.loadmat(DATA / name)
    dense = lambda a: a.toarray() if hasattr(a, "toarray") else np.asarray(a)  # noqa: E731
    X = dense(raw["data"]).astype(np.float64)
    Y = dense(raw["partial_target"]).T.astype(bool)
    y = dense(raw["target"]).T.argmax(axis=1)
    order = np.random.default_rng(seed).permutation(X.shape[0])
    cut = int(0.8 * X.shape[0])
    tr, te = order[:cut], order[cut:]
    lo, hi = X[tr].min(axis=0), X[tr].max(axis=0)
    scale = np.where(hi > lo, hi - lo, 1.0)
    return (X[tr] - lo) / scale, Y[tr], y[tr], (X[te] - lo) / scale, y[te]


def best_of(fn, repeat=3):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def reference_combine(Y, idx, rows):
    n_labels = Y.shape[1]
    universe = frozenset(range(n_labels))
    sets = [frozenset(np.flatnonzero(r).tolist()) for r in Y]
    draws = np.random.default_rng(0).random((len(rows), 2))
    for i, row in enumerate(rows):
        mass = ref.instance_mass(universe, [sets[j] for j in idx[row]])
        ref.belief_plausibility(mass, n_labels)
        ref.decide(mass, n_labels, draws[i])


def bench(name, Xtr, Ytr, ytr, Xte, yte):
    n_labels = Ytr.shape[1]
    idx = NearestNeighbors(n_neighbors=K).fit(Xtr).kneighbors(Xte, return_distance=False)
    t_fast, _ = best_of(lambda: predict_from_neighbors(Ytr, idx, random_state=0), repeat=7)
    n_ref = min(300, Xte.shape[0])
    t_ref, _ = best_of(lambda: reference_combine(Ytr, idx, range(n_ref)), repeat=3)
    fast_rate, ref_rate = Xte.shape[0] / t_fast, n_ref / t_ref

    clf = DstPllClassifier(n_neighbors=K, random_state=0).fit(Xtr, Ytr)
    t_pred, (labels, accepted) = best_of(lambda: clf.predict_with_reject(Xte), repeat=5)
    knn = KNeighborsClassifier(n_neighbors=K).fit(Xtr, ytr)
    t_knn, _ = best_of(lambda: knn.predict(Xte), repeat=5)
    t_fit, _ = best_of(lambda: DstPllClassifier(n_neighbors=K, random_state=0).fit(Xtr, Ytr), repeat=1)

    correct = labels == yte
    acc_accepted = correct[accepted].mean() if accepted.any() else float("nan")
    return (
        f"| {name} | {Xtr.shape[0]}/{Xte.shape[0]} | {Xtr.shape[1]} | {n_labels} | {fast_rate:,.0f} | {ref_rate:,.0f} "
        f"| {fast_rate / ref_rate:,.0f}x | {1e3 * t_pred:.1f} | {1e3 * t_knn:.1f} | {t_pred / t_knn:.2f} "
        f"| {1e3 * t_fit:.1f} | {correct.mean():.3f} | {accepted.mean():.3f} | {acc_accepted:.3f} |"
    )


def main():
    print(f"DST-PLL, k = {K}; wall-clock best of 3-7 runs; the dict reference runs on the first 300 test rows\n")
    print(
        "| data | train/test | d | M | engine combine/s | dict ref combine/s | speed-up | DST predict ms "
        "| sklearn kNN predict ms | ratio | DST fit ms | accuracy | accepted | accepted accuracy |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print(bench("synthetic", *synthetic()))
    for name in ("lost.mat", "MSRCv2.mat", "BirdSong.mat", "FG-NET.mat"):
        if (DATA / name).exists():
            print(bench(name.removesuffix(".mat"), *mat_dataset(name)))


if __name__ == "__main__":
    main()
