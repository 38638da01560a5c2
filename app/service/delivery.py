"""The labelled dataset winnow hands back: a final label per item, its source, and how far to trust it.

Every item gets one **label source** (see ``docs/architecture.md``'s vocabulary):

``expert``
    an annotator's verdict settled it (an answer, another label, or a reviewer's resolve);
``given``
    its candidate set holds a single label and nobody answered it (from the import, or left
    after answers elsewhere);
``model``
    an open item (two or more candidates, no verdict) whose model label winnow stands behind:
    DST-PLL's transductive label with its margin ``bel(ŷ) − max pl`` as accept score
    (:func:`engine.accept_scores.dst_margin`, the score that ranks model labels best,
    ``docs/results_accept_scores.md``), kept when the margin reaches the threshold that
    :func:`engine.calibration.calibrate_threshold` chooses from the **audited answers** so
    that the kept labels' error is at most the session's ``max_error`` with probability at
    least its ``confidence``;
``undecided``
    everything else: open items whose model label is not kept, items in conflict, and items
    flagged "none of these" (no label is known). The Rejects page lists exactly these.

The calibration uses the audited answers only (:mod:`app.service.audits`: items drawn at
random among those the model would label), never answers to ranked queries, which are chosen
where the model is least sure. An audited item's model label is computed **leave one out**:
DST-PLL on the item's original candidate set and its neighbours' current sets (the graph
leaves every item out of its own neighbourhood), so its own answer does not vote for itself;
it is then compared with the expert's answer ("none of these" or another label outside the
set counts as wrong).

``confidence`` (model rows only) is DST-PLL's margin mapped from ``[−1, 1]`` to ``[0, 1]``,
``(1 + margin) / 2``: how far the evidence of the neighbours favours the label over every other
one. It orders model labels (higher is more trusted) but is **not** a probability of being
right; what winnow guarantees is the statement: the error of the model labels as a whole is at
most the stated bound with the stated confidence.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy.orm import Session, sessionmaker

from app.store import (
    LabelSettings,
    SessionState,
    get_session_by_name,
    label_settings,
    set_label_settings,
    write_transaction,
)
from engine.calibration import Calibration, calibrate_threshold
from engine.dst import transductive_decisions

__all__ = [
    "LABEL_SOURCES",
    "DeliveredLabels",
    "LabelDecision",
    "session_label_settings",
    "change_label_settings",
    "audited_answers",
    "decide_labels",
    "label_statement",
    "delivered_table",
    "statement_metadata",
]

#: The sources of an item's final label, in the order counts are shown.
LABEL_SOURCES: tuple[str, ...] = ("expert", "given", "model", "undecided")


@dataclass(frozen=True)
class DeliveredLabels:
    """The labelled dataset of a session and what winnow states about its model labels.

    Attributes
    ----------
    table : pandas.DataFrame
        Every column of the labelled export, with ``label`` the final label's name (missing
        when none), then ``label_source`` (one of :data:`LABEL_SOURCES`) and ``confidence``
        (model rows only: ``(1 + margin) / 2`` in ``[0, 1]``, see the module docstring).
    counts : dict of str to int
        Items per label source (every source present, possibly 0).
    calibration : engine.calibration.Calibration
        The threshold and bound chosen from the audited answers.
    settings : app.store.LabelSettings
        The session's target error, confidence and audit share.
    n_audited : int
        Audited answers the calibration used.
    statement : str
        E.g. ``"model labels: 612, error ≤ 5.0% at 90% confidence (52 audited answers);
        undecided: 211"``, or ``"model labels: not yet measured — 17 more audited answers
        needed; undecided: 823"`` when no label can be backed yet.
    """

    table: pd.DataFrame
    counts: dict[str, int]
    calibration: Calibration
    settings: LabelSettings
    n_audited: int
    statement: str


@dataclass(frozen=True)
class LabelDecision:
    """Each item's final label and source, as arrays (before they become a table).

    Attributes
    ----------
    label : int array of shape (n_instances,)
        The final label's index, ``-1`` when none.
    source : int array of shape (n_instances,)
        Index into :data:`LABEL_SOURCES`.
    confidence : float array of shape (n_instances,)
        ``(1 + margin) / 2`` on model rows, NaN elsewhere.
    model_kept : bool array of shape (n_instances,)
        The open items whose model label is kept.
    calibration : Calibration
    n_audited : int
    """

    label: np.ndarray
    source: np.ndarray
    confidence: np.ndarray
    model_kept: np.ndarray
    calibration: Calibration
    n_audited: int

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
    actor: str | None = None,
) -> LabelSettings:
    """Change some of a session's label settings (the others are kept); returns them all.

    Admins only in team mode (``actor``; ``None`` is the command line); the change is recorded
    in the audit log. Nothing is written when a value is out of range
    (:class:`app.store.LabelSettings` names it).
    """
    given = (("max_error", max_error), ("confidence", confidence), ("audit_share", audit_share))
    changes = {name: value for name, value in given if value is not None}

    def work(s: Session) -> LabelSettings:
        session_id = get_session_by_name(s, session_name).id
        settings = replace(label_settings(s, session_id), **changes)
        return set_label_settings(s, session_id=session_id, settings=settings, actor=actor)

    return write_transaction(session_factory, work)


# ---------------------------------------------------------------------------------- labels


def audited_answers(
    state: SessionState, drawn: np.ndarray, idx: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The audited items that have a settled expert answer, their leave-one-out margin and
    whether the model's label was right.

    Parameters
    ----------
    state : SessionState
    drawn : int array
        Positions of every drawn audit item.
    idx : int array of shape (n_instances, k)
        The dataset's neighbour graph (no item among its own neighbours).

    Returns
    -------
    positions : int array of shape (a,)
    margin : float array of shape (a,)
        DST-PLL's margin of each item's leave-one-out label.
    correct : bool array of shape (a,)
    """
    drawn = np.asarray(drawn, dtype=np.int64)
    answered = np.array([state.answered_by[p] is not None for p in drawn], dtype=bool)
    if drawn.size:
        answered &= ~state.in_conflict[drawn]
    positions = drawn[answered]
    if positions.size == 0:
        return positions, np.zeros(0), np.zeros(0, dtype=bool)
    n = state.n_instances
    # The audited items once more, with their original sets, as extra rows that nobody has
    # among their neighbours: their decisions read their neighbours' current sets, not their
    # own answers, and no other row's decision changes.
    Y = np.vstack([np.asarray(state.candidates), np.asarray(state.original_candidates)[positions]])
    graph = np.vstack([idx, idx[positions]])
    labels, _, margin = transductive_decisions(Y, graph, n + np.arange(positions.size), random_state=0)
    current = np.asarray(state.candidates)[positions]
    settled = (current.sum(axis=1) == 1) & ~np.asarray(state.none_of_these)[positions]
    expert = np.where(settled, current.argmax(axis=1), -1)
    return positions, np.asarray(margin, dtype=np.float64), expert == labels


def decide_labels(
    state: SessionState,
    model_labels: np.ndarray,
    model_margin: np.ndarray,
    audit_margin: np.ndarray,
    audit_correct: np.ndarray,
    settings: LabelSettings,
) -> LabelDecision:
    """Every item's final label and source (see the module docstring).

    Parameters
    ----------
    state : SessionState
    model_labels, model_margin : arrays of shape (n_instances,)
        DST-PLL's transductive label and margin of every item (read on open items only).
    audit_margin, audit_correct : arrays of shape (a,)
        From :func:`audited_answers`.
    settings : LabelSettings
    """
    calibration = calibrate_threshold(
        audit_margin, audit_correct, target=settings.max_error, confidence=settings.confidence
    )
    candidates = np.asarray(state.candidates)
    n = state.n_instances
    sizes = candidates.sum(axis=1)
    answered = np.fromiter((a is not None for a in state.answered_by), dtype=bool, count=n)
    flagged = np.asarray(state.none_of_these) | state.in_conflict
    open_items = np.asarray(state.open_items)
    kept = (
        open_items & (np.asarray(model_margin) >= calibration.threshold)
        if calibration.threshold is not None
        else np.zeros(n, dtype=bool)
    )

    source = np.full(n, LABEL_SOURCES.index("undecided"), dtype=np.int64)
    single = (sizes == 1) & ~flagged
    source[single & ~answered] = LABEL_SOURCES.index("given")
    source[single & answered] = LABEL_SOURCES.index("expert")
    source[kept] = LABEL_SOURCES.index("model")
    label = np.where(single, candidates.argmax(axis=1), -1)
    label[kept] = np.asarray(model_labels)[kept]
    confidence = np.full(n, np.nan)
    confidence[kept] = (1.0 + np.asarray(model_margin, dtype=np.float64)[kept]) / 2.0
    return LabelDecision(label, source, confidence, kept, calibration, int(np.asarray(audit_margin).size))


def label_statement(counts: dict[str, int], calibration: Calibration, n_audited: int) -> str:
    """What winnow states about its model labels, in one line (:attr:`DeliveredLabels.statement`).

    >>> from engine.calibration import calibrate_threshold
    >>> cal = calibrate_threshold([0.5] * 10, [True] * 10, target=0.05)
    >>> label_statement({"model": 0, "undecided": 823}, cal, 10)
    'model labels: not yet measured — 35 more audited answers needed; undecided: 823'
    """
    undecided = counts.get("undecided", 0)
    if calibration.threshold is None or calibration.bound is None:
        return (
            f"model labels: not yet measured — {calibration.more_audits_needed} more audited answers needed; "
            f"undecided: {undecided}"
        )
    return (
        f"model labels: {counts.get('model', 0)}, error ≤ {calibration.bound * 100:.1f}% at "
        f"{calibration.confidence * 100:g}% confidence ({n_audited} audited answers); undecided: {undecided}"
    )


def delivered_table(base: pd.DataFrame, decision: LabelDecision, label_names: tuple[str, ...]) -> pd.DataFrame:
    """``base`` (the labelled export) with the final ``label``, then ``label_source`` and
    ``confidence`` after it."""
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
    table.insert(at + 1, "confidence", decision.confidence)
    return table


def statement_metadata(labels: DeliveredLabels) -> dict[str, Any]:
    """The export's metadata (the JSON header object, the Parquet key-value metadata)."""
    cal = labels.calibration
    return {
        "target_error": labels.settings.max_error,
        "confidence": labels.settings.confidence,
        "audit_share": labels.settings.audit_share,
        "stated_error_bound": cal.bound,
        "threshold": cal.threshold,
        "audited_answers": labels.n_audited,
        "more_audited_answers_needed": cal.more_audits_needed,
        "counts": dict(labels.counts),
        "statement": labels.statement,
        "confidence_column": "(1 + DST-PLL margin) / 2 on model rows: orders model labels, not a probability",
    }
