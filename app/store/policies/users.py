"""Who may read and change user accounts: admins, and every user their own password.

:mod:`app.store.users` calls :func:`authorize_accounts` before every account change and
before listing the accounts; the command line (``None``) may do everything, which is how
the first admin is made.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.store.errors import PermissionDenied
from app.store.policies.actors import Actor, require_account, resolve_actor

__all__ = ["ACCOUNT_ACTIONS", "authorize_accounts"]

#: What can be done with accounts (each needs an active admin, except a user's own password).
ACCOUNT_ACTIONS: tuple[str, ...] = ("list", "add", "role", "disable", "enable", "password")


def authorize_accounts(
    session: Session, actor: str | None, action: str, *, target: str | None = None, what: str | None = None
) -> Actor:
    """Refuse an account action unless ``actor`` is an active admin (or, for ``password``,
    the user ``target`` themself).

    Parameters
    ----------
    actor : str or None
        ``None``: the command line.
    action : {"list", "add", "role", "disable", "enable", "password"}
    target : str, optional
        The account acted on.
    what : str, optional
        How the message names the action (default ``"user <action>"``).

    Raises
    ------
    PermissionDenied
    """
    if action not in ACCOUNT_ACTIONS:
        raise ValueError(f"action must be one of {', '.join(ACCOUNT_ACTIONS)}; got {action!r}")
    what = what or f"user {action}"
    who = resolve_actor(session, actor)
    if who.unrestricted:
        return who
    require_account(who, f"{what}: {who.name!r}")
    if action == "password" and target is not None and target == who.name:
        return who
    if who.role != "admin":
        raise PermissionDenied(f"{what}: only an active admin may do this, and {who.name!r} is not one")
    return who
