"""Fuzzing the readers: any file either loads or raises DataFileError, never anything else."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.io
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.io import DataFileError, LoadedDataset, read_dataset

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

GOOD_CSV = (
    "id,candidates,true_label,f1,f2\n"
    "a,cat|dog,cat,1,2\n"
    'b,"[""dog"", ""bird""]",,3.5,-4\n'
    "c,bird,bird,5,6e2\n"
    "d,7|8,8,0,0\n"
)


def _seed_bytes(ext: str) -> bytes:
    """A valid file of each kind, for the mutation fuzzer to start from."""
    buffer = io.BytesIO()
    X = np.arange(8, dtype=float).reshape(4, 2)
    Y = np.array([[1, 1, 0], [0, 1, 0], [1, 1, 1], [0, 0, 1]], dtype=bool)
    if ext == ".npz":
        np.savez(buffer, X=X, candidates=Y, y=np.array([0, 1, -1, 2]))
    elif ext == ".mat":
        scipy.io.savemat(buffer, {"data": X, "partial_target": Y.T.astype(float)})
    elif ext == ".parquet":
        pd.read_csv(io.StringIO(GOOD_CSV), dtype={"true_label": str}).to_parquet(buffer, index=False)
    else:
        return GOOD_CSV.encode()
    return buffer.getvalue()


def _load(data: bytes, ext: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"fuzz{ext}"
        path.write_bytes(data)
        try:
            result = read_dataset(path)
        except DataFileError as exc:
            message = str(exc)
            assert message.startswith(str(path)) and "\n" not in message
            return
        _check_invariants(result)


def _check_invariants(ds: LoadedDataset) -> None:
    n = ds.X.shape[0]
    assert ds.X.dtype == np.float64 and np.isfinite(ds.X).all()
    assert ds.candidates.dtype == bool and ds.candidates.shape == (n, len(ds.label_names))
    assert ds.candidates.any(axis=1).all()
    assert len(ds.ids) == n == len(set(ds.ids))
    if ds.true_labels is not None:
        known = ds.true_labels >= 0
        assert ds.candidates[np.flatnonzero(known), ds.true_labels[known]].all()


EXTENSIONS = [".csv", ".tsv", ".txt", ".parquet", ".mat", ".npz"]


@pytest.mark.parametrize("ext", EXTENSIONS)
@SETTINGS
@given(data=st.binary(max_size=600))
def test_random_bytes(ext: str, data: bytes) -> None:
    _load(data, ext)


@st.composite
def mutated(draw: st.DrawFn, seed: bytes) -> bytes:
    """Flip, delete, insert or duplicate a few bytes or lines of a valid file."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "delete", "insert", "truncate", "dup-line", "special"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[at] = draw(st.integers(0, 255))
        elif op == "delete" and data:
            del data[at : at + draw(st.integers(1, 8))]
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif op == "truncate":
            del data[at:]
        elif op == "dup-line":
            lines = bytes(data).split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            lines.insert(i, lines[i])
            data = bytearray(b"\n".join(lines))
        else:
            token = draw(
                st.sampled_from(
                    [
                        b",",
                        b"|",
                        b'"',
                        b"[",
                        b"]",
                        b"\n",
                        b"\r",
                        b"nan",
                        b"inf",
                        b"-",
                        b"=",
                        b"'",
                        b"\t",
                        b";",
                        b"[[[[[[[[",
                        b"\xff",
                        b"\x00",
                        b"1e999",
                    ]
                )
            )
            data[at:at] = token
    return bytes(data)


@pytest.mark.parametrize("ext", EXTENSIONS)
@SETTINGS
@given(st.data())
def test_mangled_valid_files(ext: str, data: st.DataObject) -> None:
    seed = _seed_bytes(ext)
    _load(data.draw(mutated(seed)), ext)


_cell = st.one_of(
    st.text(alphabet="ab|,;[]\"' 0123456789.-e\t", max_size=8),
    st.sampled_from(["nan", "inf", "", "[1,2]", '["a"]', "a|b", "1", "-2.5", "=A1"]),
)


@SETTINGS
@given(
    rows=st.lists(st.lists(_cell, min_size=1, max_size=5), min_size=0, max_size=6),
    header=st.lists(st.sampled_from(["id", "candidates", "true_label", "f1", "f2", "", "x"]), min_size=1, max_size=5),
)
def test_random_tables(header: list[str], rows: list[list[str]]) -> None:
    import csv

    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(header)
    writer.writerows(rows)
    _load(buffer.getvalue().encode(), ".csv")
