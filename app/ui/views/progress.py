"""Progress: the labelled dataset winnow hands back (labels by source, the stated error of the
model's labels and how the labelled items grew with the answers), the session replayed event by
event, candidate-set sizes, and the exports (the ranked query list, the labelled data and the
events log, as CSV, JSON or JSON Lines).

The statement about the model's labels is the service's own sentence
(:attr:`app.service.DeliveredLabels.statement`), shown as plain text: the page states no rate
the service did not measure.

Each read goes through the service as the signed-in user, and the store's session policy
decides: only the exports the user may take are offered (an annotator's, on a session
assigned to them: the ranked list and the labelled data; the events log is for reviewers
and admins, with the session's audit rows for admins only)."""

from __future__ import annotations

import streamlit as st

from app.service import EXPORT_MIME, candidate_set_sizes, safe_file_name, session_rights
from app.ui import components
from app.ui import state as ui

tab = ui.current()
bench = tab.workbench

st.title("Progress")
bench = components.workbench_or_stop(bench)

state = bench.state
history = components.progress_history(tab.db, bench.session_id, state.n_events, tab.user, bench)
last = history.iloc[-1]

cols = st.columns(4)
cols[0].metric("Events", state.n_events)
cols[1].metric(
    "Answered items", int(last["answered"]), delta=int(last["answered"] - history["answered"].iloc[0]) or None
)
cols[2].metric(
    "Open targets",
    int(last["open_targets"]),
    delta=int(last["open_targets"] - history["open_targets"].iloc[0]) or None,
    delta_color="inverse",
    help="Targets whose necessary labels (NL) and approximate possible labels (APL) differ.",
)
cols[3].metric(
    "DST-PLL rejects",
    int(last["rejects"]),
    delta=int(last["rejects"] - history["rejects"].iloc[0]) or None,
    delta_color="inverse",
    help="Open items whose DST-PLL label its own accept rule rejects (the belief of the label does not "
    "exceed the plausibility of every other). The model labels below are kept by a threshold "
    "measured on the audited answers; the Rejects page lists the undecided items.",
)

st.subheader("Labelled data")
settings = bench.label_settings  # as ui.sync_workbench read them on this run (an admin may change them)
labels = components.delivered_labels(tab.db, bench.session_id, state.n_events, settings, bench)
SOURCES = (
    ("expert", "Expert labels", "Items an annotator answered, or a reviewer resolved."),
    ("given", "Given labels", "Items with a single candidate label: from the import, or left after answers."),
    (
        "model",
        "Model labels",
        (
            "DST-PLL's labels that the audited answers back at the session's error target "
            "and confidence (set on the Sessions page)."
        ),
    ),
    ("undecided", "Undecided", "Items without a label: the Rejects page lists exactly these."),
)
by_source = st.columns(len(SOURCES))
for column, (source, title, meaning) in zip(by_source, SOURCES, strict=True):
    column.metric(title, labels.counts[source], help=meaning)
st.text(labels.statement)
st.markdown("**Labelled items against answered items**")
st.vega_lite_chart(components.labelled_curve(history, labels), components.LABELLED_SPEC)
st.caption(
    "Expert and given labels after each answer, replayed from the session's events. The model's labels "
    "are measured now only (their calibration reads the audited answers as they are now), so they are "
    "one point, at today's answers."
)

left, right = st.columns(2)
with left:
    st.markdown("**Open targets (NL ≠ APL) and rejected predictions after each event**")
    st.line_chart(history.set_index("step")[["open_targets", "rejects"]], x_label="events", height=260)
with right:
    timed = history.dropna(subset=["time"])
    st.markdown("**Answered items over time**")
    if timed.empty:
        st.caption("No answers yet.")
    else:
        st.line_chart(timed.set_index("time")[["answered"]], height=260)

if "dst_accuracy" in history:
    st.markdown(
        "**Accuracy against the known true labels** — DST-PLL's label for every instance, "
        "and over the labels it accepts"
    )
    st.line_chart(history.set_index("step")[["dst_accuracy", "accepted_accuracy"]], x_label="events", height=240)

st.markdown("**Candidate-set sizes**")
st.bar_chart(candidate_set_sizes(state), stack=False, height=240)

st.subheader("Annotators")
people, pairs, shared = components.team_tables(tab.db, bench.session_id, state.n_events, tab.user, bench)
if people.empty:
    st.caption("No answers yet.")
else:
    st.dataframe(
        people.reset_index(),
        hide_index=True,
        width="stretch",
        column_config={"seconds_per_event": st.column_config.NumberColumn("seconds / event", format="%.1f")},
    )
    if shared["items_shared"]:
        st.metric(
            "Raw agreement",
            f"{shared['raw_agreement']:.3f}",
            help=f"Share of the {shared['items_shared']} items answered by two or more annotators on which all "
            "of them gave the same answer.",
        )
        st.markdown("**Agreement per pair** (Cohen's kappa over the items both answered)")
        st.dataframe(pairs, hide_index=True, width="stretch")
    else:
        st.caption(
            "No item has been answered by two annotators yet (set the session's overlap to 2 to measure agreement)."
        )

st.subheader("Export")
st.caption(
    "The same files as `winnow export --what ranked|labelled|events`. The labelled data has every "
    "item's final label, its source (expert, given, model or undecided) and, for model labels, a "
    "confidence."
)
FORMATS = ("csv", "json", "jsonl")
FORMAT_TITLES = {"csv": "CSV", "json": "JSON", "jsonl": "JSON Lines"}
EXPORTS = (
    ("ranked", "Ranked query list"),
    ("labelled", "Labelled data"),
    ("events", "Events log (every answer, skip and undo)"),
)
rights = session_rights(bench.session_factory, bench.session_id, actor=tab.user)  # every run: never cached
for what, title in EXPORTS:
    if f"export_{what}" not in rights:
        continue
    row = st.columns([2, 1, 1, 1])
    row[0].markdown(f"**{title}**")
    for column, fmt in zip(row[1:], FORMATS, strict=True):
        column.download_button(
            FORMAT_TITLES[fmt],
            data=components.export_file(
                tab.db,
                bench.session_id,
                state.n_events,
                what,
                fmt,
                tab.user,
                tab.role,
                bench,
                settings if what == "labelled" else None,
            ),
            file_name=safe_file_name(f"{bench.config.name}-{what}.{fmt}"),
            mime=EXPORT_MIME[fmt],
            key=ui.Keys.export(what, fmt),
            on_click="ignore",
        )
