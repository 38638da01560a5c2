"""The Sessions page: create from an upload or a stored dataset, open, and the upload errors."""

from __future__ import annotations

import pytest

from app.service import session_label_settings
from app.store import list_sessions
from app.store.db import open_store
from app.store.models import Dataset, Instance, LabellingSession
from app.ui.state import STATE_KEY, Keys
from tests.ui.conftest import count_rows, no_exception, plain, small_csv_bytes


def go_to_sessions(at):
    at.switch_page("views/sessions.py").run()
    no_exception(at)
    return at


def test_upload_creates_a_dataset_and_a_session_with_the_chosen_settings(app, db):
    at = go_to_sessions(app(db))
    at.file_uploader(key=Keys.UPLOAD).set_value(("birds.csv", small_csv_bytes(n=60), "text/csv"))
    at.run()
    assert at.text_input(key=Keys.NEW_NAME).placeholder == "birds"  # empty: named after the file
    assert at.selectbox(key=Keys.CRITERION).value == "decision_change"  # the default strategy
    at.text_input(key=Keys.NEW_NAME).set_value("week1")
    at.number_input(key=Keys.K).set_value(7)
    at.selectbox(key=Keys.WEIGHTING).set_value("distance")
    at.selectbox(key=Keys.CRITERION).set_value("pl").run()
    assert any("exact possible labels" in c.value for c in at.caption)  # what the criterion asks, uncut
    # The model-label settings are on the form too (percent).
    assert at.number_input(key=Keys.new_label_setting("max_error")).value == 5.0
    at.number_input(key=Keys.new_label_setting("max_error")).set_value(10.0)
    at.number_input(key=Keys.new_label_setting("audit_share")).set_value(20.0)
    at.button(key=Keys.CREATE).click().run()
    no_exception(at)
    saved = session_label_settings(open_store(db), "week1")
    assert (saved.max_error, saved.confidence, saved.audit_share) == pytest.approx((0.10, 0.90, 0.20))

    with open_store(db)() as s:
        (session,) = list_sessions(s)
        assert (session.name, session.k, session.weighting, session.criterion, session.target_set) == (
            "week1",
            7,
            "distance",
            "pl",
            "all",
        )
        assert session.dataset.name == "birds"
    assert count_rows(db, Instance) == 60
    # The new session is open and the app moved to the Query page.
    assert at.session_state[STATE_KEY].session_id == session.id
    assert any(h.value.startswith("Item ") for h in at.subheader)


@pytest.mark.parametrize(
    "file_name, content, message",
    [
        ("broken.csv", b"id,f0\na,1\nb,2\n", "broken.csv"),
        (
            "blank.csv",
            b"id,candidates,f0\n" + b"".join(f"r{i},a|b,{i}\n".encode() for i in range(12)).replace(b"r3,a|b", b"r3,"),
            "row 4",
        ),
        ("short.csv", b"id,candidates,f0\na,x|y,1\nb,x,2\n", "short.csv"),
    ],
)
def test_a_bad_upload_shows_the_readers_message_and_writes_nothing(app, db, file_name, content, message):
    at = go_to_sessions(app(db))
    at.file_uploader(key=Keys.UPLOAD).set_value((file_name, content, "text/csv"))
    at.run()
    at.button(key=Keys.CREATE).click().run()
    no_exception(at)
    errors = [plain(e.value) for e in at.error]
    assert len(errors) == 1 and message in errors[0] and file_name in errors[0], errors
    assert "winnow-upload-" not in errors[0]  # the temporary copy is not named
    assert "\n" not in errors[0]
    assert count_rows(db, Dataset) == count_rows(db, LabellingSession) == count_rows(db, Instance) == 0


def test_names_are_checked_before_anything_is_written(app, small_db):
    at = go_to_sessions(app(small_db))
    at.file_uploader(key=Keys.UPLOAD).set_value(("other.csv", small_csv_bytes(n=30), "text/csv"))
    at.run()
    at.text_input(key=Keys.NEW_NAME).set_value("small")  # taken
    at.button(key=Keys.CREATE).click().run()
    assert "already exists" in plain(at.error[0].value)
    at.file_uploader(key=Keys.UPLOAD).set_value(("small.csv", small_csv_bytes(n=30), "text/csv"))
    at.text_input(key=Keys.NEW_NAME).set_value("fresh")
    at.run()
    at.button(key=Keys.CREATE).click().run()
    assert "dataset called 'small'" in plain(at.error[0].value)
    assert count_rows(small_db, Dataset) == count_rows(small_db, LabellingSession) == 1


def test_create_from_a_stored_dataset_then_reopen_the_first_session(app, small_db):
    at = go_to_sessions(app(small_db))
    first = at.session_state[STATE_KEY].session_id
    at.radio(key=Keys.SOURCE).set_value("A dataset already in the database").run()
    at.selectbox(key=Keys.DATASET).set_value("small")
    at.text_input(key=Keys.NEW_NAME).set_value("small-pl")
    at.selectbox(key=Keys.CRITERION).set_value("most_partial")
    at.selectbox(key=Keys.TARGET_SET).set_value("unlabelled")
    at.button(key=Keys.CREATE).click().run()
    no_exception(at)
    second = at.session_state[STATE_KEY].session_id
    assert second != first
    assert at.session_state[STATE_KEY].workbench.config.criterion == "most_partial"
    assert count_rows(small_db, Dataset) == 1 and count_rows(small_db, LabellingSession) == 2

    go_to_sessions(at)
    at.selectbox(key=Keys.OPEN_SESSION).set_value(first).run()
    at.button(key=Keys.OPEN_BUTTON).click().run()
    no_exception(at)
    assert at.session_state[STATE_KEY].workbench.config.name == "small"
    assert at.sidebar.text[0].value == "small\ndataset small"


def test_the_open_sessions_keyboard_keys_are_edited_checked_and_used(app, small_db):
    from app.service import hotkeys_text
    from app.store import default_hotkeys, load_state

    at = go_to_sessions(app(small_db))
    bench = at.session_state[STATE_KEY].workbench
    field = Keys.hotkeys(bench.session_id)
    labels = list(bench.label_names)
    assert at.text_area(key=field).value == hotkeys_text(default_hotkeys(labels), labels)

    at.text_area(key=field).set_value("n = ant\n2 = bee").run()  # N is "none of these"
    at.button(key=Keys.HOTKEYS_SAVE).click().run()
    no_exception(at)
    assert "line 1" in plain(at.error[0].value) and "none_of_these" in plain(at.error[0].value)
    with open_store(small_db)() as s:
        assert load_state(s, bench.session_id).config.hotkeys is None  # nothing stored

    at.text_area(key=field).set_value("9 = ant\nb = bee\n = cat").run()
    at.button(key=Keys.HOTKEYS_SAVE).click().run()
    no_exception(at)
    assert at.success
    with open_store(small_db)() as s:
        assert load_state(s, bench.session_id).config.hotkeys == {"ant": "9", "bee": "b"}

    at.switch_page("views/query.py").run()
    shortcuts = {b.label: b.proto.shortcut for b in at.button if b.key and b.key.startswith("query_answer_")}
    expected = {"ant": "9", "bee": "b", "cat": "", "dog": "", "eel": ""}
    assert shortcuts and all(expected[name] == key for name, key in shortcuts.items())

    go_to_sessions(at)
    at.button(key=Keys.HOTKEYS_RESET).click().run()
    assert at.text_area(key=field).value == hotkeys_text(default_hotkeys(labels), labels)
    with open_store(small_db)() as s:
        assert load_state(s, bench.session_id).config.hotkeys is None
