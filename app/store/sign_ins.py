"""Signed-in browser sessions (team mode): who a browser is, proven by a cookie it holds.

A successful sign-in starts a :class:`~app.store.models.SignInSession`: a random token goes to
the browser in an ``HttpOnly`` cookie (set by :mod:`app.ui.gate`), and the store keeps only the
token's SHA-256. Every request of that browser carries the cookie; :func:`signed_in_user` turns
its hash back into the account while the session is valid (not expired, not ended, its user
active). Nothing here trusts a Streamlit session id, which travels in upload URLs.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, select, update
from sqlalchemy.orm import Session

from app.store.errors import RecordNotFound
from app.store.models import SignInSession, User, utcnow
from app.store.users import UserInfo, get_user

__all__ = [
    "SIGN_IN_LIFETIME",
    "token_hash",
    "start_sign_in_session",
    "signed_in_user",
    "end_sign_in_session",
]

#: How long a sign-in lasts without signing in again (a working day and a half).
SIGN_IN_LIFETIME = timedelta(hours=36)


def token_hash(token: str) -> str:
    """The SHA-256 (hex) under which a cookie's token is stored; a token is never stored.

    >>> len(token_hash("abc")), token_hash("abc") == token_hash("abc")
    (64, True)
    """
    if not isinstance(token, str):
        raise TypeError(f"token must be str, not {type(token).__name__}")
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def start_sign_in_session(
    session: Session, *, user_name: str, lifetime: timedelta = SIGN_IN_LIFETIME, now: datetime | None = None
) -> str:
    """Start a signed-in session for an account that has just proven who it is; return the
    token for the browser's cookie (32 random bytes, URL-safe). The caller commits."""
    user = session.scalars(select(User).where(User.name == user_name)).one_or_none()
    if user is None or not user.active:
        raise RecordNotFound(f"no active account {user_name!r}")
    now = now or utcnow()
    token = secrets.token_urlsafe(32)
    session.add(SignInSession(token_hash=token_hash(token), user_id=user.id, created_at=now, expires_at=now + lifetime))
    session.flush()
    return token


def signed_in_user(session: Session, handle: str | None, *, now: datetime | None = None) -> UserInfo | None:
    """The account a signed-in session belongs to, or ``None`` when ``handle`` (a token's
    :func:`token_hash`) names no session that is still valid: unknown, expired, ended, or its
    user disabled."""
    if not handle or not isinstance(handle, str) or len(handle) != 64:
        return None
    now = now or utcnow()
    row = session.execute(
        select(User.name, User.active)
        .join(SignInSession, SignInSession.user_id == User.id)
        .where(SignInSession.token_hash == handle, SignInSession.ended_at.is_(None), SignInSession.expires_at > now)
    ).one_or_none()
    if row is None or not row.active:
        return None
    return get_user(session, row.name)


def end_sign_in_session(session: Session, handle: str | None, *, now: datetime | None = None) -> bool:
    """Sign a browser out: its cookie no longer proves anything. Returns whether a valid
    session was ended. The caller commits."""
    if not handle or not isinstance(handle, str):
        return False
    result = session.execute(
        update(SignInSession)
        .where(SignInSession.token_hash == handle, SignInSession.ended_at.is_(None))
        .values(ended_at=now or utcnow())
    )
    return bool(cast(CursorResult[Any], result).rowcount)  # an UPDATE's result is a cursor result
