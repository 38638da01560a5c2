"""One visitor cannot lock the others out of the app (issue 13, item 2).

The attack: create a session with k = 60 on a 40-row dataset. Every new tab opened the most
recent session, failed to build its 60-NN graph, and showed a traceback with server paths and
no navigation. Now the session is refused before it is stored, and a session that fails to load
anyway (stored by an older winnow, a database edited by hand) shows one line while the Sessions
page stays reachable.
"""

from __future__ import annotations

import re
from pathlib import Path

from app.service import Workbench
from app.store.db import open_store
from app.store.models import Dataset, Instance, LabellingSession, utcnow
from app.ui.state import STATE_KEY, Keys
from tests.ui.conftest import count_rows, no_exception, small_csv_bytes

ROOT = Path(__file__).resolve().parents[2]


def go_to_sessions(at):
    at.switch_page("views/sessions.py").run()
    no_exception(at)
    return at


def the_one_error(at) -> str:
    """The page's only error, as the visitor reads it (Markdown escapes removed)."""
    errors = [e.value for e in at.error]
    assert len(errors) == 1, errors
    text = re.sub(r"\\(.)", r"\1", errors[0])
    assert "\n" not in text and "Traceback" not in text and str(ROOT) not in text and "site-packages" not in text
    return text


def test_k_60_on_40_rows_is_refused_from_an_upload_and_from_a_stored_dataset(app, db):
    at = go_to_sessions(app(db))
    at.file_uploader(key=Keys.UPLOAD).set_value(("forty.csv", small_csv_bytes(n=40), "text/csv"))
    at.run()
    at.number_input(key=Keys.K).set_value(60)
    at.button(key=Keys.CREATE).click().run()
    no_exception(at)
    assert "forty.csv" in the_one_error(at) and "at least 61" in the_one_error(at)
    assert count_rows(db, Dataset) == count_rows(db, Instance) == count_rows(db, LabellingSession) == 0

    # The same 40 rows stored with a sensible k; then a second session with k = 60 on them.
    at.number_input(key=Keys.K).set_value(5)
    at.button(key=Keys.CREATE).click().run()
    no_exception(at)
    assert count_rows(db, LabellingSession) == 1
    go_to_sessions(at)
    at.radio(key=Keys.SOURCE).set_value("A dataset already in the database").run()
    at.selectbox(key=Keys.DATASET).set_value("forty")
    at.text_input(key=Keys.NEW_NAME).set_value("k60")
    at.number_input(key=Keys.K).set_value(60)
    at.button(key=Keys.CREATE).click().run()
    no_exception(at)
    assert "k=60 must be smaller than the number of items of dataset 'forty' (40)" in the_one_error(at)
    assert count_rows(db, LabellingSession) == 1

    # A new visitor opens the app on the good session.
    fresh = app(db)
    assert not fresh.error
    assert fresh.session_state[STATE_KEY].workbench.config.name == "forty"


def _store_broken_session(db: str) -> None:
    """What an older winnow stored without checking k: k = 60 on the 40-row dataset."""
    with open_store(db).begin() as s:
        dataset_id = s.query(Dataset.id).filter(Dataset.name == "forty").scalar()
        now = utcnow()
        s.add(
            LabellingSession(
                name="k60",
                dataset_id=dataset_id,
                k=60,
                weighting="uniform",
                criterion="apl",
                target_set="all",
                created_at=now,
                updated_at=now,
            )
        )


def test_a_session_that_cannot_be_opened_locks_nobody_out(app, db):
    at = go_to_sessions(app(db))
    at.file_uploader(key=Keys.UPLOAD).set_value(("forty.csv", small_csv_bytes(n=40), "text/csv"))
    at.number_input(key=Keys.K).set_value(5)
    at.run()
    at.button(key=Keys.CREATE).click().run()
    no_exception(at)
    _store_broken_session(db)  # now the most recent session: every new tab starts on it

    for _ in range(2):  # every new visitor, and every rerun of their tab
        visitor = app(db)
        no_exception(visitor)
        message = the_one_error(visitor)
        assert message.startswith("This session cannot be opened: ") and "Sessions page" in message
        assert "k=60" in message
        assert visitor.sidebar.markdown[0].value == "**No session open**"
        visitor.run()
        no_exception(visitor)

    # The Sessions page is reachable and opens the good session.
    go_to_sessions(visitor)
    good = next(x for x in visitor.selectbox(key=Keys.OPEN_SESSION).options if "forty" in x and "k=5" in x)
    visitor.selectbox(key=Keys.OPEN_SESSION).select(good).run()
    visitor.button(key=Keys.OPEN_BUTTON).click().run()
    no_exception(visitor)
    assert visitor.session_state[STATE_KEY].workbench.config.name == "forty"


def test_an_unexpected_failure_shows_no_details(app, small_db, monkeypatch):
    def explode(*args, **kwargs):
        raise RuntimeError(f"internal failure in {ROOT}/secret.py")

    monkeypatch.setattr(Workbench, "open", explode)
    at = app(small_db)
    message = the_one_error(at)
    assert "unexpected error" in message and "secret" not in message and "RuntimeError" not in message
    go_to_sessions(at)


def test_error_details_are_off_outside_development():
    """Set by the server script itself, so no config file in the working folder turns them on
    (tests/e2e/test_gate.py starts the server from such a folder)."""
    from streamlit import config

    from app.ui.options import apply_server_options

    try:
        apply_server_options(dev=False)
        assert config.get_option("client.showErrorDetails") == "none"
        assert config.get_option("client.toolbarMode") == "viewer"
        apply_server_options(dev=True)
        assert config.get_option("client.showErrorDetails") == "full"
    finally:
        apply_server_options(dev=False)
