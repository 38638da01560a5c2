"""Lots of model labels at work in a session: when one is frozen, what is audited next, what is certified.

The statistics are :mod:`engine.lots`; this module applies them to a session's state:

* **Freezing.** When a session has no lot, or its last lot is settled (certified, hopeless,
  or audited to its end) or failing (:func:`failing`), a new lot is frozen from the open
  items nobody answered that no certified lot delivers, whose score reaches the lot's
  threshold (:func:`next_threshold`: DST-PLL's own reject rule, margin > 0, until the audits
  say where the model is good enough now; the score, DST-PLL's margin or its agreement with a
  linear model of the features, is the one whose learned threshold lets in the most items:
  :func:`selection_scores`; once that model is fitted, either lot also stops where its
  estimate of the lot's error passes :data:`ESTIMATED_ERROR_SHARE` of the target), if there
  are at least :data:`MIN_LOT_SIZE` of them and the lot
  could deliver half its items. Under the average promise the first lot also waits for
  :data:`FIRST_LOT_LEARNING_AUDITS` learning audits, so that no lot is frozen blind. Their
  labels (DST-PLL's) are frozen then: the lot's statement
  is about exactly those labels, whatever the model says later. With confidence, a failing
  lot gives way only to a clearly cleaner lot (:func:`failing`); under the average promise a
  lot is ended by its sampling plan (:func:`engine.lots.average_plan`) instead. A lot
  some of whose items a later lot took again is superseded and never certified (the later
  lot's labels are the ones that count), so the delivered lots never share an item. The
  lot's audit order is a permutation drawn from the store's secret (:func:`lot_order`),
  unknown to anyone who does not hold the store's file.
* **Audits.** The served slots that are audits (a uniform below the share, from the secret's
  stream: :func:`slot_uniforms`) serve the active lot's items in its audit order, from the
  first one without a settled answer (:func:`audit_queue`): a skipped or disputed audit is
  served again, never replaced, so the audited sample stays a random prefix of the lot.
  The share is :data:`FIRST_STATEMENT_AUDIT_SHARE` while no lot is certified (audits buy
  the statement) and the session's ``audit_share`` while one is.
* **Learning audits.** While no lot is being audited, the audit slots (at the session's
  ``audit_share``) serve the items that were partial in another random order from the key
  (:func:`learning_order`), so that the next lot's threshold is learned from a uniform sample
  of the items as the model sees them now (:func:`selection_scores`); they certify nothing.
  Before the first lot they are served at :data:`FIRST_STATEMENT_AUDIT_SHARE`.
* **Ranking.** The ranked slots serve the items of no lot first, then the lots' items (like
  skipped items): the expert's answers go where the model is unsure, while the audits check
  where it is sure; and a lot whose items are not answered elsewhere keeps its labels to
  deliver (a lot's bound counts its wrong labels, so each item answered outside the audits
  leaves the same bound over fewer delivered labels). The active lot's items come in its
  audit order, then the certified lots' in theirs (:func:`lot_items_in_audit_order`,
  :func:`lot_last_order`), so answering them extends the audited prefixes.
* **Outcomes.** An item of a lot whose candidate set an expert settled (an audit or any
  other answer) tells whether its frozen label was right; "none of these" and another label
  outside the set make it wrong; an item in conflict is answered with an unknown outcome.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from app.store import LabelLotRecord, LabelSettings, SessionState
from engine.dst_evidence import transductive_decisions
from engine.lots import (
    OUTCOME_RIGHT,
    OUTCOME_UNKNOWN,
    OUTCOME_WRONG,
    LotVerdict,
    audits_to_certify,
    lot_alpha,
    lot_share,
    lot_verdict,
)

__all__ = [
    "ItemStatus",
    "FIRST_STATEMENT_AUDIT_SHARE",
    "MIN_LOT_SIZE",
    "FAILING_MIN_AUDITS",
    "ESTIMATED_ERROR_SHARE",
    "FREEZE_RETRY_ANSWERS",
    "FIRST_LOT_LEARNING_AUDITS",
    "first_lot_cost",
    "LotsNow",
    "lot_order",
    "learning_order",
    "slot_uniforms",
    "lot_outcomes",
    "lots_now",
    "failing",
    "SelectionScore",
    "selection_scores",
    "agreement",
    "linear_decisions",
    "LINEAR_TRAIN_ROWS",
    "LINEAR_COMPONENTS",
    "next_threshold",
    "freeze_lot",
    "audit_queue",
    "lot_items_in_audit_order",
    "lot_last_order",
]

#: Share of served items that are audits until the session's first lot is certified: a
#: statement needs about 60 audited answers (``engine.lots``), so at 50 % the first model
#: labels can arrive within about 130 answers; ``docs/results_labels.md`` measures it.
FIRST_STATEMENT_AUDIT_SHARE = 0.5

#: A lot smaller than this is not frozen; nor is one whose certification would need audits
#: of more than half its items (at a 5 % target, lots under about 150 items).
MIN_LOT_SIZE = 20

#: After an attempt to freeze a lot found none worth freezing, the next attempt waits for this
#: many more answers (each attempt decides DST-PLL on every item; the model moves slowly).
FREEZE_RETRY_ANSWERS = 10

#: A score that comes with the model's own probability that each label is wrong (agreement's)
#: also stops its lot where the mean of that probability over the lot would pass this share of
#: the target, per promise. With confidence: a lot about 1 % wrong certifies at 5 % within
#: about 200 audits where one 2 % wrong needs more than 400 (``docs/results_labels.md``), and a
#: few dozen audits cannot tell them apart; on BirdSong the estimate was above the true error
#: of every top slice (1.5 % estimated over the top 550 or so, 0.7-1 % true). On average: the
#: first lot's sampling plan accepts a lot as wrong as 3 % more often than not
#: (:func:`engine.lots.average_plan`), and on BirdSong a lot estimated 5 % wrong was 2-3 % wrong;
#: after 500 answers (seeds 0-8) 1.0 delivered 887 labels on average against 795 for 0.8
#: (``docs/results_labels.md``, eighth pass).
ESTIMATED_ERROR_SHARE: dict[str, float] = {"confidence": 0.3, "average": 1.0}

#: Learning audits needed before a session's first lot is frozen, per promise. With confidence the
#: first lot is frozen at once from DST-PLL's own reject rule: on the sample it is the clean lot,
#: and its statement is the one people wait for. On average the first lot waits for this many
#: learning audits (served at the first statement's share), so that its threshold and score are
#: learned, not blind: on BirdSong the blind lot is 13.6 % wrong and takes three quarters of the
#: budget. Over 20 seeds at 500 answers, 40 delivered 453 labels on average against 332 (better
#: on 14 seeds, worse on 3; 4 runs stated nothing against 9). 20 let three runs of 18 deliver
#: DST-PLL's blind lot, 12 % wrong, after a lucky run of audits (``docs/results_labels.md``,
#: sixth pass).
FIRST_LOT_LEARNING_AUDITS: dict[str, int] = {"confidence": 0, "average": 40}

#: Threshold learning keeps the lowest margin at which the audited labels above it were at
#: most this share of the target wrong, on at least LEARN_MIN_AUDITS audits.
LEARN_ERROR_SHARE = 0.5
LEARN_MIN_AUDITS = 10

#: A lot not yet certified whose audited prefix, on at least this many audits, is more than
#: ``FAILING_ERROR_SHARE × target`` wrong is failing (:func:`failing`).
FAILING_MIN_AUDITS = 20
FAILING_ERROR_SHARE = 0.5


def _seed(secret: bytes, *words: int) -> list[int]:
    """A seed for ``numpy.random.default_rng`` from the store's secret and some integers."""
    digest = hashlib.sha256(secret + b"".join(int(w).to_bytes(8, "little", signed=True) for w in words)).digest()
    return [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 32, 4)]


def lot_order(secret: bytes, session_id: int, number: int, size: int) -> np.ndarray:
    """The audit order of lot ``number``: a permutation of ``range(size)`` from the secret."""
    return np.random.default_rng(_seed(secret, 1, session_id, number)).permutation(int(size))


def slot_uniforms(secret: bytes, session_id: int, n: int) -> np.ndarray:
    """``u_0 … u_{n-1}``: served slot ``j`` is an audit when ``u_j`` is below the share."""
    return np.random.default_rng(_seed(secret, 0, session_id)).random(int(n))


@dataclass(frozen=True)
class ItemStatus:
    """What the lots read of a session's items (arrays of shape (n_instances, ...)).

    Attributes
    ----------
    candidates : bool array of shape (n_instances, n_labels)
        Current candidate sets (an answer leaves one label).
    answered : bool array
        Items with an expert verdict.
    none_of_these, in_conflict, open_items : bool arrays
        As in :class:`app.store.SessionState`.
    """

    candidates: np.ndarray
    answered: np.ndarray
    none_of_these: np.ndarray
    in_conflict: np.ndarray
    open_items: np.ndarray

    @classmethod
    def of(cls, state: SessionState) -> ItemStatus:
        """The status of a session's items."""
        return cls(
            candidates=np.asarray(state.candidates),
            answered=np.asarray(state.answered),
            none_of_these=np.asarray(state.none_of_these),
            in_conflict=np.asarray(state.in_conflict),
            open_items=np.asarray(state.open_items),
        )

    @property
    def n_instances(self) -> int:
        return int(self.answered.size)


def first_lot_cost(max_error: float, confidence: float, promise: str, lot_size: int = 1000) -> tuple[int, int]:
    """What a first lot of ``lot_size`` items costs: the error-free audited answers that certify it
    (:func:`engine.lots.audits_to_certify` at the first lot's level) and the learning audits it
    waits for before it is frozen (:data:`FIRST_LOT_LEARNING_AUDITS`)."""
    level = lot_alpha(1.0 - confidence, 1) if promise == "confidence" else lot_share(1)
    needed = audits_to_certify(lot_size, target=max_error, alpha=level, promise=promise)
    return needed, FIRST_LOT_LEARNING_AUDITS[promise]


def lot_outcomes(lot: LabelLotRecord, items: ItemStatus) -> tuple[np.ndarray, np.ndarray]:
    """Outcome (engine.lots codes) and answered flag of each lot item, in audit order."""
    positions = lot.positions
    answered = items.answered[positions]
    candidates = items.candidates[positions]
    none = items.none_of_these[positions]
    conflict = items.in_conflict[positions]
    settled = answered & ~conflict & ((candidates.sum(axis=1) == 1) | none)
    right = settled & ~none & candidates[np.arange(positions.size), lot.labels]
    outcomes = np.full(positions.size, OUTCOME_UNKNOWN, dtype=np.int64)
    outcomes[settled] = OUTCOME_WRONG
    outcomes[right] = OUTCOME_RIGHT
    return outcomes, answered


@dataclass(frozen=True)
class LotsNow:
    """Every lot of a session with what its audits say now.

    Attributes
    ----------
    lots : list of LabelLotRecord
    verdicts : list of engine.lots.LotVerdict
        One per lot, at the session's current target.
    answered : list of bool arrays
        Per lot, in audit order: the items with an expert verdict.
    outcomes : list of int arrays
        Per lot, in audit order.
    learned : int array
        The answered prefix of the session's learning order (:func:`learning_order`): a
        uniform sample of the items that were partial, for choosing the next lot's threshold.
    learning_waiting : int array
        The learning order's next items nobody answered that no lot holds: what audit slots
        serve while no lot is being audited (learning audits; they certify nothing).
    failing : bool
        The lot being audited is failing (:func:`failing`): a lot at a higher threshold,
        learned from the audits, may take its place.
    learning_needed : int
        Learning audits still needed before the session's first lot is frozen
        (:data:`FIRST_LOT_LEARNING_AUDITS`); 0 once a lot exists.
    """

    lots: list[LabelLotRecord]
    verdicts: list[LotVerdict]
    answered: list[np.ndarray]
    outcomes: list[np.ndarray]
    learned: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    learning_waiting: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    failing: bool = False
    learning_needed: int = 0

    @property
    def active(self) -> int | None:
        """Index of the lot being audited: the last one, until it is hopeless or audited to its
        end (a certified lot goes on being audited, at the lower share, so that its bound
        keeps up with the items answered elsewhere); None if none."""
        if not self.lots:
            return None
        v, answered = self.verdicts[-1], self.answered[-1]
        exhausted = v.audited + int(answered[v.audited :].sum()) >= v.lot_size
        return None if (v.hopeless or exhausted) else len(self.lots) - 1

    @property
    def new_lot_due(self) -> bool:
        """Whether a new lot may be frozen: the learning audits the first lot waits for are in
        (:attr:`learning_needed`), and no lot is being audited, or the one being audited is
        certified (its items are delivered; the items it left out may make the next lot) or
        failing (a stricter lot may replace it)."""
        if self.learning_needed > 0:
            return False
        i = self.active
        return i is None or self.verdicts[i].certified or self.failing

    def audited_positions(self) -> np.ndarray:
        """The items of every lot's audited prefix (a uniform sample of its lot) and of the
        learning order's answered prefix."""
        parts = [lot.positions[: v.audited] for lot, v in zip(self.lots, self.verdicts, strict=True)]
        return np.unique(np.concatenate([self.learned, *parts]))

    @property
    def stating(self) -> bool:
        """Whether some lot is certified now (model labels are stated)."""
        return any(v.certified for v in self.verdicts)

    def delivered(self, n_instances: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Items whose frozen model label is handed back (unanswered items of certified lots),
        their labels and margins (NaN/-1 elsewhere)."""
        kept = np.zeros(n_instances, dtype=bool)
        label = np.full(n_instances, -1, dtype=np.int64)
        margin = np.full(n_instances, np.nan)
        for lot, verdict, answered in zip(self.lots, self.verdicts, self.answered, strict=True):
            if not verdict.certified:
                continue
            rows = ~answered
            kept[lot.positions[rows]] = True
            label[lot.positions[rows]] = lot.labels[rows]
            margin[lot.positions[rows]] = lot.margins[rows]
        return kept, label, margin

    def in_lots(self, n_instances: int) -> np.ndarray:
        """Items of some lot (certified or being audited)."""
        member = np.zeros(n_instances, dtype=bool)
        for lot in self.lots:
            member[lot.positions] = True
        return member

    def audit_share(self, settings: LabelSettings) -> float:
        """The share of served slots that are audits now (module docstring)."""
        if settings.audit_share <= 0.0:
            return 0.0
        if self.active is None:
            # Learning audits: they choose the next lot, at the low share. Under a promise whose
            # first lot learns first, at the first statement's share until it is made: they are
            # what it waits for.
            if not self.learning_waiting.size:
                return 0.0
            learns_first = FIRST_LOT_LEARNING_AUDITS[settings.promise] > 0 and not self.stating
            return max(settings.audit_share, FIRST_STATEMENT_AUDIT_SHARE) if learns_first else settings.audit_share
        if self.stating:
            return settings.audit_share
        return max(settings.audit_share, FIRST_STATEMENT_AUDIT_SHARE)


def learning_order(secret: bytes, session_id: int, original_partial: np.ndarray) -> np.ndarray:
    """The items that were partial, in a random order drawn from the store's key: the order of
    learning audits (:class:`LotsNow`)."""
    items = np.flatnonzero(original_partial)
    return items[np.random.default_rng(_seed(secret, 2, session_id)).permutation(items.size)]


def lots_now(
    lots: list[LabelLotRecord],
    items: ItemStatus,
    settings: LabelSettings,
    *,
    learning: np.ndarray | None = None,
) -> LotsNow:
    """Each lot's outcomes and verdict at the session's current target, and where the learning
    order (:func:`learning_order`) stands."""
    verdicts, answered_all, outcomes_all = [], [], []
    for lot in lots:
        outcomes, answered = lot_outcomes(lot, items)
        verdicts.append(
            lot_verdict(
                outcomes,
                answered,
                target=settings.max_error,
                alpha=lot.alpha if settings.promise == "confidence" else lot_share(lot.number),
                prior_target=lot.target,
                promise=settings.promise,
            )
        )
        answered_all.append(answered)
        outcomes_all.append(outcomes)
    taken_later = np.zeros(items.n_instances, dtype=bool)
    for i in range(len(lots) - 1, -1, -1):
        if taken_later[lots[i].positions].any():  # superseded (module docstring)
            verdicts[i] = replace(verdicts[i], certified=False, audits_left=-1)
        taken_later[lots[i].positions] = True
    now = LotsNow(list(lots), verdicts, answered_all, outcomes_all)
    if now.active is not None:
        now = replace(now, failing=failing(now.verdicts[now.active], settings.max_error, settings.promise))
    if learning is None or learning.size == 0:
        return now
    held = now.in_lots(items.n_instances)
    answered = items.answered[learning]
    can_wait = ~answered & items.open_items[learning] & ~held[learning]
    # The answered items before the first one still waiting: a random sample of the items that
    # were partial (an item a lot holds is skipped over; learning needs no exact uniformity).
    first = int(np.argmax(can_wait)) if can_wait.any() else learning.size
    head = learning[:first]
    learned = head[answered[:first]]
    waiting = learning[can_wait]
    needed = 0
    if not lots and waiting.size and settings.audit_share > 0.0:
        needed = max(0, FIRST_LOT_LEARNING_AUDITS[settings.promise] - int(learned.size))
    return replace(now, learned=learned, learning_waiting=waiting, learning_needed=needed)


def failing(verdict: LotVerdict, target: float, promise: str = "confidence") -> bool:
    """Whether a lot's audits say that a stricter lot would pay sooner than more of its audits.

    Only with confidence: under the average promise a lot's sampling plan ends it within
    :data:`engine.lots.AVERAGE_PLAN_AUDITS` audits, and sooner once its audits hold more wrong
    labels than it could ever accept (hopeless); a lot leaving early would give its budget away
    to lots whose share is a quarter of it (:func:`engine.lots.lot_share`).

    A lot not certified whose audited prefix, on at least :data:`FAILING_MIN_AUDITS` audits,
    is more than ``FAILING_ERROR_SHARE × target`` wrong. At such a rate a certification takes
    hundreds of audits (with confidence, about 800 for a lot 3 % wrong at a 5 % target; on
    average, only a run of lucky audits certifies it). Its audits, a uniform sample of the
    lot, show where the model is good enough: when they show a clearly cleaner lot above a
    higher threshold (:func:`next_threshold`; at least :data:`FAILING_MIN_AUDITS` audited items
    above it, at most half as often wrong), its items make the next lot, certified by audits of
    its own (Learn then Test); until then the failing lot goes on being audited.

    Leaving a lot is a stopping time of its sequence, so every statement stays valid; the lot
    keeps its share of the error budget, so the next lot pays a little more per statement
    (:func:`engine.lots.lot_alpha`).
    """
    if promise == "average" or verdict.certified or verdict.audited < FAILING_MIN_AUDITS:
        return False
    return verdict.audit_errors > FAILING_ERROR_SHARE * target * verdict.audited


@dataclass(frozen=True)
class SelectionScore:
    """One way of ranking DST-PLL's labels for the next lot (:func:`freeze_lot`).

    ``items`` is every item's score now; ``learned`` the audited items' leave-one-out scores
    and whether DST-PLL's leave-one-out label of each is right (:func:`selection_scores`):
    the sample its threshold is learned from (:func:`next_threshold`). ``wrong_probability``,
    when the score comes with one, is each item's probability that its label is wrong by the
    model behind the score: the lot then also stops where the mean of it over the lot's items
    would pass ``ESTIMATED_ERROR_SHARE[promise] × target``.
    """

    name: str
    items: np.ndarray
    learned: tuple[np.ndarray, np.ndarray]
    wrong_probability: np.ndarray | None = None

    def threshold(self, free: np.ndarray, target: float, promise: str) -> float:
        """The lowest score an item of the next lot may have, among the ``free`` items, for a
        statement of ``promise`` at ``target``."""
        learned = next_threshold(self.learned, target)
        if self.wrong_probability is None:
            return learned
        rows = np.flatnonzero(free & (self.items >= learned))
        rows = rows[np.argsort(-self.items[rows], kind="stable")]
        mean = np.cumsum(self.wrong_probability[rows]) / np.arange(1, rows.size + 1)
        ok = np.flatnonzero((mean <= ESTIMATED_ERROR_SHARE[promise] * target) & _last_of_ties(self.items[rows]))
        return float(self.items[rows[ok[-1]]]) if ok.size else float("inf")


def _last_of_ties(descending: np.ndarray) -> np.ndarray:
    """Where a sorted score may be cut: after the last of each run of equal scores, so that
    items with equal scores enter a lot together."""
    return np.r_[descending[1:] != descending[:-1], True]


def selection_scores(
    features: Callable[[], np.ndarray | None],
    original: np.ndarray,
    current: np.ndarray,
    idx: np.ndarray,
    audited: np.ndarray,
    model_labels: np.ndarray,
    model_margins: np.ndarray,
    *,
    with_features: bool = True,
) -> tuple[SelectionScore, ...]:
    """The scores the next lot may be chosen by: DST-PLL's margin, and where the features say
    something, the agreement of a linear model of them with DST-PLL. ``features`` gives the
    feature matrix when it is needed (only when some audited label is wrong); with
    ``with_features=False`` there are then no scores (no lot is frozen: the choice is left to a
    caller that fits the model, so that who looks does not change which lot is frozen).

    ``audited`` are the items of the lots' audited prefixes and the learning audits
    (:meth:`LotsNow.audited_positions`): each a uniform draw, so, unlike answers to ranked
    queries (chosen where the model is least sure), they look like the items the next lot may
    take. Each is decided from the candidate set it had before its answer: DST-PLL with its
    neighbours' current sets (appended as extra rows that nobody has among its neighbours, so
    its own answer does not vote for itself), the linear model fitted with every audited item's
    set as it was before its answer. Rescoring old audits with today's model only chooses the
    next lot; its own audits certify it (Learn then Test), so the choice of score costs no
    validity.

    *agreement* is the linear model's margin (:class:`engine.learners.EmLogisticPllClassifier`,
    fitted to the candidate sets by EM) where it names DST-PLL's label and DST-PLL accepts it,
    0 elsewhere; left out while no audited label is wrong (it could not win). Once the linear
    model is fitted, DST-PLL's margin comes with its estimate of how often DST-PLL's label is
    wrong too, so that a lot chosen by the margin stops where the linear model says it gets
    too wrong, as agreement's lot does. The threshold learned from the audits alone let the
    margin freeze lots of 850-1,200 items 9-11 % wrong on BirdSong: its audited sample is
    mostly earlier lots' clean items, not a uniform sample of what the margin lets in. Over
    BirdSong's seeds 0-9 at 500 answers on average, the mean delivered went from 473 to 618
    labels (``docs/results_labels.md``, seventh pass). The neighbour vote
    cannot tell apart items whose neighbours all carry the same candidate set (the segments of
    one recording, say); the linear model sees the whole space. On BirdSong after 500 random
    answers, the 400 open items DST-PLL is surest of are 5-6 % wrong, the 400 where both agree
    and the linear model is surest 0-0.2 % (``benchmarks/lot_scores.py``,
    ``docs/results_labels.md``).
    """
    rows = np.asarray(audited, dtype=np.int64)
    rows = rows[current[rows].sum(axis=1) == 1]
    n = current.shape[0]
    if rows.size:
        Y = np.vstack([current, original[rows]])
        graph = np.vstack([idx, idx[rows]])
        loo_labels, _, loo_margins = transductive_decisions(Y, graph, n + np.arange(rows.size), random_state=0)
        loo_margins = np.asarray(loo_margins, dtype=np.float64)
    else:
        loo_labels, loo_margins = np.zeros(0, dtype=np.int64), np.zeros(0)
    right = current[rows, loo_labels]
    dst = SelectionScore("dst_margin", np.asarray(model_margins, dtype=np.float64), (loo_margins, right))
    # With no audited label wrong, both thresholds are the reject rule and agreement's items are
    # some of DST-PLL's: the fit (about a second at 100k items, in every command) would be wasted.
    if right.all():
        return (dst,)
    if not with_features:
        return ()
    X = features()  # read only now: a session opened from its snapshot has not read them yet
    if X is None or X.ndim != 2 or not (np.ptp(X, axis=0) > 0).any():
        return (dst,)
    sets = np.array(current, dtype=bool)
    sets[rows] = original[rows]
    # Only items that may still join a lot (two or more candidates) and the audited ones are read.
    needed = current.sum(axis=1) > 1
    needed[rows] = True
    labels, margins, probability = linear_decisions(np.asarray(X, dtype=np.float64), sets, needed)
    audited_agreement = agreement(labels[rows], margins[rows], loo_labels, loo_margins)
    items_agreement = agreement(labels, margins, model_labels, model_margins)
    # DST-PLL's label is wrong, by the linear model, with probability 1 − p where the two agree
    # (p: the linear model's probability of its label), at least p where the linear model names
    # another label.
    dst_wrong = np.where(items_agreement > 0, 1.0 - probability, probability)
    return (
        replace(dst, wrong_probability=dst_wrong),
        SelectionScore("agreement", items_agreement, (audited_agreement, right), 1.0 - probability),
    )


def agreement(
    linear_labels: np.ndarray, linear_margins: np.ndarray, dst_labels: np.ndarray, dst_margins: np.ndarray
) -> np.ndarray:
    """The *agreement* score (:func:`selection_scores`): the linear model's margin where it
    names DST-PLL's label and DST-PLL accepts it (margin > 0), 0 elsewhere."""
    agree = (np.asarray(linear_labels) == np.asarray(dst_labels)) & (np.asarray(dst_margins) > 0)
    return np.where(agree, linear_margins, 0.0)


#: The linear model is fitted on at most this many items (drawn with a fixed seed) and
#: this many principal components of the features: a freeze attempt stays about a second.
LINEAR_TRAIN_ROWS = 10_000
LINEAR_COMPONENTS = 64
_LINEAR_SEED = 20_021


def linear_decisions(
    features: np.ndarray, sets: np.ndarray, needed: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each item's label, margin and the label's probability under the EM logistic model fitted
    to ``sets``, its probabilities restricted to the item's own set. Only the ``needed`` items
    (a bool mask; all by default) are predicted; the others get label -1, margin and
    probability 0."""
    from engine.learners import EmLogisticPllClassifier  # scipy.optimize: only when a lot is chosen

    usable = np.flatnonzero(sets.any(axis=1))
    rng = np.random.default_rng(_LINEAR_SEED)
    train = (
        usable if usable.size <= LINEAR_TRAIN_ROWS else np.sort(rng.choice(usable, LINEAR_TRAIN_ROWS, replace=False))
    )
    n = sets.shape[0]
    rows = np.arange(n) if needed is None else np.flatnonzero(needed)
    fit_on, predict_on = features[train], features[rows]
    if features.shape[1] > LINEAR_COMPONENTS:
        centre = fit_on.mean(axis=0)
        _, _, components = np.linalg.svd(fit_on - centre, full_matrices=False)
        basis = components[:LINEAR_COMPONENTS].T
        fit_on, predict_on = (fit_on - centre) @ basis, (predict_on - centre) @ basis
    model = EmLogisticPllClassifier().fit(fit_on, sets[train])
    proba = model.predict_proba(predict_on) * sets[rows]
    proba /= np.maximum(proba.sum(axis=1, keepdims=True), np.finfo(np.float64).tiny)
    top = np.sort(proba, axis=1)
    labels, margins, probability = np.full(n, -1, dtype=np.int64), np.zeros(n), np.zeros(n)
    labels[rows], margins[rows], probability[rows] = proba.argmax(axis=1), top[:, -1] - top[:, -2], top[:, -1]
    return labels, margins, probability


def next_threshold(learned: tuple[np.ndarray, np.ndarray], target: float) -> float:
    """The score above which the next lot takes items, learned from a :class:`SelectionScore`'s
    audited sample.

    The lowest margin whose audited items at or above it are at most
    ``LEARN_ERROR_SHARE × target`` wrong, on at least ``LEARN_MIN_AUDITS`` of them; DST-PLL's own
    reject rule (margin > 0) when nothing is audited yet or no audited label is wrong; just
    above the most confident wrong one when no margin qualifies.
    """
    m, right = learned
    default = float(np.nextafter(0.0, 1.0))
    bad = ~np.asarray(right, dtype=bool)
    if m.size < LEARN_MIN_AUDITS or not bad.any():
        return default
    order = np.argsort(-m, kind="stable")
    m, bad = m[order], bad[order]
    count = np.arange(1, m.size + 1)
    ok = (np.cumsum(bad) <= LEARN_ERROR_SHARE * target * count) & (count >= LEARN_MIN_AUDITS)
    ok &= _last_of_ties(m)
    if ok.any():
        return max(default, float(m[np.flatnonzero(ok)[-1]]))
    return max(default, float(np.nextafter(m[bad].max(), np.inf)))


def freeze_lot(
    now: LotsNow,
    items: ItemStatus,
    model_labels: np.ndarray,
    model_margins: np.ndarray,
    settings: LabelSettings,
    *,
    scores: Sequence[SelectionScore],
    secret: bytes,
    session_id: int,
    last_event_id: int,
) -> LabelLotRecord | None:
    """The next lot to freeze, or None when no lot is due or too few items qualify.

    Each of ``scores`` (:func:`selection_scores`) gives a lot above its threshold
    (:meth:`SelectionScore.threshold`); of those worth freezing, the largest is (the first on a
    tie: DST-PLL's margin while no audit is wrong). Its labels are DST-PLL's
    (``model_labels``) and the margins it keeps are DST-PLL's (``model_margins``), whatever the
    score that chose its items.
    """
    if not now.new_lot_due or settings.audit_share <= 0.0:
        return None
    delivered, _, _ = now.delivered(items.n_instances)
    # A lot settled without certification keeps its items out until the model has moved on:
    # only items whose score rose to the (new) threshold enter again.
    free = items.open_items & ~items.answered & ~delivered & ~items.in_conflict
    number = len(now.lots) + 1
    level = lot_alpha(1.0 - settings.confidence, number) if settings.promise == "confidence" else lot_share(number)
    best: tuple[np.ndarray, float] | None = None
    for score in scores:
        threshold = score.threshold(free, settings.max_error, settings.promise)
        members = np.flatnonzero(free & (np.asarray(score.items) >= threshold))
        if members.size < MIN_LOT_SIZE or not _viable(members.size, settings, level):
            continue
        if now.lots and np.array_equal(np.sort(now.lots[-1].positions), members):
            continue  # the same items as the lot just settled: nothing new to certify
        if now.failing and not _clearly_cleaner(score, threshold, now.verdicts[-1], settings.max_error):
            continue  # the audits have not shown a clearly cleaner lot yet: the failing lot goes on
        if best is None or members.size > best[0].size:
            best = (members, threshold)
    if best is None:
        return None
    members, threshold = best
    order = members[lot_order(secret, session_id, number, members.size)]
    return LabelLotRecord(
        number=number,
        positions=order,
        labels=np.asarray(model_labels, dtype=np.int64)[order],
        margins=np.asarray(model_margins, dtype=np.float64)[order],
        alpha=lot_alpha(1.0 - settings.confidence, number),
        target=settings.max_error,
        threshold=threshold,
        after_event_id=int(last_event_id),
    )


def _clearly_cleaner(score: SelectionScore, threshold: float, verdict: LotVerdict, target: float) -> bool:
    """Whether the audits show that the items scoring at least ``threshold`` are a clearly
    cleaner lot than a failing one: at least :data:`FAILING_MIN_AUDITS` audited items there, at
    most half as often wrong as the failing lot's audited prefix. :data:`LEARN_MIN_AUDITS` are
    enough for a score whose model estimates its own error (it already stops the lot where it
    is clean) when the failing lot's audits are more wrong than the target itself: a lot that
    could never be certified is left sooner, a nearly clean one is not (on the sample, a lot
    whose one wrong label was among its first 28 audits, replaced on 10 audits, gave its first
    statement after 196 answers). A new lot starts its audits from nothing at a smaller share
    of the error budget, so a lot about as wrong as the failing one would only delay the
    statement. (The two lots may be chosen by different scores, so their thresholds are not
    compared.)"""
    m, right = score.learned
    above = np.asarray(m) >= threshold
    count = int(above.sum())
    wrong = int((~np.asarray(right, dtype=bool)[above]).sum())
    hopeless_rate = verdict.audit_errors > target * verdict.audited
    enough = LEARN_MIN_AUDITS if score.wrong_probability is not None and hopeless_rate else FAILING_MIN_AUDITS
    return count >= enough and wrong * verdict.audited <= LEARN_ERROR_SHARE * verdict.audit_errors * count


def _viable(size: int, settings: LabelSettings, level: float) -> bool:
    """Whether a lot of ``size`` untouched items could deliver at least half of them: the
    error-free audits it needs take at most half its items (a small lot is mostly audited)."""
    needed = audits_to_certify(size, target=settings.max_error, alpha=level, promise=settings.promise)
    return 0 <= needed <= size // 2


def audit_queue(now: LotsNow) -> np.ndarray:
    """The active lot's items still to audit, in audit order from the first unsettled one; with
    no lot being audited, the learning audits waiting (:attr:`LotsNow.learning_waiting`)."""
    i = now.active
    if i is None:
        return now.learning_waiting
    lot, verdict, answered = now.lots[i], now.verdicts[i], now.answered[i]
    outcomes = now.outcomes[i]
    rest = np.arange(verdict.audited, lot.positions.size)
    # The head (first unknown outcome) is served even if it was answered into a conflict: it
    # waits for its resolution on the Review page, so it is not served again; the others
    # are served when nobody has answered them.
    waiting = rest[(outcomes[rest] == OUTCOME_UNKNOWN) & ~answered[rest]]
    return lot.positions[waiting]


def lot_items_in_audit_order(now: LotsNow) -> np.ndarray:
    """The active lot's audit queue (:func:`audit_queue`), then every certified lot's items
    nobody answered, in its audit order from its known prefix on: answering them extends each
    lot's audited prefix instead of taking labels out of its delivered ones in another order
    (under the average promise only answers out of the audit order count against a lot's
    delivery, :data:`engine.lots.AVERAGE_KEPT_SHARE`)."""
    parts = [audit_queue(now)]
    for i, (lot, verdict, answered) in enumerate(zip(now.lots, now.verdicts, now.answered, strict=True)):
        if verdict.certified and i != now.active:  # the active lot's are its audit queue
            rest = np.arange(verdict.audited, lot.positions.size)
            parts.append(lot.positions[rest[~answered[rest]]])
    return np.concatenate(parts)


def lot_last_order(ranked: np.ndarray, in_lots: np.ndarray, queue: np.ndarray) -> np.ndarray:
    """The ranked queue with the lots' items last, the active lot's in its audit order first.

    Once every other item is asked, an answer to a lot item extends the audited prefix
    instead of only taking a label out of the delivered ones: the ranked slots then serve
    the audit queue, so the statement keeps up with the answers (module docstring).
    """
    ranked = np.asarray(ranked, dtype=np.int64)
    queue = np.asarray(queue, dtype=np.int64)
    # Only the lots' items move: a queue of learning audits (no lot being audited) holds items
    # of no lot, which keep their ranked places (moving them too would serve them twice).
    queue = queue[in_lots[queue] & np.isin(queue, ranked)]
    lot_item = in_lots[ranked]
    waiting = np.zeros(in_lots.shape[0], dtype=bool)
    waiting[queue] = True
    others = ranked[lot_item & ~waiting[ranked]]
    return np.concatenate([ranked[~lot_item], queue, others])
