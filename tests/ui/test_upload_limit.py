"""An upload over the size limit is refused by the app itself, before it is read (issue 13,
item 4): Streamlit's ``server.maxUploadSize`` is one cap, this is the second."""

from __future__ import annotations

import re

from app.io import MAX_UPLOAD_VARIABLE
from app.store.models import Dataset, Instance, LabellingSession
from app.ui.state import Keys
from tests.ui.conftest import count_rows, no_exception, small_csv_bytes


def test_an_upload_over_the_limit_is_refused(app, db, monkeypatch):
    monkeypatch.setenv(MAX_UPLOAD_VARIABLE, "1")
    content = small_csv_bytes(n=12_000)
    assert len(content) > 1_000_000
    at = app(db)
    at.switch_page("views/sessions.py").run()
    at.file_uploader(key=Keys.UPLOAD).set_value(("big.csv", content, "text/csv"))
    at.run()
    at.button(key=Keys.CREATE).click().run()
    no_exception(at)
    (error,) = [re.sub(r"\\(.)", r"\1", e.value) for e in at.error]  # as displayed: escapes removed
    assert error.startswith("big.csv: is ") and "uploads of at most 1,000,000 bytes are accepted" in error
    assert count_rows(db, Dataset) == count_rows(db, Instance) == count_rows(db, LabellingSession) == 0

    monkeypatch.setenv(MAX_UPLOAD_VARIABLE, "100")
    at.button(key=Keys.CREATE).click().run()
    no_exception(at)
    assert not at.error and count_rows(db, Instance) == 12_000
