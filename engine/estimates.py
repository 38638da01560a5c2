"""How many more answers a session needs: until its first model labels are stated, and until it is done.

The answers needed depend on how many of the frozen model labels are wrong, which nobody knows
before the audits find them: one wrong label found early in a layer's audit order costs dozens
of audits more. So the estimate is a simulation of the lot being checked, run from what the
session holds at its last checkpoint (:data:`engine.labelling_loop.STATEMENT_EVERY`, so that an
estimate moves only where a statement may, and says nothing of whether the last answer was an
audit):

* the lot's layers, their tests and the promise it was frozen with (:class:`engine.labelling_loop.Lot`);
* which of its items have a first verdict, and whether it named the frozen label;
* how many open items lie outside every lot (the ranked queue serves them first);
* the audit share.

Each run draws, for every layer, an error rate from the beta posterior of the verdicts seen in
that layer (the prior of the confidence sequence, ``Beta(1, 4 / target)``, which expects about
a quarter of the target's errors), marks the items without a verdict wrong at that rate, and
plays the served slots: an audit slot (probability the audit share, while anything is left to
audit) answers the next item of the audit order, any other slot an open item outside the lots
first and then a lot item at random. At every checkpoint it judges the lot as
:func:`engine.labelling_loop.run_loop` does, with the lot's own tests. A run ends when the lot
ends (every set certified, the next one hopeless, or :data:`engine.labelling_loop.LOT_ANSWERS`
verdicts after it was frozen); the session is then done once every item left outside the
certified sets is answered, one answer each (an upper bound: a later lot could label some).

The estimate is the median over the runs, with the 10th and 90th percentiles; how close it
comes on the bundled sample over 20 store keys is measured by ``benchmarks/done_estimate.py``
(``docs/results_estimate.md``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.labelling_loop import LOT_ANSWERS, STATEMENT_EVERY, Loop, Lot, VerdictLog
from engine.promises import SetVerdict

__all__ = ["ESTIMATE_RUNS", "AnswersEstimate", "estimate_answers"]

#: Simulated runs per estimate: enough for a stable median (a few tenths of a second).
ESTIMATE_RUNS = 100


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
    stated_already = bool(loop.stated_sets)
    rng = np.random.default_rng([int(seed), int(checkpoint)])
    first_statements: list[int] = []
    dones: list[int] = []
    for _ in range(int(runs)):
        first, done = _one_run(lot, known, wrong, outside, checkpoint, audit_share, stated_already, rng)
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


def _one_run(
    lot: Lot,
    known: np.ndarray,
    wrong: np.ndarray,
    outside: int,
    verdicts: int,
    audit_share: float,
    stated_already: bool,
    rng: np.random.Generator,
) -> tuple[int | None, int]:
    """One simulated future of the lot: (verdict count of its first statement, of done)."""
    target = lot.promise.target
    known, wrong = known.copy(), wrong.copy()
    size = known.size
    n_layers = len(lot.tests)
    for layer in range(n_layers):
        here = lot.layers == layer
        seen, bad = int(known[here].sum()), int(wrong[here].sum())
        rate = rng.beta(1.0 + bad, 4.0 / target + seen - bad)
        unknown = here & ~known
        wrong[unknown] = rng.random(int(unknown.sum())) < rate
    # Lot items in the order a ranked slot reaches them: unknown, at random.
    ranked_lot = list(rng.permutation(np.flatnonzero(~known)))
    cached: dict[int, tuple[int, SetVerdict]] = {}
    first: int | None = None
    end = lot.frozen_at + LOT_ANSWERS
    v = verdicts
    certified, current = _judge(lot, known, wrong, cached)
    if certified and not stated_already:
        first = v
    audit_next = 0
    while current is not None and v < end:
        # The audit queue: items of the layers from the current one on, without a verdict.
        while audit_next < size and (known[audit_next] or lot.layers[audit_next] < current):
            audit_next += 1
        if audit_next < size and rng.random() < audit_share:
            known[audit_next] = True
        elif outside > 0:
            outside -= 1
        else:
            while ranked_lot and known[ranked_lot[-1]]:
                ranked_lot.pop()
            if not ranked_lot:
                break
            known[ranked_lot.pop()] = True
        v += 1
        if v % STATEMENT_EVERY == 0:
            certified, current = _judge(lot, known, wrong, cached)
            if certified and first is None and not stated_already:
                first = v
    if current is not None:
        # Left with nothing to answer before a checkpoint: the lot is judged at the next one.
        v = int(np.ceil(v / STATEMENT_EVERY) * STATEMENT_EVERY)
        certified, current = _judge(lot, known, wrong, cached)
        if certified and first is None and not stated_already:
            first = v
    uncertified = int((~known & (lot.layers >= certified)).sum())
    return first, v + outside + uncertified


def _judge(
    lot: Lot, known: np.ndarray, wrong: np.ndarray, cached: dict[int, tuple[int, SetVerdict]]
) -> tuple[int, int | None]:
    """The lot's largest certified set and the layer being audited (None: decided), as the loop
    judges them: each layer's test reads the prefix of its audit order whose verdicts are all known."""
    verdicts = []
    for layer, test in enumerate(lot.tests):
        here = lot.layers == layer
        seen, bad = known[here], wrong[here]
        prefix = int(np.argmin(seen)) if not seen.all() else int(seen.size)
        kept = cached.get(layer)
        if kept is None or kept[0] != prefix:
            kept = (prefix, test.verdict(np.cumsum(bad[:prefix])))
            cached[layer] = kept
        verdicts.append(kept[1])
    certified = 0
    for j, size in enumerate(lot.set_sizes):
        ok, hopeless = lot.promise.judge(tuple(verdicts[: j + 1]), size)
        if ok:
            certified = j + 1
        else:
            return certified, None if hopeless else j
    return certified, None
