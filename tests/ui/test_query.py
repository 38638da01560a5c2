"""The Query page, driven by widget keys; every check ends in the answer_events table.

Widget keys name the item on screen (``Keys.answer(position, label)``), so the tests find the
shown item from them (:func:`position_on_screen`) and press its buttons like the keyboard
would: the button whose ``shortcut`` is the key.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from app.service import ACTION_KEYS, Workbench, change_label_settings, create_session, import_file
from app.store import default_hotkeys
from app.store.db import open_store
from app.store.models import AnswerEvent
from app.ui.components import MAP_COLOURS, MAP_MARGIN, MAP_SIZE, MapFrame, md, pca_map
from app.ui.state import STATE_KEY, Keys
from engine.decision_change import DecisionChangeRanker
from tests.ui.conftest import LABELS, count_rows, events, no_exception, plain, position_on_screen, small_csv_bytes


def metric(at, label: str) -> int:
    return int(next(m.value for m in at.metric if m.label == label))


def bench_of(at) -> Workbench:
    return at.session_state[STATE_KEY].workbench


def heading_of(at) -> str:
    """The item heading's text as displayed (``Item <id>``)."""
    heads = [plain(h.value) for h in at.subheader if plain(h.value).startswith("Item ")]
    assert len(heads) == 1, heads
    return heads[0]


def press(at, key: str):
    """Press a key on the Query page: click the one button whose shortcut it is, and rerun."""
    buttons = [b for b in at.button if b.proto.shortcut == key and not b.disabled]
    assert len(buttons) == 1, [(b.key, b.proto.shortcut) for b in at.button]
    return buttons[0].click().run()


def test_first_run_opens_the_latest_session_and_asks_the_top_item(app, small_db):
    at = app(small_db)
    bench = bench_of(at)
    top = int(bench.queue(top=1)[0])
    assert position_on_screen(at) == top
    assert heading_of(at) == f"Item {bench.state.external_ids[top]}"
    candidates = np.flatnonzero(bench.state.candidates[top])
    keys = default_hotkeys(LABELS)
    for label in candidates:
        button = at.button(key=Keys.answer(top, int(label)))
        assert button.label == md(LABELS[label])
        assert button.proto.shortcut == keys[LABELS[label]]  # the label's own key, on every item
    assert {b.proto.shortcut for b in at.button if b.proto.shortcut} >= {"n", "s", "u"}
    assert metric(at, "Answered items") == 0
    # What is left to label, not the query engine's open targets (issue 46: they stood side by side).
    assert metric(at, "Undecided items") == bench.work_status().counts["undecided"]
    assert "Open targets" not in [m.label for m in at.metric]
    effects = [plain(m.value) for m in at.markdown if plain(m.value).startswith("If you say ")]
    assert [e.split(",")[0] for e in effects] == [f"If you say **{LABELS[m]}**" for m in candidates]


def test_answer_records_one_event_and_moves_on(app, small_db):
    at = app(small_db)
    bench = bench_of(at)
    first = position_on_screen(at)
    first_id = bench.state.external_ids[first]
    label = int(np.flatnonzero(bench.state.candidates[first])[1])  # the second candidate
    at.sidebar.text_input(key=Keys.ANNOTATOR).set_value("alice")
    press(at, default_hotkeys(LABELS)[LABELS[label]])
    no_exception(at)

    log = events(small_db)
    assert [(e["kind"], e["position"], e["label"], e["annotator"]) for e in log] == [("answer", first, label, "alice")]
    assert position_on_screen(at) != first
    assert metric(at, "Answered items") == 1
    assert any(f"{first_id} is {LABELS[label]}" in plain(s.value) for s in at.success)
    # The page's workbench was patched incrementally and agrees with a fresh one.
    fresh = Workbench.open(open_store(small_db), bench.session_id)
    np.testing.assert_array_equal(bench_of(at).scores, fresh.scores)
    assert bench_of(at).n_open == fresh.n_open


def test_skip_undo_none_of_these_and_another_label(app, small_db):
    at = app(small_db)
    first = position_on_screen(at)
    press(at, ACTION_KEYS["skip"])
    second = position_on_screen(at)
    assert second != first  # skipped items go last
    press(at, ACTION_KEYS["none_of_these"])
    third = position_on_screen(at)
    outside = [LABELS[m] for m in range(len(LABELS)) if not bench_of(at).state.candidates[third, m]]
    press(at, ACTION_KEYS["other_label"])  # opens the label search
    keys = default_hotkeys(LABELS)
    own = [LABELS[m] for m in np.flatnonzero(bench_of(at).state.candidates[third])]
    # The set's own labels are found too, with the key that answers them (not a bare "No results").
    assert at.selectbox(key=Keys.other_label(third)).options == outside + [
        f"{name} — in its set: press {keys[name]}" for name in own
    ]
    at.selectbox(key=Keys.other_label(third)).set_value(outside[0]).run()  # choosing records it
    no_exception(at)
    kinds = [(e["kind"], e["position"], e["label_name"]) for e in events(small_db)]
    assert kinds == [("skip", first, None), ("none_of_these", second, None), ("other_label", third, outside[0])]
    assert bench_of(at).state.wrong_set[third]
    # Event numbers count this session's events, not the store's ids.
    assert any("(event 3 of this session)" in plain(s.value) for s in at.success)

    press(at, ACTION_KEYS["undo"])
    no_exception(at)
    log = events(small_db)
    assert log[-1]["kind"] == "undo" and log[-1]["undoes_event_id"] == log[2]["event_id"]
    assert log[2]["undone_by_event_id"] == log[-1]["event_id"]
    assert position_on_screen(at) == third  # the undone item is asked again
    assert count_rows(small_db, AnswerEvent) == 4
    item = bench_of(at).state.external_ids[third]
    (undone,) = [plain(s.value) for s in at.success if "Undone" in plain(s.value)]
    assert f"your answer {outside[0]} on {item}" in undone and "event 4 of this session" in undone

    # Typing a label of the item's own set under A and pressing Enter answers with it.
    press(at, ACTION_KEYS["other_label"])
    at.selectbox(key=Keys.other_label(third)).set_value(own[0]).run()
    no_exception(at)
    last = events(small_db)[-1]
    assert (last["kind"], last["position"], last["label_name"]) == ("answer", third, own[0])


def test_undo_is_offered_only_when_there_is_something_to_undo(app, small_db):
    at = app(small_db)
    assert at.button(key=Keys.undo(None)).disabled
    press(at, ACTION_KEYS["skip"])
    (skip,) = events(small_db)
    assert not at.button(key=Keys.undo(skip["event_id"])).disabled  # the button names what it undoes
    press(at, ACTION_KEYS["undo"])
    assert [e["kind"] for e in events(small_db)] == ["skip", "undo"]
    assert at.button(key=Keys.undo(None)).disabled


def test_two_presses_before_the_next_item_is_drawn_answer_only_the_displayed_item(app, small_db):
    """The browser still shows item A when the second press leaves it: that press names A's
    button, which the page no longer has (or, mid-run, the service refuses A as answered)."""
    at = app(small_db)
    shown = position_on_screen(at)
    label = int(np.flatnonzero(bench_of(at).state.candidates[shown])[0])
    button = at.button(key=Keys.answer(shown, label))  # the button on the page the person sees
    button.click().run()
    after_first = position_on_screen(at)
    assert after_first != shown
    button.click().run()  # the second press, sent from the page that still shows item A
    no_exception(at)
    log = events(small_db)
    assert [(e["kind"], e["position"], e["label"]) for e in log] == [("answer", shown, label)]
    assert position_on_screen(at) == after_first  # the next item is untouched and still asked


def test_a_stale_answer_is_refused_by_the_service_with_a_gentle_message(small_db):
    from app.service import StaleAnswer

    Session = open_store(small_db)
    bench = Workbench.open(Session, 1)
    shown = int(bench.queue(top=1)[0])
    label = int(np.flatnonzero(bench.state.candidates[shown])[0])
    bench.record("alice", "answer", position=shown, label=label, displayed="query")
    with pytest.raises(StaleAnswer, match="already answered"):
        bench.record("alice", "answer", position=shown, label=label, displayed="query")
    second = int(bench.queue(top=1)[0])
    behind = int(bench.queue(top=2)[1])
    with pytest.raises(StaleAnswer, match="no longer the one to answer"):
        label = int(np.flatnonzero(bench.state.candidates[behind])[0])
        bench.record("alice", "answer", position=behind, label=label, displayed="query")
    other = Workbench.open(Session, 1)  # another tab settles the item this one shows
    other.record("bob", "answer", position=second, label=int(np.flatnonzero(other.state.candidates[second])[0]))
    with pytest.raises(StaleAnswer, match="someone settled it"):
        bench.record("alice", "skip", position=second, displayed="query")
    latest = bench.latest_event("alice")
    bench.record(
        "alice",
        "answer",
        position=int(bench.queue(top=1)[0]),
        label=int(np.flatnonzero(bench.state.candidates[int(bench.queue(top=1)[0])])[0]),
        displayed="query",
    )
    with pytest.raises(StaleAnswer, match="nothing was undone"):
        bench.record("alice", "undo", undoes=latest)  # the page offered to undo an older event
    assert count_rows(small_db, AnswerEvent) == 3


def test_presses_handled_at_the_same_moment_record_one_answer(small_db):
    """A quick double press can reach the shared workbench from two script threads at once:
    the check and the write are one step, so the second press is refused, not recorded."""
    import threading

    from app.service import StaleAnswer

    bench = Workbench.open(open_store(small_db), 1)
    shown = int(bench.queue(top=1)[0])
    label = int(np.flatnonzero(bench.state.candidates[shown])[0])
    start, outcomes = threading.Barrier(4), []

    def press() -> None:
        start.wait()
        try:
            outcomes.append(bench.record("alice", "answer", position=shown, label=label, displayed="query"))
        except StaleAnswer:
            outcomes.append("refused")

    presses = [threading.Thread(target=press) for _ in range(4)]
    for thread in presses:
        thread.start()
    for thread in presses:
        thread.join()
    assert sorted(outcomes, key=str).count("refused") == 3
    assert count_rows(small_db, AnswerEvent) == 1


def test_an_event_about_the_same_item_written_by_another_process_after_the_check_refuses_the_answer(
    small_db, monkeypatch
):
    """Between the page's check and the write, another process records an event about the item
    on screen: the write re-reads the item's events in its transaction and refuses, so nothing
    is judged on stale state. (An event about another item is no reason:
    tests/test_workbench_concurrency.py.)"""
    from app.service import StaleAnswer
    from app.service import workbench as workbench_module

    Session = open_store(small_db)
    bench, elsewhere = Workbench.open(Session, 1), Workbench.open(Session, 1)
    shown = int(bench.queue(top=1)[0])
    write = workbench_module.write_transaction

    def someone_answers_first(*args, **kwargs):
        monkeypatch.setattr(workbench_module, "write_transaction", write)  # once: bob's own write
        elsewhere.record("bob", "skip", position=shown)
        return write(*args, **kwargs)

    monkeypatch.setattr(workbench_module, "write_transaction", someone_answers_first)
    label = int(np.flatnonzero(bench.state.candidates[shown])[0])
    with pytest.raises(StaleAnswer, match="same moment"):
        bench.record("alice", "answer", position=shown, label=label, displayed="query")
    assert [e["annotator"] for e in events(small_db)] == ["bob"]
    assert count_rows(small_db, AnswerEvent) == 1


def test_a_second_tab_sees_the_first_tabs_answers_once(app, small_db):
    tab_a, tab_b = app(small_db), app(small_db)
    asked = position_on_screen(tab_a)
    assert position_on_screen(tab_b) == asked
    tab_a.sidebar.text_input(key=Keys.ANNOTATOR).set_value("alice")
    for _ in range(2):
        shown = position_on_screen(tab_a)
        tab_a.button(
            key=Keys.answer(shown, int(np.flatnonzero(bench_of(tab_a).state.candidates[shown])[0]))
        ).click().run()

    tab_b.run()  # any rerun picks up the other tab's events
    no_exception(tab_b)
    assert metric(tab_b, "Answered items") == 2
    assert position_on_screen(tab_b) == position_on_screen(tab_a) != asked
    tab_b.run()
    tab_b.run()
    assert metric(tab_b, "Answered items") == 2  # no double counting on later reruns
    np.testing.assert_array_equal(bench_of(tab_b).scores, bench_of(tab_a).scores)
    np.testing.assert_array_equal(bench_of(tab_b).state.candidates, bench_of(tab_a).state.candidates)

    tab_b.sidebar.text_input(key=Keys.ANNOTATOR).set_value("bob")
    shown = position_on_screen(tab_b)
    tab_b.button(key=Keys.answer(shown, int(np.flatnonzero(bench_of(tab_b).state.candidates[shown])[0]))).click().run()
    tab_a.run()
    assert metric(tab_a, "Answered items") == 3
    assert [e["annotator"] for e in events(small_db)] == ["alice", "alice", "bob"]


def test_an_item_answered_in_another_tab_is_refused_gently_in_this_one(app, small_db):
    tab_a, tab_b = app(small_db), app(small_db)
    shown = position_on_screen(tab_a)
    label = int(np.flatnonzero(bench_of(tab_a).state.candidates[shown])[0])
    tab_a.sidebar.text_input(key=Keys.ANNOTATOR).set_value("alice")
    tab_a.button(key=Keys.answer(shown, label)).click().run()
    tab_b.sidebar.text_input(key=Keys.ANNOTATOR).set_value("bob")
    tab_b.button(key=Keys.answer(shown, label)).click().run()  # bob still saw the same item
    no_exception(tab_b)
    assert [e["annotator"] for e in events(small_db)] == ["alice"]
    assert tab_b.info and "nothing was recorded" in plain(tab_b.info[0].value)
    assert position_on_screen(tab_b) == position_on_screen(tab_a)


def test_digits_keep_their_picture_and_features_stay_one_click_away(app, digits_db):
    at = app(digits_db)
    bench = bench_of(at)
    why = bench.explain(position_on_screen(at))
    # The digit, its place on the PCA map (one click away), then its neighbours.
    assert len(at.get("image")) == 1 + 1 + len(why.neighbours)
    assert [e.label for e in at.expander][:1] == ["Features and map"]
    assert len(at.expander[0].get("image")) == 1
    press(at, bench.hotkeys[bench.label_names[int(np.flatnonzero(bench.state.candidates[position_on_screen(at)])[0])]])
    no_exception(at)
    assert len(events(digits_db)) == 1


def test_the_pca_map_marks_the_asked_item_where_its_coordinates_fall_and_keeps_the_background():
    coords = np.array([[0.0, 0.0], [4.0, 2.0], [2.0, 1.0]])
    frame = MapFrame.fitting(coords)
    background = np.full((MAP_SIZE[1], MAP_SIZE[0], 3), 255, dtype=np.uint8)
    before = background.copy()
    drawn = pca_map(background, frame, coords[2])
    corner_low, corner_high, middle = frame.pixels(coords)
    width, height = MAP_SIZE
    assert corner_low.tolist() == [MAP_MARGIN, height - 1 - MAP_MARGIN]  # the second axis points up
    assert corner_high.tolist() == [width - 1 - MAP_MARGIN, MAP_MARGIN]
    assert np.allclose(middle, (corner_low + corner_high) / 2)
    x, y = middle.round().astype(int)
    assert tuple(drawn[y, x]) == MAP_COLOURS["this item"]
    assert tuple(drawn[0, 0]) == (255, 255, 255)
    assert np.array_equal(background, before)  # the cached background is not drawn on


def test_digit_labels_are_answered_with_their_own_digit(app, db, tmp_path):
    """Every partial set is {0, 1} or {0, 1, 2}: slot-numbered keys would put label 0 on key 1."""
    rng = np.random.default_rng(1)
    n = 40
    truth = np.arange(n) % 3
    table = pd.DataFrame(rng.normal(scale=0.5, size=(n, 3)) + truth[:, None] * 2.0, columns=["f0", "f1", "f2"])
    table.insert(0, "candidates", ["0|1" if i % 2 else "0|1|2" for i in range(n)])
    table.insert(0, "id", [f"d{i:02d}" for i in range(n)])
    path = tmp_path / "digits.csv"
    table.to_csv(path, index=False)
    Session = open_store(db)
    dataset_id, _ = import_file(Session, path, name="tiny digits", min_rows=6)
    create_session(
        Session, dataset_id=dataset_id, name="tiny", k=5, weighting="uniform", criterion="apl", target_set="all"
    )

    at = app(db)
    shown = position_on_screen(at)
    for label, name in ((0, "0"), (1, "1")):
        assert at.button(key=Keys.answer(shown, label)).label == name
        assert at.button(key=Keys.answer(shown, label)).proto.shortcut == name
    press(at, "1")
    no_exception(at)
    (event,) = events(db)
    assert (event["position"], event["label_name"]) == (shown, "1")


def test_text_items_are_shown_as_text_with_their_neighbours(app, texts_db):
    at = app(texts_db)
    bench = bench_of(at)
    shown = position_on_screen(at)
    text = bench.item_content(shown).text
    assert text and any(t.value == text for t in at.text)  # st.text: never Markdown
    why = bench.explain(shown)
    snippets = [t.value for t in at.text]
    for neighbour in why.neighbours:
        assert any(t.startswith(neighbour.item_id + "\n") for t in snippets)
    assert "Features and map" in [e.label for e in at.expander]
    label = int(np.flatnonzero(bench.state.candidates[shown])[0])
    press(at, bench.hotkeys[bench.label_names[label]])
    no_exception(at)
    assert [(e["kind"], e["position"], e["label"]) for e in events(texts_db)] == [("answer", shown, label)]


def test_image_items_show_the_photo_and_its_neighbours(app, photos_db):
    at = app(photos_db)
    bench = bench_of(at)
    shown = position_on_screen(at)
    assert bench.item_content(shown).image_path is not None
    # The photo, its place on the PCA map (in the "Features and map" expander), its neighbours.
    assert len(at.get("image")) == 1 + 1 + len(bench.explain(shown).neighbours)
    press(at, ACTION_KEYS["none_of_these"])
    no_exception(at)
    assert [(e["kind"], e["position"]) for e in events(photos_db)] == [("none_of_these", shown)]


def test_without_sessions_the_page_points_to_the_sessions_page(app, db):
    at = app(db)
    assert at.info and "No labelling session" in at.info[0].value
    assert at.session_state[STATE_KEY].workbench is None


@pytest.fixture
def default_db(db: str, tmp_path) -> str:
    """The clustered dataset of ``small_db`` with a session made without a criterion: the
    default, decision_change."""
    csv = tmp_path / "small.csv"
    csv.write_bytes(small_csv_bytes())
    Session = open_store(db)
    dataset_id, _ = import_file(Session, csv, name="small", min_rows=6)
    create_session(Session, dataset_id=dataset_id, name="default", k=5, weighting="uniform", target_set="all")
    # The first item served is then the top of the ranking, not an audit drawn by a random key.
    change_label_settings(Session, "default", audit_share=0.0)
    return db


def test_decision_change_session_asks_explains_and_answers(app, default_db):
    at = app(default_db)
    bench = bench_of(at)
    assert bench.config.criterion == "decision_change" and isinstance(bench.ranker, DecisionChangeRanker)
    top = int(bench.queue(top=1)[0])
    assert position_on_screen(at) == top
    why = bench.explain(top)
    assert why.n_targets_changed > 0 and why.example is not None
    # Items known only by their features: their neighbours in one table, ids and candidate labels.
    (neighbours,) = [d.value for d in at.dataframe if "candidate labels" in d.value.columns]
    assert neighbours["item"].tolist() == [n.item_id for n in why.neighbours]
    assert neighbours["candidate labels"].tolist() == [" | ".join(n.candidates) for n in why.neighbours]
    # The jargon is drawn only once the details toggle is on.
    assert not any("which label wins" in t.value for t in at.text)
    at.toggle(key=Keys.QUERY_DETAILS).set_value(True).run()
    details = [t.value for t in at.text]
    assert any(
        f"change which label wins for {why.n_targets_changed} nearby item" in t and "decision_change" in t
        for t in details
    )
    assert any(f"For example target {why.example.target_id}:" in t for t in details)
    assert metric(at, "Undecided items") == bench.work_status().counts["undecided"]

    label = int(np.flatnonzero(bench.state.candidates[top])[0])
    at.button(key=Keys.answer(top, label)).click().run()
    no_exception(at)
    assert [(e["kind"], e["position"], e["label"]) for e in events(default_db)] == [("answer", top, label)]
    assert position_on_screen(at) != top
    assert any("which label wins" in t.value for t in at.text)  # the toggle stays on
    fresh = Workbench.open(open_store(default_db), bench.session_id)
    np.testing.assert_array_equal(bench_of(at).scores, fresh.scores)
    np.testing.assert_array_equal(bench_of(at).queue(), fresh.queue())
    assert metric(at, "Undecided items") == fresh.work_status().counts["undecided"]


def test_audio_items_get_a_player_long_texts_scroll_and_links_open_elsewhere(app, db, tmp_path):
    import wave

    for i in range(12):
        with wave.open(str(tmp_path / f"clip{i}.wav"), "wb") as clip:
            clip.setnchannels(1)
            clip.setsampwidth(2)
            clip.setframerate(8000)
            clip.writeframes(np.full(800, 100 * i, dtype="<i2").tobytes())
    rng = np.random.default_rng(0)
    table = pd.DataFrame(rng.normal(size=(12, 2)), columns=["f0", "f1"])
    table.insert(0, "link", [f"https://example.org/item/{i}" for i in range(12)])
    table.insert(0, "audio", [f"clip{i}.wav" for i in range(12)])
    table.insert(0, "text", [" ".join(["word"] * 150) + f" {i}" for i in range(12)])  # long: it scrolls
    table.insert(0, "candidates", ["a|b" if i % 2 else "a" for i in range(12)])
    table.insert(0, "id", [f"c{i}" for i in range(12)])
    table.to_csv(tmp_path / "clips.csv", index=False)
    Session = open_store(db)
    dataset_id, _ = import_file(Session, tmp_path / "clips.csv", name="clips", min_rows=4)
    create_session(
        Session, dataset_id=dataset_id, name="clips", k=3, weighting="uniform", criterion="apl", target_set="all"
    )

    at = app(db)
    shown = position_on_screen(at)
    content = bench_of(at).item_content(shown)
    assert len(at.get("audio")) == 1
    assert [b.proto.url for b in at.get("link_button")] == [content.link]

    from streamlit.testing.v1.element_tree import Block

    def blocks(block):
        for child in block.children.values():
            if isinstance(child, Block):
                yield child
                yield from blocks(child)

    def fixed_height(block) -> int:
        config = getattr(block.proto, "height_config", None)  # only some block kinds have one
        return config.pixel_height if config is not None else 0

    scrolling = [b for b in blocks(at.main) if fixed_height(b)]
    assert any(t.value == content.text for box in scrolling for t in box.text)


def test_a_media_path_the_service_refuses_is_reported_and_the_item_still_answerable(app, photos_db, monkeypatch):
    from engine.exceptions import InvalidInput

    def refuse(self, position):
        raise InvalidInput("the stored media path 'x.png' of dataset 'photos' leads outside its media root")

    monkeypatch.setattr(Workbench, "item_content", refuse)
    at = app(photos_db)
    assert any("leads outside its media root" in plain(w.value) for w in at.warning)
    press(at, ACTION_KEYS["skip"])
    no_exception(at)
    assert [e["kind"] for e in events(photos_db)] == ["skip"]
