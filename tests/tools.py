"""The rule for tests that need a tool outside Python (Chromium, a PostgreSQL server, a Label
Studio server): run alone with ``pytest`` on a developer's machine without it, they are skipped
with the reason; under ``make test``, which installs every tool first and sets ``CI=true``, and
in CI, a missing one is a failure, so a green ``make test`` has run them all.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

__all__ = ["in_ci", "tool_missing"]


def in_ci() -> bool:
    """Whether ``$CI`` says this run is CI's (``true``, ``1`` or ``yes``, any case)."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def tool_missing(reason: str, *, install: str) -> NoReturn:
    """Skip the test for ``reason``, or fail it under ``CI=true``.

    Parameters
    ----------
    reason : str
        What is missing, e.g. ``"Chromium not found at /usr/bin/chromium"``.
    install : str
        The command that installs it (``"make browser"``), named in the failure.
    """
    if in_ci():
        pytest.fail(f"CI=true and {reason} (run `{install}` first)", pytrace=False)
    pytest.skip(f"{reason} (`{install}` installs it)")
