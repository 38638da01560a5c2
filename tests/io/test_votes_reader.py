"""The votes reader: each format, the matching against items, and bad rows named exactly."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.io import DataFileError, apply_votes, read_dataset, read_votes, vote_label_names

ROWS = [
    ("s1", "ann", "jazz", "2026-11-20T14:03:00Z"),
    ("s1", "bob", "blues", ""),
    ("s1", "cid", "jazz", "2026-11-20T15:00:00+01:00"),
    ("s2", "ann", "rock", "2026-11-21 08:00:00"),
]


def _write(tmp_path, ext, rows=ROWS, header=("id", "annotator", "label", "time")):
    path = tmp_path / f"votes{ext}"
    if ext in (".csv", ".tsv"):
        sep = "," if ext == ".csv" else "\t"
        path.write_text("\n".join(sep.join(r) for r in [header, *rows]) + "\n", encoding="utf-8")
    elif ext == ".jsonl":
        path.write_text("\n".join(json.dumps(dict(zip(header, r, strict=True))) for r in rows) + "\n")
    else:
        columns = {name: [r[j] for r in rows] for j, name in enumerate(header)}
        pq.write_table(pa.table(columns), path)
    return path


@pytest.mark.parametrize("ext", [".csv", ".tsv", ".jsonl", ".parquet"])
def test_every_format_reads_the_same_votes(tmp_path, ext):
    votes = read_votes(_write(tmp_path, ext))
    assert votes.item_ids == ["s1", "s1", "s1", "s2"]
    assert votes.annotators == ["ann", "bob", "cid", "ann"]
    assert votes.labels == ["jazz", "blues", "jazz", "rock"]
    assert votes.times == [
        datetime(2026, 11, 20, 14, 3, tzinfo=UTC),
        None,
        datetime(2026, 11, 20, 14, 0, tzinfo=UTC),
        datetime(2026, 11, 21, 8, 0, tzinfo=UTC),  # no zone: taken as UTC
    ]
    assert votes.rows == [1, 2, 3, 4]
    assert vote_label_names(votes) == ["blues", "jazz", "rock"]


def test_parquet_timestamps_and_integer_labels(tmp_path):
    path = tmp_path / "votes.parquet"
    stamp = datetime(2026, 1, 2, 3, 4, tzinfo=UTC)
    pq.write_table(pa.table({"id": [1, 2], "annotator": ["a", "b"], "label": [3, 8], "time": [stamp, None]}), path)
    votes = read_votes(path)
    assert votes.item_ids == ["1", "2"] and votes.labels == ["3", "8"] and votes.times == [stamp, None]
    assert vote_label_names(votes) == ["3", "8"]


@pytest.mark.parametrize(
    ("ext", "rows", "match"),
    [
        (".csv", [("s1", "ann", "", "")], r"row 1 \(spreadsheet row 2\), column 'label': the label is blank"),
        (".csv", [("s1", "ann", "a", ""), ("s1", "", "b", "")], r"row 2 .*column 'annotator': the annotator is blank"),
        (
            ".csv",
            [("s1", "ann", "a", ""), ("s2", "ann", "b", ""), ("s1", "ann", "b", "")],
            r"row 3 \(spreadsheet row 4\), column 'annotator': annotator 'ann' votes twice on item 's1' "
            r"\(first in row 1\)",
        ),
        (".tsv", [("s1", "ann", "jazz|blues", "")], r"row 1 .*column 'label': 'jazz\|blues' holds '\|'"),
        (".jsonl", [("s1", "ann", "a", "yesterday")], r"row 1 \(1-based\), column 'time': 'yesterday' is not a date"),
        (
            ".parquet",
            [("s1", "ann", "a", ""), ("s2", "x" * 201, "a", "")],
            r"row 2 .*column 'annotator'.*longer than 200",
        ),
    ],
)
def test_bad_rows_are_named(tmp_path, ext, rows, match):
    with pytest.raises(DataFileError, match=match):
        read_votes(_write(tmp_path, ext, rows))


def test_bad_files_are_refused(tmp_path):
    with pytest.raises(DataFileError, match="has no 'annotator' column"):
        read_votes(_write(tmp_path, ".csv", [("s1", "a")], header=("id", "label")))
    with pytest.raises(DataFileError, match="cannot read votes from '.xlsx'"):
        read_votes(tmp_path / "votes.xlsx")
    with pytest.raises(DataFileError, match="file not found"):
        read_votes(tmp_path / "missing.csv")
    (tmp_path / "empty.csv").write_text("id,annotator,label\n")
    with pytest.raises(DataFileError, match="holds no votes"):
        read_votes(tmp_path / "empty.csv")
    (tmp_path / "bad.jsonl").write_text('{"id": "s1", "annotator": "a", "label": "x"}\n[1]\n')
    with pytest.raises(DataFileError, match=r"row 2 \(1-based\): line 2 is not a JSON object"):
        read_votes(tmp_path / "bad.jsonl")


def test_the_size_limit_is_checked_before_reading(tmp_path, monkeypatch):
    monkeypatch.setenv("WINNOW_MAX_DECOMPRESSED_BYTES", "64")
    with pytest.raises(DataFileError, match="at most 64 are accepted"):
        read_votes(_write(tmp_path, ".csv"))


def _items(tmp_path, candidates=None):
    lines = ["id,x" + (",candidates" if candidates else "")]
    for j, item in enumerate(["s1", "s2", "s3"]):
        lines.append(f"{item},{j}" + (f",{candidates[j]}" if candidates else ""))
    path = tmp_path / "items.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_apply_votes_without_a_candidates_column(tmp_path):
    votes = read_votes(_write(tmp_path, ".csv"))
    items = read_dataset(_items(tmp_path), default_labels=vote_label_names(votes))
    union, matched = apply_votes(items, votes)
    assert union.label_names == ["blues", "jazz", "rock"]
    # s1: jazz x2 + blues; s2: rock; s3: no vote, every label.
    assert union.candidates.astype(int).tolist() == [[1, 1, 0], [0, 0, 1], [1, 1, 1]]
    assert matched.positions.tolist() == [0, 0, 0, 1] and matched.label_indices.tolist() == [1, 0, 1, 2]
    strict, _ = apply_votes(items, votes, min_votes=2)
    assert strict.candidates.astype(int).tolist() == [[0, 1, 0], [0, 0, 1], [1, 1, 1]]
    share, _ = apply_votes(items, votes, min_share=0.5)
    assert np.array_equal(share.candidates, strict.candidates)


def test_apply_votes_with_a_candidates_column(tmp_path):
    votes = read_votes(_write(tmp_path, ".csv"))
    items = read_dataset(_items(tmp_path, ["jazz|blues", "rock", "pop|rock"]))
    assert items.label_names == ["blues", "jazz", "pop", "rock"]
    made, _ = apply_votes(items, votes)
    # Voted items get their votes' set, s3 keeps the file's.
    assert made.candidates.astype(int).tolist() == [[1, 1, 0, 0], [0, 0, 0, 1], [0, 0, 1, 1]]
    unknown = read_dataset(_items(tmp_path, ["jazz", "pop", "pop"]))
    with pytest.raises(
        DataFileError, match=r"votes.csv, row 2 \(spreadsheet row 3\), column 'label': unknown label 'blues'"
    ):
        apply_votes(unknown, votes)


def test_a_vote_for_an_unknown_item_names_its_row(tmp_path):
    votes = read_votes(_write(tmp_path, ".csv", [*ROWS, ("s9", "ann", "jazz", "")]))
    items = read_dataset(_items(tmp_path), default_labels=vote_label_names(votes))
    with pytest.raises(DataFileError, match=r"row 5 \(spreadsheet row 6\), column 'id': unknown item 's9'"):
        apply_votes(items, votes)


def test_items_without_candidates_need_default_labels(tmp_path):
    with pytest.raises(DataFileError, match="has no 'candidates' column"):
        read_dataset(_items(tmp_path))


def test_the_crowd_sample_is_made_by_its_script_and_reads_with_its_votes():
    import importlib.util
    from pathlib import Path

    sample = Path(__file__).resolve().parents[2] / "sample_data"
    spec = importlib.util.spec_from_file_location("make_crowd_sample", sample / "make_crowd_sample.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    items_table, votes_table = module.build()
    assert items_table.to_csv(index=False, lineterminator="\n") == (sample / "crowd_items.csv").read_text()
    assert votes_table.to_csv(index=False, lineterminator="\n") == (sample / "crowd_votes.csv").read_text()
    votes = read_votes(sample / "crowd_votes.csv")
    items = read_dataset(sample / "crowd_items.csv", default_labels=vote_label_names(votes))
    assert items.content_columns == {"text": "text"} and items.X.shape == (80, 4)
    made, matched = apply_votes(items, votes)
    assert made.label_names == ["blues", "jazz", "pop", "rock"]
    assert np.unique(matched.positions).size == 76 and made.candidates[76:].all()  # the last 4 have no vote
