"""Where the command line prints: the consoles, progress on stderr, and the user's errors.

Results go to standard output (:data:`out`); progress and errors to standard error (:data:`err`),
so a pipe gets only the results.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

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

from engine.exceptions import InvalidInput

if TYPE_CHECKING:
    from app.service.tasks import ProgressCallback, ProgressUpdate


out = Console()
err = Console(stderr=True)


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
