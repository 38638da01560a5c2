"""Every command's ``--help`` reads well at 80 columns (issue 44, item 8).

typer keeps a docstring's line breaks after its first paragraph, so at 80 columns a sentence
broke where the source did and again where the terminal did ("with no error among" / "them");
examples ran over into the next line. :func:`app.cli.entry.readable_help` joins each prose
paragraph for the terminal to wrap, and the examples are written to fit.
"""

from __future__ import annotations

import os
import subprocess

import pytest
import typer.main

from app.cli import app, readable_help
from tests.cli.conftest import WINNOW

#: Columns of the narrowest terminal the help is written for.
WIDTH = 80
#: A line of a prose paragraph shorter than this, with more of the paragraph after it, was
#: broken by the source rather than wrapped by the terminal.
SHORTEST_WRAPPED = 55


def command_paths(command=None, path=()) -> list[tuple[str, ...]]:
    command = command or typer.main.get_command(app)
    found = [path]
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        found += command_paths(sub, (*path, name))
    return found


def description(help_text: str) -> list[list[str]]:
    """The paragraphs between the usage line and the first panel, as lines without padding."""
    lines = help_text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("Usage:")) + 1
    end = next((i for i, line in enumerate(lines) if line.startswith("╭")), len(lines))
    paragraphs: list[list[str]] = [[]]
    for line in lines[start:end]:
        if line.strip():
            paragraphs[-1].append(line.strip())
        elif paragraphs[-1]:
            paragraphs.append([])
    return [p for p in paragraphs if p]


@pytest.mark.parametrize("path", command_paths(), ids=lambda p: " ".join(p) or "winnow")
def test_help_reads_well_at_80_columns(path):
    env = {**os.environ, "COLUMNS": str(WIDTH), "NO_COLOR": "1", "TERM": "dumb"}
    result = subprocess.run(
        [str(WINNOW), *path, "--help"], capture_output=True, text=True, env=env, timeout=120, check=True
    )
    assert all(len(line.rstrip()) <= WIDTH for line in result.stdout.splitlines()), result.stdout
    for paragraph in description(result.stdout):
        if paragraph[0].startswith("Example"):
            # One command per line; a long one goes on after a trailing backslash.
            assert all(len(line) <= WIDTH - 2 for line in paragraph), paragraph
            assert not any(line == "\\" for line in paragraph), paragraph
            continue
        broken = [line for line in paragraph[:-1] if len(line) < SHORTEST_WRAPPED]
        assert not broken, f"{' '.join(path)}: a sentence broken mid-line: {paragraph}"


def test_readable_help_joins_prose_and_keeps_examples():
    text = "Show it.\n\nWith no error among\nthem, more.\n\nExamples:\nwinnow a \\\n  --b\nwinnow c"
    joined = "Show it.\n\nWith no error among them, more.\n\nExamples:\nwinnow a \\\n  --b\nwinnow c"
    assert readable_help(text) == joined
