"""Small generated Label Studio exports (the JSON list of tasks a project exports), for the
reader, writer and round-trip tests.

Every task has a true genre; two annotators vote for it and, on two tasks of three (not tasks
1, 4, 7, ...), a third votes another genre. Task 0 also has a cancelled annotation (whose result would vote "rock"
if it counted), task 1 an empty one (opened, never answered), task 2 no annotation at all.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from PIL import Image

GENRES = ("blues", "jazz", "rock")
WORDS = {"blues": "guitar slow harmonica", "jazz": "trumpet swing saxophone", "rock": "drums loud riff"}
COLOURS = {"blues": (20, 40, 220), "jazz": (230, 200, 20), "rock": (200, 20, 20)}
FIRST_ID = 100


def choice(label: str, *, from_name: str = "genre", to_name: str = "text", kind: str = "choices") -> dict[str, Any]:
    return {"from_name": from_name, "to_name": to_name, "type": kind, "value": {kind: [label]}}


def annotation(who: Any, label: str, **options: Any) -> dict[str, Any]:
    return {
        "id": 1,
        "completed_by": who,
        "was_cancelled": False,
        "created_at": "2024-05-01T10:00:00.000000Z",
        "result": [choice(label, **options)],
    }


def truth(i: int) -> str:
    return GENRES[i % 3]


def other(i: int) -> str:
    return GENRES[(i + 1) % 3]


def annotations_of(i: int, to_name: str) -> list[dict[str, Any]]:
    if i == 2:
        return []
    found = [
        annotation(1, truth(i), to_name=to_name),
        annotation({"id": 7, "email": "cleo@example.org", "first_name": "Cleo"}, truth(i), to_name=to_name),
    ]
    if i % 3 != 1:
        found.append(annotation(3, other(i), to_name=to_name))
    if i == 0:
        found.append({**annotation(4, "rock", to_name=to_name), "was_cancelled": True})
    if i == 1:
        found.append({**annotation(5, "rock", to_name=to_name), "result": []})
    return found


def text_tasks(n: int = 12) -> list[dict[str, Any]]:
    """Text tasks ``FIRST_ID`` .. ``FIRST_ID + n - 1`` whose words give their genre away."""
    return [
        {
            "id": FIRST_ID + i,
            "data": {"text": f"{WORDS[truth(i)]} song number {i}", "source": "radio"},
            "annotations": annotations_of(i, "text"),
            "predictions": [],
        }
        for i in range(n)
    ]


def image_tasks(folder: Path, n: int = 12) -> list[dict[str, Any]]:
    """Image tasks whose colour gives their genre away, in ``folder/photos``: half referenced
    as Label Studio local files, half as plain relative paths."""
    (folder / "photos").mkdir(parents=True, exist_ok=True)
    tasks = []
    for i in range(n):
        name = f"photos/p{i:02d}.png"
        Image.new("RGB", (16, 12), COLOURS[truth(i)]).save(folder / name)
        reference = f"/data/local-files/?d={name}" if i % 2 else name
        tasks.append({"id": FIRST_ID + i, "data": {"image": reference}, "annotations": annotations_of(i, "image")})
    return tasks


def write_tasks(path: Path, tasks: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(tasks, indent=1), encoding="utf-8")
    return path
