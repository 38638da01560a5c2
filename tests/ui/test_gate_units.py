"""The sign-in gate's pieces that need no server: where a sign-in may return to, the upload
ledger, and an identity provider's cookie mapped to an account."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.service import create_user, disable_user
from app.store.db import open_store
from app.ui import gate
from app.ui.gate import GateSettings, SignInGate, safe_next


@given(st.text(max_size=60))
def test_a_sign_in_only_ever_returns_to_a_path_of_this_server(target):
    chosen = safe_next(target)
    assert chosen.startswith("/") and not chosen.startswith("//") and "\\" not in chosen
    assert not chosen.startswith("/_winnow/") and all(ord(c) >= 32 for c in chosen)
    assert chosen in (target, "/")


@pytest.mark.parametrize(
    "target",
    [
        "//evil.example/x",
        "/\\evil.example",
        "https://evil.example",
        "javascript:x",
        "/_winnow/sign-out",
        "/ok\r\nSet-Cookie: x=1",
        "",
    ],
)
def test_targets_elsewhere_go_home(target):
    assert safe_next(target) == "/"


def test_the_upload_ledger_refuses_past_the_hourly_quota_then_forgets_old_uploads():
    ledger = gate.UploadLedger(window_seconds=3600)
    assert ledger.take("ada", 600, limit=1000, now=0.0)
    assert not ledger.take("ada", 600, limit=1000, now=10.0)
    assert ledger.take("bob", 600, limit=1000, now=10.0)  # per user
    assert ledger.take("ada", 600, limit=1000, now=3601.0)  # the first upload left the window


def test_an_identity_providers_cookie_names_an_active_account(tmp_path, monkeypatch):
    from streamlit.auth_util import get_signing_secret
    from streamlit.web.server.starlette.starlette_app_utils import create_signed_value

    db = str(tmp_path / "w.db")
    Session = open_store(db)
    create_user(Session, "rev", role="reviewer", password="a long enough secret")
    monkeypatch.setattr(gate, "oidc_configured", lambda: True)
    guard = SignInGate(app=None, settings=GateSettings(db=db))  # type: ignore[arg-type]

    def cookie(claims: dict, secret: str | None = None) -> dict[str, str]:
        signed = create_signed_value(secret or get_signing_secret(), gate.STREAMLIT_USER_COOKIE, json.dumps(claims))
        return {gate.STREAMLIT_USER_COOKIE: signed.decode("latin-1")}

    assert guard.provider_account(cookie({"is_logged_in": True, "preferred_username": "rev"})).name == "rev"
    assert guard.provider_account(cookie({"is_logged_in": True, "email": "rev"})).role == "reviewer"
    assert guard.provider_account(cookie({"is_logged_in": False, "email": "rev"})) is None
    assert guard.provider_account(cookie({"is_logged_in": True, "email": "nobody"})) is None
    assert guard.provider_account(cookie({"is_logged_in": True, "email": "rev"}, secret="another secret")) is None
    assert guard.provider_account({gate.STREAMLIT_USER_COOKIE: "forged"}) is None
    disable_user(Session, "rev")
    assert guard.provider_account(cookie({"is_logged_in": True, "email": "rev"})) is None


def test_the_sign_in_limiter_counts_attempts_per_address_in_a_sliding_window():
    limiter = gate.SignInLimiter(window_seconds=60, max_addresses=2)
    assert [limiter.take("10.0.0.1", 2, now=t) for t in (0.0, 1.0)] == [0.0, 0.0]
    assert limiter.take("10.0.0.1", 2, now=2.0) == 58.0  # until the first attempt leaves the window
    assert limiter.take("10.0.0.2", 2, now=2.0) == 0.0  # per address
    assert limiter.take("10.0.0.1", 2, now=60.5) == 0.0
    assert limiter.take("10.0.0.3", 2, now=200.0) == 0.0 and set(limiter.entries) == {"10.0.0.3"}  # old ones forgotten


def test_sign_ins_past_the_limit_are_refused_without_a_password_check_or_an_audit_row(tmp_path, monkeypatch):
    import asyncio
    from urllib.parse import urlencode

    from starlette.requests import Request

    from app.store import audit_log

    db = str(tmp_path / "w.db")
    Session = open_store(db)
    create_user(Session, "ada", role="admin", password="a long enough secret")
    monkeypatch.setenv(gate.SIGN_INS_PER_MINUTE_VARIABLE, "3")
    checks: list[str] = []
    real_open_sign_in = gate.open_sign_in

    def counted(session_factory, name, password):
        checks.append(name)
        return real_open_sign_in(session_factory, name, password)

    monkeypatch.setattr(gate, "open_sign_in", counted)
    (route,) = [
        r for r in gate.sign_in_routes(GateSettings(db=db, require_sign_in=True)) if r.path == gate.SIGN_IN_PATH
    ]

    def post(name: str, client: str) -> int:
        body = urlencode({"csrf": "token", "name": name, "password": "guess", "next": "/"}).encode()
        scope = {
            "type": "http",
            "method": "POST",
            "path": gate.SIGN_IN_PATH,
            "query_string": b"",
            "headers": [
                (b"host", b"winnow.test"),
                (b"content-type", b"application/x-www-form-urlencoded"),
                (b"cookie", b"winnow_csrf=token"),
            ],
            "client": (client, 40000),
        }

        async def receive():
            return {"type": "http.request", "body": body, "more_body": False}

        return asyncio.run(route.endpoint(Request(scope, receive))).status_code

    def failures() -> int:
        with Session() as s:
            return sum(row["kind"] == "sign_in_failed" for row in audit_log(s, actor="ada"))

    assert [post(name, "10.0.0.9") for name in ("nobody", "ada", "nobody")] == [401, 401, 401]
    counted_failures = failures()
    assert [post(name, "10.0.0.9") for name in ("nobody", "ada")] == [429, 429]
    assert checks == ["nobody", "ada", "nobody"] and failures() == counted_failures
    assert post("nobody", "10.0.0.10") == 401  # another address is not held back
