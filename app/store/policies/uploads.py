"""Who may bring data into the store (an upload in the browser, an import): admins.

The command line (``None``) imports files it can read anyway; in the browser app an upload
is refused before a byte of it is read unless the signed-in user is an active admin (in
single-user mode anyone may, as before accounts existed).
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.store.policies.actors import Actor, require_admin_actor

__all__ = ["authorize_upload"]


def authorize_upload(session: Session, actor: str | None, *, what: str = "upload") -> Actor:
    """Refuse an upload or import unless ``actor`` is an active admin.

    Raises
    ------
    PermissionDenied
    """
    return require_admin_actor(session, actor, what)
