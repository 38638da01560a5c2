"""Playwright's checks wait 5 s by default before they fail: a Streamlit rerun on a loaded
machine can take longer, so every ``expect`` here waits as long as the explicit ones do."""

from __future__ import annotations

import pytest

#: Milliseconds an ``expect(...)`` without its own ``timeout=`` waits for its condition.
EXPECT_TIMEOUT_MS = 30_000


@pytest.fixture(autouse=True, scope="session")
def _patient_expect() -> None:
    try:
        from playwright.sync_api import expect
    except ImportError:  # the tests that need it say so (tests.e2e.test_browser.require_chromium)
        return
    expect.set_options(timeout=EXPECT_TIMEOUT_MS)
