"""Round trips and the table of bad files for app.io.read_dataset."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.io
import scipy.sparse

from app.io import DataFileError, LoadedDataset, parse_candidate_cell, read_dataset, sort_label_names
from engine.exceptions import InvalidInput

X = np.array([[0.5, 1.0], [2.0, -3.25], [4.0, 5.0], [6.5, 7.0]])
SETS = [["cat", "dog"], ["dog"], ["bird", "cat", "dog"], ["bird"]]
TRUE = ["cat", "dog", None, "bird"]
NAMES = ["bird", "cat", "dog"]  # natural order
Y = np.array([[n in s for n in NAMES] for s in SETS])
TRUE_IDX = np.array([1, 2, -1, 0])
IDS = ["a1", "a2", "a3", "a4"]


def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": IDS,
            "candidates": ["|".join(s) for s in SETS],
            "true_label": [t or "" for t in TRUE],
            "f1": X[:, 0],
            "f2": X[:, 1],
        }
    )


def check(ds: LoadedDataset, *, with_ids: bool = True, with_true: bool = True) -> None:
    np.testing.assert_array_equal(ds.X, X)
    assert ds.X.dtype == np.float64
    assert ds.candidates.dtype == bool
    assert ds.label_names == NAMES
    np.testing.assert_array_equal(ds.candidates, Y)
    assert ds.ids == (IDS if with_ids else ["0", "1", "2", "3"])
    if with_true:
        np.testing.assert_array_equal(ds.true_labels, TRUE_IDX)
    else:
        assert ds.true_labels is None
    assert ds.feature_names == ["f1", "f2"]
    assert ds.layout is None


# ------------------------------------------------------------------ round trips


def test_csv_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    frame().to_csv(path, index=False)
    ds = read_dataset(path)
    check(ds)
    assert ds.source == str(path)


def test_tsv_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "d.tsv"
    frame().to_csv(path, index=False, sep="\t")
    check(read_dataset(path))


@pytest.mark.parametrize("sep", ["\t", ",", ";"])
def test_txt_sniffs_delimiter(tmp_path: Path, sep: str) -> None:
    path = tmp_path / "d.txt"
    frame().to_csv(path, index=False, sep=sep)
    check(read_dataset(path))


def test_explicit_delimiter_and_json_cells(tmp_path: Path) -> None:
    df = frame()
    df["candidates"] = [json.dumps(s) for s in SETS]
    path = tmp_path / "d.csv"
    df.to_csv(path, index=False, sep=";")
    check(read_dataset(path, delimiter=";"))


def test_csv_without_id_and_true_label(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    frame().drop(columns=["id", "true_label"]).to_csv(path, index=False)
    check(read_dataset(path), with_ids=False, with_true=False)


def test_custom_column_names(tmp_path: Path) -> None:
    df = frame().rename(columns={"id": "key", "candidates": "labels", "true_label": "gold"})
    path = tmp_path / "d.csv"
    df.to_csv(path, index=False)
    check(read_dataset(path, candidates_column="labels", id_column="key", true_label_column="gold"))


def test_utf8_bom_blank_lines_and_trailing_delimiters(tmp_path: Path) -> None:
    text = "id,candidates,true_label,f1,f2\r\n"
    for i, s, t, x in zip(IDS, SETS, TRUE, X, strict=True):
        text += f"{i},{'|'.join(s)},{t or ''},{x[0]},{x[1]},\r\n"
    text += "\r\n,,,,\r\n"
    path = tmp_path / "d.csv"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    check(read_dataset(path))


def test_utf16_text(tmp_path: Path) -> None:
    path = tmp_path / "d.txt"
    path.write_text(frame().to_csv(index=False, sep="\t"), encoding="utf-16")
    check(read_dataset(path))


def test_parquet_round_trip_with_list_column_and_int_true_labels(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    frame().to_parquet(path, index=False)
    check(read_dataset(path))
    table = pa.table(
        {
            "candidates": pa.array([[3, 8], [8], [1, 3, 8], [1]], type=pa.list_(pa.int64())),
            "true_label": pa.array([3, 8, None, 1], type=pa.int64()),
            "f1": X[:, 0],
            "f2": X[:, 1],
        },
        metadata={b"winnow.layout": b"image:1x2"},
    )
    pq.write_table(table, tmp_path / "l.parquet")
    ds = read_dataset(tmp_path / "l.parquet")
    assert ds.label_names == ["1", "3", "8"]
    np.testing.assert_array_equal(ds.candidates, Y)
    np.testing.assert_array_equal(ds.true_labels, TRUE_IDX)
    assert ds.layout == "image:1x2"


@pytest.mark.parametrize("sparse", [False, True])
def test_mat_round_trip(tmp_path: Path, sparse: bool) -> None:
    partial = Y.T.astype(np.float64)  # q x n, as in the PLL benchmarks
    target = np.zeros_like(partial)
    target[TRUE_IDX[TRUE_IDX >= 0], np.flatnonzero(TRUE_IDX >= 0)] = 1
    if sparse:
        partial, target = scipy.sparse.csc_matrix(partial), scipy.sparse.csc_matrix(target)
    path = tmp_path / "d.mat"
    scipy.io.savemat(path, {"data": X, "partial_target": partial, "target": target})
    ds = read_dataset(path, label_names=NAMES)
    np.testing.assert_array_equal(ds.X, X)
    np.testing.assert_array_equal(ds.candidates, Y)
    np.testing.assert_array_equal(ds.true_labels, TRUE_IDX)
    assert ds.label_names == NAMES
    assert read_dataset(path).label_names == ["1", "2", "3"]  # MATLAB row numbers by default
    assert ds.ids == ["0", "1", "2", "3"]


def test_mat_uint8_without_target(tmp_path: Path) -> None:
    path = tmp_path / "d.mat"
    scipy.io.savemat(path, {"data": X, "partial_target": Y.T.astype(np.uint8)})
    ds = read_dataset(path)
    np.testing.assert_array_equal(ds.candidates, Y)
    assert ds.true_labels is None


def test_npz_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "d.npz"
    np.savez(
        path,
        X=X,
        candidates=Y,
        y=TRUE_IDX,
        label_names=np.array(NAMES),
        ids=np.array(IDS),
        feature_names=np.array(["f1", "f2"]),
    )
    check(read_dataset(path))
    np.savez(path, X=X.astype(np.float32), candidates=Y.astype(np.int8))
    ds = read_dataset(path)
    np.testing.assert_array_equal(ds.candidates, Y)
    assert ds.label_names == ["0", "1", "2"]
    assert ds.feature_names == ["feature_0", "feature_1"]


def test_label_names_argument_keeps_order_and_allows_unused_labels(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    frame().to_csv(path, index=False)
    ds = read_dataset(path, label_names=["dog", "cat", "bird", "fish"])
    assert ds.label_names == ["dog", "cat", "bird", "fish"]
    assert ds.candidates[:, 3].sum() == 0
    assert ds.candidates[0].tolist() == [True, True, False, False]


def test_ignore_columns(tmp_path: Path) -> None:
    df = frame()
    df["notes"] = "free text"
    path = tmp_path / "d.csv"
    df.to_csv(path, index=False)
    check(read_dataset(path, ignore_columns=["notes", "not-there"]))


@pytest.mark.parametrize(
    ("ignored", "named"),
    [
        (["id", "candidates"], ["'candidates' (holds the candidate sets)", "'id' (holds the ids)"]),
        (["true_label", "f1"], ["'true_label' (holds the true labels)"]),
        (["cands"], ["'cands' (holds the candidate sets)"]),
    ],
)
def test_columns_with_a_role_cannot_be_ignored(tmp_path: Path, ignored: list[str], named: list[str]) -> None:
    """Issue 23, item 8: ignoring them was silently a no-op, the import then used them anyway."""
    df = frame()
    if ignored == ["cands"]:
        df = df.rename(columns={"candidates": "cands"})
    path = tmp_path / "d.csv"
    df.to_csv(path, index=False)
    with pytest.raises(DataFileError, match="ignore_columns names columns that cannot be ignored: ") as caught:
        read_dataset(path, ignore_columns=ignored, candidates_column="cands" if ignored == ["cands"] else "candidates")
    message = str(caught.value)
    assert message.startswith(str(path)) and "\n" not in message
    assert all(name in message for name in named)
    assert "'f1'" not in message


@pytest.mark.parametrize(
    ("names", "layout"),
    [
        ([f"pixel_{i}" for i in range(64)], "image:8x8"),
        ([f"px{i}" for i in range(1, 17)], "image:4x4"),
        ([f"pixel_{r}_{c}" for r in range(2) for c in range(3)], "image:2x3"),
        ([f"pixel_{i}" for i in range(10)], None),
        (["a", "b", "c", "d"], None),
    ],
)
def test_layout_hint(tmp_path: Path, names: list[str], layout: str | None) -> None:
    df = pd.DataFrame(np.ones((3, len(names))), columns=names)
    df.insert(0, "candidates", ["1|2", "1", "2"])
    path = tmp_path / "d.csv"
    df.to_csv(path, index=False)
    assert read_dataset(path).layout == layout


def test_sort_label_names() -> None:
    assert sort_label_names(["10", "9", "-1", "2"]) == ["-1", "2", "9", "10"]
    assert sort_label_names(["c10", "c2", "b", "C1"]) == ["b", "C1", "c2", "c10"]


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ("cat|dog", ["cat", "dog"]),
        (" cat | dog |", ["cat", "dog"]),
        ('["cat", "dog", "cat"]', ["cat", "dog"]),
        ("[3, 8]", ["3", "8"]),
        (7, ["7"]),
        ("", []),
        (None, []),
        (["a|b"], ValueError),
        ("[1, true]", ValueError),
        ("[1, 2", ValueError),
        ('{"a": 1}', ['{"a": 1}']),
    ],
)
def test_parse_candidate_cell(cell: object, expected: object) -> None:
    if expected is ValueError:
        with pytest.raises(ValueError):
            parse_candidate_cell(cell)
    else:
        assert parse_candidate_cell(cell) == expected


# ------------------------------------------------------------------ bad files

HEADER = "id,candidates,true_label,f1,f2\n"
GOOD_ROWS = ["a,cat|dog,cat,1,2\n", "b,dog,,3,4\n", "c,bird,bird,5,6\n"]


def csv_with(row: str, at: int = 1) -> str:
    """The good CSV with data row ``at`` (1-based) replaced by ``row``."""
    rows = list(GOOD_ROWS)
    rows[at - 1] = row
    return HEADER + "".join(rows)


BAD_TEXT = [
    (
        "empty-set",
        csv_with("b,,,3,4\n", 2),
        {},
        r"d\.csv, row 2 \(spreadsheet row 3\), column 'candidates': empty candidate set",
    ),
    ("empty-set-pipes", csv_with("b, | ,,3,4\n", 2), {}, r"row 2 .*empty candidate set"),
    (
        "unknown-label",
        csv_with("b,dog|cow,,3,4\n", 2),
        {"label_names": ["bird", "cat", "dog"]},
        r"row 2 .*column 'candidates': unknown label 'cow'",
    ),
    ("comma-sets", csv_with('b,"dog,cat",,3,4\n', 2), {"label_names": ["cat", "dog"]}, r"separate labels with '\|'"),
    (
        "nan",
        csv_with("c,bird,bird,nan,6\n", 3),
        {},
        r"row 3 \(spreadsheet row 4\), column 'f1': 'nan' is not a finite number",
    ),
    ("inf", csv_with("c,bird,bird,5,-inf\n", 3), {}, r"row 3 .*column 'f2': '-inf' is not a finite number"),
    ("missing-feature", csv_with("c,bird,bird,,6\n", 3), {}, r"row 3 .*column 'f1': is empty"),
    (
        "non-numeric",
        csv_with("a,cat,cat,1,abc\n", 1),
        {},
        r"row 1 \(spreadsheet row 2\), column 'f2': 'abc' is not a number",
    ),
    (
        "first-bad-in-reading-order",
        csv_with("b,dog,,3,x\n", 2).replace("c,bird,bird,5,6", "c,bird,bird,y,6"),
        {},
        r"row 2 .*column 'f2'",
    ),
    ("duplicate-id", csv_with("a,dog,,3,4\n", 2), {}, r"row 2 .*column 'id': duplicate id 'a' \(first used in row 1\)"),
    ("empty-id", csv_with(",dog,,3,4\n", 2), {}, r"row 2 .*column 'id': empty id"),
    (
        "ragged-long",
        csv_with("b,dog,,3,4,5\n", 2),
        {},
        r"row 2 \(spreadsheet row 3\): has 6 cells but the header has 5",
    ),
    ("ragged-short", csv_with("b,dog,,3\n", 2), {}, r"row 2 .*has 4 cells"),
    ("unquoted-json", csv_with('b,["dog","cat"],,3,4\n', 2), {}, r"JSON list .* must be quoted"),
    (
        "true-not-in-set",
        csv_with("a,cat|dog,bird,1,2\n", 1),
        {},
        r"row 1 .*column 'true_label': true label 'bird' is not in the item's candidate set 'cat\|dog'",
    ),
    (
        "true-two-labels",
        csv_with("a,cat|dog,cat|dog,1,2\n", 1),
        {},
        r"row 1 .*column 'true_label': .*not a single label",
    ),
    ("bad-json", csv_with('a,"[""cat"",",cat,1,2\n', 1), {}, r"row 1 .*not a valid JSON list"),
    ("pipe-in-json-name", csv_with('a,"[""c|d""]",,1,2\n', 1), {}, r"contains '\|'"),
    (
        "missing-candidates",
        HEADER.replace("candidates", "labels") + "".join(GOOD_ROWS),
        {},
        r"has no 'candidates' column \(columns: id, labels",
    ),
    ("missing-id-column", HEADER + "".join(GOOD_ROWS), {"id_column": "key"}, r"has no 'key' column for id_column"),
    (
        "semicolon-hint",
        HEADER.replace(",", ";") + "".join(r.replace(",", ";") for r in GOOD_ROWS),
        {},
        r"pass delimiter=';'",
    ),
    ("no-rows", HEADER, {}, r"header but no data rows"),
    ("too-few-rows", HEADER + "".join(GOOD_ROWS), {"min_rows": 11}, r"has 3 data rows but at least 11 are needed"),
    ("no-features", "candidates,id\ncat,1\n", {}, r"no feature columns"),
    ("empty-header-cell", ",candidates,f1\n0,cat,1\n", {}, r"header cell 1 is empty"),
    ("duplicate-column", "candidates,f1,f1\ncat,1,2\n", {}, r"column 'f1': duplicate column name"),
    ("blank", "\n  \n\n", {}, r"no header row"),
    ("latin1", HEADER + "a,caf\xe9,,1,2\n", {"encoding": "latin-1"}, r"is not UTF-8 text \(byte 0xe9 on line 2\)"),
    ("nul", HEADER + "a,cat,\x00,1,2\n", {}, r"NUL bytes"),
    ("xlsx-renamed", "PK\x03\x04rest of a zip", {}, r"looks like a zip archive"),
]


@pytest.mark.parametrize(("case", "text", "kwargs", "pattern"), BAD_TEXT, ids=[c[0] for c in BAD_TEXT])
def test_bad_text_files(tmp_path: Path, case: str, text: str, kwargs: dict, pattern: str) -> None:
    path = tmp_path / "d.csv"
    encoding = kwargs.pop("encoding", "utf-8")
    path.write_bytes(text.encode(encoding))
    with pytest.raises(DataFileError, match=pattern) as info:
        read_dataset(path, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))


def test_error_attributes(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text(csv_with("b,,,3,4\n", 2))
    with pytest.raises(DataFileError) as info:
        read_dataset(path)
    err = info.value
    assert (err.row, err.column, err.path) == (2, "candidates", str(path))
    assert isinstance(err, InvalidInput) and isinstance(err, ValueError)


def test_row_numbers_count_blank_rows_and_multiline_cells(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text(HEADER + "a,cat,,1,2\n\n" + 'b,"dog|\ncat",,3,4\n' + "c,,,5,6\n")
    with pytest.raises(DataFileError, match=r"row 4 \(spreadsheet row 5\)"):
        read_dataset(path)


def _write_mat(path: Path, **arrays: object) -> None:
    scipy.io.savemat(path, arrays)


def _write_npz(path: Path, **arrays: object) -> None:
    np.savez(path, **arrays)


BAD_BINARY = [
    ("mat-missing-key", "d.mat", _write_mat, {"data": X}, r"has no variable 'partial_target'"),
    (
        "mat-empty-set",
        "d.mat",
        _write_mat,
        {"data": X, "partial_target": np.array([[0, 1, 1, 1], [0, 1, 1, 1]])},
        r"row 1 \(1-based\), column 'partial_target': empty candidate set",
    ),
    (
        "mat-shape",
        "d.mat",
        _write_mat,
        {"data": X, "partial_target": np.ones((3, 5))},
        r"column 'partial_target': has shape \(3, 5\)",
    ),
    (
        "mat-not-01",
        "d.mat",
        _write_mat,
        {"data": X, "partial_target": np.full((2, 4), 2.0)},
        r"row 1 .*entries must be 0 or 1",
    ),
    (
        "mat-nan",
        "d.mat",
        _write_mat,
        {"data": np.where(X > 6, np.nan, X), "partial_target": np.ones((2, 4))},
        r"row 4 \(1-based\), column 'data': feature 0 \(0-based\) is nan",
    ),
    (
        "mat-true-outside",
        "d.mat",
        _write_mat,
        {
            "data": X,
            "partial_target": np.array([[1, 1, 1, 1], [0, 1, 1, 1]]),
            "target": np.array([[0, 1, 1, 1], [1, 0, 0, 0]]),
        },
        r"row 1 .*column 'target': true label '2' is not in the item's candidate set '1'",
    ),
    (
        "mat-two-true",
        "d.mat",
        _write_mat,
        {"data": X, "partial_target": np.ones((2, 4)), "target": np.ones((2, 4))},
        r"row 1 .*has 2 true labels",
    ),
    ("npz-missing-X", "d.npz", _write_npz, {"candidates": Y}, r"has no array 'X'"),
    (
        "npz-empty-set",
        "d.npz",
        _write_npz,
        {"X": X, "candidates": np.vstack([Y[:2], [False] * 3, Y[3:]])},
        r"row 3 \(1-based\), column 'candidates': empty candidate set",
    ),
    (
        "npz-nan",
        "d.npz",
        _write_npz,
        {"X": np.where(X == 5.0, np.inf, X), "candidates": Y},
        r"row 3 .*column 'X': feature 1",
    ),
    (
        "npz-y-range",
        "d.npz",
        _write_npz,
        {"X": X, "candidates": Y, "y": np.array([0, 1, 2, 7])},
        r"row 4 .*column 'y': value 7",
    ),
    (
        "npz-y-outside",
        "d.npz",
        _write_npz,
        {"X": X, "candidates": Y, "y": np.array([0, 2, 0, 0])},
        r"row 1 .*column 'y': true label '0'",
    ),
    (
        "npz-dup-ids",
        "d.npz",
        _write_npz,
        {"X": X, "candidates": Y, "ids": np.array(["a", "b", "a", "c"])},
        r"row 3 .*column 'ids': duplicate id 'a'",
    ),
    (
        "npz-object",
        "d.npz",
        _write_npz,
        {"X": X, "candidates": Y, "label_names": np.array(["a", 1, None], dtype=object)},
        r"column 'label_names': cannot be read: it is an object array",
    ),
    (
        "npz-names-length",
        "d.npz",
        _write_npz,
        {"X": X, "candidates": Y, "label_names": np.array(["a", "b"])},
        r"column 'label_names': must be 3 strings",
    ),
    (
        "npz-layout",
        "d.npz",
        _write_npz,
        {"X": X, "candidates": Y, "layout": np.array("image:3x3")},
        r"layout 'image:3x3' needs 9 features but there are 2",
    ),
    (
        "npz-X-strings",
        "d.npz",
        _write_npz,
        {"X": np.array([["a"]]), "candidates": Y},
        r"column 'X': must be a 2-D numeric array",
    ),
]


@pytest.mark.parametrize(("case", "name", "writer", "arrays", "pattern"), BAD_BINARY, ids=[c[0] for c in BAD_BINARY])
def test_bad_array_files(tmp_path: Path, case: str, name: str, writer, arrays: dict, pattern: str) -> None:
    path = tmp_path / name
    writer(path, **arrays)
    with pytest.raises(DataFileError, match=pattern):
        read_dataset(path)


@pytest.mark.parametrize(
    ("name", "content", "pattern"),
    [
        ("d.xlsx", b"PK", r"unsupported file type '\.xlsx'.*CSV UTF-8"),
        ("d", b"x", r"unsupported file type '\(no extension\)'"),
        ("d.csv", b"", r"is empty \(0 bytes\)"),
        ("d.parquet", b"", r"is empty \(0 bytes\)"),
        ("d.parquet", b"id,candidates\n", r"is not a Parquet file"),
        ("d.parquet", b"PAR1garbagegarbagePAR1", r"is not a readable Parquet file"),
        (
            "d.mat",
            b"MATLAB 5.0 MAT-file" + b" " * 97 + b"\x00" * 8 + b"\x00\x01IM" + b"\x01" * 40,
            r"is not a readable MAT-file",
        ),
        ("d.mat", b"hello world", r"is not a MATLAB 5/7 MAT-file"),
        ("d.mat", b"MATLAB 7.3 MAT-file" + b" " * 200, r"MATLAB v7\.3 \(HDF5\)"),
        ("d.npz", b"PK\x03\x04garbage", r"is not a readable \.npz archive"),
        ("d.npz", b"\x93NUMPY", r"single \.npy array"),
        ("d.npz", b"a,b\n1,2\n", r"is not an \.npz archive"),
        ("d.tsv", b"PAR1....", r"looks like a Parquet file"),
    ],
)
def test_wrong_or_corrupt_files(tmp_path: Path, name: str, content: bytes, pattern: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(DataFileError, match=pattern):
        read_dataset(path)


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(DataFileError, match="file not found"):
        read_dataset(tmp_path / "nope.csv")
    (tmp_path / "dir.csv").mkdir()
    with pytest.raises(DataFileError, match="not a regular file"):
        read_dataset(tmp_path / "dir.csv")


def test_bad_parquet_feature_type(tmp_path: Path) -> None:
    table = pa.table({"candidates": ["a", "b"], "when": pa.array([1, 2], type=pa.timestamp("s"))})
    pq.write_table(table, tmp_path / "d.parquet")
    with pytest.raises(
        DataFileError, match=r"column 'when': holds timestamp.* values; feature columns must be numeric"
    ):
        read_dataset(tmp_path / "d.parquet")
    table = pa.table({"candidates": ["a", "b"], "f": pa.array([1.0, None])})
    pq.write_table(table, tmp_path / "n.parquet")
    with pytest.raises(DataFileError, match=r"row 2 \(1-based\), column 'f': is empty"):
        read_dataset(tmp_path / "n.parquet")


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        ({"label_names": ["a", "a"]}, InvalidInput, "duplicates"),
        ({"label_names": []}, InvalidInput, "empty"),
        ({"label_names": "abc"}, TypeError, "single string"),
        ({"min_rows": 0}, InvalidInput, "min_rows"),
        ({"delimiter": "ab"}, InvalidInput, "delimiter"),
        ({"candidates_column": ""}, InvalidInput, "candidates_column"),
    ],
)
def test_bad_arguments(tmp_path: Path, kwargs: dict, error: type, pattern: str) -> None:
    path = tmp_path / "d.csv"
    frame().to_csv(path, index=False)
    with pytest.raises(error, match=pattern):
        read_dataset(path, **kwargs)


def _mat_bytes(**arrays: object) -> bytes:
    import io

    buffer = io.BytesIO()
    scipy.io.savemat(buffer, arrays)
    return buffer.getvalue()


def test_mat_unknown_type_code_is_an_error_not_a_crash(tmp_path: Path) -> None:
    # Regression: scipy.io.loadmat segfaulted on a data part whose type code is out of range.
    raw = bytearray(_mat_bytes(data=X, partial_target=Y.T.astype(float)))
    at = raw.index(b"data") + 4  # "data" is a small element; the real part's tag follows it
    assert raw[at] == 9  # miDOUBLE
    raw[at] = 178
    path = tmp_path / "d.mat"
    path.write_bytes(bytes(raw))
    with pytest.raises(DataFileError, match=r"unknown type code 178"):
        read_dataset(path)


def test_mat_sparse_with_out_of_range_index(tmp_path: Path) -> None:
    sparse = scipy.sparse.csc_matrix(Y.T.astype(float))
    raw = bytearray(_mat_bytes(data=X, partial_target=sparse))
    # Row indices (ir) of partial_target are int32 values < 3; make the first one 1000.
    start = raw.index(b"partial_target") + 16
    assert int.from_bytes(raw[start : start + 4], "little") == 5  # miINT32 tag of ir
    raw[start + 8 : start + 12] = (1000).to_bytes(4, "little")
    path = tmp_path / "d.mat"
    path.write_bytes(bytes(raw))
    with pytest.raises(DataFileError, match=r"partial_target"):
        read_dataset(path)


def test_parquet_invalid_utf8(tmp_path: Path) -> None:
    table = pa.table(
        {"candidates": pa.array([b"a", b"\x80"], type=pa.binary()).cast(pa.string(), safe=False), "f": [1.0, 2.0]}
    )
    path = tmp_path / "d.parquet"
    # The pinned pyarrow (constraints.txt) writes the invalid string as it is; the reader must
    # refuse it with the column's name.
    pq.write_table(table, path)
    with pytest.raises(DataFileError, match=r"column 'candidates'"):
        read_dataset(path)
