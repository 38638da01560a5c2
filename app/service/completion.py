"""When a session's work is done, and what more answers would buy: the one definition every page,
the command line and the export read.

A session is **done** when no item is left undecided (every item carries an expert, given,
crowd or model label; no conflict waits for a reviewer) and no lot of model labels is being
checked (:attr:`engine.labelling_loop.Loop.active` is None). From then on the loop has nothing
left to do that changes a statement: no item is left to freeze into a new lot, and a stated label
stays stated. Further answers can only replace model labels with experts' labels; how many of
those may be wrong is what the statement already bounds, so that is what they would buy.

Before that, the pages say how many items are undecided and, from the lot being checked, about
how many more answers the session needs (:mod:`engine.estimates`, kept per checkpoint by
:class:`AnswersEstimates`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from app.service.lots import SettingsHistory, settings_in_force
from engine.estimates import AnswersEstimate, HeldOutError, estimate_answers

if TYPE_CHECKING:
    from app.service.delivery import LabelStatement, LabelSummary
    from app.service.lots import SessionLots
    from app.service.ranking_state import SessionView
    from engine.labelling_loop import Loop

__all__ = [
    "work_is_done",
    "WorkStatus",
    "work_status",
    "AnswersEstimates",
    "share_percent",
    "done_headline",
    "more_answers_words",
    "estimate_words",
]


def work_is_done(undecided: int, loop: Loop) -> bool:
    """Whether a session is done: no item undecided and no lot being checked (module docstring).

    Parameters
    ----------
    undecided : int
        Items with label source ``undecided`` (open items outside every certified set, items in
        conflict, items flagged "none of these").
    loop : engine.labelling_loop.Loop
        The session's lots.
    """
    return int(undecided) == 0 and loop.active is None


def share_percent(share: float) -> str:
    """A share as the app shows it everywhere (the Sessions page's fields are in percent).

    >>> share_percent(0.5), share_percent(0.05), share_percent(0.025)
    ('50%', '5%', '2.5%')
    """
    return f"{share * 100:.4g}%"


def _items(n: int) -> str:
    return f"{n:,} item" + ("" if n == 1 else "s")


def _labels(n: int) -> str:
    return f"{n:,} label" + ("" if n == 1 else "s")


@dataclass(frozen=True)
class WorkStatus:
    """Where a session's work stands (:meth:`app.service.Workbench.work_status`).

    Attributes
    ----------
    done : bool
        :func:`work_is_done`.
    counts : dict of str to int
        Items per label source (:data:`app.service.delivery.LABEL_SOURCES`).
    summary : LabelSummary
        What is stated about the model labels.
    answers : int
        Answers given so far (first verdicts on an item: what the loop counts).
    conflicts : int
        Items in conflict (they are undecided until a reviewer settles them).
    estimate : AnswersEstimate or None
        About how many answers the session needs in all, when a lot is being checked.
    """

    done: bool
    counts: dict[str, int]
    summary: LabelSummary
    answers: int
    conflicts: int
    estimate: AnswersEstimate | None = None

    @property
    def headline(self) -> str:
        """One line: done, or what is left."""
        return done_headline(self.done, self.counts, self.summary, self.conflicts)

    @property
    def more_answers(self) -> str:
        """What further answers would change (:func:`more_answers_words`, :func:`estimate_words`)."""
        if self.done:
            return more_answers_words(self.counts, self.summary)
        return estimate_words(self.counts, self.summary, self.estimate, self.answers, self.conflicts)


def work_status(
    statement: LabelStatement,
    loop: Loop,
    conflicts: int,
    *,
    estimate: Callable[[], AnswersEstimate | None],
    with_estimate: bool = False,
) -> WorkStatus:
    """Where the work stands, from what is stated (``statement``) and the lots (``loop``);
    ``estimate()`` is called only ``with_estimate`` and while the work is not done (a
    simulation: a few tenths of a second once per checkpoint, and the model run once per fold of
    :func:`engine.estimates.held_out_error` when a lot is new)."""
    return WorkStatus(
        done=statement.summary.done,
        counts=dict(statement.counts),
        summary=statement.summary,
        answers=loop.verdicts,
        conflicts=conflicts,
        estimate=estimate() if with_estimate and not statement.summary.done else None,
    )


class AnswersEstimates:
    """About how many answers a session needs until it is done, simulated from the lot being
    checked at the last checkpoint (:func:`engine.estimates.estimate_answers`), kept per
    checkpoint, lot being checked, audit share and settings history; the lot's error rates drawn
    with the model's held-out error on the items known when it was frozen
    (:meth:`SessionLots.held_out_error`, measured once per lot).

    Parameters
    ----------
    lots : SessionLots
        The session's lots.
    seed : int
        Seeds the simulation (the session's id: the same estimate in every process).
    """

    def __init__(self, lots: SessionLots, *, seed: int) -> None:
        self._lots = lots
        self._seed = seed
        self._kept: dict[tuple[Any, ...], AnswersEstimate | None] = {}
        #: The model's held-out error per lot (number, verdicts it was frozen at): measured once.
        self._held_out: dict[tuple[int, int], HeldOutError] = {}

    def estimate(
        self, view: SessionView, history: SettingsHistory, audit_share: float | None = None
    ) -> AnswersEstimate | None:
        """The estimate at ``view``; None when no lot is being checked. ``audit_share``:
        another share than the one in force (the Sessions page's field before it is saved)."""
        share = settings_in_force(history).audit_share if audit_share is None else float(audit_share)
        loop = self._lots.at(view, history)
        active = loop.active
        lot = None if active is None else (active.lot.number, active.lot.frozen_at)
        key = (loop.checkpoint, lot, share, history)
        kept = self._kept.get(key)
        if kept is not None or key in self._kept:
            return kept
        log = self._lots.verdict_log(view)
        partial = np.asarray(view.state.original_candidates).sum(axis=1) >= 2
        held_out = None
        if active is not None:
            lot_key = (active.lot.number, active.lot.frozen_at)
            held_out = self._held_out.get(lot_key)
            if held_out is None:
                held_out = self._held_out[lot_key] = self._lots.held_out_error(view, active.lot)
        estimate = estimate_answers(loop, log, partial, share, seed=self._seed, held_out=held_out)
        if len(self._kept) > 8:
            self._kept.clear()
        self._kept[key] = estimate
        return estimate


def done_headline(done: bool, counts: dict[str, int], summary: LabelSummary, conflicts: int = 0) -> str:
    """The state of the work in one line, by label source.

    >>> from app.service.delivery import LabelSummary
    >>> s = LabelSummary(0.05, 0.9, "confidence", 153, 423, 0.05, 159, 1, 0, None, 0.5, 153)
    >>> done_headline(True, {"expert": 330, "given": 317, "crowd": 0, "model": 153, "undecided": 0}, s)
    'Done: all 800 items have a label — 330 answered by experts, 317 given in the data, 153 from the model.'
    """
    total = sum(counts.values())
    if done:
        parts = [f"{counts.get('expert', 0):,} answered by experts", f"{counts.get('given', 0):,} given in the data"]
        if counts.get("crowd", 0):
            parts.append(f"{counts['crowd']:,} left by the crowd's votes")
        if counts.get("model", 0):
            parts.append(f"{counts['model']:,} from the model")
        return f"Done: all {total:,} items have a label — " + ", ".join(parts) + "."
    undecided = counts.get("undecided", 0)
    if undecided == 0:
        return (
            f"Not done yet: every item has a label, but the model's labels on {_items(summary.active_lot_size)} "
            "are still being checked."
        )
    said = f"Not done yet: {_items(undecided)} of {total:,} still without a label"
    if conflicts:
        said += f" ({conflicts:,} of them in conflict between annotators, for a reviewer)"
    return said + "."


def more_answers_words(counts: dict[str, int], summary: LabelSummary) -> str:
    """Once done: what more answers would change, in the statement's own numbers.

    >>> from app.service.delivery import LabelSummary
    >>> s = LabelSummary(0.05, 0.9, "confidence", 153, 423, 0.05, 159, 1, 0, None, 0.5, 153, wrong_bound=21)
    >>> print(more_answers_words({"model": 153}, s))  # doctest: +NORMALIZE_WHITESPACE
    More answers change no statement: nothing is left to check. Each answer on one of the 153 items
    with a model label replaces the model's label by yours. By the audits, at most 21 of the 423
    stated labels are wrong (with 90% confidence), all of them among these model labels: answering
    all 153 would find at most 21 wrong labels.
    """
    model = counts.get("model", 0)
    if model == 0:
        return "More answers would change nothing: every item was answered by an expert or given in the data."
    said = (
        "More answers change no statement: nothing is left to check. Each answer on one of the "
        f"{model:,} items with a model label replaces the model's label by yours."
    )
    if summary.promise == "confidence" and summary.wrong_bound is not None:
        at_most = min(summary.wrong_bound, model)
        return said + (
            f" By the audits, at most {at_most:,} of the {summary.stated:,} stated labels are wrong (with "
            f"{summary.confidence * 100:g}% confidence), all of them among these model labels: answering all "
            f"{model:,} would find at most {at_most:,} wrong labels."
        )
    expected = summary.target * summary.stated
    return said + (
        f" By the audits, on average at most {summary.target * 100:g}% of the {summary.stated:,} stated labels "
        f"(about {expected:.0f}) are wrong, all of them among these model labels; a single session may have more."
    )


def estimate_words(
    counts: dict[str, int], summary: LabelSummary, estimate: AnswersEstimate | None, answers: int, conflicts: int = 0
) -> str:
    """Before done: about how many more answers the session needs, or why that is not known yet.

    >>> from app.service.delivery import LabelSummary
    >>> from engine.estimates import AnswersEstimate
    >>> s = LabelSummary(0.05, 0.9, "confidence", 0, 0, None, 0, 1, 423, 400, 0.5, 483)
    >>> e = AnswersEstimate(checkpoint=0, first_statement=110, done=290, done_low=230, done_high=460, runs=100)
    >>> print(estimate_words({"undecided": 483}, s, e, 0))  # doctest: +NORMALIZE_WHITESPACE
    About 290 answers in all until done (between 230 and 460 in 8 of 10 simulated sessions), the
    first model labels after about 110: it depends on how many of the model's labels the audits find
    wrong. Answering all 483 undecided items would end the work in any case.
    """
    undecided = counts.get("undecided", 0)
    noun = "undecided item" if undecided == 1 else "undecided items"
    bound = f"Answering all {undecided:,} {noun} would end the work in any case."
    if conflicts:
        bound += f" {conflicts:,} of them are conflicts, for a reviewer."
    if estimate is None:
        if summary.audits_off:
            return "Audits are off (audit share 0%), so the model labels nothing: " + bound
        return (
            "How many answers the model's labels could save is not known yet: the model is sure of too few "
            "of the items left for any of its labels to be checked now. " + bound
        )
    first = (
        f", the first model labels after about {estimate.first_statement:,}"
        if estimate.first_statement is not None and estimate.first_statement > answers
        else ""
    )
    return (
        f"About {estimate.done:,} answers in all until done (between {estimate.done_low:,} and {estimate.done_high:,} "
        f"in 8 of 10 simulated sessions){first}: it depends on how many of the model's labels the audits find "
        f"wrong. {bound}"
    )
