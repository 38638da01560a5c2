"""A session being built in the background: progress shown, the app usable, tabs share the build."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import app.service.workbench as workbench_module
from app.service import create_session, import_file
from app.store.db import open_store
from app.ui import state as ui_state
from app.ui.state import STATE_KEY, Keys
from tests.deadlines import wait_for
from tests.ui.conftest import no_exception, small_csv_bytes


@pytest.fixture
def two_sessions(db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Sessions ``quick`` and ``slow`` on two datasets; ``slow`` builds until ``gate`` is set.

    Every session opens in the background (the threshold is lowered to 0 items), as a
    large one would.
    """
    Session = open_store(db)
    ids = {}
    for name in ("quick", "slow"):  # slow last: the most recent session, opened first
        csv = tmp_path / f"{name}.csv"
        csv.write_bytes(small_csv_bytes(n=60, seed=len(name)))
        dataset_id, _ = import_file(Session, csv, name=name, min_rows=6)
        ids[name] = create_session(
            Session, dataset_id=dataset_id, name=name, k=5, weighting="uniform", criterion="apl", target_set="all"
        )
    gate = threading.Event()
    real = workbench_module.dataset_graph

    def gated(Session, *, dataset_id, **kwargs):
        if dataset_id == slow_dataset:
            gate.wait(60)
        return real(Session, dataset_id=dataset_id, **kwargs)

    with Session() as s:
        from app.store import get_session_by_name

        slow_dataset = get_session_by_name(s, "slow").dataset_id
    monkeypatch.setattr(workbench_module, "dataset_graph", gated)
    monkeypatch.setattr(ui_state, "BACKGROUND_FROM_ITEMS", 0)
    yield ids, gate
    gate.set()


def rerun_until(at, condition, what: str):
    """Rerun the app (as the page's poll does) until ``condition()`` holds; returns its value."""

    def rerun_and_check():
        found = condition()
        if not found:
            at.run()
            no_exception(at)
        return found

    return wait_for(rerun_and_check, what=what)


def poll_until_open(at, session_id: int):
    def open_workbench():
        bench = at.session_state[STATE_KEY].workbench
        return bench if bench is not None and bench.session_id == session_id else None

    return rerun_until(at, open_workbench, f"session {session_id} to open")


def test_a_building_session_shows_progress_and_another_session_can_be_opened(app, db, two_sessions):
    ids, gate = two_sessions
    at = app(db)
    tab = at.session_state[STATE_KEY]
    assert tab.session_id == ids["slow"] and tab.workbench is None
    job = tab.building
    assert job is not None and job.running
    # The page says what is happening, the sidebar and navigation are there.
    assert len(at.get("progress")) == 1
    assert at.sidebar.markdown[0].value == "**Opening a session…**"
    assert not [i.value for i in at.info if "No labelling session" in i.value]

    # The Sessions page works while the build runs, and opens the other session.
    at.switch_page("views/sessions.py").run()
    no_exception(at)
    at.selectbox(key=Keys.OPEN_SESSION).set_value(ids["quick"]).run()
    at.button(key=Keys.OPEN_BUTTON).click().run()
    no_exception(at)
    bench = poll_until_open(at, ids["quick"])
    assert bench.config.name == "quick"
    assert at.sidebar.markdown[0].value == "**Session**"
    assert at.sidebar.text[0].value.startswith("quick\n")
    assert job.running  # the first build is still going

    # Back to the slow session once its build is let through.
    gate.set()
    assert job.wait(60)
    at.switch_page("views/sessions.py").run()
    at.selectbox(key=Keys.OPEN_SESSION).set_value(ids["slow"]).run()
    at.button(key=Keys.OPEN_BUTTON).click().run()
    assert poll_until_open(at, ids["slow"]) is job.result


def test_a_second_tab_joins_the_running_build_and_shares_its_workbench(app, db, two_sessions):
    ids, gate = two_sessions
    registry = ui_state.builds()
    started = registry.started
    first = app(db)
    second = app(db)
    job = first.session_state[STATE_KEY].building
    assert job is not None and second.session_state[STATE_KEY].building is job
    assert registry.started == started + 1
    gate.set()
    one = poll_until_open(first, ids["slow"])
    two = poll_until_open(second, ids["slow"])
    assert one is two  # one shared copy of the arrays per process
    assert registry.started == started + 1


def test_a_large_upload_is_imported_in_the_background_with_progress(app, db, monkeypatch):
    # The Sessions page's form imports through app.service.uploads (start_session, import_upload).
    import app.service.uploads as uploads_module

    gate = threading.Event()
    real = uploads_module.import_file

    def gated(*args, **kwargs):
        gate.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(uploads_module, "import_file", gated)
    monkeypatch.setattr(ui_state, "BACKGROUND_FROM_BYTES", 0)
    at = app(db)
    at.switch_page("views/sessions.py").run()
    at.file_uploader(key=Keys.UPLOAD).set_value(("birds.csv", small_csv_bytes(n=60), "text/csv"))
    at.run()
    at.button(key=Keys.CREATE).click().run()
    no_exception(at)
    tab = at.session_state[STATE_KEY]
    job = tab.creating
    assert job is not None and job.running and tab.session_id is None
    assert len(at.get("progress")) == 1
    assert at.button(key=Keys.CREATE).disabled
    gate.set()
    assert job.wait(60)
    rerun_until(at, lambda: at.session_state[STATE_KEY].session_id is not None, "the uploaded session to open")
    assert at.session_state[STATE_KEY].creating is None
    bench = poll_until_open(at, at.session_state[STATE_KEY].session_id)
    assert bench.config.name == "birds" and bench.state.n_instances == 60


def test_a_small_session_opened_within_the_run_shows_each_stage_until_it_opens(app, small_db, monkeypatch):
    """Below BACKGROUND_FROM_ITEMS the run waits for the build: a progress bar follows the
    stages as the build reports them (issue 29), then goes; the page shows the session."""
    real = workbench_module.dataset_graph

    def slow(Session, *, progress, **kwargs):
        def reporting(stage, done, total):
            progress(stage, done, total)
            # Each report stays until the page has drawn it, however busy the machine.
            wait_for(lambda: (stage, done) in drawn, what=f"the page to draw {stage} {done}/{total}")

        return real(Session, progress=reporting, **kwargs)

    captions: list[str] = []
    drawn: set[tuple[str, int]] = set()
    shown = ui_state.build_progress_text

    def recorded(job, *args):
        fraction, text = shown(job, *args)
        captions.append(text)
        if job.latest is not None:
            drawn.add((job.latest.stage, job.latest.done))
        assert 0.0 <= fraction <= 1.0
        return fraction, text

    monkeypatch.setattr(workbench_module, "dataset_graph", slow)
    monkeypatch.setattr(ui_state, "build_progress_text", recorded)
    at = app(small_db)
    no_exception(at)
    tab = at.session_state[STATE_KEY]
    assert tab.workbench is not None and tab.building is None
    assert any("neighbours found" in text for text in captions), captions
    assert all(text.startswith("Opening the session") for text in captions)
    assert not at.get("progress")  # gone once the session is open
