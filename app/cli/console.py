"""Where the command line prints: the consoles, progress on stderr, and the user's errors.

Results go to standard output (:data:`out`); progress and errors to standard error (:data:`err`),
so a pipe gets only the results.
"""

from __future__ import annotations

import contextlib
import math
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


@contextlib.contextmanager
def progress(description: str) -> Iterator[None]:
    """A spinner with elapsed time on stderr while work runs (only on a terminal)."""
    if not err.is_terminal:
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

    Yields the :class:`~app.service.tasks.ProgressCallback` to hand to the service layer,
    or ``None`` when stderr is not a terminal (scripts and pipes get no bar).
    """
    if not err.is_terminal:
        yield None
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
