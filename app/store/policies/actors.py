"""Who is asking: the command line operator, anyone in single-user mode, or a user account.

Every policy of :mod:`app.store.policies` starts from :func:`resolve_actor`. ``None`` is the
command line: whoever runs it holds the database itself (its file or its credentials), which
is more than any role grants. A store without users is in single-user mode, where nobody is
asked who they are, so every name may do everything, as before accounts existed.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.store.checks import check_name
from app.store.errors import PermissionDenied
from app.store.records import find_user, users_exist

__all__ = ["Actor", "OPERATOR", "REVIEW_ROLES", "resolve_actor", "require_account", "require_admin_actor"]

#: Roles that read every session and settle conflicts.
REVIEW_ROLES: tuple[str, ...] = ("reviewer", "admin")


@dataclass(frozen=True)
class Actor:
    """The one asking, resolved against the store's accounts.

    Attributes
    ----------
    name : str or None
        ``None`` for the command line operator.
    role : str or None
        The account's role; ``None`` for the operator, in single-user mode and for a name
        that is not an account.
    user_id : int or None
        The account's id, when there is one.
    active : bool
        False for a disabled account and for a name that is not an account.
    unrestricted : bool
        The operator, or anyone in single-user mode: every action is allowed.
    """

    name: str | None
    role: str | None = None
    user_id: int | None = None
    active: bool = False
    unrestricted: bool = False

    @property
    def is_account(self) -> bool:
        """True when the name is a user account of the store."""
        return self.user_id is not None


#: The command line operator.
OPERATOR = Actor(None, active=True, unrestricted=True)


def resolve_actor(session: Session, actor: str | None) -> Actor:
    """The :class:`Actor` called ``actor`` (``None``: the command line operator)."""
    if actor is None:
        return OPERATOR
    name = check_name(actor, "actor")
    if not users_exist(session):
        return Actor(name, active=True, unrestricted=True)
    user = find_user(session, name)
    if user is None:
        return Actor(name)
    return Actor(name, role=user.role, user_id=user.id, active=bool(user.active))


def require_account(actor: Actor, subject: str, *, hint: str = "") -> None:
    """Refuse a name that is not an active account (the unrestricted actors pass).

    Parameters
    ----------
    actor : Actor
    subject : str
        How the message names the actor, e.g. ``"annotator 'bob'"`` or ``"export: 'bob'"``.
    hint : str, optional
        Appended to the message about a name that is not an account.

    Raises
    ------
    PermissionDenied
    """
    if actor.unrestricted:
        return
    if not actor.is_account:
        raise PermissionDenied(f"{subject} is not a user of this store{hint}")
    if not actor.active:
        raise PermissionDenied(f"{subject} is disabled")


def require_admin_actor(session: Session, actor: str | None, what: str) -> Actor:
    """Refuse anyone but an active admin (``None``, the command line, may; so may anyone in
    single-user mode): the rule of every admin-only resource.

    Raises
    ------
    PermissionDenied
    """
    who = resolve_actor(session, actor)
    if who.unrestricted:
        return who
    require_account(who, f"{what}: {who.name!r}")
    if who.role != "admin":
        raise PermissionDenied(f"{what}: only an active admin may do this, and {who.name!r} is not one")
    return who
