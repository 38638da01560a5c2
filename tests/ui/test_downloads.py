"""Download tickets (app/ui/downloads.py) and the gate that serves them, without a server: a
ticket is its owner's only, expires, is renewed while its page is drawn, and the gate serves no
Streamlit attachment from ``/media/``. The same against a real server: tests/e2e/test_gate.py."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from app.service import create_user
from app.store.db import open_store
from app.ui.downloads import DOWNLOAD_PREFIX, DownloadOwner, DownloadTickets
from app.ui.gate import GateSettings, SignInGate

ADA = DownloadOwner("ada", "a" * 64)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_ticket_is_its_owners_until_it_expires():
    clock = Clock()
    tickets = DownloadTickets(lifetime=60, clock=clock)
    token = tickets.issue(ADA, "s-ranked.csv", "text/csv", lambda: b"id\n")
    assert len(token) >= 40 and tickets.redeem(token, ADA).make() == b"id\n"
    for stranger in (DownloadOwner("bob", "b" * 64), DownloadOwner("ada", "b" * 64), DownloadOwner(None, None)):
        assert tickets.redeem(token, stranger) is None
    clock.now = 59.9
    assert tickets.redeem(token, ADA) is not None
    clock.now = 60.0
    assert tickets.redeem(token, ADA) is None and len(tickets) == 0
    assert tickets.redeem("no-such-token", ADA) is None


def test_drawing_the_page_again_renews_its_link_and_a_stranger_cannot_renew_it():
    clock = Clock()
    tickets = DownloadTickets(lifetime=60, clock=clock)
    token = tickets.issue(ADA, "a.csv", "text/csv", lambda: b"1")
    clock.now = 50.0
    assert tickets.issue(ADA, "a.csv", "text/csv", lambda: b"2", renew=token) == token
    clock.now = 100.0  # 50 s after the renewal: still live, and it makes the newest file
    assert tickets.redeem(token, ADA).make() == b"2"
    other = tickets.issue(DownloadOwner("bob", "b" * 64), "a.csv", "text/csv", lambda: b"3", renew=token)
    assert other != token and tickets.redeem(token, ADA).make() == b"2"
    clock.now = 200.0  # expired: a new link, not the dead one brought back
    assert tickets.issue(ADA, "a.csv", "text/csv", lambda: b"4", renew=token) != token


def test_the_table_of_tickets_is_bounded_expired_first_then_oldest():
    clock = Clock()
    tickets = DownloadTickets(lifetime=10, max_tickets=3, clock=clock)
    old = tickets.issue(ADA, "a", "text/csv", bytes)
    clock.now = 20.0
    live = [tickets.issue(ADA, "a", "text/csv", bytes) for _ in range(3)]
    assert len(tickets) == 3 and tickets.redeem(old, ADA) is None
    newest = tickets.issue(ADA, "a", "text/csv", bytes)
    assert len(tickets) == 3 and tickets.redeem(live[0], ADA) is None
    assert all(tickets.redeem(t, ADA) is not None for t in (*live[1:], newest))


@dataclass
class Reply:
    status_code: int
    headers: dict[str, str]
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode()


class Client:
    """Requests straight into an ASGI app (no server, no HTTP client library)."""

    def __init__(self, app) -> None:
        self.app = app
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, cookies: dict[str, str] | None = None) -> Reply:
        jar = {**self.cookies, **(cookies or {})}
        headers = [(b"cookie", "; ".join(f"{k}={v}" for k, v in jar.items()).encode())] if jar else []
        scope = {
            "type": "http",
            "method": method,
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "headers": headers,
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8501),
            "scheme": "http",
            "http_version": "1.1",
            "root_path": "",
        }
        sent: list[dict] = []

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message):
            sent.append(message)

        asyncio.run(self.app(scope, receive, send))
        start = next(m for m in sent if m["type"] == "http.response.start")
        body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        return Reply(start["status"], {k.decode().lower(): v.decode() for k, v in start["headers"]}, body)

    def get(self, path: str, cookies: dict[str, str] | None = None) -> Reply:
        return self.request("GET", path, cookies)

    def post(self, path: str, cookies: dict[str, str] | None = None) -> Reply:
        return self.request("POST", path, cookies)


def media_app() -> Starlette:
    """Stands in for Streamlit's media route: one inline image, one attachment."""

    def image(_request):
        return Response(b"\x89PNG...", media_type="image/png")

    def attachment(_request):
        return Response(b"secret,rows\n", media_type="text/csv", headers={"Content-Disposition": "attachment"})

    return Starlette(routes=[Route("/media/item.png", image), Route("/media/export.csv", attachment)])


@pytest.mark.parametrize("team", [False, True])
def test_the_gate_serves_inline_media_and_no_streamlit_attachment(tmp_path, team):
    db = str(tmp_path / "w.db")
    Session = open_store(db)
    if team:
        create_user(Session, "ada", role="admin", password="a long enough secret")
    client = Client(SignInGate(media_app(), GateSettings(db=db)))
    cookies = {}
    if team:
        from app.service.auth import open_sign_in

        _, token = open_sign_in(Session, "ada", "a long enough secret")
        cookies = {"winnow_sign_in": token}
    client.cookies.update(cookies)
    image = client.get("/media/item.png")
    assert (image.status_code, image.content) == (200, b"\x89PNG...")
    refused = client.get("/media/export.csv")
    assert refused.status_code == 404 and b"secret" not in refused.content
    assert refused.headers["content-type"].startswith("text/plain") and len(refused.text.splitlines()) == 1


def test_the_gate_serves_a_ticket_to_its_owner_only_as_an_attachment(tmp_path, monkeypatch):
    from app.service.auth import open_sign_in, sign_in_handle
    from app.store import PermissionDenied
    from app.ui import gate

    db = str(tmp_path / "w.db")
    Session = open_store(db)
    for name in ("ada", "bob"):
        create_user(Session, name, role="admin", password="a long enough secret")
    tickets = DownloadTickets()
    monkeypatch.setattr(gate, "DOWNLOADS", tickets)
    _, ada_token = open_sign_in(Session, "ada", "a long enough secret")
    _, bob_token = open_sign_in(Session, "bob", "a long enough secret")
    owner = DownloadOwner("ada", sign_in_handle(ada_token))
    token = tickets.issue(owner, "s-events.csv", "text/csv", lambda: b"id,kind\n")
    revoked = tickets.issue(
        owner, "s-events.json", "application/json", lambda: (_ for _ in ()).throw(PermissionDenied("no"))
    )
    client = Client(SignInGate(media_app(), GateSettings(db=db)))

    fetched = client.get(DOWNLOAD_PREFIX + token, cookies={"winnow_sign_in": ada_token})
    assert fetched.status_code == 200 and fetched.content == b"id,kind\n"
    assert fetched.headers["content-disposition"] == 'attachment; filename="s-events.csv"'
    assert fetched.headers["cache-control"] == "no-store"
    refusals = [
        client.get(DOWNLOAD_PREFIX + token, cookies={"winnow_sign_in": bob_token}),
        client.get(DOWNLOAD_PREFIX + token),
        client.get(DOWNLOAD_PREFIX + token, cookies={"winnow_sign_in": "forged"}),
        client.post(DOWNLOAD_PREFIX + token, cookies={"winnow_sign_in": ada_token}),
        client.get(DOWNLOAD_PREFIX + "x" * 43, cookies={"winnow_sign_in": ada_token}),
        client.get(DOWNLOAD_PREFIX + revoked, cookies={"winnow_sign_in": ada_token}),
    ]
    assert [r.status_code for r in refusals] == [404] * len(refusals)
    assert len({r.text for r in refusals}) == 1 and b"id,kind" not in b"".join(r.content for r in refusals)
