"""The Label Studio export of a session (app.service.export_label_studio), in process: image
tasks imported, answered on the workbench, written back as tasks and read again."""

from __future__ import annotations

import json
import re

import jsonschema
import pandas as pd
import pytest

from app.io.label_studio_tasks import LABEL_STUDIO_TASKS_SCHEMA, label_studio_tasks, labelling_config
from app.io.readers.content import ContentSources
from app.io.readers.label_studio import read_label_studio
from app.service import (
    Workbench,
    export_label_studio,
    import_file,
    prediction_model_version,
    session_id_by_name,
)
from app.store import SessionSpec, open_store
from engine.exceptions import InvalidInput
from tests.io.label_studio_exports import GENRES, image_tasks, truth, write_tasks


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ls_images")
    source = write_tasks(folder / "images.json", image_tasks(folder))
    session_factory = open_store(folder / "w.db")
    import_file(session_factory, source, name="photos", session=SessionSpec("s", k=3))
    bench = Workbench.open(session_factory, session_id_by_name(session_factory, "s"))
    answered = {}
    for _ in range(2):  # the next served item each time, as the Query page does
        position = int(bench.queue(top=1)[0])
        item = bench.state.external_ids[position]
        answered[item] = truth(int(item) - 100)
        bench.record("ada", "answer", position=position, label=GENRES.index(answered[item]), displayed="query")
    out = folder / "out"
    out.mkdir()
    files = export_label_studio(bench, out / "tasks.json", actor=None, to_name="img")
    return source, files, answered


def test_image_tasks_go_back_as_local_files_with_the_answers(exported):
    source, files, answered = exported
    tasks = json.loads(files.tasks.read_text())
    jsonschema.validate(tasks, LABEL_STUDIO_TASKS_SCHEMA)
    assert [t["data"] for t in tasks] == [
        {"image": f"/data/local-files/?d=photos/p{i:02d}.png", "id": str(100 + i)} for i in range(12)
    ]
    assert {
        t["data"]["id"]: t["annotations"][0]["result"][0]["value"]["choices"][0] for t in tasks if t["annotations"]
    } == answered
    assert files.n_annotations == len(answered) == 2 and files.n_tasks == 12
    assert all(p["model_version"] == prediction_model_version("s") for t in tasks for p in t["predictions"])
    assert re.fullmatch(r"winnow-\d+\.\d+\.\d+\S*-dstpll-s", prediction_model_version("s"))
    config = files.config.read_text()
    # The object the choices label is named after --to-name, so that the config is consistent.
    assert '<Image name="img" value="$image"/>' in config and 'toName="img"' in config


def test_the_images_read_back_as_the_same_files(exported):
    source, files, answered = exported
    first = read_label_studio(source).dataset
    # The tasks name the images relative to the dataset's media root (the source's folder).
    read = read_label_studio(files.tasks, sources=ContentSources(media_root=source.parent))
    again = read.dataset
    assert again.ids == first.ids and again.media_paths == first.media_paths
    assert again.media_root == first.media_root
    # The sets are the imported ones; the answers come back as answers, by who gave them.
    assert (again.candidates == first.candidates).all()
    assert {a.item_id: (a.label, a.annotator) for a in read.answers} == {i: (g, "ada") for i, g in answered.items()}


def test_items_without_content_cannot_become_tasks():
    table = pd.DataFrame(
        {
            "id": ["a"],
            "candidates": ["x"],
            "label": ["x"],
            "label_source": ["given"],
            "model_margin": [float("nan")],
            "answered_by": [None],
            "answered_at": [None],
        }
    )
    with pytest.raises(InvalidInput, match="the items have no content"):
        label_studio_tasks(table, model_version="m")


def test_a_label_studio_export_takes_no_votes_file(tmp_path):
    source = write_tasks(tmp_path / "p.json", [])
    with pytest.raises(InvalidInput, match=r"'p\.json' is a Label Studio export: its annotations are the votes"):
        import_file(open_store(tmp_path / "w.db"), source, name="p", votes=tmp_path / "votes.csv")


def test_a_link_is_shown_as_text_in_the_config():
    config = labelling_config(["a"], data_keys=["link"], to_name="link")
    assert '<Text name="link" value="$link"/>' in config and "HyperText" not in config
