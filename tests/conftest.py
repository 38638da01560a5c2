"""Fixtures every test shares.

The store's audit key is random in use (:func:`app.store.labels.audit_secret`), so which served
slots are audits, and which lot items they ask about, change from run to run. In-process tests
draw it from the test's own name instead: every test sees a different key, and a failure comes
back on the next run. Tests of the key itself ask for ``random_audit_key``.
"""

from __future__ import annotations

import hashlib
import secrets

import pytest

import app.store.labels


class _KeyFromTestName:
    """Stands in for the :mod:`secrets` module inside ``app.store.labels``."""

    def __init__(self, test_name: str) -> None:
        self._seed = hashlib.sha256(test_name.encode()).digest()

    def token_bytes(self, n: int) -> bytes:
        return hashlib.shake_256(self._seed).digest(n)


@pytest.fixture(autouse=True)
def _reproducible_audit_key(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if "random_audit_key" not in request.fixturenames:
        monkeypatch.setattr(app.store.labels, "secrets", _KeyFromTestName(request.node.nodeid))


@pytest.fixture
def random_audit_key() -> None:
    """The store's key drawn by :mod:`secrets`, as in use."""
    assert app.store.labels.secrets is secrets
