"""open_store opens only winnow stores: someone else's database is refused and left as it was,
a missing one is created only when asked, and a SQLite store with its -wal and -shm files is
0600 whatever the umask (issue 23, item 7). SQLite and PostgreSQL."""

from __future__ import annotations

import os
import sqlite3
import stat

import pytest
from sqlalchemy import create_engine, inspect, text

from app.store import StoreUnavailable, close_stores, open_store
from app.store.db import check_store


def tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return set(inspect(connection).get_table_names())
    finally:
        engine.dispose()


def execute(url: str, *statements: str) -> None:
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            for statement in statements:
                connection.execute(text(statement))
    finally:
        engine.dispose()


def test_an_empty_database_becomes_a_store_only_when_asked(store_url):
    with pytest.raises(StoreUnavailable, match=r"^no winnow store at .*winnow init --db"):
        open_store(store_url, create=False)
    if store_url.startswith("sqlite"):
        assert not os.path.exists(store_url.removeprefix("sqlite:///"))
    else:
        assert tables(store_url) == set()
    open_store(store_url, create=True)
    close_stores()
    assert {"alembic_version", "datasets", "audit_events"} <= tables(store_url)
    open_store(store_url, create=False)  # a store now: opened


def test_someone_elses_database_is_refused_even_when_creating(store_url):
    if store_url.startswith("sqlite"):
        path = store_url.removeprefix("sqlite:///")
        with sqlite3.connect(path) as con:
            con.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
        con.close()
    else:
        execute(store_url, "CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    for create in (False, True):
        with pytest.raises(StoreUnavailable, match=r"is not a winnow store \(a .*database without winnow's tables\)"):
            open_store(store_url, create=create)
    assert tables(store_url) == {"invoices"}
    if store_url.startswith("sqlite"):
        with sqlite3.connect(path) as con:
            assert con.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        con.close()


def test_another_programs_alembic_revision_is_refused(store_url):
    execute(
        store_url,
        "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)",
        "INSERT INTO alembic_version VALUES ('ae1027a6acf')",
    )
    with pytest.raises(StoreUnavailable, match=r"is not a winnow store this version knows .*'ae1027a6acf'"):
        open_store(store_url, create=True)
    assert tables(store_url) == {"alembic_version"}


def test_check_store_passes_a_winnow_store(store_url):
    open_store(store_url)
    check_store(store_url)  # no exception: the schema is winnow's


def test_the_sqlite_store_and_its_wal_and_shm_are_0600_whatever_the_umask(tmp_path):
    previous = os.umask(0)
    try:
        Session = open_store(tmp_path / "w.db")
        with Session() as s:  # an open connection keeps -wal and -shm in place
            s.execute(text("SELECT count(*) FROM datasets")).scalar_one()
            modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    finally:
        os.umask(previous)
        close_stores()
    assert modes == {"w.db": 0o600, "w.db-wal": 0o600, "w.db-shm": 0o600}


def test_an_empty_file_made_by_the_user_becomes_0600_when_it_becomes_a_store(tmp_path):
    path = tmp_path / "w.db"
    path.touch(mode=0o644)
    path.chmod(0o644)
    with pytest.raises(StoreUnavailable, match="the file is empty"):
        open_store(path, create=False)
    open_store(path, create=True)
    close_stores()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
