"""``winnow ui`` stopped with SIGTERM or SIGINT stops its Streamlit server too (issue 13, item 8),
and exits with status 0 (issue 46, item 8).

It used to exit and leave the server child serving the port. The test starts the installed
entry point on a free port, waits (bounded) for the server's health check, sends the signal and
checks that the child is gone and the port free. It also reads the child's command line: error
details off, the upload limit passed on.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.cli.conftest import WINNOW
from tests.deadlines import wait_for


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_stops_the_server_child(tmp_path, signum):
    port = free_port()
    env = {**os.environ, "NO_COLOR": "1"}
    subprocess.run([str(WINNOW), "init", "--db", str(tmp_path / "w.db")], check=True, capture_output=True, env=env)
    parent = subprocess.Popen(
        [
            str(WINNOW),
            "ui",
            "--db",
            str(tmp_path / "w.db"),
            "--port",
            str(port),
            "--headless",
            "--address",
            "127.0.0.1",
            "--max-upload-mb",
            "7",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        wait_for(lambda: parent.poll() is not None or healthy(port), what=f"winnow ui to answer on port {port}")
        assert parent.poll() is None and healthy(port), parent.communicate(timeout=30)
        (child,) = children(parent.pid)
        command = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        assert Path(command[command.index(b"run") + 1].decode()).name == "server.py"  # behind the sign-in gate
        assert command[command.index(b"--server.maxUploadSize") + 1] == b"7"
        assert command[command.index(b"--max-upload-mb") + 1] == b"7"  # the gate's limit too

        parent.send_signal(signum)
        # A stop that was asked for is a success (issue 46: `make run` ended with "Error 241").
        assert parent.wait(timeout=120) == 0, parent.communicate(timeout=30)
        assert not Path(f"/proc/{child}").exists(), "the Streamlit child outlived winnow ui"
        assert port_is_free(port)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for pid in children(parent.pid):
            os.kill(pid, signal.SIGKILL)
