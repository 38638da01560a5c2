"""Sessions: open a labelling session, or create one from an uploaded file or a stored dataset;
set the open session's keyboard keys and its model-label settings.

The model-label settings (the promise, the largest error accepted in model labels, the confidence
of that bound, the share of served items that are audits) are shown to everyone who may open the
session, editable by admins only (the store refuses anyone else), with about how many answers the
session needs at the audit share entered, simulated from the lot it is checking now
(:meth:`app.service.Workbench.answers_estimate`, never a number written here).

What the page offers follows the store's access policies, asked as the signed-in user: the
list holds the sessions the user may open (an annotator's: those assigned to them), the "New
session" form is for those who may create sessions and upload (admins in team mode), the key
editor for those who may change a session's keys (admins); the others see the keys as text.

Uploads go through the same reader and the same store writes as ``winnow import``; a file
the reader rejects is reported with its one-line :class:`~app.io.DataFileError` message and
nothing is written. Session, dataset and label names are shown as plain text. A large upload is
imported in a background thread of the process's build registry, with a progress element,
while the page stays usable.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import streamlit as st

from app.io import SUPPORTED_EXTENSIONS, VOTE_EXTENSIONS
from app.service import (
    UPLOAD_EXTENSIONS,
    Workbench,
    change_label_settings,
    creation_rights,
    dataset_names,
    estimate_words,
    hotkeys_text,
    parse_hotkeys_text,
    session_label_settings,
    session_rights,
    session_summaries,
    set_session_keys,
    share_percent,
    start_session,
    upload_columns,
)
from app.store import LabelSettings
from app.store.models import CRITERIA, TARGET_SETS, WEIGHTINGS
from app.ui import components
from app.ui import state as ui
from app.ui.building import show_build_progress
from app.ui.errors import shown_error
from engine.choices import DEFAULT_STRATEGY
from engine.exceptions import InvalidInput
from engine.promises import PROMISES

tab = ui.current()
session_factory = ui.store(tab.db)

UPLOAD, STORED = "Upload a file", "A dataset already in the database"
AUTOMATIC = "(found by name)"
# Widget keys of the upload's content choices (the other keys live in ui.Keys).
MEDIA_UPLOAD = "sessions_media_upload"
COLUMN_KEYS = {
    "text_column": "sessions_text_column",
    "image_column": "sessions_image_column",
    "audio_column": "sessions_audio_column",
}
IGNORE_COLUMNS = "sessions_ignore_columns"
# The upload's crowd votes and the thresholds that make the candidate sets from them.
VOTES_UPLOAD = "sessions_votes_upload"
MIN_VOTES = "sessions_min_votes"
MIN_SHARE = "sessions_min_share"
#: What each query criterion asks first (shown under the select box: a long option is cut).
CRITERION_HELP = {
    "decision_change": "The item whose answer is expected to change the most nearby k-NN decisions (default).",
    "apl": "The item whose answer can change the necessary or approximately possible labels of the most nearby "
    "items (fast).",
    "pl": "The item whose answer can change the necessary or exact possible labels of the most nearby items.",
    "participation": "Baseline: the item that is a neighbour of the most targets.",
    "most_partial": "Baseline: the item with the largest candidate set.",
    "random": "Baseline: items in a random order.",
}


def open_session(session_id: int) -> None:
    tab.session_id = session_id
    tab.workbench = None  # Home.py opens it on the next run
    tab.failed_session_id = None  # chosen anew: try it again even if it failed before
    tab.notice = None


def create_from_form() -> None:
    """The Create button's callback: :func:`app.service.start_session` with the form's values.

    Runs before the page script, so it reads the form from Session State and leaves its
    outcome in ``tab.notice`` (an error) or opens the session and asks for the Query page.
    """
    form = st.session_state
    source = form.get(ui.Keys.SOURCE, UPLOAD)
    uploaded = form.get(ui.Keys.UPLOAD) if source == UPLOAD else None
    media = (form.get(MEDIA_UPLOAD) or []) if source == UPLOAD else []
    columns: dict[str, object] = {
        option: form[key] for option, key in COLUMN_KEYS.items() if form.get(key) not in (None, AUTOMATIC)
    }
    if form.get(IGNORE_COLUMNS):
        columns["ignore_columns"] = list(form[IGNORE_COLUMNS])
    upload = (uploaded.name, uploaded.getvalue()) if uploaded is not None else None
    votes_file = form.get(VOTES_UPLOAD) if source == UPLOAD else None
    min_votes = form.get(MIN_VOTES) if votes_file is not None else None
    min_share = form.get(MIN_SHARE) if votes_file is not None else None
    files = [(f.name, f.getvalue()) for f in media]
    try:  # the model-label settings are checked before anything is imported
        rates = {name: float(form.get(ui.Keys.new_label_setting(name), 0.0)) / 100 for name, *_ in LABEL_SETTINGS}
        tab.new_label_settings = LabelSettings(
            max_error=rates["max_error"], confidence=rates["confidence"], audit_share=rates["audit_share"]
        )
    except InvalidInput as exc:
        tab.notice = ("error", shown_error(exc))
        return
    except TypeError as exc:
        tab.notice = ("error", str(exc))
        return
    options = dict(
        name=form.get(ui.Keys.NEW_NAME) or "",
        k=int(form.get(ui.Keys.K, 10)),
        weighting=form.get(ui.Keys.WEIGHTING, WEIGHTINGS[0]),
        criterion=form.get(ui.Keys.CRITERION, DEFAULT_STRATEGY),
        target_set=form.get(ui.Keys.TARGET_SET, TARGET_SETS[0]),
        upload=upload,
        dataset_name=form.get(ui.Keys.DATASET) if source == STORED else None,
        files=files,
        columns=columns if source == UPLOAD else None,
        actor=tab.user,  # team mode: only an admin creates sessions (checked before importing)
        votes=(votes_file.name, votes_file.getvalue()) if votes_file is not None else None,
        min_votes=int(min_votes) if min_votes is not None else None,
        min_share=float(min_share) if min_share is not None else None,
    )
    job = ui.builds().start(
        ("create", tab.db, uuid.uuid4().hex), lambda report: start_session(session_factory, **options, progress=report)
    )
    tab.creating = job
    uploaded_bytes = sum(len(content) for _, content in ([upload] if upload else []) + files)
    if uploaded_bytes < ui.BACKGROUND_FROM_BYTES:
        job.wait()  # small: done within this run, as before
        finish_create()


def finish_create() -> None:
    """Once the background import is done: open the new session, or keep its error."""
    job = tab.creating
    if job is None or job.running:
        return
    tab.creating = None
    ui.builds().discard(job.key)
    if isinstance(job.error, InvalidInput):
        tab.notice = ("error", shown_error(job.error))
        return
    if job.error is not None:
        raise job.error
    assert job.result is not None, "an import finished without an error holds its session id"
    settings, tab.new_label_settings = tab.new_label_settings, None
    if settings is not None and settings != LabelSettings():
        name = next(x.name for x in session_summaries(session_factory, actor=tab.user) if x.session_id == job.result)
        change_label_settings(session_factory, name, actor=tab.user, **asdict(settings))
    open_session(job.result)
    tab.next_page = "views/query.py"


def save_hotkeys(field: str, reset: bool) -> None:
    """The keyboard-keys buttons' callback: parse and store the edited keys (or the default)."""
    bench = tab.workbench
    if bench is None:
        return
    try:  # the store refuses anyone but an admin in team mode, and audits the change
        if reset:
            keys = set_session_keys(bench, None, actor=tab.user)
        else:
            mapping = parse_hotkeys_text(st.session_state.get(field, ""), bench.label_names)
            keys = set_session_keys(bench, mapping, actor=tab.user)
    except InvalidInput as exc:
        tab.hotkeys_notice = ("error", shown_error(exc))
        return
    st.session_state[field] = hotkeys_text(keys, bench.label_names)
    tab.hotkeys_notice = ("ok", f"Saved the keys of session {bench.config.name}.")


#: The model-label settings, in the order shown: (field of LabelSettings, title, help, lowest and
#: highest percent the field takes). The store validates again; these only bound the widgets.
LABEL_SETTINGS = (
    (
        "max_error",
        "Largest model-label error (%)",
        (
            "Model labels are given only where the audited answers show, as the promise reads it, that at most "
            "this share of them is wrong."
        ),
        0.1,
        49.9,
    ),
    ("confidence", "Confidence (%)", "How sure the stated bound on the error must be.", 50.0, 99.9),
    (
        "audit_share",
        "Audit share (%)",
        (
            "Share of the items served to annotators that check the model's labels, drawn at random among the "
            "labels being checked. They are asked like any other item; their first answers measure the model's error."
        ),
        0.0,
        50.0,
    ),
)


#: How each promise reads (engine.promises.PROMISES).
PROMISE_WORDS = {
    "confidence": "With confidence: at most the error below in this session, unless it is one of the few "
    "sessions (1 − confidence of them) whose random audits looked better than the labels are",
    "average": "On average: at most the error below over many sessions like this one; one session may be "
    "above it (fewer audits; the confidence is not used)",
}


def settings_text(max_error: float, confidence: float, audit_share: float, promise: str) -> str:
    said = f"at {share_percent(confidence)} confidence" if promise == "confidence" else "on average"
    return f"largest model-label error {share_percent(max_error)} {said}; audit share {share_percent(audit_share)}"


def answers_left(open_bench: Workbench, audit_share: float) -> str:
    """About how many answers the open session needs at this audit share, for the lot it is
    checking (the other settings apply to the lots frozen after they are saved)."""
    work = open_bench.work_status()
    if work.done:
        return work.headline + " " + work.more_answers
    estimate = open_bench.answers_estimate(audit_share)
    return estimate_words(work.counts, work.summary, estimate, work.answers, work.conflicts)


def save_label_settings(session_id: int, session_name: str) -> None:
    """The Save button's callback: :func:`app.service.change_label_settings` with the entered
    percentages, as the signed-in user (the store refuses anyone but an admin, and audits)."""
    entered = {name: st.session_state.get(ui.Keys.label_setting(session_id, name)) for name, *_ in LABEL_SETTINGS}
    rates = {name: float(value) / 100 for name, value in entered.items() if value is not None}
    try:
        change_label_settings(
            session_factory,
            session_name,
            actor=tab.user,
            max_error=rates.get("max_error"),
            confidence=rates.get("confidence"),
            audit_share=rates.get("audit_share"),
            promise=st.session_state.get(ui.Keys.label_setting(session_id, "promise")),
        )
        saved = session_label_settings(session_factory, session_name)
    except InvalidInput as exc:
        tab.label_settings_notice = ("error", shown_error(exc))
        return
    said = settings_text(saved.max_error, saved.confidence, saved.audit_share, saved.promise)
    tab.label_settings_notice = ("ok", f"Saved the model-label settings of session {session_name}: {said}.")


finish_create()


st.title("Sessions")

sessions = [
    {
        "id": x.session_id,
        "session": x.name,
        "dataset": x.dataset_name,
        "k": x.k,
        "weighting": x.weighting,
        "criterion": x.criterion,
        "targets": x.target_set,
        "last activity": x.updated_at,
    }
    for x in session_summaries(session_factory, actor=tab.user)
]
may = creation_rights(session_factory, actor=tab.user)
datasets = dataset_names(session_factory) if "create" in may else []

st.subheader("Open a session")
if sessions:
    by_id = {x["id"]: x for x in sessions}
    ids = list(by_id)
    current = ids.index(tab.session_id) if tab.session_id in by_id else 0
    choice = st.selectbox(
        "Session",
        ids,
        index=current,
        key=ui.Keys.OPEN_SESSION,
        format_func=lambda i: (
            f"{by_id[i]['session']} (dataset {by_id[i]['dataset']}, {by_id[i]['criterion']}, k={by_id[i]['k']})"
        ),
    )
    st.button(
        "Open",
        key=ui.Keys.OPEN_BUTTON,
        type="primary",
        on_click=open_session,
        args=(choice,),
        disabled=choice == tab.session_id and tab.workbench is not None,
    )
    st.dataframe(pd.DataFrame(sessions).drop(columns="id"), hide_index=True)
elif "create" in may:
    st.info("No sessions yet: create one below.")
else:
    st.info("No session is assigned to you yet: ask an admin to assign you one.")

# Team mode: only an admin creates sessions or uploads files (the store refuses the rest).
sources = [source for source, allowed in ((UPLOAD, "upload" in may), (STORED, bool(datasets))) if allowed]
if "create" in may and sources:
    st.subheader("New session")
    source = st.radio("Data", sources, key=ui.Keys.SOURCE, horizontal=True)
    uploaded = None
    dataset_name = None
    if source == UPLOAD:
        uploaded = st.file_uploader(
            "Partially labelled data",
            type=[e.lstrip(".") for e in (*SUPPORTED_EXTENSIONS, ".zip")],
            key=ui.Keys.UPLOAD,
            help="CSV/TSV with a 'candidates' column like 'cat|dog' (optional 'id' and 'true_label'; items may be a "
            "'text', an 'image' or 'path', an 'audio' column), Parquet, .npz, the .mat files of the PLL "
            "benchmarks, or a .zip of images (with its labels CSV, or one sub-folder per label).",
        )
        st.file_uploader(
            "Images or audio clips of the items (optional)",
            key=MEDIA_UPLOAD,
            accept_multiple_files=True,
            type=[e.lstrip(".") for e in UPLOAD_EXTENSIONS if e not in SUPPORTED_EXTENSIONS],
            help="The files the data file names in its image/path or audio column (by file name), or a .zip of them. "
            "Without a data file: one sub-folder per label inside the .zip.",
        )
        with st.expander("Crowd votes (optional): candidate sets made from annotators' votes"):
            st.file_uploader(
                "Votes",
                type=[e.lstrip(".") for e in VOTE_EXTENSIONS],
                key=VOTES_UPLOAD,
                help="One row per vote: id (the item's id in the data file), annotator, label and optionally time. "
                "Each item's candidate set is made from its votes (the data file then needs no 'candidates' "
                "column); items without a vote get every label.",
            )
            threshold_cols = st.columns(2)
            threshold_cols[0].number_input(
                "Minimum votes",
                min_value=1,
                value=None,
                step=1,
                key=MIN_VOTES,
                help="Keep labels with at least this many votes (empty: every label voted for). An item where "
                "no label reaches it keeps its most voted labels. Not with a minimum share.",
            )
            threshold_cols[1].number_input(
                "Minimum share",
                min_value=0.01,
                max_value=1.0,
                value=None,
                step=0.05,
                key=MIN_SHARE,
                help="Keep labels with at least this share of the item's votes (empty: no share needed). Not with a "
                "minimum number of votes.",
            )
        header = upload_columns(uploaded.name, uploaded.getvalue()) if uploaded is not None else []
        if header:
            with st.expander("Columns: what each item shows"):
                choice_cols = st.columns(3)
                for col, (option, key) in zip(choice_cols, COLUMN_KEYS.items(), strict=True):
                    col.selectbox(
                        option.replace("_column", "").capitalize(),
                        [AUTOMATIC, *header],
                        key=key,
                        help=f"The column with each item's {option.replace('_column', '')}; "
                        "found by name when left as is.",
                    )
                st.multiselect(
                    "Ignore columns",
                    header,
                    key=IGNORE_COLUMNS,
                    help="Columns that are neither features nor content (notes, ...).",
                )
    else:
        dataset_name = st.selectbox("Dataset", list(datasets), key=ui.Keys.DATASET)

    default_name = Path(uploaded.name).stem if uploaded is not None else (dataset_name or "")
    cols = st.columns([3, 2, 2, 2])
    cols[0].text_input(
        "Session name",
        key=ui.Keys.NEW_NAME,
        max_chars=200,
        placeholder=default_name or "e.g. week1",
        help="Empty: named after the file or the dataset.",
    )
    cols[1].number_input("k (neighbours)", min_value=1, max_value=200, value=10, step=1, key=ui.Keys.K)
    cols[2].selectbox("Weighting", WEIGHTINGS, key=ui.Keys.WEIGHTING)
    cols[3].selectbox(
        "Targets",
        TARGET_SETS,
        key=ui.Keys.TARGET_SET,
        help="all instances, or only those whose original set is partial",
    )
    # The criterion's name alone in the box (a long line would be cut); what it asks, beside it.
    criterion_box, criterion_text = st.columns([1, 3], vertical_alignment="bottom")
    chosen = criterion_box.selectbox(
        "Query criterion",
        CRITERIA,
        index=CRITERIA.index(DEFAULT_STRATEGY),
        key=ui.Keys.CRITERION,
    )
    criterion_text.caption(CRITERION_HELP[chosen])
    st.markdown("**Model labels**")
    defaults = LabelSettings()
    setting_columns = st.columns(len(LABEL_SETTINGS))
    for column, (name, title, meaning, low, high) in zip(setting_columns, LABEL_SETTINGS, strict=True):
        column.number_input(
            title,
            min_value=low,
            max_value=high,
            value=round(getattr(defaults, name) * 100, 4),
            step=0.5,
            format="%.1f",
            key=ui.Keys.new_label_setting(name),
            help=meaning,
        )
    st.caption(
        "What a statement costs depends on how many items the model is sure of: the open session's "
        "settings below show it."
    )

    st.button(
        "Create session",
        key=ui.Keys.CREATE,
        type="primary",
        on_click=create_from_form,
        disabled=tab.creating is not None,
    )
    if tab.creating is not None:
        show_build_progress(tab.creating, "Importing the file", None)
components.show_notice(tab)
if tab.next_page:
    target, tab.next_page = tab.next_page, None
    st.switch_page(target)

rights = (
    session_rights(session_factory, tab.workbench.session_id, actor=tab.user)
    if tab.workbench is not None
    else frozenset()
)
if tab.workbench is not None and "open" in rights:
    bench = tab.workbench
    st.subheader("Keyboard keys of the open session")
    if "change_keys" in rights:
        st.caption(
            "One line per label, `key = label`: a letter or a digit, no key twice; leave the key out for a "
            "label without one. N, S, U, A and L belong to none of these, skip, undo, another label and "
            "leave; C and R to Streamlit. Other tabs use the new keys once they open the session again."
        )
        field = ui.Keys.hotkeys(bench.session_id)
        st.session_state.setdefault(field, hotkeys_text(bench.hotkeys, bench.label_names))
        st.text_area("Keys", key=field, height=min(40 + 24 * len(bench.label_names), 320))
        row = st.columns([1, 1, 4])
        row[0].button("Save keys", key=ui.Keys.HOTKEYS_SAVE, type="primary", on_click=save_hotkeys, args=(field, False))
        row[1].button("Default keys", key=ui.Keys.HOTKEYS_RESET, on_click=save_hotkeys, args=(field, True))
    else:
        st.caption("An admin sets the keys of a session.")
        st.text(hotkeys_text(bench.hotkeys, bench.label_names))
    if tab.hotkeys_notice is not None:
        level, text = tab.hotkeys_notice
        tab.hotkeys_notice = None
        (st.error if level == "error" else st.success)(components.md(text))

    st.subheader("Model labels of the open session")
    saved = session_label_settings(session_factory, bench.config.name)
    if "change_settings" in rights:
        st.caption(
            "The model labels an item only where audited answers back the error target below; the rest stays "
            "undecided for a person. A new error, confidence or promise applies to the model labels proposed "
            "after it is saved: the labels being checked now keep the settings they were proposed with. A new "
            "audit share applies at once."
        )
        # The promise first: it decides whether the confidence field means anything.
        promise_field = ui.Keys.label_setting(bench.session_id, "promise")
        st.session_state.setdefault(promise_field, saved.promise)
        chosen_promise = st.radio(
            "Promise",
            PROMISES,
            key=promise_field,
            format_func=PROMISE_WORDS.__getitem__,
            help="What a stated error means. Both hold whenever the labels are read or exported, and both "
            "assume the audited answers are right.",
        )
        setting_columns = st.columns(len(LABEL_SETTINGS))
        for column, (name, title, meaning, low, high) in zip(setting_columns, LABEL_SETTINGS, strict=True):
            field = ui.Keys.label_setting(bench.session_id, name)
            st.session_state.setdefault(field, round(getattr(saved, name) * 100, 4))
            unused = name == "confidence" and chosen_promise != "confidence"
            column.number_input(
                title,
                min_value=low,
                max_value=high,
                step=0.5,
                format="%.1f",
                key=field,
                help=meaning + (" Not used by the promise on average." if name == "confidence" else ""),
                disabled=unused,
            )
        entered_share = float(st.session_state[ui.Keys.label_setting(bench.session_id, "audit_share")]) / 100
        st.button(
            "Save model-label settings",
            key=ui.Keys.LABEL_SETTINGS_SAVE,
            type="primary",
            on_click=save_label_settings,
            args=(bench.session_id, bench.config.name),
        )
    else:
        st.caption("An admin sets these.")
        entered_share = saved.audit_share
        st.text(settings_text(saved.max_error, saved.confidence, saved.audit_share, saved.promise).capitalize())
    st.markdown("**Answers left**")
    st.text(answers_left(bench, entered_share))
if tab.label_settings_notice is not None:  # also when the refusal took the editor away
    level, text = tab.label_settings_notice
    tab.label_settings_notice = None
    (st.error if level == "error" else st.success)(components.md(text))
