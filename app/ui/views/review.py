"""Review: settle the conflicts between annotators, one at a time, with the session's key per label.

For the conflict on top: who answered what and when, the item itself (drawn like on the
Query page), DST-PLL's belief and plausibility of every label, and the item's neighbours. The
reviewer's choice is a ``resolve`` event under their name; the store refuses it from anyone
but a reviewer or an admin (team mode), so this page is only a convenience.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from app.service import conflict_details, vote_summary
from app.ui import components
from app.ui import state as ui
from app.ui.components import md

tab = ui.current()


def resolve(position: int, label: int) -> None:
    """Button callback: record the reviewer's ``resolve`` event."""
    # displayed="conflicts": a key press that arrives after another reviewer settled the item
    # (or after this page moved on) is refused, nothing written.
    event_id = ui.record(tab, "resolve", position=position, label=label, displayed="conflicts")
    bench = tab.workbench
    if event_id is not None and bench is not None:  # an event was written: the session is open
        tab.notice = (
            "ok",
            f"Resolved {bench.state.external_ids[position]} as {bench.label_names[label]} "
            f"(event {bench.event_number(event_id)} of this session).",
        )


def resolve_other(position: int) -> None:
    choice = st.session_state.get(ui.Keys.review_other(position))
    if choice is None or tab.workbench is None:
        tab.notice = ("error", "Choose a label first.")
        return
    resolve(position, tab.workbench.label_names.index(choice))


st.title("Review")
if not ui.is_reviewer(tab):
    st.error("Only reviewers and admins settle conflicts.")
    st.stop()
bench = components.workbench_or_stop(tab.workbench)
components.show_notice(tab)

details = conflict_details(bench, actor=tab.user)
st.caption(f"{len(details)} conflict(s) between annotators in session {md(repr(bench.config.name))}.")
if not details:
    # A resolved disagreement is still a disagreement: say "settled", not "agree".
    n_resolved = int(np.asarray(bench.state.resolved).sum())
    st.success(
        f"No conflict left to settle ({n_resolved} settled by a reviewer so far)."
        if n_resolved
        else "No conflicts: the annotators agree on every item they share."
    )
    st.stop()

names = bench.label_names
state = bench.state
conflict = details[0]
position = conflict.position
hotkeys = bench.hotkeys
st.subheader(f"Item {md(conflict.item_id)}")
left, middle, right = st.columns([2, 3, 3], gap="large")
with left:
    components.show_item(bench, position, size="small")
    st.text(f"Original set: {components.label_set(bench, state.original_candidates[position])}")
    votes = vote_summary(bench.session_factory, bench.config.dataset_id, position, names)
    if votes.n_votes:  # what the crowd said before winnow (text: names are user content)
        st.text(votes.text)
with middle:
    st.markdown("**Who answered what**")
    st.dataframe(
        pd.DataFrame(
            [
                {"annotator": v.annotator, "answer": v.label, "when": v.at, "event": v.event_id}
                for v in conflict.verdicts
            ]
        ),
        hide_index=True,
        width="stretch",
    )
    st.markdown("**Resolve as**")
    components.hide_repeated_keys(
        [
            ui.Keys.resolve(position, int(label))
            for label in conflict.labels
            if hotkeys.get(names[label]) == names[label]
        ]
    )
    for label in conflict.labels:
        key = hotkeys.get(names[label])
        st.button(
            md(names[label]),
            key=ui.Keys.resolve(position, int(label)),
            type="primary",
            width="stretch",
            shortcut=key,
            on_click=resolve,
            args=(position, int(label)),
            help=None if key else "This label has no key (set one on the Sessions page).",
        )
    others = [names[m] for m in range(len(names)) if m not in conflict.labels]
    if others:
        with st.expander("Another label"):
            st.selectbox("Label", others, index=None, key=ui.Keys.review_other(position))
            st.button(
                "Resolve with this label",
                key=ui.Keys.review_other_submit(position),
                on_click=resolve_other,
                args=(position,),
            )
with right:
    view = bench.dst_view([position])
    if view.guess_hidden is not None and view.guess_hidden[0]:
        st.caption(
            "The model's guess is not shown for this item: it is among the items being audited, "
            "which are answered without seeing it."
        )
    else:
        verdict = "accepts" if view.accepted[0] else "would not commit to"
        st.markdown(f"**The model** {verdict} **{md(names[int(view.labels[0])])}** (margin {view.margin[0]:.3f})")
        st.bar_chart(
            pd.DataFrame(
                {"belief": view.belief[0], "plausibility": view.plausibility[0]}, index=pd.Index(names, name="label")
            ),
            stack=False,
            height=200,
        )
    neighbours = bench.neighbours(position)
    if neighbours:
        st.markdown("**Nearest neighbours**")
        st.dataframe(
            pd.DataFrame(
                {
                    "item": [n.item_id for n in neighbours],
                    "current set": [" | ".join(n.candidates) for n in neighbours],
                    "answered by": [state.answered_by[n.position] or "" for n in neighbours],
                }
            ),
            hide_index=True,
            width="stretch",
        )

if len(details) > 1:
    st.subheader("Waiting")
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "item": d.item_id,
                    "answers": ", ".join(f"{v.annotator}: {v.label}" for v in d.verdicts),
                    "labels": ", ".join(names[m] for m in d.labels),
                }
                for d in details[1:]
            ]
        ),
        hide_index=True,
        width="stretch",
    )
