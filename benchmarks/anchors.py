"""The anchors winnow's labelling loop is measured against (``benchmarks/labels_delivered.py``).

Both take one fixed pool of model labels with scores (higher: surer) and a uniform sample of it
whose right labels are known (the audits), and choose which of the other labels to hand back.

* :func:`conformal_labeling` — Huang et al. 2025 (arXiv:2510.14581), for the promise *on
  average*: a conformal p-value for each unaudited item from the audited items whose label was
  wrong, ``p_j = (1 + #{audited wrong i : s_i ≥ s_j}) / (n + 1)``, then Benjamini–Hochberg at
  the target; the expected share of wrong labels handed back is at most the target for a sample
  of fixed size read once.
* :func:`learn_then_test` — Angelopoulos et al. 2021 (arXiv:2110.01052) with a betting test
  (Waudby-Smith and Ramdas 2024), for the promise *with confidence*: thresholds from the highest
  score down, each tested by a betting e-process on the audited items above it for "the share
  wrong above it is at least the target"; fixed-sequence testing keeps the lowest threshold
  reached before the first that fails, at level ``1 − confidence``. The sequence starts at the
  first threshold with at least :data:`LTT_MIN_AUDITS` audited items above it (which items were
  audited says nothing about their labels, so this choice keeps the test valid).

Neither is anytime-valid as used here (a single read of a sample of fixed size); they are the
ceiling a fixed-sample design reaches on the same state with as many audits.
"""

from __future__ import annotations

import numpy as np

__all__ = ["conformal_labeling", "learn_then_test", "uniform_audits", "LTT_MIN_AUDITS"]

#: Learn then Test starts at the first threshold with this many audited items above it.
LTT_MIN_AUDITS = 30


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


def _betting_rejects(x: np.ndarray, target: float, alpha: float) -> bool:
    """Whether a betting e-process on the 0/1 outcomes ``x`` (1 wrong) rejects "mean ≥ target"
    at level ``alpha``: capital ``Π (1 + λ_i (target − x_i))`` with a predictable plug-in bet."""
    capital, wrong, n = 1.0, 0.0, 0
    for xi in x:
        mean = (wrong + 0.5) / (n + 1.0)
        bet = min(max((target - mean) / max(mean * (1 - mean), 1e-6), 0.0), 0.99 / target)
        capital *= 1.0 + bet * (target - xi)
        if capital >= 1.0 / alpha:
            return True
        wrong, n = wrong + xi, n + 1
    return False


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
    # Thresholds: the pool's top 1/grid, 2/grid, … by score; tested from the top down.
    kept = 0
    for k in range(1, grid + 1):
        top = order[: int(np.ceil(k * m / grid))]
        sample = top[is_audited[top]]
        # The audits above a threshold, in the order they were drawn, are a uniform sample of it.
        drawn = audited[np.isin(audited, sample)]
        if drawn.size < LTT_MIN_AUDITS and k < grid:
            continue
        if not _betting_rejects(wrong[drawn].astype(float), target, 1.0 - confidence):
            break
        kept = top.size
    out[order[:kept]] = True
    out[audited] = False
    return out
