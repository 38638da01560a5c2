"""The sign-in gate in front of Streamlit: identity from an HttpOnly cookie, never from a session id.

Streamlit resumes a browser tab's server-side session for any websocket that names its id, and
that id travels in upload URLs (``PUT /_stcore/upload_file/<session-id>/...``), so it ends up in
proxy logs and HAR files. winnow therefore never keeps "who is signed in" only in Streamlit's
session state. In team mode:

* ``GET/POST /_winnow/sign-in`` is a plain HTML form. A good name and password start a signed-in
  session in the store (:func:`app.service.auth.open_sign_in`) and the browser receives its
  random token in a cookie that is ``HttpOnly`` (page scripts cannot read it), ``SameSite=Lax``
  and ``Secure`` over HTTPS. The store keeps only the token's SHA-256.
* :class:`SignInGate`, an ASGI middleware that runs before Streamlit's own routes, looks the
  cookie up on every request and every websocket. It removes any :data:`IDENTITY_HEADER` a client
  sent and, when the cookie is valid, adds one carrying the signed-in session's handle (the
  token's hash). Streamlit copies that header into ``st.user`` (``server.trustedUserHeaders``)
  and refuses to resume a session for a connection whose ``st.user`` differs, so a client with
  a stolen session id and no cookie gets a new, signed-out session: the sign-in page.
  ``app/ui/Home.py`` checks the handle against the store on every run.
* Pages without a valid cookie are redirected to the sign-in form (which then returns to the
  page asked for); uploads need a signed-in admin within the upload quota; media files and
  ``/_stcore/metrics`` need a signed-in user; Streamlit's "clear cache" message is dropped
  unless the server runs with ``--dev``.
* Exports are never Streamlit media: ``/_winnow/download/<token>`` serves a download ticket
  (:mod:`app.ui.downloads`) only to the browser sign-in that drew its link, until it expires,
  and a ``/media/`` file Streamlit would serve as an attachment is refused to everyone.
* Sign-in attempts are rate-limited per client address (:class:`SignInLimiter`, in memory:
  no row is written for an attempt refused by it, and no password is hashed for it), so a flood
  of guesses, for known or unknown names alike, cannot take the server's CPU from real users.
  The address is the one the client connects from, or the one a proxy named in
  ``$WINNOW_TRUSTED_PROXIES`` forwards for (uvicorn reads ``X-Forwarded-For`` from those
  alone: ``winnow ui`` sets its ``FORWARDED_ALLOW_IPS``), so a client cannot name itself anew
  on every attempt.

In single-user mode (localhost, no accounts) the gate only strips the identity header and keeps
the cache clear off.
"""

from __future__ import annotations

import html
import json
import logging
import os
import secrets
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import quote, urlsplit

import streamlit as st
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route
from streamlit import config

from app.service.auth import (
    OIDC_NAME_CLAIMS,
    SignInRefused,
    UserInfo,
    account_signed_in,
    active_user,
    may_read_server_metrics,
    may_upload,
    open_sign_in,
    sign_in_handle,
    sign_in_required,
    sign_out,
)
from app.store import SIGN_IN_LIFETIME, PermissionDenied, open_store
from app.ui.downloads import DOWNLOAD_PREFIX, DOWNLOADS, DownloadOwner

__all__ = [
    "IDENTITY_HEADER",
    "IDENTITY_KEY",
    "SIGN_IN_COOKIE",
    "SIGN_IN_PATH",
    "SIGN_OUT_PATH",
    "UPLOAD_QUOTA_VARIABLE",
    "GateSettings",
    "SignInGate",
    "UploadLedger",
    "SignInLimiter",
    "SIGN_INS_PER_MINUTE_VARIABLE",
    "sign_in_routes",
    "safe_next",
    "oidc_configured",
]

log = logging.getLogger("winnow.auth")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The request header the gate sets (and strips from clients) for Streamlit's ``st.user``.
IDENTITY_HEADER = "X-Winnow-Sign-In"
#: The ``st.user`` key it lands under (``server.trustedUserHeaders``).
IDENTITY_KEY = "winnow_sign_in"
SIGN_IN_COOKIE = "winnow_sign_in"
CSRF_COOKIE = "winnow_csrf"
SIGN_IN_PATH = "/_winnow/sign-in"
SIGN_OUT_PATH = "/_winnow/sign-out"
#: Megabytes one user may upload per hour (default: 10 uploads of the largest size).
UPLOAD_QUOTA_VARIABLE = "WINNOW_UPLOAD_QUOTA_MB"
#: Sign-in attempts one client address may make per minute (default 20).
SIGN_INS_PER_MINUTE_VARIABLE = "WINNOW_SIGN_INS_PER_MINUTE"
#: Streamlit's cookie for an identity-provider (``st.login``) sign-in.
STREAMLIT_USER_COOKIE = "_streamlit_user"
#: The query of the app page that offers ``st.login`` to a visitor (identity provider configured).
OIDC_QUERY = "sign_in=provider"


def oidc_configured() -> bool:
    """True when ``.streamlit/secrets.toml`` has an ``[auth]`` section for ``st.login``."""
    try:
        return "auth" in st.secrets
    except FileNotFoundError:  # no secrets file at all (StreamlitSecretNotFoundError is one)
        return False


# Paths anyone may fetch: the front end's static files, health checks, this sign-in form and
# Streamlit's identity-provider routes. Everything else needs a signed-in user in team mode.
_PUBLIC_PREFIXES = ("/static/", "/_winnow/", "/auth/", "/component/")
_PUBLIC_PATHS = frozenset(
    {"/_stcore/health", "/_stcore/script-health-check", "/_stcore/host-config", "/favicon.png", "/oauth2callback"}
)
_UPLOAD_PREFIX = "/_stcore/upload_file/"
_STREAM_PATH = "/_stcore/stream"
_ADMIN_PATHS = frozenset({"/_stcore/metrics"})
_MEDIA_PREFIX = "/media/"
_NO_DOWNLOAD = "no such download (links work for the person who opened the page, for a while): reload the page"


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a path on this server, never another site.

    >>> safe_next("/progress?x=1"), safe_next("https://evil.example/"), safe_next("//evil.example")
    ('/progress?x=1', '/', '/')
    >>> safe_next("/_winnow/sign-in"), safe_next(None)
    ('/', '/')
    """
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or parts.path.startswith("/_winnow/") or any(ord(c) < 32 for c in target):
        return "/"
    return target


@dataclass
class GateSettings:
    """What the gate needs to know about the server it guards."""

    db: str
    require_sign_in: bool = False
    dev: bool = False
    max_upload_mb: int = 100
    upload_quota_mb: int | None = None

    @property
    def hourly_upload_bytes(self) -> int:
        quota = self.upload_quota_mb
        if quota is None:
            quota = int(os.environ.get(UPLOAD_QUOTA_VARIABLE, 0) or 10 * self.max_upload_mb)
        return quota * 1_000_000


@dataclass
class UploadLedger:
    """Bytes each user uploaded in the last hour (this process; a per-user brake, not billing)."""

    window_seconds: float = 3600.0
    entries: dict[str, deque[tuple[float, int]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, user: str, size: int, limit: int, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        with self.lock:
            spent = self.entries.setdefault(user, deque())
            while spent and spent[0][0] < now - self.window_seconds:
                spent.popleft()
            if sum(n for _, n in spent) + size > limit:
                return False
            spent.append((now, size))
            return True


@dataclass
class SignInLimiter:
    """Sign-in attempts per client address in the last ``window_seconds`` (this process).

    Held in memory, so refusing an attempt writes nothing and hashes no password; the table
    forgets addresses whose attempts all left the window once it holds ``max_addresses``.
    """

    window_seconds: float = 60.0
    max_addresses: int = 10_000
    entries: dict[str, deque[float]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, address: str, limit: int, now: float | None = None) -> float:
        """Count one attempt from ``address``; return 0 when allowed, else the seconds to wait."""
        now = time.monotonic() if now is None else now
        with self.lock:
            if len(self.entries) >= self.max_addresses:
                for key in [
                    k for k, times in self.entries.items() if not times or times[-1] < now - self.window_seconds
                ]:
                    del self.entries[key]
            times = self.entries.setdefault(address, deque())
            while times and times[0] < now - self.window_seconds:
                times.popleft()
            if len(times) >= limit:
                return max(times[0] + self.window_seconds - now, 1.0)
            times.append(now)
            return 0.0


def sign_ins_per_minute() -> int:
    """``$WINNOW_SIGN_INS_PER_MINUTE`` (a whole number >= 1), else 20."""
    text = os.environ.get(SIGN_INS_PER_MINUTE_VARIABLE, "").strip()
    return int(text) if text.isdigit() and int(text) >= 1 else 20


class SignInGate:
    """ASGI middleware: proves who is behind every request before Streamlit sees it."""

    def __init__(self, app: ASGIApp, settings: GateSettings) -> None:
        self.app = app
        self.settings = settings
        self.uploads = UploadLedger()
        self._team_mode = False

    @property
    def Session(self) -> Any:  # one engine per process: open_store caches it
        return open_store(self.settings.db)

    def team_mode(self) -> bool:
        """Team mode never ends once it began (accounts are disabled, never deleted), so only
        "not yet" is asked again, on every request: a cached "no" could let a request through
        in the moment after the first account is created."""
        if not self._team_mode:
            self._team_mode = self.settings.require_sign_in or sign_in_required(
                self.Session, config.get_option("server.address")
            )
        return self._team_mode

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        name = IDENTITY_HEADER.lower().encode("latin-1")
        scope["headers"] = [(k, v) for k, v in scope.get("headers", []) if k.lower() != name]
        path = _app_path(scope)
        if scope["type"] == "websocket" and path == _STREAM_PATH and not self.settings.dev:
            receive = _without_cache_clearing(receive)
        download = scope["type"] == "http" and path.startswith(DOWNLOAD_PREFIX)
        if path.startswith(_MEDIA_PREFIX):
            send = _without_attachments(send)
        if not download and scope["type"] == "http" and (path in _PUBLIC_PATHS or path.startswith(_PUBLIC_PREFIXES)):
            # The front end's files and the health checks: a page load fetches dozens, and none
            # needs to know who asks (no store query on this path).
            await self.app(scope, receive, send)
            return
        if not await run_in_threadpool(self.team_mode):
            if download:
                await self._download(scope, receive, send, DownloadOwner(None, None), team_mode=False)
            else:
                await self.app(scope, receive, send)
            return

        cookies = _cookies(scope)
        token = cookies.get(SIGN_IN_COOKIE)
        handle = sign_in_handle(token) if token else None
        user = await run_in_threadpool(account_signed_in, self.Session, handle) if handle else None
        if user is not None and handle is not None:
            scope["headers"].append((name, handle.encode("latin-1")))
        elif STREAMLIT_USER_COOKIE in cookies:
            # Signed in through an identity provider: Streamlit's own signed cookie. On the
            # websocket Streamlit checks it itself and Home.py maps it to an account.
            handle = None
            user = await run_in_threadpool(self.provider_account, cookies)

        if download:
            requester = DownloadOwner(user.name, handle) if user is not None else DownloadOwner(None, None)
            await self._download(scope, receive, send, requester, team_mode=True)
        elif scope["type"] == "websocket":
            # Without a cookie the tab gets a fresh, signed-out session: the sign-in page.
            await self.app(scope, receive, send)
        elif path.startswith(_UPLOAD_PREFIX):
            await self._upload(scope, receive, send, user)
        elif path in _ADMIN_PATHS and (
            user is None or not await run_in_threadpool(may_read_server_metrics, self.Session, user.name)
        ):
            await _refuse(scope, receive, send, 401 if user is None else 403, "sign in as an admin")
        elif user is not None:
            await self.app(scope, receive, send)
        elif path.startswith(("/_stcore/", _MEDIA_PREFIX, "/app/")) or scope.get("method") not in ("GET", "HEAD"):
            await _refuse(scope, receive, send, 401, "sign in first")
        elif path == "/" and scope.get("query_string") == OIDC_QUERY.encode() and oidc_configured():
            await self.app(scope, receive, send)  # the page whose button starts st.login
        else:
            target = path + (f"?{scope['query_string'].decode('latin-1')}" if scope.get("query_string") else "")
            response = RedirectResponse(SIGN_IN_PATH + "?next=" + quote(safe_next(target)), 303)
            await response(scope, receive, send)

    def provider_account(self, cookies: dict[str, str]) -> UserInfo | None:
        """The active account named by a valid ``st.login`` cookie (signed by Streamlit with
        the ``[auth]`` cookie secret), or ``None``."""
        if not oidc_configured():
            return None
        # Streamlit's own reading of its cookie (signature, age, chunks); pinned in constraints.txt.
        from streamlit.auth_util import get_cookie_with_chunks, get_signing_secret
        from streamlit.web.server.starlette.starlette_app_utils import decode_signed_value

        secret = get_signing_secret()

        def one(name: str) -> bytes | None:
            value = cookies.get(name)
            return None if value is None else decode_signed_value(secret, name, value.encode("latin-1"))

        try:
            claims = json.loads(get_cookie_with_chunks(one, STREAMLIT_USER_COOKIE) or b"{}")
        except (ValueError, UnicodeDecodeError):
            return None
        if not isinstance(claims, dict) or not claims.get("is_logged_in"):
            return None
        name = next((str(claims[c]) for c in OIDC_NAME_CLAIMS if claims.get(c)), None)
        return active_user(self.Session, name) if name else None

    async def _download(
        self, scope: Scope, receive: Receive, send: Send, requester: DownloadOwner, *, team_mode: bool
    ) -> None:
        """Serve a download ticket (:mod:`app.ui.downloads`) to its owner only, made now.

        Every refusal is the same 404 (an unknown, expired or someone else's ticket look
        alike); in team mode a client signed in as nobody owns nothing.
        """
        token = _app_path(scope)[len(DOWNLOAD_PREFIX) :]
        ticket = DOWNLOADS.redeem(token, requester) if token else None
        if scope.get("method") != "GET" or ticket is None or (team_mode and requester.user is None):
            await _refuse(scope, receive, send, 404, _NO_DOWNLOAD)
            return
        try:
            content = await run_in_threadpool(ticket.make)
        except PermissionDenied:
            await _refuse(scope, receive, send, 404, _NO_DOWNLOAD)
            return
        except Exception:  # noqa: BLE001 - the browser gets one line, the log the details
            log.exception("download %s for %r failed", ticket.file_name, requester.user)
            await _refuse(scope, receive, send, 500, "the export failed; see the server log")
            return
        response = Response(content, media_type=ticket.mime)
        response.headers["Content-Disposition"] = f'attachment; filename="{ticket.file_name}"'
        response.headers["X-Content-Type-Options"] = "nosniff"
        _no_store(response)
        await response(scope, receive, send)

    async def _upload(self, scope: Scope, receive: Receive, send: Send, user: UserInfo | None) -> None:
        """Uploads cost the server memory until the tab ends: signed-in admins only, within
        the size limit and the hourly quota."""
        if scope.get("method") == "DELETE" and user is not None:
            await self.app(scope, receive, send)
            return
        if user is None or not await run_in_threadpool(may_upload, self.Session, user.name):
            await _refuse(scope, receive, send, 403, "only a signed-in admin may upload files")
            return
        declared = _content_length(scope)
        limit = self.settings.max_upload_mb * 1_000_000 + 1_000_000  # the form's own envelope
        if declared is None or declared > limit:
            await _refuse(scope, receive, send, 413, "upload too large or of unknown size")
            return
        if not self.uploads.take(user.name, declared, self.settings.hourly_upload_bytes):
            log.warning("upload refused for %r: hourly upload quota spent", user.name)
            await _refuse(scope, receive, send, 429, "upload quota for this hour spent")
            return
        await self.app(scope, _at_most(receive, declared), send)


def _app_path(scope: Scope) -> str:
    """The request path below Streamlit's ``server.baseUrlPath``."""
    path: str = scope.get("path", "/") or "/"
    base = (config.get_option("server.baseUrlPath") or "").strip("/")
    if base and (path == f"/{base}" or path.startswith(f"/{base}/")):
        path = path[len(base) + 1 :] or "/"
    return path


def _cookies(scope: Scope) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    for key, value in scope.get("headers", []):
        if key.lower() == b"cookie":
            try:
                jar.load(value.decode("latin-1"))
            except Exception:  # noqa: BLE001 - a malformed cookie header proves nothing
                continue
    return {k: morsel.value for k, morsel in jar.items()}


def _content_length(scope: Scope) -> int | None:
    for key, value in scope.get("headers", []):
        if key.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _at_most(receive: Receive, limit: int) -> Receive:
    """A body reader that stops a client sending more than its Content-Length declared."""
    seen = 0

    async def bounded() -> Message:
        nonlocal seen
        message = await receive()
        if message.get("type") == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                return {"type": "http.disconnect"}
        return message

    return bounded


def _without_attachments(send: Send) -> Send:
    """Turn a media response Streamlit serves as an attachment (a ``st.download_button``'s
    file) into a 404: downloads go through owned, expiring tickets only (:mod:`app.ui.downloads`).
    Inline media (the items' images and audio) pass unchanged."""
    refused = False

    async def checked(message: Message) -> None:
        nonlocal refused
        if message.get("type") == "http.response.start":
            disposition = b"".join(v for k, v in message.get("headers", []) if k.lower() == b"content-disposition")
            if disposition.strip().lower().startswith(b"attachment"):
                refused = True
                body = _NO_DOWNLOAD.encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 404,
                        "headers": [
                            (b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body, "more_body": False})
                return
        if refused:
            return  # the attachment's body: never sent
        await send(message)

    return checked


def _without_cache_clearing(receive: Receive) -> Receive:
    """Drop Streamlit's ``clear_cache`` messages: any tab could empty every user's caches."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    async def filtered() -> Message:
        while True:
            message = await receive()
            data = message.get("bytes") if message.get("type") == "websocket.receive" else None
            if data:
                back = BackMsg()
                try:
                    back.ParseFromString(data)
                except Exception:  # noqa: BLE001 - Streamlit itself refuses a bad frame
                    return message
                if back.WhichOneof("type") == "clear_cache":
                    log.warning("dropped a clear_cache request from a browser tab")
                    continue
            return message

    return filtered


async def _refuse(scope: Scope, receive: Receive, send: Send, status: int, reason: str) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    await Response(reason, status_code=status, media_type="text/plain")(scope, receive, send)


# --------------------------------------------------------------------------- the sign-in form

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in to winnow</title>
<style>
body {{ font-family: system-ui, sans-serif; background: #f6f7f9; margin: 0; }}
main {{ max-width: 22rem; margin: 12vh auto; background: #fff; padding: 2rem; border-radius: .6rem;
       box-shadow: 0 1px 4px rgba(0,0,0,.12); }}
h1 {{ font-size: 1.4rem; margin-top: 0; }}
label {{ display: block; margin: 1rem 0 .3rem; }}
input[type=text], input[type=password] {{ width: 100%; box-sizing: border-box; padding: .5rem; font-size: 1rem; }}
button, .button {{ margin-top: 1.2rem; width: 100%; padding: .6rem; font-size: 1rem; background: #2f6fb2; color: #fff;
          border: 0; border-radius: .4rem; cursor: pointer; text-align: center; text-decoration: none; display: block;
          box-sizing: border-box; }}
.error {{ background: #fdecea; color: #8a1f11; padding: .6rem; border-radius: .4rem; }}
.note {{ background: #eef4fb; padding: .6rem; border-radius: .4rem; }}
</style></head>
<body><main>
<h1>Sign in to winnow</h1>
{message}
{form}
</main></body></html>
"""

_FORM = """<form method="post" action="{action}">
<input type="hidden" name="csrf" value="{csrf}"><input type="hidden" name="next" value="{next}">
<label for="name">User name</label>
<input id="name" name="name" type="text" autocomplete="username" maxlength="200" required autofocus value="{name}">
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" maxlength="1024" required>
<button type="submit">Sign in</button>
</form>{provider}"""


def _page(
    request: Request, *, next_path: str, message: str = "", level: str = "error", name: str = "", status: int = 200
) -> Response:
    csrf = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(24)
    shown = f'<p class="{level}" role="alert">{html.escape(message)}</p>' if message else ""
    form = _FORM.format(
        action=html.escape(SIGN_IN_PATH),
        csrf=html.escape(csrf),
        next=html.escape(next_path),
        name=html.escape(name),
        provider=(
            f'<a class="button" href="/?{OIDC_QUERY}">Sign in with your organisation\'s account</a>'
            if oidc_configured()
            else ""
        ),
    )
    response = HTMLResponse(_PAGE.format(message=shown, form=form), status_code=status)
    response.set_cookie(CSRF_COOKIE, csrf, httponly=True, samesite="strict", secure=_https(request), path="/_winnow/")
    _no_store(response)
    return response


def _https(request: Request) -> bool:
    return request.url.scheme in ("https", "wss")


def _no_store(response: Response) -> None:
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "same-origin"  # "no-referrer" makes a form post Origin: null


def _same_origin(request: Request) -> bool:
    """A form post from this server's own page (browsers send Origin on POST)."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    return urlsplit(origin).netloc == request.headers.get("host", "")


def sign_in_routes(settings: GateSettings) -> list[Route]:
    """The sign-in form and the sign-out endpoint, as Starlette routes for ``st.App``."""

    def team_mode() -> bool:
        return settings.require_sign_in or sign_in_required(
            open_store(settings.db), config.get_option("server.address")
        )

    limiter = SignInLimiter()

    async def sign_in_page(request: Request) -> Response:
        next_path = safe_next(request.query_params.get("next"))
        if not await run_in_threadpool(team_mode):
            return RedirectResponse(next_path, 303)
        if request.method == "GET":
            return _page(request, next_path=next_path)
        form = await request.form(max_files=0, max_fields=8, max_part_size=4096)
        next_path = safe_next(str(form.get("next") or "/"))
        name = str(form.get("name") or "")[:200]
        password = str(form.get("password") or "")[:1024]
        csrf_cookie = request.cookies.get(CSRF_COOKIE) or ""
        csrf_field = str(form.get("csrf") or "")
        if not _same_origin(request) or not csrf_cookie or not secrets.compare_digest(csrf_cookie, csrf_field):
            return _page(
                request, next_path=next_path, message="The form had expired; please sign in again.", status=400
            )
        wait = limiter.take(request.client.host if request.client else "unknown", sign_ins_per_minute())
        if wait:
            log.warning("sign-in attempts from %s refused: over %d a minute", request.client, sign_ins_per_minute())
            return _page(
                request,
                next_path=next_path,
                message=f"Too many sign-in attempts from this address; try again in {wait:.0f} seconds.",
                name=name,
                status=429,
            )
        try:
            user, token = await run_in_threadpool(open_sign_in, open_store(settings.db), name, password)
        except SignInRefused as exc:
            return _page(request, next_path=next_path, message=str(exc), name=name, status=401)
        response = RedirectResponse(next_path, 303)
        response.set_cookie(
            SIGN_IN_COOKIE,
            token,
            max_age=int(SIGN_IN_LIFETIME.total_seconds()),
            httponly=True,
            samesite="lax",
            secure=_https(request),
            path="/",
        )
        response.delete_cookie(CSRF_COOKIE, path="/_winnow/")
        _no_store(response)
        return response

    async def sign_out_endpoint(request: Request) -> Response:
        if _same_origin(request):
            token = request.cookies.get(SIGN_IN_COOKIE)
            if token:
                await run_in_threadpool(sign_out, open_store(settings.db), sign_in_handle(token))
        response = RedirectResponse(SIGN_IN_PATH, 303)
        response.delete_cookie(SIGN_IN_COOKIE, path="/")
        _no_store(response)
        return response

    return [
        Route(SIGN_IN_PATH, sign_in_page, methods=["GET", "POST"]),
        Route(SIGN_OUT_PATH, sign_out_endpoint, methods=["POST"]),
    ]
