"""Where the command line prints: the consoles, progress on stderr, and the user's errors.

Results go to standard output (:data:`out`); progress and errors to standard error (:data:`err`),
so a pipe gets only the results.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
import unicodedata
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from app.service.tasks import format_seconds
from engine.exceptions import InvalidInput

if TYPE_CHECKING:
    from app.service.tasks import ProgressCallback, ProgressUpdate


out = Console()
err = Console(stderr=True)


def printable(value: object) -> Text:
    r"""User content (an id, a label, an annotator's name) as terminal text: never markup, and
    every control, format or surrogate character escaped (``\x1b``, ``\u202e``), so a name
    holding an escape sequence cannot move the cursor, recolour or retitle the terminal.

    >>> printable("\x1b[31mred").plain
    '\\x1b[31mred'
    >>> printable("[bold]x").plain
    '[bold]x'
    """
    text = str(value)
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs") for ch in text):
        text = "".join(
            ch
            if unicodedata.category(ch) not in ("Cc", "Cf", "Cs")
            else ch.encode("unicode_escape").decode("ascii")
            if ord(ch) < 0x10000
            else f"\\U{ord(ch):08x}"
            for ch in text
        )
    return Text(text)


def json_safe(value: Any) -> Any:
    """``value`` with every NaN or infinite float (undefined figures) replaced by ``None``, so
    that ``json.dumps(..., allow_nan=False)`` writes standard JSON (``null``, never ``NaN``)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", None) == 0:  # numpy scalars
        return json_safe(value.item())
    return value


class UserError(InvalidInput):
    """A mistake in the command line the user can fix: printed as one line, exit status 2."""


#: ``always``: progress on stderr even when it is not a terminal (a log file, a CI job, a
#: test), as one plain line per step; ``never``: no progress even on a terminal; unset or
#: ``auto``: a live bar on a terminal only.
PROGRESS_VARIABLE = "WINNOW_PROGRESS"
PROGRESS_MODES = ("auto", "always", "never")
#: Seconds between two plain progress lines of one stage (its first and last are always written).
LINE_SECONDS = 2.0


def progress_mode() -> str:
    """How progress is shown: ``"bar"`` (a live bar on the terminal), ``"lines"`` or ``"off"``.

    Read from ``$WINNOW_PROGRESS`` (:data:`PROGRESS_MODES`); a value outside them is a usage
    error, not a silent default.
    """
    chosen = os.environ.get(PROGRESS_VARIABLE, "").strip().lower() or "auto"
    if chosen not in PROGRESS_MODES:
        raise UserError(f"${PROGRESS_VARIABLE} must be one of {', '.join(PROGRESS_MODES)}, not {chosen!r}")
    if chosen == "never":
        return "off"
    if err.is_terminal:
        return "bar"
    return "lines" if chosen == "always" else "off"


def _line(text: str) -> None:
    err.print(text, markup=False, highlight=False, soft_wrap=True)


@contextlib.contextmanager
def progress(description: str) -> Iterator[None]:
    """A spinner with elapsed time on stderr while work runs (see :func:`progress_mode`)."""
    mode = progress_mode()
    if mode == "lines":
        started = time.monotonic()
        _line(f"{description}...")
        yield
        _line(f"{description}: done in {format_seconds(time.monotonic() - started)}")
        return
    if mode == "off":
        yield
        return
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err, transient=True
    ) as bar:
        bar.add_task(description, total=None)
        yield


@contextlib.contextmanager
def progress_bar(description: str) -> Iterator[ProgressCallback | None]:
    """A bar per stage of the work (rows, neighbours found, %, time left) on stderr.

    Yields the :class:`~app.service.tasks.ProgressCallback` to hand to the service layer, or
    ``None`` when no progress is shown (see :func:`progress_mode`: scripts and pipes get none
    unless ``$WINNOW_PROGRESS`` is ``always``, and then one line per stage every
    :data:`LINE_SECONDS`, with its first and last update).
    """
    mode = progress_mode()
    if mode == "off":
        yield None
        return
    if mode == "lines":
        yield _line_reporter(description)
        return
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=err, transient=True) as bar:
        tasks: dict[str, TaskID] = {}

        def report(update: ProgressUpdate) -> None:
            task = tasks.get(update.stage)
            if task is None:
                task = tasks[update.stage] = bar.add_task(f"{description}: {update.label}", total=update.total)
            bar.update(task, completed=update.done, total=update.total)

        yield report


def _line_reporter(description: str) -> ProgressCallback:
    """Plain lines for a log: ``session s: neighbours found: 250 of 1,000 (25 %), about 30 s left``."""
    last_written: dict[str, float] = {}

    def report(update: ProgressUpdate) -> None:
        now = time.monotonic()
        finished = update.total is not None and update.done >= update.total
        first = update.stage not in last_written
        if first or finished or now - last_written[update.stage] >= LINE_SECONDS:
            if finished and last_written.get(update.stage) == -1.0:
                return  # the stage's end was written already
            last_written[update.stage] = -1.0 if finished else now
            _line(f"{description}: {update.describe()}")

    return report
