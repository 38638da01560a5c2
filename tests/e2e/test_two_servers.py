"""Two ``winnow ui`` processes on one PostgreSQL store, as a team that outgrew one process runs them.

The sample digits (session ``demo``) go into a database of the test session's throw-away PostgreSQL
server with two annotator accounts; two servers are started on it. In Chromium, ann signs in on
the first server and bob on the second (each browser context talks to one server, as a sticky
proxy would send it); each is served an item reserved for them in the store (a lease), and with
overlap 1 the two items differ. Each answers with the key of the first label; the store then
holds exactly those two answers, once each, and the next items the two are served differ too.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from app.service import assign, create_user, ensure_sample_session
from app.store import close_stores, open_store
from tests.e2e.test_browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    ROOT,
    QueryPage,
    free_port,
    require_chromium,
    stop,
    wait_healthy,
)

# The session's PostgreSQL server (tests/store/conftest.py), shared with the store tests when
# both run in one session.
from tests.store.conftest import PostgresServer, postgres_server  # noqa: F401

pytestmark = [pytest.mark.e2e, pytest.mark.postgresql]

WINNOW = Path(sys.executable).with_name("winnow")
SECRET = "two servers password"


@contextlib.contextmanager
def servers(url: str, folder: Path, count: int) -> Iterator[list[str]]:
    """``count`` ``winnow ui`` processes on the store at ``url``, started together; their base URLs."""
    started = []
    try:
        for i in range(count):
            port = free_port()
            log = (folder / f"server-{i}.log").open("wb")
            process = subprocess.Popen(
                [str(WINNOW), "ui", "--db", url, "--port", str(port), "--headless", "--address", "127.0.0.1"],
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # `winnow ui` runs Streamlit as a child: both must go
            )
            started.append((process, port, log))
        for process, port, _ in started:
            wait_healthy(f"http://127.0.0.1:{port}/_stcore/health", process)
        yield [f"http://127.0.0.1:{port}" for _, port, _ in started]
    finally:
        for process, _, log in started:
            stop(process)
            log.close()


@pytest.fixture
def team_store(postgres_server: PostgresServer) -> Iterator[str]:  # noqa: F811
    """A PostgreSQL database with the digits as session ``demo``, ann and bob assigned to it.

    Made in this process through the service layer (what ``winnow ui --sample``, ``winnow user
    add`` and ``winnow session assign`` call): three CLI start-ups cost more than the test."""
    name = postgres_server.acquire_database()
    url = postgres_server.url(name)
    try:
        Session = open_store(url, create=True)
        ensure_sample_session(Session)
        for user in ("ann", "bob"):
            create_user(Session, user, role="annotator", password=SECRET)
        assign(Session, "demo", ["ann", "bob"])
        close_stores()  # the servers are the only clients from here on
        yield url
    finally:
        close_stores()
        postgres_server.release_database(name)


def events(url: str) -> list[tuple[str, str, str, str | None]]:
    """(kind, item, annotator, label name) of every event, in order."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text(
                    "SELECT e.kind, i.external_id, a.name, e.label, d.label_names FROM answer_events e"
                    " JOIN instances i ON i.id = e.instance_id JOIN annotators a ON a.id = e.annotator_id"
                    " JOIN datasets d ON d.id = i.dataset_id ORDER BY e.id"
                )
            ).all()
    finally:
        engine.dispose()
    return [(kind, item, who, None if label is None else names[label]) for kind, item, who, label, names in rows]


def test_two_servers_on_one_postgresql_store_serve_two_annotators_different_items(team_store, tmp_path):
    require_chromium()
    from playwright.sync_api import expect, sync_playwright

    with servers(team_store, tmp_path, 2) as urls, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:

            def signed_in(url: str, name: str) -> QueryPage:
                page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
                page.goto(url, wait_until="domcontentloaded")
                # The gate's HTML form; the cookie it sets names a sign-in the store holds.
                page.locator("#name").fill(name, timeout=60_000)
                page.locator("#password").fill(SECRET)
                page.locator("#password").press("Enter")
                expect(page.get_by_test_id("stText").get_by_text(f"Signed in as {name}")).to_be_visible(timeout=60_000)
                query = QueryPage(page)
                expect(query.heading).to_be_visible(timeout=60_000)
                return query

            ann, bob = signed_in(urls[0], "ann"), signed_in(urls[1], "bob")
            first = {"ann": ann.item(), "bob": bob.item()}
            assert first["ann"] != first["bob"]

            pressed = {}
            for name, query in (("ann", ann), ("bob", bob)):
                label, key = query.labels()[0]
                pressed[name] = label
                query.page.keyboard.press(key)
            for name, query in (("ann", ann), ("bob", bob)):
                expect(query.page.get_by_text(f"Recorded: {first[name]} is {pressed[name]}")).to_be_visible(
                    timeout=60_000
                )
                expect(query.heading).not_to_contain_text(first[name], timeout=60_000)
            second = {"ann": ann.item(), "bob": bob.item()}
        finally:
            browser.close()

    assert second["ann"] != second["bob"]
    assert not {*second.values()} & {*first.values()}
    # Both answers, once each, whichever server wrote first.
    assert sorted(events(team_store)) == sorted(("answer", first[name], name, pressed[name]) for name in ("ann", "bob"))
