"""Label Studio both ways, against a real Label Studio server (the pinned ``label-studio`` of
``constraints-label-studio.txt``, installed in ``.ls-venv`` by ``make label-studio``).

One server for the module: started on a free port with its own data folder, a local-files
document root and a legacy API token (``--enable-legacy-api-token`` at the first start), plus
three annotators with their own tokens. Everything is checked through its REST API and the
installed ``winnow`` entry point, as docs/label_studio.md tells a user to do it:

* winnow's export (crowd votes, expert answers, model labels) imports with every annotation
  and prediction, read back identical; importing a file twice into one project duplicates its
  tasks (why the docs import into a new project);
* the images of a folder import answer 200 with the set-up the export prints (document root =
  the parent folder, a "Local files" storage on the folder), and keep their references on the
  way back; images uploaded to Label Studio keep their ``/data/upload/`` reference;
* a project annotated by three users (disagreements, a skip, an empty annotation, a task nobody
  annotated) imports into winnow with the right candidate sets and annotators, from the export
  with emails and from the plain export with a user map;
* the full round trip keeps ids, candidate sets, votes (annotators, times), expert answers
  (who gave them) and model labels (never votes), and a vote added in Label Studio comes back.

Without the server's environment the tests skip locally and fail in CI (``CI=true``).
"""

from __future__ import annotations

import csv
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from app.io.readers.label_studio import read_label_studio
from app.service import prediction_model_version
from app.store import open_store, write_transaction
from app.store.labels import AUDIT_ORDER_KEY
from app.store.models import StoreSecret
from tests.tools import tool_missing

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_data"
LABEL_STUDIO = Path(os.environ.get("WINNOW_LABEL_STUDIO", ROOT / ".ls-venv" / "bin" / "label-studio"))
ADMIN = "admin@example.org"
#: Sample photos served by the server (a quarter of them: enough for every check, and quicker).
N_PHOTOS = 24
ANNOTATORS = ("ana@example.org", "ben@example.org", "cleo@example.org")
#: Creates the annotators and their legacy tokens in the server's database (run by its Python).
MAKE_USERS = """
import json, os, sys
import label_studio
sys.path.insert(0, os.path.dirname(label_studio.__file__))
import django
django.setup()
from organizations.models import Organization
from rest_framework.authtoken.models import Token
from users.models import User
organization = Organization.objects.first()
made = {}
for email in sys.argv[1:]:
    user = User.objects.create(email=email, username=email)
    user.set_password(os.urandom(16).hex())
    user.active_organization = organization
    user.save()
    organization.add_user(user)
    made[email] = [user.id, Token.objects.get_or_create(user=user)[0].key]
print(json.dumps(made))
"""

pytestmark = pytest.mark.e2e


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_winnow(*args: Any, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "400", "NO_COLOR": "1"}
    winnow = Path(sys.executable).with_name("winnow")
    result = subprocess.run([str(winnow), *map(str, args)], capture_output=True, text=True, env=env, timeout=600)
    if check and result.returncode != 0:
        raise AssertionError(f"winnow {' '.join(map(str, args))} failed:\n{result.stdout}\n{result.stderr}")
    return result


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@dataclass
class LabelStudio:
    """A running server: its address, the admin's token and the annotators' ``(id, token)``."""

    url: str
    token: str
    users: dict[str, tuple[int, str]]
    document_root: Path
    media: Path

    def call(self, method: str, path: str, body: Any = None, *, token: str | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Token {token or self.token}", "Content-Type": "application/json"}
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                payload = response.read()
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"{method} {path}: {exc.code} {exc.read()[:400]!r}") from None
        return json.loads(payload) if payload else None

    def fetch(self, path: str) -> tuple[int, bytes]:
        request = urllib.request.Request(self.url + path, headers={"Authorization": f"Token {self.token}"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, b""

    def project(self, title: str, config: str) -> int:
        return int(self.call("POST", "/api/projects", {"title": title, "label_config": config})["id"])

    def import_tasks(self, project: int, tasks: Path) -> dict[str, Any]:
        return self.call("POST", f"/api/projects/{project}/import", json.loads(tasks.read_text(encoding="utf-8")))

    def annotate(self, email: str, task: int, label: str | None, *, skip: bool = False) -> None:
        """``email`` answers ``task`` with their own token: a choice, an empty result, or a skip."""
        result = [] if label is None else [choice(label, to_name=self.to_name(task))]
        self.call(
            "POST",
            f"/api/tasks/{task}/annotations",
            {"result": result, "was_cancelled": skip},
            token=self.users[email][1],
        )

    def to_name(self, task: int) -> str:
        project = self.call("GET", f"/api/tasks/{task}")["project"]
        parsed = self.call("GET", f"/api/projects/{project}")["parsed_label_config"]
        return next(iter(parsed.values()))["to_name"][0]

    def export(self, project: int, path: Path, *, full: bool = True) -> Path:
        """The project's JSON export, as the docs say: with ``full``, the export snapshot with
        predictions and annotators' emails; else the plain export of every task (ids only)."""
        if full:
            options = {"predictions": {"only_id": False}, "annotations__completed_by": {"only_id": False}}
            snapshot = self.call("POST", f"/api/projects/{project}/exports", {"serialization_options": options})
            for _ in range(120):
                if self.call("GET", f"/api/projects/{project}/exports/{snapshot['id']}")["status"] == "completed":
                    break
                time.sleep(0.5)
            tasks = self.call("GET", f"/api/projects/{project}/exports/{snapshot['id']}/download?exportType=JSON")
        else:
            tasks = self.call("GET", f"/api/projects/{project}/export?exportType=JSON&download_all_tasks=true")
        path.write_text(json.dumps(tasks), encoding="utf-8")
        return path

    def upload(self, project: int, files: list[Path]) -> list[int]:
        """Upload image files as tasks (the browser's "Upload Files"); returns their task ids."""
        boundary = uuid.uuid4().hex
        body = b""
        for file in files:
            body += (
                (
                    f'--{boundary}\r\nContent-Disposition: form-data; name="{file.name}"; filename="{file.name}"\r\n'
                    "Content-Type: image/png\r\n\r\n"
                ).encode()
                + file.read_bytes()
                + b"\r\n"
            )
        body += f"--{boundary}--\r\n".encode()
        request = urllib.request.Request(
            f"{self.url}/api/projects/{project}/import?return_task_ids=true",
            data=body,
            method="POST",
            headers={
                "Authorization": f"Token {self.token}",
                "Content-Type": f"multipart/form-data; boundary={boundary}",
            },
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.loads(response.read())["task_ids"]


def choice(label: str, *, from_name: str = "label", to_name: str = "text") -> dict[str, Any]:
    return {"from_name": from_name, "to_name": to_name, "type": "choices", "value": {"choices": [label]}}


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture(scope="module")
def label_studio(tmp_path_factory) -> Iterator[LabelStudio]:
    """One Label Studio server for the module (it takes 40-60 s to start on two cores)."""
    if not LABEL_STUDIO.is_file():
        tool_missing(f"Label Studio is not installed at {LABEL_STUDIO}", install="make label-studio")
    folder = tmp_path_factory.mktemp("label_studio")
    document_root = folder / "files"
    (document_root / "photos").mkdir(parents=True)
    with (SAMPLES / "photos_labels.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))[:N_PHOTOS]
    for row in rows:
        shutil.copy(SAMPLES / "photos" / row["path"], document_root / "photos" / row["path"])
    with (folder / "photos_labels.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    port = free_port()
    token = secrets.token_hex(20)
    env = {
        **os.environ,
        "LABEL_STUDIO_BASE_DATA_DIR": str(folder / "data"),
        "LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED": "true",
        "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT": str(document_root),
        "DJANGO_SETTINGS_MODULE": "core.settings.label_studio",
        # No error reports to Label Studio's Sentry (and no waiting on a network there is not).
        "SENTRY_DSN": "",
        "FRONTEND_SENTRY_DSN": "",
        # Nor a look at pypi.org for a newer release, which waits up to 10 s where there is no network.
        "LATEST_VERSION_CHECK": "false",
    }
    command = [
        str(LABEL_STUDIO), "start", "--no-browser", "--host", "127.0.0.1", "--port", str(port),
        "--username", ADMIN, "--password", secrets.token_hex(12), "--user-token", token,
        "--enable-legacy-api-token",
    ]  # fmt: skip
    log = (folder / "label_studio.log").open("wb")
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 300
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"Label Studio exited ({process.returncode}); see {folder / 'label_studio.log'}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"Label Studio did not answer within 300 s; see {folder / 'label_studio.log'}")
            time.sleep(1)
        made = subprocess.run(
            [str(LABEL_STUDIO.with_name("python")), "-c", MAKE_USERS, *ANNOTATORS],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if made.returncode != 0:
            raise RuntimeError(f"creating the annotators failed: {made.stderr[-2000:]}")
        users = {email: (int(i), key) for email, (i, key) in json.loads(made.stdout.strip().splitlines()[-1]).items()}
        yield LabelStudio(url, token, users, document_root, folder / "data" / "media")
    finally:
        stop(process)
        log.close()


def guess(text: str, candidates: list[str]) -> str:
    """An expert's answer for the crowd sample: the genre its words give away."""
    words = {"jazz": ("trumpet", "swing", "brushed", "piano"), "rock": ("distort", "riff", "loud", "drums")}
    for label, clues in words.items():
        if label in candidates and any(w in text for w in clues):
            return label
    return candidates[0]


#: The expert answers of the crowd session: two checkpoints of the labelling loop, so that the
#: audits among them state a layer of the first lot with items left unanswered.
N_ANSWERS = 20


@pytest.fixture(scope="module")
def crowd(tmp_path_factory) -> dict[str, Any]:
    """The crowd sample (80 songs, their votes) in a session: N_ANSWERS expert answers by ada, model
    labels at a loose error target, exported for Label Studio."""
    folder = tmp_path_factory.mktemp("crowd")
    db = folder / "w.db"
    # The store's audit key, fixed: which items are audits, and so the model labels, are the
    # same in every run (a new store draws a random key).
    write_transaction(open_store(db), lambda s: s.merge(StoreSecret(name=AUDIT_ORDER_KEY, value=bytes(range(32)))))
    run_winnow(
        "import", SAMPLES / "crowd_items.csv", "--votes", SAMPLES / "crowd_votes.csv", "--db", db,
        "--session", "s", "--max-error", "0.45", "--confidence", "0.5", "--audit", "0.5",
    )  # fmt: skip
    run_winnow("export", "s", "--what", "ranked", "-o", folder / "ranked.csv", "--db", db)
    served = read_csv(folder / "ranked.csv")[:N_ANSWERS]
    answers = {row["id"]: guess(row["text"], row["candidates"].split("|")) for row in served}
    (folder / "answers.csv").write_text("id,label\n" + "".join(f"{i},{g}\n" for i, g in answers.items()))
    run_winnow("answer", "s", "--from", folder / "answers.csv", "--annotator", "ada", "--db", db)
    # With audits off no audit is pending: the certified lot's labels go out as predictions.
    run_winnow("session", "settings", "s", "--audit", "0", "--db", db)
    out = run_winnow(
        "export", "s", "--what", "labelled", "--format", "label-studio", "-o", folder / "tasks.json", "--db", db
    ).stdout
    for what in ("votes", "events", "labelled"):
        run_winnow("export", "s", "--what", what, "-o", folder / f"{what}.csv", "--db", db)
    n_model = sum(row["label_source"] == "model" for row in read_csv(folder / "labelled.csv"))
    assert n_model > 0, "the loose target is certified after these answers: model labels go out as predictions"
    return {"folder": folder, "db": db, "answers": answers, "stdout": out, "n_model": n_model}


@pytest.fixture(scope="module")
def crowd_project(label_studio, crowd) -> tuple[int, dict[str, Any]]:
    """The crowd tasks imported into a new project with the config winnow wrote beside them."""
    config = (crowd["folder"] / "tasks.label_config.xml").read_text()
    project = label_studio.project("winnow crowd", config)
    return project, label_studio.import_tasks(project, crowd["folder"] / "tasks.json")


def test_winnow_tasks_import_with_every_annotation_and_prediction(label_studio, crowd, crowd_project):
    project, response = crowd_project
    written = json.loads((crowd["folder"] / "tasks.json").read_text())
    n_predictions = sum(len(t["predictions"]) for t in written)
    n_model = crowd["n_model"]
    assert f"({N_ANSWERS} expert answers as annotations, {n_model} model labels as predictions)" in crowd["stdout"]
    assert (response["task_count"], response["annotation_count"], response["prediction_count"]) == (
        80,
        N_ANSWERS,
        n_model,
    )
    assert n_predictions == n_model
    exported = json.loads(label_studio.export(project, crowd["folder"] / "ls_export.json").read_text())
    by_id = {t["data"]["id"]: t for t in exported}
    assert sorted(by_id) == sorted(t["data"]["id"] for t in written)
    for task in written:
        back = by_id[task["data"]["id"]]
        assert [a["result"] for a in back["annotations"]] == [a["result"] for a in task["annotations"]]
        assert [(p["result"], p["score"], p["model_version"]) for p in back["predictions"]] == [
            (p["result"], p["score"], p["model_version"]) for p in task["predictions"]
        ]
        assert back["meta"] == task["meta"] and back["data"] == task["data"]
    # Label Studio's import always adds tasks: the same file imported twice into one project
    # holds every task twice. Hence docs/label_studio.md: import into a new project.
    again = label_studio.project("winnow crowd twice", (crowd["folder"] / "tasks.label_config.xml").read_text())
    label_studio.import_tasks(again, crowd["folder"] / "tasks.json")
    label_studio.import_tasks(again, crowd["folder"] / "tasks.json")
    assert label_studio.call("GET", f"/api/projects/{again}")["task_number"] == 160


def test_images_answer_200_with_the_set_up_the_export_prints(label_studio, tmp_path):
    photos = label_studio.document_root / "photos"
    db = tmp_path / "w.db"
    labels = label_studio.document_root.parent / "photos_labels.csv"
    run_winnow("import", photos, "--labels", labels, "--db", db, "--session", "img")
    (tmp_path / "answers.csv").write_text("id,label\np003,leaves\np002,grass\n")
    run_winnow("answer", "img", "--from", tmp_path / "answers.csv", "--annotator", "ada", "--db", db)
    stdout = run_winnow(
        "export", "img", "--what", "labelled", "--format", "label-studio", "-o", tmp_path / "tasks.json", "--db", db
    ).stdout
    assert (
        f"LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT={label_studio.document_root.resolve()} and add a Local files "
        f"storage on {photos.resolve()} to the project" in stdout
    )
    project = label_studio.project("winnow photos", (tmp_path / "tasks.label_config.xml").read_text())
    storage = {"project": project, "path": str(photos.resolve()), "title": "photos", "use_blob_urls": False}
    label_studio.call("POST", "/api/storages/localfiles", storage)
    assert label_studio.import_tasks(project, tmp_path / "tasks.json")["task_count"] == N_PHOTOS
    tasks = label_studio.export(project, tmp_path / "ls_export.json")
    exported = json.loads(tasks.read_text())
    assert exported[0]["data"]["image"] == "/data/local-files/?d=photos/img_001.png"
    for task in exported:
        status, body = label_studio.fetch(task["data"]["image"])
        assert status == 200, task["data"]["image"]
        assert body == (photos / task["data"]["image"].rsplit("/", 1)[1]).read_bytes()
    # Back into winnow with the document root as the media root, and out again: the same references.
    run_winnow(
        "import", tasks, "--db", tmp_path / "back.db", "--session", "back", "--media-root", label_studio.document_root
    )
    run_winnow(
        "export", "back", "--what", "labelled", "--format", "label-studio", "-o", tmp_path / "again.json",
        "--db", tmp_path / "back.db",
    )  # fmt: skip
    again = json.loads((tmp_path / "again.json").read_text())
    assert [t["data"] for t in again] == [t["data"] for t in exported]


def test_uploaded_images_keep_a_reference_that_resolves(label_studio, tmp_path):
    config = (
        '<View><Image name="image" value="$image"/><Choices name="label" toName="image" choice="single">'
        '<Choice value="red"/><Choice value="blue"/></Choices></View>'
    )
    project = label_studio.project("winnow uploads", config)
    files = []
    for i, colour in enumerate([(220, 20, 20), (20, 20, 220), (200, 30, 30)]):
        files.append(tmp_path / f"shot{i}.png")
        Image.new("RGB", (16, 16), colour).save(files[-1])
    task_ids = label_studio.upload(project, files)
    for task, label in zip(task_ids, ["red", "blue", "red"], strict=True):
        label_studio.annotate(ANNOTATORS[0], task, label)
    exported = json.loads(label_studio.export(project, tmp_path / "ls_export.json").read_text())
    references = [t["data"]["image"] for t in exported]
    assert all(r.startswith(f"/data/upload/{project}/") for r in references)
    run_winnow(
        "import", tmp_path / "ls_export.json", "--db", tmp_path / "w.db", "--session", "up", "-k", "1",
        "--media-root", label_studio.media,
    )  # fmt: skip
    stdout = run_winnow(
        "export", "up", "--what", "labelled", "--format", "label-studio", "-o", tmp_path / "tasks.json",
        "--db", tmp_path / "w.db",
    ).stdout  # fmt: skip
    assert "Local files storage" not in stdout  # Label Studio serves its uploads itself
    written = [t["data"]["image"] for t in json.loads((tmp_path / "tasks.json").read_text())]
    assert written == references
    assert all(label_studio.fetch(reference)[0] == 200 for reference in written)


def test_a_project_annotated_by_three_users_imports_with_their_sets_and_annotators(label_studio, tmp_path):
    config = (
        '<View><Text name="review" value="$review"/><Choices name="genre" toName="review" choice="single">'
        '<Choice value="blues"/><Choice value="jazz"/><Choice value="rock"/></Choices></View>'
    )
    project = label_studio.project("three annotators", config)
    reviews = [{"review": f"song {i}", "ref": f"r{i}"} for i in range(6)]
    task_ids = label_studio.call("POST", f"/api/projects/{project}/import?return_task_ids=true", reviews)["task_ids"]
    ana, ben, cleo = ANNOTATORS
    plan = [
        [(ana, "jazz"), (ben, "jazz"), (cleo, "blues")],  # a disagreement
        [(ana, "rock"), (ben, "skip"), (cleo, "rock")],  # ben skips
        [(ana, "blues"), (ben, "blues"), (cleo, None)],  # cleo submits an empty annotation
        [(ana, "jazz"), (ben, "rock"), (cleo, "blues")],  # three labels
        [(ana, "rock")],
        [],  # nobody annotates the last task
    ]
    for task, planned in zip(task_ids, plan, strict=True):
        for email, label in planned:
            if label == "skip":
                label_studio.annotate(email, task, None, skip=True)
            else:
                label_studio.annotate(email, task, label)
    expected_sets = ["blues|jazz", "rock", "blues", "blues|jazz|rock", "rock", "blues|jazz|rock"]
    expected_votes = [
        (str(task), email, label)
        for task, planned in zip(task_ids, plan, strict=True)
        for email, label in planned
        if label not in ("skip", None)
    ]
    users = tmp_path / "users.json"
    users.write_text(json.dumps(label_studio.call("GET", "/api/users/")))
    # The export with the annotators' emails, and the plain export (ids) read with a user map.
    full = label_studio.export(project, tmp_path / "full.json")
    plain = label_studio.export(project, tmp_path / "plain.json", full=False)
    assert isinstance(json.loads(plain.read_text())[0]["annotations"][0]["completed_by"], int)
    for name, export, options in (("full", full, []), ("plain", plain, ["--user-map", users])):
        db = tmp_path / f"{name}.db"
        run_winnow("import", export, "--db", db, "--session", name, "-k", "2", "--text-column", "review", *options)
        run_winnow("export", name, "--what", "labelled", "-o", tmp_path / f"{name}.csv", "--db", db)
        run_winnow("export", name, "--what", "votes", "-o", tmp_path / f"{name}_votes.csv", "--db", db)
        labelled = read_csv(tmp_path / f"{name}.csv")
        # No data.id: the items keep Label Studio's task ids.
        assert [row["id"] for row in labelled] == [str(t) for t in task_ids]
        assert [row["candidates"] for row in labelled] == expected_sets
        votes = read_csv(tmp_path / f"{name}_votes.csv")
        assert [(v["id"], v["annotator"], v["label"]) for v in votes] == expected_votes
        assert all(v["time"] for v in votes)


def test_the_full_round_trip_keeps_ids_sets_votes_answers_and_annotators(label_studio, crowd, crowd_project):
    project, _ = crowd_project
    folder = crowd["folder"]
    tasks = {
        t["data"]["id"]: t for t in label_studio.call("GET", f"/api/tasks?project={project}&page_size=200")["tasks"]
    }
    # In Label Studio, after winnow's export, ana votes on an item nobody answered in winnow,
    # for a label outside its set: a new vote, and the label joins the item's set.
    labelled = {row["id"]: row for row in read_csv(folder / "labelled.csv")}
    item = next(
        i for i, row in labelled.items() if i not in crowd["answers"] and "pop" not in row["candidates"].split("|")
    )
    label_studio.annotate(ANNOTATORS[0], tasks[item]["id"], "pop")
    export = label_studio.export(project, folder / "round_trip.json")
    db = folder / "back.db"
    run_winnow(
        "import",
        export,
        "--db",
        db,
        "--session",
        "back",
        "--max-error",
        "0.45",
        "--confidence",
        "0.5",
        "--audit",
        "0.5",
    )
    for what in ("votes", "events", "labelled"):
        run_winnow("export", "back", "--what", what, "-o", folder / f"back_{what}.csv", "--db", db)
    before, after = read_csv(folder / "labelled.csv"), read_csv(folder / "back_labelled.csv")
    assert [row["id"] for row in after] == [row["id"] for row in before]  # song000 ..., not task ids
    sets_before = {row["id"]: row["candidates"] for row in before}
    sets_before[item] = "|".join(sorted([*sets_before[item].split("|"), "pop"]))
    assert {row["id"]: "|".join(sorted(row["candidates"].split("|"))) for row in after} == {
        i: "|".join(sorted(s.split("|"))) for i, s in sets_before.items()
    }
    # Every crowd vote with its annotator and time, plus ana's new one; no model label is a vote.
    votes = [(v["id"], v["annotator"], v["label"], v["time"]) for v in read_csv(folder / "votes.csv")]
    back_votes = [(v["id"], v["annotator"], v["label"], v["time"]) for v in read_csv(folder / "back_votes.csv")]
    assert sorted(v for v in back_votes if v[1] != ANNOTATORS[0]) == sorted(votes)
    assert [v[:3] for v in back_votes if v[1] == ANNOTATORS[0]] == [(item, ANNOTATORS[0], "pop")]
    # The expert's answers, by who gave them (not the Label Studio user who imported the tasks).
    events = [e for e in read_csv(folder / "back_events.csv") if e["kind"] in ("answer", "other_label")]
    assert {e["external_id"]: e["label"] for e in events} == crowd["answers"]
    assert {e["annotator"] for e in events} == {"ada"}
    # The model labels come back as model labels (Label Studio's predictions), never as votes.
    written = json.loads((folder / "tasks.json").read_text())
    predicted = {
        t["data"]["id"]: t["predictions"][0]["result"][0]["value"]["choices"][0] for t in written if t["predictions"]
    }
    read = read_label_studio(export)
    assert {m.item_id: m.label for m in read.model_labels} == predicted and len(predicted) == crowd["n_model"]
    assert {m.model_version for m in read.model_labels} == {prediction_model_version("s")}
