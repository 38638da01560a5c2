"""Rejects: the labels DST-PLL refuses to commit to, and the conflicts between annotators.

DST-PLL runs on the current candidate sets (cached per session state); the open items whose
prediction it rejects are listed by margin, smallest first, each with the belief and the
plausibility of every label. The expert confirms a label (an ``answer`` event) or leaves the
item. Conflicting verdicts are settled with a ``resolve`` event.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from app.ui import components
from app.ui import state as ui
from engine.exceptions import InvalidInput

tab = ui.current()
bench = tab.workbench


def record(kind: str, position: int, label: int) -> None:
    if tab.workbench is None:
        return
    item = tab.workbench.state.external_ids[position]
    try:
        event_id = tab.workbench.record(ui.annotator(tab), kind, position=position, label=label)
    except InvalidInput as exc:
        tab.notice = f"error:{exc}"
        return
    verb = "Resolved" if kind == "resolve" else "Confirmed"
    tab.notice = f"ok:{verb} {item} as {tab.workbench.label_names[label]} (event {event_id})."


def leave(position: int) -> None:
    tab.left_alone.add(position)


st.title("Rejects")
bench = components.workbench_or_stop(bench)

components.show_notice(tab)

state = bench.state
names = bench.label_names

# ------------------------------------------------------------------------------ conflicts
st.subheader(f"Conflicts between annotators ({len(state.conflicts)})")
if not state.conflicts:
    st.caption("No two annotators disagree about any item.")
for conflict in state.conflicts:
    position = conflict.position
    with st.container(border=True):
        picture, text = st.columns([1, 4])
        with picture:
            components.show_item(bench, position, pixels=96)
        with text:
            disputed = ", ".join(names[m] for m in conflict.labels)
            extra = " and “none of these”" if conflict.none_of_these else ""
            st.markdown(f"**`{state.external_ids[position]}`** — {', '.join(conflict.annotators)} "
                        f"disagree: {disputed}{extra}. Original set: "
                        f"{components.label_set(bench, state.original_candidates[position])}.")
            choices = list(conflict.labels) or list(np.flatnonzero(state.original_candidates[position]))
            buttons = st.columns(min(len(choices), 6) or 1)
            for i, label in enumerate(choices):
                buttons[i % len(buttons)].button(
                    f"Resolve as {names[label]}", key=ui.Keys.resolve(position, int(label)),
                    on_click=record, args=("resolve", position, int(label)),
                )

# ------------------------------------------------------------------------------ rejects
queue = components.reject_queue(tab.db, bench.session_id, state.n_events, bench)
rejected = ~queue.accepted
st.subheader(f"Predictions DST-PLL rejects ({queue.n_rejected} of {queue.positions.size} open items)")
st.caption("A prediction is accepted only when the belief of its label exceeds the plausibility of "
           "every other label (margin > 0). Smallest margin first.")
shown_max = st.number_input("Show", min_value=1, max_value=200, value=10, step=5, key=ui.Keys.REJECTS_SHOWN)
rows = [i for i in np.flatnonzero(rejected) if int(queue.positions[i]) not in tab.left_alone][: int(shown_max)]
if not rows:
    st.success("Nothing to review: DST-PLL commits to a label for every open item you have not left alone.")
for i in rows:
    position = int(queue.positions[i])
    candidates = np.flatnonzero(state.candidates[position])
    with st.container(border=True):
        picture, text, chart = st.columns([1, 2, 3])
        with picture:
            components.show_item(bench, position, pixels=96)
        with text:
            st.markdown(f"**`{state.external_ids[position]}`** · candidates "
                        f"{components.label_set(bench, state.candidates[position])}")
            st.markdown(f"DST-PLL would say **{names[int(queue.labels[i])]}**, margin {queue.margin[i]:.3f}")
            for label in candidates:
                st.button(
                    f"Confirm {names[label]}", key=ui.Keys.confirm(position, int(label)),
                    type="primary" if label == queue.labels[i] else "secondary",
                    on_click=record, args=("answer", position, int(label)),
                )
            st.button("Leave it", key=ui.Keys.leave(position), on_click=leave, args=(position,))
        with chart:
            bars = pd.DataFrame(
                {"belief": queue.belief[i], "plausibility": queue.plausibility[i]}, index=pd.Index(names, name="label")
            )
            st.bar_chart(bars, stack=False, height=200)
if tab.left_alone:
    st.caption(f"{len(tab.left_alone)} item(s) left alone in this tab.")
