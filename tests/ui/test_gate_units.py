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
