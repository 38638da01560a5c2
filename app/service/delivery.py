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
    an open item nobody answered whose label comes from a **certified lot**
    (:mod:`app.service.lots`, :mod:`engine.lots`): DST-PLL's label frozen when the lot was
    made, handed back because the lot's audits bound the error of its undelivered labels at
    the session's ``max_error``, with its ``confidence``, at every moment the result is read;
``undecided``
    everything else: open items in no certified lot, items in conflict, and items flagged
    "none of these" (no label is known). The Rejects page lists exactly these.

``model_margin`` (model rows only) is DST-PLL's margin ``bel(ŷ) − max pl`` when the lot was
frozen: it orders model labels (higher is more trusted) and is **not** a probability of being
right. What winnow guarantees is the statement about the model labels as a whole.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from app.service.lots import LotsNow
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

__all__ = [
    "LABEL_SOURCES",
    "DeliveredLabels",
    "LabelDecision",
    "LabelSummary",
    "session_label_settings",
    "change_label_settings",
    "decide_labels",
    "label_statement",
    "delivered_table",
    "statement_metadata",
]

#: The sources of an item's final label, in the order counts are shown.
LABEL_SOURCES: tuple[str, ...] = ("expert", "given", "crowd", "model", "undecided")


@dataclass(frozen=True)
class LabelSummary:
    """What winnow states about its model labels now, and what it waits for.

    Attributes
    ----------
    target : float
        The session's ``max_error``.
    confidence : float
        The session's confidence: with at least this probability, every statement made at
        any moment holds (the promise "confidence").
    promise : str
        ``"confidence"`` or ``"average"`` (:data:`engine.lots.PROMISES`).
    model_labels : int
        Model labels delivered (unanswered items of certified lots).
    error_bound : float or None
        Under the promise "confidence", the bound on their error now (``≤ target``); None
        when none are delivered, and under the promise "average" (which proves no bound
        tighter than its target).
    audited : int
        Audited answers backing the certified lots (their audited prefixes).
    audits_total : int
        Audited answers in every lot, the one being audited included.
    lots : int
        Lots frozen so far.
    active_lot_size : int
        Items of the lot being audited (0 when none is).
    audits_left : int
        Fewest further audited answers, all right, that would certify it (-1 when no lot is
        being audited).
    audit_share : float
        Share of served items that are audits now.
    open_items : int
        Items still open (two or more candidates, no verdict).
    audits_off : bool, default=False
        The session's audit share is 0: no audit is served, so nothing more can be certified.
    failing : tuple of (int, int) or None, default=None
        ``(wrong, audited)`` of the lot being audited when it is failing
        (:func:`app.service.lots.failing`): winnow looks in its audits for a cleaner lot.
    learning_left : int, default=0
        Learning audits still needed before the first lot is frozen
        (:data:`app.service.lots.FIRST_LOT_LEARNING_AUDITS`).
    """

    target: float
    confidence: float
    promise: str
    model_labels: int
    error_bound: float | None
    audited: int
    audits_total: int
    lots: int
    active_lot_size: int
    audits_left: int
    audit_share: float
    open_items: int
    audits_off: bool = False
    failing: tuple[int, int] | None = None
    learning_left: int = 0

    @property
    def answers_to_wait(self) -> int | None:
        """About how many answers (audits and ranked queries) until the active lot can be
        certified at the current share, if every audit is right, or until the first lot's
        learning audits are in; None when unknown."""
        left = self.audits_left if self.audits_left >= 0 else self.learning_left if self.learning_left > 0 else None
        if left is None or self.audit_share <= 0.0:
            return None
        return int(np.ceil(left / self.audit_share))


@dataclass(frozen=True)
class DeliveredLabels:
    """The labelled dataset of a session and what winnow states about its model labels.

    Attributes
    ----------
    table : pandas.DataFrame
        Every column of the labelled export, with ``label`` the final label's name (missing
        when none), then ``label_source`` (one of :data:`LABEL_SOURCES`) and ``model_margin``
        (model rows only, see the module docstring).
    counts : dict of str to int
        Items per label source (every source present, possibly 0).
    summary : LabelSummary
        What is stated, and what the next statement waits for.
    settings : app.store.LabelSettings
        The session's target error, confidence and audit share.
    statement : str
        The statement in one line (:func:`label_statement`).
    """

    table: pd.DataFrame
    counts: dict[str, int]
    summary: LabelSummary
    settings: LabelSettings
    statement: str

    @property
    def n_audited(self) -> int:
        """Audited answers backing the stated model labels."""
        return self.summary.audited


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


def _summary(now: LotsNow, state: SessionState, settings: LabelSettings, kept: np.ndarray) -> LabelSummary:
    certified = [(lot, v) for lot, v in zip(now.lots, now.verdicts, strict=True) if v.certified]
    delivered = sum(v.delivered for _, v in certified)
    wrong_at_most = sum(v.high - v.known_wrong for _, v in certified)
    active = now.active
    return LabelSummary(
        target=settings.max_error,
        confidence=settings.confidence,
        promise=settings.promise,
        model_labels=int(kept.sum()),
        error_bound=wrong_at_most / delivered if delivered and settings.promise == "confidence" else None,
        audited=sum(v.audited for _, v in certified),
        audits_total=sum(v.audited for v in now.verdicts),
        lots=len(now.lots),
        active_lot_size=0 if active is None else now.verdicts[active].lot_size,
        audits_left=-1 if active is None else now.verdicts[active].audits_left,
        audit_share=now.audit_share(settings),
        open_items=int(np.asarray(state.open_items).sum()),
        audits_off=settings.audit_share <= 0.0,
        failing=(now.verdicts[active].audit_errors, now.verdicts[active].audited)
        if now.failing and active is not None
        else None,
        learning_left=now.learning_needed,
    )


def decide_labels(state: SessionState, now: LotsNow, settings: LabelSettings, *, from_votes: bool) -> LabelDecision:
    """Every item's final label and source (see the module docstring).

    Parameters
    ----------
    state : SessionState
    now : app.service.lots.LotsNow
        The session's lots and their verdicts.
    settings : LabelSettings
    from_votes : bool
        The dataset's candidate sets were made from crowd votes (single labels are ``crowd``).
    """
    candidates = np.asarray(state.candidates)
    n = state.n_instances
    sizes = candidates.sum(axis=1)
    answered = np.asarray(state.answered)
    flagged = np.asarray(state.none_of_these) | state.in_conflict
    kept, model_label, model_margin = now.delivered(n)
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
    return LabelDecision(label, source, margin, kept, _summary(now, state, settings, kept))


def label_statement(counts: dict[str, int], summary: LabelSummary) -> str:
    """What winnow states about its model labels, in one line (:attr:`DeliveredLabels.statement`).

    >>> s = LabelSummary(0.05, 0.9, "confidence", 0, None, 0, 12, 1, 402, 49, 0.5, 520)
    >>> print(label_statement({"model": 0, "undecided": 520}, s))  # doctest: +NORMALIZE_WHITESPACE
    model labels: none yet — the first 402 the model would label need at least 49 more audited
    answers, all right (about 98 answers at the current audit share of 50%); undecided: 520
    >>> s = LabelSummary(0.05, 0.9, "average", 0, None, 0, 0, 0, 0, -1, 0.5, 520, learning_left=25)
    >>> print(label_statement({"model": 0, "undecided": 520}, s))  # doctest: +NORMALIZE_WHITESPACE
    model labels: none yet — winnow first audits 25 more items drawn at random (about 50 answers at
    the current audit share of 50%), to learn which of the model's labels to put forward; undecided: 520
    """
    undecided = counts.get("undecided", 0)
    tail = f"; undecided: {undecided}"
    if counts.get("crowd", 0):
        tail += f"; crowd labels: {counts['crowd']} (single labels left by the votes; their error is not measured)"
    if summary.promise == "confidence":
        promise = f"at most {summary.target * 100:g}% wrong, with {summary.confidence * 100:g}% confidence"
    else:
        promise = f"at most {summary.target * 100:g}% wrong on average"
    if summary.model_labels:
        now = "" if summary.error_bound is None else f"bound now {summary.error_bound * 100:.1f}%, "
        said = f"model labels: {summary.model_labels}, {promise} ({now}from {summary.audited} audited answers)"
    elif summary.audits_off:
        said = "model labels: none yet"
    elif summary.audit_share <= 0.0 and summary.lots and summary.audits_left < 0 and summary.open_items:
        said = "model labels: none — no lot of at least 20 open items the model would label is waiting for audits"
    else:
        said = "model labels: none yet"
    wait = summary.answers_to_wait
    about = f" (about {wait} answers at the current audit share of {summary.audit_share * 100:g}%)" if wait else ""
    # audits_left is 0 when the lot being audited is certified already: nothing to wait for.
    if summary.audits_left > 0 and not summary.audits_off:
        which = "the first" if summary.lots == 1 else "the next"
        said += (
            f"{' —' if not summary.model_labels else '; '} {which} {summary.active_lot_size} the model would label "
            f"need at least {summary.audits_left} more audited answers, all right{about}"
        ).replace(";  ", "; ")
        if summary.failing is not None:
            wrong, audited = summary.failing
            said += (
                f"; their audits found {wrong} wrong in {audited}, more than half the target, so winnow "
                "looks in them for a cleaner lot the model is surer of"
            )
    elif summary.learning_left > 0 and not summary.audits_off:
        said += (
            f" — winnow first audits {summary.learning_left} more items drawn at random{about}, to learn which of "
            "the model's labels to put forward"
        )
    elif summary.audits_off:
        said += (
            "; audits are off (audit share 0): no more model labels can be stated"
            if summary.model_labels
            else " — audits are off (audit share 0): no model label can be stated"
        )
    elif not summary.open_items:
        said += " — nothing is left open"
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
        "target_error": labels.settings.max_error,
        "promise": labels.settings.promise,
        "promise_meaning": (
            "at most target_error of the model labels are wrong, with probability statement_confidence, "
            "whenever the statement is read"
            if labels.settings.promise == "confidence"
            else "the expected share of wrong model labels is at most target_error, whenever the statement is read"
        ),
        "statement_confidence": labels.settings.confidence if labels.settings.promise == "confidence" else None,
        "audit_share": labels.settings.audit_share,
        "stated_error_bound": s.error_bound,
        "audited_answers": s.audited,
        "audited_answers_all_lots": s.audits_total,
        "lots": s.lots,
        "more_audited_answers_needed": s.audits_left if s.audits_left >= 0 else None,
        "learning_audits_needed": s.learning_left,
        "counts": dict(labels.counts),
        "statement": labels.statement,
        "model_margin_column": "DST-PLL margin bel - max pl when the lot was frozen, model rows only: "
        "orders model labels, not a probability",
    }
