"""SQLite durability is a choice the store URL or the environment makes (issue 13, item 6)."""

from __future__ import annotations

import pytest

from app.store import StoreUnavailable, close_stores, database_url, open_store
from app.store.db import DEFAULT_SQLITE_SYNCHRONOUS, SQLITE_SYNCHRONOUS_VARIABLE

# PRAGMA synchronous reads back as a number.
LEVELS = {"OFF": 0, "NORMAL": 1, "FULL": 2, "EXTRA": 3}


def synchronous_of(Session) -> int:
    with Session() as s:
        return s.connection().exec_driver_sql("PRAGMA synchronous").scalar_one()


def test_the_default_is_normal(db_path, monkeypatch):
    monkeypatch.delenv(SQLITE_SYNCHRONOUS_VARIABLE, raising=False)
    assert DEFAULT_SQLITE_SYNCHRONOUS == "NORMAL"
    Session = open_store(db_path)
    assert synchronous_of(Session) == LEVELS["NORMAL"]
    with Session() as s:
        assert s.connection().exec_driver_sql("PRAGMA journal_mode").scalar_one() == "wal"


@pytest.mark.parametrize("level", ["full", "FULL", "extra", "normal"])
def test_the_url_chooses_the_level(db_path, level):
    Session = open_store(database_url(db_path) + f"?synchronous={level}")
    assert synchronous_of(Session) == LEVELS[level.upper()]
    # The option is winnow's: it is not handed to the sqlite3 driver, and the file is the same.
    assert Session.kw["bind"].url.query == {}
    assert db_path.exists()


def test_the_environment_chooses_the_level(db_path, monkeypatch):
    monkeypatch.setenv(SQLITE_SYNCHRONOUS_VARIABLE, "full")
    assert synchronous_of(open_store(db_path)) == LEVELS["FULL"]
    close_stores()
    # The URL wins over the environment.
    assert synchronous_of(open_store(database_url(db_path) + "?synchronous=normal")) == LEVELS["NORMAL"]


@pytest.mark.parametrize(
    ("url_option", "environment", "message"),
    [
        (
            "?synchronous=always",
            None,
            r"the URL's synchronous option must be one of OFF, NORMAL, FULL, EXTRA .*'always'",
        ),
        ("", "sometimes", r"\$WINNOW_SQLITE_SYNCHRONOUS must be one of .*'sometimes'"),
    ],
)
def test_a_bad_level_is_one_clear_error(db_path, monkeypatch, url_option, environment, message):
    if environment is not None:
        monkeypatch.setenv(SQLITE_SYNCHRONOUS_VARIABLE, environment)
    with pytest.raises(StoreUnavailable, match=message):
        open_store(database_url(db_path) + url_option)
    assert not db_path.exists()
