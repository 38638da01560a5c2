"""The labelled dataset in the browser (issues 20, 28 and 46): the Progress page's labels by source,
the service's statement and the downloads' new columns; the Sessions page's model-label settings
(admins edit them, others read them) and about how many answers the session needs at the audit
share entered; audit items on the Query page, served and recorded like any other item, extending
the lot's audited prefix.

Team tabs sign in as tests/ui/conftest.py does (:func:`tests.ui.conftest.sign_in`)."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest

from app.service import (
    Workbench,
    assign,
    change_label_settings,
    create_user,
    estimate_words,
    export_bytes,
    session_label_settings,
    session_table,
)
from app.store.db import open_store
from app.ui.components import EXPERT_GIVEN, WITH_MODEL, labelled_curve
from app.ui.state import STATE_KEY, Keys
from engine.promises import PROMISES
from tests.ui.conftest import events, export_links, fetch_exports, no_exception, plain, position_on_screen, sign_in

SECRET = "a long enough secret"
NEW_COLUMNS = ("label", "label_source", "model_margin")
#: The sources the Progress page shows as metrics (no crowd votes in these sessions).
SOURCES = ("expert", "given", "model", "undecided")


def page_texts(at) -> list[str]:
    return [plain(e.value) for e in (*at.text, *at.caption, *at.markdown, *at.error, *at.info, *at.success)]


def answer_on_screen(at, label_of=None) -> int:
    """Answer the item the Query page shows (its first candidate, or ``label_of(position)``);
    returns its position."""
    shown = position_on_screen(at)
    bench: Workbench = at.session_state[STATE_KEY].workbench
    label = int(np.flatnonzero(bench.state.candidates[shown])[0]) if label_of is None else label_of(shown)
    at.button(key=Keys.answer(shown, label)).click().run()
    no_exception(at)
    return shown


# ------------------------------------------------------------------------------ Progress page


def test_progress_page_shows_the_labels_by_source_and_the_statement_as_the_service_says(app, small_db):
    at = app(small_db)
    for _ in range(3):
        answer_on_screen(at)
    at.switch_page("views/progress.py").run()
    no_exception(at)

    bench: Workbench = at.session_state[STATE_KEY].workbench
    labels = bench.labels()
    metrics = {m.label: m.value for m in at.metric}
    shown = {
        source: metrics[title]
        for source, title in zip(
            SOURCES, ("Expert labels", "Given labels", "Model labels", "Undecided items"), strict=True
        )
    }
    assert shown == {source: str(labels.counts[source]) for source in SOURCES}
    assert labels.counts["crowd"] == 0
    assert sum(labels.counts.values()) == len(labels.table) == 90
    assert labels.counts["expert"] == 3
    # The statement exactly as the service words it, as plain text (never Markdown).
    assert labels.statement in [t.value for t in at.text]
    assert labels.statement.startswith("model labels: ") and "undecided: " in labels.statement
    assert not [m for m in at.markdown if labels.statement in plain(m.value)]

    # The downloads carry the new columns, in every format, and the same rows as the export.
    downloads = fetch_exports(at)
    exported = session_table(bench, "labelled", actor=None)
    assert exported.drop(columns=["suspect", "suspicion"]).equals(bench.labelled_table())
    for fmt in ("csv", "json", "jsonl"):
        assert downloads[f"small-labelled.{fmt}"] == export_bytes(exported, fmt)
    frame = pd.read_csv(io.BytesIO(downloads["small-labelled.csv"]), keep_default_na=False)
    assert all(column in frame.columns for column in NEW_COLUMNS)
    assert frame["label_source"].value_counts().to_dict() == {s: n for s, n in labels.counts.items() if n}
    rows = [json.loads(line) for line in downloads["small-labelled.jsonl"].decode().splitlines()]
    assert len(rows) == 90 and all(set(NEW_COLUMNS) <= set(row) for row in rows)
    ids = " ".join(export_links(at))
    assert all(Keys.export("labelled", fmt) in ids for fmt in ("csv", "json", "jsonl"))


def test_the_labelled_items_curve_replays_expert_and_given_and_ends_at_the_counts(app, small_db):
    at = app(small_db)
    for _ in range(4):
        answer_on_screen(at)
    at.button(key=next(b.key for b in at.button if b.key and b.key.startswith("query_undo_"))).click().run()
    at.switch_page("views/progress.py").run()
    no_exception(at)

    bench: Workbench = at.session_state[STATE_KEY].workbench
    labels = bench.labels()
    history = bench_history(bench)
    curve = labelled_curve(history, labels)
    replayed = curve[curve["labels"] == EXPERT_GIVEN]
    # One point per number of answered items (the undo steps back to 3), the last state at each:
    # every answer settles one open item, on top of the items given one label by the import.
    given = int((np.asarray(bench.state.original_candidates).sum(axis=1) == 1).sum())
    assert list(replayed["answered"]) == [0, 1, 2, 3, 4]
    assert list(replayed["items"]) == [given + n for n in range(5)]
    last = history.iloc[-1]
    assert int(last["answered"]) == 3
    assert int(last["expert_or_given"]) == labels.counts["expert"] + labels.counts["given"] == given + 3
    model = curve[curve["labels"] == WITH_MODEL]
    assert len(model) == 1 and int(model["answered"].iloc[0]) == 3
    assert int(model["items"].iloc[0]) == 90 - labels.counts["undecided"]
    assert len(at.get("vega_lite_chart")) == 5  # labelled items, open targets/rejects, answers, accuracy, set sizes


def bench_history(bench: Workbench) -> pd.DataFrame:
    from app.service import session_progress

    return session_progress(bench, actor=None)


# ------------------------------------------------------------------------------ Sessions page


@pytest.fixture
def team_db(small_db):
    """Session 'small' with admin 'ada' and reviewer 'rev', annotator 'ann' assigned to it."""
    Session = open_store(small_db)
    create_user(Session, "ada", role="admin", password=SECRET)
    create_user(Session, "rev", role="reviewer", password=SECRET)
    create_user(Session, "ann", role="annotator", password=SECRET)
    assign(Session, "small", ["ann"])
    return small_db


def on_sessions_page(at, db: str, name: str):
    sign_in(at, db, name, SECRET)
    at.switch_page("views/sessions.py").run()
    no_exception(at)
    return at


def setting_inputs(at) -> dict[str, object]:
    """The model-label setting widgets on the page, by field name."""
    session_id = at.session_state[STATE_KEY].session_id
    keys = {Keys.label_setting(session_id, name): name for name in ("max_error", "confidence", "audit_share")}
    return {keys[w.key]: w for w in at.number_input if w.key in keys}


def answers_line(at, audit_share: float) -> str:
    """What the Sessions page says about the answers the open session needs at ``audit_share``,
    as the service words it (the estimate is simulated for the lot being checked)."""
    bench: Workbench = at.session_state[STATE_KEY].workbench
    work = bench.work_status()
    if work.done:
        return work.headline
    return estimate_words(work.counts, work.summary, bench.answers_estimate(audit_share), work.answers, work.conflicts)


def test_an_admin_changes_the_model_label_settings_and_sees_the_answers_left(app, team_db):
    ada = on_sessions_page(app(team_db), team_db, "ada")
    inputs = setting_inputs(ada)
    assert {name: w.value for name, w in inputs.items()} == {"max_error": 5.0, "confidence": 90.0, "audit_share": 50.0}
    texts = page_texts(ada)
    assert answers_line(ada, 0.5) in texts, texts

    inputs["max_error"].set_value(2.0)
    inputs["confidence"].set_value(95.0)
    inputs["audit_share"].set_value(10.0)
    ada.run()
    # The estimate follows the audit share entered, before it is saved.
    assert answers_line(ada, 0.10) in page_texts(ada)
    ada.button(key=Keys.LABEL_SETTINGS_SAVE).click().run()
    no_exception(ada)
    saved = session_label_settings(open_store(team_db), "small")
    assert (saved.max_error, saved.confidence, saved.audit_share) == pytest.approx((0.02, 0.95, 0.10))
    assert any("Saved the model-label settings of session small" in plain(s.value) for s in ada.success)

    # Everyone who may open the session reads them; nobody else edits them.
    for who in ("ann", "rev"):
        at = on_sessions_page(app(team_db), team_db, who)
        assert not setting_inputs(at)
        assert not [b for b in at.button if b.key == Keys.LABEL_SETTINGS_SAVE]
        texts = page_texts(at)
        assert "Largest model-label error 2% at 95% confidence; audit share 10%" in texts, texts
        assert answers_line(at, 0.10) in texts
        assert "An admin sets these." in texts


def test_a_refused_change_shows_as_an_error_and_changes_nothing(app, team_db):
    from app.service import change_role

    ada = on_sessions_page(app(team_db), team_db, "ada")
    setting_inputs(ada)["max_error"].set_value(10.0)
    # Demoted elsewhere (another admin remains) while the editor is on screen: the store refuses the save.
    create_user(open_store(team_db), "bo", role="admin", password=SECRET)
    change_role(open_store(team_db), "ada", "reviewer")
    ada.button(key=Keys.LABEL_SETTINGS_SAVE).click().run()
    no_exception(ada)
    errors = [plain(e.value) for e in ada.error]
    assert len(errors) == 1 and "ada" in errors[0] and "\n" not in errors[0], errors
    assert session_label_settings(open_store(team_db), "small").max_error == pytest.approx(0.05)
    assert not setting_inputs(ada)  # the next run draws the settings as text


def test_single_user_mode_edits_the_settings_without_signing_in(app, small_db):
    at = app(small_db)
    at.switch_page("views/sessions.py").run()
    setting_inputs(at)["audit_share"].set_value(20.0)
    at.button(key=Keys.LABEL_SETTINGS_SAVE).click().run()
    no_exception(at)
    assert session_label_settings(open_store(small_db), "small").audit_share == pytest.approx(0.20)
    # Zero audits: the page says what that means for the session.
    setting_inputs(at)["audit_share"].set_value(0.0)
    at.run()
    expected = answers_line(at, 0.0)
    assert expected in page_texts(at), expected


# ------------------------------------------------------------------------------ Query page


def audit_head(bench: Workbench) -> int | None:
    """The first item of the layer being audited (what the next audit slot serves)."""
    queue = bench.loop().audit_queue(bench.state.answered, bench.state.skipped)
    return int(queue[0]) if queue.size else None


def test_audit_items_are_served_unmarked_and_recorded_like_any_other(app, digits_db):
    # The 800 digits: the 90 items of small_db leave too few to freeze a lot that could deliver.
    Session = open_store(digits_db)
    change_label_settings(Session, "demo", audit_share=0.5)  # half the slots: a short test
    at = app(digits_db)
    bench: Workbench = at.session_state[STATE_KEY].workbench

    served = {"audit": 0, "ranked": 0, "without effects": 0}
    for _ in range(12):
        position = position_on_screen(at)
        audit = position == audit_head(bench)
        served["audit" if audit else "ranked"] += 1
        texts = " ".join(page_texts(at) + [plain(b.label) for b in at.button] + [h.value for h in at.subheader])
        assert "audit" not in texts.lower()  # nothing on screen says which items are audits
        # Nor why the item was chosen while a lot's audits are served: every item shows its
        # nearest items alike, and no page says it will not say why (issue 46, item 4).
        headings = [h.value for h in at.subheader]
        effects = "If you say" in texts
        assert effects == (not bench.lot_audits_served()) == ("Why this item" in headings)
        assert "does not say why" not in texts and ("Its nearest items" in headings) != effects
        served["without effects"] += not effects
        # The label buttons are the item's candidates in label order, as for every item: the
        # model's label is neither shown nor put first.
        answers = [b.key for b in at.button if b.key and b.key.startswith(f"query_answer_{position}_")]
        candidates = np.flatnonzero(bench.state.candidates[position])
        assert answers == [Keys.answer(position, int(m)) for m in candidates]
        label = int(candidates[-1])
        answered = answer_on_screen(at, lambda _, chosen=label: chosen)
        assert answered == position
        last = events(digits_db)[-1]
        assert (last["kind"], last["position"], last["label"]) == ("answer", position, label)
        assert any(f"Recorded: {bench.state.external_ids[position]} is" in plain(s.value) for s in at.success)
        if audit:
            assert position in bench.loop().active.lot.items
    assert served["audit"] and served["ranked"] and served["without effects"], served


def test_on_average_the_confidence_is_not_editable_and_the_promise_is_explained(app, team_db):
    change_label_settings(open_store(team_db), "small", promise="average")
    ada = on_sessions_page(app(team_db), team_db, "ada")
    assert answers_line(ada, 0.5) in page_texts(ada)
    # The confidence means nothing on average: its field is shown, not editable (issue 46, item 7).
    inputs = setting_inputs(ada)
    assert inputs["confidence"].disabled and not inputs["max_error"].disabled
    promise = ada.radio(key=Keys.label_setting(ada.session_state[STATE_KEY].session_id, "promise"))
    assert "one session may be above it" in promise.options[PROMISES.index("average")]
    promise.set_value("confidence").run()
    assert not setting_inputs(ada)["confidence"].disabled
