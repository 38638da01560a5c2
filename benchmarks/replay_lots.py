"""Replay labelling campaigns the way a person uses winnow, reading the statement after every answer.

One campaign: a pool (features, candidate sets, hidden truth) and its k-NN graph; a simulated
expert, always right, answers one served item at a time. Served slot ``j`` is an audit when a
seeded uniform is below the share of :meth:`app.service.lots.LotsNow.audit_share`; an audit
serves the head of :func:`app.service.lots.audit_queue`, any other slot the next pick of the
query order. Lots are frozen by :func:`app.service.lots.freeze_lot` from DST-PLL's transductive
labels and margins (:func:`engine.dst.transductive_decisions`), exactly as a session freezes
them; the certified lots' unanswered items are the delivered model labels. So the lot logic is
the app's own code; only the store and the pages are left out.

After **every** answer the statement is read, as a person who watches the Progress page does:
the delivered labels are compared with the truth. A campaign **breaks the promise** when at some
read the delivered labels are more than ``target`` wrong; the share of broken campaigns must
stay at or below ``1 − confidence`` whatever the query order and whenever the person stops.

Orders: any name of :data:`engine.strategies.STRATEGIES`, and ``easy_first`` (the open item of
largest DST-PLL margin first: the order that most drains the easy items from a lot, the worst
case for a statement about a moving population). As in a session, items
of a lot are served after the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from app.service.lots import (
    FREEZE_RETRY_ANSWERS,
    ItemStatus,
    LotsNow,
    agreement,
    audit_queue,
    freeze_lot,
    learning_order,
    linear_decisions,
    lot_items_in_audit_order,
    lots_now,
    selection_scores,
)
from app.store import LabelLotRecord, LabelSettings
from engine.dst import transductive_decisions
from engine.strategies import CampaignContext, make_strategy

__all__ = ["Pool", "Reads", "replay", "ceiling"]


@dataclass(frozen=True)
class Pool:
    """A data set to label in place: features, candidate sets, truth, and its k-NN graph."""

    X: np.ndarray
    Y: np.ndarray
    truth: np.ndarray
    idx: np.ndarray
    w: np.ndarray


@dataclass
class Reads:
    """What the person saw after each answer (index ``t`` = after ``t`` answers)."""

    delivered: list[int] = field(default_factory=list)
    wrong: list[int] = field(default_factory=list)
    audits: list[int] = field(default_factory=list)
    ceiling: dict[int, int] = field(default_factory=dict)

    @property
    def error(self) -> np.ndarray:
        d = np.asarray(self.delivered, dtype=float)
        return np.divide(np.asarray(self.wrong, dtype=float), d, out=np.zeros_like(d), where=d > 0)

    def broken(self, target: float) -> bool:
        """At some read, the delivered labels were more than ``target`` wrong."""
        return bool((self.error > target + 1e-12).any())

    def first_statement_broken(self, target: float) -> bool | None:
        """The labels delivered at the first read that stated some (None: never stated)."""
        d = np.asarray(self.delivered)
        first = np.flatnonzero(d > 0)
        return None if first.size == 0 else bool(self.error[first[0]] > target + 1e-12)


def ceiling(labels: np.ndarray, scores: np.ndarray, truth: np.ndarray, target: float) -> int:
    """The most open items a threshold on ``scores``, chosen with the truth, keeps at ≤ ``target`` error."""
    if labels.size == 0:
        return 0
    order = np.argsort(-scores, kind="stable")
    s, wrong = scores[order], labels[order] != truth[order]
    ends = np.flatnonzero(np.r_[s[1:] != s[:-1], True])
    ok = np.flatnonzero(np.cumsum(wrong)[ends] <= target * (ends + 1))
    return int(ends[ok[-1]] + 1) if ok.size else 0


def _status(Y: np.ndarray, answered: np.ndarray) -> ItemStatus:
    n = Y.shape[0]
    nothing = np.zeros(n, dtype=bool)
    return ItemStatus(
        candidates=Y,
        answered=answered,
        none_of_these=nothing,
        in_conflict=nothing,
        open_items=(Y.sum(axis=1) >= 2) & ~answered,
    )


def replay(
    pool: Pool,
    order: str,
    *,
    seed: int,
    budget: int,
    settings: LabelSettings,
    ceiling_at: tuple[int, ...] = (),
) -> Reads:
    """One campaign of ``budget`` answers; the statement read after each (module docstring)."""
    Y = pool.Y.copy()
    n = Y.shape[0]
    answered = np.zeros(n, dtype=bool)
    secret = np.random.default_rng([seed, 7]).bytes(32)
    slot_u = np.random.default_rng([seed, 8]).random(budget + 1)
    rng = np.random.default_rng([seed, 9])
    view = Y.view()
    view.flags.writeable = False
    context = CampaignContext(pool.X, view, pool.idx, pool.w)
    strategy = None if order == "easy_first" else make_strategy(order, fresh=True)
    if strategy is not None:
        strategy.start(context, rng)
    lots: list[LabelLotRecord] = []
    reads = Reads()
    audits = 0

    def model() -> tuple[np.ndarray, np.ndarray]:
        labels, _, margin = transductive_decisions(Y, pool.idx, random_state=0)
        return labels, margin

    tried: list[int] = []  # answered items at the last attempt that froze nothing
    learning = learning_order(secret, seed, pool.Y.sum(axis=1) >= 2)

    def current() -> LotsNow:
        items = _status(Y, answered)
        now = lots_now(lots, items, settings, learning=learning)
        n_answered = int(answered.sum())
        if now.new_lot_due and (not tried or n_answered >= tried[-1] + FREEZE_RETRY_ANSWERS):
            labels, margin = model()
            scores = selection_scores(lambda: pool.X, pool.Y, Y, pool.idx, now.audited_positions(), labels, margin)
            fresh = freeze_lot(
                now, items, labels, margin, settings, scores=scores, secret=secret, session_id=seed, last_event_id=0
            )
            if fresh is not None:
                lots.append(fresh)
                now = lots_now(lots, items, settings, learning=learning)
                tried.clear()
            else:
                tried.append(n_answered)
        return now

    for t in range(budget + 1):
        now = current()
        kept, label, _ = now.delivered(n)
        kept &= ~answered
        reads.delivered.append(int(kept.sum()))
        reads.wrong.append(int((label[kept] != pool.truth[kept]).sum()))
        reads.audits.append(audits)
        if t in ceiling_at:
            labels, margin = model()
            open_rows = np.flatnonzero((Y.sum(axis=1) >= 2) & ~answered)
            # The larger ceiling of the scores a lot may be chosen by (app.service.lots.selection_scores).
            scores = [margin]
            if np.ptp(pool.X, axis=0).any():
                scores.append(agreement(*linear_decisions(pool.X, Y)[:2], labels, margin))
            reads.ceiling[t] = max(
                ceiling(labels[open_rows], score[open_rows], pool.truth[open_rows], settings.max_error)
                for score in scores
            )
        if t == budget:
            break
        partial = (Y.sum(axis=1) >= 2) & ~answered
        if not partial.any():
            break
        queue = audit_queue(now)
        if queue.size and slot_u[t] < now.audit_share(settings):
            item = int(queue[0])
            audits += 1
        else:
            item = _ranked_pick(
                strategy, context, rng, partial, now.in_lots(n), lot_items_in_audit_order(now), Y, pool.idx
            )
        Y[item] = False
        Y[item, pool.truth[item]] = True
        answered[item] = True
        if strategy is not None:
            strategy.observe(item, Y[item].copy())
        context.n_answers += 1
    return reads


def _ranked_pick(
    strategy, context, rng, partial: np.ndarray, deferred: np.ndarray, queue: np.ndarray, Y: np.ndarray, idx
) -> int:
    """The query order's next item; items of a lot wait until the others are done, then come in
    their lots' audit order (as in a session: app.service.lots.lot_last_order)."""
    if not (partial & ~deferred).any() and queue.size:
        return int(queue[0])
    if strategy is None:  # easy first: the open item of largest margin, undecided ones first
        _, _, margin = transductive_decisions(Y, idx, random_state=0)
        score = np.where(partial, margin, -np.inf) - 10.0 * deferred
        return int(np.argmax(score))
    # The top of the order's ranking among the items of no lot, as a session serves it (the
    # ranking, not a greedy batch: one item is served at a time); ties at random.
    askable = partial & ~deferred
    if not askable.any():
        askable = partial
    score = np.where(askable, np.asarray(strategy.scores(context), dtype=np.float64), -np.inf)
    tied = np.flatnonzero(score == score.max())
    return int(tied[rng.integers(tied.size)])
