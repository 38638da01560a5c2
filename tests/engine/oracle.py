"""Brute-force oracle: enumerate every completion of a target's neighbourhood.

Deliberately naive and independent of the engine's kernels; only for tiny inputs.
Totals are summed in neighbour order, as the engine does, so float ties agree bit for bit.
"""

from __future__ import annotations

import itertools

import numpy as np


def completions(candidate_rows: np.ndarray):
    """Every choice of one label per neighbour: yields tuples of length k."""
    choices = [np.flatnonzero(row).tolist() for row in candidate_rows]
    return itertools.product(*choices)


def winners(completion, weights, n_labels: int) -> set[int]:
    totals = [0.0] * n_labels
    for label, weight in zip(completion, weights, strict=True):
        totals[label] += float(weight)
    best = max(totals)
    return {label for label in range(n_labels) if totals[label] == best}


def label_sets(candidate_rows: np.ndarray, weights: np.ndarray) -> tuple[set[int], set[int]]:
    """(necessary, possible) labels of one target by enumeration."""
    n_labels = candidate_rows.shape[1]
    necessary = set(range(n_labels))
    possible: set[int] = set()
    for completion in completions(candidate_rows):
        won = winners(completion, weights, n_labels)
        necessary &= won
        possible |= won
    return necessary, possible


def approx_possible_set(candidate_rows: np.ndarray, weights: np.ndarray) -> set[int]:
    """APL straight from its definition with Smin/Smax summed naively."""
    n_labels = candidate_rows.shape[1]
    sizes = candidate_rows.sum(axis=1)
    smin = [
        sum(float(w) for row, s, w in zip(candidate_rows, sizes, weights, strict=True) if s == 1 and row[m])
        for m in range(n_labels)
    ]
    smax = [sum(float(w) for row, w in zip(candidate_rows, weights, strict=True) if row[m]) for m in range(n_labels)]
    return {m for m in range(n_labels) if all(smax[m] >= smin[o] for o in range(n_labels) if o != m)}


def all_label_sets(idx: np.ndarray, w: np.ndarray, Y: np.ndarray):
    """NL, PL, APL as bool arrays (n_targets, n_labels) by enumeration."""
    n_targets, n_labels = idx.shape[0], Y.shape[1]
    nl = np.zeros((n_targets, n_labels), bool)
    pl = np.zeros((n_targets, n_labels), bool)
    apl = np.zeros((n_targets, n_labels), bool)
    for t in range(n_targets):
        rows = Y[idx[t]]
        nec, pos = label_sets(rows, w[t])
        nl[t, list(nec)] = True
        pl[t, list(pos)] = True
        apl[t, list(approx_possible_set(rows, w[t]))] = True
    return nl, pl, apl


def query_scores(idx: np.ndarray, w: np.ndarray, Y: np.ndarray, criterion: str) -> np.ndarray:
    """Nguyen et al. eq. 4: for each instance, the number of targets whose NL or APL/PL some answer changes."""
    nl, pl, apl = all_label_sets(idx, w, Y)
    other = apl if criterion == "apl" else pl
    scores = np.zeros(Y.shape[0])
    for n in range(Y.shape[0]):
        labels = np.flatnonzero(Y[n])
        if len(labels) < 2:
            continue
        for t in range(idx.shape[0]):
            if n not in idx[t]:
                continue
            changed = False
            for lam in labels:
                Yq = Y.copy()
                Yq[n] = False
                Yq[n, lam] = True
                rows = Yq[idx[t]]
                nec, pos = label_sets(rows, w[t])
                alt = approx_possible_set(rows, w[t]) if criterion == "apl" else pos
                if set(np.flatnonzero(nl[t])) != nec or set(np.flatnonzero(other[t])) != alt:
                    changed = True
                    break
            scores[n] += changed
    return scores
