"""Waiting for another process, a server or a lock: poll the condition until it holds, and fail
after a deadline that only a broken program reaches.

A kill, a commit or a release is never seen at once by the other side: the kernel, the
database server and the other process each take their turn, and on a loaded machine that turn
may come seconds later. Tests wait for what they need to see, never for a fixed time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["DEADLINE", "wait_for"]

T = TypeVar("T")

#: Seconds a test waits for a condition before it fails: far longer than any healthy wait,
#: even on two cores busy with other work.
DEADLINE = 60.0


def wait_for(condition: Callable[[], T], *, what: str, seconds: float = DEADLINE, every: float = 0.05) -> T:
    """Call ``condition`` until it returns something true, and return that.

    Parameters
    ----------
    condition : callable
        Asked again every ``every`` seconds (an exception it raises ends the wait).
    what : str
        What is waited for, for the failure's message (``"the importer's lock to be free"``).
    seconds : float, default :data:`DEADLINE`
        How long to wait before failing.
    every : float, default 0.05
        Seconds between two calls.

    Raises
    ------
    AssertionError
        When ``condition`` is still false after ``seconds``.
    """
    deadline = time.monotonic() + seconds
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {seconds:.0f} s for {what}; last seen: {result!r}")
        time.sleep(every)
