"""Query: the item worth asking about most, its candidate labels as buttons (keys 1–9), and why.

Each button records one event through :meth:`Workbench.record` in a callback, which also
patches the ranking incrementally; the rerun that follows then draws the next item.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from app.ui import components
from app.ui import state as ui
from engine.exceptions import InvalidInput

tab = ui.current()
bench = tab.workbench


def record(kind: str, position: int | None = None, label: int | None = None) -> None:
    """Button callback: write one event; the page then shows what was recorded."""
    if tab.workbench is None:
        return
    names = tab.workbench.label_names
    try:
        event_id = tab.workbench.record(ui.annotator(tab), kind, position=position, label=label)
    except InvalidInput as exc:  # e.g. undo with nothing left to undo
        tab.notice = f"error:{exc}"
        return
    item = "" if position is None else tab.workbench.state.external_ids[position]
    said = {
        "answer": f"{item} is **{names[label]}**" if label is not None else item,
        "other_label": f"{item} is **{names[label]}** (not in its set)" if label is not None else item,
        "none_of_these": f"{item}: none of these",
        "skip": f"skipped {item}",
        "undo": "undid your last event",
    }.get(kind, kind)
    tab.notice = f"ok:Recorded: {said} (event {event_id}). Press U to undo."


def record_other(position: int) -> None:
    choice = st.session_state.get(ui.Keys.OTHER_LABEL)
    if choice is None or tab.workbench is None:
        tab.notice = "error:Choose a label first."
        return
    record("other_label", position, tab.workbench.label_names.index(choice))


st.title("Query")
bench = components.workbench_or_stop(bench)

state = bench.state
counts = bench.summary()
cols = st.columns(4)
cols[0].metric("Answered items", counts["answered"])
cols[1].metric("Open items", counts["open"])
cols[2].metric("Open targets", counts["open_targets"],
               help="Targets whose necessary labels (NL) and approximate possible labels (APL) differ.")
cols[3].metric("Conflicts", counts["conflicts"], help="Settle them on the Rejects page.")

components.show_notice(tab)

queue = bench.queue(top=1)
if queue.size == 0:
    st.success("Nothing left to ask: every item is settled or set aside.")
    st.button("Undo my last answer", key=ui.Keys.UNDO, shortcut="U", on_click=record, args=("undo",))
    st.stop()

position = int(queue[0])
candidates = np.flatnonzero(state.candidates[position])
names = bench.label_names
item_id = state.external_ids[position]

left, right = st.columns([3, 2], gap="large")
with left:
    st.subheader(f"Item `{item_id}`")
    show, buttons = st.columns([2, 3])
    with show:
        components.show_item(bench, position, caption=f"score {bench.scores[position]:g}")
    with buttons:
        st.markdown("**Which label is it?**")
        for slot, label in enumerate(candidates, start=1):
            st.button(
                f"**{names[label]}**", key=ui.Keys.answer(slot), type="primary", width="stretch",
                shortcut=str(slot) if slot <= 9 else None,
                on_click=record, args=("answer", position, int(label)),
            )
        st.button("None of these", key=ui.Keys.NONE_OF_THESE, shortcut="N", width="stretch",
                  on_click=record, args=("none_of_these", position))
        row = st.columns(2)
        row[0].button("Skip", key=ui.Keys.SKIP, shortcut="S", width="stretch", on_click=record, args=("skip", position))
        row[1].button("Undo", key=ui.Keys.UNDO, shortcut="U", width="stretch", on_click=record, args=("undo",))
        outside = [names[m] for m in range(len(names)) if not state.candidates[position, m]]
        if outside:
            with st.expander("Another label"):
                st.selectbox("Label outside the set", outside, index=None, key=ui.Keys.OTHER_LABEL)
                st.button("Record this label", key=ui.Keys.OTHER_SUBMIT, on_click=record_other, args=(position,))
    if state.skipped[position]:
        st.caption("Everything left has been skipped at least once; skipped items come last.")

with right:
    st.subheader("Why this item")
    why = bench.explain(position)
    st.markdown(f"An answer can change the decision of **{why.n_targets_changed}** target(s) "
                f"(criterion `{bench.config.criterion}`, k = {bench.config.k}).")
    ex = why.example
    if ex is not None:
        fmt = lambda labels: "{" + ", ".join(labels) + "}"  # noqa: E731
        st.markdown(
            f"For example target `{ex.target_id}`: necessary labels NL = {fmt(ex.necessary)}, "
            f"possible labels PL = {fmt(ex.possible)}."
        )
        if ex.witness_label is not None:
            st.markdown(f"**{ex.witness_label}** can win when the neighbours vote:")
            st.markdown(components.markdown_table(
                ["neighbour", "votes", "its candidates"],
                [(who, vote, ", ".join(cands.split("|"))) for who, vote, cands in ex.witness],
            ))
        st.markdown(components.markdown_table(
            ["if the answer is", f"NL of `{ex.target_id}` becomes"],
            [(label, fmt(nl)) for label, nl in ex.necessary_after.items()],
        ))
    elif bench.ranker is None:
        st.caption("This criterion is a baseline: it does not look at the neighbours' votes.")
