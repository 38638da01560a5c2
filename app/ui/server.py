"""The ASGI app ``winnow ui`` serves: Streamlit's ``st.App`` with winnow's sign-in gate in front.

``streamlit run app/ui/server.py -- --db FILE [--require-sign-in] [--dev] [--max-upload-mb N]``
finds :data:`app` below and serves it with uvicorn; the pages are ``app/ui/Home.py``'s. The
gate (:mod:`app.ui.gate`) proves who is behind every request before Streamlit sees it. The
options that make the app safe to share are set here, in code, so they hold wherever the server
is started from (a ``.streamlit/config.toml`` in the working directory cannot turn them off).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

import streamlit as st
from starlette.middleware import Middleware

from app.service.auth import FORWARDED_ALLOW_VARIABLE, TRUSTED_PROXIES_VARIABLE, trusted_proxies
from app.ui.gate import GateSettings, SignInGate, sign_in_routes
from app.ui.options import apply_server_options
from engine.exceptions import InvalidInput

HOME = Path(__file__).resolve().parent / "Home.py"
log = logging.getLogger("winnow.auth")


def gate_settings(argv: list[str]) -> GateSettings:
    """The gate's settings from the script arguments (after ``--`` on the command line)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--db", default="winnow.db")
    parser.add_argument("--require-sign-in", action="store_true")
    parser.add_argument("--dev", action="store_true")
    parser.add_argument("--max-upload-mb", type=int, default=100)
    known, _ = parser.parse_known_args([a for a in argv if a != "--"])
    return GateSettings(
        db=known.db, require_sign_in=known.require_sign_in, dev=known.dev, max_upload_mb=known.max_upload_mb
    )


def warn_if_started_elsewhere() -> None:
    """Log when uvicorn's trusted proxies are not the operator's: the server was started
    without ``winnow ui``, and uvicorn's default believes ``X-Forwarded-For`` from any local
    client (who could then pass for a new address on every sign-in attempt)."""
    try:
        wanted = trusted_proxies()
    except InvalidInput as exc:
        log.warning("%s", exc)
        return
    if os.environ.get(FORWARDED_ALLOW_VARIABLE) != wanted:
        log.warning(
            "%s is %r, not %r ($%s): start the server with `winnow ui`, which sets it",
            FORWARDED_ALLOW_VARIABLE,
            os.environ.get(FORWARDED_ALLOW_VARIABLE, "unset: 127.0.0.1,::1"),
            wanted,
            TRUSTED_PROXIES_VARIABLE,
        )


warn_if_started_elsewhere()
settings = gate_settings(sys.argv[1:])
apply_server_options(settings.dev)
app = st.App(HOME, routes=sign_in_routes(settings), middleware=[Middleware(SignInGate, settings=settings)])
