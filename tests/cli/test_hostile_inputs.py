"""Hostile answers, votes, datasets and Label Studio exports through the installed ``winnow``
(issue 29): each ends in one line naming the file (exit 2, no traceback), leaves the store as
it was, and stays under the documented 1 GiB while it is refused.

The full-size files of the issue (a 373 KB votes Parquet of 40 million rows, a 115 MB Label
Studio export, a 9-million-column header) are measured by ``benchmarks/bench_hostile_files.py``
(docs/reliability.md); here the same shapes are made small and refused under a lowered
``WINNOW_MAX_DECOMPRESSED_BYTES`` where the bound is the decompressed-size limit.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.cli.test_hostile_corpus import counts, run_measured

GiB = 1 << 30
BIG_INT = "9" * 5000


def write(name: str, text: str) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        path = folder / name
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        return path

    return make


def task(number: int, *, who: object = 1, choice: str = "a", created: str = "2026-01-01T00:00:00Z") -> dict:
    return {
        "id": number,
        "data": {"text": f"text number {number}"},
        "annotations": [
            {
                "completed_by": who,
                "created_at": created,
                "result": [
                    {"type": "choices", "from_name": "label", "to_name": "text", "value": {"choices": [choice]}}
                ],
            }
        ],
    }


def label_studio(name: str, first: dict) -> Callable[[Path], Path]:
    tasks = [first, *(task(i, choice="ab"[i % 2]) for i in range(2, 15))]
    return write(name, json.dumps(tasks))


def votes_parquet(folder: Path) -> Path:
    """Three dictionary-encoded columns of identical strings: a few KB for 200,000 rows."""
    n = 200_000
    column = pa.DictionaryArray.from_arrays(pa.array([0] * n, pa.int8()), pa.array(["r1"]))
    path = folder / "votes.parquet"
    pq.write_table(pa.table({"id": column, "annotator": column, "label": column}), path)
    return path


def wide_header(folder: Path) -> Path:
    path = folder / "wide.csv"
    path.write_text("id,label," + ",".join("c" for _ in range(300_000)) + "\nr1,a\n")
    return path


@dataclass(frozen=True)
class Case:
    name: str
    command: str  # "answer", "votes" or "import"
    make: Callable[[Path], Path]
    error: str
    env: dict[str, str] = field(default_factory=dict)


CASES = [
    Case(
        "answers: a field over 131,072 characters",
        "answer",
        write("field.csv", "id,label\nr1," + "a" * 140_000 + "\n"),
        "row 1 (spreadsheet row 2): has a field longer than 131,072 characters",
    ),
    Case(
        "answers: JSON nested 100,000 deep",
        "answer",
        write("deep.jsonl", "[" * 100_000 + "]" * 100_000 + "\n"),
        "line 1 nests JSON deeper than",
    ),
    Case(
        "answers: a 5,000-digit integer",
        "answer",
        write("int.jsonl", f'{{"id": {BIG_INT}, "label": "a"}}\n'),
        "holds an integer of more than 4,300 digits",
    ),
    Case(
        "answers: a lone surrogate in an id",
        "answer",
        write("sid.jsonl", '{"id": "\\udfff", "label": "a"}\n'),
        "column 'id': the id holds a lone surrogate (U+DFFF)",
    ),
    Case(
        "answers: a lone surrogate in an annotator",
        "answer",
        write("sann.jsonl", '{"id": "r1", "label": "a", "annotator": "x\\ud800"}\n'),
        "column 'annotator': the annotator holds a lone surrogate (U+D800) at character 2",
    ),
    Case(
        "answers: a terminal escape in an annotator",
        "answer",
        write("esc.csv", 'id,label,annotator\nr1,a,"\x1b]0;pwned\x07"\n'),
        "the annotator holds the control character U+001B",
    ),
    Case("answers: a 300,000-column header", "answer", wide_header, "has more than 250,000 columns in its header"),
    Case(
        "answers: an unknown kind",
        "answer",
        write("kind.csv", "id,label,kind\nr1,a,label\nr2,,maybe\n"),
        "row 2 (spreadsheet row 3), column 'kind': kind 'maybe' is not one of label, other_label",
    ),
    Case(
        "answers: a misspelt kind column",
        "answer",
        write("kinds.csv", "id,label,Kind\nr1,a,skip\n"),
        "column 'Kind' is not an answers column; did you mean 'kind'?",
    ),
    Case(
        "answers: a label with skip",
        "answer",
        write("skip.csv", "id,label,kind\nr1,a,skip\n"),
        "kind 'skip' takes no label",
    ),
    Case(
        "answers: other_label inside the set",
        "answer",
        write("other.csv", "id,label,kind\nr1,a,other_label\n"),
        "label 'a' is in its candidate set",
    ),
    Case(
        "votes: a time overflowing UTC",
        "votes",
        write("time.csv", "id,annotator,label,time\nr1,ann,a,0001-01-01T00:00:00+14:00\n"),
        "is out of range once converted to UTC",
    ),
    Case(
        "votes: a 5,000-digit id",
        "votes",
        write("vint.jsonl", f'{{"id": {BIG_INT}, "annotator": "x", "label": "a"}}\n'),
        "holds an integer of more than 4,300 digits",
    ),
    Case(
        "votes: a lone surrogate annotator",
        "votes",
        write("vsur.jsonl", '{"id": "r1", "annotator": "\\udfff", "label": "a"}\n'),
        "column 'annotator': '\\udfff' holds a lone surrogate",
    ),
    Case(
        "votes: a Parquet of 200,000 identical rows",
        "votes",
        votes_parquet,
        "the table needs 38,400,000 bytes",
        {"WINNOW_MAX_DECOMPRESSED_BYTES": "16M"},
    ),
    Case(
        "dataset: a lone surrogate in a candidates list",
        "import",
        write("dsur.csv", 'id,x,candidates\nr1,1,"[""a"", ""\\udfff""]"\nr2,2,a\nr3,3,b\n'),
        "column 'candidates': label '\\udfff' holds a lone surrogate",
    ),
    Case(
        "dataset: a terminal escape in an id",
        "import",
        write("desc.csv", 'id,x,candidates\n"\x1b[2J",1,a\nr2,2,a\nr3,3,b\n'),
        "column 'id': id '\\x1b[2J' holds the control character U+001B",
    ),
    Case(
        "label studio: a time overflowing UTC",
        "import",
        label_studio("lstime.json", task(1, created="0001-01-01T00:00:00+14:00")),
        "is out of range once converted to UTC",
    ),
    Case(
        "label studio: a lone surrogate choice",
        "import",
        label_studio("lssur.json", task(1, choice="\udfff")),
        "label '\\udfff' holds a lone surrogate",
    ),
    Case(
        "label studio: a lone surrogate annotator",
        "import",
        label_studio("lsann.json", task(1, who="\udfff")),
        "annotator of vote 1 '\\udfff' holds a lone surrogate",
    ),
    Case(
        "label studio: a 5,000-digit id",
        "import",
        write("lsint.json", json.dumps([task(1)]).replace('"id": 1,', f'"id": {BIG_INT},', 1)),
        "holds an integer of more than 4,300 digits",
    ),
    Case(
        "label studio: an export too large to parse",
        "import",
        write("lsbig.json", json.dumps([task(i) for i in range(1, 4000)])),
        "the JSON file needs",
        {"WINNOW_MAX_DECOMPRESSED_BYTES": "16M"},
    ),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A store with items r1..r5 (labels a, b, c) and session s."""
    folder = tmp_path_factory.mktemp("hostile-inputs")
    items = folder / "items.csv"
    items.write_text("id,x,candidates\nr1,1,a|b\nr2,2,a|b\nr3,3,c\nr4,4,a\nr5,5,b|c\n")
    db = folder / "w.db"
    code, _, err, _ = run_measured(["import", str(items), "--db", str(db), "--session", "s", "-k", "2"], {})
    assert code == 0, err
    return db


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_input_is_one_line_under_the_limit_and_changes_nothing(case, store, tmp_path):
    path = case.make(tmp_path)
    if case.command == "answer":
        args = ["answer", "s", "--from", str(path)]
    elif case.command == "votes":
        items = tmp_path / "items.csv"
        items.write_text("id,x\nr1,1\nr2,2\nr3,3\n")
        args = ["import", str(items), "--votes", str(path), "--name", "voted"]
    else:
        args = ["import", str(path), "--name", "hostile"]
    before = counts(store)
    code, out, err, peak = run_measured([*args, "--db", str(store)], case.env)
    assert "Traceback" not in err and "Traceback" not in out
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and path.name in lines[0], err
    assert case.error in lines[0], lines[0]
    assert 0 < peak < GiB, f"peak memory {peak / (1 << 20):.0f} MiB"
    assert counts(store) == before
