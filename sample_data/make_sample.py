"""Build winnow's bundled sample: 800 handwritten digits with partial (candidate-set) labels.

Run ``python sample_data/make_sample.py`` from the repository root; it rewrites
``sample_data/digits_partial.csv`` and ``sample_data/digits_partial.npz``. The output is
deterministic (fixed seed, no network: scikit-learn ships ``load_digits``).

Candidate-set generator (documented in ``sample_data/README.md``)
----------------------------------------------------------------
For every selected digit with true label ``y``:

1. With probability ``P_PARTIAL = 0.6`` the item is *partial*; otherwise its set is ``{y}``.
2. A partial item gets ``m`` false labels, ``m`` uniform on {1, 2, 3}.
3. The false labels are drawn without replacement from the nine other digits, each digit ``z``
   weighted ``CONFUSABLE_WEIGHT = 6`` when ``z`` is in ``CONFUSABLE[y]`` and 1 otherwise.
   ``CONFUSABLE`` is the hand-written table below (symmetric: look-alike digits of 8x8
   handwriting, e.g. 3-8-9, 1-7, 4-9, 5-6).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.datasets import load_digits

SEED = 20240611
N_ITEMS = 800
P_PARTIAL = 0.6
FALSE_LABEL_COUNTS = (1, 2, 3)
CONFUSABLE_WEIGHT = 6.0

_PAIRS = [(3, 8), (8, 9), (3, 9), (1, 7), (4, 9), (5, 6), (0, 6), (2, 7), (5, 9), (0, 8), (2, 3), (1, 8)]
CONFUSABLE: dict[int, tuple[int, ...]] = {
    digit: tuple(sorted({b for a, b in _PAIRS if a == digit} | {a for a, b in _PAIRS if b == digit}))
    for digit in range(10)
}

OUT_DIR = Path(__file__).resolve().parent
CSV_PATH = OUT_DIR / "digits_partial.csv"
NPZ_PATH = OUT_DIR / "digits_partial.npz"


def candidate_sets(y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Return a bool array of shape (n_items, 10): the candidate sets, each holding the true label."""
    Y = np.zeros((y.shape[0], 10), dtype=bool)
    Y[np.arange(y.shape[0]), y] = True
    for i, label in enumerate(y):
        if rng.random() >= P_PARTIAL:
            continue
        n_false = int(rng.choice(FALSE_LABEL_COUNTS))
        others = np.array([z for z in range(10) if z != label])
        weights = np.where(np.isin(others, CONFUSABLE[int(label)]), CONFUSABLE_WEIGHT, 1.0)
        false = rng.choice(others, size=n_false, replace=False, p=weights / weights.sum())
        Y[i, false] = True
    return Y


def build() -> pd.DataFrame:
    """The sample as a table: id, candidates, true_label, pixel_0 .. pixel_63."""
    rng = np.random.default_rng(SEED)
    digits = load_digits()
    chosen = np.sort(rng.choice(digits.target.shape[0], size=N_ITEMS, replace=False))
    X = digits.data[chosen].astype(np.int64)  # grey levels 0..16
    y = digits.target[chosen].astype(np.int64)
    Y = candidate_sets(y, rng)
    table = pd.DataFrame(X, columns=[f"pixel_{j}" for j in range(X.shape[1])])
    table.insert(0, "id", [f"d{i:04d}" for i in range(N_ITEMS)])
    table.insert(1, "candidates", ["|".join(str(z) for z in np.flatnonzero(row)) for row in Y])
    table.insert(2, "true_label", y)
    return table


def main() -> None:
    table = build()
    table.to_csv(CSV_PATH, index=False, lineterminator="\n")
    pixels = [c for c in table.columns if c.startswith("pixel_")]
    Y = np.zeros((len(table), 10), dtype=bool)
    for i, cell in enumerate(table["candidates"]):
        Y[i, [int(z) for z in cell.split("|")]] = True
    np.savez_compressed(
        NPZ_PATH,
        X=table[pixels].to_numpy(dtype=np.float64),
        candidates=Y,
        y=table["true_label"].to_numpy(dtype=np.int64),
        label_names=np.array([str(z) for z in range(10)]),
        ids=table["id"].to_numpy(dtype=str),
        feature_names=np.array(pixels),
        layout=np.array("image:8x8"),
    )
    sizes = Y.sum(axis=1)
    print(
        f"wrote {CSV_PATH.name} and {NPZ_PATH.name}: {len(table)} items, "
        f"{(sizes > 1).mean():.0%} partial, mean set size {sizes.mean():.2f}"
    )


if __name__ == "__main__":
    main()
