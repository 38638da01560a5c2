"""User content is shown as text on every page, never interpreted as Markdown or HTML.

A session named ``![x](http://host/p.png)`` would make every annotator's browser fetch that
URL if it reached a Markdown element; a label ``<b>x</b>`` would turn bold. The pages draw
names, ids, labels and item texts with ``st.text`` (or plain-text widgets: select options,
dataframes, text areas) and escape them where Streamlit only takes Markdown (button labels,
alerts). These tests walk every element of every page and check both halves: the raw string
appears only in plain-text elements, and where it had to go through Markdown it is escaped so
that it displays exactly.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from google.protobuf.json_format import MessageToDict

from app.service import change_label_settings, create_session, import_file
from app.store.db import open_store
from app.ui.components import md
from app.ui.state import STATE_KEY, Keys
from tests.ui.conftest import events, no_exception, position_on_screen, sign_in

SESSION = "![x](http://host/p.png)"
LABEL = "<b>x</b>"
OTHER = "*not em*"
ITEM_ID = "[id](http://host/i)"
TEXT = "# Not a heading\n![img](http://host/t.png) <script>alert(1)</script> $x^2$ :red[red]"
ANNOTATOR = "<i>ann</i>"
HOSTILE = (SESSION, LABEL, OTHER, ITEM_ID, "http://host/t.png", "<script>", ANNOTATOR)
#: Elements whose strings Streamlit draws as plain text.
PLAIN_TEXT = {"text", "selectbox", "arrow_data_frame", "dataframe", "text_area", "text_input", "code"}


@pytest.fixture
def hostile_db(db, tmp_path) -> str:
    """A session named like a Markdown image on items whose labels, ids and texts are markup."""
    rng = np.random.default_rng(2)
    n = 24
    truth = np.arange(n) % 2
    table = pd.DataFrame(rng.normal(scale=0.4, size=(n, 2)) + truth[:, None] * 2.0, columns=["f0", "f1"])
    labels = [LABEL, OTHER]
    table.insert(0, "text", [TEXT if i == 0 else f"plain text {i}" for i in range(n)])
    table.insert(0, "candidates", ["|".join(labels) if i % 2 == 0 else labels[t] for i, t in enumerate(truth)])
    table.insert(0, "id", [ITEM_ID if i == 0 else f"i{i:02d}" for i in range(n)])
    path = tmp_path / "hostile.csv"
    table.to_csv(path, index=False)
    Session = open_store(db)
    dataset_id, _ = import_file(Session, path, name="hostile", min_rows=4, text_column="text")
    create_session(
        Session,
        dataset_id=dataset_id,
        name=SESSION,
        k=3,
        weighting="uniform",
        criterion="most_partial",
        target_set="all",
    )
    # The ranking alone: no audit slots (a new store's random audit key put an audit first in
    # about one run in six, and the hostile item was then not the first one asked).
    change_label_settings(Session, SESSION, audit_share=0.0)
    return db


def strings_of(node) -> list[str]:
    """Every string an element's message carries (labels, bodies, options, help)."""
    found: list[str] = []

    def walk(value) -> None:
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    proto = getattr(node, "proto", None)
    if proto is not None:
        walk(MessageToDict(proto))
    return found


def check_page(at) -> list[str]:
    """Assert no hostile string reaches a Markdown element; returns the plain texts shown."""
    shown: list[str] = []
    for node in [*at.main, *at.sidebar]:
        kind = getattr(node, "type", "")
        for value in strings_of(node):
            raw = [h for h in HOSTILE if h in value]
            if kind in PLAIN_TEXT:
                shown.append(value)
            else:
                assert not raw, (kind, value)
    return shown


def test_names_labels_ids_and_texts_are_shown_literally_on_every_page(app, hostile_db):
    at = app(hostile_db)
    at.sidebar.text_input(key=Keys.ANNOTATOR).set_value(ANNOTATOR).run()
    no_exception(at)
    shown = check_page(at)
    assert f"{SESSION}\ndataset hostile" in shown  # the sidebar names the session as text
    position = position_on_screen(at)
    bench = at.session_state[STATE_KEY].workbench
    assert bench.state.external_ids[position] == ITEM_ID  # most_partial asks the hostile item first
    assert TEXT in shown
    assert [h.value for h in at.subheader if h.value.startswith("Item ")] == [f"Item {md(ITEM_ID)}"]
    label, other = bench.label_names.index(LABEL), bench.label_names.index(OTHER)
    assert at.button(key=Keys.answer(position, label)).label == md(LABEL)
    assert at.button(key=Keys.answer(position, other)).label == md(OTHER)

    at.button(key=Keys.answer(position, label)).click().run()  # the notice repeats id and label
    no_exception(at)
    assert events(hostile_db)[0]["annotator"] == ANNOTATOR
    assert any(md(ITEM_ID) in s.value and md(LABEL) in s.value for s in at.success)
    check_page(at)

    for page in ("views/rejects.py", "views/progress.py", "views/sessions.py"):
        at.switch_page(page).run()
        no_exception(at)
        check_page(at)
    assert SESSION in at.selectbox(key=Keys.OPEN_SESSION).options[0]  # a plain-text option
    keys = at.text_area(key=Keys.hotkeys(bench.session_id)).value
    assert f"= {LABEL}" in keys and f"= {OTHER}" in keys


def test_the_sign_in_and_review_pages_show_names_labels_and_ids_literally(app, hostile_db):
    """Team mode: the Review page (who answered what, the item, DST-PLL, the neighbours) draws
    the hostile strings as text. (The sign-in form's refusal is HTML escaped by the gate:
    tests/e2e/test_gate.py.)"""
    from app.service import assign, create_user, set_session_overlap

    Session = open_store(hostile_db)
    secret = "a long enough secret"
    for name, role in (("ann", "annotator"), ("bob", "annotator"), ("rev", "reviewer")):
        create_user(Session, name, role=role, password=secret)
    assign(Session, SESSION, ["ann", "bob"])
    set_session_overlap(Session, SESSION, 2)

    def signed_in(name: str):
        return sign_in(app(hostile_db), hostile_db, name, secret)

    ann, bob = signed_in("ann"), signed_in("bob")
    position = position_on_screen(ann)
    bench = ann.session_state[STATE_KEY].workbench
    assert bench.state.external_ids[position] == ITEM_ID
    label, other = bench.label_names.index(LABEL), bench.label_names.index(OTHER)
    ann.button(key=Keys.answer(position, label)).click().run()
    for _ in range(bench.state.n_instances):  # overlap 2: bob is given ann's item too, sooner or later
        if position_on_screen(bob) == position:
            break
        bob.button(key=Keys.skip(position_on_screen(bob))).click().run()
    assert position_on_screen(bob) == position
    bob.button(key=Keys.answer(position, other)).click().run()
    no_exception(bob)
    check_page(bob)  # the "conflict recorded" warning repeats id and label

    rev = signed_in("rev")
    rev.switch_page("views/review.py").run()
    no_exception(rev)
    shown = check_page(rev)
    assert TEXT in shown  # the item drawn by the Query page's component, its text as text
    assert [h.value for h in rev.subheader if h.value.startswith("Item ")] == [f"Item {md(ITEM_ID)}"]
    assert rev.button(key=Keys.resolve(position, label)).label == md(LABEL)
