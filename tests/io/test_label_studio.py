"""Label Studio in and out: the export reader (tasks, content, votes, refusals) and the tasks
writer (validated against the documented JSON schema)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import jsonschema
import numpy as np
import pandas as pd
import pytest

from app.io import DataFileError, read_dataset
from app.io.label_studio_tasks import (
    LABEL_STUDIO_TASKS_SCHEMA,
    CrowdVote,
    config_path_for,
    label_studio_tasks,
    labelling_config,
    write_label_studio,
)
from app.io.readers.label_studio import is_label_studio_export, media_reference, read_label_studio
from engine.exceptions import InvalidInput
from tests.io.label_studio_exports import (
    FIRST_ID,
    GENRES,
    annotation,
    choice,
    image_tasks,
    other,
    text_tasks,
    truth,
    write_tasks,
)


@pytest.fixture(scope="module")
def text_export(tmp_path_factory):
    return write_tasks(tmp_path_factory.mktemp("ls") / "project.json", text_tasks())


@pytest.fixture(scope="module")
def text_read(text_export):
    return read_label_studio(text_export)


def test_tasks_become_items_with_their_text_and_ids(text_export, text_read):
    dataset = text_read.dataset
    assert is_label_studio_export(text_export)
    assert dataset.ids == [str(FIRST_ID + i) for i in range(12)]
    assert dataset.texts == [task["data"]["text"] for task in text_tasks()]
    assert dataset.label_names == list(GENRES)
    assert dataset.X.shape[0] == 12 and np.isfinite(dataset.X).all() and dataset.featurizer is not None
    assert (text_read.from_name, text_read.to_name) == ("genre", "text")


def test_candidate_sets_are_the_union_of_the_votes_and_unvoted_tasks_may_be_anything(text_read):
    expected = np.zeros((12, 3), dtype=bool)
    for i in range(12):
        expected[i, GENRES.index(truth(i))] = True
        if i % 3 != 1:
            expected[i, GENRES.index(other(i))] = True
    expected[2] = True  # task 2 has no annotation
    np.testing.assert_array_equal(text_read.dataset.candidates, expected)


def test_votes_keep_who_voted_what_and_skip_empty_and_cancelled_annotations(text_read):
    votes = text_read.votes.votes
    first = [k for k, item in enumerate(votes.item_ids) if item == str(FIRST_ID)]
    # Task 0: two votes for its genre and annotator 3's for another; the cancelled "rock" is gone.
    assert [votes.annotators[k] for k in first] == ["1", "cleo@example.org", "3"]
    assert [votes.labels[k] for k in first] == [truth(0), truth(0), other(0)]
    assert votes.times[first[0]] == datetime(2024, 5, 1, 10, tzinfo=UTC)
    # Task 1's empty annotation casts no vote: its two voters only.
    assert votes.item_ids.count(str(FIRST_ID + 1)) == 2
    assert str(FIRST_ID + 2) not in votes.item_ids
    assert len(votes) == 2 * 11 + 7  # two per annotated task, a third on tasks 0, 3, 5, 6, 8, 9, 11
    np.testing.assert_array_equal(text_read.votes.positions, [int(i) - FIRST_ID for i in votes.item_ids])


def test_thresholds_read_the_same_votes(text_export):
    strict = read_label_studio(text_export, min_votes=2).dataset.candidates
    # Two of three votes reach 2: the tasks with a dissenting third vote keep their genre alone.
    assert strict[[0, 3, 5, 6]].sum(axis=1).tolist() == [1, 1, 1, 1]
    assert read_label_studio(text_export).dataset.candidates[[0, 3, 5, 6]].sum(axis=1).tolist() == [2, 2, 2, 2]
    assert strict[2].all()


def test_read_dataset_recognises_the_export(text_export, text_read):
    dataset = read_dataset(text_export)
    np.testing.assert_array_equal(dataset.candidates, text_read.dataset.candidates)
    assert dataset.ids == text_read.dataset.ids


def test_image_tasks_resolve_local_files_and_plain_paths_inside_the_media_root(tmp_path):
    exported = read_label_studio(write_tasks(tmp_path / "images.json", image_tasks(tmp_path)))
    dataset = exported.dataset
    assert dataset.media_paths == [f"photos/p{i:02d}.png" for i in range(12)]
    assert dataset.media_kinds == ["image"] * 12 and dataset.texts is None
    assert dataset.media_root == str(tmp_path.resolve())
    assert exported.to_name == "image"


def test_image_links_are_kept_as_links(tmp_path):
    tasks = [
        {"id": i, "data": {"image": f"https://example.org/p{i}.png"}, "annotations": [annotation(1, truth(i))]}
        for i in range(4)
    ]
    np.save(tmp_path / "emb.npy", np.arange(8, dtype=float).reshape(4, 2))
    dataset = read_dataset(write_tasks(tmp_path / "links.json", tasks), features_from=tmp_path / "emb.npy")
    assert dataset.links == [f"https://example.org/p{i}.png" for i in range(4)]
    assert dataset.media_paths == [None] * 4


def test_label_studio_references_map_to_paths():
    assert media_reference("/data/local-files/?d=a%20b/c.png") == "a b/c.png"
    assert media_reference("/data/upload/3/x.png") == "upload/3/x.png"
    assert media_reference(7) == 7


def test_a_path_outside_the_media_root_is_refused_with_the_task(tmp_path):
    tasks = [{"id": 5, "data": {"image": "../secret.png"}, "annotations": [annotation(1, "jazz")]}]
    with pytest.raises(DataFileError, match=r"row 1 \(1-based\): task 5: data\.image .*outside"):
        read_label_studio(write_tasks(tmp_path / "p.json", tasks))


def bad(tasks_edit):
    tasks = text_tasks(4)
    tasks_edit(tasks)
    return tasks


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda t: t[1]["annotations"][0]["result"].__setitem__(0, choice("jazz", kind="labels")),
            r"row 2 \(1-based\): task 101: annotations\[0\]\.result\[0\]\.type 'labels' is not a single choice",
        ),
        (
            lambda t: t[1]["annotations"][0]["result"].__setitem__(0, choice("x", kind="textarea")),
            r"task 101: annotations\[0\]\.result\[0\]\.type 'textarea' is not a single choice",
        ),
        (
            lambda t: t[2].__setitem__(
                "annotations",
                [{**annotation(1, "jazz"), "result": [{**choice("jazz"), "value": {"choices": ["jazz", "rock"]}}]}],
            ),
            r"task 102: annotations\[0\]\.result\[0\]\.value\.choices holds 2 choices, it is not a single choice",
        ),
        (lambda t: t[3].pop("data"), r"row 4 \(1-based\): task 103 has no 'data'"),
        (lambda t: t[3].__setitem__("data", "hello"), r"task 103 'data' is str, not an object"),
        (
            lambda t: t[0]["annotations"][0].pop("completed_by"),
            r"task 100: annotations\[0\]\.completed_by is missing",
        ),
        (
            lambda t: t[0]["annotations"][1].__setitem__("completed_by", 1),
            r"task 100: annotations\[1\] is a second annotation by '1'",
        ),
        (
            lambda t: t[1]["annotations"][0]["result"].__setitem__(0, choice("jazz", from_name="mood")),
            r"task 101: annotations\[0\]\.result\[0\]\.from_name 'mood' is a second classification",
        ),
        (lambda t: t[3].__setitem__("id", 100), r"row 4 \(1-based\), column 'id': duplicate id '100'"),
        (
            lambda t: t[1]["annotations"][0].__setitem__("created_at", "yesterday"),
            r"task 101: annotations\[0\]\.created_at 'yesterday' is not an ISO 8601 date",
        ),
    ],
)
def test_bad_tasks_are_refused_with_the_task_and_field(tmp_path, edit, message):
    path = write_tasks(tmp_path / "bad.json", bad(edit))
    with pytest.raises(DataFileError, match=message) as caught:
        read_label_studio(path)
    assert "\n" not in str(caught.value) and str(caught.value).startswith(str(path))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"data": {}}', "is not a Label Studio export: its top level must be a list of tasks"),
        ("[]", "holds no tasks"),
        ('[{"id": 1, "data": {"text": "a"}}]', "has no annotation with a single choice"),
        pytest.param("[" * 100_000, "nests JSON too deeply", id="deeply-nested"),
        ('[{"id": 1,', r"is not valid JSON \(line 1, column 11: Expecting property name"),
    ],
)
def test_files_that_are_not_usable_exports_are_refused(tmp_path, content, message):
    path = tmp_path / "p.json"
    path.write_text(content)
    with pytest.raises(DataFileError, match=message):
        read_label_studio(path)


def test_a_json_min_export_is_told_apart(tmp_path):
    path = write_tasks(tmp_path / "min.json", [{"id": 1, "text": "a song", "genre": "jazz", "annotator": 1}])
    with pytest.raises(
        DataFileError, match=r"task 1 has no 'data'.*\(a JSON-MIN export\? export the project as JSON\)"
    ):
        read_label_studio(path)


def test_an_unknown_label_is_refused_against_declared_labels(text_export):
    with pytest.raises(DataFileError, match=r"task 100: unknown label 'blues'; the labels are jazz, rock"):
        read_label_studio(text_export, label_names=["jazz", "rock"])


def test_the_size_is_checked_before_parsing(text_export, monkeypatch):
    monkeypatch.setenv("WINNOW_MAX_DECOMPRESSED_BYTES", "1000")
    with pytest.raises(DataFileError, match="the JSON file needs .* bytes once loaded; at most 1,000"):
        read_label_studio(text_export)


# ---------------------------------------------------------------------------------- writer


def delivered() -> pd.DataFrame:
    """A labelled export as app.service.delivery makes it: one row per label source."""
    return pd.DataFrame(
        {
            "id": ["a", "b", "c", "d"],
            "candidates": ["jazz", "jazz|rock", "rock", "blues|jazz|rock"],
            "n_candidates": [1, 2, 1, 3],
            "label": ["jazz", "rock", "rock", None],
            "label_source": ["expert", "model", "given", "undecided"],
            "model_margin": [np.nan, 0.8125, np.nan, np.nan],
            "resolved": [True, False, False, False],
            "none_of_these": [False] * 4,
            "answered_by": ["ada", None, None, None],
            "answered_at": ["2026-11-25T10:00:00+00:00", None, None, None],
            "text": ["one", "two", None, "four"],
            "media_path": [None, None, "photos/c d.png", None],
            "link": [None, "https://example.org/b", None, None],
        }
    )


def test_tasks_carry_answers_as_annotations_and_model_labels_as_predictions():
    tasks, to_name = label_studio_tasks(
        delivered(),
        media_kinds=[None, None, "image", None],
        votes=[
            [CrowdVote("kim", "jazz", "2024-05-01T10:00:00Z"), CrowdVote("lee", "jazz", None)],
            [CrowdVote("kim", "jazz", None), CrowdVote("lee", "rock", None)],
            [],
            [CrowdVote("kim", "rock", None)],
        ],
        model_version="winnow-0.1.0-dstpll-s",
    )
    jsonschema.validate(tasks, LABEL_STUDIO_TASKS_SCHEMA)
    assert to_name == "image"
    assert [t["data"] for t in tasks] == [
        {"text": "one", "id": "a"},
        {"text": "two", "link": "https://example.org/b", "id": "b"},
        {"image": "/data/local-files/?d=photos/c%20d.png", "id": "c"},
        {"text": "four", "id": "d"},
    ]
    result = {"from_name": "label", "to_name": "image", "type": "choices"}
    # The annotation's id comes back from Label Studio as its import_id (winnow's own answer).
    assert tasks[0]["annotations"] == [{"id": 1, "result": [{**result, "value": {"choices": ["jazz"]}}]}]
    assert tasks[1]["predictions"] == [
        {
            "model_version": "winnow-0.1.0-dstpll-s",
            "score": 0.8125,
            "result": [{**result, "value": {"choices": ["rock"]}}],
        }
    ]
    assert [len(t["annotations"]) + len(t["predictions"]) for t in tasks] == [1, 1, 0, 0]
    assert tasks[2]["meta"]["winnow"]["label_source"] == "given" and tasks[2]["meta"]["winnow"]["label"] == "rock"
    assert tasks[3]["meta"]["winnow"]["candidates"] == ["blues", "jazz", "rock"]
    assert tasks[0]["meta"]["winnow"]["answered_by"] == "ada"
    assert tasks[0]["meta"]["winnow"]["votes"] == [
        {"annotator": "kim", "label": "jazz", "time": "2024-05-01T10:00:00Z"},
        {"annotator": "lee", "label": "jazz", "time": None},
    ]
    assert [len(t["meta"]["winnow"]["votes"]) for t in tasks] == [2, 2, 0, 1]


@pytest.mark.parametrize("margin", [np.nan, 0.0, -0.25, 1.5])
def test_a_model_label_needs_a_model_margin_in_the_unit_interval(margin):
    table = delivered()
    table.loc[1, "model_margin"] = margin
    with pytest.raises(InvalidInput, match=r"item 'b': model label without a model_margin in \(0, 1\]"):
        label_studio_tasks(table, model_version="m")
    # The margin travels in meta too (None where the row has none).
    tasks, _ = label_studio_tasks(delivered().assign(model_margin=[np.nan, 0.5, np.nan, np.nan]), model_version="m")
    assert [t["meta"]["winnow"]["model_margin"] for t in tasks] == [None, 0.5, None, None]


def test_the_schema_refuses_what_label_studio_would_misread():
    tasks, _ = label_studio_tasks(delivered(), model_version="m")
    broken = json.loads(json.dumps(tasks))
    broken[1]["predictions"][0]["score"] = 1.5
    with pytest.raises(jsonschema.ValidationError, match="1.5 is greater than the maximum of 1"):
        jsonschema.validate(broken, LABEL_STUDIO_TASKS_SCHEMA)
    broken = json.loads(json.dumps(tasks))
    broken[0]["annotations"][0]["result"][0]["value"]["choices"] = ["jazz", "rock"]
    with pytest.raises(jsonschema.ValidationError, match="is too long"):
        jsonschema.validate(broken, LABEL_STUDIO_TASKS_SCHEMA)


def test_labelling_config_escapes_label_names():
    config = labelling_config(['say "hi"', "a&b", "<x>"], data_keys=["text"], from_name="genre", to_name="text")
    assert "<Choice value='say \"hi\"'/>" in config and '<Choice value="a&amp;b"/>' in config
    assert '<Choice value="&lt;x&gt;"/>' in config
    assert re.search(r'<Choices name="genre" toName="text" choice="single"', config)


def test_write_label_studio_writes_tasks_and_config_or_nothing(tmp_path):
    tasks, _ = label_studio_tasks(delivered(), model_version="m")
    written, config = write_label_studio(tasks, "<View/>", tmp_path / "tasks.json")
    assert config == config_path_for(written) == tmp_path / "tasks.label_config.xml"
    assert json.loads(written.read_text()) == tasks and config.read_text() == "<View/>\n"
    with pytest.raises(DataFileError, match=r"tasks\.csv: Label Studio tasks are written as \.json"):
        write_label_studio(tasks, "<View/>", tmp_path / "tasks.csv")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tasks.json", "tasks.label_config.xml"]
