"""Who may read the audit log: admins (and the command line operator).

The audit log holds sign-ins, failed ones included, and every change to an account, an
assignment or a session's settings: :func:`app.store.audit_log` calls
:func:`authorize_audit` before it reads a row, for the whole log and for the rows about one
session alike (the events export of a session adds those only for an admin).
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.store.policies.actors import Actor, require_admin_actor

__all__ = ["authorize_audit"]


def authorize_audit(session: Session, actor: str | None, *, what: str = "audit log") -> Actor:
    """Refuse anyone but an active admin (``None``, the command line, may; so may anyone in
    single-user mode).

    Raises
    ------
    PermissionDenied
    """
    return require_admin_actor(session, actor, what)
