"""Code run in child processes by test_concurrency.py (spawned, so it must be importable)."""

from __future__ import annotations

import traceback
from typing import Any


def record_answers(
    url: str, session_name: str, annotator: str, n_answers: int, barrier: Any, results: Any
) -> None:
    """Open the store with the other processes, then record ``n_answers`` answers.

    ``barrier`` is shared with the parent and the other worker and passed three times: all
    open (and so migrate) the new store at once; the parent creates the dataset and the
    session; all workers start recording together. One transaction per answer. Reports
    ``(annotator, "ok" | "error", traceback)`` on ``results``.
    """
    try:
        from app.store import get_session_by_name, load_state, open_store, record_event
        from app.store import write_transaction

        barrier.wait(timeout=180)
        Session = open_store(url)
        barrier.wait(timeout=180)
        barrier.wait(timeout=180)
        with Session() as s:
            session_id = get_session_by_name(s, session_name).id
            state = load_state(s, session_id)
        first_candidate = state.original_candidates.argmax(axis=1)
        for i in range(n_answers):
            position = i % state.n_instances
            write_transaction(
                Session,
                lambda s: record_event(
                    s,
                    session_id=session_id,
                    instance_position=position,
                    annotator=annotator,
                    kind="answer",
                    label=int(first_candidate[position]),
                ),
            )
        results.put((annotator, "ok", ""))
    except BaseException:  # report everything to the parent, which fails the test
        barrier.abort()
        results.put((annotator, "error", traceback.format_exc()))
