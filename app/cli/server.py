"""``winnow ui``: start the browser app and supervise its server.

The port is checked before Streamlit starts, the child is awaited until its health check answers,
and stop signals are passed on so that the port is free once ``winnow ui`` has exited.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import typer

from app.cli.console import UserError, out
from app.cli.options import DbOption
from app.store import open_store

#: The ASGI app ``winnow ui`` serves: Streamlit behind winnow's sign-in gate.
UI_SERVER = Path(__file__).resolve().parent.parent / "ui" / "server.py"


def check_port_free(port: int, address: str) -> None:
    """Refuse a port that is out of range or already taken on ``address``, as one line.

    Checked before the server starts: otherwise Streamlit's own failure is a traceback, and a
    server already on the port (another winnow) answers the health check as if it were ours.
    """
    import errno
    import socket

    if not 1 <= port <= 65535:
        raise UserError(f"--port must be between 1 and 65535, got {port}")
    try:
        found = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)
        addresses = {(family, kind, sockaddr[0]) for family, kind, _, _, sockaddr in found}
    except (socket.gaierror, UnicodeError) as exc:
        raise UserError(f"--address {address!r} is not an address of this machine ({exc})") from None
    for family, kind, host in sorted(addresses, key=str):
        with socket.socket(family, kind) as probe:
            # As the server will bind: SO_REUSEADDR, so a port in TIME_WAIT is not taken for busy.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise UserError(f"port {port} is in use on {host}; choose another with --port") from None
                if exc.errno == errno.EADDRNOTAVAIL and family == socket.AF_INET6:
                    continue  # no IPv6 on this machine: the server will not listen there either
                raise UserError(f"cannot listen on {host} port {port}: {exc.strerror or exc}") from None


def ui(
    db: str = DbOption,
    port: int = typer.Option(8501, help="Local port."),
    sample: bool = typer.Option(False, "--sample", help="Create a 'demo' session on the bundled sample if missing."),
    headless: bool = typer.Option(False, help="Do not open a browser window."),
    address: str = typer.Option("localhost", help="Interface to serve on; 0.0.0.0 shares the app on the network."),
    max_upload_mb: int | None = typer.Option(
        None,
        "--max-upload-mb",
        min=1,
        help="Largest upload in MB (default: $WINNOW_MAX_UPLOAD_MB, else 100).",
    ),
    require_sign_in: bool = typer.Option(
        False, "--require-sign-in", help="Sign-in even on localhost (e.g. behind a reverse proxy)."
    ),
    dev: bool = typer.Option(
        False, "--dev", help="Show full error details (tracebacks) in the browser: development only."
    ),
) -> None:
    """Open the annotator's browser app on a database.

    On localhost with no user accounts the app opens straight away (single-user mode); with
    accounts, or on any other address, everyone signs in first (see docs/deployment.md).
    Behind a reverse proxy, name it in $WINNOW_TRUSTED_PROXIES (e.g. 127.0.0.1): only its
    X-Forwarded-For is believed.

    Example: winnow ui --db winnow.db
    """
    check_port_free(port, address)
    from app.io import MAX_UPLOAD_VARIABLE, max_upload_bytes
    from app.service import has_users, is_local_address
    from app.service.auth import FORWARDED_ALLOW_VARIABLE, trusted_proxies

    proxies = trusted_proxies()

    Session = open_store(db, create=sample)  # --sample imports the sample: it may make the store
    if sample:
        from app.service import ensure_sample_session

        ensure_sample_session(Session)
    if (require_sign_in or not is_local_address(address)) and not has_users(Session):
        raise UserError(
            f"--address {address}{' --require-sign-in' if require_sign_in else ''}: everyone signs in, "
            "and the store has no user yet: create an admin first (winnow user add NAME --role admin)"
        )
    upload_mb = max_upload_mb if max_upload_mb is not None else max_upload_bytes() // 1_000_000
    # Streamlit always runs headless: otherwise its first run on a machine stops at an
    # interactive e-mail prompt. winnow opens the browser itself once the server answers.
    # The options that keep a shared server safe are set by app/ui/server.py itself, so they
    # hold whatever folder the server is started from.
    command = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(UI_SERVER),
        "--server.port",
        str(port),
        "--server.address",
        address,
        "--server.headless",
        "true",
        "--server.maxUploadSize",
        str(upload_mb),
        "--browser.gatherUsageStats",
        "false",
        # Given here, not only in app/ui/server.py: Streamlit starts watching the script's
        # folder (a polling thread: a tenth of the server's CPU under a team's load) before
        # the script runs and sets it.
        "--server.fileWatcherType",
        "none",
        "--",
        "--db",
        db,
        "--max-upload-mb",
        str(upload_mb),
        *(["--require-sign-in"] if require_sign_in else []),
        *(["--dev"] if dev else []),
    ]
    # The app checks uploads against the same limit as Streamlit (its own cap, in case the
    # browser's is bypassed). uvicorn believes X-Forwarded-For only from the proxies the
    # operator names: by default it believes any local client, which could then pass for a
    # new address on every sign-in attempt and never meet the rate limit.
    env = {**os.environ, MAX_UPLOAD_VARIABLE: str(upload_mb), FORWARDED_ALLOW_VARIABLE: proxies}
    url = f"http://localhost:{port}"
    server = subprocess.Popen(command, env=env)
    with _forward_stop_signals(server) as stops:
        if _wait_until_healthy(server, f"{url}/_stcore/health"):
            out.print(f"winnow is running at {url} (Ctrl+C to stop)")
            if not headless:
                import webbrowser

                webbrowser.open(url)
        status = server.wait()  # returns once a forwarded signal has stopped the server
    # A stop that was asked for (Ctrl+C, `kill`) is a success, whatever the child reports: -15 for
    # the SIGTERM passed on (`make run` said "Error 241"), or 1 when Ctrl+C reached it too (the
    # terminal signals the whole process group, and Streamlit's command line says "Aborted!").
    raise typer.Exit(0 if stops else status)


@contextlib.contextmanager
def _forward_stop_signals(server: subprocess.Popen) -> Iterator[list[int]]:
    """Pass SIGTERM / SIGINT / SIGHUP on to the Streamlit child (as SIGTERM), which then stops; the caller
    waits for it, so the port is free once ``winnow ui`` has exited. Yields the signals passed on."""
    import signal

    passed: list[int] = []

    def forward(signum: int, frame: object) -> None:
        passed.append(signum)
        if server.poll() is None:
            # SIGTERM whatever came: Streamlit's command line takes SIGINT as a KeyboardInterrupt,
            # prints "Aborted!" and exits with status 1, which would read as a failure.
            server.send_signal(signal.SIGTERM)

    names = ("SIGTERM", "SIGINT", "SIGHUP")
    wanted = [getattr(signal, name) for name in names if hasattr(signal, name)]
    previous = {signum: signal.signal(signum, forward) for signum in wanted}
    try:
        yield passed
    finally:
        if server.poll() is None:  # an error in this process: do not leave the server behind
            _wait_for(server)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _wait_for(server: subprocess.Popen, grace: float = 30.0) -> int:
    """Stop the child (SIGTERM, then SIGKILL after ``grace`` seconds) and return its status."""
    server.terminate()
    try:
        return server.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        server.kill()
        return server.wait()


def _wait_until_healthy(server: subprocess.Popen, health_url: str, timeout: float = 60.0) -> bool:
    import time
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with urllib.request.urlopen(health_url, timeout=1) as response:
                if response.status == 200:
                    return True
        except OSError:
            time.sleep(0.3)
    return False
