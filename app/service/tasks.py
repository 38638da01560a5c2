"""Heavy work with progress: the callback protocol, and builds shared by a whole process.

Importing a file, building a session's neighbour graph and its first scoring take minutes
at a million items. The service functions that do them accept a :class:`ProgressCallback`
and tell it, stage by stage, how many units (rows read, rows indexed, targets whose
neighbours are found) are done out of how many, with the elapsed time; the CLI draws that as
a progress bar and the browser app as a progress element.

:class:`BuildRegistry` runs such work in a background thread, once per key: a second caller
with the same key (another browser tab opening the same session) joins the running build
and sees the same progress instead of starting another. The app keeps one registry per
process (``st.cache_resource``); the registry itself imports nothing of Streamlit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

__all__ = ["ProgressUpdate", "ProgressCallback", "ProgressTracker", "BuildJob", "BuildRegistry", "STAGE_NAMES"]

T = TypeVar("T")

#: What each stage counts, as progress bars label it.
STAGE_NAMES: dict[str, str] = {
    "read": "rows read",
    "store": "rows stored",
    "load": "items loaded",
    "hash": "features hashed",
    "train": "rows the index is trained on",
    "check": "rows the recall is checked on",
    "index": "rows indexed",
    "search": "neighbours found",
    "save": "graph saved",
    "score": "targets scored",
}


@dataclass(frozen=True)
class ProgressUpdate:
    """Where one stage of a piece of work stands.

    ``total`` is ``None`` while the size of the stage is not known yet.
    """

    stage: str
    done: int
    total: int | None
    #: Seconds since the stage started.
    elapsed: float

    @property
    def label(self) -> str:
        """What the stage counts, e.g. ``"neighbours found"``."""
        return STAGE_NAMES.get(self.stage, self.stage)

    @property
    def fraction(self) -> float | None:
        """``done / total`` in [0, 1] (1 for an empty stage), ``None`` when the total is unknown."""
        if self.total is None:
            return None
        return 1.0 if self.total == 0 else min(1.0, self.done / self.total)

    @property
    def eta(self) -> float | None:
        """Seconds left in this stage at the rate so far; ``None`` until there is a rate."""
        fraction = self.fraction
        if fraction is None or fraction <= 0 or self.elapsed <= 0:
            return None
        return self.elapsed * (1 - fraction) / fraction

    def describe(self) -> str:
        """One line for people: ``neighbours found: 250,000 of 1,000,000 (25 %), about 30 s left``."""
        if self.total is None:
            return f"{self.label}: {self.done:,}"
        text = f"{self.label}: {self.done:,} of {self.total:,} ({100 * (self.fraction or 0):.0f} %)"
        eta = self.eta
        if eta is not None and self.done < self.total:
            text += f", about {format_seconds(eta)} left"
        return text


class ProgressCallback(Protocol):
    """Receives every :class:`ProgressUpdate` of a piece of work; must return quickly."""

    def __call__(self, update: ProgressUpdate) -> None: ...


def format_seconds(seconds: float) -> str:
    """``"42 s"``, ``"3 min 05 s"`` or ``"1 h 02 min"``."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class ProgressTracker:
    """Turns ``(stage, done, total)`` reports into timed :class:`ProgressUpdate` s.

    Parameters
    ----------
    callback : ProgressCallback or None
        Where updates go; ``None`` drops them (the work runs the same).
    """

    def __init__(self, callback: ProgressCallback | None) -> None:
        self.callback = callback
        self._stage: str | None = None
        self._started = time.monotonic()

    def __call__(self, stage: str, done: int, total: int | None) -> None:
        """Report ``done`` of ``total`` units of ``stage`` (a new stage restarts the clock)."""
        if stage != self._stage:
            self._stage, self._started = stage, time.monotonic()
        if self.callback is not None:
            self.callback(
                ProgressUpdate(
                    stage, int(done), None if total is None else int(total), time.monotonic() - self._started
                )
            )


@dataclass
class BuildJob(Generic[T]):
    """One piece of work running in a background thread; poll it, or wait for it."""

    key: Hashable
    latest: ProgressUpdate | None = None
    result: T | None = None
    error: BaseException | None = None
    finished: threading.Event = field(default_factory=threading.Event)
    #: Every update so far, oldest first (tests check the stages reach 100 %).
    history: list[ProgressUpdate] = field(default_factory=list)

    def report(self, update: ProgressUpdate) -> None:
        """The job's :class:`ProgressCallback`."""
        self.history.append(update)
        self.latest = update

    @property
    def running(self) -> bool:
        return not self.finished.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the job is finished or ``timeout`` seconds passed; whether it finished."""
        return self.finished.wait(timeout)


class BuildRegistry:
    """Background builds by key, each run at most once at a time.

    :meth:`start` returns the running (or finished) job of a key if there is one, so
    concurrent callers share one build; a failed job is replaced by a new one on the next
    :meth:`start`. Jobs of a ``group`` other than the given key are dropped when a new key
    starts in that group (a session's workbench for items since replaced), so their
    results can be garbage-collected.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[Hashable, BuildJob] = {}
        self._groups: dict[Hashable, Hashable] = {}
        #: How many builds were started (not joined) in this registry.
        self.started = 0

    def get(self, key: Hashable) -> BuildJob | None:
        """The job of ``key``, running or finished, if any."""
        with self._lock:
            return self._jobs.get(key)

    def start(
        self, key: Hashable, work: Callable[[ProgressCallback], T], *, group: Hashable | None = None
    ) -> BuildJob[T]:
        """The job of ``key``: the existing one unless it failed, else ``work`` in a new thread.

        ``work`` receives the job's progress callback and returns the job's result.
        """
        with self._lock:
            job = self._jobs.get(key)
            if job is not None and job.error is None:
                return job
            if group is not None:
                for other in [k for k, g in self._groups.items() if g == group and k != key]:
                    self._jobs.pop(other, None)
                    self._groups.pop(other, None)
                self._groups[key] = group
            job = self._jobs[key] = BuildJob(key)
            self.started += 1
        thread = threading.Thread(target=self._run, args=(job, work), name=f"winnow-build-{key}", daemon=True)
        thread.start()
        return job

    def discard(self, key: Hashable) -> None:
        """Forget the job of ``key`` (a running thread finishes, its result is dropped)."""
        with self._lock:
            self._jobs.pop(key, None)
            self._groups.pop(key, None)

    @staticmethod
    def _run(job: BuildJob[T], work: Callable[[ProgressCallback], T]) -> None:
        try:
            job.result = work(job.report)
        except BaseException as exc:  # reported to whoever polls the job, never lost in the thread
            job.error = exc
        finally:
            job.finished.set()
