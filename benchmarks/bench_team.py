"""A team at full speed (issue 21): N annotators in N Chromium contexts on one or two ``winnow ui``.

Builds a synthetic partially labelled dataset (default 20,000 x 32 features, 10 labels, from
:func:`benchmarks.bench_ui.synthetic_csv`), imports it as session ``bench`` into a store made by
the code under test (``winnow import``, ``winnow user add``, ``winnow session assign``: a team
store, overlap 1), then for every number of annotators N in ``--annotators``:

1. copies the store (a fresh SQLite file, or ``CREATE DATABASE ... TEMPLATE`` on a throw-away
   PostgreSQL server started as ``tests/store/conftest.py`` does), so every run starts from the
   same session, and starts ``--servers`` ``winnow ui`` processes on it;
2. opens N browser contexts of Debian's Chromium (Playwright), each a different annotator,
   signed in through the gate's HTML form at ``/_winnow/sign-in`` on its own server (context i
   talks to server i mod S: sticky by context; with ``--proxy`` all talk to one address, a small
   asyncio proxy here that is sticky by the sign-in cookie, as docs/deployment.md's nginx
   configuration), and waits until every one shows its first item;
3. for ``--seconds``, each context presses the key of the first answer button as soon as the
   next item can be answered (``--pace full``) or once every ``--pace`` seconds at most. The page
   itself timestamps the key press (a ``keydown`` listener) and the moment a new item's heading
   appears (a ``MutationObserver``), so the latency does not include Playwright's round trips;
4. stops the servers and checks the store: every press its context saw recorded ("Recorded:
   ITEM is LABEL (event E)") is exactly one answer event of that annotator about that item with
   that label, there is no other event, and no item is answered twice (overlap 1). PASS / FAIL.

Figures per run: answers per second (all contexts together, recorded answers over the measured
window), per annotator the median and p90 of key press -> next item's heading on screen
(the table gives the median over annotators of each, and the worst annotator's), server CPU
seconds per answer (user + system of every ``winnow ui`` process tree during the window; on
PostgreSQL also the database server's processes, in their own column) and the largest peak RSS
(``VmHWM``) of a server process.

``--baseline REF`` also runs every configuration on the code of a git ref (checked out with
``git worktree add --detach`` in a temporary folder, its own store made by its own CLI, served
with ``PYTHONPATH`` pointing to it), interleaved with the runs of this tree, and prints the
ratios. ``--write-docs`` writes the table into the section "Team at full speed
(bench_team.py)" of ``docs/benchmarks.md``, replacing the subsection of the same configuration
(backend, servers, address, pace) and keeping the others. ``--json`` keeps every press.

Usage::

    python -m benchmarks.bench_team --annotators 1,4,8,16 --pace full --seconds 60 --baseline db48021
    python -m benchmarks.bench_team --backend postgresql --servers 2 --proxy --annotators 16 --pace 3

Keep runs short on a shared machine: the browser contexts use the same cores as the servers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path(os.environ.get("WINNOW_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    # Sixteen contexts in one browser: none of them may be throttled as a background page.
    "--disable-background-timer-throttling",
    "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
]
PASSWORD = "bench team password"
SESSION = "bench"
DOCS_SECTION = "## Team at full speed (bench_team.py)"
#: How long a press may wait for the next item before it counts as lost (seconds).
PRESS_TIMEOUT = 120.0
#: Before the measured window, the machine must be this quiet (share of all cores busy over
#: one second), for at most SETTLE_TIMEOUT seconds: N browsers that have just drawn their first
#: item go on working (laying out, compiling the page's scripts) for some seconds while the
#: server idles, and on this one machine they would slow the first answers. On an annotator's
#: own machine that work is theirs; here it is waited out and reported.
QUIET_SHARE = 0.2
SETTLE_TIMEOUT = 120.0

#: Installed in every page before Streamlit's scripts: timestamps (epoch milliseconds, the
#: page's clock) of the last key press, of the moment a new item's heading appeared and of the
#: moment its answer buttons did, the notice shown above the item, and waiters resolved from the
#: observer (no polling: a press is followed by one promise that the next mutation settles).
OBSERVER = """
(() => {
  const now = () => performance.timeOrigin + performance.now();
  const S = window.__bench = {keyAt: 0, sentAt: 0, item: null, itemAt: 0, notice: "", alert: "", alertAt: 0,
                              answer: null, answerAt: 0, key: null, label: null, waiters: []};
  document.addEventListener("keydown", () => { S.keyAt = now(); }, true);
  // A key press that reaches a button sends a message on Streamlit's websocket at once.
  const send = WebSocket.prototype.send;
  WebSocket.prototype.send = function (data) { S.sentAt = now(); return send.call(this, data); };
  const alerts = () => [...document.querySelectorAll("[data-testid='stAlert']")]
      .map(a => a.innerText.trim()).filter(t => t).join("\\n");
  const check = () => {
    const t = now();
    const h = document.querySelector("h3[id^='item-']");
    const item = h ? h.innerText.replace(/^Item\\s*/, "").trim() : null;
    if (item !== S.item) { S.item = item; S.itemAt = t; S.notice = alerts(); }
    const text = alerts();
    if (text !== S.alert) { S.alert = text; S.alertAt = t; }
    const box = document.querySelector("[class*='st-key-query_answer_']");
    const cls = box ? [...box.classList].find(c => c.startsWith("st-key-query_answer_")) : null;
    const kbd = box ? box.querySelector("kbd") : null;
    const answer = cls && kbd ? cls : null;
    if (answer !== S.answer) {
      S.answer = answer; S.answerAt = t;
      S.key = kbd ? kbd.innerText.trim().toLowerCase() : null;
      const name = box ? box.querySelector("[data-testid='stMarkdownContainer']") : null;
      S.label = name ? name.innerText.trim() : null;
    }
    S.waiters = S.waiters.filter(w => !w());
  };
  const start = () => new MutationObserver(check).observe(document.documentElement,
      {subtree: true, childList: true, characterData: true, attributes: true, attributeFilter: ["class", "id"]});
  if (document.documentElement) start(); else document.addEventListener("DOMContentLoaded", start);
})();
"""

#: Resolves once the next item can be answered (a new heading and answer buttons of a new
#: item; resolved 50 ms later, once React has bound the buttons' keys), or the last key press
#: was answered by a notice that is not "Recorded" (refused: the same item stays), or it sent
#: nothing to the server within a second (ignored: the page was not listening yet), or after the
#: timeout. Called right after the press: the observer's timestamps, not this call's, say when
#: things happened.
WAIT_NEXT = """
([item, answer, timeoutMs]) => new Promise(resolve => {
  const S = window.__bench;
  // Not requestAnimationFrame: a page that is not in front gets no frames in headless Chromium.
  const later = value => setTimeout(() => resolve(value), 50);
  const done = () => {
    if (S.item !== null && S.item !== item && S.answer !== null && S.answer !== answer) {
      later({outcome: "next", item: S.item, itemAt: S.itemAt, answer: S.answer, answerAt: S.answerAt,
             key: S.key, label: S.label, notice: S.notice, keyAt: S.keyAt});
      return true;
    }
    if (S.alertAt > S.keyAt && S.alert && !S.alert.includes("Recorded")) {
      resolve({outcome: "refused", item: S.item, notice: S.alert, keyAt: S.keyAt, itemAt: S.alertAt,
               answer: S.answer, answerAt: S.answerAt, key: S.key, label: S.label});
      return true;
    }
    return false;
  };
  if (!done()) {
    S.waiters.push(done);
    if (item !== null) setTimeout(() => {
      if (S.sentAt < S.keyAt) { S.waiters = S.waiters.filter(w => w !== done); resolve({outcome: "ignored"}); }
    }, 1000);
    setTimeout(() => resolve({outcome: "timeout", item: S.item, notice: S.alert, keyAt: S.keyAt,
                              answer: S.answer, key: S.key, label: S.label}), timeoutMs);
  }
})
"""

RECORDED = re.compile(r"Recorded: (?P<item>.+?) is (?P<label>.+?) \(event (?P<event>\d+)\)")


# --------------------------------------------------------------------------------------------
# The code under test and its stores


@dataclass
class Code:
    """A tree of winnow's code: this one, or a git ref checked out for the baseline."""

    name: str
    root: Path
    commit: str

    def env(self) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(self.root), "PYTHONDONTWRITEBYTECODE": "1"}

    def winnow(self, *args: str, stdin: str | None = None) -> str:
        """Run the winnow CLI of this tree; its output, or RuntimeError with its stderr."""
        winnow = Path(sys.executable).with_name("winnow")
        done = subprocess.run(
            [str(winnow), *args],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=self.root,
            env=self.env(),
            timeout=900,
        )
        if done.returncode != 0:
            raise RuntimeError(f"winnow {' '.join(args[:2])} ({self.name}) failed: {done.stderr.strip()}")
        return done.stdout


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


@contextlib.contextmanager
def checked_out(ref: str) -> Iterator[Code]:
    """``ref`` checked out in a temporary worktree (removed afterwards)."""
    commit = git("rev-parse", "--verify", f"{ref}^{{commit}}")
    folder = Path(tempfile.mkdtemp(prefix=f"winnow-bench-{commit[:7]}-"))
    folder.rmdir()  # git worktree add makes it
    git("worktree", "add", "--detach", str(folder), commit)
    try:
        yield Code(f"baseline {ref}", folder, commit)
    finally:
        git("worktree", "remove", "--force", str(folder))


class Backend(Protocol):
    """Where the stores live: a template store made once per code tree, copied for every run."""

    def template(self, key: str) -> str:
        """The URL (or SQLite path) of a new, empty store for the template ``key``."""
        ...

    def copy(self, key: str, run: str) -> str:
        """A copy of template ``key`` for one run; its URL or path."""
        ...

    def drop(self, url: str) -> None: ...

    def processes(self) -> list[int]:
        """Database server process ids whose CPU counts apart (none for SQLite)."""
        ...

    def close(self) -> None: ...


class SqliteBackend:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def processes(self) -> list[int]:
        return []

    def close(self) -> None:
        pass

    def template(self, key: str) -> str:
        return str(self.folder / f"template-{key}.db")

    def copy(self, key: str, run: str) -> str:
        target = self.folder / f"run-{run}.db"
        # The CLIs that made the template have exited; a -wal file, if one was left, goes along.
        source = self.folder / f"template-{key}.db"
        shutil.copyfile(source, target)
        if Path(f"{source}-wal").exists():
            shutil.copyfile(f"{source}-wal", f"{target}-wal")
        return str(target)

    def drop(self, url: str) -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(url + suffix).unlink(missing_ok=True)


class PostgresBackend:
    def __init__(self) -> None:
        # The test suite's throw-away server: a cluster in a temporary folder on 127.0.0.1,
        # fsync off, stopped and removed by close().
        from tests.store.conftest import start_postgres_server

        self.server = start_postgres_server()

    def _admin(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(
            host="127.0.0.1", port=self.server.port, user="postgres", dbname="postgres", autocommit=True
        ) as connection:
            connection.execute(statement)

    def template(self, key: str) -> str:
        name = f"template_{key}"
        self._admin(f'CREATE DATABASE "{name}" TEMPLATE template0')
        return self.server.url(name)

    def copy(self, key: str, run: str) -> str:
        name = f"run_{run}"
        self._admin(f'CREATE DATABASE "{name}" TEMPLATE "template_{key}"')
        return self.server.url(name)

    def drop(self, url: str) -> None:
        self._admin(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')

    def processes(self) -> list[int]:
        pid = int((self.server.data / "postmaster.pid").read_text().split()[0])
        return [pid]

    def close(self) -> None:
        self.server.shutdown()


def make_template(code: Code, backend: Backend, key: str, csv: Path, annotators: int, criterion: str | None) -> None:
    """A team store: the dataset as session ``bench``, an admin, ``annotators`` annotators."""
    db = backend.template(key)
    extra = ["--criterion", criterion] if criterion else []
    code.winnow("import", str(csv), "--db", db, "--session", SESSION, "--true-label-column", "true_label", *extra)
    code.winnow("user", "add", "admin", "--role", "admin", "--password-stdin", "--db", db, stdin=PASSWORD + "\n")
    names = [annotator_name(i) for i in range(annotators)]
    for name in names:
        code.winnow("user", "add", name, "--role", "annotator", "--password-stdin", "--db", db, stdin=PASSWORD + "\n")
    code.winnow("session", "assign", SESSION, *names, "--db", db)
    # Opening the session once builds and stores its neighbour graph, which every run reuses.
    code.winnow("session", "status", SESSION, "--db", db)


def annotator_name(i: int) -> str:
    return f"ann{i + 1:02d}"


# --------------------------------------------------------------------------------------------
# Servers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    process: subprocess.Popen
    url: str
    log: Path

    def tree(self) -> list:
        import psutil

        try:
            root = psutil.Process(self.process.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []


def start_server(code: Code, db: str, folder: Path, index: int) -> Server:
    port = free_port()
    log = folder / f"server-{index}.log"
    winnow = Path(sys.executable).with_name("winnow")
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(winnow), "ui", "--db", db, "--port", str(port), "--headless", "--address", "127.0.0.1"],
            cwd=code.root,
            env=code.env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # `winnow ui` runs Streamlit as a child: both must go
        )
    return Server(process, f"http://127.0.0.1:{port}", log)


def wait_healthy(server: Server, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"winnow ui exited ({server.process.returncode}); see {server.log}")
        try:
            with urllib.request.urlopen(server.url + "/_stcore/health", timeout=2):
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.3)
    raise TimeoutError(f"{server.url} did not become healthy in {timeout:.0f} s")


def stop_server(server: Server) -> None:
    if server.process.poll() is None:
        os.killpg(server.process.pid, signal.SIGTERM)
        try:
            server.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.process.pid, signal.SIGKILL)
            server.process.wait()


def process_tree(pids: list[int]) -> list:
    """The psutil processes of ``pids`` and all their descendants (those still running)."""
    import psutil

    found = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            root = psutil.Process(pid)
            found += [root, *root.children(recursive=True)]
    return found


def cpu_by_process(processes: list) -> dict[int, float]:
    """User + system seconds of each process, by process id."""
    import psutil

    seconds = {}
    for p in processes:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            t = p.cpu_times()
            seconds[p.pid] = t.user + t.system
    return seconds


def cpu_since(pids: list[int], before: dict[int, float]) -> float:
    """CPU seconds the trees of ``pids`` used since ``before`` was taken: a process started
    since counts whole (a database connection opened during the run); one that ended since
    counts nothing (psutil cannot read it any more)."""
    now = cpu_by_process(process_tree(pids))
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in now.items())


def client_processes(servers: list[Server]) -> list:
    """This script and its descendants except the servers: Playwright's driver and Chromium,
    the annotators' side of the run (which shares the machine's cores with the servers)."""
    serving = {p.pid for p in process_tree([s.process.pid for s in servers])}
    return [p for p in process_tree([os.getpid()]) if p.pid not in serving]


def machine_cpu_seconds() -> float:
    """CPU seconds every core of the machine has spent busy since boot: user (guest time is in
    it already), nice, system and interrupts; not idle, waiting for I/O or stolen."""
    import psutil

    t = psutil.cpu_times()
    return t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)


async def quiet_machine() -> float:
    """Wait until the machine is :data:`QUIET_SHARE` busy or less over one second (at most
    :data:`SETTLE_TIMEOUT`); returns the seconds waited."""
    started = time.monotonic()
    while time.monotonic() - started < SETTLE_TIMEOUT:
        before, at = machine_cpu_seconds(), time.monotonic()
        await asyncio.sleep(1.0)
        if (machine_cpu_seconds() - before) / ((time.monotonic() - at) * (os.cpu_count() or 1)) <= QUIET_SHARE:
            break
    return time.monotonic() - started


def peak_rss_mb(processes: list) -> float:
    """The largest ``VmHWM`` (peak resident set) among the processes, in MB."""
    peak = 0
    for p in processes:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{p.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]))
    return peak / 1024


# --------------------------------------------------------------------------------------------
# Annotators


@dataclass
class Press:
    item: str  # the item on screen when the key was pressed
    key: str
    label: str  # the label of the button whose key was pressed
    pressed_at: float  # epoch ms, the page's clock (keydown)
    outcome: str  # "next" (the next item came), "refused" (a notice, same item), "timeout"
    drawn_at: float | None = None  # epoch ms: the next item's heading on screen
    answerable_at: float | None = None  # epoch ms: its answer buttons (with their keys) too
    notice: str = ""
    event_id: int | None = None  # from "Recorded: ... (event E)"
    recorded_item: str | None = None
    recorded_label: str | None = None


@dataclass
class Annotator:
    name: str
    server: int
    presses: list[Press] = field(default_factory=list)
    ignored: int = 0  # key presses the page did not act on (pressed again)
    error: str | None = None

    def latencies(self) -> list[float]:
        """Key press -> next item's heading, seconds, for the presses that brought one."""
        return [(p.drawn_at - p.pressed_at) / 1000 for p in self.presses if p.outcome == "next" and p.drawn_at]

    def recorded(self) -> list[Press]:
        return [p for p in self.presses if p.event_id is not None]


def parse_notice(press: Press) -> None:
    found = RECORDED.search(press.notice)
    if found:
        press.event_id = int(found["event"])
        press.recorded_item = found["item"].replace("\\", "")
        press.recorded_label = found["label"].replace("\\", "")


async def wait_next(page, item: str | None, answer: str | None, timeout: float) -> dict:
    """:data:`WAIT_NEXT`, with the timeout kept here: a page's own timers may be throttled."""
    try:
        return await asyncio.wait_for(page.evaluate(WAIT_NEXT, [item, answer, 10 * timeout * 1000]), timeout)
    except TimeoutError:
        shown = await page.evaluate("() => document.body ? document.body.innerText.slice(0, 300) : ''")
        return {"outcome": "timeout", "item": item, "notice": f"page shows: {shown!r}", "keyAt": 0}


async def sign_in(page, base: str, name: str) -> dict:
    """The gate's form, as a person fills it; returns the state once the first item is answerable."""
    await page.goto(base + "/", wait_until="domcontentloaded", timeout=120_000)
    await page.locator("#name").fill(name, timeout=120_000)
    await page.locator("#password").fill(PASSWORD)
    async with page.expect_navigation(wait_until="commit", timeout=120_000):
        await page.locator("#password").press("Enter")
    first = await wait_next(page, None, None, 600)
    if first["outcome"] != "next":
        raise RuntimeError(f"{name} saw no first item ({first['outcome']}): {first.get('notice')!r}")
    return first


async def annotate(page, who: Annotator, state: dict, start_at: float, stop_at: float, pace: float | None) -> None:
    """Press the first answer key whenever an item can be answered, until ``stop_at`` (epoch s)."""
    await asyncio.sleep(max(0.0, min(start_at, stop_at) - time.time()))
    last_press = 0.0
    while time.time() < stop_at:
        if pace is not None:
            wait = min(last_press + pace, stop_at) - time.time()
            if wait > 0:
                await asyncio.sleep(wait)
                if time.time() >= stop_at:
                    break
        last_press = time.time()
        press = Press(item=state["item"], key=state["key"], label=state["label"], pressed_at=0.0, outcome="")
        await page.keyboard.press(state["key"])
        result = await wait_next(page, state["item"], state["answer"], PRESS_TIMEOUT)
        if result["outcome"] == "ignored":
            who.ignored += 1
            if who.ignored > 50:
                who.error = f"the page ignored 50 key presses (the last on {press.item})"
                return
            last_press = 0.0  # pressed again at once
            continue
        press.pressed_at = result["keyAt"]
        press.outcome = result["outcome"]
        press.notice = result.get("notice") or ""
        who.presses.append(press)
        if result["outcome"] == "next":
            parse_notice(press)
            press.drawn_at = result["itemAt"]
            press.answerable_at = result["answerAt"]
            state = result
        elif result["outcome"] == "timeout":
            who.error = f"no next item {PRESS_TIMEOUT:.0f} s after a press on {press.item}: {press.notice!r}"
            return
        elif "Nothing left" in press.notice:
            return
        else:
            state = {**state, **{k: result[k] for k in ("answer", "key", "label") if result.get(k)}}


@dataclass
class Run:
    code: str
    backend: str
    servers: int
    n: int
    pace: str
    seconds: float = 0.0
    annotators: list[Annotator] = field(default_factory=list)
    cpu: float = 0.0
    db_cpu: float | None = None
    client_cpu: float = 0.0  # Chromium, Playwright and this script: the annotators' side
    machine_busy: float = 0.0  # share of all the machine's cores busy during the window
    peak_rss_mb: float = 0.0
    open_seconds: float = 0.0
    settle_seconds: float = 0.0  # after the first items, until the machine was quiet
    problems: list[str] = field(default_factory=list)

    @property
    def answers(self) -> int:
        return sum(len(a.recorded()) for a in self.annotators)

    @property
    def refused(self) -> int:
        return sum(p.outcome != "next" for a in self.annotators for p in a.presses)

    @property
    def ignored(self) -> int:
        return sum(a.ignored for a in self.annotators)

    def press_delay(self) -> list[float]:
        """The instrument's own delay: next item answerable -> next key press, seconds."""
        return [
            (b.pressed_at - a.answerable_at) / 1000
            for w in self.annotators
            for a, b in zip(w.presses, w.presses[1:], strict=False)
            if a.answerable_at is not None
        ]

    def latency(self, skip: int = 0) -> tuple[float, float, float, float]:
        """(median over annotators of their median, worst median, median of their p90, worst p90),
        without each annotator's first ``skip`` presses."""
        medians, p90s = [], []
        for a in self.annotators:
            times = sorted(a.latencies()[skip:])
            if times:
                medians.append(statistics.median(times))
                p90s.append(times[min(len(times) - 1, round(0.9 * (len(times) - 1)))])
        if not medians:
            return (float("nan"),) * 4
        return statistics.median(medians), max(medians), statistics.median(p90s), max(p90s)


class StickyProxy:
    """One address in front of the servers, sticky by the sign-in cookie (stdlib asyncio only).

    A request carrying a ``winnow_sign_in`` cookie goes to the server that cookie was first
    seen with; cookies are handed out to the servers in turn, so N browsers split evenly. A
    request without one (the sign-in form, which keeps no state in a process) goes to the servers
    in turn. Every plain request is forwarded with ``Connection: close``, so that each connection
    carries one request and is routed on its own cookie; a websocket upgrade is piped both ways
    until one side closes. For the benchmark only: no TLS, no timeouts, no limits.
    """

    def __init__(self, servers: list[Server]) -> None:
        self.backends = [(urlsplit(s.url).hostname or "127.0.0.1", urlsplit(s.url).port or 80) for s in servers]
        self.assigned: dict[str, int] = {}
        self._turn = 0
        self.server: asyncio.Server | None = None
        self.url = ""

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0, limit=1 << 20)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    def pick(self, cookie: str | None) -> int:
        if cookie is not None and cookie in self.assigned:
            return self.assigned[cookie]
        index = self._turn % len(self.backends)
        self._turn += 1
        if cookie is not None:
            self.assigned[cookie] = index
        return index

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        lines = head[:-4].split(b"\r\n")
        fields = [(name.strip().lower(), value) for name, _, value in (line.partition(b":") for line in lines[1:])]
        upgrade = any(name == b"upgrade" for name, _ in fields)
        cookie = None
        for name, value in fields:
            for part in value.decode("latin-1").split(";") if name == b"cookie" else ():
                key, _, val = part.strip().partition("=")
                if key == "winnow_sign_in":
                    cookie = val
        hop = (b"connection", b"keep-alive", b"proxy-connection")
        kept = [lines[0], *(line for line, (name, _) in zip(lines[1:], fields, strict=True) if name not in hop)]
        kept.append(b"Connection: Upgrade" if upgrade else b"Connection: close")
        host, port = self.backends[self.pick(cookie)]
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port, limit=1 << 20)
        except OSError:
            writer.close()
            return
        up_writer.write(b"\r\n".join(kept) + b"\r\n\r\n")

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
                while data := await source.read(1 << 16):
                    sink.write(data)
                    await sink.drain()

        upstream = asyncio.ensure_future(pipe(reader, up_writer))
        await pipe(up_reader, writer)  # the server closes after its answer (or the websocket)
        upstream.cancel()
        for w in (writer, up_writer):
            with contextlib.suppress(ConnectionError):
                w.close()


async def drive(
    servers: list[Server],
    n: int,
    seconds: float,
    pace: float | None,
    run: Run,
    window_opens: Callable[[], None],
    window_closes: Callable[[], None],
    *,
    proxy: bool = False,
) -> tuple[float, float]:
    """Sign N contexts in, call ``window_opens``, let them annotate for ``seconds``, call
    ``window_closes`` (the browser still running); returns the measured window (start, end) in
    epoch seconds: it ends when every context's last press has brought its next item. With
    ``proxy``, every context talks to one :class:`StickyProxy`."""
    from playwright.async_api import async_playwright

    front = StickyProxy(servers) if proxy else None
    if front is not None:
        await front.start()
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            pages, states = [], []
            opened = time.time()
            for i in range(n):
                run.annotators.append(Annotator(annotator_name(i), i % len(servers)))
                context = await browser.new_context(viewport={"width": 1400, "height": 900})
                await context.add_init_script(OBSERVER)
                pages.append(await context.new_page())
            states = await asyncio.gather(
                *(
                    sign_in(page, front.url if front else servers[a.server].url, a.name)
                    for page, a in zip(pages, run.annotators, strict=True)
                )
            )
            run.open_seconds = time.time() - opened
            run.settle_seconds = await quiet_machine()
            if front is not None:  # the server the proxy chose for each context's sign-in cookie
                for page, a in zip(pages, run.annotators, strict=True):
                    cookie = next(c["value"] for c in await page.context.cookies() if c["name"] == "winnow_sign_in")
                    a.server = front.assigned.get(cookie, -1)
            window_opens()
            start = time.time() + 0.5
            stop = start + seconds
            await asyncio.gather(
                *(
                    # At a human pace the contexts start spread over one period, as people do.
                    annotate(page, a, state, start + (i * pace / n if pace else 0.0), stop, pace)
                    for i, (page, a, state) in enumerate(zip(pages, run.annotators, states, strict=True))
                )
            )
            end = time.time()
            window_closes()
        finally:
            await browser.close()
            if front is not None:
                await front.stop()
    return start, end


def check_store(db: str, run: Run) -> None:
    """The store against what every context saw recorded; problems go to ``run.problems``."""
    from sqlalchemy import create_engine, text

    url = db if "://" in db else f"sqlite:///{db}"
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text(
                    "SELECT e.id, e.kind, i.external_id, e.label, a.name, d.label_names FROM answer_events e"
                    " JOIN instances i ON i.id = e.instance_id JOIN annotators a ON a.id = e.annotator_id"
                    " JOIN datasets d ON d.id = i.dataset_id ORDER BY e.id"
                )
            ).all()
    finally:
        engine.dispose()
    events: dict[int, tuple[str, str, str | None, str]] = {}
    for event_id, kind, item, label, who, names in rows:
        names = json.loads(names) if isinstance(names, str) else names
        events[event_id] = (kind, item, None if label is None else names[label], who)
    seen: dict[int, str] = {}
    for a in run.annotators:
        if a.error:
            run.problems.append(f"{a.name}: {a.error}")
        for p in a.recorded():
            event_id = int(p.event_id or 0)  # recorded(): presses with an event id
            if event_id in seen:
                run.problems.append(f"event {event_id} reported recorded twice ({a.name}, {seen[event_id]})")
            seen[event_id] = a.name
            stored = events.get(event_id)
            expected = ("answer", p.item, p.label, a.name)
            if stored is None:
                run.problems.append(f"{a.name}: event {p.event_id} ({p.item} is {p.label}) is not in the store")
            elif stored != expected or (p.recorded_item, p.recorded_label) != (p.item, p.label):
                run.problems.append(f"{a.name}: pressed {expected}, notice {p.notice!r}, store {stored}")
    for event_id, (kind, item, label, who) in events.items():
        if event_id not in seen:
            run.problems.append(f"event {event_id} ({kind} {item} {label} by {who}) was never shown as recorded")
    by_item: dict[str, list[str]] = {}
    for kind, item, _, who in events.values():
        if kind == "answer":
            by_item.setdefault(item, []).append(who)
    for item, whom in by_item.items():
        if len(whom) > 1:
            run.problems.append(f"{item} answered {len(whom)} times (overlap 1): {', '.join(whom)}")


def measure(
    code: Code,
    backend: Backend,
    key: str,
    n: int,
    servers: int,
    seconds: float,
    pace: float | None,
    folder: Path,
    *,
    proxy: bool = False,
) -> Run:
    """One run: a fresh copy of the store, ``servers`` servers on it, ``n`` annotators."""
    label = "full" if pace is None else f"{pace:g} s"
    run = Run(code.name, type(backend).__name__.removesuffix("Backend").lower(), servers, n, label)
    db = backend.copy(key, f"{key}_{n}_{time.monotonic_ns() % 10**9}")
    started = [start_server(code, db, folder, i) for i in range(servers)]
    before: dict[str, dict[int, float]] = {}

    def window_opens() -> None:
        # Every context shows its first item: the session is open in every server; from here
        # on the servers' CPU is the answers' (and the pages' runs that draw the next items).
        before["servers"] = cpu_by_process(process_tree([s.process.pid for s in started]))
        before["db"] = cpu_by_process(process_tree(backend.processes()))
        before["clients"] = cpu_by_process(client_processes(started))
        before["machine"] = {0: machine_cpu_seconds()}
        before["opened"] = {0: time.monotonic()}

    def window_closes() -> None:
        # Before the browser closes: the CPU of a process that has ended cannot be read.
        elapsed = time.monotonic() - before["opened"][0]
        run.machine_busy = (machine_cpu_seconds() - before["machine"][0]) / (elapsed * (os.cpu_count() or 1))
        run.cpu = cpu_since([s.process.pid for s in started], before["servers"])
        now = cpu_by_process(client_processes(started))
        run.client_cpu = sum(seconds - before["clients"].get(pid, 0.0) for pid, seconds in now.items())
        if backend.processes():
            run.db_cpu = cpu_since(backend.processes(), before["db"])

    try:
        for server in started:
            wait_healthy(server)
        start, end = asyncio.run(drive(started, n, seconds, pace, run, window_opens, window_closes, proxy=proxy))
        run.seconds = end - start
        run.peak_rss_mb = peak_rss_mb(process_tree([s.process.pid for s in started]))
    finally:
        for server in started:
            stop_server(server)
    check_store(db, run)
    backend.drop(db)
    return run


# --------------------------------------------------------------------------------------------
# Report


def versions() -> str:
    from importlib.metadata import version

    import streamlit

    chromium = subprocess.run([str(CHROMIUM), "--version"], capture_output=True, text=True).stdout.strip()
    return (
        f"Python {platform.python_version()}, Streamlit {streamlit.__version__}, "
        f"Playwright {version('playwright')}, {chromium or 'Chromium ?'}"
    )


def per_answer(cpu: float, answers: int) -> str:
    return f"{cpu / answers:.3f}" if answers else "–"


def table(runs: list[Run]) -> list[str]:
    with_db = any(r.db_cpu is not None for r in runs)
    head = (
        "| code | annotators | pace | answers | answers/s | key → next item, median | worst median | p90 | worst p90"
        " | presses refused | presses ignored | server CPU s/answer"
        + (" | PostgreSQL CPU s/answer" if with_db else "")
        + " | browsers CPU s/answer | machine busy | peak RSS MB | sign-in → first items s | then quiet after s"
        + " | check |"
    )
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for r in runs:
        median, worst_median, p90, worst_p90 = r.latency()
        lines.append(
            f"| {r.code} | {r.n} | {r.pace} | {r.answers} | {r.answers / r.seconds:.2f} | {median:.2f} s"
            f" | {worst_median:.2f} s | {p90:.2f} s | {worst_p90:.2f} s | {r.refused} | {r.ignored}"
            f" | {per_answer(r.cpu, r.answers)}"
            + (f" | {per_answer(r.db_cpu, r.answers) if r.db_cpu is not None else '–'}" if with_db else "")
            + f" | {per_answer(r.client_cpu, r.answers)} | {r.machine_busy:.0%}"
            + f" | {r.peak_rss_mb:,.0f} | {r.open_seconds:.1f} | {r.settle_seconds:.0f}"
            + f" | {'PASS' if not r.problems else 'FAIL'} |"
        )
    return lines


def ratios(runs: list[Run], this: str, baseline: str) -> list[str]:
    lines = []
    for n in sorted({r.n for r in runs}):
        new = next((r for r in runs if r.n == n and r.code == this), None)
        old = next((r for r in runs if r.n == n and r.code == baseline), None)
        if not (new and old and new.answers and old.answers):
            continue
        cpu = (new.cpu / new.answers) / (old.cpu / old.answers) if old.cpu else float("nan")
        speed = (new.answers / new.seconds) / (old.answers / old.seconds)
        lines.append(
            f"- N = {n}: server CPU per answer {cpu:.2f} × the baseline's; answers/s {speed:.2f} × the baseline's."
        )
    return lines


def write_docs(path: Path, title: str, body: str) -> None:
    """Replace (or add) the subsection ``### title`` of the section :data:`DOCS_SECTION` in
    ``path`` (one subsection per configuration, so runs of other ones stay)."""
    text = path.read_text(encoding="utf-8")
    start = text.find(DOCS_SECTION + "\n")
    if start < 0:
        text = text.rstrip("\n") + f"\n\n{DOCS_SECTION}\n\n"
        start = text.find(DOCS_SECTION + "\n")
    end = text.find("\n## ", start + len(DOCS_SECTION))
    end = len(text) if end < 0 else end + 1
    section = text[start:end]
    heading = f"### {title}\n"
    sub = section.find(heading)
    if sub < 0:
        section = section.rstrip("\n") + "\n\n" + heading + "\n" + body
    else:
        following = section.find("\n### ", sub + len(heading))
        rest = "" if following < 0 else "\n" + section[following + 1 :]
        section = section[:sub] + heading + "\n" + body + rest
    if not section.endswith("\n\n") and end < len(text):
        section = section.rstrip("\n") + "\n\n"
    path.write_text(text[:start] + section + text[end:], encoding="utf-8")


def parse_counts(value: str) -> list[int]:
    try:
        counts = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--annotators takes counts like 1,4,8,16, got {value!r}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"--annotators takes counts of at least 1, got {value!r}")
    return counts


def parse_pace(value: str) -> float | None:
    if value == "full":
        return None
    try:
        pace = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--pace is 'full' or seconds between answers, got {value!r}") from None
    if not pace > 0:
        raise argparse.ArgumentTypeError(f"--pace must be > 0 seconds, got {value!r}")
    return pace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="items")
    parser.add_argument("--features", type=int, default=32)
    parser.add_argument("--labels", type=int, default=10)
    parser.add_argument("--annotators", type=parse_counts, default=[1, 4, 8, 16], help="e.g. 1,4,8,16")
    parser.add_argument("--pace", type=parse_pace, default=None, help="'full' or seconds between answers")
    parser.add_argument("--seconds", type=float, default=60.0, help="measured window per run")
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--servers", type=int, default=1, help="winnow ui processes on the one store")
    parser.add_argument(
        "--proxy", action="store_true", help="one address: a sticky-by-cookie proxy in front of the servers"
    )
    parser.add_argument("--criterion", default=None, help="query criterion (default: winnow import's)")
    parser.add_argument("--baseline", metavar="REF", help="also run the same on this git ref, interleaved")
    parser.add_argument("--write-docs", action="store_true", help=f"write the table under {DOCS_SECTION[3:]}")
    parser.add_argument("--docs", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--json", type=Path, help="also write every press of every run to this file")
    args = parser.parse_args()
    if args.servers < 1:
        parser.error(f"--servers must be at least 1, got {args.servers}")
    if not CHROMIUM.exists():
        parser.error(f"Chromium not found at {CHROMIUM} (make browser installs Debian's)")

    from benchmarks.bench_ui import synthetic_csv

    load_start = os.getloadavg()
    commit = git("rev-parse", "--short", "HEAD")
    dirty = bool(git("status", "--porcelain", "--", "app", "engine", "migrations"))
    this = Code("this tree", ROOT, commit + (" + uncommitted changes" if dirty else ""))
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="winnow-bench-team-") as tmp, contextlib.ExitStack() as stack:
        folder = Path(tmp)
        csv = folder / "synthetic.csv"
        synthetic_csv(csv, args.n, args.features, args.labels)
        codes = [this]
        if args.baseline:
            codes.append(stack.enter_context(checked_out(args.baseline)))
        backend: Backend = SqliteBackend(folder) if args.backend == "sqlite" else PostgresBackend()
        stack.callback(backend.close)
        for i, code in enumerate(codes):
            print(f"making the store of {code.name} ({code.commit[:12]}) ...", file=sys.stderr, flush=True)
            make_template(code, backend, f"c{i}", csv, max(args.annotators), args.criterion)
        for n in args.annotators:
            for i, code in enumerate(codes):
                run = measure(
                    code, backend, f"c{i}", n, args.servers, args.seconds, args.pace, folder, proxy=args.proxy
                )
                runs.append(run)
                print(
                    f"{code.name}, N = {n}: {run.answers} answers in {run.seconds:.1f} s,"
                    f" {'PASS' if not run.problems else 'FAIL'}",
                    file=sys.stderr,
                    flush=True,
                )
                for problem in run.problems[:20]:
                    print(f"  {problem}", file=sys.stderr)
    load_end = os.getloadavg()

    pace = "full" if args.pace is None else f"{args.pace:g}"
    command = (
        f"python -m benchmarks.bench_team --n {args.n} --features {args.features}"
        f" --annotators {','.join(map(str, args.annotators))} --pace {pace} --seconds {args.seconds:g}"
        f" --backend {args.backend} --servers {args.servers}"
        + (" --proxy" if args.proxy else "")
        + (f" --baseline {args.baseline}" if args.baseline else "")
        + (f" --criterion {args.criterion}" if args.criterion else "")
    )
    speed = (
        "pressing the first answer key as soon as the next item can be answered"
        if args.pace is None
        else f"answering once every {pace} s at most"
    )
    routing = (
        "all behind one address (the benchmark's sticky-by-cookie proxy, which sent each context to one server)"
        if args.proxy
        else f"each on one server (context i on server i mod {args.servers})"
    )
    codes_line = "; ".join(f"{c.name} = {c.commit[:12]}" for c in codes)
    title = (
        f"{args.backend}, {args.servers} server{'s' if args.servers > 1 else ''}"
        + (" behind one address" if args.proxy else "")
        + (", full pace" if args.pace is None else f", one answer every {pace} s")
    )
    lines = [
        f"`{command}` — {args.n:,} items × {args.features} features, {args.labels} labels, a team session"
        f" (overlap 1) on {args.backend} served by {args.servers} `winnow ui` process(es); N Chromium"
        f" contexts, each a signed-in annotator, {routing},"
        f" {speed}"
        f" for {args.seconds:g} s per run. Code: {codes_line}.",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, load average"
        f" {load_start[0]:.2f} / {load_start[1]:.2f} / {load_start[2]:.2f} at the start and"
        f" {load_end[0]:.2f} / {load_end[1]:.2f} / {load_end[2]:.2f} at the end (1 / 5 / 15 min; the"
        f" browser runs on the same cores as the server). {versions()}.",
        "",
        *table(runs),
        "",
        "Latency is measured in the page: from the key's `keydown` to the next item's heading in the",
        "DOM; medians and p90 are per annotator, then the median over annotators and the worst one.",
        "Server CPU is user + system time of the `winnow ui` process trees during the window divided",
        "by the answers recorded; browsers CPU the same for Chromium, Playwright and the benchmark",
        "itself (the annotators' side, on the same cores); machine busy the share of all cores not idle",
        "over the window; peak RSS the largest `VmHWM` of a server process. The window opens once",
        f"every context shows its first item and the machine is then quiet ({QUIET_SHARE:.0%} busy or less",
        "over a second): the browsers go on working for a while after drawing their first item, work",
        "that on an annotator's own machine is theirs. Check: every",
        "press a context saw recorded is one answer event of its annotator, item and label; no other",
        "event; no item answered twice. Refused: the server answered the press with a notice, not",
        "the next item; ignored: the page sent nothing (pressed before it listened), pressed again.",
    ]
    delays = [d for r in runs if r.pace == "full" for d in r.press_delay()]
    if delays:
        lines += [
            "",
            f"At full pace a context presses {statistics.median(delays):.2f} s (median) after the next item"
            " became answerable: the instrument's own delay (Playwright's round trips on the loaded machine),"
            " part of every cycle, so answers/s is a floor; the latencies do not include it.",
        ]
    lines += [
        "",
        "The same latencies without each annotator's first answer (at a human pace, the N first answers"
        " come within one period):",
        *[
            "- {}, N = {}: median {:.2f} s (worst {:.2f} s), p90 {:.2f} s (worst {:.2f} s).".format(
                r.code, r.n, *r.latency(skip=1)
            )
            for r in runs
        ],
    ]
    if args.baseline:
        lines += ["", *ratios(runs, this.name, codes[1].name)]
    failed = [r for r in runs if r.problems]
    for r in failed:
        lines += ["", f"FAIL ({r.code}, N = {r.n}):", *[f"- {p}" for p in r.problems[:10]]]
    text = "\n".join(lines) + "\n"
    print(f"### {title}\n\n{text}")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in runs], indent=1), encoding="utf-8")
    if args.write_docs:
        write_docs(args.docs, title, text)
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
