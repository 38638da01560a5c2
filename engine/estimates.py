"""How many more answers a session needs: until its first model labels are stated, and until it is done.

The answers needed depend on how many of the frozen model labels are wrong, which nobody knows
before the audits find them: one wrong label found early in a layer's audit order costs dozens
of audits more. So the estimate is a simulation of the lot being checked, run from what the
session holds at its last checkpoint (``engine.loop_design.DESIGN.statement_every``, so that an
estimate moves only where a statement may, and says nothing of whether the last answer was an
audit):

* the lot's layers, their tests and the promise it was frozen with (:class:`engine.labelling_loop.Lot`);
* which of its items have a first verdict, and whether it named the frozen label;
* how many open items lie outside every lot (the ranked queue serves them first);
* the audit share.

Each run draws, for every layer, an error rate from the posterior of the verdicts seen in
that layer (:class:`LotErrorBelief`: the model's error measured on the items whose label was
known when the lot was frozen, :func:`held_out_error`, weighed against the confidence
sequence's prior by the audits), marks the items without a verdict wrong at that rate, and
plays the served slots as :func:`engine.labelling_loop.served_order` serves them: an audit
slot (probability the audit share, while anything is left to audit) answers the next item of
the audit order; any other slot an open item outside the lots first, and then a lot item in
the ranked queue's order (which knows nothing of the audit order: a random one), but never one
of the next ``a`` items of the audit queue, ``a`` being the audit slots among as many slots
ahead as there are open items: the served order keeps those for the audits. (Taking any lot
item at random, as the estimate did before, lets the ranked answers fill the audited prefix;
a session's never do. Given the true wrong labels of the sample's lot, that simulation's median
reached done 11 answers sooner than the session on average, up to 30; this one 2 later, within
30 either way: ``benchmarks/done_estimate.py``, column "lot's truth".)
At every checkpoint it judges the lot as
:func:`engine.labelling_loop.run_loop` does (:func:`engine.labelling_loop.judge_lot`), with the
lot's own tests. A run ends when the lot ends (every set certified, the next one hopeless or out
of reach before the lot's deadline, ``engine.loop_design.DESIGN.lot_answers`` verdicts after it
was frozen); the session is then done once every item left outside the
certified sets is answered, one answer each (an upper bound: a later lot could label some).

The estimate is the median over the runs, with the 10th and 90th percentiles; how close it
comes on the bundled sample over 20 store keys is measured by ``benchmarks/done_estimate.py``
(``docs/results_estimate.md``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from engine.labelling_loop import Loop, Lot, VerdictLog, judge_lot
from engine.loop_design import DESIGN
from engine.promises import SetVerdict, error_rate_prior, log_beta

__all__ = [
    "ESTIMATE_RUNS",
    "HELD_OUT_FOLDS",
    "AnswersEstimate",
    "HeldOutError",
    "LotErrorBelief",
    "held_out_error",
    "estimate_answers",
    "kept_for_audits",
    "ranked_lot_item",
]

#: Simulated runs per estimate. The runs are often bimodal (the audits find a wrong label or
#: they do not), and the median of too few moves between the modes with the seed: on the
#: sample before the first answer, over 400 seeds, 100 runs put it at 260–295 (5–95 %) and
#: within 25 % of the answers 20 store keys needed for as few as 14 of them; 200 runs at
#: 260–285, and never fewer than 19 (``docs/results_estimate.md``). About twice a few tenths
#: of a second, once per checkpoint.
ESTIMATE_RUNS = 200

#: Folds of :func:`held_out_error`: each item's label is hidden from the model that labels it,
#: and a fold hides a fifth of the known items only, so the model it is measured on is close to
#: the one the lot was frozen from. One model call per fold, once per lot.
HELD_OUT_FOLDS = 5


@dataclass(frozen=True)
class HeldOutError:
    """The model's labels on items whose label is known, each labelled with its own label hidden
    (:func:`held_out_error`).

    Attributes
    ----------
    labelled : int
        Known items the model would label (score > 0) with their label hidden.
    wrong : int
        Those among them whose model label is not the known label.
    """

    labelled: int
    wrong: int


def held_out_error(
    model: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]],
    candidates: np.ndarray,
    *,
    folds: int = HELD_OUT_FOLDS,
    seed: int = 0,
) -> HeldOutError:
    """How often the model is wrong where it would label an item, measured where the label is known.

    The items whose candidate set holds a single label (given in the data, or answered) are
    cut into ``folds`` folds; for each fold the model labels every item with that fold's sets
    replaced by all labels (their labels hidden from the model, its own and its neighbours'
    evidence alike: cross-fitting), and each hidden item the model would label (score > 0, as a
    lot takes its items) counts, wrong when its label is not the known one.

    This is the one measure of the model's error the session holds before its first audit. It
    is not the lot's error: the known items are not the lot's (they may be easier or harder to
    label, and a hidden item is labelled among all labels, a lot item within its candidate
    set), so :class:`LotErrorBelief` lets the audits decide how far it speaks for the lot.

    Parameters
    ----------
    model : callable
        ``model(candidates) -> (labels, scores, margins)``, what a lot is frozen from
        (:class:`engine.lot_model.LotModel`).
    candidates : bool array of shape (n_items, n_labels)
        The candidate sets the lot was frozen from.
    folds : int, default=HELD_OUT_FOLDS
    seed : int, default=0
        Seeds the folds (a fixed seed: the same measure in every process).

    Returns
    -------
    HeldOutError

    Examples
    --------
    A model that labels every item 0 and would label them all is wrong on the known item of
    label 1:

    >>> Y = np.array([[1, 0], [0, 1], [1, 1]], dtype=bool)
    >>> always_zero = lambda c: (np.zeros(len(c), int), np.ones(len(c)), np.ones(len(c)))
    >>> held_out_error(always_zero, Y, folds=2)
    HeldOutError(labelled=2, wrong=1)
    """
    candidates = np.asarray(candidates, dtype=bool)
    known = np.flatnonzero(candidates.sum(axis=1) == 1)
    if known.size == 0:
        return HeldOutError(0, 0)
    known_label = candidates[known].argmax(axis=1)
    shuffled = np.random.default_rng(seed).permutation(known.size)
    labelled = wrong = 0
    for fold in range(min(int(folds), known.size)):
        rows = shuffled[fold :: int(folds)]
        hidden = candidates.copy()
        hidden[known[rows]] = True
        labels, scores, _ = model(hidden)
        would_label = np.asarray(scores, dtype=np.float64)[known[rows]] > 0
        labelled += int(would_label.sum())
        wrong += int((would_label & (np.asarray(labels)[known[rows]] != known_label[rows])).sum())
    return HeldOutError(labelled, wrong)


@dataclass(frozen=True)
class LotErrorBelief:
    """What the estimate believes of a lot's error rate per layer, before and after its verdicts.

    Two hypotheses, equally likely before any audit:

    * the known items speak for the lot: its layers' error rates were drawn like the model's
      error on the known items, ``Beta(a + wrong, b + labelled − wrong)`` (the confidence
      sequence's prior ``Beta(a, b)`` updated by :class:`HeldOutError`, as if those were audits);
    * they do not: ``Beta(a, b)``, the confidence sequence's prior alone.

    The verdicts seen in the lot weigh the two by how likely each makes them (the beta-binomial
    likelihood of every layer's verdicts: one hypothesis for the whole lot), and each layer's
    rate is then drawn from its posterior under the hypothesis drawn. So the measure steers the
    estimate before the first audit, where nothing else is known, and the audits take over where
    it does not fit the lot (where the known items are cleaner than the lot, a few wrong labels
    among the first audits suffice); with few known items both hypotheses are nearly the prior.
    Even odds are the one choice that favours neither. Only the estimate reads this belief: the
    promise's confidence sequence keeps its own prior (:func:`engine.promises.error_rate_prior`),
    and nothing here changes what a statement says.

    Attributes
    ----------
    priors : tuple of (float, float)
        The beta prior of each hypothesis.
    weights : tuple of float
        The probability of each hypothesis given the lot's verdicts (sums to 1).
    """

    priors: tuple[tuple[float, float], ...]
    weights: tuple[float, ...]

    @classmethod
    def of(cls, target: float, held_out: HeldOutError | None, seen: np.ndarray, bad: np.ndarray) -> LotErrorBelief:
        """The belief for a lot of error target ``target``, given the known items' measure
        (None: none taken) and each layer's verdicts (``seen``) and wrong ones (``bad``)."""
        a, b = error_rate_prior(target)
        if held_out is None or held_out.labelled == 0:
            return cls(((a, b),), (1.0,))
        priors = ((a + held_out.wrong, b + held_out.labelled - held_out.wrong), (a, b))
        verdicts = list(zip(seen.tolist(), bad.tolist(), strict=True))
        log_likelihood = [sum(log_beta(a + k, b + n - k) - log_beta(a, b) for n, k in verdicts) for a, b in priors]
        top = max(log_likelihood)
        odds = [math.exp(v - top) for v in log_likelihood]
        return cls(priors, tuple(o / sum(odds) for o in odds))

    def draw_prior(self, rng: np.random.Generator) -> tuple[float, float]:
        """The prior of one run's hypothesis, drawn by its weight (each layer's rate is then drawn
        from that prior updated by the layer's verdicts)."""
        if len(self.priors) == 1:
            return self.priors[0]
        return self.priors[int(rng.choice(len(self.priors), p=self.weights))]


@dataclass(frozen=True)
class AnswersEstimate:
    """Answers a session needs, counted from its start (verdicts), as :func:`estimate_answers` gives them.

    Attributes
    ----------
    checkpoint : int
        The verdict count the estimate is made at.
    first_statement : int or None
        Median verdict count at which the first model labels are stated; None when some are
        stated already, or when no run states any.
    done : int
        Median verdict count at which no item is left undecided.
    done_low, done_high : int
        The 10th and 90th percentiles of that count over the runs.
    runs : int
        Simulated runs.
    """

    checkpoint: int
    first_statement: int | None
    done: int
    done_low: int
    done_high: int
    runs: int


def estimate_answers(
    loop: Loop,
    log: VerdictLog,
    partial: np.ndarray,
    audit_share: float,
    *,
    runs: int = ESTIMATE_RUNS,
    seed: int = 0,
    true_labels: np.ndarray | None = None,
    held_out: HeldOutError | None = None,
) -> AnswersEstimate | None:
    """The answers the session needs, simulated from its last checkpoint (module docstring).

    Parameters
    ----------
    loop : engine.labelling_loop.Loop
        The session's lots (:func:`engine.labelling_loop.run_loop`).
    log : engine.labelling_loop.VerdictLog
        Every verdict so far; only those before ``loop.checkpoint`` are read.
    partial : bool array of shape (n_items,)
        The items whose original candidate set holds two or more labels (the ones to settle).
    audit_share : float
        The share of served slots that are audits.
    runs : int, default=ESTIMATE_RUNS
    seed : int, default=0
        Seeds the runs (with the checkpoint): the same session state gives the same estimate.
    true_labels : int array of shape (n_items,), optional
        The labels the answers will give, when they are known (a benchmark's simulated expert):
        the runs then play the lot with the wrong labels these say instead of drawing them,
        and differ only in their served slots (how closely those follow a session's).
        Verdicts already given count as given.
    held_out : HeldOutError, optional
        The model's error on the items known when the lot was frozen (:func:`held_out_error` on
        the candidate sets it was frozen from): what the runs draw the lot's error rates from,
        with the confidence sequence's prior, as :class:`LotErrorBelief` weighs them. Without
        it, the confidence sequence's prior alone.

    Returns
    -------
    AnswersEstimate or None
        None when no lot is being checked (nothing to simulate).
    """
    active = loop.active
    if active is None:
        return None
    lot = active.lot
    checkpoint = loop.checkpoint
    before = VerdictLog(log.positions[:checkpoint], log.labels[:checkpoint])
    n_items = int(np.asarray(partial).size)
    first_at, first_label = before.first_verdicts(n_items)
    answered = first_at < checkpoint
    delivered, _, _ = loop.delivered(n_items)
    in_lot = np.zeros(n_items, dtype=bool)
    in_lot[lot.items] = True
    outside = int((np.asarray(partial) & ~answered & ~delivered & ~in_lot).sum())
    known = answered[lot.items]
    wrong = known & (first_label[lot.items] != lot.labels)
    given = None
    if true_labels is not None:
        given = wrong | (~known & (np.asarray(true_labels)[lot.items] != lot.labels))
    stated_already = bool(loop.stated_sets)
    rng = np.random.default_rng([int(seed), int(checkpoint)])
    first_statements: list[int] = []
    dones: list[int] = []
    layers = np.arange(len(lot.tests))
    seen = np.asarray([int(known[lot.layers == j].sum()) for j in layers], dtype=np.int64)
    bad = np.asarray([int(wrong[lot.layers == j].sum()) for j in layers], dtype=np.int64)
    belief = LotErrorBelief.of(lot.promise.target, held_out, seen, bad)
    for _ in range(int(runs)):
        outcomes = _draw_wrong(lot, known, wrong, belief.draw_prior(rng), rng) if given is None else given
        first, done = _play_lot(lot, known, outcomes, outside, checkpoint, audit_share, stated_already, rng)
        dones.append(done)
        if first is not None:
            first_statements.append(first)
    ends = np.asarray(dones)
    first_median = None if stated_already or not first_statements else int(np.median(first_statements))
    return AnswersEstimate(
        checkpoint=checkpoint,
        first_statement=first_median,
        done=int(np.median(ends)),
        done_low=int(np.percentile(ends, 10)),
        done_high=int(np.percentile(ends, 90)),
        runs=int(runs),
    )


def _draw_wrong(
    lot: Lot, known: np.ndarray, wrong: np.ndarray, prior: tuple[float, float], rng: np.random.Generator
) -> np.ndarray:
    """``wrong`` with the items without a verdict drawn wrong at a rate per layer drawn from the
    beta posterior of the layer's verdicts under ``prior`` (:meth:`LotErrorBelief.draw_prior`)."""
    a, b = prior
    wrong = wrong.copy()
    for layer in range(len(lot.tests)):
        here = lot.layers == layer
        seen, bad = int(known[here].sum()), int(wrong[here].sum())
        rate = rng.beta(a + bad, b + seen - bad)
        unknown = here & ~known
        wrong[unknown] = rng.random(int(unknown.sum())) < rate
    return wrong


def _play_lot(
    lot: Lot,
    known: np.ndarray,
    wrong: np.ndarray,
    outside: int,
    verdicts: int,
    audit_share: float,
    stated_already: bool,
    rng: np.random.Generator,
) -> tuple[int | None, int]:
    """One simulated future of the lot, its wrong labels given: (verdict count of its first
    statement, of done), served as the module docstring says.

    Parameters
    ----------
    lot : engine.labelling_loop.Lot
    known, wrong : bool arrays of shape (lot size,)
        The lot's items (in audit order) with a verdict, and those whose first verdict does
        not name the frozen label (every item's, known or not: what the verdict will be).
    outside : int
        Open items outside every lot: the ranked slots serve them first.
    verdicts : int
        The verdict count to start from (a checkpoint).
    audit_share : float
    stated_already : bool
        Whether the session states labels already (then no first statement is looked for).
    rng : numpy.random.Generator
    """
    known = known.copy()
    size = known.size
    n_layers = len(lot.tests)
    # The ranked queue reaches the lot's items in the order of its scores, which knows nothing
    # of the audit order: a random priority per item.
    priority = rng.random(size)
    # Each layer's first item in audit order (the layers follow one another in it).
    layer_start = np.searchsorted(lot.layers, np.arange(n_layers + 1))
    cached: dict[int, tuple[int, SetVerdict]] = {}
    first: int | None = None
    end = lot.frozen_at + DESIGN.lot_answers
    # The served slots' audit flags from here on, far enough for every slot to look ahead
    # over all the open items (what ``served_order`` counts the audit slots over).
    flags = rng.random(max(end - verdicts, 0) + size + outside + 1) < audit_share
    flags_before = np.concatenate([[0], np.cumsum(flags)])
    v, slot = verdicts, 0
    _, certified, current = judge_lot(lot, known, wrong, cached, at=v)
    if certified and not stated_already:
        first = v
    audit_next = 0
    while current is not None and v < end:
        # The audit queue: items of the layers from the current one on, without a verdict.
        audit_next = max(audit_next, int(layer_start[current]))
        while audit_next < size and known[audit_next]:
            audit_next += 1
        if audit_next < size and flags[slot]:
            known[audit_next] = True
        elif outside > 0:
            outside -= 1
        else:
            item = ranked_lot_item(known, priority, audit_next, flags_before, slot, outside)
            if item is None:
                break
            known[item] = True
        v += 1
        slot += 1
        if v % DESIGN.statement_every == 0:
            _, certified, current = judge_lot(lot, known, wrong, cached, at=v)
            if certified and first is None and not stated_already:
                first = v
    if current is not None:
        # Left with nothing to answer before a checkpoint: the lot is judged at the next one.
        v = int(np.ceil(v / DESIGN.statement_every) * DESIGN.statement_every)
        _, certified, current = judge_lot(lot, known, wrong, cached, at=v)
        if certified and first is None and not stated_already:
            first = v
    uncertified = int((~known & (lot.layers >= certified)).sum())
    return first, v + outside + uncertified


def kept_for_audits(known: np.ndarray, queue_start: int, audit_slots: int) -> np.ndarray:
    """The lot items a ranked slot may not serve: the next ``audit_slots`` of the audit queue.

    :func:`engine.labelling_loop.served_order` gives the audit slots ahead (``audit_slots``:
    those among the next slots, one per open item, capped by the queue) the first items of the
    audit queue, and the ranked slots the other items only; so a ranked slot never answers an
    item an audit is about to reach.

    Parameters
    ----------
    known : bool array of shape (size,)
        The lot's items (in audit order) with a verdict.
    queue_start : int
        The first item of the audit queue (items before it are in layers already passed, or
        have a verdict).
    audit_slots : int
        The audit slots ahead.

    Returns
    -------
    bool array of shape (size,)

    >>> kept_for_audits(np.array([1, 0, 0, 1, 0, 0], dtype=bool), 1, 3).astype(int).tolist()
    [0, 1, 1, 0, 1, 0]
    """
    kept = np.zeros(known.size, dtype=bool)
    if audit_slots > 0:
        queue = queue_start + np.flatnonzero(~known[queue_start:])
        kept[queue[:audit_slots]] = True
    return kept


def ranked_lot_item(
    known: np.ndarray, priority: np.ndarray, queue_start: int, flags_before: np.ndarray, slot: int, outside: int
) -> int | None:
    """The lot item a ranked slot serves: the one with the highest priority among those without
    a verdict and not kept for the audit slots ahead (:func:`kept_for_audits`)."""
    unknown = ~known
    n_open = int(unknown.sum()) + outside
    if n_open == 0:
        return None
    audit_slots = int(flags_before[min(slot + n_open, flags_before.size - 1)] - flags_before[slot])
    free = unknown & ~kept_for_audits(known, queue_start, audit_slots)
    if not free.any():  # every item left is an audit's: this slot would be one too
        return None
    return int(np.argmax(np.where(free, priority, -1.0)))
