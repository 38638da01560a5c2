"""Rejects: the undecided items, the items the model will not label (label source ``undecided``:
no expert or given label, and no model label the audited answers back at the session's error
target), counted as on the Progress and Query pages and by ``winnow session status``.

They are the conflicts between annotators and the items listed below them. While no model
label is stated at all (no audited answers back one yet), every open item is undecided and the
Query page already asks them in the best order: the page says so, with the service's statement
of why, instead of listing the queue again, and lists only the items flagged "none of these"
(which the Query page does not serve).

DST-PLL runs on the current candidate sets (cached per session state) and on the session's
persisted neighbour graph (:meth:`Workbench.rejects`: the page searches no neighbours); the
undecided items (those whose model label is not kept) are listed by margin, smallest first,
each shown as itself (text, image, audio) with its candidate labels. The expert confirms a
label (an ``answer`` event) or leaves the item. Sets that may miss the true label have a section
of their own (:mod:`app.service.suspects`): every item not settled, most suspect first, from the
first minute, each with its suspicion, whether the false-discovery-rate test flags it, and the
labels the neighbours suggest named in words; recording a label outside the set takes two deliberate
steps (choose it, then press Record: an ``other_label`` event). The first item listed answers to the keyboard:
its labels' keys confirm, L leaves it. The model's guess is not pre-selected (it would anchor
the expert): it waits, with belief and plausibility, in a collapsed expander. Conflicting verdicts are settled with a
``resolve`` event.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from app.service import ACTION_KEYS, StaleAnswer, check_still_open, most_suspect, workbench_suspects
from app.ui import components
from app.ui import state as ui
from app.ui.components import md

tab = ui.current()
bench = tab.workbench
LEAVE_KEY = ACTION_KEYS["leave"]


def record(kind: str, position: int, label: int) -> None:
    """Button callback: confirm a rejected prediction (or settle a conflict) with ``label``."""
    displayed = "conflicts" if kind == "resolve" else "rejects"
    event_id = ui.record(tab, kind, position=position, label=label, displayed=displayed)
    bench = tab.workbench
    if event_id is not None and bench is not None:  # an event was written: the session is open
        verb = "Resolved" if kind == "resolve" else "Confirmed"
        item = bench.state.external_ids[position]
        number = bench.event_number(event_id)
        tab.notice = ("ok", f"{verb} {item} as {bench.label_names[label]} (event {number} of this session).")


def leave(position: int) -> None:
    tab.left_alone.add(position)


def record_outside_label(position: int) -> None:
    """The Record button of an item of the most-suspect list: the label chosen in its select box,
    outside its set (an ``other_label``); nothing is recorded before a label was chosen."""
    bench = tab.workbench
    choice = st.session_state.get(ui.Keys.suspect_choice(position))
    if bench is None or choice is None:
        return
    bench.refresh()  # another tab or annotator may have settled it
    try:
        answered = bench.has_verdict(ui.annotator(tab), position)
        check_still_open(bench.state, position, answered=answered)
    except StaleAnswer as exc:
        tab.notice = ("info", str(exc))
        return
    label = bench.label_names.index(choice)
    event_id = ui.record(tab, "other_label", position=position, label=label)
    if event_id is not None:
        item = bench.state.external_ids[position]
        number = bench.event_number(event_id)
        tab.notice = ("ok", f"Recorded: {item} is {choice} (not in its set) (event {number} of this session).")


st.title("Rejects")
bench = components.workbench_or_stop(bench)

components.show_notice(tab)

state = bench.state
names = bench.label_names
hotkeys = bench.hotkeys

labels = components.delivered_labels(tab.db, bench.session_id, state.n_events, bench.label_settings, bench)
queue = components.reject_queue(tab.db, bench.session_id, state.n_events, bench)
rejected = ~queue.accepted
no_model_labels = labels.counts.get("model", 0) == 0
st.metric(
    "Undecided items",
    labels.counts["undecided"],
    help="Items without a label: the model will not label them and no annotator has settled them. "
    "The Progress and Query pages count the same items.",
)
st.caption(
    f"{len(state.conflicts)} in conflict between annotators, {queue.n_rejected} without a label the model "
    "stands behind (including the items flagged “none of these”)."
)

# ------------------------------------------------------------------------------ conflicts
st.subheader(f"Conflicts between annotators ({len(state.conflicts)})")
if not state.conflicts:
    st.caption("No two annotators disagree about any item.")
for conflict in state.conflicts:
    position = conflict.position
    with st.container(border=True):
        picture, text = st.columns([1, 3])
        with picture:
            components.show_item(bench, position, size="small")
        with text:
            disputed = ", ".join(names[m] for m in conflict.labels)
            extra = " and “none of these”" if conflict.none_of_these else ""
            st.text(
                f"Item {state.external_ids[position]}: {', '.join(conflict.annotators)} disagree: {disputed}{extra}.\n"
                f"Original set: {components.label_set(bench, state.original_candidates[position])}."
            )
            choices = list(conflict.labels) or list(np.flatnonzero(state.original_candidates[position]))
            if not ui.is_reviewer(tab):  # the store would refuse an annotator's resolve
                st.caption("A reviewer settles it on the Review page.")
                continue
            buttons = st.columns(min(len(choices), 6) or 1)
            for i, label in enumerate(choices):
                buttons[i % len(buttons)].button(
                    f"Resolve as {md(names[label])}",
                    key=ui.Keys.resolve(position, int(label)),
                    on_click=record,
                    args=("resolve", position, int(label)),
                )

# ------------------------------------------------------------------------------ rejects
st.subheader(f"Items the model will not label ({queue.n_rejected})")
if no_model_labels:
    # Every open item is undecided: the Query page asks them, in the best order. Listing them
    # here again would be the same queue in another order.
    st.info(
        "No model label is stated yet, so the model labels no item and every open item is undecided. "
        "The Query page asks them in the most useful order; model labels follow once enough audited "
        "answers back them. Why, in the service's words:"
    )
    st.text(labels.statement)  # the service's sentence, plain text
    flagged = [int(i) for i in np.flatnonzero(rejected) if state.none_of_these[int(queue.positions[i])]]
    if flagged:
        st.caption("Items flagged “none of these” (the Query page does not serve them):")
    candidates_rows = flagged
else:
    st.caption(
        "Confirm the label you see, or leave the item. The first item answers to the keyboard: "
        f"its labels' keys confirm, {LEAVE_KEY.upper()} leaves it. Hardest first."
    )
    candidates_rows = [int(i) for i in np.flatnonzero(rejected)]
shown_max = (
    st.number_input("Show", min_value=1, max_value=200, value=10, step=5, key=ui.Keys.REJECTS_SHOWN)
    if candidates_rows
    else 0
)
rows = [i for i in candidates_rows if int(queue.positions[i]) not in tab.left_alone][: int(shown_max)]
if not rows and not no_model_labels:
    st.success("Nothing to review: the model labels every open item you have not left alone.")
for n, i in enumerate(rows):
    position = int(queue.positions[i])
    candidates = np.flatnonzero(state.candidates[position])
    first = n == 0  # only the first item takes keys: one key per action on a page
    with st.container(border=True):
        picture, text = st.columns([2, 3])
        with picture:
            components.show_item(bench, position, size="small")
        with text:
            st.text(f"Item {state.external_ids[position]}")
            st.caption("Which label is it?")
            buttons = st.columns(min(len(candidates), 4))
            if first:
                components.hide_repeated_keys(
                    [ui.Keys.confirm(position, m) for m in candidates.tolist() if hotkeys.get(names[m]) == names[m]]
                )
            for j, label in enumerate(candidates.tolist()):
                key = hotkeys.get(names[label]) if first else None
                # Every label looks the same: the model's guess is not pre-selected.
                buttons[j % len(buttons)].button(
                    md(names[label]),
                    key=ui.Keys.confirm(position, int(label)),
                    shortcut=key,
                    width="stretch",
                    on_click=record,
                    args=("answer", position, int(label)),
                )
            st.button(
                "Leave it",
                key=ui.Keys.leave(position),
                shortcut=LEAVE_KEY if first else None,
                on_click=leave,
                args=(position,),
            )
            if queue.guess_hidden is not None and queue.guess_hidden[i]:
                st.caption(
                    "The model's guess is not shown for this item: it is among the items being audited, "
                    "which are answered without seeing it."
                )
                continue
            with st.expander("What the model thinks"):
                st.text(
                    f"The model's best guess: {names[int(queue.labels[i])]} (margin {queue.margin[i]:.3f}; it "
                    "labels an item only where audited answers back it)."
                )
                bars = pd.DataFrame(
                    {"belief": queue.belief[i], "plausibility": queue.plausibility[i]},
                    index=pd.Index(names, name="label"),
                )
                st.bar_chart(bars, stack=False, height=200)
if tab.left_alone:
    st.caption(f"{len(tab.left_alone)} item(s) left alone in this tab.")

# ------------------------------------------------------------------------------ suspects
SUSPECTS_SHOWN = 10
suspects = workbench_suspects(bench)
ranked = most_suspect(bench.graph, state, bench, fdr=suspects.fdr)
st.subheader(f"Sets that may miss the true label ({len(suspects.items)})")
st.caption(suspects.summary())
st.caption(
    "Most suspect first: every item not settled, by its suspicion (0 to 1) that its set misses the "
    "true label, from its neighbours' labels and a linear model of the features. The items the test "
    "flags say “flagged”."
)
for suspect in ranked[:SUSPECTS_SHOWN]:
    position = suspect.position
    with st.container(border=True):
        picture, text = st.columns([1, 3])
        with picture:
            components.show_item(bench, position, size="small")
        with text:
            flag = " · flagged" if suspect.flagged else ""
            st.text(
                f"Item {suspect.external_id}: set {{{', '.join(suspect.candidates)}}}\n"
                f"Suspicion {suspect.suspicion or 0.0:.2f}{flag}\n{suspect.text()}"
            )
            # Two deliberate steps: choose a label (the neighbours' suggestions first), then Record.
            suggested = [s.name for s in suspect.suggestions]
            outside = suggested + [
                name for m, name in enumerate(names) if not state.candidates[position][m] and name not in suggested
            ]
            choose, confirm = st.columns([3, 1], vertical_alignment="bottom")
            choose.selectbox(
                "Its label, outside the set",
                outside,
                index=None,
                key=ui.Keys.suspect_choice(position),
                placeholder="Choose a label…",
            )
            confirm.button(
                "Record",
                key=ui.Keys.suspect_record(position),
                disabled=st.session_state.get(ui.Keys.suspect_choice(position)) is None,
                on_click=record_outside_label,
                args=(position,),
            )
if len(ranked) > SUSPECTS_SHOWN:
    st.caption(f"The {SUSPECTS_SHOWN} most suspect of {len(ranked)} are shown; answering one shows the next.")
