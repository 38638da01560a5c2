"""A session's label settings (the error the user accepts in model labels), its lots, and the store's secret.

* :class:`LabelSettings` — the largest error accepted in model labels, the confidence with
  which it must hold, and the share of served items that are audits; read with
  :func:`label_settings` (the defaults when the session never set them), written with
  :func:`set_label_settings` (admins only, recorded in the audit log with what changed).
* Lots — the frozen lots of model labels (:mod:`app.service.lots` decides when one is made
  and what it holds); :func:`label_lots` reads them, :func:`save_label_lot` stores a new one,
  once: a lot another process froze first stands.
* :func:`audit_secret` — the store's random key that seeds the audit order.

Writes run inside a SAVEPOINT of the caller's session; the caller owns the transaction.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass
from numbers import Real
from typing import Any

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.store.errors import InvalidRecord
from app.store.models import Instance, LabelLot, SessionLabelSettings, StoreSecret, utcnow
from app.store.policies import authorize_session
from app.store.records import get_labelling_session
from app.store.users import record_audit

__all__ = [
    "LabelSettings",
    "LabelLotRecord",
    "label_settings",
    "set_label_settings",
    "label_lots",
    "save_label_lot",
    "audit_secret",
    "stored_audit_secret",
]


def _rate(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise InvalidRecord(f"{name} must be a finite number, got {value!r}")
    return value


@dataclass(frozen=True)
class LabelSettings:
    """How far model labels must be trusted, and how many served items are audits.

    Attributes
    ----------
    max_error : float, default=0.05
        Largest error rate accepted in model labels, ``0 < max_error < 0.5``.
    confidence : float, default=0.90
        Probability with which the stated error must hold, ``0.5 <= confidence < 1``.
    promise : {"confidence", "average"}, default="confidence"
        What a stated error means (:data:`engine.lots.PROMISES`): "at most ``max_error`` wrong,
        with ``confidence``" or "at most ``max_error`` wrong on average" (``confidence`` unused).
    audit_share : float, default=0.05
        Share of the served items that are audits once a first lot is certified,
        ``0 <= audit_share <= 0.5`` (0: no audits, so no model label is ever stated). Until
        then :data:`app.service.lots.FIRST_STATEMENT_AUDIT_SHARE` of them are, at least.

    Raises
    ------
    TypeError
        A value is not a number.
    InvalidRecord
        A value is out of its range (the message names it and the range).
    """

    max_error: float = 0.05
    confidence: float = 0.90
    audit_share: float = 0.05
    promise: str = "confidence"

    def __post_init__(self) -> None:
        max_error = _rate(self.max_error, "max_error")
        confidence = _rate(self.confidence, "confidence")
        audit_share = _rate(self.audit_share, "audit_share")
        if not 0.0 < max_error < 0.5:
            raise InvalidRecord(f"max_error must be > 0 and < 0.5 (an error rate, e.g. 0.05), got {max_error!r}")
        if not 0.5 <= confidence < 1.0:
            raise InvalidRecord(f"confidence must be >= 0.5 and < 1 (e.g. 0.9), got {confidence!r}")
        if not 0.0 <= audit_share <= 0.5:
            raise InvalidRecord(f"audit_share must be >= 0 and <= 0.5 (e.g. 0.05), got {audit_share!r}")
        # Imported here: engine.lots loads scipy.special (about 0.2 s), which the commands that
        # never read label settings (``winnow answer``, ``import``) need not pay for.
        from engine.lots import PROMISES

        if self.promise not in PROMISES:
            raise InvalidRecord(f"promise must be one of {', '.join(PROMISES)}; got {self.promise!r}")
        # Plain floats, whatever numbers came in (numpy scalars, ints).
        object.__setattr__(self, "max_error", max_error)
        object.__setattr__(self, "confidence", confidence)
        object.__setattr__(self, "audit_share", audit_share)


def label_settings(session: Session, session_id: int) -> LabelSettings:
    """The session's label settings (the defaults of :class:`LabelSettings` when never set)."""
    labelling = get_labelling_session(session, session_id)
    row = session.get(SessionLabelSettings, labelling.id)
    if row is None:
        return LabelSettings()
    return LabelSettings(
        max_error=row.max_error, confidence=row.confidence, audit_share=row.audit_share, promise=row.promise
    )


def _describe_change(before: LabelSettings, after: LabelSettings) -> str:
    changes = [
        f"{name} {getattr(before, name):g} -> {getattr(after, name):g}"
        for name in ("max_error", "confidence", "audit_share")
        if getattr(before, name) != getattr(after, name)
    ]
    if before.promise != after.promise:
        changes.append(f"promise {before.promise} -> {after.promise}")
    return "; ".join(changes) or "no change"


def set_label_settings(
    session: Session, *, session_id: int, settings: LabelSettings, actor: str | None = None
) -> LabelSettings:
    """Store a session's label settings; recorded in the audit log with what changed.

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        The caller owns the transaction.
    session_id : int
        The labelling session.
    settings : LabelSettings
        The new settings (checked when it was made).
    actor : str or None
        In team mode an active admin (:mod:`app.store.policies.sessions`, ``change_settings``);
        ``None`` is the command line. The change is recorded in the audit log either way.

    Returns
    -------
    LabelSettings
        The settings now in force.

    Raises
    ------
    TypeError
        ``settings`` is not a :class:`LabelSettings`.
    PermissionDenied
        ``actor`` may not change the session's settings.
    RecordNotFound
        No such session.
    """
    if not isinstance(settings, LabelSettings):
        raise TypeError(f"settings must be a LabelSettings, got {type(settings).__name__}")
    labelling = get_labelling_session(session, session_id)
    authorize_session(session, actor, "change_settings", labelling, what="session label settings")
    before = label_settings(session, labelling.id)
    with session.begin_nested():
        row = session.get(SessionLabelSettings, labelling.id)
        if row is None:
            session.add(
                SessionLabelSettings(
                    session_id=labelling.id,
                    max_error=settings.max_error,
                    confidence=settings.confidence,
                    audit_share=settings.audit_share,
                    promise=settings.promise,
                )
            )
        else:
            row.max_error, row.confidence = settings.max_error, settings.confidence
            row.audit_share, row.promise = settings.audit_share, settings.promise
        record_audit(
            session,
            "label_settings_changed",
            actor or "(command line)",
            actor=actor,
            session_id=labelling.id,
            detail=_describe_change(before, settings),
        )
        session.flush()
    return settings


@dataclass(frozen=True, eq=False)
class LabelLotRecord:
    """A frozen lot of model labels (:class:`app.store.models.LabelLot`), as arrays.

    Attributes
    ----------
    number : int
        1 for the session's first lot, then 2, 3, ...
    positions : int array of shape (lot_size,)
        Dataset positions of the lot's items, in audit order.
    labels : int array of shape (lot_size,)
        The frozen model label of each.
    margins : float array of shape (lot_size,)
        Their accept scores when the lot was frozen.
    alpha, target, threshold : float
        The lot's miscoverage, the target its prior was set for, and the score that let items in.
    after_event_id : int
        The largest event id the labels were computed from.
    """

    number: int
    positions: np.ndarray
    labels: np.ndarray
    margins: np.ndarray
    alpha: float
    target: float
    threshold: float
    after_event_id: int


def label_lots(session: Session, session_id: int) -> list[LabelLotRecord]:
    """The session's lots, first first."""
    labelling = get_labelling_session(session, session_id)
    rows = session.scalars(select(LabelLot).where(LabelLot.session_id == labelling.id).order_by(LabelLot.number))
    return [
        LabelLotRecord(
            number=row.number,
            positions=np.frombuffer(row.positions, dtype="<i8").astype(np.int64),
            labels=np.frombuffer(row.labels, dtype="<i4").astype(np.int64),
            margins=np.frombuffer(row.margins, dtype="<f8").astype(np.float64),
            alpha=row.alpha,
            target=row.target,
            threshold=row.threshold,
            after_event_id=row.after_event_id,
        )
        for row in rows
    ]


def save_label_lot(session: Session, session_id: int, lot: LabelLotRecord) -> list[LabelLotRecord]:
    """Store a new lot (its number must be the next one); returns every lot of the session.

    When another process froze lot ``lot.number`` first, nothing is stored and its lot is
    returned among the others: a lot is written once and never changed.

    Raises
    ------
    InvalidRecord
        The arrays differ in length, a position is outside the dataset or repeated, or the
        number skips one.
    """
    labelling = get_labelling_session(session, session_id)
    positions = np.asarray(lot.positions, dtype=np.int64)
    size = positions.size
    if np.asarray(lot.labels).shape != (size,) or np.asarray(lot.margins).shape != (size,):
        raise InvalidRecord(f"a lot's labels and margins must have one value per item ({size})")
    n_items = session.scalar(
        select(func.count()).select_from(Instance).where(Instance.dataset_id == labelling.dataset_id)
    )
    if size and (positions.min() < 0 or positions.max() >= int(n_items or 0) or np.unique(positions).size != size):
        raise InvalidRecord(f"a lot's positions must be distinct items of session {labelling.name!r}'s dataset")
    existing = label_lots(session, labelling.id)
    if lot.number != len(existing) + 1:
        return existing
    try:
        with session.begin_nested():
            session.add(
                LabelLot(
                    session_id=labelling.id,
                    number=lot.number,
                    after_event_id=int(lot.after_event_id),
                    alpha=float(lot.alpha),
                    target=float(lot.target),
                    threshold=float(lot.threshold),
                    positions=positions.astype("<i8").tobytes(),
                    labels=np.asarray(lot.labels).astype("<i4").tobytes(),
                    margins=np.asarray(lot.margins, dtype=np.float64).astype("<f8").tobytes(),
                    created_at=utcnow(),
                )
            )
            session.flush()
    except IntegrityError:
        # Another process froze this lot since the read above: its lot stands. Any other
        # violation is a fault of this write, and is raised.
        stored = label_lots(session, labelling.id)
        if len(stored) < lot.number:
            raise
        return stored
    return label_lots(session, labelling.id)


#: The ``store_secrets`` row whose key seeds the audit order.
AUDIT_ORDER_KEY = "audit_order"


def stored_audit_secret(session: Session) -> bytes | None:
    """The store's key of the audit order, or None before :func:`audit_secret` made it (a read)."""
    found = session.get(StoreSecret, AUDIT_ORDER_KEY)
    return None if found is None else bytes(found.value)


def audit_secret(session: Session) -> bytes:
    """The store's key of the audit order (:mod:`app.service.lots`), made (flushed) on first use.

    Never shown, exported or logged: whoever holds it can tell which items are audits.
    """
    found = stored_audit_secret(session)
    if found is not None:
        return found
    try:
        with session.begin_nested():
            session.add(StoreSecret(name=AUDIT_ORDER_KEY, value=secrets.token_bytes(32)))
            session.flush()
    except IntegrityError:  # another process made it between our read and our insert
        pass
    made = session.get(StoreSecret, AUDIT_ORDER_KEY, populate_existing=True)
    if made is None:  # pragma: no cover - the insert or the other process's row is there
        raise InvalidRecord("the store could not keep its audit key")
    return bytes(made.value)
