"""User accounts, roles, session assignments, sign-in and the audit log.

A store with no user is in *single-user mode*: everything is allowed, as before accounts
existed. As soon as one user exists the store is in *team mode* and every read and write of
a protected resource asks its policy (:mod:`app.store.policies`, the single home of the role
rules), here in the store so that the command line and the browser app cannot disagree:
account changes and the list of accounts need an active ``admin`` (a user may change their
own password); assignments and a session's overlap are session settings (admins); the audit
log is read by admins only. ``actor=None`` stands for the command line: whoever runs it holds
the database itself (its file or its credentials), which is more than any role grants, so it
is the way to create the first admin.

Passwords are hashed with argon2id (:mod:`argon2`, the ``argon2-cffi`` package) and never
stored, returned or logged in clear. Failed sign-ins are recorded in ``audit_events``, and a
name is refused without looking at the password while it has :data:`MAX_FAILED_SIGN_INS` or more
failed attempts (refused ones included) within the last :data:`FAILED_SIGN_IN_WINDOW`: the count
lives in the database, so it holds across processes and machines. A typed name that is no
account is never stored or logged (it may be a password typed in the wrong field): its
failures are recorded and counted under :func:`unknown_name_tag`, a short keyed hash of it.
"""

from __future__ import annotations

import functools
import hmac
import logging
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.store.checks import check_choice, check_int, check_name
from app.store.errors import InvalidRecord, PermissionDenied, RecordNotFound
from app.store.models import (
    ROLES,
    SIGN_IN_KINDS,
    AuditEvent,
    ItemLease,
    LabellingSession,
    SessionAssignment,
    SessionTeamSettings,
    StoreSecret,
    User,
    utcnow,
)
from app.store.policies import authorize_accounts, authorize_audit, authorize_session, check_event_permission
from app.store.records import find_user, get_labelling_session, get_or_create_annotator, is_assigned, users_exist

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
    "unknown_name_tag",
    "check_event_permission",
    "audit_log",
    "record_audit",
]

#: Failed sign-ins of one name within :data:`FAILED_SIGN_IN_WINDOW` after which it is locked.
MAX_FAILED_SIGN_INS = 5
#: How far back failed sign-ins count.
FAILED_SIGN_IN_WINDOW = timedelta(minutes=15)
#: Shortest and longest accepted password (argon2 takes any length; a cap bounds the work).
PASSWORD_MIN = 8
PASSWORD_MAX = 1024

#: Hex digits of :func:`unknown_name_tag`: few enough that the tag cannot confirm a guess of
#: what was typed (a password typed as the name matches one in 65536 candidates), enough to
#: count one name's failures (unknown names that share a tag share a lockout, and an unknown
#: name can never sign in anyway).
UNKNOWN_NAME_DIGITS = 4
#: The ``store_secrets`` row holding the key of :func:`unknown_name_tag`.
_SIGN_IN_KEY = "sign_in_names"

log = logging.getLogger("winnow.auth")
_hasher = PasswordHasher()  # argon2id with the library's current recommended parameters


@functools.cache
def _dummy_hash() -> str:
    """Verified against when the name is unknown, so a sign-in takes as long for a missing name
    as for a wrong password (the time would otherwise tell which names exist). Made on first
    use: hashing costs a third of a second, which every command would otherwise pay at start."""
    return _hasher.hash("winnow: no such user")


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


def _require_user(session: Session, name: Any, parameter: str = "name") -> User:
    name = check_name(name, parameter)
    user = find_user(session, name)
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


def list_users(session: Session, *, actor: str | None = None) -> list[UserInfo]:
    """Every account, oldest first (``actor``: an active admin; ``None``: the command line)."""
    authorize_accounts(session, actor, "list")
    return [_info(session, user) for user in session.scalars(select(User).order_by(User.id))]


# --------------------------------------------------------------------------------------------
# Audit rows (who may read them: app.store.policies.audit)


def record_audit(
    session: Session,
    kind: str,
    user_name: str,
    *,
    actor: str | None = None,
    session_id: int | None = None,
    detail: str | None = None,
    now: datetime | None = None,
) -> None:
    """Add one row to the audit log (flushed with the caller's next flush).

    ``user_name`` is the account or the session concerned (cut to 200 characters), ``detail``
    what changed (cut to 500); ``actor`` who did it (``None``: the command line).
    """
    if detail is not None and len(detail) > 500:
        detail = detail[:497] + "..."
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
        raise InvalidRecord(f"password must be {PASSWORD_MIN} to {PASSWORD_MAX} characters long, got {len(password)}")
    return password


def _active_admins(session: Session) -> int:
    return int(session.scalar(select(func.count(User.id)).where(User.role == "admin", User.active.is_(True))) or 0)


# --------------------------------------------------------------------------------------------
# Account changes (each flushed in a SAVEPOINT; the caller commits)


def add_user(session: Session, *, name: str, role: str, password: str | None, actor: str | None = None) -> UserInfo:
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
    authorize_accounts(session, actor, "add")
    if find_user(session, name) is not None:
        raise InvalidRecord(f"name: a user called {name!r} already exists")
    with session.begin_nested():
        get_or_create_annotator(session, name)
        user = User(name=name, role=role, active=True, password_hash=hashed, created_at=utcnow())
        session.add(user)
        record_audit(session, "user_added", name, actor=actor, detail=f"role {role}")
        session.flush()
    log.info("user %r added with role %r by %s", name, role, actor or "the command line")
    return _info(session, user)


def set_role(session: Session, *, name: str, role: str, actor: str | None = None) -> UserInfo:
    """Change a user's role (the last active admin cannot stop being one)."""
    role = check_choice(role, "role", ROLES)
    authorize_accounts(session, actor, "role", target=name)
    user = _require_user(session, name)
    if user.role == role:
        return _info(session, user)
    if user.role == "admin" and user.active and _active_admins(session) <= 1:
        raise InvalidRecord(f"{user.name!r} is the last active admin; make another admin first")
    with session.begin_nested():
        record_audit(session, "role_changed", user.name, actor=actor, detail=f"{user.role} -> {role}")
        user.role = role
        session.flush()
    log.info("user %r is now %r (by %s)", user.name, role, actor or "the command line")
    return _info(session, user)


def set_active(session: Session, *, name: str, active: bool, actor: str | None = None) -> UserInfo:
    """Disable (or enable again) an account. A disabled user cannot sign in or write."""
    authorize_accounts(session, actor, "enable" if active else "disable", target=name)
    user = _require_user(session, name)
    if bool(user.active) == bool(active):
        return _info(session, user)
    if not active and user.role == "admin" and _active_admins(session) <= 1:
        raise InvalidRecord(f"{user.name!r} is the last active admin; make another admin first")
    with session.begin_nested():
        record_audit(session, "user_enabled" if active else "user_disabled", user.name, actor=actor)
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
    authorize_accounts(session, actor, "password", target=user.name, what="user passwd")
    with session.begin_nested():
        record_audit(session, "password_changed", user.name, actor=actor)
        user.password_hash = hashed
        session.flush()
    log.info("password of %r changed by %s", user.name, actor or "the command line")


def assign_users(session: Session, *, session_id: int, names: Sequence[str], actor: str | None = None) -> list[str]:
    """Let ``names`` answer in a labelling session; returns the names newly assigned."""
    labelling = get_labelling_session(session, session_id)
    authorize_session(session, actor, "change_settings", labelling, what="session assign")
    if not names:
        raise InvalidRecord("names: give at least one user to assign")
    users = [_require_user(session, name, "user") for name in names]
    added: list[str] = []
    with session.begin_nested():
        for user in users:
            if is_assigned(session, labelling.id, user.id) or user.name in added:
                continue
            session.add(SessionAssignment(session_id=labelling.id, user_id=user.id, created_at=utcnow()))
            record_audit(session, "assigned", user.name, actor=actor, session_id=labelling.id, detail=labelling.name)
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
    authorize_session(session, actor, "change_settings", labelling, what="session overlap")
    with session.begin_nested():
        settings = session.get(SessionTeamSettings, labelling.id)
        if settings is None:
            session.add(SessionTeamSettings(session_id=labelling.id, overlap=overlap))
        else:
            settings.overlap = overlap
        record_audit(
            session,
            "overlap_changed",
            actor or "(command line)",
            actor=actor,
            session_id=labelling.id,
            detail=f"overlap {overlap}",
        )
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
    given is the same for an unknown name and a wrong password, and an unknown name is
    checked against a dummy hash, so that it takes as long. A name that is no account is
    recorded, counted and logged only as its :func:`unknown_name_tag` (it may be a password
    typed in the wrong field). The caller commits, also after a refusal, so that the failure
    counts.
    """
    if not isinstance(name, str) or not isinstance(password, str):
        raise TypeError("name and password must be str")
    now = now or utcnow()
    name = name.strip()
    refused = "wrong user name or password"
    if not name or "\x00" in name or len(name) > 200:
        return SignInResult(None, refused)
    user = find_user(session, name)
    # What the attempt is recorded and counted under: the account's name, or for a name that
    # is no account (a typo, or a password typed in the wrong field) only a keyed hash of it.
    shown = name if user is not None else unknown_name_tag(session, name)
    if _recent_failures(session, shown, now) >= MAX_FAILED_SIGN_INS:
        record_audit(session, "sign_in_failed", shown, detail="locked: too many failed sign-ins", now=now)
        session.flush()
        log.warning("sign-in refused for %r: too many failed attempts", shown)
        minutes = int(FAILED_SIGN_IN_WINDOW.total_seconds() // 60)
        return SignInResult(None, f"too many failed sign-ins for this name; try again in {minutes} minutes")
    # An unknown name is checked against a dummy hash: the reply takes as long as a wrong password.
    ok = _verify(user.password_hash if user is not None and user.password_hash else _dummy_hash(), password)
    if user is None or user.password_hash is None or not ok:
        record_audit(session, "sign_in_failed", shown, detail="wrong user name or password", now=now)
        session.flush()
        log.warning("failed sign-in for %r", shown)
        return SignInResult(None, refused)
    if not user.active:
        record_audit(session, "sign_in_failed", name, detail="account disabled", now=now)
        session.flush()
        log.warning("sign-in refused for %r: account disabled", name)
        return SignInResult(None, "this account is disabled; ask an admin")
    if _hasher.check_needs_rehash(user.password_hash):  # parameters raised since it was set
        user.password_hash = _hasher.hash(password)
    record_audit(session, "sign_in", name, detail="password", now=now)
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
    user = find_user(session, name)
    if user is None or not user.active:
        why = "no such account" if user is None else "account disabled"
        record_audit(session, "sign_in_failed", name, detail=f"{provider}: {why}", now=now)
        session.flush()
        log.warning("%s sign-in refused for %r: %s", provider, name, why)
        return SignInResult(None, f"{name!r} has no active account here; ask an admin")
    record_audit(session, "sign_in", name, detail=provider[:100], now=now)
    session.flush()
    log.info("user %r signed in through %s", name, provider)
    return SignInResult(_info(session, user))


def unknown_name_tag(session: Session, name: str) -> str:
    """What a failed sign-in with ``name``, which is no account, is recorded and counted under.

    ``"(unknown name #3fa9)"``: :data:`UNKNOWN_NAME_DIGITS` hex digits of an HMAC-SHA256 of the
    name under the store's own random key (made on first use, kept in ``store_secrets``), so
    the same unknown name is counted by the rate limit across processes while neither the
    name nor a usable hash of it is ever stored or logged. The parentheses keep it apart from
    account names in the audit log.
    """
    digest = hmac.new(_sign_in_key(session), name.encode("utf-8"), "sha256").hexdigest()
    return f"(unknown name #{digest[:UNKNOWN_NAME_DIGITS]})"


def _sign_in_key(session: Session) -> bytes:
    """The store's key of :func:`unknown_name_tag`, created (flushed) on first use."""
    found = session.get(StoreSecret, _SIGN_IN_KEY)
    if found is not None:
        return bytes(found.value)
    try:
        with session.begin_nested():
            session.add(StoreSecret(name=_SIGN_IN_KEY, value=secrets.token_bytes(32)))
            session.flush()
    except IntegrityError:  # another process made it between our read and our insert
        pass
    made = session.get(StoreSecret, _SIGN_IN_KEY, populate_existing=True)
    if made is None:  # pragma: no cover - the insert or the other process's row is there
        raise InvalidRecord("the store could not keep its sign-in key")
    return bytes(made.value)


def _verify(hashed: str, password: str) -> bool:
    try:
        return bool(_hasher.verify(hashed, password))
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


# --------------------------------------------------------------------------------------------
# Audit log


def audit_log(session: Session, *, actor: str | None = None, session_id: int | None = None) -> list[dict[str, Any]]:
    """Audit events, oldest first: every sign-in and every change to an account, an
    assignment or a session's settings; with ``session_id``, only the changes about that
    session (never a sign-in: those are about no session).

    ``actor`` must be an active admin (:func:`app.store.policies.authorize_audit`; ``None``
    is the command line).

    Keys: ``audit_id``, ``created_at``, ``kind``, ``user``, ``actor``, ``session_id``, ``detail``.
    """
    authorize_audit(session, actor)
    query = select(AuditEvent).order_by(AuditEvent.id)
    if session_id is not None:
        labelling = get_labelling_session(session, session_id)
        query = query.where(AuditEvent.session_id == labelling.id, AuditEvent.kind.not_in(SIGN_IN_KINDS))
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
