"""Fixtures every test shares.

The store's audit key is random in use (:func:`app.store.labels.audit_secret`), so which served
slots are audits, and which lot items they ask about, change from run to run. In-process tests
draw it from the test's own name instead: every test sees a different key, and a failure comes
back on the next run. Tests of the key itself ask for ``random_audit_key``.

``make test`` deals whole modules to two workers (``--dist loadfile --no-loadscope-reorder``):
each worker takes the next module in collection order once it is free. The slowest modules
(:data:`DEALT_FIRST`) are put first, so that no long module starts last and runs alone while the
other worker waits (longest first: the greedy order that balances two workers best).

Numerical libraries run on one thread in tests, in this process and in every process it starts
(the CLI, the servers): two workers already keep two cores busy, and BLAS threads spinning for a
core the other worker holds made small fits, the EM logistic model's in the promise replays
above all, up to eight times slower.
"""

from __future__ import annotations

import hashlib
import os
import secrets

import pytest
import threadpoolctl

for _threads in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")

import app.store.labels  # noqa: E402  (numpy reads the thread settings on import)

#: The slowest modules, slowest first, as measured in docs/test_suite.md. Only the order of the
#: run depends on it: a module missing here, or a new slow one, is run all the same.
DEALT_FIRST = (
    "tests/test_promise_replay.py",
    "tests/e2e/test_label_studio_server.py",
    "tests/e2e/test_done_browser.py",  # every answer by keyboard: 220–340 by the store's key
    "tests/cli/test_labels_cli.py",
    "tests/cli/test_cli.py",
    "tests/cli/test_label_studio_cli.py",
    "tests/e2e/test_browser.py",
    "tests/store/test_users.py",
    "tests/cli/test_hostile_corpus.py",
    "tests/cli/test_stores_cli.py",
    "tests/e2e/test_url_browser.py",
    "tests/cli/test_hostile_inputs.py",
    "tests/e2e/test_gate.py",
    "tests/cli/test_users_cli.py",
    "tests/store/test_lock_cli.py",
    "tests/store/test_session_snapshots.py",
    "tests/e2e/test_team_browser.py",
    "tests/store/test_repo.py",
)


threadpoolctl.threadpool_limits(1)  # for libraries loaded before this file (a plugin's numpy)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {module: i for i, module in enumerate(DEALT_FIRST)}
    items.sort(
        key=lambda item: rank.get(item.nodeid.partition("::")[0], len(rank))
    )  # stable: the rest keep their order


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
