"""DST-PLL: a k-nearest-neighbour partial-label classifier with a reject option.

Every neighbour is a piece of evidence (a basic probability assignment, bpa) about an
instance's label; Yager's rule combines the evidence, the prediction is the label with the
largest singleton belief, and it is *accepted* only when that belief exceeds the
plausibility of every other label (Fuchs, Kalinke & Böhm, Algorithm 1 and Section 4.2).

What is computed
----------------
For an instance with own set ``S`` (its candidate set when it is a training instance being
disambiguated, all labels for a new instance) and a neighbour with candidate set ``N``:

* the neighbour is skipped when ``S ∩ N`` is empty or equal to ``S`` (bpa ``m(S) = 1``);
* otherwise it contributes ``m(S ∩ N) = 1/2`` and ``m(S) = 1/2``.

Yager's rule combines all ``m`` active neighbours conjunctively (products of masses go to
the intersection of the focal sets; conflict gathers on the empty set and stays there);
only after the last neighbour is the empty-set mass moved to ``S``; focal sets with mass
below ``1e-10`` are then dropped and the rest renormalised. Belief of ``y`` is ``m({y})``,
plausibility of ``y`` the total mass of the focal sets holding ``y``.

How it is computed
------------------
Before the conflict move, the combined focal set of every subset ``T`` of the active
neighbours is ``S ∩ (∩_{j∈T} N_j)`` with mass ``2**-m``, so the combination is an
enumeration of ``2**m`` intersections, not a sequence of hash-map merges. Candidate sets are
packed into 64-bit words (``ceil(M / 64)`` words per set, so any number of labels works) and
the intersections of all rows with the same ``m`` are built at once by doubling
(``inter = [inter, inter & A_j]``). Singleton beliefs count the single-bit intersections;
plausibility needs no enumeration: ``pl(y) = 2**(c_y - m) + m(∅)`` for ``y ∈ S``, where
``c_y`` counts the active neighbours whose set holds ``y``. All masses are multiples of
``2**-m`` and therefore exact in floating point; with ``m ≤ 16`` no mass can fall below the
``1e-10`` pruning threshold, so pruning is a no-op on this path. Rows with more than 16
active neighbours use a sequential combination that groups equal focal sets in a hash map
(the paper's formulation) and does prune.

Complexity: the neighbour search, plus ``O(n · 2**m · ceil(M/64))`` for the combination
with ``m ≤ k`` (the paper bounds the focal sets by ``min(2**k, 2**M)``); for the default
``k = 10`` the search dominates.

Random tie-breaking (one ``rng.random((n_rows, 2))`` per batch; see ``_decide``) makes a
prediction a *guess*; guesses are never accepted.

References
----------
.. [1] T. Fuchs, F. Kalinke and K. Böhm, "Partial-Label Learning with a Reject Option",
       Transactions on Machine Learning Research, 2025. arXiv:2402.00592.
.. [2] R. R. Yager, "On the Dempster-Shafer framework and new combination rules",
       Information Sciences 41(2), 93-137, 1987.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.neighbors import NearestNeighbors

from engine._kernels import pack_sets
from engine._validation import (
    check_candidates,
    check_graph,
    check_is_fitted,
    check_query,
    check_scalar,
    check_training_data,
)
from engine.exceptions import InvalidInput
from engine.neighbors import ReverseIndex

__all__ = ["DstPllClassifier", "transductive_decisions", "predict_from_neighbors"]

PRUNE_BELOW = 1e-10
"""Focal sets whose mass is below this after the conflict move are dropped (as in [1]'s code)."""

_ENUMERATION_MAX_ACTIVE = 16  # at most this many active neighbours: 2**m subsets may be enumerated
_EXACT_MAX_ACTIVE = 33  # 2**-33 > PRUNE_BELOW: up to here no mass can be pruned
_SUBSET_WORK_MAX = float(1 << 16)
_MOEBIUS_MAX_LABELS = (
    48  # keys (row << M) | subset need spare bits for the row  # per-row bound on the Moebius kernel's subsets
)
_CHUNK_WORDS = 1 << 20  # bound on rows * 2**m * words held at once by the enumeration

if hasattr(np, "bitwise_count"):  # numpy >= 2.0

    def _popcount(words: np.ndarray) -> np.ndarray:
        counts: np.ndarray = np.bitwise_count(words).sum(axis=-1, dtype=np.int64)
        return counts

else:  # pragma: no cover - numpy 1.26
    _BYTE_POPCOUNT = np.array([bin(b).count("1") for b in range(256)], dtype=np.int64)

    def _popcount(words: np.ndarray) -> np.ndarray:
        as_bytes = words.view(np.uint8).reshape(*words.shape[:-1], -1)
        counts: np.ndarray = _BYTE_POPCOUNT[as_bytes].sum(axis=-1)
        return counts


def _set_key(words: np.ndarray) -> int:
    """The integer sum(2**label) of one packed set (the order ties between focal sets follow)."""
    return sum(int(word) << (64 * w) for w, word in enumerate(words))


def _labels_of_key(key: int) -> np.ndarray:
    return np.array([y for y in range(key.bit_length()) if key >> y & 1], dtype=np.intp)


class _Evidence:
    """Combined evidence of a batch: belief and plausibility, plus what ties need."""

    def __init__(self, belief: np.ndarray, plausibility: np.ndarray, heaviest: dict[int, list[np.ndarray]]):
        self.belief = belief
        self.plausibility = plausibility
        # Rows with no singleton mass: the focal sets of largest mass and, among those, fewest
        # labels, as label arrays ordered by sum(2**label).
        self.heaviest = heaviest


def _active_sets(own: np.ndarray, neighbour_sets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """S ∩ N_j for every neighbour and whether the neighbour is active (not empty, not S)."""
    meet = neighbour_sets & own[:, None, :]
    active = meet.any(axis=2) & (meet != own[:, None, :]).any(axis=2)
    return meet, active


def _combine(own: np.ndarray, neighbour_sets: np.ndarray, *, path: str = "auto") -> _Evidence:
    """Yager-combine the evidence of every row; own (r, M) and neighbour_sets (r, k, M) bool.

    Every row goes to one of three exact kernels, all giving the same numbers: ``"moebius"``
    (commonality inclusion-exclusion over the subsets of the neighbours' sets, cheap when
    the sets are small), ``"enumerate"`` (all ``2**m`` neighbour subsets) and
    ``"sequential"`` (hash-map combination, the only one that may have to prune). ``path``
    forces one where it applies (tests); ``"auto"`` picks the cheapest.
    """
    n_rows, n_labels = own.shape
    meet, active = _active_sets(own, neighbour_sets)
    n_active = active.sum(axis=1)
    # c_y: active neighbours whose set holds y; gives pl(y) = 2**(c_y - m) before the move.
    holders = (meet & active[:, :, None]).sum(axis=1)
    belief = np.zeros((n_rows, n_labels))
    plausibility = np.zeros((n_rows, n_labels))
    heaviest: dict[int, list[np.ndarray]] = {}
    n_words = (n_labels + 63) // 64
    # Work of the Moebius kernel: the non-empty subsets of every active set.
    subset_work = np.where(active, np.ldexp(1.0, meet.sum(axis=2)) - 1, 0.0).sum(axis=1)
    exact_counts = n_active <= _EXACT_MAX_ACTIVE  # every mass a multiple of 2**-m >= PRUNE_BELOW
    moebius = (
        exact_counts
        & (n_labels <= _MOEBIUS_MAX_LABELS)
        & (subset_work <= np.minimum(np.ldexp(1.0, n_active), _SUBSET_WORK_MAX))
    )
    moebius |= (
        exact_counts
        & (n_labels <= _MOEBIUS_MAX_LABELS)
        & (n_active > _ENUMERATION_MAX_ACTIVE)
        & (subset_work <= _SUBSET_WORK_MAX)
    )
    enumerate_ = ~moebius & (n_active <= _ENUMERATION_MAX_ACTIVE)
    if path == "moebius":
        moebius, enumerate_ = exact_counts & (n_labels <= _MOEBIUS_MAX_LABELS), np.zeros(n_rows, dtype=bool)
    elif path == "enumerate":
        moebius, enumerate_ = np.zeros(n_rows, dtype=bool), n_active <= _ENUMERATION_MAX_ACTIVE
    elif path == "sequential":
        moebius = enumerate_ = np.zeros(n_rows, dtype=bool)
    rows = np.flatnonzero(moebius)
    # Chunks bound the memory and keep (row << M) | subset inside 64 bits.
    done = np.concatenate([[0.0], np.cumsum(subset_work[rows])])
    start = 0
    while start < rows.size:
        stop = int(np.searchsorted(done, done[start] + _CHUNK_WORDS, "right")) - 1
        stop = min(max(start + 1, stop), start + (1 << (62 - n_labels)), rows.size)
        part = rows[start:stop]
        _combine_moebius(part, own[part], meet[part], active[part], holders[part], belief, plausibility, heaviest)
        start = stop
    for row in np.flatnonzero(~moebius & ~enumerate_).tolist():
        _combine_sequential(row, own[row], meet[row][active[row]], belief, plausibility, heaviest)
    for m in np.unique(n_active[enumerate_]):
        rows = np.flatnonzero(enumerate_ & (n_active == m))
        # Active neighbours first, in neighbour order (combination is order-free anyway).
        order = np.argsort(~active[rows], axis=1, kind="stable")[:, :m]
        sets = np.take_along_axis(meet[rows], order[:, :, None], axis=1)
        chunk = max(1, _CHUNK_WORDS // ((1 << int(m)) * n_words))
        for start in range(0, rows.size, chunk):
            part = rows[start : start + chunk]
            _combine_enumerated(
                part,
                pack_sets(own[part], n_words),
                pack_sets(sets[start : start + chunk], n_words),
                own[part],
                holders[part],
                int(m),
                belief,
                plausibility,
                heaviest,
            )
    return _Evidence(belief, plausibility, heaviest)


def _combine_moebius(
    rows: np.ndarray,
    own: np.ndarray,
    meet: np.ndarray,
    active: np.ndarray,
    holders: np.ndarray,
    belief: np.ndarray,
    plausibility: np.ndarray,
    heaviest: dict[int, list[np.ndarray]],
) -> None:
    """Singleton masses and conflict by inclusion-exclusion over commonalities (M <= 48, m <= 33).

    The conjunctive combination has commonality ``Q(B) = 2**(n(B) - m)`` for ``B ⊆ S``,
    where ``n(B)`` counts the active neighbours whose set (within S) contains ``B``. Möbius
    inversion, ``m(B) = sum_{C ⊇ B} (-1)**|C \\ B| Q(C)``, only needs the ``C`` with
    ``n(C) >= 1`` (the others cancel), i.e. subsets of some active set:

    * ``2**m m(∅) = (2**m - 1) + sum_{C ≠ ∅, n(C) >= 1} (-1)**|C| (2**n(C) - 1)``;
    * ``2**m m({y}) = sum_{C ∋ y, n(C) >= 1} (-1)**(|C|-1) (2**n(C) - 1)`` (+1 when S = {y}).

    All sums are of integers below 2**53, hence exact.
    """
    n_rows, n_labels = own.shape
    m = active.sum(axis=1)
    pair_row, pair_col = np.nonzero(active)
    pair_sets = meet[pair_row, pair_col]  # (P, M)
    pair_size = pair_sets.sum(axis=1)
    # Every non-empty subset C of every active set, keyed (row << M) | C so one sort groups them.
    label_bits = np.uint64(n_labels)
    base = pair_row.astype(np.uint64) << label_bits
    keys = []
    for p in np.unique(pair_size):
        sel = pair_size == p
        positions = np.nonzero(pair_sets[sel])[1].reshape(-1, p).astype(np.uint64)
        bits = np.left_shift(np.uint64(1), positions)
        subsets = base[sel][:, None]
        for b in range(int(p)):
            subsets = np.concatenate([subsets, subsets | bits[:, b, None]], axis=1)
        keys.append(subsets[:, 1:].ravel())
    conflict = np.ldexp(1.0, m) - 1
    bel = own * (own.sum(axis=1) == 1)[:, None].astype(np.float64)
    if keys:
        sorted_keys = np.sort(np.concatenate(keys))
        new = np.ones(sorted_keys.size, dtype=bool)
        new[1:] = sorted_keys[1:] != sorted_keys[:-1]
        starts = np.flatnonzero(new)
        n_containing = np.diff(np.append(starts, sorted_keys.size))  # n(C)
        unique_keys = sorted_keys[starts]
        c_rows = (unique_keys >> label_bits).astype(np.intp)
        c_masks = unique_keys & ((np.uint64(1) << label_bits) - np.uint64(1))
        signed = np.where(_popcount(c_masks[:, None]) % 2 == 1, -1.0, 1.0) * (np.ldexp(1.0, n_containing) - 1)
        conflict += np.bincount(c_rows, weights=signed, minlength=n_rows)
        row_start = np.flatnonzero(np.append(True, c_rows[1:] != c_rows[:-1]))
        present = c_rows[row_start]
        for y in range(n_labels):  # 2**m m({y}) = -sum over C holding y of the signed terms
            holds_y = ((c_masks >> np.uint64(y)) & np.uint64(1)).astype(bool)
            bel[present, y] -= np.add.reduceat(np.where(holds_y, signed, 0.0), row_start)
    unit = np.ldexp(1.0, -m)[:, None]
    bel *= unit
    conflict = conflict * unit[:, 0]
    belief[rows] = bel
    plausibility[rows] = np.where(own, np.ldexp(1.0, holders - m[:, None]) + conflict[:, None], 0.0)
    for i in np.flatnonzero(~bel.any(axis=1)):  # no singleton: the focal sets are needed
        row = int(rows[i])
        _combine_sequential(row, own[i], meet[i][active[i]], belief, plausibility, heaviest)


def _combine_enumerated(
    rows: np.ndarray,
    own_words: np.ndarray,
    set_words: np.ndarray,
    own: np.ndarray,
    holders: np.ndarray,
    m: int,
    belief: np.ndarray,
    plausibility: np.ndarray,
    heaviest: dict[int, list[np.ndarray]],
) -> None:
    """Rows with exactly m active neighbours: enumerate the 2**m neighbour subsets."""
    n_rows, n_labels = own.shape
    inter = own_words[:, None, :]
    for j in range(m):
        inter = np.concatenate([inter, inter & set_words[:, j, None, :]], axis=1)
    unit = np.ldexp(1.0, -m)  # mass of one neighbour subset, exact
    size = _popcount(inter)  # (r, 2**m) labels in each intersection
    conflict = (size == 0).sum(axis=1) * unit  # m(∅), moved to S below
    hit_rows, hit_cols = np.nonzero(size == 1)
    words = inter[hit_rows, hit_cols]  # (n_singletons, n_words)
    word = (words != 0).argmax(axis=1)
    bit = np.frexp(words[np.arange(word.size), word].astype(np.float64))[1] - 1  # exact for 2**b
    counts = np.bincount(hit_rows * n_labels + word * 64 + bit, minlength=n_rows * n_labels)
    bel = counts.reshape(n_rows, n_labels) * unit
    own_size = own.sum(axis=1)
    bel[own_size == 1] += own[own_size == 1] * conflict[own_size == 1, None]  # conflict onto S = {y}
    belief[rows] = bel
    plausibility[rows] = np.where(own, np.ldexp(1.0, holders - m) + conflict[:, None], 0.0)
    # Masses are multiples of 2**-m >= 2**-16 > PRUNE_BELOW: nothing to prune or renormalise.
    for i in np.flatnonzero(~bel.any(axis=1)):
        focal = inter[i].copy()
        focal[size[i] == 0] = own_words[i]  # conflict moves to S
        sets, mass = np.unique(focal, axis=0, return_counts=True)
        candidates = sets[mass == mass.max()]
        sizes = _popcount(candidates)
        keys = sorted(_set_key(s) for s in candidates[sizes == sizes.min()])
        heaviest[int(rows[i])] = [_labels_of_key(key) for key in keys]


def _combine_sequential(
    row: int,
    own: np.ndarray,
    active_sets: np.ndarray,
    belief: np.ndarray,
    plausibility: np.ndarray,
    heaviest: dict[int, list[np.ndarray]],
) -> None:
    """One row, sets as Python ints, equal focal sets grouped in a dict (used for m > 16)."""
    mass = _sequential_mass(own, active_sets)
    belief[row] = 0.0
    plausibility[row] = 0.0
    for key, value in mass.items():
        labels = _labels_of_key(key)
        plausibility[row, labels] += value
        if labels.size == 1:
            belief[row, labels[0]] = value
    if not belief[row].any():
        best = max(mass.values())
        heavy = [key for key, value in mass.items() if value == best]
        fewest = min(key.bit_count() for key in heavy)
        heaviest[row] = [_labels_of_key(key) for key in sorted(k for k in heavy if k.bit_count() == fewest)]


def _sequential_mass(own: np.ndarray, active_sets: np.ndarray) -> dict[int, float]:
    """Yager's rule in the paper's hash-map form: combine all, move conflict, prune, renormalise."""
    universe = _set_key(pack_sets(own, (own.size + 63) // 64))
    combined = {universe: 1.0}
    for neighbour in active_sets:
        meet = _set_key(pack_sets(neighbour, (own.size + 63) // 64))
        step: dict[int, float] = {}
        for focal, value in combined.items():
            for other in (meet, universe):
                key = focal & other
                step[key] = step.get(key, 0.0) + value * 0.5
        combined = step
    if 0 in combined:
        combined[universe] = combined.get(universe, 0.0) + combined.pop(0)
    combined = {key: value for key, value in combined.items() if value >= PRUNE_BELOW}
    total = sum(combined.values())
    if total != 1.0:
        combined = {key: value / total for key, value in combined.items()}
    return combined


class _FixedDraws:
    """Stands in for the Generator of :func:`_decide`: hands out pre-drawn uniforms."""

    def __init__(self, draws: np.ndarray):
        self.draws = draws

    def random(self, size: tuple[int, int]) -> np.ndarray:
        if tuple(size) != self.draws.shape:  # pragma: no cover - internal invariant
            raise RuntimeError(f"expected a draw of shape {self.draws.shape}, got {size}")
        return self.draws


#: What :func:`_decide` draws its uniforms from.
_Uniforms = np.random.Generator | _FixedDraws


def _decide(evidence: _Evidence, rng: _Uniforms) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Labels, guess flags and margins from beliefs and plausibilities.

    The label is the one of largest singleton belief. Ties are judged as the authors' code
    does, ``numpy.isclose`` on the beliefs normalised to sum one, and broken with
    ``draws[i, 0]``. When no singleton has mass, one of the heaviest (then smallest) focal
    sets is chosen with ``draws[i, 0]`` and a label inside it with ``draws[i, 1]``. Both are
    guesses. The margin is ``bel(t) - max_{y≠t} pl(y)`` for ``t`` the largest-belief label
    (lowest index on exact ties), which is the prediction whenever it is not a guess.
    """
    bel, pl = evidence.belief, evidence.plausibility
    n_rows, n_labels = bel.shape
    draws = rng.random((n_rows, 2))
    top = bel.argmax(axis=1)
    rows = np.arange(n_rows)
    others = pl.copy()
    others[rows, top] = -np.inf
    margin = bel[rows, top] - (others.max(axis=1) if n_labels > 1 else 0.0)

    total = bel.sum(axis=1, keepdims=True)
    has_singleton = total[:, 0] > 0
    scores = bel / np.where(total > 0, total, 1.0)
    tied = np.isclose(scores, scores.max(axis=1, keepdims=True)) & has_singleton[:, None]
    n_tied = tied.sum(axis=1)
    pick = np.floor(draws[:, 0] * n_tied).astype(np.intp)
    labels = np.where(has_singleton, (np.cumsum(tied, axis=1) > pick[:, None]).argmax(axis=1), 0)
    for row, options in evidence.heaviest.items():
        chosen = options[int(draws[row, 0] * len(options))]
        labels[row] = chosen[int(draws[row, 1] * chosen.size)]
    guess = ~has_singleton | (n_tied > 1)
    return labels.astype(np.intp), guess, margin


def _decisions(evidence: _Evidence, rng: _Uniforms) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``_decide`` plus the reject option: labels, guess flags, accepted flags and margins."""
    labels, guess, margin = _decide(evidence, rng)
    return labels, guess, (margin > 0) & ~guess, margin


def _transductive_evidence(Y: np.ndarray, neighbors: np.ndarray, rows: np.ndarray) -> _Evidence:
    """Evidence about training rows ``rows``: their own sets combined with their neighbours' sets."""
    return _combine(Y[rows], Y[neighbors[rows]])


def transductive_decisions(
    Y: Any, idx: Any, rows: Any = None, *, random_state: Any = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """DST-PLL's transductive label of training rows, without fitting a classifier.

    Each row's own candidate set is combined with the sets of its neighbours in the training
    graph ``idx``, exactly as :meth:`DstPllClassifier.fit` disambiguates the training set
    (with ``idx`` its ``train_neighbors_``). Cheap to repeat for the few rows an answer
    touches: ``O(len(rows) · 2**m · ceil(M/64))``, no neighbour search.

    Parameters
    ----------
    Y : bool array of shape (n_instances, n_labels)
        Current candidate sets.
    idx : int array of shape (n_instances, k)
        Each training row's neighbours (other training rows), e.g. from
        :func:`engine.neighbors.knn_graph` with ``exclude_self=True``.
    rows : int array of shape (r,), optional
        Training rows to decide; all by default.
    random_state : None, int or numpy.random.Generator, default=0
        Seed of the random tie-breaking (a new ``default_rng(random_state)`` per call).

    Returns
    -------
    labels : int array of shape (r,)
        The label of largest singleton belief (drawn at random among ties).
    accepted : bool array of shape (r,)
        ``margin > 0`` and the label is not a random guess.
    margin : float array of shape (r,)
        ``bel(ŷ) - max_{y≠ŷ} pl(y)``.

    Examples
    --------
    Row 0 has the set ``{0, 1}`` and two neighbours ``{0}``: ``m({0}) = 3/4``,
    ``m({0, 1}) = 1/4``, so ``bel(0) - pl(1) = 1/2``.

    >>> import numpy as np
    >>> Y = np.array([[1, 1], [1, 0], [1, 0], [0, 1]], dtype=bool)
    >>> idx = np.array([[1, 2], [0, 2], [0, 1], [0, 1]])
    >>> labels, accepted, margin = transductive_decisions(Y, idx, [0])
    >>> labels.tolist(), accepted.tolist(), margin.tolist()
    ([0], [True], [0.5])
    """
    Y = check_candidates(Y)
    neighbors = check_graph(idx, Y.shape[0], n_rows=Y.shape[0])
    rows = np.arange(Y.shape[0]) if rows is None else _check_rows(rows, Y.shape[0])
    labels, _, accepted, margin = _decisions(
        _transductive_evidence(Y, neighbors, rows), np.random.default_rng(random_state)
    )
    return labels, accepted, margin


def predict_from_neighbors(Y: Any, idx: Any, *, random_state: Any = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """DST-PLL's prediction for new instances whose neighbours in the training set are given.

    Equal to :meth:`DstPllClassifier.predict_with_reject` when ``idx`` holds the
    classifier's neighbours of the instances (a new instance may be any label, so its own
    set is all labels); useful when the neighbour graph is already known.

    Parameters
    ----------
    Y : bool array of shape (n_instances, n_labels)
        Training candidate sets.
    idx : int array of shape (n_targets, k)
        Training rows neighbouring each new instance.
    random_state : None, int or numpy.random.Generator
        Seed of the random tie-breaking.

    Returns
    -------
    labels : int array of shape (n_targets,)
    accepted : bool array of shape (n_targets,)
    margin : float array of shape (n_targets,)
        As in :func:`transductive_decisions`.

    Examples
    --------
    Neighbours ``{0}``, ``{0}`` and ``{0, 1}`` (the last one says nothing about a new
    instance, whose own set is every label):

    >>> import numpy as np
    >>> Y = np.array([[1, 0], [1, 0], [1, 1]], dtype=bool)
    >>> labels, accepted, margin = predict_from_neighbors(Y, np.array([[0, 1, 2]]), random_state=0)
    >>> labels.tolist(), accepted.tolist(), margin.tolist()
    ([0], [True], [0.5])
    """
    Y = check_candidates(Y)
    neighbors = check_graph(idx, Y.shape[0])
    labels, _, accepted, margin = _decisions(
        _combine(*_new_instance_sets(Y, neighbors)), np.random.default_rng(random_state)
    )
    return labels, accepted, margin


def _new_instance_sets(Y: np.ndarray, neighbors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Own sets of new instances (all labels: a new instance may be any) and their neighbours' sets."""
    return np.ones((neighbors.shape[0], Y.shape[1]), dtype=bool), Y[neighbors]


def _check_rows(rows: Any, n: int) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(rows))
    if arr.size == 0:
        return arr.astype(np.intp)
    if arr.ndim != 1 or arr.dtype.kind not in "iu" or ((arr < 0) | (arr >= n)).any():
        raise InvalidInput(f"rows must be training row indices in 0..{n - 1}, got {arr.ravel().tolist()[:10]}")
    return arr.astype(np.intp)


def _check_training_graph(neighbors: Any, n: int, k: int) -> np.ndarray:
    """``neighbors`` as an intp array of shape (n, k) whose row ``i`` does not hold ``i``."""
    graph = check_graph(neighbors, n, n_rows=n, name="neighbors")
    if graph.shape[1] != k:
        raise InvalidInput(f"neighbors has {graph.shape[1]} columns but n_neighbors={k}")
    holds_self = np.flatnonzero((graph == np.arange(n)[:, None]).any(axis=1))
    if holds_self.size:
        row = int(holds_self[0])
        raise InvalidInput(
            f"neighbors row {row} holds the row itself: {graph[row].tolist()}; "
            "a training instance is not its own neighbour"
        )
    return graph


class DstPllClassifier(BaseEstimator):
    """Dempster-Shafer k-NN partial-label classifier with a reject option (DST-PLL [1]_).

    Parameters
    ----------
    n_neighbors : int, default=10
        Number of Euclidean nearest neighbours whose candidate sets are combined.
    random_state : None, int or numpy.random.Generator, default=None
        Seed of the random tie-breaking. Each ``fit`` and each prediction call starts a new
        ``numpy.random.default_rng(random_state)``, so an integer seed gives the same
        labels for the same input every time.

    Attributes
    ----------
    n_features_in_ : int
        Number of features seen in ``fit``.
    n_labels_ : int
        Number of labels ``M`` (columns of the candidate matrix).
    classes_ : ndarray of shape (n_labels,)
        The labels ``0..M-1``.
    candidates_ : ndarray of shape (n_instances, n_labels)
        The training candidate matrix.
    disambiguate_ : ndarray of shape (n_instances,)
        Transductive label of every training instance: its own candidate set combined with
        the evidence of its ``n_neighbors`` nearest *other* training instances.
    disambiguate_accepted_ : ndarray of shape (n_instances,)
        Whether each of those labels passes the reject option (and is not a guess).
    disambiguate_guess_ : ndarray of shape (n_instances,)
        Whether each of those labels was drawn at random among ties.
    disambiguate_belief_, disambiguate_plausibility_ : ndarray of shape (n_instances, n_labels)
        Singleton belief and plausibility behind each transductive label.
    train_neighbors_ : ndarray of shape (n_instances, n_neighbors)
        Each training instance's nearest other training instances.
    disambiguate_margin_ : ndarray of shape (n_instances,)
        ``bel(t) - max_{y≠t} pl(y)`` of each transductive label (see :meth:`decision_margin`).

    Notes
    -----
    A prediction is a *guess* when it was drawn at random: several labels tie for the
    largest singleton belief, or no singleton has any mass and the label was drawn from the
    heaviest focal set. Guesses are never accepted (Theorem 4.2 (i) of [1]_ shows their
    margin is not positive). An accepted label ``ŷ`` has ``bel(ŷ) > pl(y)`` for every
    ``y ≠ ŷ``, so every probability distribution in the credal set of the combined mass
    puts more probability on ``ŷ`` than on any other label (Theorem 4.2 (ii)).

    References
    ----------
    .. [1] T. Fuchs, F. Kalinke and K. Böhm, "Partial-Label Learning with a Reject Option",
           Transactions on Machine Learning Research, 2025.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0], [0.1], [0.2], [5.0], [5.1], [5.2]])
    >>> Y = np.array([[1, 0, 0], [1, 1, 0], [1, 0, 1], [0, 1, 1], [0, 1, 0], [0, 1, 0]], dtype=bool)
    >>> clf = DstPllClassifier(n_neighbors=3, random_state=0).fit(X, Y)
    >>> clf.predict_with_reject([[0.05], [5.05]])
    (array([0, 1]), array([ True,  True]))
    >>> bel, pl = clf.belief_plausibility([[0.05]])
    >>> bel.tolist(), pl.tolist()
    ([[0.625, 0.0, 0.0]], [[1.0, 0.25, 0.25]])
    """

    def __init__(self, n_neighbors: int = 10, *, random_state: Any = None) -> None:
        self.n_neighbors = n_neighbors
        self.random_state = random_state

    def fit(self, X: Any, Y: Any, *, neighbors: Any = None) -> DstPllClassifier:
        """Index the training set and disambiguate every training instance.

        Parameters
        ----------
        X : array-like of shape (n_instances, n_features)
            Finite training features.
        Y : array-like of shape (n_instances, n_labels)
            Boolean (or 0/1) candidate matrix; every row holds at least one candidate.
        neighbors : int array-like of shape (n_instances, n_neighbors), optional
            Each training instance's nearest *other* training instances, when they are known
            already (e.g. a graph from :func:`engine.neighbors.knn_graph` with
            ``exclude_self=True`` that was stored): the training set is then disambiguated on
            them and no neighbour search runs. By default they are searched exactly.

        Returns
        -------
        self : DstPllClassifier
        """
        X, Y = check_training_data(X, Y)
        check_scalar(self.n_neighbors, "n_neighbors", kind=Integral, min_value=1)
        if self.n_neighbors >= X.shape[0]:
            raise InvalidInput(
                f"n_neighbors={self.n_neighbors} must be smaller than the number of training instances "
                f"({X.shape[0]}): each instance is combined with its n_neighbors nearest other instances"
            )
        if neighbors is not None:
            neighbors = _check_training_graph(neighbors, X.shape[0], int(self.n_neighbors))
        # The index serves predictions for new instances; fitting it searches nothing.
        self.nn_ = NearestNeighbors(n_neighbors=int(self.n_neighbors)).fit(X)
        self.candidates_ = Y
        self.n_features_in_ = X.shape[1]
        self.n_labels_ = Y.shape[1]
        self.classes_ = np.arange(Y.shape[1])
        # Without a query, scikit-learn leaves every row out of its own neighbourhood by index
        # (not by distance), so exact duplicates stay neighbours of each other.
        self.train_neighbors_ = self.nn_.kneighbors(return_distance=False) if neighbors is None else neighbors
        self._reverse_neighbors: ReverseIndex | None = None  # built on the first update_candidates
        n = Y.shape[0]
        self.disambiguate_ = np.empty(n, dtype=np.intp)
        self.disambiguate_guess_ = np.empty(n, dtype=bool)
        self.disambiguate_accepted_ = np.empty(n, dtype=bool)
        # Kept for the expert's reject queue, which shows why a training label is refused.
        self.disambiguate_belief_ = np.empty(Y.shape)
        self.disambiguate_plausibility_ = np.empty(Y.shape)
        self.disambiguate_margin_ = np.empty(n)
        self._disambiguate(np.arange(n))
        return self

    def _disambiguate(self, rows: np.ndarray) -> None:
        """Recompute the ``disambiguate_*`` attributes of training rows ``rows``."""
        evidence = _transductive_evidence(self.candidates_, self.train_neighbors_, rows)
        labels, guess, accepted, margin = _decisions(evidence, np.random.default_rng(self.random_state))
        self.disambiguate_[rows] = labels
        self.disambiguate_guess_[rows] = guess
        self.disambiguate_accepted_[rows] = accepted
        self.disambiguate_belief_[rows] = evidence.belief
        self.disambiguate_plausibility_[rows] = evidence.plausibility
        self.disambiguate_margin_[rows] = margin

    def update_candidates(self, rows: Any, candidates: Any) -> np.ndarray:
        """Change some training candidate sets and redo only the disambiguations they touch.

        After an expert settles instances, only those instances and the ones that have them
        among their neighbours can change, so this costs O(affected · k · M) instead of a
        refit. Beliefs, plausibilities, margins and accepted labels then equal a refit on the
        new sets exactly; a *guess* (a tie drawn at random) may be drawn differently.

        Parameters
        ----------
        rows : array-like of int, shape (r,)
            Training rows to change.
        candidates : array-like of shape (r, n_labels), bool
            Their new candidate sets.

        Returns
        -------
        affected : ndarray of int
            The training rows whose ``disambiguate_*`` values were recomputed.
        """
        self.check_fitted()
        rows = _check_rows(rows, self.candidates_.shape[0])
        new = check_candidates(np.atleast_2d(candidates), name="candidates", n_rows=rows.size)
        if new.shape[1] != self.n_labels_:
            raise InvalidInput(
                f"candidates has {new.shape[1]} label columns but the classifier was fitted with {self.n_labels_}"
            )
        Y = self.candidates_.copy()  # never write into the array the caller passed to fit
        Y[rows] = new
        self.candidates_ = Y
        if self._reverse_neighbors is None:
            self._reverse_neighbors = ReverseIndex(self.train_neighbors_, Y.shape[0])
        affected = np.union1d(rows, self._reverse_neighbors.rows_holding_any(rows))
        self._disambiguate(affected)
        return affected

    # -- prediction ---------------------------------------------------------------------

    def check_fitted(self) -> None:
        """Raise :class:`~engine.exceptions.NotFittedError` unless :meth:`fit` has run."""
        check_is_fitted(self, "nn_")

    def _query_sets(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """Own sets and neighbour sets of new instances (validated here)."""
        X = check_query(self, X, attribute="nn_")
        return _new_instance_sets(self.candidates_, self.nn_.kneighbors(X, return_distance=False))

    def _evidence(self, X: Any) -> _Evidence:
        return _combine(*self._query_sets(X))

    def decide_with_draws(self, X: Any, draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``predict_with_reject`` with the tie-breaking uniforms given instead of drawn.

        ``predict_with_reject(X)`` equals ``decide_with_draws(X, rng.random((len(X), 2)))``
        with ``rng = numpy.random.default_rng(random_state)``; splitting ``X`` into chunks
        and the draws alike gives the same labels, which is how
        :func:`engine.distributed.distributed_predict_with_reject` reproduces the
        single-process stream on workers.

        Parameters
        ----------
        X : array-like of shape (n_targets, n_features)
        draws : float array of shape (n_targets, 2)
            Uniforms in [0, 1): column 0 picks among tied labels or focal sets, column 1 a
            label inside a focal set.

        Returns
        -------
        labels : ndarray of shape (n_targets,)
        accepted : ndarray of shape (n_targets,)
        """
        evidence = self._evidence(X)
        draws = np.asarray(draws, dtype=np.float64)
        if draws.shape != (evidence.belief.shape[0], 2):
            raise InvalidInput(f"draws must have shape ({evidence.belief.shape[0]}, 2), got {draws.shape}")
        labels, _, accepted, _ = _decisions(evidence, _FixedDraws(draws))
        return labels, accepted

    def predict_with_reject(
        self, X: Any, *, return_guess: bool = False
    ) -> tuple[np.ndarray, np.ndarray] | tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Predict labels and whether each prediction is accepted by the reject option.

        Parameters
        ----------
        X : array-like of shape (n_targets, n_features)
            New instances.
        return_guess : bool, default=False
            Also return which labels were drawn at random among ties.

        Returns
        -------
        labels : ndarray of shape (n_targets,)
            Predicted labels.
        accepted : ndarray of shape (n_targets,)
            True when ``bel(ŷ) - max_{y≠ŷ} pl(y) > 0`` and ``ŷ`` is not a guess.
        guess : ndarray of shape (n_targets,), only with ``return_guess=True``
            True when ``ŷ`` was drawn at random among tied labels or focal sets.
        """
        labels, guess, accepted, _ = _decisions(self._evidence(X), np.random.default_rng(self.random_state))
        return (labels, accepted, guess) if return_guess else (labels, accepted)

    def predict(self, X: Any) -> np.ndarray:
        """Predict a label for every row of ``X`` (rejected ones included).

        Parameters
        ----------
        X : array-like of shape (n_targets, n_features)

        Returns
        -------
        labels : ndarray of shape (n_targets,)
        """
        return self.predict_with_reject(X)[0]

    def belief_plausibility(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """Singleton belief ``m({y})`` and plausibility of every label.

        Parameters
        ----------
        X : array-like of shape (n_targets, n_features)

        Returns
        -------
        belief : ndarray of shape (n_targets, n_labels)
        plausibility : ndarray of shape (n_targets, n_labels)
        """
        evidence = self._evidence(X)
        return evidence.belief, evidence.plausibility

    def decision_margin(self, X: Any) -> np.ndarray:
        """``bel(t) - max_{y≠t} pl(y)`` for ``t`` the label of largest belief (lowest index on ties).

        Positive exactly when the prediction is accepted, except for guesses, which are
        never accepted. The value does not depend on random tie-breaking.

        Parameters
        ----------
        X : array-like of shape (n_targets, n_features)

        Returns
        -------
        margin : ndarray of shape (n_targets,)
        """
        return _decide(self._evidence(X), np.random.default_rng(0))[2]

    def mass_functions(self, X: Any = None) -> list[dict[frozenset[int], float]]:
        """The combined mass function of every row, as ``{focal set: mass}``.

        For inspection and tests; slow (one dict per row).

        Parameters
        ----------
        X : array-like of shape (n_targets, n_features), optional
            New instances; ``None`` gives the training instances as disambiguated by ``fit``.

        Returns
        -------
        masses : list of dict
            One dict per row mapping a frozenset of labels to its mass (only focal sets).
        """
        if X is None:
            self.check_fitted()
            own, neighbour_sets = self.candidates_, self.candidates_[self.train_neighbors_]
        else:
            own, neighbour_sets = self._query_sets(X)
        meet, active = _active_sets(own, neighbour_sets)
        n_words = (self.n_labels_ + 63) // 64
        out = []
        for row in range(own.shape[0]):
            sets = meet[row][active[row]]
            if sets.shape[0] > _ENUMERATION_MAX_ACTIVE:
                mass = _sequential_mass(own[row], sets)
            else:
                inter = pack_sets(own[row], n_words)[None, :]
                for word in pack_sets(sets, n_words):
                    inter = np.concatenate([inter, inter & word], axis=0)
                inter[_popcount(inter) == 0] = pack_sets(own[row], n_words)
                focal, count = np.unique(inter, axis=0, return_counts=True)
                mass = {_set_key(f): float(np.ldexp(c, -sets.shape[0])) for f, c in zip(focal, count, strict=True)}
            out.append({frozenset(_labels_of_key(key).tolist()): value for key, value in mass.items()})
        return out
