"""Fixtures for the page tests: a temporary SQLite store per test and an AppTest factory.

The app reads ``--db`` from ``sys.argv``; ``AppTest`` runs the script in this process, so
the tests set ``sys.argv`` as ``streamlit run app/ui/Home.py -- --db FILE`` would.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import func, select
from streamlit.testing.v1 import AppTest

from app.service import create_session, import_file
from app.store import event_log, list_sessions
from app.store.db import close_stores, open_store

ROOT = Path(__file__).resolve().parents[2]
HOME = ROOT / "app" / "ui" / "Home.py"
SAMPLE = ROOT / "sample_data" / "digits_partial.csv"
TEXTS = ROOT / "sample_data" / "texts.csv"
PHOTOS = ROOT / "sample_data" / "photos"
PHOTO_LABELS = ROOT / "sample_data" / "photos_labels.csv"
LABELS = ["ant", "bee", "cat", "dog", "eel"]


def small_table(n: int = 90, seed: int = 0) -> pd.DataFrame:
    """Five well-separated clusters in 4-D; every item's set holds its true label."""
    rng = np.random.default_rng(seed)
    truth = np.arange(n) % len(LABELS)
    X = rng.normal(scale=0.6, size=(n, 4)) + truth[:, None] * 3.0
    sets = []
    for i, t in enumerate(truth):
        extra = rng.choice([m for m in range(len(LABELS)) if m != t], size=i % 3, replace=False)
        sets.append("|".join(LABELS[m] for m in sorted({int(t), *map(int, extra)})))
    table = pd.DataFrame(X, columns=[f"f{j}" for j in range(4)])
    table.insert(0, "true_label", [LABELS[t] for t in truth])
    table.insert(0, "candidates", sets)
    table.insert(0, "id", [f"i{i:03d}" for i in range(n)])
    return table


def small_csv_bytes(**kwargs) -> bytes:
    return small_table(**kwargs).to_csv(index=False).encode()


@pytest.fixture(autouse=True)
def _fresh_stores():
    yield
    close_stores()


@pytest.fixture(autouse=True)
def _served_on_localhost():
    """The pages run as `winnow ui` serves them, on localhost (single-user mode while the store
    has no users). AppTest starts no server, so the option is set as the server would have it."""
    from streamlit import config

    before = config.get_option("server.address")
    config.set_option("server.address", "localhost")
    yield
    config.set_option("server.address", before)


@pytest.fixture
def db(tmp_path: Path) -> str:
    """An empty (migrated) store."""
    path = str(tmp_path / "ui.db")
    open_store(path)
    return path


@pytest.fixture
def small_db(db: str, tmp_path: Path) -> str:
    """A store with one session, ``small``, on the 90-item clustered dataset (k=5)."""
    csv = tmp_path / "small.csv"
    csv.write_bytes(small_csv_bytes())
    Session = open_store(db)
    dataset_id, _ = import_file(Session, csv, name="small", min_rows=6)
    create_session(
        Session, dataset_id=dataset_id, name="small", k=5, weighting="uniform", criterion="apl", target_set="all"
    )
    return db


@pytest.fixture
def digits_db(db: str) -> str:
    """A store with the bundled 800 8x8 digits as session ``demo`` (image layout)."""
    Session = open_store(db)
    dataset_id, _ = import_file(Session, SAMPLE, name="digits_partial", min_rows=11)
    create_session(
        Session, dataset_id=dataset_id, name="demo", k=10, weighting="uniform", criterion="apl", target_set="all"
    )
    return db


@pytest.fixture
def texts_db(db: str) -> str:
    """A store with the bundled 300 news snippets (text items) as session ``texts``."""
    Session = open_store(db)
    dataset_id, _ = import_file(Session, TEXTS, name="texts", min_rows=11)
    create_session(
        Session, dataset_id=dataset_id, name="texts", k=10, weighting="uniform", criterion="apl", target_set="all"
    )
    return db


@pytest.fixture
def photos_db(db: str) -> str:
    """A store with the bundled 96 photos (an image folder and its labels CSV) as ``photos``."""
    Session = open_store(db)
    dataset_id, _ = import_file(Session, PHOTOS, name="photos", labels=PHOTO_LABELS, min_rows=11)
    create_session(
        Session, dataset_id=dataset_id, name="photos", k=10, weighting="uniform", criterion="apl", target_set="all"
    )
    return db


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], AppTest]:
    """``app(db)`` -> a fresh AppTest (one browser tab) of Home.py on that store, already run.

    The tab's URL names the annotator ``tester`` (``annotator=None``: a first visit, nobody
    named), as a reload of a tab where someone typed their name would."""

    def make(db: str, *, run: bool = True, annotator: str | None = "tester") -> AppTest:
        monkeypatch.setattr(sys, "argv", [str(HOME), "--", "--db", db])
        at = AppTest.from_file(str(HOME), default_timeout=60)
        if annotator is not None:
            at.query_params["annotator"] = annotator
        if run:
            at.run()
            assert not at.exception, [e.value for e in at.exception]
        return at

    return make


def events(db: str, session: str | None = None) -> list[dict]:
    """The event log of a session (the only one when ``session`` is None)."""
    Session = open_store(db)
    with Session() as s:
        sessions = list_sessions(s)
        chosen = sessions[0] if session is None else next(x for x in sessions if x.name == session)
        return event_log(s, chosen.id)


def count_rows(db: str, model) -> int:
    Session = open_store(db)
    with Session() as s:
        return int(s.scalar(select(func.count()).select_from(model)))


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def plain(markdown: str) -> str:
    """The text an escaped Markdown string displays (the backslashes before punctuation gone)."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)


def position_on_screen(at: AppTest) -> int:
    """The position of the item the Query page asks about (its widget keys name it)."""
    prefix = "query_none_"
    found = [int(b.key[len(prefix) :]) for b in at.button if b.key and b.key.startswith(prefix)]
    assert len(found) == 1, found
    return found[0]


def sign_in(at: AppTest, db: str, name: str, password: str) -> AppTest:
    """Sign a tab in as a browser does: the sign-in form starts a signed-in session, and the
    gate passes its handle to Streamlit on every connection, which puts it in ``st.user``
    (``at.user`` here). Then run the tab."""
    from app.service.auth import open_sign_in, sign_in_handle
    from app.ui.gate import IDENTITY_KEY

    _, token = open_sign_in(open_store(db), name, password)
    at.user = {IDENTITY_KEY: sign_in_handle(token)}
    at.run()
    no_exception(at)
    return at


def export_links(at: AppTest) -> dict[str, str]:
    """The Progress page's export links: widget key -> URL."""
    return {button.key: button.proto.url for button in at.get("link_button") if button.key}


def fetch_exports(at: AppTest) -> dict[str, bytes]:
    """Every export the page links to, fetched as its tab's owner would: file name -> bytes."""
    from app.ui.downloads import DOWNLOAD_PREFIX, DOWNLOADS, DownloadOwner

    tab = at.session_state["winnow"]
    owner = DownloadOwner(tab.user, tab.sign_in_handle if tab.user is not None else None)
    files = {}
    for url in export_links(at).values():
        ticket = DOWNLOADS.redeem(url.split(DOWNLOAD_PREFIX, 1)[1], owner)
        assert ticket is not None, url
        files[ticket.file_name] = ticket.make()
    return files
