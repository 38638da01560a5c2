"""Suspect items of a session: candidate sets the neighbours' evidence says miss the true label.

One seam of a session at work: :func:`workbench_suspects` reads a
:class:`~app.service.workbench.Workbench`'s graph and state under its lock.

Two things, for two needs:

* the **suspicion** of every item (:func:`session_suspicion`, :mod:`engine.suspicion`: the
  neighbours' labels pooled with cross-fitted linear models of the features), from the first
  minute: every item not settled, most suspect first (:func:`most_suspect`, the Rejects
  page's list), and the labelled export's ``suspicion`` column;
* the **flags** below: the items a test certifies, with a guarantee on how many of them are
  false alarms; shown beside the list and served to the expert.

The scores are Dempster's conflict between the item's set and its neighbours' evidence
(:func:`engine.suspect_scores`, chosen by ``benchmarks/suspect.py``, see
``docs/results_suspect.md``) on the session's persisted neighbour graph and its *current*
candidate sets; the flags are the false-discovery-rate test of :mod:`engine.suspect`
(conformal p-values against the sets known to be right, then Benjamini–Hochberg), so that on
average at most one flag in ten is a correct set and a clean dataset raises almost none.

Which items count
-----------------
* An item an expert settled (an ``answer``, ``other_label`` or ``resolve`` is its active
  verdict, or annotators disagree about it) is never suspect: the expert has seen it. An item
  flagged "none of these" stays suspect: the expert said the truth is missing, and the
  suggestions name where it may be.
* Every item not settled is tested (BH's family). The p-values are calibrated on the sets
  believed to hold the truth: the expert's answers alone once there are
  :data:`EXPERT_CALIBRATION` of them, before that the single given labels too, except those
  an annotator flagged "none of these" (said to miss the truth: a known miss in the
  calibration would only raise every p-value). Given
  singletons that miss the truth (a crowd unanimously wrong) only raise the p-values; answers
  to ranked queries are not a random sample either, and their items, the ambiguous ones, sit in
  mixed neighbourhoods that raise them too: both err towards flagging fewer items.

Where they reach the expert
---------------------------
In the served order: one slot in :data:`SUSPECT_EVERY` goes to the most suspect item still to
ask (:func:`interleave_suspects`; the Query page, team leases and the ranked export all serve
it). A suspect set is mostly a single given label, which no ranking criterion serves (a precise
item changes no vote), so without slots of their own they would wait for someone to open the
Rejects page. The Query page says why the item is there and which labels the neighbours
suggest; recording one of them outside the set stays a deliberate choice (the "Another label"
search), never a one-click button. The crowd benchmark measured the gain of asking them
(``docs/results_crowd.md``, "winnow + suspect"); the share of slots is a choice, not measured
against others. The Rejects page lists them too, in a section of their own, with the items
flagged "none of these" or skipped, which the served order leaves out.

Why the flags stay on Dempster's conflict
-----------------------------------------
The suspicion ranks the misses better (``docs/results_suspect.md``), but the served order
needs the flags after every answer, and an answer changes the suspicion of its items' 3-hop
neighbourhood (the conflict: one hop). The suspicion is computed when a page or an export
asks for it, patched from the last one computed (:func:`session_suspicion`). A pre-selected
top of the ranking would not make the test stronger either: BH over the ``r`` top items needs
p-values conditional on being selected, and conditional calibration compares each with only
the trusted sets that would have been selected in its place, as few as the ``r`` are to the
``m`` items (the bound ``1 / (n + 1) ≤ α k / m`` is the same). At the first minute the given
singletons calibrate the test, and the sets among them that miss the truth (a crowd's
unanimous mistakes, the singletons of a planted miss) raise every p-value: no honest test
flags much then, which is why the list exists.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, overload

import numpy as np

from app.service.answers import StaleAnswer
from app.service.graphs import GraphResult
from app.service.ranking_state import local_graph
from app.store import SessionState, readonly
from engine import (
    CrowdEvidence,
    FeatureEvidence,
    crowd_evidence,
    feature_evidence,
    outside_suggestions,
    pooled_posterior,
    suspect_scores,
    suspicion_scores,
)
from engine.neighbors import ReverseIndex
from engine.suspect import DEFAULT_FDR, conformal_bh_threshold, replace_sorted, sorted_conformal_p_values

#: One slot in this many of the served order goes to the most suspect item still to ask
#: (:func:`interleave_suspects`).
SUSPECT_EVERY = 10
#: The expert's answers alone calibrate the test once there are this many (before, the single
#: given labels join them): the smallest p-value is ``1 / (n + 1)``, and a few answers could
#: flag nothing among thousands of items.
EXPERT_CALIBRATION = 100

#: Suspect items made at once when a :class:`SuspectList` is iterated.
_MADE_AT_ONCE = 256

__all__ = [
    "DEFAULT_FDR",
    "EXPERT_CALIBRATION",
    "Suggestion",
    "SuspectItem",
    "SuspectList",
    "SessionSuspects",
    "session_suspects",
    "workbench_suspects",
    "settled_items",
    "session_suspicion",
    "EVIDENCE_REFIT_SHARE",
    "evidence_checkpoint",
    "EventHistory",
    "workbench_suspicion",
    "most_suspect",
    "workbench_most_suspect",
    "check_still_open",
    "SUSPECT_EVERY",
    "suspects_to_serve",
    "interleave_suspects",
    "kept_scores",
    "remember_scores",
    "forget_kept",
]


@dataclass(frozen=True)
class Suggestion:
    """A label outside an item's set that its neighbours hold."""

    label: int
    name: str
    #: Neighbours holding it, of ``n_neighbours`` (the "x of k" shown).
    holders: int
    n_neighbours: int
    #: Share of the neighbours' vote weight holding it.
    share: float

    def text(self) -> str:
        """``"jazz (7 of 10)"``."""
        return f"{self.name} ({self.holders} of {self.n_neighbours})"


@dataclass(frozen=True)
class SuspectItem:
    """One item of a suspect list: its scores and the labels the neighbours suggest instead."""

    position: int
    external_id: str
    #: Dempster's conflict, what the flag tests.
    score: float
    candidates: tuple[str, ...]
    suggestions: tuple[Suggestion, ...]
    #: :func:`session_suspicion`'s score, when the list was made from it (``None`` otherwise).
    suspicion: float | None = None
    #: Whether the test flags it (every item of :attr:`SessionSuspects.items` is flagged).
    flagged: bool = True

    def text(self) -> str:
        """``"Suspect: the neighbours suggest jazz (7 of 10) or blues (2 of 10)"`` for a flagged
        item; ``"The neighbours suggest …"`` for one that is only ranked."""
        if not self.suggestions:
            if self.flagged:
                return "Suspect: the neighbours' evidence contradicts every candidate"
            return "The neighbours hold no label outside the set"
        said = " or ".join(s.text() for s in self.suggestions)
        return f"Suspect: the neighbours suggest {said}" if self.flagged else f"The neighbours suggest {said}"


class SuspectList(Sequence[SuspectItem]):
    """The suspect items, most suspect first, each made (with its suggestions) when read.

    A session at 1M items has tens of thousands of suspect items; the served order needs only
    their positions (:attr:`positions`), and a page shows a few dozen: making every item and
    its suggestions after each answer cost most of an answer's work (issue 32).
    """

    def __init__(
        self,
        graph: GraphResult,
        state: SessionState,
        scores: np.ndarray,
        positions: np.ndarray,
        *,
        suspicion: np.ndarray | None = None,
        flags: np.ndarray | None = None,
    ) -> None:
        self.positions = readonly(positions)
        self._graph, self._state, self._scores = graph, state, scores
        # Without flags every item listed is flagged (the test's list).
        self._suspicion, self._flags = suspicion, flags

    def __len__(self) -> int:
        return int(self.positions.size)

    @overload
    def __getitem__(self, index: int) -> SuspectItem: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[SuspectItem, ...]: ...

    def __getitem__(self, index: int | slice) -> SuspectItem | tuple[SuspectItem, ...]:
        if isinstance(index, slice):
            return self._make(self.positions[index])
        return self._make(self.positions[[index]])[0]

    def __iter__(self) -> Iterator[SuspectItem]:
        for start in range(0, len(self), _MADE_AT_ONCE):
            yield from self._make(self.positions[start : start + _MADE_AT_ONCE])

    def _make(self, positions: np.ndarray) -> tuple[SuspectItem, ...]:
        if positions.size == 0:
            return ()
        candidates = np.asarray(self._state.candidates)
        rows = self._graph.idx[positions]
        w = self._graph.w[positions]
        # Only the neighbours' sets are read: a copy of those rows, not of every item's set.
        items, local = local_graph(rows)
        labels, support, holders = outside_suggestions(local, w, candidates[items], own=candidates[positions])
        n_neighbours = (w > 0).sum(axis=1)
        names = self._state.label_names
        return tuple(
            SuspectItem(
                position=int(p),
                external_id=self._state.external_ids[p],
                score=float(self._scores[p]),
                candidates=tuple(names[m] for m in np.flatnonzero(candidates[p])),
                suggestions=tuple(
                    Suggestion(int(label), names[int(label)], int(held), int(n_neighbours[i]), float(share))
                    for label, held, share in zip(labels[i], holders[i], support[i], strict=True)
                    if label >= 0
                ),
                suspicion=None if self._suspicion is None else float(self._suspicion[p]),
                flagged=True if self._flags is None else bool(self._flags[p]),
            )
            for i, p in enumerate(positions.tolist())
        )


@dataclass(frozen=True)
class SessionSuspects:
    """The suspect items of a session and how they were found.

    Attributes
    ----------
    items : SuspectList
        Most suspect first (ties: dataset order), each made when read; ``items.positions``
        are their positions.
    flags : bool array of shape (n_instances,)
        Which items are suspect (the labelled export's ``suspect`` column).
    scores : float array of shape (n_instances,)
        Dempster's conflict of every item's current set with its neighbours' evidence.
    fdr : float
        The false-discovery rate of the test (Benjamini–Hochberg).
    n_trusted : int
        Sets the p-values were calibrated on.
    n_tested : int
        Items tested (those not settled).
    calibrated_on : str
        ``"expert answers"`` or ``"single given labels and expert answers"``.
    calibration : float array of shape (n_trusted,)
        The trusted sets' scores, sorted (read-only).
    """

    items: SuspectList
    flags: np.ndarray
    scores: np.ndarray
    fdr: float
    n_trusted: int
    n_tested: int
    calibrated_on: str
    calibration: np.ndarray

    @property
    def p_values(self) -> np.ndarray:
        """Conformal p-values of every item's score against the trusted sets' (float array of
        shape (n_instances,)); made when read: the flags do not need them all."""
        return sorted_conformal_p_values(self.calibration, self.scores)

    def item(self, position: int) -> SuspectItem | None:
        """The suspect item at ``position``, or ``None`` when it is not suspect."""
        if not 0 <= position < self.flags.size or not self.flags[position]:
            return None
        return self.items._make(np.array([position], dtype=np.int64))[0]

    def summary(self) -> str:
        """In plain words, how the items were chosen, for the page that lists them."""
        needed = math.ceil(1.0 / self.fdr) - 1
        if self.n_trusted < needed:
            return (
                f"Nothing can be flagged yet: {self.n_trusted} sets are known to be right "
                f"({self.calibrated_on}); at least {needed} are needed to compare with."
            )
        rate = f"one in {round(1 / self.fdr)}" if round(1 / self.fdr) * self.fdr == 1 else f"{self.fdr:.0%}"
        how = (
            f"An item is flagged when its neighbours' labels contradict its own set far more often "
            f"than they do for the {self.n_trusted} sets known to be right ({self.calibrated_on}), "
            f"so strongly that, of all flagged items, on average at most {rate} is a false alarm."
        )
        if not self.items:
            return f"No item is flagged. {how}"
        return how


def settled_items(state: SessionState) -> np.ndarray:
    """Items an expert has settled (bool array of shape (n_instances,)): an active answer,
    other label or resolve, or a conflict between annotators; "none of these" does not settle."""
    return (state.answered & ~np.asarray(state.none_of_these)) | np.asarray(state.in_conflict, dtype=bool)


def _trusted(state: SessionState, settled: np.ndarray) -> tuple[np.ndarray, str]:
    expert = settled & ~np.asarray(state.in_conflict, dtype=bool) & (state.set_sizes == 1)
    if expert.sum() >= EXPERT_CALIBRATION:
        return expert, "expert answers"
    # An annotator said the truth is not in it: a known miss would only raise every p-value.
    given = (state.original_sizes == 1) & ~settled & ~np.asarray(state.none_of_these, dtype=bool)
    return expert | given, "single given labels and expert answers"


@dataclass(frozen=True, eq=False)
class _Test:
    """What the test of one state rests on: who is settled and trusted, and both score
    samples sorted, so that the next state's test replaces only the values that moved."""

    settled: np.ndarray
    trusted: np.ndarray
    calibrated_on: str
    calibration: np.ndarray
    tested: np.ndarray


@dataclass(eq=False)
class _Kept:
    """One session's last state, its scores, its test (``None`` until a result was made from
    them) and the results per false-discovery rate."""

    state: SessionState
    scores: np.ndarray
    test: _Test | None
    results: dict[float, SessionSuspects]


# The last scores, test and results per (session, graph), valid while the session's state is
# the same object (a refresh derives a new one): the Query page asks on every rerun. After an
# answer only the items whose set or whose neighbours' sets changed are scored again, and only
# the scores that changed, or moved between the trusted and the tested ones, are replaced in
# the sorted samples of the test.
_CACHE: OrderedDict[tuple[int, str], _Kept] = OrderedDict()
_REVERSE: OrderedDict[str, ReverseIndex] = OrderedDict()
#: Graphs (keys) past SCAN_MAX_ENTRIES whose first update this process made by a scan.
_SCANNED: OrderedDict[str, None] = OrderedDict()
#: Graphs of at most this many neighbour entries (400,000 items at k = 10) are scanned
#: for the rows an update touches instead of indexed (_rows_touched).
SCAN_MAX_ENTRIES = 4_000_000
#: Past this share of the items moving (e.g. the calibration switching to the expert's
#: answers), the test's samples are sorted afresh instead of patched.
RESORT_SHARE = 0.05
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 16


def session_suspects(graph: GraphResult, state: SessionState, *, fdr: float = DEFAULT_FDR) -> SessionSuspects:
    """The suspect items of a session under its current candidate sets.

    Parameters
    ----------
    graph : GraphResult
        The dataset's neighbour graph over all instances (the workbench's).
    state : SessionState
        The session as derived from its events.
    fdr : float in (0, 1), default=0.1
        The false-discovery rate of the test.

    Returns
    -------
    SessionSuspects

    Notes
    -----
    The scores of a session are kept (per process, for the last 16 sessions and graphs); for
    a new state of the same session only the items whose set changed and those that have
    such an item among their neighbours are scored again (:class:`engine.neighbors.ReverseIndex`),
    so an answer costs ``O(affected · 2**k)`` instead of a pass over the dataset. The test
    keeps the trusted and the tested scores sorted and replaces those an answer moved
    (:func:`engine.suspect.replace_sorted`), then finds Benjamini–Hochberg's threshold from
    the top of them (:func:`engine.suspect.conformal_bh_threshold`): the same flags as the
    p-values of every item sorted afresh, at a few passes over boolean masks per answer.
    """
    key = (state.config.session_id, graph.key)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
    if hit is not None and hit.state is state and float(fdr) in hit.results:
        return hit.results[float(fdr)]
    if hit is not None and hit.state is state:
        scores, test = hit.scores, hit.test
    else:
        scores = _scores(graph, state, None if hit is None else (hit.state, hit.scores))
        test = None
    if test is None:
        previous = None if hit is None or hit.test is None else (hit.scores, hit.test)
        test = _test(state, scores, previous)
    result = _result(graph, state, scores, float(fdr), test)
    with _CACHE_LOCK:
        results = hit.results if hit is not None and hit.state is state else {}
        _CACHE[key] = _Kept(state, scores, test, {**results, float(fdr): result})
        _CACHE.move_to_end(key)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return result


class SessionAtWork(Protocol):
    """What :func:`workbench_suspects` reads of a session at work (a
    :class:`~app.service.workbench.Workbench`)."""

    @property
    def graph(self) -> GraphResult: ...

    @property
    def state(self) -> SessionState: ...

    def candidates_after(self, n_events: int) -> tuple[int, np.ndarray]: ...

    def vote_arrays(self) -> tuple[np.ndarray, np.ndarray] | None: ...


def workbench_suspects(bench: SessionAtWork, *, fdr: float = DEFAULT_FDR) -> SessionSuspects:
    """:func:`session_suspects` of a workbench's graph and its current snapshot's state (read
    once: another tab's answer replaces the snapshot, never the state read here)."""
    return session_suspects(bench.graph, bench.state, fdr=fdr)


def kept_scores(graph: GraphResult, state: SessionState) -> np.ndarray | None:
    """The scores :func:`session_suspects` keeps for exactly this state, or ``None`` (read-only)."""
    with _CACHE_LOCK:
        hit = _CACHE.get((state.config.session_id, graph.key))
    return hit.scores if hit is not None and hit.state is state else None


def remember_scores(graph: GraphResult, state: SessionState, scores: np.ndarray) -> None:
    """Take ``scores`` as the suspect scores of ``state`` (a snapshot's, read back): the next
    :func:`session_suspects` of a later state of the session scores again only the items whose
    set differs from ``state``'s and their neighbours'.

    Raises ``ValueError`` when ``scores`` is not a float array of shape (n_instances,).
    """
    scores = np.asarray(scores)
    if scores.shape != (state.n_instances,) or scores.dtype.kind != "f":
        raise ValueError(f"suspect scores must be floats of shape ({state.n_instances},), got {scores.shape}")
    with _CACHE_LOCK:
        _CACHE[(state.config.session_id, graph.key)] = _Kept(state, readonly(scores), None, {})
        _CACHE.move_to_end((state.config.session_id, graph.key))
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)


def forget_kept() -> None:
    """Drop every kept score, test, result and suspicion of this process: the next
    :func:`session_suspects` and :func:`session_suspicion` score afresh (to check the kept
    path against)."""
    with _CACHE_LOCK:
        _CACHE.clear()
        _SUSPICION.clear()


def suspects_to_serve(suspects: SessionSuspects, state: SessionState) -> np.ndarray:
    """The suspect items the Query page should still ask, most suspect first (int array).

    Left out: items flagged "none of these" (someone already said the truth is missing; the
    Rejects page lists them with their suggestions) and skipped ones (the annotator set them
    aside; the Rejects page lists them too).
    """
    skipped = np.asarray(state.skipped, dtype=bool)
    flagged = np.asarray(state.none_of_these, dtype=bool)
    positions = suspects.items.positions
    asked: np.ndarray = positions[~(skipped[positions] | flagged[positions])]
    return asked


def interleave_suspects(
    ranked: np.ndarray, suspects: np.ndarray, *, deferred: np.ndarray | None = None, every: int = SUSPECT_EVERY
) -> np.ndarray:
    """The served order: ``ranked`` with one slot in ``every`` given to the next of ``suspects``.

    A suspect set is mostly a single given label, which no ranking criterion serves (a precise
    item changes no vote), so without slots of their own they would reach the expert only on
    the Rejects page. One slot in ``every`` (slots ``every - 1``, ``2 * every - 1``, ...) keeps
    the ranking's gains first while the suspects are asked steadily; once the ranked items run
    out, the remaining suspects follow, and then the ``deferred`` ones (bool array over all
    items: the skipped items, which stay last). Suspects that are also ranked (open items) move
    to their suspect slot.

    >>> interleave_suspects(np.array([5, 6, 7, 8, 9]), np.array([1, 7]), every=3).tolist()
    [5, 6, 1, 8, 9, 7]
    >>> interleave_suspects(np.array([5]), np.array([1, 2]), every=3).tolist()
    [5, 1, 2]
    >>> skipped = np.isin(np.arange(10), [9])
    >>> interleave_suspects(np.array([5, 9]), np.array([1, 2]), deferred=skipped, every=3).tolist()
    [5, 1, 2, 9]
    """
    if every < 2:
        raise ValueError(f"every must be >= 2, got {every}")
    ranked = np.asarray(ranked, dtype=np.int64)
    suspects = np.asarray(suspects, dtype=np.int64)
    if suspects.size == 0:
        return ranked
    # A mask over the positions, not np.isin (a sort of both lists: ~10 ms per answer at 1M).
    is_suspect = np.zeros(int(max(ranked.max(initial=-1), suspects.max())) + 1, dtype=bool)
    is_suspect[suspects] = True
    rest = ranked[~is_suspect[ranked]]
    later = rest[:0] if deferred is None else rest[np.asarray(deferred, dtype=bool)[rest]]
    if later.size:
        rest = rest[~np.asarray(deferred, dtype=bool)[rest]]
    # m whole blocks of (every - 1) ranked items and one suspect, then what is left of each.
    m = min(suspects.size, rest.size // (every - 1))
    blocks = np.hstack([rest[: m * (every - 1)].reshape(m, every - 1), suspects[:m, None]]).ravel()
    return np.concatenate([blocks, rest[m * (every - 1) :], suspects[m:], later])


def _reverse_index(graph: GraphResult) -> ReverseIndex:
    with _CACHE_LOCK:
        index = _REVERSE.get(graph.key)
    if index is None:
        index = ReverseIndex(graph.idx, graph.idx.shape[0])
        with _CACHE_LOCK:
            _REVERSE[graph.key] = index
            while len(_REVERSE) > _CACHE_SIZE:
                _REVERSE.popitem(last=False)
    return index


def _rows_touched(graph: GraphResult, changed: np.ndarray) -> np.ndarray:
    """The items ``changed`` and those with one of them among their neighbours, sorted.

    Up to :data:`SCAN_MAX_ENTRIES` neighbour entries by one pass over the graph (a few
    milliseconds: less than building the reverse index, about 0.15 s per 100,000 items,
    that a command's single update would use once); larger graphs through the reverse index,
    built once per process, since a pass would cost tens of milliseconds on every answer,
    from their second update in the process on: the first (the one of the open, that a
    command makes alone) scans, 40 ms at 1M items where building the index takes 1.6 s.
    """
    if graph.idx.size > SCAN_MAX_ENTRIES:
        with _CACHE_LOCK:
            indexed = graph.key in _REVERSE or graph.key in _SCANNED
            _SCANNED[graph.key] = None
            while len(_SCANNED) > _CACHE_SIZE:
                _SCANNED.popitem(last=False)
        if indexed:
            return np.union1d(changed, _reverse_index(graph).rows_holding_any(changed))
    hit = np.zeros(graph.idx.shape[0], dtype=bool)
    hit[changed] = True
    return np.flatnonzero(hit | hit[graph.idx].any(axis=1))


def _scores(graph: GraphResult, state: SessionState, previous: tuple[SessionState, np.ndarray] | None) -> np.ndarray:
    """Dempster's conflict of every item; with the ``previous`` state and its scores, only the
    items an answer can have changed are scored again."""
    candidates = np.asarray(state.candidates)
    if candidates.shape[0] == 0:
        return np.zeros(0)
    if previous is None or np.asarray(previous[0].candidates).shape != candidates.shape:
        return suspect_scores(graph.idx, graph.w, candidates)
    changed = state.changed_since(previous[0])
    if changed is None:
        changed = np.flatnonzero((np.asarray(previous[0].candidates) != candidates).any(axis=1))
    scores = previous[1].copy()
    if changed.size:
        rows = _rows_touched(graph, changed)
        # On a copy of the neighbours' sets only: the whole matrix would be checked on every call.
        items, local = local_graph(graph.idx[rows])
        scores[rows] = suspect_scores(local, graph.w[rows], candidates[items], own=candidates[rows])
    return scores


def _test(state: SessionState, scores: np.ndarray, previous: tuple[np.ndarray, _Test] | None) -> _Test:
    """The test of ``state``: from the ``previous`` state's scores and test, only the items whose
    score changed or that moved between settled, trusted and tested are replaced."""
    settled = settled_items(state)
    trusted, calibrated_on = _trusted(state, settled)
    moved = None
    if previous is not None and previous[0].shape == scores.shape:
        before, test = previous
        moved = np.flatnonzero((before != scores) | (test.settled != settled) | (test.trusted != trusted))
        if moved.size > RESORT_SHARE * scores.size:
            moved = None
    if moved is None:
        calibration, tested = np.sort(scores[trusted]), np.sort(scores[~settled])
    else:
        old, new = before[moved], scores[moved]
        calibration = replace_sorted(test.calibration, old[test.trusted[moved]], new[trusted[moved]])
        tested = replace_sorted(test.tested, old[~test.settled[moved]], new[~settled[moved]])
    return _Test(readonly(settled), readonly(trusted), calibrated_on, readonly(calibration), readonly(tested))


def _result(graph: GraphResult, state: SessionState, scores: np.ndarray, fdr: float, test: _Test) -> SessionSuspects:
    threshold = conformal_bh_threshold(test.calibration, test.tested, level=fdr)
    flags = ~test.settled & (scores > threshold) if threshold < math.inf else np.zeros(scores.size, dtype=bool)
    order = np.flatnonzero(flags)
    order = order[np.argsort(-scores[order], kind="stable")]
    items = SuspectList(graph, state, scores, order)
    return SessionSuspects(
        items,
        readonly(flags),
        scores,
        fdr,
        int(test.calibration.size),
        int(test.tested.size),
        test.calibrated_on,
        test.calibration,
    )


def check_still_open(state: SessionState, position: int, *, answered: bool) -> None:
    """Refuse a label chosen for an item of the most-suspect list that is out of date.

    Raises :class:`~app.service.answers.StaleAnswer` (nothing is to be written) when the item
    is settled (someone answered it) or the annotator already gave a verdict on it
    (``answered``). The item need not be flagged: the list holds every item not settled.
    """
    if answered or bool(settled_items(state)[position]):
        raise StaleAnswer("Someone has answered that item meanwhile; nothing was recorded.")


# ------------------------------------------------------------------------------ suspicion

#: Past this share of the items to score again after a change (the 3-hop neighbourhoods of
#: the items whose set changed), every item is scored afresh.
SUSPICION_RESCORE_SHARE = 0.25
#: The models of the features (:func:`engine.feature_evidence`) are fitted to the sets as
#: the session's events left them at a checkpoint: every ``ceil(EVIDENCE_REFIT_SHARE · n)``
#: events (:func:`evidence_checkpoint`). An event changes at most one set, so at most this
#: share of the sets changed since the fit; meanwhile only the neighbours' part of the
#: suspicion follows the sets.
EVIDENCE_REFIT_SHARE = 0.02


def evidence_checkpoint(n_events: int, n_items: int) -> int:
    """How many of a session's first events the models of the features are fitted after.

    The largest multiple of ``ceil(EVIDENCE_REFIT_SHARE · n_items)`` (at least 1) not above
    ``n_events``: a function of the event log alone, so that every process (the app that saw
    the answers arrive one by one, a fresh ``winnow export``) fits the same models and gives
    the same suspicion.

    >>> evidence_checkpoint(0, 800), evidence_checkpoint(15, 800), evidence_checkpoint(37, 800)
    (0, 0, 32)
    """
    if n_events < 0 or n_items < 0:
        raise ValueError(f"n_events and n_items must be >= 0, got {n_events} and {n_items}")
    step = max(1, math.ceil(EVIDENCE_REFIT_SHARE * n_items))
    return (n_events // step) * step


class EventHistory(Protocol):
    """What the suspicion reads of a session's event log (a
    :class:`~app.service.workbench.Workbench`): the sets after its first events, and the
    crowd votes the dataset was made from (``None`` without)."""

    def candidates_after(self, n_events: int) -> tuple[int, np.ndarray]: ...

    def vote_arrays(self) -> tuple[np.ndarray, np.ndarray] | None: ...


@dataclass(frozen=True)
class _KeptSuspicion:
    state: SessionState
    scores: np.ndarray
    evidence: FeatureEvidence
    #: The crowd's confusion, fitted with the evidence (``None``: the dataset has no votes).
    crowd: CrowdEvidence | None
    #: The checkpoint the evidence was fitted at: events counted and the id of the last one.
    checkpoint: tuple[int, int]


#: The last suspicion per (session, graph), valid while the session's state is the same object.
_SUSPICION: OrderedDict[tuple[int, str], _KeptSuspicion] = OrderedDict()


def session_suspicion(graph: GraphResult, state: SessionState, history: EventHistory) -> np.ndarray:
    """Every item's suspicion under the session's current sets (:func:`engine.suspicion_scores`,
    the neighbours pooled with the models of the features, :func:`engine.feature_evidence`).

    Parameters
    ----------
    graph : GraphResult
        The dataset's neighbour graph over all instances.
    state : SessionState
    history : EventHistory
        The session's event log (the workbench), for the sets at the models' checkpoint.

    Returns
    -------
    float array of shape (n_instances,), read-only
        Higher: more likely that the item's set misses its true label.

    Notes
    -----
    A function of the session's answers alone: the neighbours read the current sets, the
    models of the features the sets after the first :func:`evidence_checkpoint` events.
    Computed when asked (the Rejects page, an export), never on an answer: an item's
    suspicion reads its 3-hop neighbourhood's sets, and the models read every set (a fit
    costs a few tenths of a second at 1,000 items, seconds at 100,000). The last result is
    kept per session (16 at most); for a later state of the same session at the same
    checkpoint the models are kept, and only the items whose set changed since the last
    result and those with one of them within 3 hops are scored again, on a copy of the sets
    those read (the same bits as a full pass with the kept models,
    :func:`engine.suspicion.neighbour_posterior`'s ``targets``).
    """
    key = (state.config.session_id, graph.key)
    with _CACHE_LOCK:
        kept = _SUSPICION.get(key)
    if kept is not None and kept.state is state:
        return kept.scores
    candidates = np.asarray(state.candidates)
    counted = evidence_checkpoint(state.n_events, candidates.shape[0])
    last_id, fitted_to = history.candidates_after(counted)
    if kept is not None and kept.checkpoint == (counted, last_id) and kept.state.n_instances == state.n_instances:
        evidence, crowd = kept.evidence, kept.crowd
        scores = _suspicion(graph, state, candidates, kept)
    else:
        evidence = _fit_evidence(graph, state, np.asarray(fitted_to))
        crowd = _fit_crowd(graph, state, np.asarray(fitted_to), evidence, history.vote_arrays())
        scores = _full_suspicion(graph, candidates, evidence, crowd)
    scores = readonly(scores)
    with _CACHE_LOCK:
        _SUSPICION[key] = _KeptSuspicion(state, scores, evidence, crowd, (counted, last_id))
        _SUSPICION.move_to_end(key)
        while len(_SUSPICION) > _CACHE_SIZE:
            _SUSPICION.popitem(last=False)
    return scores


def _fit_evidence(graph: GraphResult, state: SessionState, candidates: np.ndarray) -> FeatureEvidence:
    if candidates.shape[0] == 0:
        return FeatureEvidence((), np.zeros((0, *candidates.shape)), np.ones(1))
    return feature_evidence(state.X, graph.idx, graph.w, candidates)


def _fit_crowd(
    graph: GraphResult,
    state: SessionState,
    fitted_to: np.ndarray,
    evidence: FeatureEvidence,
    votes: tuple[np.ndarray, np.ndarray] | None,
) -> CrowdEvidence | None:
    """The crowd's confusion matrix at the checkpoint: the items' pooled posteriors under the
    checkpoint's sets, and as truth the single labels an expert gave by then (a set that
    became a single label other than its original one, or a settled single label)."""
    if votes is None or fitted_to.shape[0] == 0:
        return None
    prior = pooled_posterior(graph.idx, graph.w, fitted_to, features=evidence)
    original = np.asarray(state.original_candidates)
    single = fitted_to.sum(axis=1) == 1
    answered = single & (fitted_to != original).any(axis=1)
    answers = np.where(answered, fitted_to.argmax(axis=1), -1)
    return crowd_evidence(votes[0], votes[1], prior, answers=answers)


def _full_suspicion(
    graph: GraphResult, candidates: np.ndarray, evidence: FeatureEvidence, crowd: CrowdEvidence | None
) -> np.ndarray:
    if candidates.shape[0] == 0:
        return np.zeros(0)
    return suspicion_scores(graph.idx, graph.w, candidates, features=evidence, crowd=crowd)


def _suspicion(graph: GraphResult, state: SessionState, candidates: np.ndarray, kept: _KeptSuspicion) -> np.ndarray:
    """The kept suspicion with the items the changes since its state reach scored again."""
    n = candidates.shape[0]
    before = np.asarray(kept.state.candidates)
    if before.shape != candidates.shape:
        return _full_suspicion(graph, candidates, kept.evidence, kept.crowd)
    changed = state.changed_since(kept.state)
    if changed is None:
        changed = np.flatnonzero((before != candidates).any(axis=1))
    scores = kept.scores.copy()
    if changed.size == 0:
        return scores
    rows = changed
    for _ in range(3):  # an item reads the sets of its neighbours' neighbours' neighbours
        rows = _rows_touched(graph, rows)
        if rows.size > SUSPICION_RESCORE_SHARE * n:
            return _full_suspicion(graph, candidates, kept.evidence, kept.crowd)
    scores[rows] = _local_suspicion(graph, candidates, rows, kept.evidence, kept.crowd)
    return scores


def _local_suspicion(
    graph: GraphResult,
    candidates: np.ndarray,
    rows: np.ndarray,
    evidence: FeatureEvidence,
    crowd: CrowdEvidence | None,
) -> np.ndarray:
    """The suspicion of ``rows`` from a copy of the graph rows and sets they read (3 hops)."""
    first = np.unique(graph.idx[rows])
    second = np.unique(graph.idx[first])
    with_rows = np.unique(np.concatenate([rows, first, second]))
    items = np.unique(np.concatenate([with_rows, graph.idx[second].ravel()]))
    # The items only read as sets keep a row of their own with no weight: it is never read.
    idx = np.tile(np.arange(items.size)[:, None], (1, graph.idx.shape[1]))
    w = np.zeros(idx.shape)
    at = np.searchsorted(items, with_rows)
    idx[at] = np.searchsorted(items, graph.idx[with_rows])
    w[at] = graph.w[with_rows]
    local = replace(evidence, posteriors=evidence.posteriors[:, items])
    local_crowd = None
    if crowd is not None:  # the votes of the items copied, renumbered, in their order
        held = np.isin(crowd.items, items)
        local_crowd = replace(crowd, items=np.searchsorted(items, crowd.items[held]), labels=crowd.labels[held])
    targets = np.searchsorted(items, rows)
    return suspicion_scores(idx, w, candidates[items], targets=targets, features=local, crowd=local_crowd)


def workbench_suspicion(bench: SessionAtWork) -> np.ndarray:
    """:func:`session_suspicion` of a workbench's graph and current state (read once)."""
    return session_suspicion(bench.graph, bench.state, bench)


def most_suspect(
    graph: GraphResult, state: SessionState, history: EventHistory, *, fdr: float = DEFAULT_FDR
) -> SuspectList:
    """Every item not settled, most suspect first (ties: dataset order), each with its
    suspicion (:func:`session_suspicion`, ``history`` its event log) and whether the test of
    :func:`session_suspects` flags it.

    Available from the first minute: the flags need trusted sets to compare with, the order
    does not. Settled items (:func:`settled_items`) are left out: an expert has seen them.
    """
    suspicion = session_suspicion(graph, state, history)
    found = session_suspects(graph, state, fdr=fdr)
    open_items = np.flatnonzero(~settled_items(state))
    order = open_items[np.argsort(-suspicion[open_items], kind="stable")]
    return SuspectList(graph, state, found.scores, order, suspicion=suspicion, flags=found.flags)


def workbench_most_suspect(bench: SessionAtWork, *, fdr: float = DEFAULT_FDR) -> SuspectList:
    """:func:`most_suspect` of a workbench's graph and its current state (read once)."""
    state = bench.state
    return most_suspect(bench.graph, state, bench, fdr=fdr)
