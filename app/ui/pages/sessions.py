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

ui.ensure_home()
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
name = cols[0].text_input("Session name", key=ui.Keys.NEW_NAME, max_chars=200, placeholder=default_name or "e.g. week1",
                          help="Empty: named after the file or the dataset.")
k = cols[1].number_input("k (neighbours)", min_value=1, max_value=200, value=10, step=1, key=ui.Keys.K)
weighting = cols[2].selectbox("Weighting", WEIGHTINGS, key=ui.Keys.WEIGHTING)
criterion = cols[3].selectbox("Query criterion", CRITERIA, key=ui.Keys.CRITERION, format_func=CRITERION_HELP.get)
target_set = cols[4].selectbox("Targets", TARGET_SETS, key=ui.Keys.TARGET_SET,
                               help="all instances, or only those whose original set is partial")

if st.button("Create session", key=ui.Keys.CREATE, type="primary"):
    name = name.strip() or default_name
    known_names = {x["session"] for x in sessions}
    if not name:
        st.error("Give the session a name.")
    elif name in known_names:
        st.error(f"A session called {name!r} already exists; choose another name or open it above.")
    elif source == UPLOAD and uploaded is None:
        st.error("Choose a file to upload first.")
    else:
        try:
            if source == UPLOAD:
                assert uploaded is not None
                file_name = safe_file_name(uploaded.name)
                if Path(file_name).stem in datasets:
                    raise InvalidInput(f"a dataset called {Path(file_name).stem!r} is already stored; "
                                       "rename the file or create the session from the stored dataset")
                with tempfile.TemporaryDirectory(prefix="winnow-upload-") as folder:
                    path = Path(folder) / file_name
                    path.write_bytes(uploaded.getvalue())
                    try:
                        with st.spinner(f"Reading and checking {uploaded.name}…"):
                            dataset_id, n = import_file(Session, path, name=path.stem, min_rows=int(k) + 1)
                    except DataFileError as exc:
                        # The reader names the temporary copy; show the name the user knows.
                        st.error(str(exc).replace(str(path), uploaded.name))
                        st.stop()
            else:
                dataset_id = datasets[dataset_name]
            session_id = create_session(Session, dataset_id=dataset_id, name=name, k=int(k), weighting=weighting,
                                        criterion=criterion, target_set=target_set)
        except InvalidInput as exc:
            st.error(str(exc))
        else:
            open_session(session_id)
            st.switch_page("pages/query.py")
