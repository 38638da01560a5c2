"""Literal reference implementation of DST-PLL, for tests and the benchmark only.

Follows Fuchs, Kalinke & Böhm (TMLR 2025), Algorithm 1, step by step, with a dict of
frozensets per instance and no vectorisation. Deliberately slow and obviously correct; the
engine's kernel (``engine.dst``) is checked against it.

Random tie-breaking follows the same protocol as the engine so that seeded predictions
agree row for row: one call ``rng.random((n_rows, 2))`` per batch; row ``i`` uses
``u = draws[i]``. Tied singleton labels (ascending) take index ``int(u[0] * n_tied)``; when
no singleton has mass, the tied focal sets (ordered by ``sum(2**label)``) take index
``int(u[0] * n_sets)`` and the label inside the chosen set (ascending) ``int(u[1] * size)``.
"""

from __future__ import annotations

import numpy as np
from sklearn.neighbors import NearestNeighbors

PRUNE_BELOW = 1e-10


def neighbour_mass(own: frozenset, neighbour: frozenset) -> dict[frozenset, float] | None:
    """Algorithm 1, lines 3-7: the bpa a neighbour contributes, or None when it is skipped."""
    common = own & neighbour
    if len(common) == 0 or common == own:
        return None  # supports none or all of the own candidates: m(S) = 1, no influence
    return {common: 0.5, own: 0.5}


def yager_combine(masses: list[dict[frozenset, float]], universe: frozenset) -> dict[frozenset, float]:
    """Yager's rule: conjunctive combination, then conflict to the universe, prune, renormalise."""
    combined: dict[frozenset, float] = {universe: 1.0}
    for mass in masses:
        step: dict[frozenset, float] = {}
        for set1, mass1 in combined.items():
            for set2, mass2 in mass.items():
                meet = set1 & set2  # the empty set collects the conflict and stays empty
                step[meet] = step.get(meet, 0.0) + mass1 * mass2
        combined = step
    empty = frozenset()
    if empty in combined:
        combined[universe] = combined.get(universe, 0.0) + combined.pop(empty)
    combined = {focal: value for focal, value in combined.items() if value >= PRUNE_BELOW}
    total = sum(combined.values())
    if total != 1.0:
        combined = {focal: value / total for focal, value in combined.items()}
    return combined


def instance_mass(own: frozenset, neighbour_sets: list[frozenset]) -> dict[frozenset, float]:
    """The combined bpa of one instance with own set ``own`` and its neighbours' sets."""
    evidence = [{own: 1.0}]
    for neighbour in neighbour_sets:
        mass = neighbour_mass(own, neighbour)
        if mass is not None:
            evidence.append(mass)
    return yager_combine(evidence, own)


def belief_plausibility(mass: dict[frozenset, float], n_labels: int) -> tuple[list[float], list[float]]:
    """Singleton belief m({y}) and plausibility (mass of focal sets holding y)."""
    bel = [mass.get(frozenset([y]), 0.0) for y in range(n_labels)]
    pl = [sum(value for focal, value in mass.items() if y in focal) for y in range(n_labels)]
    return bel, pl


def decide(mass: dict[frozenset, float], n_labels: int, u: np.ndarray) -> tuple[int, bool, float, list]:
    """(label, guessed, margin, tie options) of one instance; ``u`` holds its two uniforms."""
    bel, pl = belief_plausibility(mass, n_labels)
    top = max(range(n_labels), key=lambda y: (bel[y], -y))  # largest belief, lowest index
    others = [pl[y] for y in range(n_labels) if y != top]
    margin = bel[top] - (max(others) if others else 0.0)
    if sum(bel) > 0:
        total = sum(bel)
        scores = [b / total for b in bel]
        best = max(scores)
        tied = [y for y in range(n_labels) if abs(scores[y] - best) <= 1e-8 + 1e-5 * abs(best)]
        if len(tied) == 1:
            return tied[0], False, margin, [tied]
        return tied[int(u[0] * len(tied))], True, margin, [tied]
    best_mass = max(mass.values())
    heaviest = [focal for focal, value in mass.items() if value == best_mass]
    smallest = min(len(focal) for focal in heaviest)
    options = sorted((focal for focal in heaviest if len(focal) == smallest), key=lambda f: sum(1 << y for y in f))
    chosen = sorted(options[int(u[0] * len(options))])
    return chosen[int(u[1] * len(chosen))], True, margin, [sorted(f) for f in options]


def run(X_train, Y, X_test=None, *, n_neighbors: int = 10, random_state=None) -> dict:
    """DST-PLL on the training rows (X_test None: transductive) or on new rows."""
    Y = np.asarray(Y, dtype=bool)
    n_labels = Y.shape[1]
    search = NearestNeighbors(n_neighbors=n_neighbors).fit(X_train)
    if X_test is None:
        idx = search.kneighbors(return_distance=False)  # each row without itself
        owns = [frozenset(np.flatnonzero(row).tolist()) for row in Y]
    else:
        idx = search.kneighbors(X_test, return_distance=False)
        owns = [frozenset(range(n_labels))] * idx.shape[0]
    rng = np.random.default_rng(random_state)
    draws = rng.random((idx.shape[0], 2))
    out = {key: [] for key in ("labels", "guess", "margin", "bel", "pl", "masses", "options")}
    for i, (own, row) in enumerate(zip(owns, idx, strict=True)):
        mass = instance_mass(own, [frozenset(np.flatnonzero(Y[j]).tolist()) for j in row])
        bel, pl = belief_plausibility(mass, n_labels)
        label, guess, margin, options = decide(mass, n_labels, draws[i])
        for key, value in zip(out, (label, guess, margin, bel, pl, mass, options), strict=True):
            out[key].append(value)
    result = {key: np.array(out[key]) for key in ("labels", "guess", "margin", "bel", "pl")}
    result["accepted"] = (result["margin"] > 0) & ~result["guess"]
    result["masses"] = out["masses"]
    result["options"] = out["options"]
    return result
