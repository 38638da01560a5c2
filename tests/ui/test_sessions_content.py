"""The Sessions page's upload form for items with content: column choices, images beside the
data file (issue 11)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd

from app.ui.state import Keys
from tests.ui.conftest import no_exception

# The page's widget keys (importing the page would run it).
MEDIA_UPLOAD = "sessions_media_upload"
COLUMN_KEYS = {
    "text_column": "sessions_text_column",
    "image_column": "sessions_image_column",
    "audio_column": "sessions_audio_column",
}
IGNORE_COLUMNS = "sessions_ignore_columns"

SAMPLES = Path(__file__).resolve().parents[2] / "sample_data"


def rows(db: str, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


def test_a_text_upload_with_a_chosen_text_column(app, db):
    frame = pd.read_csv(SAMPLES / "texts.csv").head(40).rename(columns={"text": "body"})
    frame["notes"] = "n"
    at = app(db)
    at.switch_page("views/sessions.py").run()
    at.file_uploader(key=Keys.UPLOAD).set_value(("reviews.csv", frame.to_csv(index=False).encode(), "text/csv"))
    at.run()
    no_exception(at)
    at.selectbox(key=COLUMN_KEYS["text_column"]).set_value("body")
    at.multiselect(key=IGNORE_COLUMNS).set_value(["notes"])
    at.button(key=Keys.CREATE).click().run()
    no_exception(at)
    assert not at.error, [e.value for e in at.error]
    assert rows(db, "SELECT name, featurizer FROM datasets") == [("reviews", "tfidf-svd")]
    assert rows(db, "SELECT text FROM instances ORDER BY position LIMIT 1") == [(frame["body"][0],)]


def test_a_labels_file_with_its_png_files(app, db, tmp_path, monkeypatch):
    monkeypatch.setenv("WINNOW_MEDIA_DIR", str(tmp_path / "media"))
    labels = pd.read_csv(SAMPLES / "photos_labels.csv").head(15)
    at = app(db)
    at.switch_page("views/sessions.py").run()
    at.file_uploader(key=Keys.UPLOAD).set_value(("labels.csv", labels.to_csv(index=False).encode(), "text/csv"))
    at.file_uploader(key=MEDIA_UPLOAD).set_value(
        [(p, (SAMPLES / "photos" / p).read_bytes(), "image/png") for p in labels["path"]]
    )
    at.run()
    at.button(key=Keys.CREATE).click().run()
    no_exception(at)
    assert not at.error, [e.value for e in at.error]
    assert rows(db, "SELECT count(*) FROM instances WHERE media_kind = 'image'") == [(15,)]
