"""The browser's word when another process holds the store's write lock (issue 44, item 3).

The store's refusal (:class:`app.store.StoreBusy`) names the store's path and the holder's pid
and command line, for the operator who runs ``winnow``; an annotator's browser showed all of it,
though ``docs/reliability.md`` promises the browser shows no server path. It now shows one
plain sentence, and the server's log keeps the details.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from app.store.db import close_stores
from app.store.models import AnswerEvent
from app.ui.errors import STORE_BUSY
from app.ui.state import STATE_KEY, Keys
from tests.store.test_lock_cli import lock_held
from tests.ui.conftest import count_rows, no_exception, plain, position_on_screen


def test_an_answer_while_another_process_writes_says_so_without_path_or_process(app, small_db, monkeypatch, caplog):
    monkeypatch.setenv("WINNOW_BUSY_TIMEOUT_MS", "300")
    close_stores()  # connections made from now on wait 0.3 s for a lock, not 30 s
    at = app(small_db)
    position = position_on_screen(at)
    label = int(np.flatnonzero(at.session_state[STATE_KEY].workbench.state.candidates[position])[0])
    with lock_held(f"sqlite:///{small_db}"), caplog.at_level(logging.WARNING, logger="winnow.store"):
        at.button(key=Keys.answer(position, label)).click().run()
    no_exception(at)
    shown = [plain(e.value) for e in at.error]
    assert shown == [STORE_BUSY]
    page = " ".join(plain(str(getattr(x, "value", ""))) for x in (*at.error, *at.markdown, *at.text))
    assert Path(small_db).name not in page and "pid" not in page and "python" not in page
    # The operator's log keeps what the annotator is not shown: the store and the holder.
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert Path(small_db).name in logged and " is busy: " in logged
    assert count_rows(small_db, AnswerEvent) == 0
    # Once the other process is done, the same press is recorded.
    at.button(key=Keys.answer(position, label)).click().run()
    no_exception(at)
    assert not at.error and count_rows(small_db, AnswerEvent) == 1
