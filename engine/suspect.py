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

Which targets are flagged
-------------------------
A target is *suspect* when a test of "its set holds the truth" rejects it, with the
false-discovery rate controlled at a level ``α`` over all the targets tested: conformal
p-values against the *trusted* targets (the calibration set: sets believed to hold the
truth, an expert's answer, a single given label), then the Benjamini–Hochberg procedure, as
in Bates, Candès, Lei, Romano and Sesia [5]_.

*Conformal p-value* (:func:`conformal_p_values`). With calibration scores ``c_1 … c_n`` and
a tested score ``s``, ``p(s) = (1 + #{i : c_i ≥ s}) / (n + 1)``. If the tested set is correct
and exchangeable with the calibration sets, the rank of ``s`` among the ``n + 1`` scores is
uniform (ties counted against it), so ``P(p ≤ t) ≤ t``: ``p`` is a valid p-value for "this
set holds the truth". The scores being *antitone* (below), a correct set larger than the
singleton ``{y}`` of its truth scores no higher than that singleton, so its p-value is no
smaller: the calibration on correct singletons stays valid for every correct set. A
calibration target tested against a calibration set that holds it counts its own score once
more than its leave-one-out rank, which only makes its p-value larger.

*Benjamini–Hochberg* (:func:`benjamini_hochberg`). Of ``m`` tested p-values, sorted
``p_(1) ≤ … ≤ p_(m)``, reject the ``k*`` smallest with
``k* = max{k : p_(k) ≤ α k / m}`` (none when no ``k`` qualifies). Conformal p-values that
share one calibration set are dependent, but positively (PRDS, [5]_ Theorem 2.4), so BH still
bounds the false-discovery rate, the expected share of correct sets among the flagged ones,
by ``α`` (at ``α · m₀ / m`` where ``m₀`` sets are correct). In particular when every tested set
is correct (a clean dataset) the chance that *anything* is flagged is at most ``α``: a fixed
per-item threshold would flag about ``α`` of a clean dataset instead.

Consequences worth knowing: the smallest conformal p-value is ``1 / (n + 1)``, so nothing can
be flagged with fewer than ``1/α − 1`` trusted targets, and flagging one item among ``m``
tested ones needs ``1 / (n + 1) ≤ α / m``: a handful of calibration sets detects only a
crowd of strong outliers; power grows with the calibration set. Trusted sets that miss the
truth themselves (a crowd unanimously wrong) only raise the p-values: fewer flags, never
more false discoveries. A score of 0 has p-value 1 and is never suspect.

Suggestions
-----------
The labels outside ``S`` held by the most neighbours (by weight; ties to the smaller
label), at most two, with the share of the neighbours' weight that holds each and the
number of neighbours holding it.

Complexity: the p-values and BH cost ``O((n + T) log(n + T))``; the conflict enumerates, per
target, the ``2**m`` subsets of its ``m ≤ k``
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
.. [5] S. Bates, E. Candès, L. Lei, Y. Romano and M. Sesia, "Testing for outliers with
       conformal p-values", The Annals of Statistics 51(1), 149-178, 2023. arXiv:2104.08279.
.. [6] Y. Benjamini and Y. Hochberg, "Controlling the false discovery rate: a practical and
       powerful approach to multiple testing", Journal of the Royal Statistical Society B
       57(1), 289-300, 1995.

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

Conformal p-values of three tested scores against nine calibration scores, then BH at 10%:
only a score above every calibration score can reach ``1 / 10``, and one of three tested
needs ``p ≤ 0.1 · 1 / 3``:

>>> conformal_p_values(np.linspace(0.0, 0.4, 9), [0.9, 0.35, 0.0]).round(3).tolist()
[0.1, 0.3, 1.0]
>>> benjamini_hochberg([0.01, 0.2, 1.0], level=0.1).tolist()
[True, False, False]
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
    "DEFAULT_FDR",
    "SuspectSets",
    "conformal_p_values",
    "benjamini_hochberg",
    "sorted_conformal_p_values",
    "conformal_bh_threshold",
    "replace_sorted",
    "suspect_scores",
    "suspect_threshold",
    "suspect_sets",
    "outside_suggestions",
]

#: Default false-alarm rate ``α`` of :func:`suspect_threshold` (a per-item rate).
DEFAULT_FALSE_ALARM = 0.05
#: Default false-discovery rate of :func:`suspect_sets`: on average at most one flag in ten is
#: a correct set, and a clean dataset raises a flag at all at most one time in ten.
DEFAULT_FDR = 0.1

_ENUMERATION_MAX_ACTIVE = 16  # up to 2**16 neighbour subsets per target are enumerated at once
_CHUNK_WORDS = 1 << 21  # bound on targets * 2**m * words held at once


@dataclass(frozen=True)
class SuspectSets:
    """What :func:`suspect_sets` found.

    Attributes
    ----------
    scores : float array of shape (n_targets,)
        The criterion's score of every target's set.
    p_values : float array of shape (n_targets,)
        Conformal p-values of the scores against the trusted targets' (``nan`` when a fixed
        threshold was given).
    threshold : float
        Scores above it are flagged among the tested targets: the fixed threshold given, or
        the largest tested score BH did not flag (``inf`` when nothing is flagged).
    suspect : bool array of shape (n_targets,)
        The flagged targets.
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
    fdr : float
        The false-discovery rate BH controlled (``nan`` when the threshold was given).
    n_trusted : int
        Number of trusted targets (the calibration set).
    n_tested : int
        Number of targets tested (BH's ``m``).
    """

    scores: np.ndarray
    p_values: np.ndarray
    threshold: float
    suspect: np.ndarray
    suggestions: np.ndarray
    support: np.ndarray
    holders: np.ndarray
    n_neighbors: np.ndarray
    criterion: str
    fdr: float
    n_trusted: int
    n_tested: int


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


def conformal_p_values(calibration_scores: Any, scores: Any) -> np.ndarray:
    """Conformal p-values of ``scores`` against ``calibration_scores`` (larger: more suspect).

    ``p(s) = (1 + #{i : c_i ≥ s}) / (n + 1)``: valid for a score exchangeable with the ``n``
    calibration scores (see the module docstring and [5]_).

    Parameters
    ----------
    calibration_scores : float array of shape (n,)
        Scores of sets believed to hold the truth.
    scores : float array of shape (m,)
        Scores to test.

    Returns
    -------
    p_values : float array of shape (m,)
        In ``[1 / (n + 1), 1]``.

    Examples
    --------
    >>> conformal_p_values([0.1, 0.2, 0.3], [0.25, 0.3, 0.05]).tolist()
    [0.5, 0.5, 1.0]
    """
    calibration = np.sort(_finite(calibration_scores, "calibration_scores"))
    tested = _finite(scores, "scores")
    at_least = calibration.size - np.searchsorted(calibration, tested, side="left")
    return np.asarray((1.0 + at_least) / (calibration.size + 1.0), dtype=np.float64)


def benjamini_hochberg(p_values: Any, *, level: float = DEFAULT_FDR) -> np.ndarray:
    """The Benjamini–Hochberg procedure [6]_: which hypotheses to reject at false-discovery rate ``level``.

    Parameters
    ----------
    p_values : float array of shape (m,)
        In ``[0, 1]``.
    level : float in (0, 1), default=0.1
        ``α``: the bound on the expected share of true hypotheses among the rejected ones
        (under independence or positive dependence, such as conformal p-values sharing one
        calibration set).

    Returns
    -------
    rejected : bool array of shape (m,)
        The ``k*`` smallest p-values, ``k* = max{k : p_(k) ≤ α k / m}`` (none if no ``k``).

    Examples
    --------
    >>> benjamini_hochberg([0.04, 0.01, 0.03, 0.5], level=0.05).tolist()
    [False, True, False, False]
    >>> benjamini_hochberg([0.04, 0.01, 0.03, 0.5], level=0.2).tolist()
    [True, True, True, False]
    """
    check_scalar(level, "level", kind=Real, min_value=0.0, max_value=1.0, include_min=False, include_max=False)
    p = _finite(p_values, "p_values")
    if ((p < 0) | (p > 1)).any():
        raise InvalidInput("p_values must lie in [0, 1]")
    m = p.size
    rejected = np.zeros(m, dtype=bool)
    if m == 0:
        return rejected
    order = np.argsort(p, kind="stable")
    below = np.flatnonzero(p[order] <= float(level) * np.arange(1, m + 1) / m)
    if below.size:
        rejected[order[: below[-1] + 1]] = True
    return rejected


def sorted_conformal_p_values(calibration: np.ndarray, scores: Any) -> np.ndarray:
    """:func:`conformal_p_values` with the calibration scores already sorted (ascending).

    >>> sorted_conformal_p_values(np.array([0.1, 0.2, 0.3]), [0.25, 0.3, 0.05]).tolist()
    [0.5, 0.5, 1.0]
    """
    tested = _finite(scores, "scores")
    at_least = calibration.size - np.searchsorted(calibration, tested, side="left")
    return np.asarray((1.0 + at_least) / (calibration.size + 1.0), dtype=np.float64)


def conformal_bh_threshold(calibration: np.ndarray, tested: np.ndarray, *, level: float = DEFAULT_FDR) -> float:
    """The score above which Benjamini–Hochberg rejects conformal p-values, from sorted scores.

    ``tested > threshold`` equals
    ``benjamini_hochberg(conformal_p_values(calibration, tested), level=level)`` (the same
    floating-point comparisons), without a p-value for every tested score: the p-value is
    non-increasing in the score, so BH rejects the tested scores above some calibration
    score, and only the tested scores whose p-value can be at most ``level`` (those above
    the calibration score of rank about ``level · (n + 1)`` from the top) are looked at.
    With both arrays kept sorted (:func:`replace_sorted`), a test after a few changed scores
    costs ``O(r log n)`` for those ``r`` scores instead of sorting every p-value.

    Parameters
    ----------
    calibration : float array of shape (n,)
        Scores of the trusted sets, sorted ascending.
    tested : float array of shape (m,)
        Scores tested, sorted ascending.
    level : float in (0, 1), default=0.1
        The false-discovery rate.

    Returns
    -------
    threshold : float
        ``inf`` when nothing is rejected, ``-inf`` when every tested score is.

    Examples
    --------
    >>> calibration = np.linspace(0.0, 0.4, 9)
    >>> conformal_bh_threshold(calibration, np.array([0.0, 0.35, 0.9]), level=0.4)
    0.4
    >>> conformal_bh_threshold(calibration, np.array([0.0, 0.35, 0.9]), level=0.1)
    inf
    """
    check_scalar(level, "level", kind=Real, min_value=0.0, max_value=1.0, include_min=False, include_max=False)
    n, m = calibration.size, tested.size
    if m == 0:
        return math.inf
    # A rank k can pass only if (1 + C) / (n + 1) <= level k / m <= level (C: calibration
    # scores at least as large): C < level (n + 1); one more is a margin for the rounding.
    most = math.floor(float(level) * (n + 1.0)) + 1
    below = 0 if most >= n else int(np.searchsorted(tested, calibration[n - most - 1], side="right"))
    top = tested[below:][::-1]
    at_least = n - np.searchsorted(calibration, top, side="left")
    p = (1.0 + at_least) / (n + 1.0)
    passing = np.flatnonzero(p <= float(level) * np.arange(1, top.size + 1) / m)
    if passing.size == 0:
        return math.inf
    largest = int(at_least[passing[-1]])
    return -math.inf if largest >= n else float(calibration[n - largest - 1])


def replace_sorted(values: np.ndarray, remove: np.ndarray, add: np.ndarray) -> np.ndarray:
    """The sorted array ``values`` with the values ``remove`` taken out and ``add`` put in.

    ``remove`` must be a sub-multiset of ``values`` (each value as many times as it is
    removed); a new array is returned, ``values`` is not changed.

    >>> replace_sorted(np.array([0.0, 0.5, 0.5, 1.0]), np.array([0.5, 0.0]), np.array([0.7, 0.5])).tolist()
    [0.5, 0.5, 0.7, 1.0]
    """
    remove, add = np.sort(np.asarray(remove, dtype=values.dtype)), np.sort(np.asarray(add, dtype=values.dtype))
    if remove.size:
        first = np.searchsorted(values, remove, side="left")
        # The j-th repeat of a value takes the j-th slot of that value's run in ``values``.
        run_starts = np.flatnonzero(np.r_[True, remove[1:] != remove[:-1]])
        run_lengths = np.diff(np.r_[run_starts, remove.size])
        at = first + np.arange(remove.size) - np.repeat(run_starts, run_lengths)
        if (at >= values.size).any() or (values[np.minimum(at, values.size - 1)] != remove).any():
            raise InvalidInput("replace_sorted: a removed value is not among the values")
        values = np.delete(values, at)
    if add.size:
        values = np.insert(values, np.searchsorted(values, add, side="left"), add)
    return values


def _finite(values: Any, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64).ravel()
    if not np.isfinite(array).all():
        raise InvalidInput(f"{name} must be finite numbers")
    return array


def suspect_threshold(trusted_scores: Any, *, false_alarm: float = DEFAULT_FALSE_ALARM) -> float:
    """The split-conformal threshold: scores above it are suspect at per-item false-alarm rate ``α``.

    This flags about ``α`` of a clean dataset (every set correct) by construction;
    :func:`suspect_sets` uses the false-discovery-rate test instead. Kept as the baseline the
    benchmark compares with (``benchmarks/suspect.py``).

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
    tested: Any = None,
    threshold: float | None = None,
    criterion: str = "conflict",
    fdr: float = DEFAULT_FDR,
) -> SuspectSets:
    """Score every target's set, flag the suspect ones and name what the neighbours suggest.

    Parameters
    ----------
    idx, w, Y, own
        As in :func:`suspect_scores`.
    trusted : bool array of shape (n_targets,), optional
        Targets whose set is believed to hold the truth (an expert's answer, a single given
        label): the calibration set of the conformal p-values. Required unless ``threshold``
        is given.
    tested : bool array of shape (n_targets,), optional
        The targets that may be flagged (BH's family); by default every target.
    threshold : float, optional
        A fixed threshold instead of the test: scores above it (and above 0) are flagged.
    criterion : {"conflict", "outside", "disjoint"}, default="conflict"
    fdr : float in (0, 1), default=0.1
        The false-discovery rate of the Benjamini–Hochberg procedure over the tested targets.

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
        raise InvalidInput("give exactly one of trusted= (to calibrate the test) and threshold=")
    n_targets = idx.shape[0]
    family = np.ones(n_targets, dtype=bool) if tested is None else _target_mask(tested, "tested", n_targets)
    scores = SUSPECT_CRITERIA[criterion](idx, w, Y, own)
    if threshold is None:
        check_scalar(fdr, "fdr", kind=Real, min_value=0.0, max_value=1.0, include_min=False, include_max=False)
        mask = _target_mask(trusted, "trusted", n_targets)
        p_values = conformal_p_values(scores[mask], scores)
        suspect = np.zeros(n_targets, dtype=bool)
        suspect[family] = benjamini_hochberg(p_values[family], level=fdr)
        # p decreases with the score: the flags are the tested scores above the largest unflagged one.
        kept = scores[family & ~suspect]
        cut = math.inf if not suspect.any() else float(kept.max()) if kept.size else 0.0
        level, n_trusted = float(fdr), int(mask.sum())
    else:
        check_scalar(threshold, "threshold", kind=Real, min_value=0.0)
        cut, level, n_trusted = float(threshold), math.nan, 0
        p_values = np.full(n_targets, math.nan)
        suspect = family & (scores > cut) & (scores > 0)
    suggestions, support, holders = _suggestions(idx, w, Y, own, 2)
    return SuspectSets(
        scores=scores,
        p_values=p_values,
        threshold=cut,
        suspect=suspect,
        suggestions=suggestions,
        support=support,
        holders=holders,
        n_neighbors=(w > 0).sum(axis=1),
        criterion=criterion,
        fdr=level,
        n_trusted=n_trusted,
        n_tested=int(family.sum()),
    )


def _target_mask(values: Any, name: str, n_targets: int) -> np.ndarray:
    mask = np.asarray(values)
    if mask.dtype != bool or mask.shape != (n_targets,):
        raise InvalidInput(
            f"{name} must be a bool array of shape ({n_targets},), got dtype {mask.dtype} shape {mask.shape}"
        )
    return mask
