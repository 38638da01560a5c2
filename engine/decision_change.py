"""Expected number of k-NN decisions an answer changes: which partial item to settle first.

What is computed
----------------
Settling training item ``n`` replaces its candidate set ``y_n`` by one label ``λ ∈ y_n``.
Nguyen et al.'s local score ``f_n(t)`` [1]_ asks whether *some* answer changes target
``t``'s decision (its ``NL``/``APL``); the global score counts those targets. Two things are
left out there, and both are what this score adds: *how likely* each answer is, and the
decision about ``n``'s own label. The score is the **expected number of decisions the answer
changes**, counted in one unit (a decision changes by the total-variation distance between
the randomised decisions before and after, 1 for a clean flip, 1/2 for a two-way tie that
resolves):

1. **The answer's law.** ``n``'s true label lies in ``y_n``; its posterior is the PL-kNN vote
   of ``n``'s ``k`` neighbours *restricted to the candidate set*, plus the item's own set as
   one ballot of the mean neighbour weight spread evenly over ``y_n`` (DST-PLL's ``m(S)``
   [5]_: every candidate stays possible when no neighbour votes for it)::

       p_n(λ) ∝ [λ ∈ y_n] · ( Σ_j w_nj [λ ∈ y_{nj}] + w̄_n / |y_n| )

2. **n's own decision.** The decision about ``n``'s label is uniform over the arg-max of
   ``p_n``; the answer replaces it by ``{λ}``. The expected change is ``u_n = 1 − max p_n``
   (least confidence on the candidates; 0 for a precise item).
3. **The decisions n votes in.** A target ``t`` (each training item stands for the part of the
   data around it, so the targets are a sample of the data distribution) is decided by its
   PL-kNN vote ``V_t(μ) = Σ_j w_tj [μ ∈ y_{tj}]``, the decision rule of the evaluation:
   uniform over the labels tied for the most votes, ``D_t``. Answering ``λ`` at a neighbour of
   weight ``a`` removes ``a`` from ``V_t(μ)`` for ``μ ∈ y_n \\ {λ}`` and nothing else, giving
   ``D_t^{n←λ}``. The expected change at ``t`` is
   ``c_{t,n} = Σ_λ p_n(λ) · TV(D_t, D_t^{n←λ})``.

The score is ``s_n = u_n + Σ_{t : n ∈ N_t} c_{t,n}`` (expected model-output change [3]_ with
the k-NN's own decisions as the outputs, in closed form because a k-NN answer moves only the
votes of the targets that hold ``n``). ``c_{t,n} > 0`` exactly when some answer with positive
probability changes ``t``'s decision, so the sum is a probability-weighted version of the
``apl`` count; density and representativeness enter through the sum over the *reverse*
neighbours (an item that votes in many decisions can change many of them), as in the
neighbour-participation criterion of [2]_ and the density weighting of McPAL [4]_, from the
graph already built (no new neighbour search). Where ``apl`` scores most items 0 and orders
them at random, ``u_n`` still orders them by how uncertain their own label is among its
candidates, and ``c`` by how likely an answer is to move a decision at all.

Batches (:meth:`DecisionChangeRanker.select`): greedy. After picking ``n`` the targets that
hold ``n`` are *claimed*: their terms ``c_{t,m}`` are taken off every other item ``m`` for the
rest of the batch, so each decision is counted once per batch and one batch does not spend
its answers on one neighbourhood (a coverage-style diminishing return).

Ties between vote totals are compared exactly, as PL-kNN compares them; with float weights
the updated totals ``V_t − a`` can differ from freshly summed ones in the last bit, which can
only matter on exact float ties (measure zero for distance weights, exact for equal weights).

Cost and incrementality
-----------------------
Scoring everything is ``O(T · k · s · M)`` for ``T`` targets, mean set size ``s`` and ``M``
labels, in chunks of at most 2**18 (target, neighbour, answer) triples. After an answer at
``n`` only these change: the votes of the targets holding ``n`` (set ``A``), the posteriors of
``n`` and of the items whose own row is in ``A`` (set ``P``), hence every term of the targets
in ``A`` and, elsewhere, only the terms ``c_{t,m}`` with ``m`` in ``P`` (about ``k²`` pairs: a
term reads its own target's votes and its own neighbour alone), and the scores of the items
``A`` holds and of ``P``. :class:`DecisionChangeRanker` recomputes exactly those, with the same
kernels and in the same summation order as a full scoring, so incremental and fresh scores
agree bit for bit.

References
----------
.. [1] V.-L. Nguyen, S. Destercke and M.-H. Masson, "Possible and necessary labels in K-nn
       procedures to query partially labelled data", DA2PL 2016.
.. [2] V.-L. Nguyen, S. Destercke and M.-H. Masson, "Querying partially labelled data to
       improve a K-nn classifier", AAAI 2017 (neighbour-based and indecision-based criteria).
.. [3] A. Freytag, E. Rodner and J. Denzler, "Selecting influential examples: active learning
       with expected model output changes", ECCV 2014.
.. [4] D. Kottke, G. Krempl, D. Lang, J. Teschner and M. Spiliopoulou, "Multi-class
       probabilistic active learning", ECAI 2016 (McPAL: gain weighted by density).
.. [5] T. Fuchs, F. Kalinke and K. Böhm, "Partial-Label Learning with a Reject Option",
       TMLR 2025 (the item's own set as the starting evidence).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine._kernels import candidate_votes
from engine._validation import check_candidates, check_neighbors
from engine.exceptions import InvalidInput
from engine.ranking import check_state, check_update, ranking_order

__all__ = ["decision_change_scores", "DecisionChangeRanker"]

_CHUNK_TRIPLES = 1 << 18  # (target, neighbour, answer) triples scored at once: bounds memory


# --------------------------------------------------------------------------- kernels


def _posterior(votes: np.ndarray, w: np.ndarray, sets: np.ndarray) -> np.ndarray:
    """Posterior of each item's label on its candidate set: its votes plus its own set as a ballot."""
    size = sets.sum(axis=1, keepdims=True)
    prior = w.mean(axis=1, keepdims=True)
    prior = np.where(prior > 0, prior, 1.0) / size
    mass = np.where(sets, votes + prior, 0.0)
    post: np.ndarray = mass / mass.sum(axis=1, keepdims=True)
    return post


def _own_change(post: np.ndarray, sets: np.ndarray) -> np.ndarray:
    """Expected change of each item's own label decision when it is answered: ``1 − max p``; 0 if precise."""
    change: np.ndarray = np.where(sets.sum(axis=1) >= 2, 1.0 - post.max(axis=1), 0.0)
    return change


def _decision(votes: np.ndarray) -> np.ndarray:
    """PL-kNN's randomised decision: uniform over the labels tied for the most votes."""
    leaders = votes == votes.max(axis=1, keepdims=True)
    decision: np.ndarray = leaders / leaders.sum(axis=1, keepdims=True)
    return decision


def _terms(
    idx: np.ndarray,
    w: np.ndarray,
    Y: np.ndarray,
    sizes: np.ndarray,
    votes: np.ndarray,
    post: np.ndarray,
    rows: np.ndarray,
) -> np.ndarray:
    """``c[t, j]`` for the target rows ``rows``: expected change of ``t``'s decision if ``idx[t, j]`` is answered.

    Returns a float array of shape (len(rows), k); 0 where the neighbour is precise or has
    weight 0.
    """
    out = np.zeros((rows.size, idx.shape[1]))
    pair_row, pair_pos = np.nonzero(_movable(idx, w, sizes, rows, slice(None)))
    out[pair_row, pair_pos] = _pair_terms(idx, w, Y, sizes, votes, post, rows, pair_row, pair_pos)
    return out


def _movable(idx: np.ndarray, w: np.ndarray, sizes: np.ndarray, rows: np.ndarray, pos: Any) -> np.ndarray:
    """Whether the pairs ``(rows, pos)`` have a term that can be non-zero: a partial neighbour
    with a positive weight."""
    movable: np.ndarray = (sizes[idx[rows, pos]] >= 2) & (w[rows, pos] > 0)
    return movable


def _pair_terms(
    idx: np.ndarray,
    w: np.ndarray,
    Y: np.ndarray,
    sizes: np.ndarray,
    votes: np.ndarray,
    post: np.ndarray,
    rows: np.ndarray,
    pair_row: np.ndarray,
    pair_pos: np.ndarray,
) -> np.ndarray:
    """``c[rows[pair_row], pair_pos]`` for pairs whose neighbour is partial with a positive
    weight (:func:`_movable`), one value per pair.

    A pair's term depends on its own target's votes and neighbour alone, so computing a
    subset of a row's pairs gives the same bits as computing the whole row.
    """
    out = np.zeros(pair_row.size)
    if pair_row.size == 0:
        return out
    row_votes = votes[rows]
    leaders = row_votes == row_votes.max(axis=1, keepdims=True)
    before = leaders / leaders.sum(axis=1, keepdims=True)  # _decision(row_votes)
    pair_item = idx[rows[pair_row], pair_pos]
    bounds = np.concatenate([[0], np.cumsum(sizes[pair_item])])
    pair_start = 0
    while pair_start < pair_row.size:
        # A chunk of whole pairs whose answer triples fit the memory bound.
        pair_stop = int(np.searchsorted(bounds, bounds[pair_start] + _CHUNK_TRIPLES, "right")) - 1
        pair_stop = min(max(pair_start + 1, pair_stop), pair_row.size)
        chunk = slice(pair_start, pair_stop)
        items = pair_item[chunk]
        triple_pair, label = np.nonzero(Y[items])
        local_row = pair_row[chunk][triple_pair]
        # The answer λ takes the weight a off the item's other candidates only. When none of
        # them leads the target's vote, the leaders keep their votes and stay ahead, so the
        # decision cannot change: most triples are skipped here (their term is an exact 0).
        leaders_in_set = (Y[items] & leaders[pair_row[chunk]]).sum(axis=1)
        can_move = leaders_in_set[triple_pair] > leaders[local_row, label]
        triple_pair, label, local_row = triple_pair[can_move], label[can_move], local_row[can_move]
        a = w[rows[local_row], pair_pos[chunk][triple_pair]]
        moved = Y[items[triple_pair]].copy()
        moved[np.arange(label.size), label] = False  # y_n \ {λ} lose the weight a
        after = _decision(row_votes[local_row] - a[:, None] * moved)
        change = 0.5 * np.abs(after - before[local_row]).sum(axis=1)  # total variation
        out[chunk] = np.bincount(triple_pair, weights=post[items[triple_pair], label] * change, minlength=items.size)
        pair_start = pair_stop
    return out


def _check_targets(targets: Any, n_targets: int, n_items: int) -> np.ndarray:
    if targets is None:
        if n_targets != n_items:
            raise InvalidInput(
                f"idx has {n_targets} target rows but Y has {n_items} items: "
                "pass targets= (the item of every target row)"
            )
        return np.arange(n_items)
    arr = np.asarray(targets)
    if arr.ndim != 1 or arr.shape[0] != n_targets or arr.dtype.kind not in "iu":
        raise InvalidInput(
            f"targets must be {n_targets} integer item rows (one per row of idx); "
            f"got shape {arr.shape}, dtype {arr.dtype}"
        )
    # Distinct by marking (O(n)): np.unique sorts, 0.7 s of a session's open at 1M targets.
    if ((arr < 0) | (arr >= n_items)).any() or np.bincount(arr, minlength=n_items).max(initial=0) > 1:
        raise InvalidInput(f"targets must be distinct item rows in 0..{n_items - 1}")
    return arr.astype(np.intp)


def _own_rows(targets: np.ndarray, n_items: int) -> np.ndarray:
    """For each item, its row among the targets (its own neighbourhood), or -1."""
    own = np.full(n_items, -1, dtype=np.intp)
    own[targets] = np.arange(targets.size)
    return own


def _item_posteriors(items: np.ndarray, own: np.ndarray, votes: np.ndarray, w: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Posteriors of ``items``; an item that is not a target has only its own ballot (uniform on its set)."""
    rows = own[items]
    has = rows >= 0
    item_votes = np.zeros((items.size, Y.shape[1]))
    item_w = np.ones((items.size, max(w.shape[1], 1)))
    item_votes[has] = votes[rows[has]]
    item_w[has] = w[rows[has]]
    return _posterior(item_votes, item_w, Y[items])


def decision_change_scores(
    idx: np.ndarray, w: np.ndarray, Y: np.ndarray, *, targets: np.ndarray | None = None
) -> np.ndarray:
    """Expected number of k-NN decisions that answering each item changes (module docstring).

    Parameters
    ----------
    idx : int array of shape (n_targets, k)
        Neighbours (item rows) of every target, each target left out of its own neighbourhood.
    w : float array of shape (n_targets, k)
        Vote weights.
    Y : bool array of shape (n_items, n_labels)
        Candidate sets.
    targets : int array of shape (n_targets,), optional
        The item each row of ``idx`` belongs to; by default row ``i`` is item ``i`` (then
        ``n_targets`` must equal ``n_items``). An item that is not a target gets a uniform
        posterior over its set.

    Returns
    -------
    scores : float array of shape (n_items,)
        Higher is more useful to query; precise items score exactly 0 (no answer moves a vote).

    Examples
    --------
    Items {0}, {1} and {0, 1}, each voting in the other two's neighbourhoods. Item 2's own
    decision is a coin flip (1/2); each of the two other decisions moves by 1/2 for one of its
    two answers (1/4 each):

    >>> import numpy as np
    >>> Y = np.array([[1, 0], [0, 1], [1, 1]], dtype=bool)
    >>> idx, w = np.array([[1, 2], [0, 2], [0, 1]]), np.ones((3, 2))
    >>> decision_change_scores(idx, w, Y).tolist()
    [0.0, 0.0, 1.0]
    """
    Y = check_candidates(Y)
    idx, w = check_neighbors(idx, w, Y)
    targets = _check_targets(targets, idx.shape[0], Y.shape[0])
    return _full_state(idx, w, Y, targets)[-1]


def _full_state(
    idx: np.ndarray, w: np.ndarray, Y: np.ndarray, targets: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(own rows, votes, posteriors, own change, terms, scores)`` computed afresh."""
    n = Y.shape[0]
    own = _own_rows(targets, n)
    votes = candidate_votes(idx, w, Y)
    post = _item_posteriors(np.arange(n), own, votes, w, Y)
    own_u = _own_change(post, Y)
    terms = _terms(idx, w, Y, Y.sum(axis=1), votes, post, np.arange(idx.shape[0]))
    scores = own_u + np.bincount(idx.ravel(), weights=terms.ravel(), minlength=n)
    scores[Y.sum(axis=1) < 2] = 0.0
    return own, votes, post, own_u, terms, scores


# --------------------------------------------------------------------------- incremental


class DecisionChangeRanker:
    """Decision-change scores kept up to date as candidate sets are settled one by one.

    Keeps the :class:`engine.ranking.Ranker` contract.

    Parameters
    ----------
    idx, w : arrays of shape (n_targets, k)
        The neighbour graph (fixed for the session).
    Y : bool array of shape (n_items, n_labels)
        Candidate sets at the start; copied, then owned by the ranker.
    targets : int array of shape (n_targets,), optional
        Item of every target row (default: row ``i`` is item ``i``).
    random_state : int, Generator or None
        Seeds the tie-breaking keys of :meth:`ranking` and :meth:`select`.

    Attributes
    ----------
    scores : float array of shape (n_items,)
        Current scores (see :func:`decision_change_scores`).
    terms : float array of shape (n_targets, k)
        ``c[t, j]``, the expected change of target ``t``'s decision by answering its
        ``j``-th neighbour.
    own_change : float array of shape (n_items,)
        ``u_n``.
    """

    def __init__(
        self,
        idx: np.ndarray,
        w: np.ndarray,
        Y: np.ndarray,
        *,
        targets: np.ndarray | None = None,
        random_state: int | np.random.Generator | None = 0,
    ) -> None:
        self.Y = check_candidates(Y).copy()
        self.idx, self.w = check_neighbors(idx, w, self.Y)
        self.targets = _check_targets(targets, self.idx.shape[0], self.Y.shape[0])
        n, k = int(self.Y.shape[0]), int(self.idx.shape[1])
        self._own, self.votes, self.posterior, self.own_change, self.terms, self.scores = _full_state(
            self.idx, self.w, self.Y, self.targets
        )
        self.sizes: np.ndarray = self.Y.sum(axis=1)
        # Flat positions t*k + j holding item n, ascending (CSR), for the per-item sums.
        flat = self.idx.ravel()
        self._positions: np.ndarray = np.argsort(flat, kind="stable").astype(np.intp)
        self._ptr: np.ndarray = np.concatenate([[0], np.cumsum(np.bincount(flat, minlength=n))]).astype(np.intp)
        self._k = k
        self._keys = np.random.default_rng(random_state).random(n)

    def state_arrays(self) -> dict[str, np.ndarray]:
        """The sets, votes, posteriors, terms, scores and the reverse index, by name (the
        arrays :meth:`from_state` takes back)."""
        return {
            "Y": self.Y,
            "votes": self.votes,
            "posterior": self.posterior,
            "own_change": self.own_change,
            "terms": self.terms,
            "scores": self.scores,
            "positions": self._positions,
            "ptr": self._ptr,
        }

    @classmethod
    def from_state(
        cls,
        idx: np.ndarray,
        w: np.ndarray,
        state: dict[str, np.ndarray],
        *,
        targets: np.ndarray | None = None,
        random_state: int | np.random.Generator | None = 0,
    ) -> DecisionChangeRanker:
        """The ranker whose :meth:`state_arrays` were ``state``, on the same graph, targets and
        seed: no scoring pass. The arrays are checked for shape and kind, not recomputed."""
        Y = check_candidates(state.get("Y"))
        idx, w = check_neighbors(idx, w, Y)
        (n, n_labels), (n_targets, k) = Y.shape, idx.shape
        arrays = check_state(
            state,
            {
                "votes": ((n_targets, n_labels), "f"),
                "posterior": ((n, n_labels), "f"),
                "own_change": ((n,), "f"),
                "terms": ((n_targets, k), "f"),
                "scores": ((n,), "f"),
                "positions": ((n_targets * k,), "i"),
                "ptr": ((n + 1,), "i"),
            },
        )
        if arrays["ptr"][0] != 0 or arrays["ptr"][-1] != n_targets * k:
            raise InvalidInput("state array 'ptr' does not index the graph's entries")
        ranker = cls.__new__(cls)
        ranker.Y = np.require(Y, requirements=["C", "W"])
        ranker.idx, ranker.w = idx, w
        ranker.targets = _check_targets(targets, n_targets, n)
        ranker._own = _own_rows(ranker.targets, n)
        ranker.votes, ranker.posterior = arrays["votes"], arrays["posterior"]
        ranker.own_change, ranker.terms, ranker.scores = arrays["own_change"], arrays["terms"], arrays["scores"]
        ranker.sizes = ranker.Y.sum(axis=1)
        ranker._positions = arrays["positions"].astype(np.intp, copy=False)
        ranker._ptr = arrays["ptr"].astype(np.intp, copy=False)
        ranker._k = int(k)
        ranker._keys = np.random.default_rng(random_state).random(int(n))
        return ranker

    def targets_of(self, items: Any) -> np.ndarray:
        """Target rows whose neighbourhood holds one of ``items`` (sorted, distinct)."""
        return np.unique(self._positions_of(np.atleast_1d(np.asarray(items, dtype=np.intp))) // self._k)

    def _positions_of(self, items: np.ndarray) -> np.ndarray:
        starts, stops = self._ptr[items], self._ptr[items + 1]
        counts = stops - starts
        offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        positions: np.ndarray = self._positions[np.repeat(starts, counts) + offsets]
        return positions

    def update(self, items: Any, candidates: Any) -> np.ndarray:
        """Set the candidate rows of ``items`` and patch the scores; returns the re-scored items.

        ``items`` is one row (with one candidate row) or several (with one row each).
        """
        rows, sets = check_update(items, candidates, *self.Y.shape)
        self.Y[rows] = sets
        self.sizes[rows] = sets.sum(axis=1)
        voting = self.targets_of(rows)  # their votes change
        self.votes[voting] = candidate_votes(self.idx[voting], self.w[voting], self.Y)
        # Posteriors change for the items (their sets) and the items whose own row votes changed.
        moved = np.union1d(rows, self.targets[voting])
        self.posterior[moved] = _item_posteriors(moved, self._own, self.votes, self.w, self.Y)
        self.own_change[moved] = _own_change(self.posterior[moved], self.Y[moved])
        # Terms change in whole where votes changed, and elsewhere only at the pairs whose
        # neighbour's posterior (or set) changed: a term reads its own target's votes and its
        # own neighbour alone. Those pairs' terms add up into the moved items' own scores.
        self.terms[voting] = _terms(self.idx, self.w, self.Y, self.sizes, self.votes, self.posterior, voting)
        positions = self._positions_of(moved)
        positions = positions[~np.isin(positions // self._k, voting)]  # no mask over every target per answer
        pair_row, pair_pos = np.divmod(positions, self._k)
        self.terms[pair_row, pair_pos] = 0.0
        movable = _movable(self.idx, self.w, self.sizes, pair_row, pair_pos)
        pair_row, pair_pos = pair_row[movable], pair_pos[movable]
        each_pair = np.arange(pair_row.size)
        self.terms[pair_row, pair_pos] = _pair_terms(
            self.idx, self.w, self.Y, self.sizes, self.votes, self.posterior, pair_row, each_pair, pair_pos
        )
        rescored = np.union1d(moved, self.idx[voting].ravel())
        self._rescore(rescored)
        return rescored

    def _rescore(self, items: np.ndarray) -> None:
        # Fresh sums in flat-position order: bit-identical to the full bincount.
        counts = self._ptr[items + 1] - self._ptr[items]
        positions = self._positions_of(items)
        sums = np.bincount(
            np.repeat(np.arange(items.size), counts), weights=self.terms.ravel()[positions], minlength=items.size
        )
        fresh = self.own_change[items] + sums
        self.scores[items] = np.where(self.sizes[items] >= 2, fresh, 0.0)

    def moved_targets(self, item: int) -> np.ndarray:
        """Target rows whose decision some answer about ``item`` can change (a positive
        expected change), the most changed first (ties: lower row first)."""
        holding = self.targets_of(item)
        change = np.where(self.idx[holding] == item, self.terms[holding], 0.0).max(axis=1, initial=0.0)
        rows = holding[change > 0]
        by_change: np.ndarray = rows[np.argsort(-change[change > 0], kind="stable")]
        return by_change

    def label_sets(self) -> None:
        """None: this ranker keeps no ``NL``/``APL`` (the caller computes them when needed)."""
        return None

    def ranking(self, exclude: np.ndarray | None = None, top: int | None = None) -> np.ndarray:
        """Partially labelled items, best query first (:func:`engine.ranking.ranking_order`).

        Ties go by the seeded random keys; ``top`` keeps only the first ``top``.
        """
        askable = self.sizes >= 2
        if exclude is not None and len(exclude):
            askable[np.asarray(exclude, dtype=np.intp)] = False
        return ranking_order(self.scores, askable, tiebreak=self._keys, top=top)

    def select(self, batch: int, exclude: np.ndarray | None = None) -> np.ndarray:
        """Up to ``batch`` partial items, greedy with the targets of picked items claimed.

        The first pick is the top of :meth:`ranking`. After each pick, every target that holds
        the picked item has its terms taken off the scores of the items it holds
        (once per target), then the next best is picked. Ties: the seeded random keys.
        """
        partial = self.sizes >= 2
        if exclude is not None and len(exclude):
            partial[np.asarray(exclude, dtype=np.intp)] = False
        work = np.where(partial, self.scores, -np.inf)
        claimed = np.zeros(self.idx.shape[0], dtype=bool)
        picks: list[int] = []
        for _ in range(min(int(batch), int(partial.sum()))):
            tied = np.flatnonzero(work == work.max())
            best = int(tied[np.argmin(self._keys[tied])])
            picks.append(best)
            work[best] = -np.inf
            rows = self.targets_of(best)
            rows = rows[~claimed[rows]]
            claimed[rows] = True
            # A claimed target's expected change is counted once per batch.
            np.subtract.at(work, self.idx[rows].ravel(), self.terms[rows].ravel())
        return np.array(picks, dtype=np.intp)
