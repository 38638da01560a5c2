"""Sessions: open a labelling session, or create one from an uploaded file or a stored dataset.

Uploads go through the same reader and the same store writes as ``winnow import``; a file
the reader rejects is reported with its one-line :class:`~app.io.DataFileError` message and
nothing is written.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from app.io import SUPPORTED_EXTENSIONS
from app.service import dataset_names, session_summaries, start_session
from app.store.models import CRITERIA, TARGET_SETS, WEIGHTINGS
from app.ui import components
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


def create_from_form() -> None:
    """The Create button's callback: :func:`app.service.start_session` with the form's values.

    Runs before the page script, so it reads the form from Session State and leaves its
    outcome in ``tab.notice`` (an error) or opens the session and asks for the Query page.
    """
    form = st.session_state
    source = form.get(ui.Keys.SOURCE, UPLOAD)
    uploaded = form.get(ui.Keys.UPLOAD) if source == UPLOAD else None
    try:
        session_id = start_session(
            Session,
            name=form.get(ui.Keys.NEW_NAME) or "",
            k=int(form.get(ui.Keys.K, 10)),
            weighting=form.get(ui.Keys.WEIGHTING, WEIGHTINGS[0]),
            criterion=form.get(ui.Keys.CRITERION, CRITERIA[0]),
            target_set=form.get(ui.Keys.TARGET_SET, TARGET_SETS[0]),
            upload=(uploaded.name, uploaded.getvalue()) if uploaded is not None else None,
            dataset_name=form.get(ui.Keys.DATASET) if source == STORED else None,
        )
    except InvalidInput as exc:
        tab.notice = f"error:{exc}"
        return
    open_session(session_id)
    tab.next_page = "views/query.py"


st.title("Sessions")

sessions = [
    {"id": x.session_id, "session": x.name, "dataset": x.dataset_name, "k": x.k, "weighting": x.weighting,
     "criterion": x.criterion, "targets": x.target_set, "last activity": x.updated_at}
    for x in session_summaries(Session)
]
datasets = dataset_names(Session)

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
components.show_notice(tab)
if tab.next_page:
    target, tab.next_page = tab.next_page, None
    st.switch_page(target)
