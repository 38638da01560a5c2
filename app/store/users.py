"""User accounts, roles, session assignments, sign-in and the audit log.

A store with no user is in *single-user mode*: every write is allowed, as before accounts
existed. As soon as one user exists the store is in *team mode* and every write checks who
makes it, here in the store so that the command line and the browser app cannot disagree:

* answers (``answer``, ``other_label``, ``none_of_these``, ``skip``) need an active user
  assigned to the session (:func:`check_event_permission`);
* ``resolve`` needs an active ``reviewer`` or ``admin``;
* ``undo`` needs an active user, and only ever cancels that user's own events
  (:func:`app.store.events.record_event` picks the target among them);
* account changes, assignments and session settings need an active ``admin``. ``actor=None``
  stands for the command line: whoever runs it holds the database itself (its file or its
  credentials), which is more than any role grants, so it is the way to create the first admin.

Passwords are hashed with argon2id (:mod:`argon2`, the ``argon2-cffi`` package) and never
stored, returned or logged in clear. Failed sign-ins are recorded in ``audit_events``, and a
name is refused without looking at the password while it has :data:`MAX_FAILED_SIGN_INS` or more
failed attempts (refused ones included) within the last :data:`FAILED_SIGN_IN_WINDOW`: the count
lives in the database, so it holds across processes and machines.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.store.checks import check_choice, check_int, check_name
from app.store.errors import InvalidRecord, RecordNotFound
from app.store.models import (
    ROLES,
    AuditEvent,
    ItemLease,
    LabellingSession,
    SessionAssignment,
    SessionTeamSettings,
    User,
    utcnow,
)
from app.store.records import get_labelling_session, get_or_create_annotator

__all__ = [
    "MAX_FAILED_SIGN_INS",
    "FAILED_SIGN_IN_WINDOW",
    "PASSWORD_MIN",
    "PASSWORD_MAX",
    "PermissionDenied",
    "UserInfo",
    "SignInResult",
    "users_exist",
    "add_user",
    "set_role",
    "set_active",
    "set_password",
    "list_users",
    "get_user",
    "assign_users",
    "session_members",
    "set_overlap",
    "session_overlap",
    "sign_in",
    "sign_in_external",
    "check_event_permission",
    "require_admin",
    "audit_log",
]

#: Failed sign-ins of one name within :data:`FAILED_SIGN_IN_WINDOW` after which it is locked.
MAX_FAILED_SIGN_INS = 5
#: How far back failed sign-ins count.
FAILED_SIGN_IN_WINDOW = timedelta(minutes=15)
#: Shortest and longest accepted password (argon2 takes any length; a cap bounds the work).
PASSWORD_MIN = 8
PASSWORD_MAX = 1024

#: Kinds of answer event that need an assignment to the session.
_ANSWER_KINDS = ("answer", "other_label", "none_of_these", "skip")
#: Roles that may settle conflicts.
_RESOLVER_ROLES = ("reviewer", "admin")

log = logging.getLogger("winnow.auth")
_hasher = PasswordHasher()  # argon2id with the library's current recommended parameters


@functools.cache
def _dummy_hash() -> str:
    """Verified against when the name is unknown, so a sign-in takes as long for a missing name
    as for a wrong password (the time would otherwise tell which names exist). Made on first
    use: hashing costs a third of a second, which every command would otherwise pay at start."""
    return _hasher.hash("winnow: no such user")


class PermissionDenied(InvalidRecord):
    """The user (or the lack of one) may not make this write; the message says why."""


@dataclass(frozen=True)
class UserInfo:
    """A user account as callers see it (never the password hash)."""

    name: str
    role: str
    active: bool
    created_at: datetime
    #: Names of the labelling sessions the user is assigned to.
    sessions: tuple[str, ...] = ()


@dataclass(frozen=True)
class SignInResult:
    """What :func:`sign_in` decided; ``user`` is set only when it succeeded."""

    user: UserInfo | None
    #: Why it failed, in words that do not tell whether the name exists.
    reason: str | None = None


# --------------------------------------------------------------------------------------------
# Look-ups


def users_exist(session: Session) -> bool:
    """True once the store has any user account (team mode)."""
    return session.scalar(select(User.id).limit(1)) is not None


def _find_user(session: Session, name: str) -> User | None:
    return session.scalar(select(User).where(User.name == name)) if "\x00" not in name else None


def _require_user(session: Session, name: Any, parameter: str = "name") -> User:
    name = check_name(name, parameter)
    user = _find_user(session, name)
    if user is None:
        known = session.scalars(select(User.name).order_by(User.id)).all()
        raise RecordNotFound(f"{parameter}: no user called {name!r}; known users: {list(known)}")
    return user


def _info(session: Session, user: User) -> UserInfo:
    sessions = session.scalars(
        select(LabellingSession.name)
        .join(SessionAssignment, SessionAssignment.session_id == LabellingSession.id)
        .where(SessionAssignment.user_id == user.id)
        .order_by(LabellingSession.id)
    ).all()
    return UserInfo(user.name, user.role, bool(user.active), user.created_at, tuple(sessions))


def get_user(session: Session, name: str) -> UserInfo:
    """The account called ``name`` (:class:`RecordNotFound` otherwise)."""
    return _info(session, _require_user(session, name))


def list_users(session: Session) -> list[UserInfo]:
    """Every account, oldest first."""
    return [_info(session, user) for user in session.scalars(select(User).order_by(User.id))]


# --------------------------------------------------------------------------------------------
# Permissions


def require_admin(session: Session, actor: str | None, action: str) -> None:
    """``actor`` must be an active admin; ``None`` is the command line (see the module doc).

    In single-user mode (no users) anyone may: there is nobody to ask.
    """
    if actor is None or not users_exist(session):
        return
    user = _find_user(session, check_name(actor, "actor"))
    if user is None or not user.active or user.role != "admin":
        raise PermissionDenied(f"{action}: only an active admin may do this, and {actor!r} is not one")


def check_event_permission(session: Session, labelling: LabellingSession, annotator: str, kind: str) -> None:
    """Refuse an answer event that ``annotator`` may not record (team mode only).

    Raises
    ------
    PermissionDenied
        Naming the annotator, the session and what would allow it.
    """
    if not users_exist(session):
        return
    user = _find_user(session, annotator)
    if user is None:
        raise PermissionDenied(
            f"annotator {annotator!r} is not a user of this store; once users exist every answer "
            "is given by a signed-in user (winnow user list)"
        )
    if not user.active:
        raise PermissionDenied(f"annotator {annotator!r} is disabled")
    if kind == "resolve":
        if user.role not in _RESOLVER_ROLES:
            raise PermissionDenied(
                f"annotator {annotator!r} has role {user.role!r}; only a reviewer or an admin resolves conflicts"
            )
        return
    if kind in _ANSWER_KINDS and not _is_assigned(session, labelling.id, user.id):
        raise PermissionDenied(
            f"annotator {annotator!r} is not assigned to session {labelling.name!r} "
            f"(winnow session assign {labelling.name} {annotator})"
        )


def _is_assigned(session: Session, session_id: int, user_id: int) -> bool:
    return session.get(SessionAssignment, (session_id, user_id)) is not None


def _audit(
    session: Session,
    kind: str,
    user_name: str,
    *,
    actor: str | None = None,
    session_id: int | None = None,
    detail: str | None = None,
    now: datetime | None = None,
) -> None:
    session.add(
        AuditEvent(
            kind=kind,
            user_name=user_name[:200],
            actor=actor,
            session_id=session_id,
            detail=detail,
            created_at=now or utcnow(),
        )
    )


def _check_password(password: Any) -> str:
    if not isinstance(password, str):
        raise TypeError(f"password must be a str, got {type(password).__name__}")
    if not PASSWORD_MIN <= len(password) <= PASSWORD_MAX:
        # The password itself is never quoted, not even in an error.
        raise InvalidRecord(
            f"password must be {PASSWORD_MIN} to {PASSWORD_MAX} characters long, got {len(password)}"
        )
    return password


def _active_admins(session: Session) -> int:
    return int(session.scalar(select(func.count(User.id)).where(User.role == "admin", User.active.is_(True))) or 0)


# --------------------------------------------------------------------------------------------
# Account changes (each flushed in a SAVEPOINT; the caller commits)


def add_user(
    session: Session, *, name: str, role: str, password: str | None, actor: str | None = None
) -> UserInfo:
    """Create an account; its annotator row (same name) is created too, or reused.

    Parameters
    ----------
    name : str
        Unique and immutable; past events of an annotator of that name become the user's.
    role : {"admin", "annotator", "reviewer"}
    password : str or None
        Hashed with argon2id; ``None`` for an account that signs in only through OIDC.
    actor : str or None
        The admin making the change; ``None`` for the command line.
    """
    name = check_name(name, "name")
    role = check_choice(role, "role", ROLES)
    hashed = _hasher.hash(_check_password(password)) if password is not None else None
    require_admin(session, actor, "user add")
    if _find_user(session, name) is not None:
        raise InvalidRecord(f"name: a user called {name!r} already exists")
    with session.begin_nested():
        get_or_create_annotator(session, name)
        user = User(name=name, role=role, active=True, password_hash=hashed, created_at=utcnow())
        session.add(user)
        _audit(session, "user_added", name, actor=actor, detail=f"role {role}")
        session.flush()
    log.info("user %r added with role %r by %s", name, role, actor or "the command line")
    return _info(session, user)


def set_role(session: Session, *, name: str, role: str, actor: str | None = None) -> UserInfo:
    """Change a user's role (the last active admin cannot stop being one)."""
    role = check_choice(role, "role", ROLES)
    require_admin(session, actor, "user role")
    user = _require_user(session, name)
    if user.role == role:
        return _info(session, user)
    if user.role == "admin" and user.active and _active_admins(session) <= 1:
        raise InvalidRecord(f"{user.name!r} is the last active admin; make another admin first")
    with session.begin_nested():
        _audit(session, "role_changed", user.name, actor=actor, detail=f"{user.role} -> {role}")
        user.role = role
        session.flush()
    log.info("user %r is now %r (by %s)", user.name, role, actor or "the command line")
    return _info(session, user)


def set_active(session: Session, *, name: str, active: bool, actor: str | None = None) -> UserInfo:
    """Disable (or enable again) an account. A disabled user cannot sign in or write."""
    require_admin(session, actor, "user disable" if not active else "user enable")
    user = _require_user(session, name)
    if bool(user.active) == bool(active):
        return _info(session, user)
    if not active and user.role == "admin" and _active_admins(session) <= 1:
        raise InvalidRecord(f"{user.name!r} is the last active admin; make another admin first")
    with session.begin_nested():
        _audit(session, "user_enabled" if active else "user_disabled", user.name, actor=actor)
        user.active = bool(active)
        # A disabled user's reservation is handed back at once.
        if not active:
            session.execute(delete(ItemLease).where(ItemLease.user_id == user.id))
        session.flush()
    log.info("user %r %s by %s", user.name, "enabled" if active else "disabled", actor or "the command line")
    return _info(session, user)


def set_password(session: Session, *, name: str, password: str, actor: str | None = None) -> None:
    """Set a user's password: an admin for anyone, a user for themself."""
    hashed = _hasher.hash(_check_password(password))
    user = _require_user(session, name)
    if actor != user.name:
        require_admin(session, actor, "user passwd")
    with session.begin_nested():
        _audit(session, "password_changed", user.name, actor=actor)
        user.password_hash = hashed
        session.flush()
    log.info("password of %r changed by %s", user.name, actor or "the command line")


def assign_users(
    session: Session, *, session_id: int, names: Sequence[str], actor: str | None = None
) -> list[str]:
    """Let ``names`` answer in a labelling session; returns the names newly assigned."""
    labelling = get_labelling_session(session, session_id)
    require_admin(session, actor, "session assign")
    if not names:
        raise InvalidRecord("names: give at least one user to assign")
    users = [_require_user(session, name, "user") for name in names]
    added: list[str] = []
    with session.begin_nested():
        for user in users:
            if _is_assigned(session, labelling.id, user.id) or user.name in added:
                continue
            session.add(SessionAssignment(session_id=labelling.id, user_id=user.id, created_at=utcnow()))
            _audit(session, "assigned", user.name, actor=actor, session_id=labelling.id, detail=labelling.name)
            added.append(user.name)
        session.flush()
    return added


def session_members(session: Session, session_id: int) -> list[UserInfo]:
    """The users assigned to a labelling session, in order of assignment."""
    labelling = get_labelling_session(session, session_id)
    users = session.scalars(
        select(User)
        .join(SessionAssignment, SessionAssignment.user_id == User.id)
        .where(SessionAssignment.session_id == labelling.id)
        .order_by(SessionAssignment.created_at, User.id)
    )
    return [_info(session, user) for user in users]


def set_overlap(session: Session, *, session_id: int, overlap: int, actor: str | None = None) -> None:
    """How many annotators must answer each item of a session (1 = split the work)."""
    overlap = check_int(overlap, "overlap")
    if overlap < 1:
        raise InvalidRecord(f"overlap must be >= 1, got {overlap}")
    labelling = get_labelling_session(session, session_id)
    require_admin(session, actor, "session overlap")
    with session.begin_nested():
        settings = session.get(SessionTeamSettings, labelling.id)
        if settings is None:
            session.add(SessionTeamSettings(session_id=labelling.id, overlap=overlap))
        else:
            settings.overlap = overlap
        _audit(session, "overlap_changed", actor or "(command line)", actor=actor, session_id=labelling.id,
               detail=f"overlap {overlap}")
        session.flush()


def session_overlap(session: Session, session_id: int) -> int:
    """The session's overlap (1 when it was never set)."""
    settings = session.get(SessionTeamSettings, check_int(session_id, "session_id"))
    return 1 if settings is None else int(settings.overlap)


# --------------------------------------------------------------------------------------------
# Sign-in


def _recent_failures(session: Session, name: str, now: datetime) -> int:
    return int(
        session.scalar(
            select(func.count(AuditEvent.id)).where(
                AuditEvent.user_name == name[:200],
                AuditEvent.kind == "sign_in_failed",
                AuditEvent.created_at > now - FAILED_SIGN_IN_WINDOW,
            )
        )
        or 0
    )


def sign_in(session: Session, *, name: str, password: str, now: datetime | None = None) -> SignInResult:
    """Check a name and password; record the attempt in the audit log either way.

    Refused (``user`` is ``None``) when the name is unknown, the password wrong, the account
    disabled or the name locked by :data:`MAX_FAILED_SIGN_INS` recent failures. The reason
    given is the same for an unknown name and a wrong password. The caller commits, also
    after a refusal, so that the failure counts.
    """
    if not isinstance(name, str) or not isinstance(password, str):
        raise TypeError("name and password must be str")
    now = now or utcnow()
    name = name.strip()
    refused = "wrong user name or password"
    if not name or "\x00" in name or len(name) > 200:
        return SignInResult(None, refused)
    if _recent_failures(session, name, now) >= MAX_FAILED_SIGN_INS:
        _audit(session, "sign_in_failed", name, detail="locked: too many failed sign-ins", now=now)
        session.flush()
        log.warning("sign-in refused for %r: too many failed attempts", name)
        minutes = int(FAILED_SIGN_IN_WINDOW.total_seconds() // 60)
        return SignInResult(None, f"too many failed sign-ins for this name; try again in {minutes} minutes")
    user = _find_user(session, name)
    ok = _verify(user.password_hash if user is not None and user.password_hash else _dummy_hash(), password)
    if user is None or user.password_hash is None or not ok:
        _audit(session, "sign_in_failed", name, detail="wrong user name or password", now=now)
        session.flush()
        log.warning("failed sign-in for %r", name)
        return SignInResult(None, refused)
    if not user.active:
        _audit(session, "sign_in_failed", name, detail="account disabled", now=now)
        session.flush()
        log.warning("sign-in refused for %r: account disabled", name)
        return SignInResult(None, "this account is disabled; ask an admin")
    if _hasher.check_needs_rehash(user.password_hash):  # parameters raised since it was set
        user.password_hash = _hasher.hash(password)
    _audit(session, "sign_in", name, detail="password", now=now)
    session.flush()
    log.info("user %r signed in", name)
    return SignInResult(_info(session, user))


def sign_in_external(session: Session, *, name: str, provider: str, now: datetime | None = None) -> SignInResult:
    """Sign in a user whom an identity provider (OIDC) has authenticated.

    The provider proves who the person is; the store still decides whether that name is an
    active account here, and records the sign-in.
    """
    now = now or utcnow()
    name = check_name(name, "name")
    user = _find_user(session, name)
    if user is None or not user.active:
        why = "no such account" if user is None else "account disabled"
        _audit(session, "sign_in_failed", name, detail=f"{provider}: {why}", now=now)
        session.flush()
        log.warning("%s sign-in refused for %r: %s", provider, name, why)
        return SignInResult(None, f"{name!r} has no active account here; ask an admin")
    _audit(session, "sign_in", name, detail=provider[:100], now=now)
    session.flush()
    log.info("user %r signed in through %s", name, provider)
    return SignInResult(_info(session, user))


def _verify(hashed: str, password: str) -> bool:
    try:
        return bool(_hasher.verify(hashed, password))
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


# --------------------------------------------------------------------------------------------
# Audit log


def audit_log(session: Session, *, session_id: int | None = None) -> list[dict[str, Any]]:
    """Audit events, oldest first: every sign-in and account change, plus (with
    ``session_id``) only those about that session or about no session.

    Keys: ``audit_id``, ``created_at``, ``kind``, ``user``, ``actor``, ``session_id``, ``detail``.
    """
    query = select(AuditEvent).order_by(AuditEvent.id)
    if session_id is not None:
        query = query.where((AuditEvent.session_id == session_id) | AuditEvent.session_id.is_(None))
    return [
        {
            "audit_id": e.id,
            "created_at": e.created_at,
            "kind": e.kind,
            "user": e.user_name,
            "actor": e.actor,
            "session_id": e.session_id,
            "detail": e.detail,
        }
        for e in session.scalars(query)
    ]
