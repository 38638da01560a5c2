"""Accounts and sign-in for the CLI and the browser app (team mode).

Which mode the app runs in (:func:`sign_in_required`): *single-user* when the server listens
only on this machine (:data:`LOCAL_ADDRESSES`) and the store has no user, exactly as before
accounts existed; *team mode*, with a sign-in page and the signed-in user as the annotator,
as soon as one user exists or the server is reachable from other machines. Every check of who
may write what is made by the store (:mod:`app.store.users`), not here.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from app.store import (
    UserInfo,
    add_user,
    assign_users,
    authorize_audit,
    authorize_upload,
    end_sign_in_session,
    get_session_by_name,
    get_user,
    list_users,
    set_active,
    set_overlap,
    set_password,
    set_role,
    sign_in,
    sign_in_external,
    signed_in_user,
    start_sign_in_session,
    token_hash,
    users_exist,
    write_transaction,
)
from engine.exceptions import InvalidInput

__all__ = [
    "LOCAL_ADDRESSES",
    "OIDC_NAME_CLAIMS",
    "TRUSTED_PROXIES_VARIABLE",
    "FORWARDED_ALLOW_VARIABLE",
    "trusted_proxies",
    "SignInRefused",
    "is_local_address",
    "sign_in_required",
    "has_users",
    "sign_in_with_identity",
    "open_sign_in",
    "account_signed_in",
    "sign_out",
    "sign_in_handle",
    "may_upload",
    "may_read_server_metrics",
    "active_user",
    "create_user",
    "users",
    "change_role",
    "disable_user",
    "change_password",
    "assign",
    "set_session_overlap",
]

#: Server addresses that only this machine can reach.
LOCAL_ADDRESSES: tuple[str, ...] = ("localhost", "127.0.0.1", "::1")
#: The reverse proxies whose ``X-Forwarded-For`` and ``X-Forwarded-Proto`` the server believes:
#: addresses or networks, comma-separated (``127.0.0.1`` for nginx on the same machine). Unset:
#: none, so every client is known by the address it connects from.
TRUSTED_PROXIES_VARIABLE = "WINNOW_TRUSTED_PROXIES"
#: uvicorn's own setting of the same (default: 127.0.0.1 and ::1, which let any local client
#: name itself anew on every sign-in attempt); ``winnow ui`` sets it from the one above.
FORWARDED_ALLOW_VARIABLE = "FORWARDED_ALLOW_IPS"
#: Claims of an OIDC identity that name the winnow user, in order of preference.
OIDC_NAME_CLAIMS: tuple[str, ...] = ("preferred_username", "email")


class SignInRefused(InvalidInput):
    """A sign-in that did not succeed; the message is safe to show (it never says whether
    the name exists)."""


def is_local_address(address: str | None) -> bool:
    """True when a server bound to ``address`` is reachable only from this machine.

    ``None`` or ``""`` (Streamlit's default) binds every interface, so it is not local.

    >>> is_local_address("localhost"), is_local_address("0.0.0.0"), is_local_address(None)
    (True, False, False)
    """
    return (address or "").strip().strip("[]").lower() in LOCAL_ADDRESSES


def trusted_proxies(environ: Mapping[str, str] | None = None) -> str:
    """``$WINNOW_TRUSTED_PROXIES`` checked, as uvicorn's ``FORWARDED_ALLOW_IPS`` value (``""``: none).

    >>> trusted_proxies({"WINNOW_TRUSTED_PROXIES": " 127.0.0.1, 10.0.0.0/8 "})
    '127.0.0.1,10.0.0.0/8'
    >>> trusted_proxies({})
    ''

    Raises
    ------
    InvalidInput
        An entry that is neither an IP address nor a network (``*`` included: trusting every
        client's word is what the setting exists to avoid).
    """
    text = (os.environ if environ is None else environ).get(TRUSTED_PROXIES_VARIABLE, "")
    entries = [entry.strip() for entry in text.split(",") if entry.strip()]
    for entry in entries:
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise InvalidInput(
                f"${TRUSTED_PROXIES_VARIABLE} lists {entry!r}, which is not an IP address or network "
                "(give the reverse proxy's address, e.g. 127.0.0.1)"
            ) from None
    return ",".join(entries)


def has_users(session_factory: sessionmaker[Session]) -> bool:
    """True once the store has any account."""
    with session_factory() as s:
        return users_exist(s)


def sign_in_required(session_factory: sessionmaker[Session], address: str | None) -> bool:
    """Team mode: the store has users, or the server listens beyond this machine."""
    return not is_local_address(address) or has_users(session_factory)


def sign_in_with_identity(
    session_factory: sessionmaker[Session], claims: Mapping[str, Any], provider: str = "oidc"
) -> UserInfo:
    """Sign in a person an OIDC provider authenticated (``st.user``'s claims).

    The winnow user is the first of :data:`OIDC_NAME_CLAIMS` the identity carries; it must be
    an active account of the store (created with ``winnow user add NAME --role ...``).
    """
    name = next((str(claims[c]) for c in OIDC_NAME_CLAIMS if claims.get(c)), None)
    if name is None:
        raise SignInRefused(f"the identity provider sent none of the claims {list(OIDC_NAME_CLAIMS)}")
    result = write_transaction(session_factory, lambda s: sign_in_external(s, name=name, provider=provider))
    if result.user is None:
        raise SignInRefused(result.reason or "sign-in refused")
    return result.user


def open_sign_in(session_factory: sessionmaker[Session], name: str, password: str) -> tuple[UserInfo, str]:
    """Check a name and password and start a signed-in session: the account and the token
    for the browser's ``HttpOnly`` cookie. One transaction: the attempt is audited either way.

    Raises
    ------
    SignInRefused
        Wrong name or password, disabled account, or too many recent failures.
    """

    def work(s: Session) -> tuple[UserInfo | None, str]:
        result = sign_in(s, name=name, password=password)
        if result.user is None:
            return None, result.reason or "sign-in refused"
        return result.user, start_sign_in_session(s, user_name=result.user.name)

    user, token_or_reason = write_transaction(session_factory, work)
    if user is None:
        raise SignInRefused(token_or_reason)
    return user, token_or_reason


def sign_in_handle(token: str) -> str:
    """What the app is told of a cookie's token: its hash, the key of its signed-in session."""
    return token_hash(token)


def account_signed_in(session_factory: sessionmaker[Session], handle: str | None) -> UserInfo | None:
    """The active account behind a signed-in session's handle (:func:`sign_in_handle`), or
    ``None`` when it is unknown, expired, signed out or its user disabled. Checked on every
    request and every page run."""
    if not handle:
        return None
    with session_factory() as s:
        return signed_in_user(s, handle)


def sign_out(session_factory: sessionmaker[Session], handle: str | None) -> bool:
    """End a signed-in session: the browser's cookie proves nothing any more."""
    return write_transaction(session_factory, lambda s: end_sign_in_session(s, handle))


def may_upload(session_factory: sessionmaker[Session], user_name: str) -> bool:
    """Whether the upload policy lets this signed-in user send files (the sign-in gate asks
    before a byte of the upload is read)."""
    with session_factory() as s:
        try:
            authorize_upload(s, user_name)
        except InvalidInput:
            return False
    return True


def may_read_server_metrics(session_factory: sessionmaker[Session], user_name: str) -> bool:
    """Whether this signed-in user may read the server's metrics: those who may read the audit log."""
    with session_factory() as s:
        try:
            authorize_audit(s, user_name, what="server metrics")
        except InvalidInput:
            return False
    return True


def active_user(session_factory: sessionmaker[Session], name: str) -> UserInfo | None:
    """The account ``name`` if it still exists and is active (checked on every page run, so a
    disabled user is signed out at their next click)."""
    with session_factory() as s:
        try:
            user = get_user(s, name)
        except InvalidInput:
            return None
    return user if user.active else None


def create_user(
    session_factory: sessionmaker[Session], name: str, *, role: str, password: str | None, actor: str | None = None
) -> UserInfo:
    """``winnow user add``: a new account (``actor=None``: the command line)."""
    return write_transaction(
        session_factory, lambda s: add_user(s, name=name, role=role, password=password, actor=actor)
    )


def users(session_factory: sessionmaker[Session]) -> list[UserInfo]:
    """Every account, oldest first."""
    with session_factory() as s:
        return list_users(s)


def change_role(session_factory: sessionmaker[Session], name: str, role: str, *, actor: str | None = None) -> UserInfo:
    return write_transaction(session_factory, lambda s: set_role(s, name=name, role=role, actor=actor))


def disable_user(session_factory: sessionmaker[Session], name: str, *, actor: str | None = None) -> UserInfo:
    return write_transaction(session_factory, lambda s: set_active(s, name=name, active=False, actor=actor))


def change_password(
    session_factory: sessionmaker[Session], name: str, password: str, *, actor: str | None = None
) -> None:
    write_transaction(session_factory, lambda s: set_password(s, name=name, password=password, actor=actor))


def assign(
    session_factory: sessionmaker[Session], session_name: str, names: Sequence[str], *, actor: str | None = None
) -> list[str]:
    """``winnow session assign``: returns the names newly assigned."""

    def work(s: Session) -> list[str]:
        return assign_users(s, session_id=get_session_by_name(s, session_name).id, names=list(names), actor=actor)

    return write_transaction(session_factory, work)


def set_session_overlap(
    session_factory: sessionmaker[Session], session_name: str, overlap: int, *, actor: str | None = None
) -> None:
    """How many annotators must answer each item of a session."""

    def work(s: Session) -> None:
        set_overlap(s, session_id=get_session_by_name(s, session_name).id, overlap=overlap, actor=actor)

    write_transaction(session_factory, work)
