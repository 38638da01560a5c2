"""Vote kernels shared by the engine modules; they trust their input.

The public functions of :mod:`engine.winners`, :mod:`engine.query`,
:mod:`engine.distributed` and :mod:`engine._possible` validate once and then call these.
Everything here is vectorised over targets and works on the neighbour graph ``(idx, w)``
of shape (n_targets, k) and the candidate sets, encoded once per ``Y`` as
:class:`CandidateSets`.

Vote totals are always summed in neighbour order, so that the same multiset of weights in
the same order gives bit-identical totals wherever they are compared; float weights are
compared exactly (ties count as wins).

The definitions and their references are in :mod:`engine.winners` (NL, APL) and
:mod:`engine.learners.plknn` (the PL-kNN vote).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = [
    "CHUNK_TARGETS",
    "CandidateSets",
    "approx_possible",
    "argmax_random_ties",
    "bounds",
    "candidate_votes",
    "counts_suffice",
    "encode",
    "label_sets",
    "label_sets_and_open_bounds",
    "local_graph",
    "necessary",
    "normalise_rows",
    "open_rows",
    "pack_sets",
    "reverse_index",
    "sums_are_exact",
    "top_two",
    "vote_counts",
]

#: Targets per chunk in the vectorised kernels: large enough to amortise numpy's
#: per-call overhead, small enough that the per-chunk temporaries stay in cache-sized MBs.
CHUNK_TARGETS = 32_768


class CandidateSets(NamedTuple):
    """Candidate sets in the layouts the kernels need, built once per ``Y``."""

    dense: np.ndarray  # bool (n, M)
    sizes: np.ndarray  # int (n,)
    labels: np.ndarray  # int (Σ sizes,): the labels of row 0, then row 1, ...
    start: np.ndarray  # int (n,): where row i's labels begin in ``labels``
    members: np.ndarray  # uint8 (n, 2M): [y_i | y_i if precise else 0], for counting votes

    @classmethod
    def from_dense(cls, Y: np.ndarray) -> CandidateSets:
        sizes = Y.sum(axis=1)
        members = np.concatenate([Y, Y & (sizes == 1)[:, None]], axis=1).view(np.uint8)
        return cls(Y, sizes, np.nonzero(Y)[1], np.concatenate([[0], np.cumsum(sizes)[:-1]]), members)


def encode(Y: np.ndarray | CandidateSets) -> CandidateSets:
    """``Y`` as :class:`CandidateSets` (unchanged when it already is)."""
    return Y if isinstance(Y, CandidateSets) else CandidateSets.from_dense(Y)


def local_graph(idx: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, CandidateSets]:
    """The neighbourhoods renumbered ``0..m-1`` over the ``m`` rows they use, and those rows' sets.

    Encoding only the rows some target uses makes the cost follow the targets, not the
    size of ``Y`` (one target of a large dataset, or the targets an answer touches).
    """
    items, local = np.unique(idx, return_inverse=True)
    return local.reshape(idx.shape), CandidateSets.from_dense(Y[items])


def reverse_index(idx: np.ndarray, n_instances: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR reverse of a neighbour graph: ``rows[ptr[i]:ptr[i + 1]]`` hold training row ``i``.

    Rows come out ascending within each training row (stable sort of the flat positions);
    a target that holds a row twice appears twice.
    """
    flat = idx.ravel()
    order = np.argsort(flat, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(flat, minlength=n_instances))])
    return ptr, (order // max(idx.shape[1], 1)).astype(np.intp)


def sums_are_exact(w: np.ndarray) -> bool:
    """True when every partial sum of a row's weights is exact in float64.

    Then any summation order, and adding or removing a weight, gives bit for bit the
    neighbour-order sum. Holds for equal weights, small integers and dyadic fractions: all
    weights are multiples of 2**-30 and a row's total stays below 2**52 of those units.
    """
    units = w * 2.0**30
    return bool(np.all(units == np.round(units)) and np.all(units.sum(axis=1) < 2.0**52))


def counts_suffice(w: np.ndarray) -> bool:
    """Each row's weights are equal and exact, so a bound is (vote count) x (row weight)."""
    return w.shape[1] < 2**15 and bool(np.all(w == w[:, :1])) and sums_are_exact(w)


def vote_counts(idx: np.ndarray, table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per target, how many neighbours must vote each label (cmin) and can vote it (cmax).

    One gather of small uint8 rows per neighbour position: the cheapest pass over the data.
    ``table`` is :attr:`CandidateSets.members`.
    """
    n_labels = table.shape[1] // 2
    dtype = np.uint8 if idx.shape[1] < 256 else np.uint16
    counts = table[idx[:, 0]].astype(dtype)
    for j in range(1, idx.shape[1]):
        counts += table[idx[:, j]]
    return counts[:, n_labels:].astype(np.int16), counts[:, :n_labels].astype(np.int16)


def bounds(idx: np.ndarray, w: np.ndarray, Y: np.ndarray | CandidateSets) -> tuple[np.ndarray, np.ndarray]:
    """``Smin`` and ``Smax`` of every (target, label): float arrays of shape (n_targets, n_labels)."""
    # Scatter-add with np.bincount: a precise neighbour adds its weight to one (target,
    # label) cell of Smin and Smax, a partial one to one cell of Smax per label of its set.
    # bincount sums each cell in input order, i.e. in neighbour order, so totals are
    # bit-identical to a left-to-right sum (adding 0.0 for non-members changes nothing).
    sets = encode(Y)
    sizes, set_labels, set_start = sets.sizes, sets.labels, sets.start
    n_targets, k = idx.shape
    n_labels = sets.dense.shape[1]
    smin = np.empty((n_targets, n_labels))
    smax = np.empty((n_targets, n_labels))
    if counts_suffice(w):
        # Equal exact weights: count votes in uint8 and scale; same values, a third the time.
        for start in range(0, n_targets, CHUNK_TARGETS):
            rows = slice(start, start + CHUNK_TARGETS)
            cmin, cmax = vote_counts(idx[rows], sets.members)
            np.multiply(cmin, w[rows, :1], out=smin[rows])
            np.multiply(cmax, w[rows, :1], out=smax[rows])
        return smin, smax
    for start in range(0, n_targets, CHUNK_TARGETS):
        rows = slice(start, start + CHUNK_TARGETS)
        items, weights = idx[rows].ravel(), w[rows].ravel()
        cell_base = np.repeat(np.arange(items.size // k) * n_labels, k)
        n_cells = (items.size // k) * n_labels

        precise = sizes[items] == 1
        first_label = set_labels[set_start[items]]
        cells = cell_base[precise] + first_label[precise]
        smin[rows] = np.bincount(cells, weights[precise], minlength=n_cells).reshape(-1, n_labels)

        counts = sizes[items]
        offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        labels = set_labels[np.repeat(set_start[items], counts) + offsets]
        cells = np.repeat(cell_base, counts) + labels
        smax[rows] = np.bincount(cells, np.repeat(weights, counts), minlength=n_cells).reshape(-1, n_labels)
    return smin, smax


def top_two(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of a 2-D array: the arg-max (lowest index on ties), the largest and the second largest value.

    The second largest is taken over the other columns, so it equals the largest when the
    maximum is tied; with one column it is the dtype's lowest value (``-inf`` for floats).
    """
    rows = np.arange(values.shape[0])
    arg = values.argmax(axis=1)
    first = values[rows, arg]
    masked = values.copy()
    masked[rows, arg] = np.iinfo(values.dtype).min if values.dtype.kind == "i" else -np.inf
    return arg, first, masked.max(axis=1)


def necessary(smin: np.ndarray, smax: np.ndarray) -> np.ndarray:
    """``NL``: bool array of shape (n_targets, n_labels) from the bounds (or vote counts)."""
    # λ ∈ NL ⟺ Smin(λ) ≥ max_{λ'≠λ} Smax(λ'). Since Smin ≤ Smax, that is: Smin(λ) reaches
    # the largest Smax (then λ ties for it), or λ is the unique arg-max of Smax and Smin(λ)
    # reaches the second largest Smax.
    rows = np.arange(smax.shape[0])
    arg, first, second = top_two(smax)
    result = smin >= first[:, None]
    unique = (second < first) & (smin[rows, arg] >= second)
    result[rows[unique], arg[unique]] = True
    return result


def approx_possible(smin: np.ndarray, smax: np.ndarray) -> np.ndarray:
    """``APL``: bool array of shape (n_targets, n_labels) from the bounds (or vote counts)."""
    # λ ∈ APL ⟺ Smax(λ) ≥ max_{λ'≠λ} Smin(λ'), which (as Smax ≥ Smin) equals
    # Smax(λ) ≥ max_λ' Smin(λ'): the label holding the largest Smin passes either way.
    result: np.ndarray = smax >= smin.max(axis=1, keepdims=True)
    return result


def open_rows(nl: np.ndarray, apl: np.ndarray) -> np.ndarray:
    """Bool array of shape (n_targets,): ``NL ≠ APL`` (the target's decision can still move)."""
    rows: np.ndarray = (nl != apl).any(axis=1)
    return rows


def _row_counts(idx: np.ndarray, w: np.ndarray, sets: CandidateSets) -> tuple[np.ndarray, np.ndarray]:
    # Vote counts standing in for the bounds of equal-weight rows: NL and APL compare the
    # bounds of one row only, so counts give the same sets. A zero-weight row has all
    # bounds 0, so its counts are zeroed too.
    cmin, cmax = vote_counts(idx, sets.members)
    silent = w[:, 0] == 0
    cmin[silent] = 0
    cmax[silent] = 0
    return cmin, cmax


def label_sets(idx: np.ndarray, w: np.ndarray, Y: np.ndarray | CandidateSets) -> tuple[np.ndarray, np.ndarray]:
    """``NL`` and ``APL`` from one bounds pass (vote counts when the weights allow)."""
    sets = encode(Y)
    low, high = _row_counts(idx, w, sets) if counts_suffice(w) else bounds(idx, w, sets)
    return necessary(low, high), approx_possible(low, high)


def label_sets_and_open_bounds(
    idx: np.ndarray, w: np.ndarray, sets: CandidateSets
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Bounds, NL, APL and the open rows (NL ≠ APL; an answer keeps NL ⊆ NL' ⊆ APL' ⊆ APL).

    Returns ``(smin, smax, nl, apl, open_rows)``; with equal weights per row the float
    bounds are filled for the open rows only (the others are never looked at again).
    """
    if not counts_suffice(w):
        smin, smax = bounds(idx, w, sets)
        nl, apl = necessary(smin, smax), approx_possible(smin, smax)
        return smin, smax, nl, apl, np.flatnonzero(open_rows(nl, apl))
    cmin, cmax = _row_counts(idx, w, sets)
    nl, apl = necessary(cmin, cmax), approx_possible(cmin, cmax)
    rows = np.flatnonzero(open_rows(nl, apl))
    smin = np.zeros(cmin.shape)
    smax = np.zeros(cmax.shape)
    smin[rows] = cmin[rows] * w[rows, :1]
    smax[rows] = cmax[rows] * w[rows, :1]
    return smin, smax, nl, apl, rows


def candidate_votes(idx: np.ndarray, w: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """The PL-kNN vote: ``votes[t, λ]`` sums the weights of ``t``'s neighbours whose set holds ``λ``.

    Float array of shape (n_targets, n_labels) (Hüllermeier & Beringer 2006). Computed
    :data:`CHUNK_TARGETS` targets at a time: the neighbours' sets as floats would take
    ``8 k M`` bytes per target at once (1.6 GB for 1M targets, k = 10, M = 20); each row's
    sum is the same either way.
    """
    votes = np.empty((idx.shape[0], Y.shape[1]))
    for start in range(0, idx.shape[0], CHUNK_TARGETS):
        rows = slice(start, start + CHUNK_TARGETS)
        votes[rows] = np.einsum("tk,tkm->tm", w[rows], Y[idx[rows]].astype(np.float64))
    return votes


def normalise_rows(values: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """Rows of non-negative ``values`` scaled to sum to one; all-zero rows take ``fallback``'s row."""
    total = values.sum(axis=1, keepdims=True)
    return np.where(total > 0, values / np.where(total > 0, total, 1.0), fallback)


def argmax_random_ties(scores: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Row-wise arg-max; among exactly tied maxima one is picked uniformly with ``rng``."""
    is_max = scores == scores.max(axis=1, keepdims=True)
    keys = np.where(is_max, rng.random(scores.shape), -1.0)
    picked: np.ndarray = keys.argmax(axis=1)
    return picked


def pack_sets(sets: np.ndarray, n_words: int) -> np.ndarray:
    """Bool sets of shape (..., M) as uint64 words of shape (..., n_words); bit b of word w is
    label 64 w + b (so a set's words are compared, intersected and counted without loops)."""
    packed = np.packbits(sets, axis=-1, bitorder="little")
    pad = n_words * 8 - packed.shape[-1]
    if pad:
        packed = np.concatenate([packed, np.zeros((*packed.shape[:-1], pad), dtype=np.uint8)], axis=-1)
    return np.ascontiguousarray(packed).view("<u8").astype(np.uint64, copy=False)
