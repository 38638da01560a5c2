"""The labelled dataset winnow hands back: a final label per item, its source, and how far to trust it.

Every item gets one **label source** (see ``docs/architecture.md``'s vocabulary):

``expert``
    an annotator's verdict settled it (an answer, another label, or a reviewer's resolve);
``given``
    its candidate set holds a single label from the user's file and nobody answered it;
``crowd``
    the same, in a dataset whose candidate sets were made from crowd votes: a single label
    left by the votes is not the truth, and winnow has not measured how often it is wrong
    (the statement says so);
``model``
    an item nobody answered in a **certified set** of a lot (:mod:`engine.labelling_loop`,
    :mod:`engine.promises`): DST-PLL's label frozen when the lot was made, handed back
    because the lot's audits certified the set under the promise in force when it was frozen.
    The promise is about the set as handed back: with its items an expert answered (their
    expert label), at most ``max_error`` of its labels are wrong, with ``confidence`` or on
    average, at every moment the result is read;
``undecided``
    everything else: open items in no certified lot, items in conflict, and items flagged
    "none of these" (no label is known). The Rejects page lists exactly these.

``model_margin`` (model rows only) is DST-PLL's margin ``bel(ŷ) − max pl`` when the lot was
frozen: it orders model labels (higher is more trusted) and is **not** a probability of being
right. What winnow guarantees is the statement about the stated
labels as a whole.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from app.service import session_tables
from app.service.completion import share_percent, work_is_done
from app.service.lots import SettingsHistory, settings_in_force
from app.store import (
    LabelSettings,
    SessionState,
    get_session_by_name,
    label_settings,
    set_label_settings,
    write_transaction,
)

if TYPE_CHECKING:
    import pandas as pd

    from engine.labelling_loop import Loop

__all__ = [
    "LABEL_SOURCES",
    "DeliveredLabels",
    "LabelDecision",
    "LabelSummary",
    "LabelStatement",
    "DecidedLabels",
    "KeptLabels",
    "session_label_settings",
    "change_label_settings",
    "promise_words",
    "promise_meaning",
    "decide_labels",
    "label_statement",
    "delivered_table",
    "statement_metadata",
]

#: The sources of an item's final label, in the order counts are shown.
LABEL_SOURCES: tuple[str, ...] = ("expert", "given", "crowd", "model", "undecided")


@dataclass(frozen=True)
class LabelSummary:
    """What winnow states about its model labels now, and what comes next.

    Attributes
    ----------
    target : float
        The target error of the stated sets (the session's ``max_error`` when none is stated).
    confidence : float
        Their confidence (the promise "confidence").
    promise : str
        ``"confidence"`` or ``"average"`` (:data:`engine.promises.PROMISES`): the promise of
        the stated sets, or the session's when none is stated.
    model_labels : int
        Model labels handed back (items of certified sets nobody answered).
    stated : int
        Items of the certified sets: the labels the promise is about (model labels and the
        answers experts gave on the same items).
    error_bound : float or None
        With confidence, the bound on the share of wrong labels among ``stated`` now
        (``≤ target``); None when nothing is stated or on average.
    audited : int
        Audited answers read by the lots with a certified set.
    lots : int
        Lots frozen so far.
    active_lot_size : int
        Items of the lot being audited (0 when none is).
    lot_ends_in : int or None
        Answers until the lot being audited ends at the latest (or, with no lot, until winnow
        looks again for one); None when nothing is left.
    audit_share : float
        Share of served items that are audits while a lot is audited.
    open_items : int
        Items still open (two or more candidates, no verdict).
    mixed_promises : bool, default=False
        The stated sets were frozen under different settings (the statement names the first).
    wrong_bound : int or None, default=None
        With confidence, the bound on the wrong labels among ``stated`` (``error_bound`` as a
        count); None when nothing is stated or on average.
    done : bool, default=False
        No item is undecided and no lot is being checked (:func:`app.service.completion.work_is_done`).
    promise_left : float, default=1.0
        The share of the promise the lots that ended left unspent.
    out_of_promise : bool, default=False
        No lot is being checked because ``promise_left`` could certify none of the open items
        (:attr:`engine.labelling_loop.Loop.out_of_promise`), not because the model is unsure.
    """

    target: float
    confidence: float
    promise: str
    model_labels: int
    stated: int
    error_bound: float | None
    audited: int
    lots: int
    active_lot_size: int
    lot_ends_in: int | None
    audit_share: float
    open_items: int
    mixed_promises: bool = False
    wrong_bound: int | None = None
    done: bool = False
    promise_left: float = 1.0
    out_of_promise: bool = False

    @property
    def audits_off(self) -> bool:
        """No audit is served, so nothing more can be certified."""
        return self.audit_share <= 0.0


@dataclass(frozen=True)
class LabelDecision:
    """Each item's final label and source, as arrays (before they become a table).

    Attributes
    ----------
    label : int array of shape (n_instances,)
        The final label's index, ``-1`` when none.
    source : int array of shape (n_instances,)
        Index into :data:`LABEL_SOURCES`.
    margin : float array of shape (n_instances,)
        The frozen DST-PLL margin on model rows, NaN elsewhere.
    model_kept : bool array of shape (n_instances,)
        The items whose model label is delivered.
    summary : LabelSummary
    """

    label: np.ndarray
    source: np.ndarray
    margin: np.ndarray
    model_kept: np.ndarray
    summary: LabelSummary

    def counts(self) -> dict[str, int]:
        """Items per label source."""
        found = np.bincount(self.source, minlength=len(LABEL_SOURCES))
        return {name: int(found[i]) for i, name in enumerate(LABEL_SOURCES)}


@dataclass(frozen=True)
class LabelStatement:
    """What winnow states about a session's labels, without the labelled table
    (:meth:`app.service.Workbench.label_statement`).

    Attributes
    ----------
    counts : dict of str to int
        Items per label source (every source present, possibly 0).
    summary : LabelSummary
        What is stated, and what the next statement waits for.
    settings : app.store.LabelSettings
        The session's target error, confidence and audit share.
    statement : str
        The statement in one line (:func:`label_statement`).
    """

    counts: dict[str, int]
    summary: LabelSummary
    settings: LabelSettings
    statement: str

    @property
    def n_audited(self) -> int:
        """Audited answers backing the stated model labels."""
        return self.summary.audited


@dataclass(frozen=True)
class DeliveredLabels(LabelStatement):
    """The labelled dataset of a session with its :class:`LabelStatement`.

    Attributes
    ----------
    table : pandas.DataFrame
        Every column of the labelled export, with ``label`` the final label's name (missing
        when none), then ``label_source`` (one of :data:`LABEL_SOURCES`) and ``model_margin``
        (model rows only, see the module docstring).
    """

    table: pd.DataFrame


@dataclass(frozen=True)
class DecidedLabels:
    """A label decision and its statement, with the key they were made for: the number of
    events and the settings history (:meth:`KeptLabels.decided`)."""

    n_events: int
    history: SettingsHistory
    decision: LabelDecision
    statement: LabelStatement


# ---------------------------------------------------------------------------------- settings


def session_label_settings(session_factory: sessionmaker[Session], session_name: str) -> LabelSettings:
    """The label settings of the session called ``session_name``."""
    with session_factory() as s:
        return label_settings(s, get_session_by_name(s, session_name).id)


def change_label_settings(
    session_factory: sessionmaker[Session],
    session_name: str,
    *,
    max_error: float | None = None,
    confidence: float | None = None,
    audit_share: float | None = None,
    promise: str | None = None,
    actor: str | None = None,
) -> LabelSettings:
    """Change some of a session's label settings (the others are kept); returns them all.

    Admins only in team mode (``actor``; ``None`` is the command line); the change is recorded
    in the audit log. Nothing is written when a value is out of range
    (:class:`app.store.LabelSettings` names it).
    """
    given: tuple[tuple[str, object], ...] = (
        ("max_error", max_error),
        ("confidence", confidence),
        ("audit_share", audit_share),
        ("promise", promise),
    )
    changes: dict[str, Any] = {name: value for name, value in given if value is not None}

    def work(s: Session) -> LabelSettings:
        session_id = get_session_by_name(s, session_name).id
        settings = replace(label_settings(s, session_id), **changes)
        return set_label_settings(s, session_id=session_id, settings=settings, actor=actor)

    return write_transaction(session_factory, work)


# ---------------------------------------------------------------------------------- labels


def _summary(
    loop: Loop, state: SessionState, settings: LabelSettings, kept: np.ndarray, verdicts: int, undecided: int
) -> LabelSummary:
    stated = loop.stated_sets
    promises = {(s.lot.promise.name, s.lot.promise.target, getattr(s.lot.promise, "confidence", None)) for s in stated}
    first = stated[0].lot.promise if stated else None
    size = sum(s.stated for s in stated)
    bounds = [s.wrong_bound for s in stated]
    wrong_bound = sum(b for b in bounds if b is not None) if size and None not in bounds else None
    bound = wrong_bound / size if wrong_bound is not None else None
    active = loop.active
    return LabelSummary(
        target=first.target if first is not None else settings.max_error,
        confidence=getattr(first, "confidence", settings.confidence) if first is not None else settings.confidence,
        promise=first.name if first is not None else settings.promise,
        model_labels=int(kept.sum()),
        stated=size,
        error_bound=bound,
        audited=sum(s.audited for s in stated),
        lots=len(loop.lots),
        active_lot_size=0 if active is None else int(active.lot.items.size),
        lot_ends_in=None if loop.next_lot_at is None else max(0, loop.next_lot_at - verdicts),
        audit_share=settings.audit_share,
        open_items=int(np.asarray(state.open_items).sum()),
        mixed_promises=len(promises) > 1,
        wrong_bound=wrong_bound,
        done=work_is_done(undecided, loop),
        promise_left=loop.promise_left,
        out_of_promise=loop.out_of_promise,
    )


def decide_labels(state: SessionState, loop: Loop, settings: LabelSettings, *, from_votes: bool) -> LabelDecision:
    """Every item's final label and source (see the module docstring).

    Parameters
    ----------
    state : SessionState
    loop : engine.labelling_loop.Loop
        The session's lots and their verdicts.
    settings : LabelSettings
        The settings in force (the audit share; the statement's promise when nothing is stated).
    from_votes : bool
        The dataset's candidate sets were made from crowd votes (single labels are ``crowd``).
    """
    candidates = np.asarray(state.candidates)
    n = state.n_instances
    sizes = candidates.sum(axis=1)
    answered = np.asarray(state.answered)
    flagged = np.asarray(state.none_of_these) | state.in_conflict
    kept, model_label, model_margin = loop.delivered(n)
    kept &= ~answered & ~flagged

    source = np.full(n, LABEL_SOURCES.index("undecided"), dtype=np.int64)
    single = (sizes == 1) & ~flagged
    source[single & ~answered] = LABEL_SOURCES.index("crowd" if from_votes else "given")
    source[single & answered] = LABEL_SOURCES.index("expert")
    source[kept] = LABEL_SOURCES.index("model")
    label = np.where(single, candidates.argmax(axis=1), -1)
    label[kept] = model_label[kept]
    margin = np.full(n, np.nan)
    margin[kept] = model_margin[kept]
    undecided = int((source == LABEL_SOURCES.index("undecided")).sum())
    return LabelDecision(label, source, margin, kept, _summary(loop, state, settings, kept, loop.verdicts, undecided))


def _answers(n: int, more: str = "") -> str:
    """``n`` answers, in words: "1 answer", "20 more answers"."""
    return f"{n} {more}answer" if n == 1 else f"{n} {more}answers"


def promise_words(summary: LabelSummary) -> str:
    """The promise in words: "at most 5% wrong, with 90% confidence" or "… on average"."""
    if summary.promise == "confidence":
        return f"at most {summary.target * 100:g}% wrong, with {summary.confidence * 100:g}% confidence"
    return f"at most {summary.target * 100:g}% wrong on average"


def promise_meaning(summary: LabelSummary) -> str:
    """What the promise in force allows, in plain words, for a reader who is not a statistician.

    >>> from app.service.delivery import LabelSummary
    >>> s = LabelSummary(0.05, 0.9, "average", 313, 423, None, 40, 1, 0, None, 0.5, 0)
    >>> print(promise_meaning(s))  # doctest: +NORMALIZE_WHITESPACE
    On average: if many sessions like this one were run, the share of wrong labels among the stated
    ones would be at most 5% on average. This session alone may be above 5%: the promise bounds the
    mean, not each session (with confidence bounds each session, at the cost of more audits). The
    confidence setting is not used.
    """
    target = f"{summary.target * 100:g}%"
    if summary.promise == "confidence":
        miss = f"{(1 - summary.confidence) * 100:g}"
        return (
            f"With {summary.confidence * 100:g}% confidence: at most {target} of the stated labels are wrong, "
            f"unless this session is one of the unlucky {miss} in 100 whose random audits looked better than "
            "the labels are. It holds whenever you read or export, and assumes the audited answers are right."
        )
    return (
        "On average: if many sessions like this one were run, the share of wrong labels among the stated ones "
        f"would be at most {target} on average. This session alone may be above {target}: the promise bounds the "
        "mean, not each session (with confidence bounds each session, at the cost of more audits). The "
        "confidence setting is not used."
    )


def label_statement(counts: dict[str, int], summary: LabelSummary) -> str:
    """What winnow states about its model labels, in one line (:attr:`DeliveredLabels.statement`).

    >>> s = LabelSummary(0.05, 0.9, "confidence", 0, 0, None, 0, 1, 402, 230, 0.5, 520)
    >>> print(label_statement({"model": 0, "undecided": 520}, s))  # doctest: +NORMALIZE_WHITESPACE
    model labels: none yet — 50% of the served items are audits of the model's labels on 402 items,
    for at most 230 more answers; undecided: 520
    >>> s = LabelSummary(0.05, 0.9, "confidence", 380, 423, 0.041, 73, 1, 0, 60, 0.5, 97)
    >>> print(label_statement({"model": 380, "undecided": 97}, s))  # doctest: +NORMALIZE_WHITESPACE
    model labels: 380 — these and the 43 expert answers on the same items are at most 5% wrong,
    with 90% confidence (bound now 4.1%, from 73 audited answers, assumed right); the model is
    sure of too few open items to check; winnow looks again in 60 answers; undecided: 97
    >>> s = LabelSummary(0.05, 0.9, "average", 0, 0, None, 0, 16, 0, 20, 0.5, 350, promise_left=0.28,
    ...                  out_of_promise=True)
    >>> print(label_statement({"model": 0, "undecided": 350}, s))  # doctest: +NORMALIZE_WHITESPACE
    model labels: none yet — what is left of the promise (28% of it) is too little to check the open
    items, whatever the model is sure of; winnow looks again in 20 answers; undecided: 350
    """
    undecided = counts.get("undecided", 0)
    tail = f"; undecided: {undecided}"
    if counts.get("crowd", 0):
        tail += f"; crowd labels: {counts['crowd']} (single labels left by the votes; their error is not measured)"
    if summary.stated:
        answered = summary.stated - summary.model_labels
        now = "" if summary.error_bound is None else f"bound now {summary.error_bound * 100:.1f}%, "
        with_answers = f" and the {answered} expert answers on the same items" if answered else ""
        said = (
            f"model labels: {summary.model_labels} — these{with_answers} are {promise_words(summary)} "
            f"({now}from {summary.audited} audited answers, assumed right)"
        )
        if summary.mixed_promises:
            said += " (labels checked under earlier settings keep theirs)"
    else:
        said = "model labels: none yet"
    if summary.audits_off:
        said += "; audits are off (audit share 0%): no more model labels can be stated"
    elif summary.active_lot_size:
        # Which of the model's proposals is checked matters only once there was more than one.
        which = f"{summary.active_lot_size} more items" if summary.lots > 1 else f"{summary.active_lot_size} items"
        ends = f", for at most {_answers(summary.lot_ends_in, 'more ')}" if summary.lot_ends_in is not None else ""
        said += (
            f"{'; ' if summary.stated else ' — '}{share_percent(summary.audit_share)} of the served items are "
            f"audits of the model's labels on {which}{ends}"
        )
    elif not summary.open_items:
        said += " — nothing is left open"
    elif summary.lot_ends_in is not None:
        why = (
            f"what is left of the promise ({share_percent(summary.promise_left)} of it) is too little to check "
            "the open items, whatever the model is sure of"
            if summary.out_of_promise
            else "the model is sure of too few open items to check"
        )
        said += f"{'; ' if summary.stated else ' — '}{why}; winnow looks again in {_answers(summary.lot_ends_in)}"
    return said + tail


def delivered_table(base: pd.DataFrame, decision: LabelDecision, label_names: tuple[str, ...]) -> pd.DataFrame:
    """``base`` (the labelled export) with the final ``label``, then ``label_source`` and
    ``model_margin`` after it."""
    import pandas as pd  # here: a label statement alone (session status) makes no table

    names = np.asarray(label_names, dtype=object)
    label = np.where(decision.label >= 0, names[np.maximum(decision.label, 0)], None)
    table = base.copy()
    table["label"] = pd.Series(label, dtype=object, index=table.index)
    at = table.columns.get_loc("label") + 1
    table.insert(
        at,
        "label_source",
        pd.Series(np.asarray(LABEL_SOURCES, dtype=object)[decision.source], dtype=object, index=table.index),
    )
    table.insert(at + 1, "model_margin", decision.margin)
    return table


def statement_metadata(labels: DeliveredLabels) -> dict[str, Any]:
    """The export's metadata (the JSON header object, the Parquet key-value metadata)."""
    s = labels.summary
    return {
        "target_error": s.target,
        "promise": s.promise,
        "promise_meaning": (
            "at most target_error of the labels of the certified sets (model labels, and expert answers on the "
            "same items) are wrong, with probability statement_confidence, whenever the statement is read; "
            "the audited answers are assumed right"
            if s.promise == "confidence"
            else "the expected share of wrong labels among the certified sets (model labels, and expert answers "
            "on the same items) is at most target_error, whenever the statement is read; the audited answers "
            "are assumed right"
        ),
        "statement_confidence": s.confidence if s.promise == "confidence" else None,
        "audit_share": labels.settings.audit_share,
        "audit_share_meaning": (
            f"share of the served items that are audits while the model's labels are checked, as a fraction: "
            f"{labels.settings.audit_share:g} is the {share_percent(labels.settings.audit_share)} the app shows"
        ),
        "stated_labels": s.stated,
        "stated_error_bound": s.error_bound,
        "audited_answers": s.audited,
        "lots": s.lots,
        "lots_meaning": "sets of model labels frozen so far, each checked by its own audits",
        "counts": dict(labels.counts),
        "done": s.done,
        "done_meaning": "no item is undecided and no model label is being checked: more answers change no statement",
        "statement": labels.statement,
        "model_margin_column": "the model's margin (DST-PLL: bel - max pl) when its label was proposed for "
        "checking, model rows only: orders model labels, not a probability",
    }


# ---------------------------------------------------------------------------------- kept


class KeptLabels:
    """A session's last label decision, its statement and its labelled table, kept until the
    next event or settings change (the key :class:`DecidedLabels` carries).

    Parameters
    ----------
    lock : threading.RLock
        Held while the kept results are read or made: the workbench passes the lock of its
        DST-PLL model (:meth:`app.service.Workbench.rejects` reads the decision while it
        holds that lock, so it must be reentrant).
    from_votes : bool
        Whether the dataset's candidate sets were made from crowd votes.
    """

    def __init__(self, lock: threading.RLock, *, from_votes: bool) -> None:
        self._lock = lock
        self._from_votes = from_votes
        self._decided: DecidedLabels | None = None
        #: The last delivered labels, with the key of the decision they were made from.
        self._delivered: tuple[int, SettingsHistory, DeliveredLabels] | None = None

    def decided(self, state: SessionState, loop: Loop, history: SettingsHistory) -> DecidedLabels:
        """The label decision of ``state`` with the lots ``loop`` under the settings changes
        ``history`` (:func:`decide_labels`), and its statement."""
        with self._lock:
            kept = self._decided
            if kept is not None and (kept.n_events, kept.history) == (state.n_events, history):
                return kept
            settings = settings_in_force(history)
            decision = decide_labels(state, loop, settings, from_votes=self._from_votes)
            counts = decision.counts()
            stated = LabelStatement(
                counts=counts,
                summary=decision.summary,
                settings=settings,
                statement=label_statement(counts, decision.summary),
            )
            self._decided = DecidedLabels(state.n_events, history, decision, stated)
            return self._decided

    def delivered(
        self, state: SessionState, decided: DecidedLabels, content: Callable[[], dict[str, tuple[str | None, ...]]]
    ) -> DeliveredLabels:
        """The labelled dataset of ``state`` made from ``decided`` (``content()``: the items'
        content references, :meth:`app.service.item_content.ContentReader.export_content`)."""
        # The table is made from the decision it is kept with (same key).
        with self._lock:
            kept = self._delivered
            if kept is not None and kept[:2] == (decided.n_events, decided.history):
                return kept[2]
            base = session_tables.labelled_table(state, content())
            stated = decided.statement
            labels = DeliveredLabels(
                counts=stated.counts,
                summary=stated.summary,
                settings=stated.settings,
                statement=stated.statement,
                table=delivered_table(base, decided.decision, state.label_names),
            )
            labels.table.attrs["metadata"] = statement_metadata(labels)
            self._delivered = (decided.n_events, decided.history, labels)
            return labels
