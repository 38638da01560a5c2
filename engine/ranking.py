"""The one contract every query ranker keeps, the one order of every query list, and the baselines.

A *ranker* scores every item by how useful asking an expert about it is, and keeps those
scores up to date as candidate sets are settled. Three rankers implement :class:`Ranker`:

* :class:`engine.query.IncrementalRanker` (criteria ``"apl"`` and ``"pl"``, Nguyen et al.);
* :class:`engine.decision_change.DecisionChangeRanker` (``"decision_change"``, the default);
* :class:`StaticRanker` (the baselines ``"participation"``, ``"most_partial"`` and
  ``"random"``: scores fixed when it is built).

The simulator's strategies (:mod:`engine.strategies`) and the service layer's workbench talk
to every ranker through this protocol only; neither tests a ranker's type.

The baselines are written once, here (:data:`BASELINE_SCORES`, a dict from name to scoring
function): :func:`engine.query.query_scores` and :class:`StaticRanker` both read them.

The order in which items are asked is :func:`ranking_order` (deferred items last, then by
score, then by tie-break key, then by row), the one order every query list in winnow uses.
"""

from __future__ import annotations

from collections.abc import Callable
from numbers import Integral
from typing import Any, Protocol

import numpy as np

from engine._validation import check_candidates, check_choice, check_neighbors, check_scalar
from engine.exceptions import InvalidInput
from engine.neighbors import ReverseIndex

__all__ = [
    "BASELINE_CRITERIA",
    "BASELINE_SCORES",
    "Ranker",
    "StaticRanker",
    "ranking_order",
    "check_update",
    "check_state",
]

#: The baseline criteria: scores that read neither the votes nor the answers.
BASELINE_CRITERIA: tuple[str, ...] = ("participation", "most_partial", "random")


class Ranker(Protocol):
    """What every query ranker offers; callers never need to know which one they hold.

    Attributes
    ----------
    scores : float array of shape (n_items,)
        Usefulness of asking each item now; precise items score 0. Patched in place by
        :meth:`update` (read it, do not keep it).
    """

    scores: np.ndarray

    def update(self, items: Any, candidates: Any) -> np.ndarray:
        """Set the candidate rows of ``items`` (one row, or one row per item) and patch the
        scores; returns the items whose score was recomputed (sorted, distinct)."""
        ...

    def targets_of(self, items: Any) -> np.ndarray:
        """Target rows whose neighbourhood holds one of ``items`` (sorted, distinct): the only
        rows a change of those items' sets can touch."""
        ...

    def moved_targets(self, item: int) -> np.ndarray:
        """Target rows whose decision some answer about ``item`` can change, the most changed
        first: the targets the item's score counts (empty for a baseline)."""
        ...

    def label_sets(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``NL`` and ``APL`` of every target when the ranker keeps them up to date, else ``None``."""
        ...

    def state_arrays(self) -> dict[str, np.ndarray]:
        """Everything the ranker computed from the candidate sets (``"Y"`` among them), by
        name: what its class's ``from_state`` takes back, with the graph and the parameters,
        to carry on without scoring afresh (the service layer persists it between processes)."""
        ...

    def ranking(self, exclude: np.ndarray | None = None, top: int | None = None) -> np.ndarray:
        """Partially labelled items, best query first, in the order of :func:`ranking_order`."""
        ...

    def select(self, batch: int, exclude: np.ndarray | None = None) -> np.ndarray:
        """Up to ``batch`` distinct partially labelled items to ask at once, best first."""
        ...


def check_state(state: Any, expected: dict[str, tuple[tuple[int, ...], str]]) -> dict[str, np.ndarray]:
    """Validate the arrays a ranker's ``from_state`` takes back.

    ``expected`` maps each name to its shape and numpy dtype kind (``"b"``, ``"i"``, ``"f"``).
    Returns writable C-contiguous arrays (copies only where needed), or raises
    :class:`~engine.exceptions.InvalidInput` naming the first missing or malformed array.

    >>> check_state({"scores": np.zeros(3)}, {"scores": ((3,), "f")})["scores"].shape
    (3,)
    >>> check_state({"scores": np.zeros(2)}, {"scores": ((3,), "f")})
    Traceback (most recent call last):
    ...
    engine.exceptions.InvalidInput: state array 'scores' must have shape (3,) and dtype kind 'f'; got (2,) float64
    """
    if not isinstance(state, dict):
        raise TypeError(f"state must be a dict of arrays, got {type(state).__name__}")
    checked: dict[str, np.ndarray] = {}
    for name, (shape, kind) in expected.items():
        if name not in state:
            raise InvalidInput(f"state array {name!r} is missing")
        array = np.asarray(state[name])
        if array.shape != shape or array.dtype.kind != kind:
            raise InvalidInput(
                f"state array {name!r} must have shape {shape} and dtype kind {kind!r}; got {array.shape} {array.dtype}"
            )
        checked[name] = np.require(array, requirements=["C", "W"])
    return checked


def check_update(items: Any, candidates: Any, n_items: int, n_labels: int) -> tuple[np.ndarray, np.ndarray]:
    """Validate the arguments of :meth:`Ranker.update`.

    Returns ``(items, candidates)`` as an int array of shape (m,) and a bool array of shape
    (m, n_labels); one item with one row of candidates is accepted too.
    """
    rows = np.atleast_1d(np.asarray(items))
    if rows.ndim != 1 or (rows.size and rows.dtype.kind not in "iu"):
        raise InvalidInput(f"items must be integer item rows; got {np.asarray(items)!r}")
    if rows.size and ((rows < 0) | (rows >= n_items)).any():
        bad = int(rows[(rows < 0) | (rows >= n_items)][0])
        raise InvalidInput(f"instance must be an item row in 0..{n_items - 1}; got {bad!r}")
    sets = np.asarray(candidates)
    sets = sets.reshape(1, -1) if sets.ndim == 1 else sets
    if sets.dtype != bool and sets.size:
        sets = sets.astype(bool)
    if sets.shape != (rows.size, n_labels) or (rows.size and not sets.any(axis=1).all()):
        first = int(rows[0]) if rows.size else None
        raise InvalidInput(f"candidates for instance {first} must be a non-empty bool row of length {n_labels}")
    return rows.astype(np.intp), sets


# --------------------------------------------------------------------------- baselines


def _participation(idx: np.ndarray, w: np.ndarray, Y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Weighted number of target neighbourhoods the item sits in."""
    return np.bincount(idx.ravel(), weights=w.ravel(), minlength=Y.shape[0])


def _most_partial(idx: np.ndarray, w: np.ndarray, Y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Candidate-set size."""
    sizes: np.ndarray = Y.sum(axis=1).astype(np.float64)
    return sizes


def _random(idx: np.ndarray, w: np.ndarray, Y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Seeded uniform draws: a random order."""
    return rng.random(int(Y.shape[0]))


#: Name → scoring function ``(idx, w, Y, rng) -> float array of shape (n_items,)`` of every
#: baseline; the scores of precise items are set to 0 by :func:`baseline_scores`.
BASELINE_SCORES: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray, np.random.Generator], np.ndarray]] = {
    "participation": _participation,
    "most_partial": _most_partial,
    "random": _random,
}


def baseline_scores(
    idx: np.ndarray, w: np.ndarray, Y: np.ndarray, criterion: str, rng: np.random.Generator
) -> np.ndarray:
    """Scores of a baseline criterion on trusted inputs; precise items score 0."""
    scores = BASELINE_SCORES[criterion](idx, w, Y, rng)
    return np.where(Y.sum(axis=1) >= 2, scores, 0.0)


class StaticRanker:
    """A baseline's scores behind the :class:`Ranker` contract: fixed when it is built.

    Answers do not move a baseline's scores; an item settled since drops out of the ranking
    because it is no longer partially labelled.

    Parameters
    ----------
    idx, w : arrays of shape (n_targets, k)
        The neighbour graph.
    Y : bool array of shape (n_items, n_labels)
        Candidate sets at the start; copied, then owned by the ranker.
    criterion : {"participation", "most_partial", "random"}
    random_state : int, Generator or None
        Seeds the ``"random"`` scores (first) and the tie-breaking keys of :meth:`ranking`
        and :meth:`select` (then). ``None`` breaks ties by row.

    Attributes
    ----------
    scores : float array of shape (n_items,)
        The baseline's scores at the start; precise items 0.
    """

    def __init__(
        self,
        idx: np.ndarray,
        w: np.ndarray,
        Y: np.ndarray,
        criterion: str = "participation",
        *,
        random_state: int | np.random.Generator | None = None,
    ) -> None:
        self.Y = check_candidates(Y).copy()
        self.idx, self.w = check_neighbors(idx, w, self.Y)
        self.criterion = check_choice(criterion, "criterion", BASELINE_CRITERIA)
        rng = np.random.default_rng(random_state)
        self.scores = baseline_scores(self.idx, self.w, self.Y, self.criterion, rng)
        self._keys = None if random_state is None else rng.random(int(self.Y.shape[0]))
        self._reverse: ReverseIndex | None = None

    def state_arrays(self) -> dict[str, np.ndarray]:
        """The sets, the scores and the tie-breaking keys (when seeded), by name. A baseline
        is cheap to build again: callers that persist rankers build it afresh instead."""
        state = {"Y": self.Y, "scores": self.scores}
        if self._keys is not None:
            state["keys"] = self._keys
        return state

    def update(self, items: Any, candidates: Any) -> np.ndarray:
        """Set the candidate rows of ``items``; the scores stay: returns no item."""
        rows, sets = check_update(items, candidates, *self.Y.shape)
        self.Y[rows] = sets
        return rows[:0]

    def targets_of(self, items: Any) -> np.ndarray:
        """Target rows whose neighbourhood holds one of ``items`` (sorted, distinct)."""
        if self._reverse is None:  # built on first use: a simulated baseline never asks
            self._reverse = ReverseIndex(self.idx, self.Y.shape[0])
        return self._reverse.rows_holding_any(np.atleast_1d(np.asarray(items, dtype=np.intp)))

    def moved_targets(self, item: int) -> np.ndarray:
        """None: a baseline does not look at the neighbours' votes."""
        return np.zeros(0, dtype=np.intp)

    def label_sets(self) -> None:
        """None: a baseline keeps no ``NL``/``APL``."""
        return None

    def ranking(self, exclude: np.ndarray | None = None, top: int | None = None) -> np.ndarray:
        """Partially labelled items, best first (:func:`ranking_order`, ties by the seeded keys)."""
        askable = self.Y.sum(axis=1) >= 2
        if exclude is not None and len(exclude):
            askable[np.asarray(exclude, dtype=np.intp)] = False
        return ranking_order(self.scores, askable, tiebreak=self._keys, top=top)

    def select(self, batch: int, exclude: np.ndarray | None = None) -> np.ndarray:
        """The first ``batch`` items of :meth:`ranking`."""
        return self.ranking(exclude, top=int(batch))


# --------------------------------------------------------------------------- the order


def ranking_order(
    scores: np.ndarray,
    askable: np.ndarray,
    *,
    deferred: np.ndarray | None = None,
    tiebreak: np.ndarray | None = None,
    top: int | None = None,
) -> np.ndarray:
    """The one order of the query list: which rows to ask about, best first.

    Rows where ``askable`` is True, sorted by

    1. deferred rows last (e.g. skipped items),
    2. score, highest first,
    3. ``tiebreak`` key, lowest first (when given),
    4. row index, lowest first.

    Every list of items to ask (the incremental ranker, the simulated campaigns, the
    annotation queue, the ranked export) is ordered by this function, so they agree.

    Parameters
    ----------
    scores : float array of shape (n,)
        Usefulness of asking each row; NaN is refused.
    askable : bool array of shape (n,)
        Rows that may be asked (e.g. still partially labelled).
    deferred : bool array of shape (n,), optional
        Rows to put after every non-deferred row.
    tiebreak : float array of shape (n,), optional
        Keys that order rows of equal score (e.g. seeded random draws).
    top : int, optional
        Keep the first ``top`` rows only. Selects them in ``O(n)`` (a partition) before
        sorting the few that can be among them; the result equals the full order's prefix.

    Returns
    -------
    order : int array of shape (min(top, n_askable),)
        Row indices, best first.

    Examples
    --------
    >>> import numpy as np
    >>> scores = np.array([3.0, 5.0, 5.0, 1.0, 9.0])
    >>> askable = np.array([True, True, True, True, False])
    >>> ranking_order(scores, askable).tolist()
    [1, 2, 0, 3]
    >>> ranking_order(scores, askable, deferred=np.array([False, True, False, False, False])).tolist()
    [2, 0, 3, 1]
    >>> ranking_order(scores, askable, tiebreak=np.array([0.0, 0.7, 0.2, 0.0, 0.0]), top=2).tolist()
    [2, 1]
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 1:
        raise InvalidInput(f"scores must be 1-D (n,), got shape {scores.shape}")
    n = scores.shape[0]
    askable = _row_flags(askable, "askable", n)
    deferred = np.zeros(n, dtype=bool) if deferred is None else _row_flags(deferred, "deferred", n)
    if tiebreak is not None:
        tiebreak = np.asarray(tiebreak, dtype=np.float64)
        if tiebreak.shape != (n,):
            raise InvalidInput(f"tiebreak must have shape ({n},) like scores, got {tiebreak.shape}")
    nan = np.isnan(scores) & askable
    if nan.any():
        raise InvalidInput(f"scores row {int(np.flatnonzero(nan)[0])} is NaN; every askable row needs a score")
    if top is not None:
        check_scalar(top, "top", kind=Integral, min_value=0)
    rows = np.flatnonzero(askable)
    first, later = rows[~deferred[rows]], rows[deferred[rows]]
    if top is None:
        return np.concatenate([_sorted_rows(first, scores, tiebreak), _sorted_rows(later, scores, tiebreak)])
    best = _best_rows(first, scores, tiebreak, top)
    if best.size < top:
        best = np.concatenate([best, _best_rows(later, scores, tiebreak, top - best.size)])
    return best


def _row_flags(flags: np.ndarray, name: str, n: int) -> np.ndarray:
    arr = np.asarray(flags)
    if arr.shape != (n,) or arr.dtype != bool:
        raise InvalidInput(f"{name} must be a bool array of shape ({n},) like scores, got {arr.dtype} {arr.shape}")
    return arr


def _sorted_rows(rows: np.ndarray, scores: np.ndarray, tiebreak: np.ndarray | None) -> np.ndarray:
    # np.lexsort: last key first; rows are ascending, and lexsort is stable, so the row
    # index breaks the remaining ties.
    keys = (-scores[rows],) if tiebreak is None else (tiebreak[rows], -scores[rows])
    return rows[np.lexsort(keys)]


def _best_rows(rows: np.ndarray, scores: np.ndarray, tiebreak: np.ndarray | None, top: int) -> np.ndarray:
    """The first ``top`` of ``_sorted_rows(rows, ...)`` without sorting all of them."""
    if top == 0:
        return rows[:0]
    if top < rows.size:
        # Every row scoring at least the top-th best can be among the first ``top`` (ties
        # with the cut-off are decided by the sort below); the rest cannot.
        values = scores[rows]
        cutoff = np.partition(values, rows.size - top)[rows.size - top]
        rows = rows[values >= cutoff]
    return _sorted_rows(rows, scores, tiebreak)[:top]
