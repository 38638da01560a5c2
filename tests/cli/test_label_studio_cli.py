"""Label Studio in and out through the installed `winnow` entry point: an export imported, a
few items answered, the labelled dataset written back as tasks and read again; bad exports
refused with one line, exit 2, nothing written."""

from __future__ import annotations

import csv
import json
import re

import jsonschema
import numpy as np
import pytest
from sqlalchemy import func, select

from app.io.label_studio_tasks import LABEL_STUDIO_TASKS_SCHEMA
from app.io.readers.label_studio import read_label_studio
from app.service import prediction_model_version
from app.store import dataset_votes, list_datasets, open_store, write_transaction
from app.store.labels import AUDIT_ORDER_KEY
from app.store.models import StoreSecret, Vote
from tests.cli.test_usage_errors import one_line_error
from tests.io.label_studio_exports import FIRST_ID, GENRES, choice, image_tasks, text_tasks, truth, write_tasks

#: Enough tasks for a lot of model labels: 160 of these are open. DST-PLL's own rule accepts
#: none of them at first (every margin is -1 on these texts): the first round of answers
#: teaches the model, a lot is frozen after 20 of them (engine.loop_design.DESIGN.retry_answers),
#: and the audits among the next answers state its best layers at the loose target below.
N_TASKS = 240
FIRST_ROUND = 30
#: Then answers ten at a time until model labels appear (a wrong frozen label costs audits).
LATER_ROUND, MOST_ROUNDS = 10, 10


@pytest.fixture(scope="module")
def round_trip(tmp_path_factory):
    """Import a text export, answer the first served items with their genre, export as tasks."""
    from tests.cli.conftest import run_winnow

    folder = tmp_path_factory.mktemp("ls_round_trip")
    source = write_tasks(folder / "project.json", text_tasks(N_TASKS))
    db = folder / "w.db"
    # The store's audit key, fixed: which items are audits is then the same in every run (a new
    # store draws a random key, and some orders of this small set need more answers than it has).
    session_factory = open_store(db)
    write_transaction(session_factory, lambda s: s.merge(StoreSecret(name=AUDIT_ORDER_KEY, value=bytes(range(32)))))
    # A loose error target (45% at 50% confidence: a few audited answers) that the audits among
    # the first served items back, so a lot is certified and model labels appear.
    run_winnow(
        "import", source, "--db", db, "--session", "s", "-k", "3",
        "--max-error", "0.45", "--confidence", "0.5", "--audit", "0.5",
    )  # fmt: skip
    answers: dict[str, str] = {}
    for n in range(1 + MOST_ROUNDS):
        if n:
            status = json.loads(run_winnow("session", "status", "s", "--db", db, "--json").stdout)
            if status["labels"]["model"]:
                break
        count = LATER_ROUND if n else FIRST_ROUND
        run_winnow("export", "s", "--what", "ranked", "-o", folder / f"ranked{n}.csv", "--db", db)
        with (folder / f"ranked{n}.csv").open(newline="") as handle:
            served = [row["id"] for row in csv.DictReader(handle)][:count]
        given = {item: truth(int(item) - FIRST_ID) for item in served}
        assert not set(given) & set(answers)  # the ranked export lists only unanswered items
        answers.update(given)
        (folder / f"answers{n}.csv").write_text("id,label\n" + "".join(f"{i},{g}\n" for i, g in given.items()))
        run_winnow("answer", "s", "--from", folder / f"answers{n}.csv", "--annotator", "ada", "--db", db)
    out = folder / "out"
    out.mkdir()
    # While the certified lot's audits are served its model labels stay out of the tasks
    # (tests/test_delivery.py); with audits off none is pending, and they go out as predictions.
    run_winnow("session", "settings", "s", "--audit", "0", "--db", db)
    result = run_winnow(
        "export", "s", "--what", "labelled", "--format", "label-studio", "--from-name", "genre",
        "-o", out / "tasks.json", "--db", db,
    )  # fmt: skip
    return source, out, answers, result.stdout


def test_the_tasks_fit_label_studio_and_carry_the_expert_and_the_model(round_trip):
    source, out, answers, stdout = round_trip
    tasks = json.loads((out / "tasks.json").read_text())
    jsonschema.validate(tasks, LABEL_STUDIO_TASKS_SCHEMA)
    original = text_tasks(N_TASKS)
    assert [t["data"] for t in tasks] == [{"text": o["data"]["text"], "id": str(o["id"])} for o in original]
    annotated = {
        t["data"]["id"]: t["annotations"][0]["result"][0]["value"]["choices"][0] for t in tasks if t["annotations"]
    }
    assert annotated == answers
    predictions = [p for t in tasks for p in t["predictions"]]
    assert predictions, "the audited answers back the 45% target: some model labels are kept"
    assert all(0.0 < p["score"] <= 1.0 and p["model_version"] == prediction_model_version("s") for p in predictions)
    # A prediction's score is the row's model_margin, also in meta.
    assert all(t["predictions"][0]["score"] == t["meta"]["winnow"]["model_margin"] for t in tasks if t["predictions"])
    assert all(p["result"][0]["from_name"] == "genre" and p["result"][0]["to_name"] == "text" for p in predictions)
    assert {t["meta"]["winnow"]["answered_by"] for t in tasks if t["annotations"]} == {"ada"}
    # The crowd's votes travel in meta with who cast them and when: task 100 had two votes for
    # blues and one for jazz, task 102 none.
    assert tasks[0]["meta"]["winnow"]["votes"] == [
        {"annotator": "1", "label": "blues", "time": "2024-05-01T10:00:00Z"},
        {"annotator": "cleo@example.org", "label": "blues", "time": "2024-05-01T10:00:00Z"},
        {"annotator": "3", "label": "jazz", "time": "2024-05-01T10:00:00Z"},
    ]
    assert [len(t["meta"]["winnow"]["votes"]) for t in tasks[:3]] == [3, 2, 0]
    assert f"({len(answers)} expert answers as annotations, {len(predictions)} model labels as predictions)" in stdout
    config = (out / "tasks.label_config.xml").read_text()
    assert '<Text name="text" value="$text"/>' in config and '<Choices name="genre" toName="text"' in config
    assert [line.strip() for line in config.splitlines() if "<Choice " in line] == [
        f'<Choice value="{g}"/>' for g in GENRES
    ]


def test_the_annotators_votes_are_stored_with_the_items(round_trip):
    source, out, _, stdout = round_trip
    expected = read_label_studio(source).votes.votes
    with open_store(out.parent / "w.db", create=False)() as s:
        (dataset,) = list_datasets(s)
        stored = dataset_votes(s, dataset.id)
    # Stored by item position (the tasks are in id order), each with who voted and when.
    assert [(v.external_id, v.annotator, GENRES[v.label]) for v in stored] == list(
        zip(expected.item_ids, expected.annotators, expected.labels, strict=True)
    )
    assert {v.source for v in stored} == {"project.json"} and all(v.voted_at is not None for v in stored)
    # Two votes per task and a third on two tasks in three; task 2 has none, and the cancelled
    # and the empty annotation cast none.
    assert len(stored) == sum(2 + (i % 3 != 1) for i in range(N_TASKS) if i != 2)


def test_the_tasks_read_back_with_the_same_ids_content_sets_votes_and_answers(round_trip):
    source, out, answers, _ = round_trip
    again = read_label_studio(out / "tasks.json")
    first = read_label_studio(source)
    assert again.dataset.ids == first.dataset.ids and again.dataset.texts == first.dataset.texts
    # The candidate sets are winnow's (meta.winnow.candidates), not remade from the answers.
    assert np.array_equal(again.dataset.candidates, first.dataset.candidates)

    # The crowd votes come back with who cast them and when; the expert answers as answers
    # by who gave them, never as votes; the model labels as model labels.
    def votes_of(read):
        v = read.votes.votes
        return list(zip(v.item_ids, v.annotators, v.labels, v.times, strict=True))

    assert votes_of(again) == votes_of(first)
    assert {a.item_id: a.label for a in again.answers} == answers
    assert {a.annotator for a in again.answers} == {"ada"} and all(a.time is not None for a in again.answers)
    tasks = json.loads((out / "tasks.json").read_text())
    predicted = {
        t["data"]["id"]: t["predictions"][0]["result"][0]["value"]["choices"][0] for t in tasks if t["predictions"]
    }
    assert {m.item_id: m.label for m in again.model_labels} == predicted
    assert (again.from_name, again.to_name) == ("genre", "text")


def test_the_tasks_import_back_into_a_session_with_the_answers_by_their_expert(round_trip, winnow):
    _, out, answers, _ = round_trip
    db = out.parent / "again.db"
    line = one_line_error(winnow("import", out / "tasks.json", "--db", db, check=False))
    assert line == (
        f"error: 'tasks.json' carries {len(answers)} expert answers (winnow's own export): give a session "
        "(--session NAME) to record them"
    )
    winnow("import", out / "tasks.json", "--db", db, "--session", "again", "-k", "3")
    winnow("export", "again", "--what", "events", "-o", out.parent / "events.csv", "--db", db)
    with (out.parent / "events.csv").open(newline="") as handle:
        events = list(csv.DictReader(handle))
    assert {e["external_id"]: e["label"] for e in events} == answers
    assert {(e["annotator"], e["kind"]) for e in events} == {("ada", "answer")}


def test_label_studio_format_goes_with_the_labelled_dataset_only(round_trip, winnow):
    _, out, _, _ = round_trip
    db = out.parent / "w.db"
    line = one_line_error(
        winnow(
            "export", "s", "--what", "ranked", "--format", "label-studio", "-o", out / "r.json", "--db", db, check=False
        )
    )
    assert line == "error: --format label-studio writes the labelled dataset: give --what labelled"
    assert sorted(p.name for p in out.iterdir()) == ["tasks.json", "tasks.label_config.xml"]


def _no_data(tasks):
    tasks[3].pop("data")


def _labels_result(tasks):
    tasks[1]["annotations"][0]["result"][0] = choice("jazz", kind="labels")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_no_data, r"bad\.json, row 4 \(1-based\): task 103 has no 'data'; every task needs its data"),
        (
            _labels_result,
            r"bad\.json, row 2 \(1-based\): task 101: annotations\[0\]\.result\[0\]\.type 'labels' is not",
        ),
    ],
)
def test_bad_exports_are_one_line_exit_2_and_nothing_is_written(tmp_path, winnow, edit, message):
    tasks = text_tasks(6)
    edit(tasks)
    path = write_tasks(tmp_path / "bad.json", tasks)
    db = tmp_path / "w.db"
    line = one_line_error(winnow("import", path, "--db", db, "--session", "s", "-k", "3", check=False))
    assert re.search(message, line), line
    with open_store(db, create=False)() as s:  # the import made the store, and nothing in it
        assert list_datasets(s) == [] and s.scalar(select(func.count()).select_from(Vote)) == 0


PROJECT_CONFIG = """<View>
  <Header value="Which genre?"/>
  <Text name="review" value="$review"/>
  <Choices name="topic" toName="review" choice="single">
    <Choice value="blues"/><Choice value="jazz"/><Choice value="rock"/><Choice value="pop"/>
  </Choices>
</View>
"""


def test_a_project_config_gives_the_control_object_and_data_key(round_trip, winnow, tmp_path):
    _, out, answers, _ = round_trip
    config = tmp_path / "config.xml"
    config.write_text(PROJECT_CONFIG)
    db = out.parent / "w.db"
    winnow(
        "export", "s", "--what", "labelled", "--format", "label-studio", "--label-config", config,
        "-o", tmp_path / "tasks.json", "--db", db,
    )  # fmt: skip
    tasks = json.loads((tmp_path / "tasks.json").read_text())
    assert all(set(t["data"]) == {"review", "id"} for t in tasks)
    results = [r for t in tasks for a in (*t["annotations"], *t["predictions"]) for r in a["result"]]
    assert {(r["from_name"], r["to_name"]) for r in results} == {("topic", "review")}
    assert len([t for t in tasks if t["annotations"]]) == len(answers)
    # The project's own config goes beside the tasks, as it is.
    assert (tmp_path / "tasks.label_config.xml").read_text() == PROJECT_CONFIG


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            PROJECT_CONFIG.replace('<Choice value="rock"/>', ""),
            r"config\.xml: <Choices name=\"topic\"> lacks the labels 'rock' \(its choices: 'blues', 'jazz', 'pop'\)",
        ),
        (
            PROJECT_CONFIG.replace("<Text", "<Image").replace("$review", "$photo"),
            r"config\.xml: <Image name=\"review\"> shows image, but the items are text",
        ),
        (PROJECT_CONFIG.replace('choice="single"', 'choice="multiple"'), r'is not choice="single"'),
        ("<View><Text name='a' value='$a'/></View>", r"config\.xml: has 0 <Choices> controls"),
        ("<View>", r"config\.xml: is not XML"),
    ],
)
def test_an_export_that_does_not_fit_the_project_config_is_refused(
    round_trip, winnow, tmp_path, monkeypatch, config, message
):
    _, out, _, _ = round_trip
    (tmp_path / "config.xml").write_text(config)
    # Refused before the session is opened: opening it would write its progress on stderr.
    monkeypatch.setenv("WINNOW_PROGRESS", "always")
    result = winnow(
        "export", "s", "--what", "labelled", "--format", "label-studio", "--label-config", tmp_path / "config.xml",
        "-o", tmp_path / "tasks.json", "--db", out.parent / "w.db", check=False,
    )  # fmt: skip
    assert re.search(message, one_line_error(result))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.xml"]


def test_items_without_content_are_refused_before_the_session_is_opened(tmp_path, winnow, small_csv, monkeypatch):
    """Issue 44: the refusal came after the session was opened and scored (27-114 s on 21,878
    items); with progress lines on, opening it would write them, and only the error is written."""
    db = tmp_path / "w.db"
    winnow("import", small_csv, "--db", db, "--session", "s", "-k", "3")
    monkeypatch.setenv("WINNOW_PROGRESS", "always")
    result = winnow(
        "export", "s", "--what", "labelled", "--format", "label-studio", "-o", tmp_path / "tasks.json", "--db", db,
        check=False,
    )  # fmt: skip
    assert one_line_error(result) == (
        "error: the items have no content (text, image, audio or link): Label Studio has nothing to show; "
        "export --what labelled as CSV or JSON instead"
    )
    assert not (tmp_path / "tasks.json").exists()
    opened = winnow("export", "s", "--what", "labelled", "-o", tmp_path / "labelled.csv", "--db", db)
    assert "session s" in opened.stderr, "the progress lines the refusal above did without"


def test_label_config_goes_without_from_name(round_trip, winnow, tmp_path):
    _, out, _, _ = round_trip
    (tmp_path / "config.xml").write_text(PROJECT_CONFIG)
    result = winnow(
        "export", "s", "--what", "labelled", "--format", "label-studio", "--label-config", tmp_path / "config.xml",
        "--from-name", "genre", "-o", tmp_path / "tasks.json", "--db", out.parent / "w.db", check=False,
    )  # fmt: skip
    assert one_line_error(result) == (
        "error: --label-config names the control and its object: give no --from-name or --to-name"
    )


def test_the_user_map_names_annotators_by_email(tmp_path, winnow):
    path = write_tasks(tmp_path / "project.json", text_tasks(6))
    users = tmp_path / "users.json"
    users.write_text(json.dumps([{"id": i, "email": f"user{i}@example.org", "first_name": ""} for i in (1, 3, 4, 5)]))
    db = tmp_path / "w.db"
    winnow("import", path, "--db", db, "--session", "s", "-k", "3", "--user-map", users)
    winnow("export", "s", "--what", "votes", "-o", tmp_path / "votes.csv", "--db", db)
    with (tmp_path / "votes.csv").open(newline="") as handle:
        annotators = {row["annotator"] for row in csv.DictReader(handle)}
    assert annotators == {"user1@example.org", "user3@example.org", "cleo@example.org"}
    users.write_text(json.dumps([{"id": 1, "email": "user1@example.org"}]))
    line = one_line_error(winnow("import", path, "--db", tmp_path / "x.db", "--user-map", users, check=False))
    assert re.search(
        r"project\.json, row 1 \(1-based\): task 100: annotations\[2\]\.completed_by 3 is not in the user map", line
    )


def test_a_label_studio_csv_export_is_told_to_export_json(tmp_path, winnow):
    path = tmp_path / "project.csv"
    path.write_text(
        '"annotation_id","annotator","created_at","id","text","genre","lead_time","updated_at"\n'
        '1,"1","2024-05-01T10:00:00Z",7,"slow harmonica","blues","","2024-05-01T10:00:00Z"\n'
    )
    line = one_line_error(winnow("import", path, "--db", tmp_path / "w.db", check=False))
    assert line.endswith(
        "is a Label Studio CSV export, which keeps one answer per task and not who voted what: export the "
        "project as JSON (Export > JSON) and import that file"
    )
    other = tmp_path / "other.csv"
    other.write_text("id,text,genre\n1,slow harmonica,blues\n")
    line = one_line_error(winnow("import", other, "--db", tmp_path / "w.db", check=False))
    assert "name another with --candidates-column NAME" in line and "candidates_column" not in line


def test_a_missing_image_names_the_media_root_and_the_option(tmp_path, winnow):
    tasks = image_tasks(tmp_path / "shots", 6)
    path = write_tasks(tmp_path / "elsewhere" / "project.json", tasks)
    line = one_line_error(winnow("import", path, "--db", tmp_path / "w.db", check=False))
    root = (tmp_path / "elsewhere").resolve()
    assert (
        f"does not exist in the media root '{root}' (give the folder the paths are relative to with --media-root)"
        in line
    )


def test_the_imported_projects_control_is_reused_without_options(round_trip, winnow, tmp_path):
    _, out, _, _ = round_trip
    winnow(
        "export", "s", "--what", "labelled", "--format", "label-studio", "-o", tmp_path / "tasks.json",
        "--db", out.parent / "w.db",
    )  # fmt: skip
    tasks = json.loads((tmp_path / "tasks.json").read_text())
    results = [r for t in tasks for a in (*t["annotations"], *t["predictions"]) for r in a["result"]]
    assert results and {(r["from_name"], r["to_name"]) for r in results} == {("genre", "text")}
    assert '<Choices name="genre" toName="text"' in (tmp_path / "tasks.label_config.xml").read_text()


def test_a_control_on_another_data_key_is_written_back_to_that_key(tmp_path, winnow):
    tasks = text_tasks(6)
    for task in tasks:
        task["data"]["review"] = task["data"].pop("text")
        for a in task["annotations"]:
            for r in a["result"]:
                r["to_name"] = "body"
    path = write_tasks(tmp_path / "project.json", tasks)
    db = tmp_path / "w.db"
    winnow("import", path, "--db", db, "--session", "s", "-k", "3", "--text-column", "review")
    winnow("export", "s", "--what", "labelled", "--format", "label-studio", "-o", tmp_path / "out.json", "--db", db)
    written = json.loads((tmp_path / "out.json").read_text())
    assert [set(t["data"]) for t in written] == [{"review", "id"}] * 6
    config = (tmp_path / "out.label_config.xml").read_text()
    assert '<Text name="body" value="$review"/>' in config and '<Choices name="genre" toName="body"' in config
