"""A session's label settings (the error the user accepts in model labels) and its audit draws.

* :class:`LabelSettings` — the largest error accepted in model labels, the confidence with
  which it must hold, and the share of served items that are audits; read with
  :func:`label_settings` (the defaults when the session never set them), written with
  :func:`set_label_settings` (admins only, recorded in the audit log with what changed).
* Audit draws — the items drawn at random among those the model would label, one per audit
  slot of the session's queue (:mod:`app.service.audits` decides which slots and draws the
  items); :func:`audit_draws` reads them, :func:`save_audit_draws` stores new ones, once:
  a slot or an item already drawn keeps its first draw, so every view shows the same item.

Writes run inside a SAVEPOINT of the caller's session; the caller owns the transaction.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Real
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.store.checks import check_int
from app.store.errors import InvalidRecord
from app.store.models import AuditDraw, Instance, SessionLabelSettings, utcnow
from app.store.policies import authorize_session
from app.store.records import get_labelling_session
from app.store.users import record_audit

__all__ = ["LabelSettings", "label_settings", "set_label_settings", "audit_draws", "save_audit_draws"]


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
    audit_share : float, default=0.05
        Share of the served items that are audits, ``0 <= audit_share <= 0.5`` (0: no
        audits, so no model label is ever stated).

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
    return LabelSettings(max_error=row.max_error, confidence=row.confidence, audit_share=row.audit_share)


def _describe_change(before: LabelSettings, after: LabelSettings) -> str:
    changes = [
        f"{name} {getattr(before, name):g} -> {getattr(after, name):g}"
        for name in ("max_error", "confidence", "audit_share")
        if getattr(before, name) != getattr(after, name)
    ]
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
                )
            )
        else:
            row.max_error, row.confidence = settings.max_error, settings.confidence
            row.audit_share = settings.audit_share
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


def audit_draws(session: Session, session_id: int) -> dict[int, int]:
    """The session's audit draws: slot -> position of the drawn item in the dataset."""
    labelling = get_labelling_session(session, session_id)
    rows = session.execute(
        select(AuditDraw.slot, Instance.position)
        .join(Instance, Instance.id == AuditDraw.instance_id)
        .where(AuditDraw.session_id == labelling.id)
        .order_by(AuditDraw.slot)
    ).all()
    return {int(slot): int(position) for slot, position in rows}


def save_audit_draws(session: Session, session_id: int, draws: Mapping[int, int]) -> dict[int, int]:
    """Store new audit draws (slot -> position); returns every draw of the session afterwards.

    A slot already drawn keeps its item and an item already drawn keeps its slot: the new
    draws that would change either are not stored (another process drew first), and the
    caller reads the returned draws instead of its own.

    Raises
    ------
    InvalidRecord
        A negative slot, or a position outside the dataset.
    """
    labelling = get_labelling_session(session, session_id)
    checked: dict[int, int] = {}
    for slot, position in draws.items():
        slot, position = check_int(slot, "slot"), check_int(position, "position")
        if slot < 0:
            raise InvalidRecord(f"slot must be >= 0, got {slot}")
        checked[slot] = position
    existing = audit_draws(session, labelling.id)
    taken = set(existing.values())
    fresh: dict[int, int] = {}
    for slot, pos in sorted(checked.items()):
        if slot not in existing and pos not in taken:  # two new slots for one item: the first keeps it
            fresh[slot] = pos
            taken.add(pos)
    if not fresh:
        return existing
    ids = dict(
        session.execute(
            select(Instance.position, Instance.id).where(
                Instance.dataset_id == labelling.dataset_id, Instance.position.in_(sorted(fresh.values()))
            )
        ).all()
    )
    missing = sorted(set(fresh.values()) - set(ids))
    if missing:
        raise InvalidRecord(f"position {missing[0]} is not an item of session {labelling.name!r}'s dataset")
    now = utcnow()
    try:
        with session.begin_nested():
            session.add_all(
                AuditDraw(session_id=labelling.id, instance_id=ids[pos], slot=slot, drawn_at=now)
                for slot, pos in fresh.items()
            )
            session.flush()
    except IntegrityError:
        # Another process stored a draw for one of these slots or items since the read
        # above: its draws stand (the savepoint is rolled back), and the caller reads them.
        pass
    return audit_draws(session, labelling.id)
