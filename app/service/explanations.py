"""Why an item is worth asking: the targets an answer can change, its neighbours, its answers' effects.

One seam of :class:`app.service.workbench.Workbench`: pure reads of the session's state and
its :class:`app.service.ranking_state.RankingState`, nothing written. The targets an answer
can change are the ranker's :meth:`engine.ranking.Ranker.moved_targets`, whatever the ranker.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from app.service.ranking_state import RankingState, local_graph
from app.store import SessionState
from engine.winners import label_sets, possible_labels, witness

__all__ = [
    "QueryExplanation",
    "TargetExplanation",
    "Neighbour",
    "AnswerEffect",
    "explain",
    "neighbours",
    "answer_effects",
]


@dataclass(frozen=True)
class TargetExplanation:
    """Why one target's decision is open, in label names."""

    target: int  # position of the target instance
    target_id: str
    necessary: list[str]
    possible: list[str]
    #: A label that is possible but not necessary, with a completion that makes it win.
    witness_label: str | None
    #: (neighbour id, label that neighbour takes in the witness completion, its candidates)
    witness: list[tuple[str, str, str]]
    #: For each answer about the queried item: the target's necessary labels afterwards.
    necessary_after: dict[str, list[str]]


@dataclass(frozen=True)
class Neighbour:
    """One of an item's nearest neighbours: the items whose labels decide its own."""

    position: int
    item_id: str
    #: Its current candidate labels, by name.
    candidates: tuple[str, ...]
    #: Its vote weight for the item (1 for uniform weighting).
    weight: float


@dataclass(frozen=True)
class AnswerEffect:
    """What answering an item with one of its candidate labels would do to the items nearby.

    Counted over the targets that have the item among their neighbours, with their necessary
    (NL) and approximately possible (APL) labels before and after the answer.
    """

    label: str
    label_index: int
    #: Targets whose decision becomes certain (NL ≠ APL before, NL = APL after).
    settled: int
    #: Targets whose NL or APL changes at all (the settled ones included).
    changed: int

    @property
    def outcome(self) -> str:
        """The effect in plain words, without the label: ``"12 nearby items become certain"``.

        >>> AnswerEffect("cat", 0, settled=1, changed=3).outcome
        '1 nearby item becomes certain and 2 more narrow down'
        >>> AnswerEffect("cat", 0, settled=0, changed=0).outcome
        'no nearby item changes'
        """

        def items(n: int) -> str:
            return f"{n} nearby item" + ("" if n == 1 else "s")

        more = self.changed - self.settled
        if self.settled and more:
            verb = "becomes" if self.settled == 1 else "become"
            return f"{items(self.settled)} {verb} certain and {more} more narrow down"
        if self.settled:
            return f"{items(self.settled)} " + ("becomes" if self.settled == 1 else "become") + " certain"
        if more:
            return f"{items(more)} " + ("narrows" if more == 1 else "narrow") + " down"
        return "no nearby item changes"


@dataclass(frozen=True)
class QueryExplanation:
    """Why an item is worth asking about: the targets an answer could change."""

    position: int
    item_id: str
    score: float
    n_targets_changed: int
    #: Positions of the targets an answer could change (those the score counts).
    targets: list[int]
    example: TargetExplanation | None
    #: The item's own nearest neighbours, nearest first.
    neighbours: list[Neighbour] = field(default_factory=list)
    #: One entry per candidate label of the item, in label order.
    effects: list[AnswerEffect] = field(default_factory=list)
    #: True while a lot's audits are served: only the neighbours are given (no score, targets or effects).
    withheld: bool = False


def explain(ranking: RankingState, state: SessionState, position: int) -> QueryExplanation:
    """Why ``position`` is worth asking: the targets it can change, one of them in detail.

    For ``"apl"``/``"pl"`` these are the targets whose NL or APL/PL some answer changes;
    for ``"decision_change"`` the targets whose k-NN decision some answer changes (a
    positive expected change), the one it moves most first; none for a baseline.
    """
    rows = ranking.ranker.moved_targets(position)
    targets = [int(ranking.targets[r]) for r in rows]
    example = _explain_target(ranking, state, int(rows[0]), position) if rows.size else None
    return QueryExplanation(
        position=position,
        item_id=state.external_ids[position],
        score=float(ranking.scores[position]),
        n_targets_changed=len(targets),
        targets=targets,
        example=example,
        neighbours=neighbours(ranking, state, position),
        effects=answer_effects(ranking, state, position),
    )


def neighbours_only(ranking: RankingState, state: SessionState, position: int) -> QueryExplanation:
    """The explanation while a lot's audits are served: the item's neighbours, which every item shows
    alike, and nothing of why it was ranked (``withheld``; score NaN, no targets, no effects)."""
    return QueryExplanation(
        position=position,
        item_id=state.external_ids[position],
        score=float("nan"),
        n_targets_changed=0,
        targets=[],
        example=None,
        neighbours=neighbours(ranking, state, position),
        withheld=True,
    )


def neighbours(ranking: RankingState, state: SessionState, position: int) -> list[Neighbour]:
    """The ``k`` nearest neighbours of the item at ``position``, nearest first.

    They are the items whose candidate sets vote on the item's own label. Read from the
    session's graph when the item is a target; otherwise from its row of the dataset's graph,
    which covers every item (itself left out), so no search runs here.
    """
    names = state.label_names
    row = ranking.row_of(position)
    if row is not None:
        idx_row, w_row = ranking.idx[row], ranking.w[row]
    else:
        idx_row, w_row = ranking.graph.idx[position], ranking.graph.w[position]
    Y = state.candidates
    return [
        Neighbour(
            position=int(n),
            item_id=state.external_ids[int(n)],
            candidates=tuple(names[m] for m in np.flatnonzero(Y[int(n)])),
            weight=float(weight),
        )
        for n, weight in zip(idx_row, w_row, strict=True)
    ]


def answer_effects(ranking: RankingState, state: SessionState, position: int) -> list[AnswerEffect]:
    """For each candidate label of the item: how many nearby items an answer settles.

    The targets that have the item among their neighbours are the only ones an answer can
    change; their ``NL`` and ``APL`` are recomputed with the item's set replaced by the one
    label (``O(T·K·M)`` for those ``T`` targets, a few dozen on a k-NN graph).
    """
    names = state.label_names
    labels = np.flatnonzero(state.candidates[position])
    rows = ranking.ranker.targets_of(position)
    if rows.size == 0:
        return [AnswerEffect(names[m], int(m), settled=0, changed=0) for m in labels]
    # Only the sets of these targets' neighbours are read: copy those, not every item's.
    items, idx_rows = local_graph(ranking.idx[rows])
    Y = np.array(state.candidates[items])
    slot = int(np.searchsorted(items, position))
    w_rows = ranking.w[rows]
    necessary, possible = label_sets(idx_rows, w_rows, Y)
    was_open = (necessary != possible).any(axis=1)
    effects = []
    for label in labels:
        Y[slot] = False
        Y[slot, label] = True
        after_necessary, after_possible = label_sets(idx_rows, w_rows, Y)
        now_open = (after_necessary != after_possible).any(axis=1)
        changed = ((after_necessary != necessary) | (after_possible != possible)).any(axis=1)
        effects.append(
            AnswerEffect(
                names[label], int(label), settled=int((was_open & ~now_open).sum()), changed=int(changed.sum())
            )
        )
    return effects


def _explain_target(ranking: RankingState, state: SessionState, row: int, position: int) -> TargetExplanation:
    names = state.label_names
    candidates = state.candidates
    idx_row, w_row = ranking.idx[row], ranking.w[row]
    # A target's vote reads only its K neighbours' sets: work on those K rows (neighbour
    # j is local row j), never on a copy of every item's set.
    Y = np.array(candidates[idx_row], dtype=bool)
    local = np.arange(idx_row.size)
    necessary = _necessary_of_target(local, w_row, Y)
    possible = possible_labels(local[None], w_row[None], Y)[0]
    open_labels = np.flatnonzero(possible & ~necessary)
    witness_label, completion = None, []
    if open_labels.size:
        label = int(open_labels[0])
        chosen = witness(local, w_row, Y, label)
        # PL holds the label and NL does not: it can win, so a winning completion exists.
        assert chosen is not None, f"no witness for possible label {label}"
        witness_label = names[label]
        completion = [
            (state.external_ids[n], names[c], "|".join(names[m] for m in np.flatnonzero(Y[j])))
            for j, (n, c) in enumerate(zip(idx_row, chosen, strict=True))
        ]
    after = {}
    slots = np.flatnonzero(idx_row == position)
    for answer in np.flatnonzero(candidates[position]):
        answered = Y.copy()
        answered[slots] = False
        answered[slots, answer] = True
        nl_after = _necessary_of_target(local, w_row, answered)
        after[names[answer]] = [names[m] for m in np.flatnonzero(nl_after)]
    return TargetExplanation(
        target=int(ranking.targets[row]),
        target_id=state.external_ids[int(ranking.targets[row])],
        necessary=[names[m] for m in np.flatnonzero(necessary)],
        possible=[names[m] for m in np.flatnonzero(possible)],
        witness_label=witness_label,
        witness=completion,
        necessary_after=after,
    )


def _necessary_of_target(idx_row: np.ndarray, w_row: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """``NL`` of one target (bool array of shape (n_labels,))."""
    necessary, _ = label_sets(idx_row[None], w_row[None], Y)
    return necessary[0]
