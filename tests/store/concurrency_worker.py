"""Code run in child processes by test_concurrency.py (spawned, so it must be importable)."""

from __future__ import annotations

import traceback
from typing import Any

#: The annotator name every worker also answers and undoes as (a team account).
SHARED_ANNOTATOR = "team"


def record_answers(
    url: str,
    session_name: str,
    annotator: str,
    n_answers: int,
    n_shared: int,
    barrier: Any,
    results: Any,
) -> None:
    """Open the store with the other processes, then record answers and undos.

    ``barrier`` is shared with the parent and the other worker and passed three times: all
    open (and so migrate) the new store at once; the parent creates the dataset and the
    session; all workers start recording together. One transaction per event: ``n_answers``
    answers as ``annotator`` and, interleaved with them, ``n_shared`` pairs of an answer and
    an undo as :data:`SHARED_ANNOTATOR`, whose undos race with the other workers' (each undo
    must cancel a different event). Reports ``(annotator, "ok" | "error", traceback)`` on
    ``results``.
    """
    try:
        from app.store import get_session_by_name, load_state, open_store, record_event, write_transaction

        barrier.wait(timeout=180)
        Session = open_store(url)
        barrier.wait(timeout=180)
        barrier.wait(timeout=180)
        with Session() as s:
            session_id = get_session_by_name(s, session_name).id
            state = load_state(s, session_id)
        first_candidate = state.original_candidates.argmax(axis=1)

        def answer(position: int, who: str) -> None:
            write_transaction(
                Session,
                lambda s: record_event(
                    s,
                    session_id=session_id,
                    instance_position=position,
                    annotator=who,
                    kind="answer",
                    label=int(first_candidate[position]),
                ),
            )

        every = max(1, n_answers // max(1, n_shared))
        shared = 0
        for i in range(n_answers):
            answer(i % state.n_instances, annotator)
            if shared < n_shared and i % every == 0:
                answer(i % state.n_instances, SHARED_ANNOTATOR)
                write_transaction(
                    Session,
                    lambda s: record_event(s, session_id=session_id, annotator=SHARED_ANNOTATOR, kind="undo"),
                )
                shared += 1
        results.put((annotator, "ok", ""))
    except BaseException:  # report everything to the parent, which fails the test
        barrier.abort()
        results.put((annotator, "error", traceback.format_exc()))


def open_new_store(url: str, barrier: Any, results: Any) -> None:
    """Open (and so create and migrate) the store at the same moment as the other openers;
    report ``"ok"`` or the traceback on ``results``."""
    try:
        from app.store import open_store

        barrier.wait(timeout=180)
        open_store(url)
        results.put("ok")
    except BaseException:
        results.put(traceback.format_exc())
