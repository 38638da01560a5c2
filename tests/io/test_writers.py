"""Ranked query list, labelled-dataset export and write_table."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.io import (
    EXPORT_ONLY_COLUMNS,
    LABELLED_COLUMNS,
    RANKED_COLUMNS,
    DataFileError,
    labelled_dataset_table,
    ranked_query_table,
    read_dataset,
    write_table,
)
from app.io.writers import neutralise_formulas
from engine.exceptions import InvalidInput

NAMES = ["cat", "dog", "=cmd"]
Y = np.array(
    [
        [1, 1, 0],  # 0 partial
        [0, 1, 0],  # 1 precise: left out
        [1, 1, 1],  # 2 partial
        [0, 1, 1],  # 3 partial, label starting with '='
        [1, 0, 1],  # 4 partial
    ],
    dtype=bool,
)
IDS = ["a", "b", "-c", "@d", "-5"]
SCORES = np.array([2.0, 9.0, 5.0, 2.0, 7.0])
TOUCHED = np.array([1, 0, 4, 3, 2])
PARAMS = {"k": np.int64(10), "weighting": "uniform"}


def ranked() -> pd.DataFrame:
    return ranked_query_table(SCORES, Y, NAMES, IDS, TOUCHED, criterion="apl", params=PARAMS)


def test_ranked_table_columns_and_order() -> None:
    df = ranked()
    assert tuple(df.columns) == RANKED_COLUMNS
    assert df["id"].tolist() == ["-5", "-c", "a", "@d"]  # 7, 5, then the tie 2 = 2 in dataset order
    assert df["rank"].tolist() == [1, 2, 3, 4]
    assert df["score"].tolist() == [7.0, 5.0, 2.0, 2.0]
    assert df["candidates"].tolist() == ["cat|=cmd", "cat|dog|=cmd", "cat|dog", "dog|=cmd"]
    assert df["n_candidates"].tolist() == [2, 3, 2, 2]
    assert df["open_targets_touched"].tolist() == [2, 4, 1, 3]
    assert set(df["criterion"]) == {"apl"}
    assert set(df["params"]) == {'{"k":10,"weighting":"uniform"}'}
    assert (df["n_candidates"] >= 2).all()


def test_ranked_table_all_precise_is_empty() -> None:
    df = ranked_query_table(
        np.zeros(2), np.eye(2, dtype=bool), ["x", "y"], ["1", "2"], np.zeros(2, int), criterion="pl", params={}
    )
    assert len(df) == 0 and tuple(df.columns) == RANKED_COLUMNS


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        ({"scores": np.array([1.0, np.nan, 0, 0, 0])}, "scores row 1"),
        ({"scores": np.zeros(3)}, r"scores must have shape \(5,\)"),
        ({"touched": np.full(5, 0.5)}, "touched must hold integers"),
        ({"label_names": ["a"]}, "label_names has 1 entries but 3"),
        ({"ids": ["a"]}, "ids has 1 entries but 5"),
        ({"candidates": np.zeros((5, 3), bool)}, "empty candidate set"),
        ({"criterion": ""}, "criterion"),
        ({"params": {"f": object()}}, "JSON-serialisable"),
    ],
)
def test_ranked_table_bad_arguments(change: dict, pattern: str) -> None:
    kwargs = dict(
        scores=SCORES, candidates=Y, label_names=NAMES, ids=IDS, touched=TOUCHED, criterion="apl", params=PARAMS
    )
    kwargs.update(change)
    with pytest.raises(InvalidInput, match=pattern):
        ranked_query_table(**kwargs)


_CELLS = st.one_of(
    st.none(),
    st.floats(allow_nan=True),
    st.integers(),
    st.text(alphabet="=+-@\t\r.e0123 aA", max_size=6),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_CELLS, _CELLS), max_size=12))
def test_neutralise_formulas_is_the_rule_applied_to_every_cell(rows) -> None:
    """The vectorised pass against the rule read cell by cell: a text starting like a formula
    gets a leading quote unless it is a plain number; anything else is kept as it is."""
    df = (
        pd.DataFrame(rows, columns=["a", "b"], dtype=object) if rows else pd.DataFrame({"a": [], "b": []}, dtype=object)
    )
    plain = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")

    def rule(cell):
        if isinstance(cell, str) and cell[:1] in ("=", "+", "-", "@", "\t", "\r") and not plain.fullmatch(cell):
            return "'" + cell
        return cell

    out = neutralise_formulas(df)
    for name in df.columns:
        expected = [rule(cell) for cell in df[name]]
        got = out[name].tolist()
        assert len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            assert g == e or (g is e) or (isinstance(e, float) and isinstance(g, float) and np.isnan(e) and np.isnan(g))


def test_csv_neutralises_formulas_but_not_numbers(tmp_path: Path) -> None:
    df = pd.DataFrame(
        {
            "text": ["=1+2", "+A1", "-2+3", "@SUM(A1)", "\tx", "\rx", "-5", "+1.5e3", "plain", "a=b"],
            "number": [-1.5, -2, 3, 4, 5, 6, 7, 8, 9, -10],
        }
    )
    path = write_table(df, tmp_path / "t.csv")
    back = pd.read_csv(path, dtype=str, keep_default_na=False)
    assert back["text"].tolist() == [
        "'=1+2",
        "'+A1",
        "'-2+3",
        "'@SUM(A1)",
        "'\tx",
        "'\rx",
        "-5",
        "+1.5e3",
        "plain",
        "a=b",
    ]
    assert back["number"].tolist()[:2] == ["-1.5", "-2.0"] and back["number"].iloc[-1] == "-10.0"
    assert df["text"].iloc[0] == "=1+2"  # the caller's frame is not modified


def test_ranked_csv_neutralised_and_read_back_strips_quote(tmp_path: Path) -> None:
    path = write_table(ranked(), tmp_path / "ranked.csv")
    back = pd.read_csv(path, dtype=str, keep_default_na=False)
    assert back["id"].tolist() == ["-5", "'-c", "a", "'@d"]
    assert back["candidates"].tolist()[0] == "cat|=cmd"  # does not start with a formula character
    assert back["params"].iloc[0] == '{"k":10,"weighting":"uniform"}'
    assert list(back.columns) == list(RANKED_COLUMNS)


def test_ranked_json(tmp_path: Path) -> None:
    path = write_table(ranked(), tmp_path / "ranked.json")
    payload = json.loads(path.read_text())
    assert payload["table"] == "ranked_queries"
    assert payload["criterion"] == "apl"
    assert payload["params"] == {"k": 10, "weighting": "uniform"}
    rows = payload["rows"]
    assert [r["id"] for r in rows] == ["-5", "-c", "a", "@d"]
    assert rows[1] == {
        "rank": 2,
        "id": "-c",
        "score": 5.0,
        "candidates": ["cat", "dog", "=cmd"],
        "n_candidates": 3,
        "open_targets_touched": 4,
    }


def test_plain_dataframe_json_is_records(tmp_path: Path) -> None:
    df = pd.DataFrame({"a": [1, 2], "b": [np.nan, "x"]})
    path = write_table(df, tmp_path / "p.json")
    assert json.loads(path.read_text()) == [{"a": 1, "b": None}, {"a": 2, "b": "x"}]


def labelled(**kwargs) -> pd.DataFrame:
    when = dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.UTC)
    return labelled_dataset_table(
        IDS,
        NAMES,
        Y,
        resolved=np.array([False, True, False, False, False]),
        answered_by=[None, "ann", None, None, None],
        answered_at=[None, when, None, None, None],
        **kwargs,
    )


def test_labelled_table() -> None:
    df = labelled(true_labels=np.array([0, 1, -1, 2, 2]))
    assert tuple(df.columns) == LABELLED_COLUMNS
    assert df["label"].tolist() == [None, "dog", None, None, None]
    assert df["answered_at"].iloc[1] == "2024-05-01T12:30:00+00:00"
    assert df["true_label"].tolist() == ["cat", "dog", None, "=cmd", "=cmd"]
    assert df["n_candidates"].tolist() == [2, 1, 3, 2, 2]


@pytest.mark.parametrize("ext", [".csv", ".tsv", ".parquet"])
def test_labelled_export_with_features_reads_back(tmp_path: Path, ext: str) -> None:
    X = np.arange(10, dtype=float).reshape(5, 2) - 3
    df = labelled(true_labels=np.array([0, 1, -1, 2, 2]), features=X, feature_names=["u", "v"])
    path = write_table(df, tmp_path / f"labelled{ext}")
    ds = read_dataset(path, ignore_columns=EXPORT_ONLY_COLUMNS, label_names=NAMES)
    np.testing.assert_array_equal(ds.X, X)
    np.testing.assert_array_equal(ds.candidates, Y)
    assert ds.ids == IDS
    np.testing.assert_array_equal(ds.true_labels, [0, 1, -1, 2, 2])


def test_labelled_json(tmp_path: Path) -> None:
    payload = json.loads(write_table(labelled(), tmp_path / "l.json").read_text())
    assert payload["table"] == "labelled_dataset"
    assert payload["label_names"] == NAMES
    assert payload["rows"][1]["candidates"] == ["dog"]
    assert payload["rows"][1]["answered_by"] == "ann"
    assert payload["rows"][0]["label"] is None


def test_write_table_errors(tmp_path: Path) -> None:
    with pytest.raises(DataFileError, match=r"cannot write '\.xlsx' files"):
        write_table(ranked(), tmp_path / "r.xlsx")
    with pytest.raises(DataFileError, match="does not exist"):
        write_table(ranked(), tmp_path / "missing" / "r.csv")
    with pytest.raises(TypeError):
        write_table([1, 2], tmp_path / "r.csv")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_ranked_table_include_leaves_out_set_aside_items():
    import numpy as np

    from app.io import ranked_query_table

    Y = np.array([[1, 1], [1, 1], [1, 0]], dtype=bool)
    table = ranked_query_table(
        [3.0, 5.0, 0.0],
        Y,
        ["a", "b"],
        ["x", "y", "z"],
        [0, 0, 0],
        criterion="apl",
        params={},
        include=[True, False, True],
    )
    assert table["id"].tolist() == ["x"]
