"""Named points at which the durability tests kill winnow with SIGKILL, on purpose.

A test sets ``WINNOW_CRASH_AT=<point>`` in the environment of a ``winnow`` subprocess; when the
process reaches that point it sends itself ``SIGKILL`` (the ``kill -9`` of an out-of-memory
killer or a power cut: no ``finally``, no ``atexit``). The test then checks that what was
promised still holds (nothing or everything of an import; no half-written export and no
temporary file). Unset, as in every normal run, a crash point is one dictionary look-up.

Points
------
``import-after-first-batch``  an import has staged its first batch of instances
``import-before-publish``     an import has staged every instance, not yet published them
``export-before-rename``      an export file is written and synced, not yet moved into place
"""

from __future__ import annotations

import os
import signal

__all__ = ["CRASH_AT_VARIABLE", "CRASH_POINTS", "crash_point"]

#: The environment variable that names the point to crash at.
CRASH_AT_VARIABLE = "WINNOW_CRASH_AT"
#: Every point :func:`crash_point` is called with.
CRASH_POINTS: tuple[str, ...] = ("import-after-first-batch", "import-before-publish", "export-before-rename")


def crash_point(name: str) -> None:
    """Kill this process with SIGKILL when ``$WINNOW_CRASH_AT`` is ``name``; else do nothing."""
    if name not in CRASH_POINTS:
        raise ValueError(f"crash point {name!r} is not one of {', '.join(CRASH_POINTS)}")
    if os.environ.get(CRASH_AT_VARIABLE) == name:
        os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))
