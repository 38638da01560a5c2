"""A session's label settings (the error the user accepts in model labels) and the store's secret.

* :class:`LabelSettings` — the largest error accepted in model labels, the promise and the
  confidence with which it must hold, and the share of served items that are audits; read
  with :func:`label_settings` (the defaults when the session never set them), written with
  :func:`set_label_settings` (admins only, recorded in the audit log with what changed). Each
  change is a new row, never updated: :func:`label_settings_history` gives them all, so that a
  lot of model labels keeps the settings it was frozen with (:mod:`engine.labelling_loop`).
* :func:`audit_secret` — the store's random key that seeds the audit order.

Writes run inside a SAVEPOINT of the caller's session; the caller owns the transaction.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass
from numbers import Real
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.store.errors import InvalidRecord
from app.store.models import AnswerEvent, LabelSettingsChange, StoreSecret
from app.store.policies import authorize_session
from app.store.records import get_labelling_session
from app.store.users import record_audit

__all__ = [
    "LabelSettings",
    "label_settings",
    "label_settings_history",
    "set_label_settings",
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
        What a stated error means (:data:`engine.promises.PROMISES`): "at most ``max_error`` wrong,
        with ``confidence``" or "at most ``max_error`` wrong on average" (``confidence`` unused).
    audit_share : float, default=0.5
        Share of the served items that are audits while a lot of model labels is being
        checked, ``0 <= audit_share <= 0.5`` (0: no audits, so no model label is ever stated).

    Raises
    ------
    TypeError
        A value is not a number.
    InvalidRecord
        A value is out of its range (the message names it and the range).
    """

    max_error: float = 0.05
    confidence: float = 0.90
    audit_share: float = 0.5
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
        # Imported here: the engine's package loads lazily, and the commands that never read
        # label settings (``winnow answer``, ``import``) need not pay for it.
        from engine.promises import PROMISES

        if self.promise not in PROMISES:
            raise InvalidRecord(f"promise must be one of {', '.join(PROMISES)}; got {self.promise!r}")
        # Plain floats, whatever numbers came in (numpy scalars, ints).
        object.__setattr__(self, "max_error", max_error)
        object.__setattr__(self, "confidence", confidence)
        object.__setattr__(self, "audit_share", audit_share)


def label_settings_history(session: Session, session_id: int) -> list[tuple[int, LabelSettings]]:
    """Every change of the session's label settings, first first: the largest event id of the
    store when it was made, and the settings from then on (empty: the defaults throughout)."""
    labelling = get_labelling_session(session, session_id)
    rows = session.scalars(
        select(LabelSettingsChange)
        .where(LabelSettingsChange.session_id == labelling.id)
        .order_by(LabelSettingsChange.id)
    )
    return [
        (
            row.after_event_id,
            LabelSettings(
                max_error=row.max_error, confidence=row.confidence, audit_share=row.audit_share, promise=row.promise
            ),
        )
        for row in rows
    ]


def label_settings(session: Session, session_id: int) -> LabelSettings:
    """The session's label settings in force (the defaults of :class:`LabelSettings` when never set)."""
    history = label_settings_history(session, session_id)
    return history[-1][1] if history else LabelSettings()


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
        last_event = session.scalar(select(func.max(AnswerEvent.id)))
        session.add(
            LabelSettingsChange(
                session_id=labelling.id,
                after_event_id=int(last_event or 0),
                max_error=settings.max_error,
                confidence=settings.confidence,
                audit_share=settings.audit_share,
                promise=settings.promise,
            )
        )
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


#: The ``store_secrets`` row whose key seeds the audit order.
AUDIT_ORDER_KEY = "audit_order"


def stored_audit_secret(session: Session) -> bytes | None:
    """The store's key of the audit order, or None before :func:`audit_secret` made it (a read)."""
    found = session.get(StoreSecret, AUDIT_ORDER_KEY)
    return None if found is None else bytes(found.value)


def audit_secret(session: Session) -> bytes:
    """The store's key of the audit order (:mod:`engine.labelling_loop`), made (flushed) when
    the store is created (:func:`app.store.open_store`) or, for a store made before, first used.

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
