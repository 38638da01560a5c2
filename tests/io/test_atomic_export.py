"""Exports appear whole or not at all (issue 13, item 8), readable by their owner only (issue 23, item 7)."""

from __future__ import annotations

import os
import stat

import pandas as pd
import pytest

from app.io import write_table
from app.io.writers import atomic_file

TABLE = pd.DataFrame({"id": ["a", "b"], "score": [1.0, 2.0]})


@pytest.fixture
def umask():
    """Set the process umask for one test, and restore it."""
    previous = os.umask(0o022)
    os.umask(previous)
    yield lambda mask: os.umask(mask)
    os.umask(previous)


@pytest.mark.parametrize("mask", [0o000, 0o022, 0o077, 0o277])
@pytest.mark.parametrize("ext", [".csv", ".json", ".parquet"])
def test_exports_are_0600_whatever_the_umask(tmp_path, umask, mask, ext):
    umask(mask)
    path = write_table(TABLE, tmp_path / f"out{ext}")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"out{ext}"]


@pytest.mark.parametrize("old_mode", [0o600, 0o644, 0o666])
def test_an_export_over_an_existing_file_is_0600(tmp_path, umask, old_mode):
    umask(0o000)
    target = tmp_path / "out.csv"
    target.write_text("old")
    target.chmod(old_mode)
    write_table(TABLE, target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert pd.read_csv(target).equals(TABLE)


def test_the_named_temporary_file_is_0600_too(tmp_path, umask, monkeypatch):
    """Where O_TMPFILE is missing, the hidden temporary file is created 0600 from the start."""
    umask(0o000)
    monkeypatch.delattr(os, "O_TMPFILE", raising=False)
    target = tmp_path / "out.bin"
    with atomic_file(target) as handle:
        handle.write(b"data")
        (temporary,) = tmp_path.iterdir()
        assert temporary.name.startswith(".out.bin.")
        assert stat.S_IMODE(temporary.stat().st_mode) == 0o600
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old")
    bad = pd.DataFrame({"x": [float("nan")]}).astype(object)
    bad.loc[0, "x"] = object()  # not JSON serialisable: fails half-way through the write
    with pytest.raises(TypeError):
        write_table(bad, target)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_an_existing_file_is_replaced_whole(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("x" * 10_000)
    write_table(TABLE, target)
    assert pd.read_csv(target).equals(TABLE)


def test_the_atomic_file_is_named_only_at_the_end(tmp_path):
    target = tmp_path / "data.bin"
    with atomic_file(target) as handle:
        handle.write(b"half")
        # Nothing is visible under any name while the data are written (O_TMPFILE on Linux).
        if hasattr(os, "O_TMPFILE"):
            assert list(tmp_path.iterdir()) == []
    assert target.read_bytes() == b"half"
