"""Suspect candidate sets: items whose neighbours' evidence contradicts every one of their candidates.

winnow assumes that an item's candidate set holds its true label. Crowd sets break that
assumption: when every annotator erred, the union of their votes misses the truth. This
module scores, for every target, how strongly the evidence of its ``k`` nearest neighbours
(their candidate sets) contradicts the target's own set, flags the targets whose score is
beyond what a correct set produces, and names the labels outside the set that the
neighbours suggest instead.

Scores (:data:`SUSPECT_CRITERIA`)
----------------------------------
For a target with own set ``S`` and neighbours ``j`` with sets ``N_j`` and weights ``w_j``
(neighbours of weight 0 take no part):

``"conflict"`` (Dempster's conflict, the default)
    Every neighbour is the simple support function of DST-PLL [1]_ on the frame of all
    labels: ``m_j(N_j) = 1/2``, ``m_j(Ω) = 1/2`` (a neighbour holding every label is
    vacuous). Their conjunctive combination, normalised by Dempster's rule (the mass the
    neighbours put on the empty set, their disagreement among themselves, is divided out),
    is the neighbours' joint evidence ``m``. Combining it with the target's own set, the
    categorical ``m_0(S) = 1``, puts on the empty set Dempster's conflict [2]_

    ``K(S) = Σ_{B ∩ S = ∅} m(B) = 1 − Pl(S)``,

    the mass the neighbours' evidence puts entirely outside ``S``. ``K = 0`` when some
    neighbour subset's common labels always meet ``S`` (e.g. every ``N_j ⊆ S``); ``K → 1``
    when many neighbours agree on labels outside ``S``. Weights other than 0 are not used
    (as in DST-PLL).
``"outside"`` (the PL-kNN posterior outside the set)
    The PL-kNN vote [3]_ ``v(y) = Σ_j w_j [y ∈ N_j]`` normalised to a distribution; the
    score is its mass on the labels outside ``S``.
``"disjoint"``
    The weighted share of neighbours whose set has no label in common with ``S``.

All three are *antitone*: a larger set never scores higher (``S ⊆ S'`` ⇒
``score(S') ≤ score(S)``). This is what makes the threshold below sound for every correct
set, not only for the singletons it is calibrated on. On crowd-made sets of digits, wine
and breast cancer, and on uniform sets with injected misses (``benchmarks/suspect.py``,
``docs/results_suspect.md``), the conflict gave the highest recall at an equal or better
precision and the highest ROC AUC, so it is the default.

Threshold
---------
A target is *suspect* when its score is above the threshold :func:`suspect_threshold` draws
from *trusted* targets, whose set is believed to hold the truth (an expert's answer, a
single given label): the split-conformal quantile [4]_, the ``⌈(n + 1)(1 − α)⌉``-th
smallest of their ``n`` scores, for a false-alarm rate ``α``. If the trusted sets are
exchangeable with the correct sets, a correct singleton ``{y}`` scores above it with
probability at most ``α``, and, the scores being antitone, so does every correct set
holding ``y``: at most ``α`` of the correct sets are flagged. Trusted sets that miss the
truth themselves (a crowd unanimously wrong) only raise the quantile: fewer flags, never
more false alarms. With fewer than ``1/α − 1`` trusted targets the quantile is infinite and
nothing is flagged. A score of 0 is never suspect.

Suggestions
-----------
The labels outside ``S`` held by the most neighbours (by weight; ties to the smaller
label), at most two, with the share of the neighbours' weight that holds each and the
number of neighbours holding it.

Complexity: the conflict enumerates, per target, the ``2**m`` subsets of its ``m ≤ k``
active neighbours as bit-packed intersections (``O(T · 2**m · ceil(M/64))``, chunked);
targets with more than 16 active neighbours are combined one neighbour at a time with
the focal sets in a hash map (exact integer counts, at most ``min(2**m, 2**M)`` focal
sets). ``"outside"`` and ``"disjoint"`` cost ``O(T · k · M)``.

References
----------
.. [1] T. Fuchs, F. Kalinke and K. Böhm, "Partial-Label Learning with a Reject Option",
       Transactions on Machine Learning Research, 2025. arXiv:2402.00592.
.. [2] G. Shafer, "A Mathematical Theory of Evidence", Princeton University Press, 1976
       (Dempster's rule of combination and its weight of conflict, Chapter 3).
.. [3] E. Hüllermeier and J. Beringer, "Learning from ambiguously labeled examples",
       Intelligent Data Analysis 10(5), 419-439, 2006.
.. [4] V. Vovk, A. Gammerman and G. Shafer, "Algorithmic Learning in a Random World",
       Springer, 2005 (conformal prediction; the split-conformal quantile).

Examples
--------
Two labels; the target's set is ``{1}`` but all four neighbours hold ``{0}``:

>>> import numpy as np
>>> Y = np.array([[0, 1], [1, 0], [1, 0], [1, 0], [1, 0]], dtype=bool)
>>> idx, w = np.array([[1, 2, 3, 4]]), np.ones((1, 4))
>>> float(suspect_scores(idx, w, Y, own=Y[:1])[0])
0.9375
>>> found = suspect_sets(idx, w, Y, own=Y[:1], threshold=0.5)
>>> bool(found.suspect[0]), found.suggestions[0].tolist(), found.holders[0].tolist()
(True, [0, -1], [4, 0])
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np

from engine._kernels import CHUNK_TARGETS, candidate_votes, pack_sets
from engine._validation import check_candidates, check_choice, check_neighbors, check_scalar
from engine.exceptions import InvalidInput

__all__ = [
    "SUSPECT_CRITERIA",
    "DEFAULT_FALSE_ALARM",
    "SuspectSets",
    "suspect_scores",
    "suspect_threshold",
    "suspect_sets",
    "outside_suggestions",
]

#: Default false-alarm rate ``α`` of :func:`suspect_threshold`.
DEFAULT_FALSE_ALARM = 0.05

_ENUMERATION_MAX_ACTIVE = 16  # up to 2**16 neighbour subsets per target are enumerated at once
_CHUNK_WORDS = 1 << 21  # bound on targets * 2**m * words held at once


@dataclass(frozen=True)
class SuspectSets:
    """What :func:`suspect_sets` found.

    Attributes
    ----------
    scores : float array of shape (n_targets,)
        The criterion's score of every target's set.
    threshold : float
        Scores above it are suspect (``inf``: too few trusted targets to calibrate).
    suspect : bool array of shape (n_targets,)
        ``scores > threshold`` and ``scores > 0``.
    suggestions : int array of shape (n_targets, 2)
        The neighbours' most held labels outside the set, best first; ``-1`` where fewer.
    support : float array of shape (n_targets, 2)
        Share of the neighbours' weight holding each suggestion (0 where none).
    holders : int array of shape (n_targets, 2)
        Number of neighbours (of positive weight) holding each suggestion.
    n_neighbors : int array of shape (n_targets,)
        Number of neighbours of positive weight.
    criterion : str
        The score used (:data:`SUSPECT_CRITERIA`).
    false_alarm : float
        The ``α`` the threshold was calibrated at (``nan`` when the threshold was given).
    n_trusted : int
        Number of trusted targets the threshold was calibrated on.
    """

    scores: np.ndarray
    threshold: float
    suspect: np.ndarray
    suggestions: np.ndarray
    support: np.ndarray
    holders: np.ndarray
    n_neighbors: np.ndarray
    criterion: str
    false_alarm: float
    n_trusted: int


# ---------------------------------------------------------------------------- the scores


def _conflict_enumerated(own: np.ndarray, sets: np.ndarray, m: int) -> np.ndarray:
    """K of rows with exactly m active neighbours: ``own`` (r, M), ``sets`` (r, m, M) bool."""
    n_labels = own.shape[1]
    n_words = (n_labels + 63) // 64
    everything = pack_sets(np.ones((1, n_labels), dtype=bool), n_words)[0]
    own_words = pack_sets(own, n_words)
    set_words = pack_sets(sets, n_words)
    inter = np.broadcast_to(everything, (own.shape[0], 1, n_words))
    for j in range(m):  # subsets of the first j neighbours, then each with neighbour j added
        inter = np.concatenate([inter, inter & set_words[:, j, None, :]], axis=1)
    empty = ~(inter != 0).any(axis=2)
    outside = ~((inter & own_words[:, None, :]) != 0).any(axis=2)
    n_empty = empty.sum(axis=1)
    # Counts of equally weighted subsets (2**-m each): the ratio is exact up to rounding once.
    return np.asarray((outside.sum(axis=1) - n_empty) / ((1 << m) - n_empty), dtype=np.float64)


def _conflict_sequential(own: np.ndarray, sets: np.ndarray) -> float:
    """K of one row, combining neighbour by neighbour (focal set -> integer count of subsets)."""
    everything = (1 << own.size) - 1
    focal: dict[int, int] = {everything: 1}
    for row in sets:
        mask = int(np.dot(row.astype(object), [1 << b for b in range(row.size)]))
        merged: dict[int, int] = {}
        for key, count in focal.items():
            merged[key] = merged.get(key, 0) + count
            both = key & mask
            merged[both] = merged.get(both, 0) + count
        focal = merged
    own_mask = int(np.dot(own.astype(object), [1 << b for b in range(own.size)]))
    total = 1 << sets.shape[0]
    empty = focal.get(0, 0)
    outside = sum(count for key, count in focal.items() if key and not key & own_mask)
    return float(outside / (total - empty))


def _conflict_scores(idx: np.ndarray, w: np.ndarray, Y: np.ndarray, own: np.ndarray) -> np.ndarray:
    n_targets = idx.shape[0]
    scores = np.zeros(n_targets)
    neighbour_sets = Y[idx]  # (T, k, M)
    # A neighbour of weight 0 takes no part; one holding every label is vacuous evidence.
    active = (w > 0) & ~neighbour_sets.all(axis=2)
    n_active = active.sum(axis=1)
    for m in np.unique(n_active).tolist():
        if m == 0:
            continue  # no evidence: no conflict
        rows = np.flatnonzero(n_active == m)
        if m > _ENUMERATION_MAX_ACTIVE:
            for r in rows.tolist():
                scores[r] = _conflict_sequential(own[r], neighbour_sets[r][active[r]])
            continue
        order = np.argsort(~active[rows], axis=1, kind="stable")[:, :m]  # active neighbours first
        words = (Y.shape[1] + 63) // 64
        chunk = max(1, min(CHUNK_TARGETS, _CHUNK_WORDS // ((1 << m) * words)))
        for start in range(0, rows.size, chunk):
            part = rows[start : start + chunk]
            sets = np.take_along_axis(neighbour_sets[part], order[start : start + chunk, :, None], axis=1)
            scores[part] = _conflict_enumerated(own[part], sets, m)
    return scores


def _outside_scores(idx: np.ndarray, w: np.ndarray, Y: np.ndarray, own: np.ndarray) -> np.ndarray:
    votes = candidate_votes(idx, w, Y)
    total = votes.sum(axis=1)
    outside = np.where(own, 0.0, votes).sum(axis=1)
    return np.where(total > 0, outside / np.where(total > 0, total, 1.0), 0.0)


def _disjoint_scores(idx: np.ndarray, w: np.ndarray, Y: np.ndarray, own: np.ndarray) -> np.ndarray:
    disjoint = ~(Y[idx] & own[:, None, :]).any(axis=2)
    total = w.sum(axis=1)
    return np.where(total > 0, (w * disjoint).sum(axis=1) / np.where(total > 0, total, 1.0), 0.0)


#: Name -> scoring function ``(idx, w, Y, own) -> scores``, all antitone in the own set.
SUSPECT_CRITERIA: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]] = {
    "conflict": _conflict_scores,
    "outside": _outside_scores,
    "disjoint": _disjoint_scores,
}


def _check_inputs(idx: Any, w: Any, Y: Any, own: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    Y = check_candidates(Y)
    idx, w = check_neighbors(idx, w, Y)
    if own is None:
        if idx.shape[0] != Y.shape[0]:
            raise InvalidInput(
                f"idx has {idx.shape[0]} rows but Y has {Y.shape[0]}: pass own= (the targets' sets) "
                "when the targets are not the rows of Y"
            )
        own = Y
    else:
        own = check_candidates(own, name="own", n_rows=idx.shape[0])
        if own.shape[1] != Y.shape[1]:
            raise InvalidInput(f"own has {own.shape[1]} label columns but Y has {Y.shape[1]}")
    return idx, w, Y, own


def suspect_scores(idx: Any, w: Any, Y: Any, *, own: Any = None, criterion: str = "conflict") -> np.ndarray:
    """How strongly each target's neighbours contradict every label of its set.

    Parameters
    ----------
    idx : int array of shape (n_targets, k)
        Each target's neighbours (rows of ``Y``), never the target itself.
    w : float array of shape (n_targets, k)
        Their vote weights, ``w >= 0``.
    Y : bool array of shape (n_instances, n_labels)
        Candidate sets of the instances.
    own : bool array of shape (n_targets, n_labels), optional
        The targets' own sets; by default ``Y`` (then the targets are the rows of ``Y``).
    criterion : {"conflict", "outside", "disjoint"}, default="conflict"
        See the module docstring.

    Returns
    -------
    scores : float array of shape (n_targets,)
        In ``[0, 1]``; 0 when every neighbour's set lies inside the target's set.

    Raises
    ------
    InvalidInput
        A malformed graph or set, or an unknown ``criterion``.
    """
    check_choice(criterion, "criterion", tuple(SUSPECT_CRITERIA))
    idx, w, Y, own = _check_inputs(idx, w, Y, own)
    return SUSPECT_CRITERIA[criterion](idx, w, Y, own)


def suspect_threshold(trusted_scores: Any, *, false_alarm: float = DEFAULT_FALSE_ALARM) -> float:
    """The split-conformal threshold: scores above it are suspect at false-alarm rate ``α``.

    Parameters
    ----------
    trusted_scores : float array of shape (n,)
        Scores of targets whose set is believed to hold the truth.
    false_alarm : float in (0, 1), default=0.05
        ``α``: the largest share of correct sets to flag.

    Returns
    -------
    threshold : float
        The ``⌈(n + 1)(1 − α)⌉``-th smallest trusted score, ``inf`` when that rank exceeds ``n``.

    Examples
    --------
    >>> suspect_threshold(np.arange(20) / 20, false_alarm=0.1)  # the 19th smallest of 20
    0.9
    >>> suspect_threshold([0.1, 0.2], false_alarm=0.05)
    inf
    """
    check_scalar(
        false_alarm, "false_alarm", kind=Real, min_value=0.0, max_value=1.0, include_min=False, include_max=False
    )
    scores = np.asarray(trusted_scores, dtype=np.float64).ravel()
    if not np.isfinite(scores).all():
        raise InvalidInput("trusted_scores must be finite numbers")
    rank = math.ceil((scores.size + 1) * (1.0 - float(false_alarm)))
    if rank > scores.size:
        return math.inf
    return float(np.partition(scores, rank - 1)[rank - 1])


def outside_suggestions(
    idx: Any, w: Any, Y: Any, *, own: Any = None, n_suggestions: int = 2
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The labels outside each target's set that most of its neighbours hold.

    Parameters
    ----------
    idx, w, Y, own
        As in :func:`suspect_scores`.
    n_suggestions : int, default=2
        How many labels per target, at most.

    Returns
    -------
    suggestions : int array of shape (n_targets, n_suggestions)
        Labels by the weight of the neighbours holding them, heaviest first, ties to the
        smaller label; ``-1`` where fewer labels outside the set are held at all.
    support : float array of shape (n_targets, n_suggestions)
        Share of the neighbours' total weight holding each suggestion.
    holders : int array of shape (n_targets, n_suggestions)
        Number of neighbours of positive weight holding each suggestion.
    """
    check_scalar(n_suggestions, "n_suggestions", kind=Integral, min_value=1)
    idx, w, Y, own = _check_inputs(idx, w, Y, own)
    return _suggestions(idx, w, Y, own, int(n_suggestions))


def _suggestions(
    idx: np.ndarray, w: np.ndarray, Y: np.ndarray, own: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    votes = np.where(own, 0.0, candidate_votes(idx, w, Y))
    n = min(n, Y.shape[1])
    # Stable sort on -votes keeps the smaller label first among equal votes.
    top = np.argsort(-votes, axis=1, kind="stable")[:, :n]
    top_votes = np.take_along_axis(votes, top, axis=1)
    held = top_votes > 0
    total = w.sum(axis=1, keepdims=True)
    support = np.where(held, top_votes / np.where(total > 0, total, 1.0), 0.0)
    holding = (Y[idx] & (w > 0)[:, :, None]).sum(axis=1)  # (T, M) neighbours holding each label
    holders = np.where(held, np.take_along_axis(holding, top, axis=1), 0)
    return np.where(held, top, -1), support, holders.astype(np.int64)


def suspect_sets(
    idx: Any,
    w: Any,
    Y: Any,
    *,
    own: Any = None,
    trusted: Any = None,
    threshold: float | None = None,
    criterion: str = "conflict",
    false_alarm: float = DEFAULT_FALSE_ALARM,
) -> SuspectSets:
    """Score every target's set, flag the suspect ones and name what the neighbours suggest.

    Parameters
    ----------
    idx, w, Y, own
        As in :func:`suspect_scores`.
    trusted : bool array of shape (n_targets,), optional
        Targets whose set is believed to hold the truth (an expert's answer, a single given
        label); their scores calibrate the threshold (:func:`suspect_threshold`). Required
        unless ``threshold`` is given.
    threshold : float, optional
        A fixed threshold instead of the calibrated one.
    criterion : {"conflict", "outside", "disjoint"}, default="conflict"
    false_alarm : float in (0, 1), default=0.05
        ``α`` of the calibration.

    Returns
    -------
    SuspectSets

    Raises
    ------
    InvalidInput
        Neither or both of ``trusted`` and ``threshold``; a malformed input.
    """
    check_choice(criterion, "criterion", tuple(SUSPECT_CRITERIA))
    idx, w, Y, own = _check_inputs(idx, w, Y, own)
    if (trusted is None) == (threshold is None):
        raise InvalidInput("give exactly one of trusted= (to calibrate the threshold) and threshold=")
    scores = SUSPECT_CRITERIA[criterion](idx, w, Y, own)
    if threshold is None:
        mask = np.asarray(trusted)
        if mask.dtype != bool or mask.shape != (idx.shape[0],):
            raise InvalidInput(
                f"trusted must be a bool array of shape ({idx.shape[0]},), got dtype {mask.dtype} shape {mask.shape}"
            )
        cut = suspect_threshold(scores[mask], false_alarm=false_alarm)
        alpha, n_trusted = float(false_alarm), int(mask.sum())
    else:
        check_scalar(threshold, "threshold", kind=Real, min_value=0.0)
        cut, alpha, n_trusted = float(threshold), math.nan, 0
    suggestions, support, holders = _suggestions(idx, w, Y, own, 2)
    return SuspectSets(
        scores=scores,
        threshold=cut,
        suspect=(scores > cut) & (scores > 0),
        suggestions=suggestions,
        support=support,
        holders=holders,
        n_neighbors=(w > 0).sum(axis=1),
        criterion=criterion,
        false_alarm=alpha,
        n_trusted=n_trusted,
    )
