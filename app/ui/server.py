"""The ASGI app ``winnow ui`` serves: Streamlit's ``st.App`` with winnow's sign-in gate in front.

``streamlit run app/ui/server.py -- --db FILE [--require-sign-in] [--dev] [--max-upload-mb N]``
finds :data:`app` below and serves it with uvicorn; the pages are ``app/ui/Home.py``'s. The
gate (:mod:`app.ui.gate`) proves who is behind every request before Streamlit sees it. The
options that make the app safe to share are set here, in code, so they hold wherever the server
is started from (a ``.streamlit/config.toml`` in the working directory cannot turn them off).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import streamlit as st
from starlette.middleware import Middleware
from streamlit import config

from app.ui.gate import IDENTITY_HEADER, IDENTITY_KEY, GateSettings, SignInGate, sign_in_routes

HOME = Path(__file__).resolve().parent / "Home.py"

#: Streamlit options winnow always runs with; ``--dev`` relaxes the ones marked.
SERVER_OPTIONS: dict[str, object] = {
    "server.trustedUserHeaders": {IDENTITY_HEADER: IDENTITY_KEY},
    "server.enableXsrfProtection": True,
    "server.enableCORS": True,
    "server.runOnSave": False,
    "server.fileWatcherType": "none",
    "server.headless": True,
    "global.developmentMode": False,
    "client.toolbarMode": "viewer",  # no developer menu, no "Clear cache", no Deploy button
    "client.showErrorDetails": "none",
    "browser.gatherUsageStats": False,
    "theme.primaryColor": "#2f6fb2",
    "theme.base": "light",
}
DEV_OPTIONS: dict[str, object] = {"client.toolbarMode": "developer", "client.showErrorDetails": "full"}


def gate_settings(argv: list[str]) -> GateSettings:
    """The gate's settings from the script arguments (after ``--`` on the command line)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--db", default="winnow.db")
    parser.add_argument("--require-sign-in", action="store_true")
    parser.add_argument("--dev", action="store_true")
    parser.add_argument("--max-upload-mb", type=int, default=100)
    known, _ = parser.parse_known_args([a for a in argv if a != "--"])
    return GateSettings(db=known.db, require_sign_in=known.require_sign_in, dev=known.dev,
                        max_upload_mb=known.max_upload_mb)


def apply_server_options(dev: bool) -> None:
    for name, value in {**SERVER_OPTIONS, **(DEV_OPTIONS if dev else {})}.items():
        config.set_option(name, value)


settings = gate_settings(sys.argv[1:])
apply_server_options(settings.dev)
app = st.App(HOME, routes=sign_in_routes(settings), middleware=[Middleware(SignInGate, settings=settings)])
