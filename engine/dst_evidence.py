"""DST-PLL's evidence: the Yager combination of neighbours' candidate sets and the decisions
it gives, with no scikit-learn import.

The mathematics, the exact shortcuts and the complexity are in :mod:`engine.dst`, whose
classifier (:class:`engine.dst.DstPllClassifier`) is built on these kernels. They live apart
so that code which only decides training rows on a known graph (the service layer bringing a
session's model labels up to date, :func:`transductive_decisions`) does not load
scikit-learn, about a second of a command's start.

References
----------
.. [1] T. Fuchs, F. Kalinke and K. Böhm, "Partial-Label Learning with a Reject Option",
       Transactions on Machine Learning Research, 2025. arXiv:2402.00592.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine._kernels import pack_sets
from engine._validation import check_candidates, check_graph
from engine.exceptions import InvalidInput

__all__ = [
    "PRUNE_BELOW",
    "DECISION_BLOCK_ROWS",
    "ENUMERATION_MAX_ACTIVE",
    "Evidence",
    "FixedDraws",
    "Uniforms",
    "active_sets",
    "combine",
    "decide",
    "decisions",
    "transductive_evidence",
    "transductive_decisions",
    "predict_from_neighbors",
    "new_instance_sets",
    "check_rows",
    "check_training_graph",
    "sequential_mass",
    "popcount",
    "set_key",
    "labels_of_key",
]

PRUNE_BELOW = 1e-10
"""Focal sets whose mass is below this after the conflict move are dropped (as in [1]'s code)."""

ENUMERATION_MAX_ACTIVE = 16  # at most this many active neighbours: 2**m subsets may be enumerated
_EXACT_MAX_ACTIVE = 33  # 2**-33 > PRUNE_BELOW: up to here no mass can be pruned
_SUBSET_WORK_MAX = float(1 << 16)
_MOEBIUS_MAX_LABELS = (
    48  # keys (row << M) | subset need spare bits for the row  # per-row bound on the Moebius kernel's subsets
)
_CHUNK_WORDS = 1 << 20  # bound on rows * 2**m * words held at once by the enumeration
#: Rows whose evidence :func:`transductive_decisions` holds at once (belief and plausibility
#: are ``rows × labels`` floats each: 20 MB per array at 20 labels).
DECISION_BLOCK_ROWS = 1 << 17

if hasattr(np, "bitwise_count"):  # numpy >= 2.0

    def popcount(words: np.ndarray) -> np.ndarray:
        counts: np.ndarray = np.bitwise_count(words).sum(axis=-1, dtype=np.int64)
        return counts

else:  # pragma: no cover - numpy 1.26
    _BYTE_POPCOUNT = np.array([bin(b).count("1") for b in range(256)], dtype=np.int64)

    def popcount(words: np.ndarray) -> np.ndarray:
        as_bytes = words.view(np.uint8).reshape(*words.shape[:-1], -1)
        counts: np.ndarray = _BYTE_POPCOUNT[as_bytes].sum(axis=-1)
        return counts


def set_key(words: np.ndarray) -> int:
    """The integer sum(2**label) of one packed set (the order ties between focal sets follow)."""
    return sum(int(word) << (64 * w) for w, word in enumerate(words))


def labels_of_key(key: int) -> np.ndarray:
    return np.array([y for y in range(key.bit_length()) if key >> y & 1], dtype=np.intp)


class Evidence:
    """Combined evidence of a batch: belief and plausibility, plus what ties need."""

    def __init__(self, belief: np.ndarray, plausibility: np.ndarray, heaviest: dict[int, list[np.ndarray]]):
        self.belief = belief
        self.plausibility = plausibility
        # Rows with no singleton mass: the focal sets of largest mass and, among those, fewest
        # labels, as label arrays ordered by sum(2**label).
        self.heaviest = heaviest


def active_sets(own: np.ndarray, neighbour_sets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """S ∩ N_j for every neighbour and whether the neighbour is active (not empty, not S)."""
    meet = neighbour_sets & own[:, None, :]
    active = meet.any(axis=2) & (meet != own[:, None, :]).any(axis=2)
    return meet, active


def combine(own: np.ndarray, neighbour_sets: np.ndarray, *, path: str = "auto") -> Evidence:
    """Yager-combine the evidence of every row; own (r, M) and neighbour_sets (r, k, M) bool.

    Every row goes to one of three exact kernels, all giving the same numbers: ``"moebius"``
    (commonality inclusion-exclusion over the subsets of the neighbours' sets, cheap when
    the sets are small), ``"enumerate"`` (all ``2**m`` neighbour subsets) and
    ``"sequential"`` (hash-map combination, the only one that may have to prune). ``path``
    forces one where it applies (tests); ``"auto"`` picks the cheapest.
    """
    n_rows, n_labels = own.shape
    meet, active = active_sets(own, neighbour_sets)
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
        & (n_active > ENUMERATION_MAX_ACTIVE)
        & (subset_work <= _SUBSET_WORK_MAX)
    )
    enumerate_ = ~moebius & (n_active <= ENUMERATION_MAX_ACTIVE)
    if path == "moebius":
        moebius, enumerate_ = exact_counts & (n_labels <= _MOEBIUS_MAX_LABELS), np.zeros(n_rows, dtype=bool)
    elif path == "enumerate":
        moebius, enumerate_ = np.zeros(n_rows, dtype=bool), n_active <= ENUMERATION_MAX_ACTIVE
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
    return Evidence(belief, plausibility, heaviest)


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
        signed = np.where(popcount(c_masks[:, None]) % 2 == 1, -1.0, 1.0) * (np.ldexp(1.0, n_containing) - 1)
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
    size = popcount(inter)  # (r, 2**m) labels in each intersection
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
        sizes = popcount(candidates)
        keys = sorted(set_key(s) for s in candidates[sizes == sizes.min()])
        heaviest[int(rows[i])] = [labels_of_key(key) for key in keys]


def _combine_sequential(
    row: int,
    own: np.ndarray,
    active_sets: np.ndarray,
    belief: np.ndarray,
    plausibility: np.ndarray,
    heaviest: dict[int, list[np.ndarray]],
) -> None:
    """One row, sets as Python ints, equal focal sets grouped in a dict (used for m > 16)."""
    mass = sequential_mass(own, active_sets)
    belief[row] = 0.0
    plausibility[row] = 0.0
    for key, value in mass.items():
        labels = labels_of_key(key)
        plausibility[row, labels] += value
        if labels.size == 1:
            belief[row, labels[0]] = value
    if not belief[row].any():
        best = max(mass.values())
        heavy = [key for key, value in mass.items() if value == best]
        fewest = min(key.bit_count() for key in heavy)
        heaviest[row] = [labels_of_key(key) for key in sorted(k for k in heavy if k.bit_count() == fewest)]


def sequential_mass(own: np.ndarray, active_sets: np.ndarray) -> dict[int, float]:
    """Yager's rule in the paper's hash-map form: combine all, move conflict, prune, renormalise."""
    universe = set_key(pack_sets(own, (own.size + 63) // 64))
    combined = {universe: 1.0}
    for neighbour in active_sets:
        meet = set_key(pack_sets(neighbour, (own.size + 63) // 64))
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


class FixedDraws:
    """Stands in for the Generator of :func:`decide`: hands out pre-drawn uniforms."""

    def __init__(self, draws: np.ndarray):
        self.draws = draws

    def random(self, size: tuple[int, int]) -> np.ndarray:
        if tuple(size) != self.draws.shape:  # pragma: no cover - internal invariant
            raise RuntimeError(f"expected a draw of shape {self.draws.shape}, got {size}")
        return self.draws


#: What :func:`decide` draws its uniforms from.
Uniforms = np.random.Generator | FixedDraws


def decide(evidence: Evidence, rng: Uniforms) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def decisions(evidence: Evidence, rng: Uniforms) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``decide`` plus the reject option: labels, guess flags, accepted flags and margins."""
    labels, guess, margin = decide(evidence, rng)
    return labels, guess, (margin > 0) & ~guess, margin


def transductive_evidence(Y: np.ndarray, neighbors: np.ndarray, rows: np.ndarray) -> Evidence:
    """Evidence about training rows ``rows``: their own sets combined with their neighbours' sets."""
    return combine(Y[rows], Y[neighbors[rows]])


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
    rows = np.arange(Y.shape[0]) if rows is None else check_rows(rows, Y.shape[0])
    # In blocks of rows, with the uniforms of one draw for all rows (what a single batch
    # draws): the same labels as one batch, without holding every row's evidence at once.
    draws = np.random.default_rng(random_state).random((rows.size, 2))
    labels = np.empty(rows.size, dtype=np.intp)
    accepted = np.empty(rows.size, dtype=bool)
    margin = np.empty(rows.size, dtype=np.float64)
    for start in range(0, rows.size, DECISION_BLOCK_ROWS):
        block = slice(start, start + DECISION_BLOCK_ROWS)
        evidence = transductive_evidence(Y, neighbors, rows[block])
        labels[block], _, accepted[block], margin[block] = decisions(evidence, FixedDraws(draws[block]))
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
    labels, _, accepted, margin = decisions(
        combine(*new_instance_sets(Y, neighbors)), np.random.default_rng(random_state)
    )
    return labels, accepted, margin


def new_instance_sets(Y: np.ndarray, neighbors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Own sets of new instances (all labels: a new instance may be any) and their neighbours' sets."""
    return np.ones((neighbors.shape[0], Y.shape[1]), dtype=bool), Y[neighbors]


def check_rows(rows: Any, n: int) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(rows))
    if arr.size == 0:
        return arr.astype(np.intp)
    if arr.ndim != 1 or arr.dtype.kind not in "iu" or ((arr < 0) | (arr >= n)).any():
        raise InvalidInput(f"rows must be training row indices in 0..{n - 1}, got {arr.ravel().tolist()[:10]}")
    return arr.astype(np.intp)


def check_training_graph(neighbors: Any, n: int, k: int) -> np.ndarray:
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
