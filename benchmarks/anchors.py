"""The anchors winnow's labelling loop is measured against (``benchmarks/labels_delivered.py``).

Both take one fixed pool of model labels with scores (higher: surer) and a uniform sample of it
whose right labels are known (the audits), and choose which of the other labels to hand back.

* :func:`conformal_labeling` — Huang et al. 2025 (arXiv:2510.14581), for the promise *on
  average*: a conformal p-value for each unaudited item from the audited items whose label was
  wrong, ``p_j = (1 + #{audited wrong i : s_i ≥ s_j}) / (n + 1)``, then Benjamini–Hochberg at
  the target; the expected share of wrong labels handed back is at most the target for a sample
  of fixed size read once.
* :func:`learn_then_test` — Angelopoulos et al. 2021 (arXiv:2110.01052) with the binomial tail
  p-value, for the promise *with confidence*: thresholds from the highest score down, each
  tested for "the share wrong above it is at least the target" by ``P(Bin(n, target) ≤ k)``
  on its ``n`` audited items, ``k`` of them wrong; fixed-sequence testing keeps the lowest
  threshold reached before the first that fails, at level ``1 − confidence``. The sequence
  starts at the first threshold with :func:`ltt_min_audits` audited items above it (which
  items were audited says nothing about their labels, so this choice keeps the test valid).

Neither is anytime-valid as used here (a single read of a sample of fixed size); they are the
ceiling a fixed-sample design reaches on the same state with as many audits.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import binom

__all__ = ["conformal_labeling", "learn_then_test", "uniform_audits", "ltt_min_audits"]


def ltt_min_audits(target: float, confidence: float) -> int:
    """Audits above the first threshold Learn then Test tries: ten more than the fewest that,
    all right, reject at the level (so one wrong label does not end the sequence at once).

    >>> ltt_min_audits(0.05, 0.9)
    55
    """
    return int(np.ceil(np.log(1.0 - confidence) / np.log(1.0 - target))) + 10


def uniform_audits(pool_size: int, n: int, seed: int) -> np.ndarray:
    """``n`` positions of a pool drawn uniformly without replacement."""
    return np.random.default_rng(seed).choice(pool_size, size=min(n, pool_size), replace=False)


def conformal_labeling(scores: np.ndarray, wrong: np.ndarray, audited: np.ndarray, target: float) -> np.ndarray:
    """The unaudited items handed back (bool mask over the pool).

    Parameters
    ----------
    scores : float array of shape (m,)
        The model's score of each label in the pool.
    wrong : bool array of shape (m,)
        Whether each label is wrong (read only on the audited items).
    audited : int array
        The audited positions (a uniform sample of the pool).
    target : float
        The false-discovery rate to keep.
    """
    m = scores.size
    out = np.zeros(m, dtype=bool)
    if audited.size == 0:
        return out
    test = np.setdiff1d(np.arange(m), audited)
    null_scores = np.sort(scores[audited][wrong[audited]])
    # #{audited wrong with a score at least the test item's}
    at_least = null_scores.size - np.searchsorted(null_scores, scores[test], side="left")
    p = (1.0 + at_least) / (audited.size + 1.0)
    order = np.argsort(p, kind="stable")
    passed = np.flatnonzero(p[order] <= target * np.arange(1, test.size + 1) / test.size)
    if passed.size:
        out[test[order[: passed[-1] + 1]]] = True
    return out


def learn_then_test(
    scores: np.ndarray, wrong: np.ndarray, audited: np.ndarray, target: float, confidence: float, grid: int = 40
) -> np.ndarray:
    """The unaudited items above the threshold Learn then Test certifies (bool mask over the pool)."""
    m = scores.size
    out = np.zeros(m, dtype=bool)
    if audited.size == 0:
        return out
    order = np.argsort(-scores, kind="stable")
    is_audited = np.zeros(m, dtype=bool)
    is_audited[audited] = True
    first = ltt_min_audits(target, confidence)
    # Thresholds: the pool's top 1/grid, 2/grid, … by score; tested from the top down.
    kept = 0
    for k in range(1, grid + 1):
        top = order[: int(np.ceil(k * m / grid))]
        sample = top[is_audited[top]]
        drawn = audited[np.isin(audited, sample)]  # a uniform sample of the items above it
        if drawn.size < first and k < grid:
            continue
        if binom.cdf(int(wrong[drawn].sum()), drawn.size, target) > 1.0 - confidence:
            break
        kept = top.size
    out[order[:kept]] = True
    out[audited] = False
    return out
