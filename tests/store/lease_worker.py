"""Code run in child processes by test_users.py (spawned, so it must be importable)."""

from __future__ import annotations

import traceback
from typing import Any


def take_next_item(url: str, session_id: int, user: str, preferred: list[int], barrier: Any, results: Any) -> None:
    """Open the store, wait for the other process, then ask for the next item once.

    Reports ``(user, position or None, "")`` or ``(user, None, traceback)`` on ``results``.
    """
    try:
        from app.store import next_item, open_store, write_transaction

        Session = open_store(url)
        barrier.wait(timeout=120)
        position = write_transaction(
            Session, lambda s: next_item(s, session_id=session_id, user=user, preferred=preferred)
        )
        results.put((user, position, ""))
    except BaseException:  # reported to the parent, which fails the test with it
        results.put((user, None, traceback.format_exc()))


def take_many_items(
    url: str, session_id: int, users: list[str], preferred: list[int], rounds: int, barrier: Any, results: Any
) -> None:
    """Open the store, then for ``rounds`` rounds: wait for the other process (so that both ask
    at the same moment), and for each of ``users`` reserve the next item and answer it (its
    first label).

    Reports ``([(user, position), ...], "")`` or ``([], traceback)`` on ``results``.
    """
    try:
        from app.store import next_item, open_store, record_event, write_transaction

        Session = open_store(url)
        taken: list[tuple[str, int]] = []
        for _ in range(rounds):
            barrier.wait(timeout=120)
            for user in users:
                position = write_transaction(
                    Session, lambda s, user=user: next_item(s, session_id=session_id, user=user, preferred=preferred)
                )
                if position is None:
                    continue
                taken.append((user, position))
                write_transaction(
                    Session,
                    lambda s, user=user, position=position: record_event(
                        s, session_id=session_id, annotator=user, kind="answer", instance_position=position, label=0
                    ),
                )
        results.put((taken, ""))
    except BaseException:  # reported to the parent, which fails the test with it
        results.put(([], traceback.format_exc()))
