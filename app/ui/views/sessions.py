"""Sessions: open a labelling session, or create one from an uploaded file or a stored dataset.

Uploads go through the same reader and the same store writes as ``winnow import``; a file
the reader rejects is reported with its one-line :class:`~app.io.DataFileError` message and
nothing is written.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pandas as pd
import streamlit as st

from app.cli import create_session, import_file
from app.io import SUPPORTED_EXTENSIONS, DataFileError
from app.store import repo
from app.store.models import CRITERIA, TARGET_SETS, WEIGHTINGS
from app.ui import state as ui
from engine.exceptions import InvalidInput

tab = ui.current()
Session = ui.store(tab.db)

UPLOAD, STORED = "Upload a file", "A dataset already in the database"
CRITERION_HELP = {
    "apl": "apl — targets whose NL or APL an answer can change (fast)",
    "pl": "pl — targets whose NL or exact PL an answer can change",
    "participation": "participation — baseline",
    "most_partial": "most_partial — largest candidate set first (baseline)",
    "random": "random — baseline",
}


def open_session(session_id: int) -> None:
    tab.session_id = session_id
    tab.workbench = None  # Home.py opens it on the next run
    tab.notice = None


def safe_file_name(name: str) -> str:
    """The uploaded file's base name with only harmless characters (keeps the extension)."""
    base = Path(name).name or "upload"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", base)


def create_from_form() -> None:
    """The Create button's callback: import (if uploading), create the session, open it.

    Runs before the page script, so it reads the form from Session State and leaves its
    outcome in ``tab.notice`` (an error) or opens the session and asks for the Query page.
    """
    form = st.session_state
    uploaded = form.get(ui.Keys.UPLOAD) if form.get(ui.Keys.SOURCE, UPLOAD) == UPLOAD else None
    dataset_name = form.get(ui.Keys.DATASET) if form.get(ui.Keys.SOURCE, UPLOAD) == STORED else None
    fallback = Path(uploaded.name).stem if uploaded is not None else (dataset_name or "")
    name = (form.get(ui.Keys.NEW_NAME) or "").strip() or fallback
    k = int(form.get(ui.Keys.K, 10))
    with Session() as s:
        known_sessions = {x.name for x in repo.list_sessions(s)}
        known_datasets = {d.name: d.id for d in repo.list_datasets(s)}
    try:
        if dataset_name is None and uploaded is None:
            raise InvalidInput("choose a file to upload first")
        if not name:
            raise InvalidInput("give the session a name")
        if name in known_sessions:
            raise InvalidInput(f"a session called {name!r} already exists; choose another name or open it above")
        if uploaded is not None:
            file_name = safe_file_name(uploaded.name)
            if Path(file_name).stem in known_datasets:
                raise InvalidInput(f"a dataset called {Path(file_name).stem!r} is already stored; "
                                   "rename the file or create the session from the stored dataset")
            with tempfile.TemporaryDirectory(prefix="winnow-upload-") as folder:
                path = Path(folder) / file_name
                path.write_bytes(uploaded.getvalue())
                try:
                    dataset_id, _ = import_file(Session, path, name=path.stem, min_rows=k + 1)
                except DataFileError as exc:
                    # The reader names the temporary copy; show the name the user knows.
                    raise InvalidInput(str(exc).replace(str(path), uploaded.name)) from None
        else:
            dataset_id = known_datasets[dataset_name]
        session_id = create_session(
            Session, dataset_id=dataset_id, name=name, k=k, weighting=form.get(ui.Keys.WEIGHTING, WEIGHTINGS[0]),
            criterion=form.get(ui.Keys.CRITERION, CRITERIA[0]), target_set=form.get(ui.Keys.TARGET_SET, TARGET_SETS[0]),
        )
    except InvalidInput as exc:
        tab.notice = f"error:{exc}"
        return
    open_session(session_id)
    tab.next_page = "views/query.py"


st.title("Sessions")

with Session() as s:
    sessions = [
        {"id": x.id, "session": x.name, "dataset": x.dataset.name, "k": x.k, "weighting": x.weighting,
         "criterion": x.criterion, "targets": x.target_set, "last activity": x.updated_at}
        for x in repo.list_sessions(s)
    ]
    datasets = {d.name: d.id for d in repo.list_datasets(s)}

st.subheader("Open a session")
if sessions:
    by_id = {x["id"]: x for x in sessions}
    ids = list(by_id)
    current = ids.index(tab.session_id) if tab.session_id in by_id else 0
    choice = st.selectbox(
        "Session", ids, index=current, key=ui.Keys.OPEN_SESSION,
        format_func=lambda i: f"{by_id[i]['session']} (dataset {by_id[i]['dataset']}, {by_id[i]['criterion']}, k={by_id[i]['k']})",
    )
    st.button("Open", key=ui.Keys.OPEN_BUTTON, type="primary", on_click=open_session, args=(choice,),
              disabled=choice == tab.session_id and tab.workbench is not None)
    st.dataframe(pd.DataFrame(sessions).drop(columns="id"), hide_index=True)
else:
    st.info("No sessions yet: create one below.")

st.subheader("New session")
source = st.radio("Data", [UPLOAD, STORED] if datasets else [UPLOAD], key=ui.Keys.SOURCE, horizontal=True)
uploaded = None
dataset_name = None
if source == UPLOAD:
    uploaded = st.file_uploader(
        "Partially labelled data", type=[e.lstrip(".") for e in SUPPORTED_EXTENSIONS], key=ui.Keys.UPLOAD,
        help="CSV/TSV with a 'candidates' column like 'cat|dog' (optional 'id' and 'true_label'), "
             "Parquet, .npz, or the .mat files of the PLL benchmarks.",
    )
else:
    dataset_name = st.selectbox("Dataset", list(datasets), key=ui.Keys.DATASET)

default_name = Path(uploaded.name).stem if uploaded is not None else (dataset_name or "")
cols = st.columns(5)
cols[0].text_input("Session name", key=ui.Keys.NEW_NAME, max_chars=200, placeholder=default_name or "e.g. week1",
                   help="Empty: named after the file or the dataset.")
cols[1].number_input("k (neighbours)", min_value=1, max_value=200, value=10, step=1, key=ui.Keys.K)
cols[2].selectbox("Weighting", WEIGHTINGS, key=ui.Keys.WEIGHTING)
cols[3].selectbox("Query criterion", CRITERIA, key=ui.Keys.CRITERION, format_func=CRITERION_HELP.get)
cols[4].selectbox("Targets", TARGET_SETS, key=ui.Keys.TARGET_SET,
                  help="all instances, or only those whose original set is partial")



st.button("Create session", key=ui.Keys.CREATE, type="primary", on_click=create_from_form)
if tab.notice:
    level, _, text = tab.notice.partition(":")
    (st.error if level == "error" else st.success)(text)
    tab.notice = None
if tab.next_page:
    target, tab.next_page = tab.next_page, None
    st.switch_page(target)
