"""Query: the item worth asking about most, shown as itself, its candidate labels as buttons with
their keys, and why it is asked; or, once the session's work is done
(:func:`app.service.work_is_done`), what is labelled, by whom and with what promise, the
exports, and what more answers would change.

Each button records one event through :meth:`Workbench.record` in a callback, which also
patches the ranking incrementally; the rerun that follows then draws the next item. Every
widget key names the item on screen and every callback passes that item as ``displayed``, so
a key press that arrives after the page moved on answers nothing (the service refuses it with
a gentle message instead of answering an item nobody saw).

When the item on screen is suspect (its neighbours' evidence contradicts every candidate,
:mod:`app.service.suspects`), the page says which labels they suggest, in words: recording a
label outside the set stays a deliberate choice (Another label…, then choose it), never one
click on a suggestion.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from app.service import ACTION_KEYS, reserve_next_item, session_rights, vote_summary, workbench_suspects
from app.ui import components
from app.ui import state as ui
from app.ui.components import md
from app.ui.errors import shown_error
from engine.exceptions import InvalidInput

tab = ui.current()
bench = tab.workbench
KEY = ACTION_KEYS


def record(kind: str, position: int | None = None, label: int | None = None, undoes: int | None = None) -> None:
    """Button callback: write one event about the item on screen; the page then says what was
    recorded (or, for a stale press, that nothing was)."""
    if tab.workbench is None:
        return
    bench = tab.workbench
    names = bench.label_names
    tab.other_label_for = None
    if kind == "undo":
        undone = bench.undo_target(ui.annotator(tab))  # named in the notice: which item comes back
        event_id = ui.record(tab, "undo", undoes=undoes)  # refused when nothing is left to undo
    else:
        # In team mode the item on screen is the one the store reserved for this user.
        offer = "lease" if tab.user is not None else "query"
        event_id = ui.record(tab, kind, position=position, label=label, displayed=offer)
    if event_id is None:
        return
    item = "" if position is None else bench.state.external_ids[position]
    said = {
        "answer": f"{item} is {names[label]}" if label is not None else item,
        "other_label": f"{item} is {names[label]} (not in its set)" if label is not None else item,
        "none_of_these": f"{item}: none of these",
        "skip": f"skipped {item}",
    }.get(kind, kind)
    # Event ids run across every session of the store: the page counts this session's events.
    number = bench.event_number(event_id)
    if kind == "undo":
        tab.notice = ("ok", f"Undone: {undone_words(undone)} (undo recorded as event {number} of this session).")
        return
    conflict = next((c for c in bench.state.conflicts if c.position == position), None)
    if kind != "undo" and conflict is not None:
        # Not a green "Recorded": the answer disagrees with someone else's.
        others = [who for who in conflict.annotators if who != ui.annotator(tab)]
        tab.notice = (
            "warning",
            f"Conflict recorded: {said} (event {number}), but {', '.join(others)} "
            "answered differently. A reviewer will settle it. Press U to undo.",
        )
        return
    tab.notice = ("ok", f"Recorded: {said} (event {number} of this session). Press U to undo.")


def undone_words(event) -> str:
    """The event an undo cancelled, naming its item (``event``: :meth:`Workbench.undo_target`)."""
    if event is None or tab.workbench is None:
        return "your last event"
    bench = tab.workbench
    item = bench.state.external_ids[event.position]
    if event.kind in ("answer", "other_label", "resolve") and event.label is not None:
        return f"your answer {bench.label_names[int(event.label)]} on {item}; it can be asked again"
    if event.kind == "none_of_these":
        return f"your “none of these” on {item}; it can be asked again"
    if event.kind == "skip":
        return f"your skip of {item}"
    return f"your {event.kind.replace('_', ' ')} on {item}"


def record_other(position: int, in_set: tuple[int, ...]) -> None:
    """The label search's callback: choosing a label records it at once; a label of the item's
    own set (the search lists them too, so typing one is not a dead end) records an answer."""
    choice = st.session_state.get(ui.Keys.other_label(position))
    if choice is None or tab.workbench is None:
        return
    label = tab.workbench.label_names.index(choice)
    record("answer" if label in in_set else "other_label", position, label)


def keep_answering(session_id: int | None) -> None:
    tab.answering_after_done = session_id


def open_other(position: int) -> None:
    tab.other_label_for = position


def say_if_suspect(position: int) -> None:
    """When the item on screen is suspect (its neighbours' evidence contradicts every label of
    its set, :mod:`app.service.suspects`), say so and which labels they suggest, in words: the
    annotator who agrees chooses the label with Another label… (two deliberate steps)."""
    if tab.workbench is None:
        return
    suspect = workbench_suspects(tab.workbench).item(position)
    if suspect is None:
        return
    st.text(suspect.text())  # label names are user content: text, never Markdown
    st.caption("If its true label is not in the set, choose it with Another label….")


st.title("Query")
bench = components.workbench_or_stop(bench)

state = bench.state
counts = bench.summary()
work = bench.work_status()
components.show_notice(tab)
nameless = components.ask_for_name(tab)  # answers must be someone's: the buttons wait for a name
last_event = bench.latest_event(ui.annotator(tab)) if not nameless else None

if work.done and tab.answering_after_done != bench.session_id:
    # Done: no item undecided, nothing left to check. Say so, with the statement, the exports and
    # what more answers would buy, instead of serving the next item as if nothing had happened.
    components.show_work_status(work, statement=bench.label_statement().statement)
    if "export_labelled" in session_rights(bench.session_factory, bench.session_id, actor=tab.user):
        st.markdown("**Export the labelled data**")
        components.export_links(bench, kinds=("labelled",))
    if work.counts["model"]:
        st.button(
            "Go on: check model labels one by one",
            key=ui.Keys.KEEP_ANSWERING,
            on_click=keep_answering,
            args=(bench.session_id,),
            help="Each answer replaces a model label by yours; no statement changes.",
            disabled=nameless,
        )
    st.stop()

cols = st.columns(4)
cols[0].metric("Answered items", counts["answered"])
cols[1].metric("Undecided items", work.counts["undecided"], help=components.UNDECIDED_HELP)
cols[2].metric("Model labels", work.counts["model"], help=components.MODEL_LABELS_HELP)
cols[3].metric("Conflicts", counts["conflicts"], help="Settle them on the Rejects page.")
if work.done:
    st.caption(work.headline + " You are checking model labels: each answer replaces one by yours.")
    st.button("Stop checking", key=ui.Keys.STOP_ANSWERING, on_click=keep_answering, args=(None,))
else:
    st.caption(work.headline + " The Progress page says about how many answers are left.")

if tab.user is not None:
    # Team mode: the item is reserved for this user (a lease in the store), so two annotators
    # are not shown the same item unless the session's overlap asks for it.
    try:
        reserved = reserve_next_item(bench, tab.user)
    except InvalidInput as exc:  # e.g. not assigned to this session
        st.error(md(shown_error(exc)))  # names are user content: shown as text, never as Markdown
        st.stop()
    queue = np.array([] if reserved is None else [reserved], dtype=int)
else:
    queue = bench.queue(top=1)
if queue.size == 0:
    st.success("Nothing left to ask: every item is settled, set aside or being answered by someone else.")
    st.button(
        "Undo my last answer",
        key=ui.Keys.undo(last_event),
        shortcut=KEY["undo"],
        on_click=record,
        args=("undo", None, None, last_event),
    )
    st.stop()

position = int(queue[0])
# In team mode an item may come back to a second annotator (overlap): they see its original
# set, not the set the first answer narrowed it to, so that their answer is their own.
shown_set = state.original_candidates[position] if tab.user is not None else state.candidates[position]
candidates = np.flatnonzero(shown_set)
names = bench.label_names
hotkeys = bench.hotkeys
item_id = state.external_ids[position]

left, right = st.columns([5, 4], gap="large")
with left:
    st.subheader(f"Item {md(item_id)}")
    components.show_item(bench, position, size="large")
    votes = vote_summary(bench.session_factory, bench.config.dataset_id, position, bench.label_names)
    if votes.n_votes:  # a dataset made from crowd votes: what the crowd said (text: names are user content)
        st.text(votes.text)
    if state.skipped[position]:
        st.caption("Everything left has been skipped at least once; skipped items come last.")

with right:
    st.markdown("**Which label is it?**")
    components.hide_repeated_keys(
        [ui.Keys.answer(position, int(label)) for label in candidates if hotkeys.get(names[label]) == names[label]]
    )
    for label in candidates:
        key = hotkeys.get(names[label])
        st.button(
            md(names[label]),
            key=ui.Keys.answer(position, int(label)),
            type="primary",
            width="stretch",
            shortcut=key,
            on_click=record,
            args=("answer", position, int(label)),
            help=None if key else "This label has no key (set one on the Sessions page).",
            disabled=nameless,
        )
    outside = [names[m] for m in range(len(names)) if not shown_set[m]]
    # Two buttons a row: on a 1280×720 screen "Another label…" stays above the fold.
    row = st.columns(2, gap="xsmall")
    row[0].button(
        "None of these",
        key=ui.Keys.none_of_these(position),
        shortcut=KEY["none_of_these"],
        width="stretch",
        on_click=record,
        args=("none_of_these", position),
        disabled=nameless,
    )
    if outside:
        row[1].button(
            "Another label…",
            key=ui.Keys.other(position),
            shortcut=KEY["other_label"],
            width="stretch",
            on_click=open_other,
            args=(position,),
            disabled=nameless,
        )
    row = st.columns(2, gap="xsmall")
    row[0].button(
        "Skip",
        key=ui.Keys.skip(position),
        shortcut=KEY["skip"],
        width="stretch",
        on_click=record,
        args=("skip", position),
        disabled=nameless,
    )
    row[1].button(
        "Undo",
        key=ui.Keys.undo(last_event),
        shortcut=KEY["undo"],
        width="stretch",
        on_click=record,
        args=("undo", None, None, last_event),
        disabled=last_event is None,
    )
    if outside and tab.other_label_for == position:
        # Options are drawn as plain text (not Markdown); typing filters them, Enter records. The
        # set's own labels are listed after the others, saying which key answers them: typing one
        # finds it instead of "No results", and choosing it records an answer.
        in_set = tuple(int(m) for m in candidates)
        own = {names[m]: hotkeys.get(names[m]) for m in in_set}
        st.selectbox(
            "Label outside the set (type to search, Enter to record)",
            outside + list(own),
            index=None,
            key=ui.Keys.other_label(position),
            on_change=record_other,
            args=(position, in_set),
            placeholder="Type a label…",
            format_func=lambda name: (
                name if name not in own else f"{name} — in its set" + (f": press {own[name]}" if own[name] else "")
            ),
        )
        components.keyboard(focus=f".st-key-{ui.Keys.other_label(position)} input", key=f"keyboard_focus_{position}")
    say_if_suspect(position)

why = bench.explain(position)
# While audits are served, what an answer would settle is not shown for any item (the audits,
# drawn at random among the labels the model is sure of, would stand out): the page then shows
# what it shows for every item alike, the nearest items, under a heading that claims no more.
if why.effects:
    st.subheader("Why this item")
    for effect in why.effects:
        st.markdown(f"If you say **{md(effect.label)}**, {effect.outcome}.")
if why.neighbours:
    if not why.effects:
        st.subheader("Its nearest items")
    st.markdown(f"**Its {len(why.neighbours)} nearest items** and their candidate labels decide its own label:")
    components.show_neighbours(bench, [neighbour.position for neighbour in why.neighbours])

# Drawn only while the toggle is on (it stays on from item to item): otherwise its tables would
# be sent to the browser and laid out after every answer, for a reader who rarely opens them.
if not why.withheld and st.toggle("Details: scores and label sets", key=ui.Keys.QUERY_DETAILS):
    st.text(
        f"Query score {why.score:g} (criterion {bench.config.criterion}, k = {bench.config.k}). "
        + components.moved_targets_text(bench.config.criterion, why.n_targets_changed)
    )
    ex = why.example
    if ex is not None:
        fmt = lambda labels: "{" + ", ".join(labels) + "}"  # noqa: E731
        st.text(
            f"For example target {ex.target_id}: necessary labels NL = {fmt(ex.necessary)}, "
            f"possible labels PL = {fmt(ex.possible)}."
        )
        if ex.witness_label is not None:
            st.text(f"{ex.witness_label} can win when the neighbours vote:")
            st.dataframe(
                {
                    "neighbour": [w[0] for w in ex.witness],
                    "votes": [w[1] for w in ex.witness],
                    "its candidates": [", ".join(w[2].split("|")) for w in ex.witness],
                },
                hide_index=True,
            )
        st.dataframe(
            {
                "if the answer is": list(ex.necessary_after),
                f"NL of {ex.target_id} becomes": [fmt(nl) for nl in ex.necessary_after.values()],
            },
            hide_index=True,
        )
    elif not bench.reads_votes:
        st.text("This criterion is a baseline: it does not look at the neighbours' votes.")
