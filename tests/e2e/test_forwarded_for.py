"""The sign-in rate limit against a client that forges ``X-Forwarded-For`` (issue 44, item 2).

uvicorn, under Streamlit, believes ``X-Forwarded-For`` from 127.0.0.1 and ::1 unless told
otherwise, so a local client that sent a new address with every attempt was a new client each
time: 30 of 30 attempts over the limit were accepted. ``winnow ui`` now tells uvicorn to believe
only the proxies named in ``$WINNOW_TRUSTED_PROXIES``; a real server is started each way and
signed in to over raw HTTP.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlencode

import pytest

from tests.e2e.test_browser import free_port, stop, wait_healthy
from tests.e2e.test_gate import SAMPLE, SECRET, WINNOW, Server, _cookie, winnow

pytestmark = pytest.mark.e2e

#: Attempts one address may make per minute on these servers.
LIMIT = 3


@pytest.fixture(scope="module")
def team_db(tmp_path_factory: pytest.TempPathFactory):
    db = tmp_path_factory.mktemp("forwarded") / "team.db"
    winnow("import", str(SAMPLE), "--db", str(db), "--session", "demo")
    winnow("user", "add", "ada", "--role", "admin", "--password-stdin", "--db", str(db), stdin=SECRET + "\n")
    return db


@contextmanager
def team_server(db, **env: str) -> Iterator[Server]:
    port = free_port()
    log = db.parent / f"server-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(WINNOW), "ui", "--db", str(db), "--port", str(port), "--headless", "--address", "127.0.0.1"],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "WINNOW_SIGN_INS_PER_MINUTE": str(LIMIT), **env},
        )
        try:
            wait_healthy(f"http://127.0.0.1:{port}/_stcore/health", process)
            yield Server("127.0.0.1", port, db, log)
        finally:
            stop(process)


def attempt(server: Server, name: str, forwarded_for: str) -> int:
    """One sign-in attempt as a browser makes it (form, then post), claiming ``forwarded_for``."""
    claim = {"X-Forwarded-For": forwarded_for}
    _, headers, page = server.request("GET", "/_winnow/sign-in", headers=claim)
    match = re.search(rb'name="csrf" value="([^"]+)"', page)
    assert match is not None
    body = urlencode({"csrf": match.group(1).decode(), "name": name, "password": "wrong", "next": "/"}).encode()
    status, _, _ = server.request(
        "POST",
        "/_winnow/sign-in",
        body=body,
        headers={
            **claim,
            "Content-Type": "application/x-www-form-urlencoded",
            "Cookie": f"winnow_csrf={_cookie(headers, 'winnow_csrf')}",
            "Origin": server.url,
            "Host": f"{server.host}:{server.port}",
        },
    )
    return status


def test_a_new_forwarded_address_per_attempt_does_not_escape_the_limit(team_db):
    with team_server(team_db, WINNOW_TRUSTED_PROXIES="") as server:
        statuses = [attempt(server, f"nobody{i}", f"203.0.113.{i}") for i in range(LIMIT + 3)]
    # 401: refused for the password; 429: refused by the limit, before any password is checked.
    assert statuses == [401] * LIMIT + [429] * 3


def test_a_proxy_the_operator_names_is_believed(team_db):
    with team_server(team_db, WINNOW_TRUSTED_PROXIES="127.0.0.1,::1") as server:
        # Clients behind the proxy are told apart by the address it forwards for ...
        spread = [attempt(server, f"nobody{i}", f"198.51.100.{i}") for i in range(LIMIT + 2)]
        # ... and each one still meets the limit.
        one = [attempt(server, f"someone{i}", "198.51.100.200") for i in range(LIMIT + 1)]
    assert spread == [401] * (LIMIT + 2)
    assert one == [401] * LIMIT + [429]
