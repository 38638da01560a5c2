"""Suspicion: every item's chance that its candidate set misses the truth, to rank them all.

:mod:`engine.suspect` flags a set only when a test with a false-discovery-rate guarantee
rejects it, which at the first minute (a few hundred trusted sets against thousands of
tested ones) it rarely can. A user who suspects their sets first wants the list of the most
suspect items, in order, to look at; this module gives every item a score for that list,
as cleanlab's ``rank`` scores do for single labels [1]_ and CROWDLAB for votes [2]_.

The score
---------
cleanlab ranks a given label ``ŷ`` by its self-confidence ``p(ŷ | x)`` under an
*out-of-sample* model: the item's own, possibly wrong, label must not vouch for itself. For
a candidate set ``S`` the truth is missed with probability ``1 − Σ_{y∈S} p(y | x)``; the
model here is the one winnow already has, the item's ``k`` nearest neighbours, with their
candidate sets disambiguated by *their* neighbours, and the item itself left out of every
neighbourhood:

1. The PL-kNN vote [3]_ of each item ``l``: ``p⁰_l(y) ∝ Σ_m w_lm [y ∈ Y_m]`` over its
   neighbours ``m``; read inside ``l``'s own set, ``q⁰_l(y) ∝ p⁰_l(y) [y ∈ Y_l]`` (uniform
   on ``Y_l`` when the vote puts nothing there): what ``l`` most likely is, given its set
   and its neighbours.
2. Once more: ``p¹_j(y) ∝ Σ_l w_jl q⁰_l(y)``, ``q¹_j(y) ∝ p¹_j(y) [y ∈ Y_j]``. A neighbour
   holding ``{3, 8}`` in a neighbourhood of 8s now votes 8, not half of 3: an item whose set
   misses its truth stands out against its neighbours' *labels*, not against the unions of
   their candidates (which hold the same confusions as its own set).
3. ``P_t(y) ∝ Σ_j w_tj q¹_j(y)`` over the target's neighbours, with ``t`` removed from every
   neighbourhood on the way (its own vote in ``p⁰`` and ``p¹`` of the items that have it as
   a neighbour): ``P_t`` does not depend on ``Y_t`` at all. Where no neighbour of ``t`` has a
   positive weight there is no evidence and the suspicion is 0.

The **suspicion** of a target with set ``S`` is

``s(S) = 1 − ½ (P_t(S) + max_{y∈S} P_t(y))``,

the mean of the chance that the set misses the truth, ``1 − P_t(S)``, and the chance that
the label one would read from the set, its likeliest one, is wrong, ``1 − max_{y∈S} P_t(y)``
(cleanlab's self-confidence of that label). The second term ranks a wide set, one the
neighbours do not settle on any label of, above a narrow one of the same mass: wide sets are
what a crowd's disagreement leaves, and they miss the truth more often. The choice was
measured, not derived, with a first version of ``benchmarks/suspect.py`` (its protocols at
0, 100 and 300 answers, 5 seeds, cleanlab's rank scores with k-NN and logistic probabilities,
CROWDLAB and the majority vote as anchors): the mean recall at twice the number of misses
over the 60 (protocol, budget) cells was 88.0 % for ``1 − P_t(S)`` alone and 88.3 % for the
mean, at least the best anchor's in 50 and 54 cells; Dempster's conflict of
:mod:`engine.suspect` had 85.6 % and 43 cells. ``docs/results_suspect.md`` gives the
figures of the benchmark as it is.

Properties
----------
* ``0 ≤ s ≤ 1``; ``s = 0`` when the neighbours' evidence is all on one label of ``S`` or
  there is none.
* *Out of sample*: ``P_t`` is the same whatever ``t``'s own set.
* *Antitone*: ``S ⊆ S'`` ⇒ ``s(S') ≤ s(S)`` (both terms grow with the set). With the first
  property, a correct set scores no higher than the singleton of its truth, so the
  conformal p-values of :mod:`engine.suspect` calibrated on correct singletons stay valid
  for this score too.

Complexity: ``O(n k M)`` for the first round over the rows needed, then per target
``O(k³)`` comparisons to find where it sits in its neighbours' neighbourhoods and ``O(k M)``
arithmetic, in chunks (100,000 items, k = 10, 20 labels: about 3 s on one core, three times
Dempster's conflict); ``targets=`` scores a few rows from the ``3``-hop neighbourhood they
depend on (what an answer changes is re-scored without a pass over the dataset).

References
----------
.. [1] C. Northcutt, L. Jiang and I. Chuang, "Confident learning: estimating uncertainty in
       dataset labels", Journal of Artificial Intelligence Research 70, 1373-1411, 2021
       (cleanlab; ``cleanlab.rank.get_label_quality_scores``, self-confidence).
.. [2] H. W. Goh, U. Tkachenko and J. Mueller, "CROWDLAB: supervised learning to infer
       consensus labels and quality scores for data with multiple annotators",
       arXiv:2210.06812, 2022.
.. [3] E. Hüllermeier and J. Beringer, "Learning from ambiguously labeled examples",
       Intelligent Data Analysis 10(5), 419-439, 2006.

Examples
--------
Item 0 holds ``{1}``; its three neighbours hold ``{0}``, ``{0, 1}`` and ``{0}``. With item 0
left out, item 2's own neighbours are 0s, so it reads as a 0, and the evidence against item
0's set is complete; the others, whose neighbourhoods hold item 0's ``{1}``, are less suspect:

>>> import numpy as np
>>> Y = np.array([[0, 1], [1, 0], [1, 1], [1, 0]], dtype=bool)
>>> idx = np.array([[1, 2, 3], [2, 3, 0], [1, 3, 0], [1, 2, 0]])
>>> neighbour_posterior(idx, np.ones((4, 3)), Y, targets=[0]).round(3).tolist()
[[1.0, 0.0]]
>>> suspicion_scores(idx, np.ones((4, 3)), Y).round(3).tolist()
[1.0, 0.5, 0.167, 0.5]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine._validation import check_candidates, check_neighbors
from engine.exceptions import InvalidInput

__all__ = ["neighbour_posterior", "suspicion_scores"]

#: Bounds on what a chunk holds at once: targets * k**3 comparisons, rows * k * n_labels floats.
_CHUNK_COMPARISONS = 1 << 22
_CHUNK_FLOATS = 1 << 21


def neighbour_posterior(idx: Any, w: Any, Y: Any, *, targets: Any = None) -> np.ndarray:
    """Each target's label distribution from its neighbours' disambiguated sets, the target left out.

    Parameters
    ----------
    idx : int array of shape (n_instances, k)
        Every item's neighbours (rows of ``Y``): the graph of the whole dataset.
    w : float array of shape (n_instances, k)
        Their weights, ``w >= 0``.
    Y : bool array of shape (n_instances, n_labels)
        Every item's candidate set.
    targets : int array of shape (n_targets,), optional
        The rows to compute (default: every row); only their 3-hop neighbourhood is read.

    Returns
    -------
    posterior : float array of shape (n_targets, n_labels)
        ``P_t`` of the module docstring; rows sum to 1 (uniform where ``t`` has no
        neighbour of positive weight).

    Raises
    ------
    InvalidInput
        A malformed graph or set, ``idx`` not one row per row of ``Y``, or a target outside
        ``0..n_instances-1``.
    """
    idx, w, Y, rows = _check(idx, w, Y, targets)
    return _posterior(idx, w, Y, rows)


def suspicion_scores(idx: Any, w: Any, Y: Any, *, targets: Any = None, own: Any = None) -> np.ndarray:
    """The suspicion of every target's set (higher: more likely that the set misses the truth).

    Parameters
    ----------
    idx, w, Y, targets
        As in :func:`neighbour_posterior`.
    own : bool array of shape (n_targets, n_labels), optional
        Sets to score instead of the targets' own (``Y[targets]``); the evidence is the same,
        since it never reads a target's own set.

    Returns
    -------
    suspicion : float array of shape (n_targets,)
        ``1 − ½ (P_t(S) + max_{y∈S} P_t(y))`` in ``[0, 1]``; 0 where a target has no
        neighbour of positive weight.

    Raises
    ------
    InvalidInput
        As :func:`neighbour_posterior`, or ``own`` of the wrong shape.
    """
    idx, w, Y, rows = _check(idx, w, Y, targets)
    sets = Y[rows] if own is None else check_candidates(own, name="own", n_rows=rows.size)
    if sets.shape[1] != Y.shape[1]:
        raise InvalidInput(f"own has {sets.shape[1]} label columns but Y has {Y.shape[1]}")
    posterior = _posterior(idx, w, Y, rows)
    inside = np.where(sets, posterior, 0.0)
    score = 1.0 - 0.5 * (inside.sum(axis=1) + inside.max(axis=1))
    return np.where(_has_evidence(idx, w, rows), np.clip(score, 0.0, 1.0), 0.0)


def _check(idx: Any, w: Any, Y: Any, targets: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    Y = check_candidates(Y)
    idx, w = check_neighbors(idx, w, Y)
    if idx.shape[0] != Y.shape[0]:
        raise InvalidInput(
            f"idx has {idx.shape[0]} rows but Y has {Y.shape[0]}: the posterior needs the graph of every item "
            "(pass targets= to score some of them)"
        )
    if targets is None:
        return idx, w, Y, np.arange(Y.shape[0])
    rows = np.asarray(targets)
    if rows.ndim != 1 or (rows.size and rows.dtype.kind not in "iu"):
        raise InvalidInput(f"targets must be a 1-D array of row indices, got dtype {rows.dtype} shape {rows.shape}")
    rows = rows.astype(np.intp)
    if rows.size and (rows.min() < 0 or rows.max() >= Y.shape[0]):
        raise InvalidInput(f"targets must be rows in 0..{Y.shape[0] - 1}")
    return idx, w, Y, rows


def _has_evidence(idx: np.ndarray, w: np.ndarray, rows: np.ndarray) -> np.ndarray:
    evidence: np.ndarray = ((w[rows] > 0) & (idx[rows] != rows[:, None])).any(axis=1)
    return evidence


def _within(votes: np.ndarray, sets: np.ndarray) -> np.ndarray:
    """``votes`` restricted to ``sets`` and normalised over the last axis; uniform on the set
    where the votes put nothing inside it."""
    inside = np.where(sets, votes, 0.0)
    total = inside.sum(axis=-1, keepdims=True)
    uniform = sets / sets.sum(axis=-1, keepdims=True)
    out: np.ndarray = np.where(total > 0, inside / np.where(total > 0, total, 1.0), uniform)
    return out


def _share(votes: np.ndarray, total: np.ndarray, n_labels: int) -> np.ndarray:
    """``votes / total`` over the last axis; uniform where the total weight is 0."""
    positive = total[..., None] > 0
    out: np.ndarray = np.where(positive, votes / np.where(positive, total[..., None], 1.0), 1.0 / n_labels)
    return out


def _weighted_sum(weights: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``Σ_a weights[..., a] values[..., a, :]``, summed in neighbour order (so that the same
    row gives the same bits however many rows are computed at once)."""
    out: np.ndarray = weights[..., 0, None] * values[..., 0, :]
    for a in range(1, weights.shape[-1]):
        out = out + weights[..., a, None] * values[..., a, :]
    return out


def _posterior(idx: np.ndarray, w: np.ndarray, Y: np.ndarray, rows: np.ndarray) -> np.ndarray:
    n, n_labels = Y.shape
    if rows.size == 0:
        return np.zeros((0, n_labels))
    # The first round is needed for the targets, their neighbours and their neighbours' neighbours.
    second = np.unique(idx[rows])
    needed = np.unique(np.concatenate([rows, second, idx[second].ravel()]))
    local = np.full(n, -1, dtype=np.intp)
    local[needed] = np.arange(needed.size)
    k = idx.shape[1]
    step = max(1, _CHUNK_FLOATS // (k * n_labels))
    totals = np.zeros(n)
    totals[needed] = w[needed].sum(axis=1)
    votes = np.empty((needed.size, n_labels))  # U_l: the PL-kNN vote of every needed row
    for start in range(0, needed.size, step):
        part = needed[start : start + step]
        votes[start : start + part.size] = _weighted_sum(w[part], Y[idx[part]].astype(np.float64))
    first = _within(_share(votes, totals[needed], n_labels), Y[needed])  # q⁰
    second_votes = np.zeros((needed.size, n_labels))  # V¹_j = Σ_l w_jl q⁰_l, for the neighbours j
    for start in range(0, second.size, step):
        part = second[start : start + step]
        second_votes[local[part]] = _weighted_sum(w[part], first[local[idx[part]]])
    out = np.empty((rows.size, n_labels))
    # The k**3 comparisons read rows of the graph at random: half the bytes as 32-bit indices.
    narrow = idx.astype(np.int32) if n < 2**31 else idx
    chunk = max(1, _CHUNK_COMPARISONS // k**3)
    for start in range(0, rows.size, chunk):
        t = rows[start : start + chunk]
        out[start : start + t.size] = _posterior_chunk(
            narrow, w, Y, t.astype(narrow.dtype), local, votes, totals, first, second_votes
        )
    return out


def _posterior_chunk(
    idx: np.ndarray,
    w: np.ndarray,
    Y: np.ndarray,
    t: np.ndarray,
    local: np.ndarray,
    votes: np.ndarray,
    totals: np.ndarray,
    first: np.ndarray,
    second_votes: np.ndarray,
) -> np.ndarray:
    """``P_t`` for the targets ``t``: the second round of each neighbour ``j`` with ``t`` taken
    out of ``j``'s neighbourhood and out of the first round of ``j``'s neighbours."""
    n_labels = Y.shape[1]
    J = idx[t]  # (T, k)
    L = idx[J]  # (T, k, k): the neighbours' neighbours
    w_jl = w[J]
    is_t = L == t[:, None, None]
    held = np.where(is_t, w_jl, 0.0)
    mutual = held[..., 0]
    for b in range(1, held.shape[-1]):
        mutual = mutual + held[..., b]
    # j's second-round vote without t's own first-round vote.
    raw = second_votes[local[J]] - mutual[..., None] * first[local[t]][:, None, :]
    weight = totals[J] - mutual
    # Where t is a neighbour of l (l a neighbour of j, l ≠ t), l's first round without t's vote.
    hit = idx[L] == t[:, None, None, None]  # (T, k, k, k)
    ti, ja, lb = np.nonzero(hit.any(axis=-1) & ~is_t)
    if ti.size:
        held_by = L[ti, ja, lb]
        back = np.where(hit[ti, ja, lb], w[held_by], 0.0).sum(axis=1)
        at = local[held_by]
        fixed = _within(_share(votes[at] - back[:, None] * Y[t[ti]], totals[held_by] - back, n_labels), Y[held_by])
        change = w_jl[ti, ja, lb][:, None] * (fixed - first[at])
        # The triples come sorted by (target, neighbour): one sum per pair, in neighbour order.
        pair = ti * J.shape[1] + ja
        starts = np.flatnonzero(np.r_[True, pair[1:] != pair[:-1]])
        raw[ti[starts], ja[starts]] += np.add.reduceat(change, starts, axis=0)
    second = _within(_share(raw, weight, n_labels), Y[J])  # q¹_j without t
    w_tj = np.where(J == t[:, None], 0.0, w[t])
    total = w_tj.sum(axis=1)
    return _share(_weighted_sum(w_tj, second), total, n_labels)
