"""Team mode as an outsider meets it: a real ``winnow ui`` server, raw HTTP, a raw websocket, Chromium.

One server (team mode: the store has users) is started from a folder whose
``.streamlit/config.toml`` asks for the developer menu and a red theme: the options winnow sets
in code must win. Every request is made as an attacker or a careless client would: without a
cookie, with another user's cookie, with a forged identity header, with a Streamlit session id
taken from an upload URL (issue 23).
"""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest

from tests.e2e.test_browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    ROOT,
    free_port,
    require_chromium,
    settle,
    stop,
    wait_healthy,
)

pytestmark = pytest.mark.e2e

WINNOW = Path(sys.executable).with_name("winnow")
SAMPLE = ROOT / "sample_data" / "digits_partial.csv"
SECRET = "gate test password"
#: The hourly upload quota the server runs with (MB): small, so a test can spend it.
QUOTA_MB = 2


def winnow(*args: str, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run([str(WINNOW), *args], input=stdin, capture_output=True, text=True, timeout=300, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return result


@dataclass
class Server:
    host: str
    port: int
    db: Path
    log: Path

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def request(
        self, method: str, path: str, *, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, list[str]], bytes]:
        """One request, redirects not followed: (status, headers by lower-case name, body)."""
        connection = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            found: dict[str, list[str]] = {}
            for name, value in response.getheaders():
                found.setdefault(name.lower(), []).append(value)
            return response.status, found, response.read()
        finally:
            connection.close()

    def sign_in(self, name: str, password: str = SECRET, next_path: str = "/") -> tuple[int, dict, bytes]:
        """The browser's two steps: fetch the form (its CSRF cookie), post it from this origin."""
        _, headers, page = self.request("GET", f"/_winnow/sign-in?next={quote(next_path)}")
        csrf = _cookie(headers, "winnow_csrf")
        field = re.search(rb'name="csrf" value="([^"]+)"', page).group(1).decode()
        body = urlencode({"csrf": field, "name": name, "password": password, "next": next_path}).encode()
        return self.request(
            "POST",
            "/_winnow/sign-in",
            body=body,
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Cookie": f"winnow_csrf={csrf}",
                "Origin": self.url,
                "Host": f"{self.host}:{self.port}",
            },
        )

    def cookie_of(self, name: str) -> str:
        status, headers, _ = self.sign_in(name)
        assert status == 303, status
        return f"winnow_sign_in={_cookie(headers, 'winnow_sign_in')}"


def _cookie(headers: dict[str, list[str]], name: str) -> str:
    for value in headers.get("set-cookie", []):
        if value.startswith(f"{name}="):
            return value.split(";", 1)[0].split("=", 1)[1]
    raise AssertionError(f"no {name} cookie in {headers.get('set-cookie')}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("gate")
    db = folder / "team.db"
    winnow("import", str(SAMPLE), "--db", str(db), "--session", "demo")
    for name, role in (("ada", "admin"), ("ann", "annotator"), ("bob", "annotator")):
        winnow("user", "add", name, "--role", role, "--password-stdin", "--db", str(db), stdin=SECRET + "\n")
    winnow("session", "assign", "demo", "ann", "--db", str(db))
    # A careless folder to start from: its config asks for everything winnow turns off.
    (folder / ".streamlit").mkdir()
    (folder / ".streamlit" / "config.toml").write_text(
        '[client]\ntoolbarMode = "developer"\nshowErrorDetails = "full"\n[theme]\nprimaryColor = "#ff0000"\n'
    )
    port = free_port()
    log = folder / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(WINNOW), "ui", "--db", str(db), "--port", str(port), "--headless", "--address", "127.0.0.1"],
            cwd=folder,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "WINNOW_UPLOAD_QUOTA_MB": str(QUOTA_MB)},
        )
        try:
            wait_healthy(f"http://127.0.0.1:{port}/_stcore/health", process)
            yield Server("127.0.0.1", port, db, log)
        finally:
            stop(process)


def stream(
    server: Server,
    *,
    session_id: str | None = None,
    headers: dict[str, str] | None = None,
    send: list[bytes] | None = None,
) -> list:
    """Open ``/_stcore/stream`` as a raw websocket client (optionally naming a Streamlit session
    id, as the browser does when it reconnects), ask for a run, and return the ForwardMsgs until
    the run ends."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from websockets.sync.client import connect

    protocols = ["streamlit", "xsrf", session_id] if session_id else ["streamlit"]
    messages = []
    with connect(
        f"ws://{server.host}:{server.port}/_stcore/stream",
        subprotocols=protocols,
        origin=server.url,
        additional_headers=headers or {},
        open_timeout=30,
    ) as ws:
        for data in send or []:
            ws.send(data)
        rerun = BackMsg()
        rerun.rerun_script.query_string = ""
        ws.send(rerun.SerializeToString())
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            message = ForwardMsg()
            message.ParseFromString(ws.recv(timeout=60))
            messages.append(message)
            if message.WhichOneof("type") == "script_finished":
                break
    return messages


def shown(messages: list) -> bytes:
    return b"".join(m.SerializeToString() for m in messages)


def test_pages_redirect_to_the_sign_in_form_and_back(server):
    status, headers, _ = server.request("GET", "/progress?tab=2")
    assert status == 303
    assert headers["location"] == ["/_winnow/sign-in?next=" + quote("/progress?tab=2")]
    status, headers, page = server.request("GET", headers["location"][0])
    assert status == 200 and b"<h1>Sign in to winnow</h1>" in page
    assert 'value="/progress?tab=2"' in page.decode()
    assert headers["cache-control"] == ["no-store"]


def test_a_wrong_password_gets_one_message_and_the_name_is_shown_as_text(server):
    hostile = '<img src="http://127.0.0.1:9/x.png">'
    status, headers, page = server.sign_in(hostile, "wrong password!")
    assert status == 401 and "set-cookie" not in {k for k in headers if "winnow_sign_in=" in " ".join(headers[k])}
    assert b"wrong user name or password" in page
    assert b"<img" not in page and b"&lt;img src=&quot;http://127.0.0.1:9/x.png&quot;&gt;" in page
    status, _, page = server.sign_in("ann", "wrong password!")
    assert status == 401 and b"wrong user name or password" in page


def test_a_form_post_without_its_csrf_token_is_refused(server):
    body = urlencode({"name": "ann", "password": SECRET, "next": "/"}).encode()
    status, headers, page = server.request(
        "POST", "/_winnow/sign-in", body=body, headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert status == 400 and b"expired" in page
    assert not any(v.startswith("winnow_sign_in=") for v in headers.get("set-cookie", []))


def test_signing_in_sets_an_httponly_cookie_whose_token_the_store_never_holds(server):
    status, headers, _ = server.sign_in("ann", next_path="/progress")
    assert status == 303 and headers["location"] == ["/progress"]
    cookie = next(v for v in headers["set-cookie"] if v.startswith("winnow_sign_in="))
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Path=/" in cookie
    token = cookie.split(";", 1)[0].split("=", 1)[1]
    assert token not in headers["location"][0]
    with sqlite3.connect(server.db) as connection:
        hashes = [h for (h,) in connection.execute("SELECT token_hash FROM sign_in_sessions")]
    assert hashlib.sha256(token.encode()).hexdigest() in hashes and token not in hashes
    assert server.request("GET", "/progress", headers={"Cookie": f"winnow_sign_in={token}"})[0] == 200
    # Somewhere else: never back to another site.
    status, headers, _ = server.sign_in("ann", next_path="https://evil.example/")
    assert headers["location"] == ["/"]


def test_uploads_need_a_signed_in_admin_within_the_quota(server):
    path = f"/_stcore/upload_file/{uuid.uuid4()}/{uuid.uuid4()}"
    small = b"x" * 1000
    status, _, body = server.request("PUT", path, body=small)
    assert (status, body) == (403, b"only a signed-in admin may upload files")
    status, _, body = server.request("PUT", path, body=small, headers={"Cookie": server.cookie_of("ann")})
    assert (status, body) == (403, b"only a signed-in admin may upload files")
    admin = server.cookie_of("ada")
    status, _, body = server.request("PUT", path, body=small, headers={"Cookie": admin})
    # Past the gate: what answers now is Streamlit's own upload check (no XSRF token, no such session).
    assert body != b"only a signed-in admin may upload files" and status != 429
    big = b"x" * (QUOTA_MB * 1_000_000)
    status, _, body = server.request("PUT", path, body=big, headers={"Cookie": admin})
    assert (status, body) == (429, b"upload quota for this hour spent")


def test_media_and_metrics_need_a_signed_in_user(server):
    for path in ("/media/0123456789abcdef.csv", "/_stcore/metrics", "/_stcore/anything"):
        assert server.request("GET", path)[0] == 401, path
    assert server.request("GET", "/_stcore/metrics", headers={"Cookie": server.cookie_of("ann")})[0] == 403
    assert server.request("GET", "/_stcore/metrics", headers={"Cookie": server.cookie_of("ada")})[0] == 200
    assert server.request("GET", "/_stcore/health")[0] == 200


def test_a_disabled_users_cookie_opens_nothing(server):
    cookie = server.cookie_of("bob")
    assert server.request("GET", "/", headers={"Cookie": cookie})[0] == 200
    winnow("user", "disable", "bob", "--db", str(server.db))
    assert server.request("GET", "/", headers={"Cookie": cookie})[0] == 303
    assert server.request("GET", "/media/0123456789abcdef.csv", headers={"Cookie": cookie})[0] == 401


def test_a_connection_without_a_cookie_sees_only_the_sign_in_page(server):
    page = shown(stream(server))
    assert b"Sign in to winnow" in page and b"Signed in as" not in page


def test_an_identity_header_sent_by_a_client_proves_nothing(server):
    status, headers, _ = server.sign_in("ada")
    handle = hashlib.sha256(_cookie(headers, "winnow_sign_in").encode()).hexdigest()
    page = shown(stream(server, headers={"X-Winnow-Sign-In": handle}))
    assert b"Sign in to winnow" in page and b"Signed in as" not in page


def test_the_options_winnow_sets_hold_whatever_folder_it_starts_from(server):
    from streamlit.proto.NewSession_pb2 import Config

    new_session = next(m.new_session for m in stream(server) if m.WhichOneof("type") == "new_session")
    assert new_session.config.toolbar_mode == Config.ToolbarMode.VIEWER
    assert new_session.custom_theme.primary_color.lower() != "#ff0000"


def test_a_clear_cache_message_from_a_tab_is_dropped(server):
    from streamlit.proto.BackMsg_pb2 import BackMsg

    clear = BackMsg()
    clear.clear_cache = True
    stream(server, send=[clear.SerializeToString()])
    assert "dropped a clear_cache request" in server.log.read_text()


def test_a_session_id_from_an_upload_url_does_not_resume_a_signed_in_admin(server, tmp_path):
    """The attack of issue 23, replayed: an admin signs in in Chromium and uploads a file; the
    Streamlit session id is read off the upload URL; a second client without any cookie opens
    the websocket naming that id, and is shown only the sign-in page."""
    require_chromium()
    from playwright.sync_api import expect, sync_playwright

    data = tmp_path / "tiny.csv"
    data.write_text("id,f1,candidates\na,1,x\nb,2,y|x\n")
    upload_urls: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
            page.on("request", lambda r: upload_urls.append(r.url) if "/_stcore/upload_file/" in r.url else None)
            # A deep link: the sign-in form, then back to the page asked for.
            page.goto(server.url + "/progress", wait_until="domcontentloaded")
            expect(page.locator("h1", has_text="Sign in to winnow")).to_be_visible(timeout=60_000)
            page.locator("#name").fill("ada")
            page.locator("#password").fill(SECRET)
            page.locator("#password").press("Enter")
            expect(page.get_by_test_id("stText").get_by_text("Signed in as ada (admin)")).to_be_visible(timeout=60_000)
            # Back on the page asked for (the app then names the open session in the address).
            assert page.url.split("?")[0] == server.url + "/progress"
            expect(page.locator("h1", has_text="Progress")).to_be_visible(timeout=60_000)
            settle(page)
            page.locator("[data-testid='stSidebarNav'] a", has_text="Sessions").click()
            upload = page.locator(".st-key-sessions_upload input[type='file']")
            expect(upload).to_be_attached(timeout=60_000)
            upload.set_input_files(str(data))
            deadline = time.monotonic() + 30
            while not upload_urls and time.monotonic() < deadline:
                page.wait_for_timeout(200)
            assert upload_urls, "the upload never reached the server"
            session_id = upload_urls[0].split("/_stcore/upload_file/", 1)[1].split("/", 1)[0]

            stolen = shown(stream(server, session_id=session_id))
            assert b"Sign in to winnow" in stolen
            assert b"Signed in as" not in stolen and b"Sessions" not in stolen
            # The admin's own tab is untouched.
            expect(page.get_by_test_id("stText").get_by_text("Signed in as ada (admin)")).to_be_visible()
        finally:
            browser.close()


def test_an_export_link_is_its_owners_alone_and_item_images_still_show(server, tmp_path):
    """Issue 29: ann (an annotator of the session) draws the Progress page in Chromium; its
    export link gives her the file, in the browser and over HTTP with her cookie; the same URL
    gives an admin, another annotator, ann's own second sign-in and an anonymous client one
    plain 404. The item images of the Query page (Streamlit media) still load for her."""
    require_chromium()
    from playwright.sync_api import expect, sync_playwright

    winnow("user", "add", "dan", "--role", "annotator", "--password-stdin", "--db", str(server.db), stdin=SECRET + "\n")
    winnow("session", "assign", "demo", "dan", "--db", str(server.db))
    cli_export = tmp_path / "cli-ranked.csv"
    winnow("export", "demo", "--what", "ranked", "-o", str(cli_export), "--db", str(server.db))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True)
            downloads: list = []
            # The link opens a new tab, whose response is the download: watch every tab.
            context.on("page", lambda tab: tab.on("download", lambda download: downloads.append(download)))
            page = context.new_page()
            page.goto(server.url + "/", wait_until="domcontentloaded")
            page.locator("#name").fill("ann")
            page.locator("#password").fill(SECRET)
            page.locator("#password").press("Enter")
            expect(page.get_by_test_id("stText").get_by_text("Signed in as ann (annotator)")).to_be_visible(
                timeout=60_000
            )
            # The item on the Query page is an image Streamlit serves from /media/.
            image = page.locator("[data-testid='stImage'] img").first
            expect(image).to_be_visible(timeout=60_000)
            image_path = "/" + image.get_attribute("src").split("/", 3)[-1]
            assert image_path.startswith("/media/"), image_path
            cookie = next(f"winnow_sign_in={c['value']}" for c in context.cookies() if c["name"] == "winnow_sign_in")
            # Loaded in the page, and over HTTP with her cookie while the page shows it.
            page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=image.element_handle())
            status, headers, body = server.request("GET", image_path, headers={"Cookie": cookie})
            assert status == 200 and headers["content-type"][0].startswith("image/") and len(body) > 100
            assert server.request("GET", image_path)[0] == 401  # item media: signed-in users only, as before

            page.locator("[data-testid='stSidebarNav'] a", has_text="Progress").click()
            expect(page.locator("h1", has_text="Progress")).to_be_visible(timeout=60_000)
            link = page.locator(".st-key-export_ranked_csv a")
            expect(link).to_be_visible(timeout=60_000)
            path = link.get_attribute("href")
            assert path.startswith("/_winnow/download/"), path
            link.click()
            deadline = time.monotonic() + 30
            while not downloads and time.monotonic() < deadline:
                page.wait_for_timeout(200)
            assert downloads, "the browser downloaded nothing"
            saved = tmp_path / "browser-ranked.csv"
            downloads[0].save_as(saved)
            assert downloads[0].suggested_filename == "demo-ranked.csv"
        finally:
            browser.close()

    assert saved.read_bytes().splitlines() == cli_export.read_bytes().splitlines()
    status, headers, body = server.request("GET", path, headers={"Cookie": cookie})
    assert status == 200 and body == saved.read_bytes()
    assert headers["content-disposition"] == ['attachment; filename="demo-ranked.csv"']
    assert headers["cache-control"] == ["no-store"]

    refusals = {
        "admin": server.request("GET", path, headers={"Cookie": server.cookie_of("ada")}),
        "another annotator": server.request("GET", path, headers={"Cookie": server.cookie_of("dan")}),
        "ann signed in elsewhere": server.request("GET", path, headers={"Cookie": server.cookie_of("ann")}),
        "anonymous": server.request("GET", path),
    }
    for who, (status, headers, body) in refusals.items():
        assert status == 404, who
        assert headers["content-type"][0].startswith("text/plain") and body.count(b"\n") == 0, who
        assert b"id," not in body and b"demo" not in body, who
