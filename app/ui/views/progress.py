"""Progress: where the work stands (done or not, by :func:`app.service.work_is_done`; about how many
answers are left, or what more answers would buy), the labelled dataset winnow hands back (labels
by source, the stated error of the model's labels and how the labelled items grew with the
answers), the session replayed event by
event, candidate-set sizes, and the exports (the ranked query list, the labelled data and the
events log, as CSV, JSON or JSON Lines). Each export is a download link that only this browser's
sign-in can use, for a while, and whose file is made when it is fetched (:mod:`app.ui.downloads`):
an export is never a Streamlit media file another client could fetch.

The statement about the model's labels is the service's own sentence
(:attr:`app.service.DeliveredLabels.statement`), shown as plain text: the page states no rate
the service did not measure.

Each read goes through the service as the signed-in user, and the store's session policy
decides: only the exports the user may take are offered (an annotator's, on a session
assigned to them: the ranked list and the labelled data; the events log is for reviewers
and admins, with the session's audit rows for admins only)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app.service import candidate_set_sizes, promise_meaning
from app.ui import components
from app.ui import state as ui

tab = ui.current()
bench = tab.workbench

st.title("Progress")
bench = components.workbench_or_stop(bench)

state = bench.state
history = components.progress_history(tab.db, bench.session_id, state.n_events, tab.user, bench)
last = history.iloc[-1]

settings = bench.label_settings  # as ui.sync_workbench read them on this run (an admin may change them)
labels = components.delivered_labels(tab.db, bench.session_id, state.n_events, settings, bench)
work = bench.work_status(with_estimate=True)
components.show_work_status(work)

cols = st.columns(3)
cols[0].metric("Events", state.n_events, help="Answers, skips, undos and resolves recorded in this session.")
cols[1].metric("Answered items", int(last["answered"]))

st.subheader("Labelled data")
#: What each label source means; a source the service adds later is shown under its own name.
SOURCES = {
    "expert": ("Expert labels", "Items an annotator answered, or a reviewer resolved."),
    "given": ("Given labels", "Items with a single candidate label: from the import, or left after answers."),
    "model": ("Model labels", components.MODEL_LABELS_HELP),
    "crowd": ("Crowd labels", "Single labels left by the crowd's votes: not audited, so their error is not known."),
    "undecided": ("Undecided items", components.UNDECIDED_HELP),
}
by_source = st.columns(len(labels.counts))
for column, (source, count) in zip(by_source, labels.counts.items(), strict=True):
    title, meaning = SOURCES.get(source, (f"{source.capitalize()} labels", None))
    column.metric(title, count, help=meaning)
st.text(labels.statement)
if labels.summary.stated:
    st.caption(components.md(promise_meaning(labels.summary)))
st.markdown("**Labelled items against answered items**")
st.vega_lite_chart(components.labelled_curve(history, labels), components.LABELLED_SPEC)
st.caption(
    "Expert and given labels after each answer, replayed from the session's events. The model's labels "
    "are one point, now: they count only once audited answers back them."
)

left, right = st.columns(2)
with left:
    st.markdown("**Open targets after each event**")
    # Beside the chart, not among the counts of labels: it is what the query order works on, not
    # the work left (a done session may still have open targets).
    st.caption(f"{int(last['open_targets'])} now. " + components.OPEN_TARGETS_HELP)
    st.vega_lite_chart(
        history[["step", "open_targets"]].rename(columns={"step": "events", "open_targets": "open targets"}),
        components.count_chart("events", "open targets"),
    )
with right:
    timed = history.dropna(subset=["time"])
    st.markdown("**Answered items over time**")
    if timed.empty:
        st.caption("No answers yet.")
    else:
        st.vega_lite_chart(
            timed[["time", "answered"]],
            components.count_chart("time", "answered", x_type="temporal", y_title="answered items"),
        )

if "dst_accuracy" in history:
    st.markdown(
        "**Accuracy against the known true labels** — the model's label for every item (solid), "
        "and over the labels it is sure of (dashed)"
    )
    st.vega_lite_chart(components.accuracy_frame(history), components.ACCURACY_SPEC)

st.markdown("**Candidate-set sizes**")
st.bar_chart(candidate_set_sizes(state), stack=False, height=240)

st.subheader("Annotators")
people, pairs, shared = components.team_tables(tab.db, bench.session_id, state.n_events, tab.user, bench)
if people.empty:
    st.caption("No answers yet.")
else:
    # One event has no gap to time: a dash, not "None".
    speed = people["seconds_per_event"].map(lambda v: "–" if pd.isna(v) else f"{v:.1f}")
    st.dataframe(
        people.assign(seconds_per_event=speed).reset_index(),
        hide_index=True,
        width="stretch",
        column_config={
            "seconds_per_event": st.column_config.TextColumn(
                "seconds / event", help="Median time between an annotator's events (two are needed)."
            )
        },
    )
    if shared["items_shared"] >= components.AGREEMENT_MIN_ITEMS:
        st.metric(
            "Raw agreement",
            f"{shared['raw_agreement']:.0%}",
            help=f"Share of the {shared['items_shared']} items answered by two or more annotators on which all "
            "of them gave the same answer.",
        )
        st.caption(f"Over {shared['items_shared']} items answered by two or more annotators.")
        st.markdown("**Agreement per pair** (Cohen's kappa over the items both answered)")
        st.dataframe(pairs, hide_index=True, width="stretch")
    elif shared["items_shared"]:
        st.caption(
            f"{shared['items_shared']} item(s) answered by two annotators so far: too few to measure agreement "
            f"(it is shown from {components.AGREEMENT_MIN_ITEMS} shared items)."
        )
    else:
        st.caption(
            "No item has been answered by two annotators yet (set the session's overlap to 2 to measure agreement)."
        )

st.subheader("Export")
st.caption(
    "The same files as `winnow export --what ranked|labelled|events`. The labelled data has every "
    "item's final label, its source (expert, given, crowd, model or undecided) and, for model labels, "
    "the model's margin (it orders them; it is not a probability)."
)
components.export_links(bench)
