"""Replay labelling campaigns the way a person uses winnow, reading the statement after every answer.

One campaign: a pool (features, candidate sets, hidden truth) and its k-NN graph; a simulated
expert, always right, answers the item served first, one at a time. What is served, which lots
are frozen and what is stated is :func:`engine.labelling_loop.run_loop` and
:func:`engine.labelling_loop.served_order`, the code a session runs; the model is DST-PLL's
transductive decision scored by :class:`engine.lot_model.LotModel`, as in a session. The replay
only plays the expert and keeps the state a store would derive from the answers.

After **every** answer the statement is read, as a person who watches the Progress page does:
the certified sets, with the expert's label on the items answered and the frozen model label on
the others, are compared with the truth. A campaign **breaks the promise with confidence** when
at some read they are more than ``target`` wrong; the share of broken campaigns must stay at or
below ``1 − confidence`` whatever the query order. The promise **on average** bounds the mean of
that share at any read.

Orders: any name of :data:`engine.strategies.STRATEGIES`, and ``easy_first`` (the open item of
largest DST-PLL margin first: the order that most drains easy items).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine.dst import transductive_decisions
from engine.labelling_loop import (
    ItemsAt,
    Loop,
    LoopSettings,
    ServedOrder,
    VerdictLog,
    run_loop,
    served_order,
    slot_uniforms,
)
from engine.loop_design import DESIGN
from engine.lot_model import LotModel
from engine.strategies import CampaignContext, make_strategy

__all__ = ["Pool", "Reads", "Campaign", "PLAYERS", "replay", "ceiling"]


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
    """What the person saw after each answer (index ``t`` = after ``t`` answers).

    ``stated`` counts the labels of certified sets, ``wrong`` the wrong ones among them as
    handed back, ``model_labels`` the ones with a model label (no answer).
    """

    stated: list[int] = field(default_factory=list)
    wrong: list[int] = field(default_factory=list)
    model_labels: list[int] = field(default_factory=list)
    audits: list[int] = field(default_factory=list)
    ceiling: dict[int, int] = field(default_factory=dict)
    #: At the ``ceiling_at`` reads: (labels handed back, wrong among them) by Conformal Labeling
    #: and by Learn then Test on the same state with as many uniform audits (benchmarks.anchors).
    conformal: dict[int, tuple[int, int]] = field(default_factory=dict)
    ltt: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: Labels stated at the read before and not at this one (the loop never withdraws any).
    withdrawn: list[int] = field(default_factory=list)
    #: Every ``anchors_every`` answers: (answers, the open items, {anchor: (the ones it hands
    #: back, whether each label is wrong)}), for a person who reads an anchor as often as the loop.
    anchor_reads: list[tuple[int, np.ndarray, dict[str, tuple[np.ndarray, np.ndarray]]]] = field(default_factory=list)

    @property
    def error(self) -> np.ndarray:
        d = np.asarray(self.stated, dtype=float)
        return np.divide(np.asarray(self.wrong, dtype=float), d, out=np.zeros_like(d), where=d > 0)

    def broken(self, target: float) -> bool:
        """At some read, the stated labels were more than ``target`` wrong."""
        return bool((self.error > target + 1e-12).any())


def ceiling(labels: np.ndarray, scores: np.ndarray, truth: np.ndarray, target: float) -> int:
    """The most items a threshold on ``scores``, chosen with the truth, keeps at ≤ ``target`` error."""
    if labels.size == 0:
        return 0
    order = np.argsort(-scores, kind="stable")
    s, wrong = scores[order], labels[order] != truth[order]
    ends = np.flatnonzero(np.r_[s[1:] != s[:-1], True])
    ok = np.flatnonzero(np.cumsum(wrong)[ends] <= target * (ends + 1))
    return int(ends[ok[-1]] + 1) if ok.size else 0


class Campaign:
    """A session's state kept from its answers alone, and the loop read from it.

    The expert (or a test playing one) calls :meth:`answer`, :meth:`skip` and :meth:`undo`;
    :meth:`served` and :meth:`loop` read. ``key`` plays the store's secret.
    """

    def __init__(self, pool: Pool, settings: LoopSettings, *, key: bytes, session: int = 1) -> None:
        self.pool = pool
        self.settings = settings
        self.key = key
        self.session = session
        n = pool.Y.shape[0]
        self.Y = pool.Y.copy()
        self.answered = np.zeros(n, dtype=bool)
        self.skipped = np.zeros(n, dtype=bool)
        self._skip_order: list[int] = []
        self._positions: list[int] = []  # the first verdict on each item, in order
        self._verdicted: set[int] = set()
        self._labels: list[int] = []
        self._history: list[tuple[str, int]] = []  # (kind, item), for undo
        self._snapshots: dict[int, ItemsAt] = {0: ItemsAt(self.Y.copy(), self.answered.copy())}
        self._frozen: dict = {}
        self._uniforms = slot_uniforms(key, session, 4 * n + 16)
        self.model = LotModel(pool.idx, pool.X)
        #: DST-PLL's margins (easy first) and the sets they were computed from.
        self._margins: tuple[np.ndarray, np.ndarray] | None = None

    # ---------------------------------------------------------------- the person's actions

    def answer(self, item: int, label: int) -> None:
        self.Y[item] = False
        self.Y[item, label] = True
        self.answered[item] = True
        self.skipped[item] = False
        self._history.append(("answer", item))
        if item in self._verdicted:
            return  # the loop reads an item's first verdict only
        self._verdicted.add(item)
        self._positions.append(item)
        self._labels.append(label)
        if len(self._positions) % DESIGN.statement_every == 0:
            self._snapshots[len(self._positions)] = ItemsAt(self.Y.copy(), self.answered.copy())

    def skip(self, item: int) -> None:
        self.skipped[item] = True
        self._skip_order.append(item)
        self._history.append(("skip", item))

    def undo(self) -> None:
        """Undo the last answer or skip (the verdict stays in the log, as events do)."""
        kind, item = self._history.pop()
        if kind == "answer":
            self.Y[item] = self.pool.Y[item]
            self.answered[item] = False
        else:
            self.skipped[item] = False
            self._skip_order.remove(item)

    # ---------------------------------------------------------------- reading

    def items_at(self, v: int) -> ItemsAt:
        """The items as they were after ``v`` verdicts (kept at every checkpoint, where lots are frozen)."""
        return self._snapshots[v]

    def verdict_log(self) -> VerdictLog:
        """The first verdict on each item, in the order given (what a store derives from its events)."""
        return VerdictLog(np.asarray(self._positions, dtype=np.int64), np.asarray(self._labels, dtype=np.int64))

    def loop(self, *, reuse: bool = True) -> Loop:
        """The loop at the answers so far; ``reuse=False`` freezes every lot again."""
        result = run_loop(
            self.verdict_log(),
            n_items=self.Y.shape[0],
            items_at=self._snapshots.__getitem__,
            model=self.model,
            settings_at=lambda v: self.settings,
            key=self.key,
            session=self.session,
            known=self._frozen if reuse else None,
        )
        if reuse:
            self._frozen = dict(result.frozen)
        return result

    def ranked(self, strategy, context: CampaignContext, rng, loop: Loop) -> np.ndarray:
        """Open items by the order's score, items of lots after them, skipped ones last (in
        the order skipped), as a session ranks them."""
        partial = (self.Y.sum(axis=1) >= 2) & ~self.answered
        in_lots = loop.in_lots(self.Y.shape[0])
        if strategy is None:  # easy first: largest DST-PLL margin first
            score = self.margins()
        else:
            score = np.asarray(strategy.scores(context), dtype=np.float64)
        tiebreak = rng.random(score.size)
        first = np.flatnonzero(partial & ~in_lots & ~self.skipped)
        later = np.flatnonzero(partial & in_lots & ~self.skipped)
        first = first[np.lexsort((tiebreak[first], -score[first]))]
        later = later[np.lexsort((tiebreak[later], -score[later]))]
        skipped = np.asarray([i for i in self._skip_order if partial[i]], dtype=np.int64)
        return np.concatenate([first, later, skipped])

    def margins(self) -> np.ndarray:
        """DST-PLL's margin of every item on the current sets. A row's margin reads its own set
        and its neighbours' only, so after an answer just the rows whose set or neighbourhood
        changed are decided again."""
        idx = self.pool.idx
        if self._margins is None:
            margins = transductive_decisions(self.Y, idx, random_state=0)[2]
        else:
            margins, seen = self._margins
            changed = np.flatnonzero((self.Y != seen).any(axis=1))
            if changed.size:
                touched = np.isin(idx, changed).any(axis=1)
                touched[changed] = True
                margins = margins.copy()
                margins[touched] = transductive_decisions(self.Y, idx, np.flatnonzero(touched), random_state=0)[2]
        self._margins = (margins, self.Y.copy())
        return margins

    def served(self, ranked: np.ndarray, loop: Loop, top: int | None = 1) -> ServedOrder:
        queue = loop.audit_queue(self.answered, self.skipped)
        base = int(self.answered.sum() + self.skipped.sum())
        uniforms = self._uniforms
        return served_order(
            ranked,
            queue,
            base=base,
            audit_share=self.settings.audit_share,
            uniforms=lambda n: uniforms[:n],
            skipped_at_end=int(self.skipped[ranked].sum()),
            top=top,
        )

    def stated(self, loop: Loop) -> tuple[np.ndarray, int, int]:
        """The items of certified sets, how many of their labels are wrong as handed back (a
        model label that is not the truth; the promise assumes the answers right), and the
        model labels among them."""
        member, label, _ = loop.delivered(self.Y.shape[0])
        model = member & ~self.answered
        wrong = model & (label != self.pool.truth)
        return member, int(wrong.sum()), int(model.sum())


#: How the simulated person plays (:func:`replay`).
PLAYERS: tuple[str, ...] = ("honest", "skipper", "prober")


def replay(
    pool: Pool,
    order: str,
    *,
    seed: int,
    budget: int,
    settings: LoopSettings,
    ceiling_at: tuple[int, ...] = (),
    player: str = "honest",
    anchors_every: int = 0,
) -> Reads:
    """One campaign of ``budget`` answers; the statement read after each (module docstring).

    ``player``: ``"honest"`` answers the served item; ``"skipper"`` knows the truth and the
    model's frozen labels and skips every served item of the lot being audited whose frozen label
    is wrong (to hide the wrong ones from the audits), answering it only when nothing else is
    left; ``"prober"`` answers, then undoes and tries every other label before giving the true
    one again (to steer an audit's outcome). ``anchors_every``: also read both anchors every
    this many answers (:attr:`Reads.anchor_reads`; 0: only at ``ceiling_at``).
    """
    if player not in PLAYERS:
        raise ValueError(f"player must be one of {', '.join(PLAYERS)}; got {player!r}")
    key = np.random.default_rng([seed, 7]).bytes(32)
    campaign = Campaign(pool, settings, key=key, session=seed)
    rng = np.random.default_rng([seed, 9])
    view = campaign.Y.view()
    view.flags.writeable = False
    context = CampaignContext(pool.X, view, pool.idx, pool.w)
    strategy = None if order == "easy_first" else make_strategy(order, fresh=True)
    if strategy is not None:
        strategy.start(context, rng)
    reads = Reads()
    audits = answers = 0
    skips_in_a_row = 0
    member_before = np.zeros(pool.Y.shape[0], dtype=bool)
    while True:
        loop = campaign.loop()
        if skips_in_a_row == 0:
            member, wrong, model_labels = campaign.stated(loop)
            reads.withdrawn.append(int((member_before & ~member).sum()))
            member_before = member
            reads.stated.append(int(member.sum()))
            reads.wrong.append(wrong)
            reads.model_labels.append(model_labels)
            reads.audits.append(audits)
            every_read = anchors_every > 0 and answers % anchors_every == 0
            if answers in ceiling_at or every_read:
                labels, score, _ = campaign.model(campaign.Y)
                rows = np.flatnonzero((campaign.Y.sum(axis=1) >= 2) & ~campaign.answered)
                chosen = _anchor_choices(rows, labels[rows], score[rows], pool.truth[rows], audits, settings, seed)
                if answers in ceiling_at:
                    reads.ceiling[answers] = ceiling(labels[rows], score[rows], pool.truth[rows], settings.max_error)
                    for name, (items, wrong_labels) in chosen.items():
                        getattr(reads, name)[answers] = (int(items.size), int(wrong_labels.sum()))
                if every_read:
                    reads.anchor_reads.append((answers, rows, chosen))
        if answers == budget:
            break
        ranked = campaign.ranked(strategy, context, rng, loop)
        served = campaign.served(ranked, loop)
        if served.positions.size == 0:
            break
        item = int(served.positions[0])
        truth = int(pool.truth[item])
        if player == "skipper" and skips_in_a_row < int(campaign.skipped.sum()) + 1 and _hides(loop, item, truth):
            campaign.skip(item)
            skips_in_a_row += 1
            continue
        skips_in_a_row = 0
        audits += int(served.audit[0])
        campaign.answer(item, truth)
        if player == "prober":
            for other in np.flatnonzero(pool.Y[item]):
                campaign.undo()
                campaign.answer(item, int(other))
            campaign.undo()
            campaign.answer(item, truth)
        answers += 1
        if strategy is not None:
            strategy.observe(item, campaign.Y[item].copy())
        context.n_answers += 1
    return reads


def _anchor_choices(
    rows: np.ndarray,
    labels: np.ndarray,
    scores: np.ndarray,
    truth: np.ndarray,
    audits: int,
    settings: LoopSettings,
    seed: int,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each anchor on the open items ``rows`` the model would label now, with as many uniform
    audits: the items it hands back and whether each label is wrong."""
    from benchmarks.anchors import conformal_labeling, learn_then_test, uniform_audits

    keep = scores > 0
    rows, scores, wrong = rows[keep], scores[keep], (labels != truth)[keep]
    audited = uniform_audits(scores.size, audits, seed)
    return {
        name: (rows[chosen], wrong[chosen])
        for name, chosen in (
            ("conformal", conformal_labeling(scores, wrong, audited, settings.max_error)),
            ("ltt", learn_then_test(scores, wrong, audited, settings.max_error, settings.confidence)),
        )
    }


def _hides(loop: Loop, item: int, truth: int) -> bool:
    """Whether ``item`` is in the lot being audited with a wrong frozen label (what a skipper skips)."""
    active = loop.active
    if active is None:
        return False
    where = np.flatnonzero(active.lot.items == item)
    return bool(where.size) and int(active.lot.labels[where[0]]) != truth
