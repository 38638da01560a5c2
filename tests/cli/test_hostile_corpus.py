"""A corpus of hostile files, made by the tests and imported through the installed ``winnow``
(issue 13, item 4 and the Proof section).

Each case is a small file on disk built to hurt: zip bombs, sparse bombs, giant lines, odd
encodings, spreadsheet formulas, Markdown and HTML in names. For each, ``winnow import`` must
end with the accepted result or one line on stderr (exit 2, no traceback), its peak memory
(``ru_maxrss`` of that one child, from ``os.wait4``) must stay under :data:`PEAK_BOUND` -- a
3.9 MB ``.npz`` used to reach 7.9 GB and a 560 KB sparse ``.mat`` 6.3 GB -- and a refused file
must leave the database exactly as it was.
"""

from __future__ import annotations

import codecs
import csv
import io
import os
import sqlite3
import subprocess
import threading
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.cli.conftest import WINNOW

#: Peak resident memory allowed to one ``winnow import`` of a hostile file. Generous: the
#: interpreter with pandas, scikit-learn and SQLAlchemy loaded takes about a quarter of it.
PEAK_BOUND = 1_500 * 1024 * 1024

MiB = 1 << 20


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[Path], Path]
    #: A substring of the one-line error, or None when the file must be accepted.
    error: str | None
    env: dict[str, str] = field(default_factory=dict)


def run_measured(args: list[str], env: dict[str, str]) -> tuple[int, str, str, int]:
    """Run ``winnow`` and return (exit status, stdout, stderr, peak RSS in bytes of that child).

    The child is reaped with ``os.wait4``, whose resource usage is that one process's (not the
    maximum over every child this test process ever had).
    """
    full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **env}
    child = subprocess.Popen([str(WINNOW), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full_env)
    streams: dict[str, bytes] = {}
    readers = [
        threading.Thread(target=lambda name=name, pipe=pipe: streams.__setitem__(name, pipe.read()))
        for name, pipe in (("out", child.stdout), ("err", child.stderr))
    ]
    for reader in readers:
        reader.start()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    for reader in readers:
        reader.join(timeout=60)
    child.stdout.close()
    child.stderr.close()
    return child.returncode, streams["out"].decode(), streams["err"].decode(), usage.ru_maxrss * 1024  # KiB on Linux


# -------------------------------------------------------------------------------------- files


def _npy_header(shape: tuple[int, ...], dtype: str = "<f8") -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buffer.getvalue()


def _zip_member(archive: zipfile.ZipFile, name: str, header: bytes, zeros: int) -> None:
    with archive.open(name, "w", force_zip64=True) as member:
        member.write(header)
        chunk = bytes(MiB)
        for _ in range(zeros // MiB):
            member.write(chunk)


def npz_bomb(folder: Path) -> Path:
    """64 MiB of zeros as X (deflated to about 64 KB), candidates fine: over a 16 MiB limit."""
    path = folder / "bomb.npz"
    rows = 64 * MiB // (8 * 16)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        _zip_member(archive, "X.npy", _npy_header((rows, 16)), 64 * MiB)
        buffer = io.BytesIO()
        np.save(buffer, np.ones((rows, 2), dtype=bool))
        archive.writestr("candidates.npy", buffer.getvalue())
    return path


def npz_lying_header(folder: Path) -> Path:
    """A header claiming 80 GB for an X whose member holds 1 MiB."""
    path = folder / "liar.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        _zip_member(archive, "X.npy", _npy_header((1_000_000, 10_000)), MiB)
        _zip_member(archive, "candidates.npy", _npy_header((1_000_000, 2), "|b1"), MiB)
    return path


def sparse_mat_bomb(folder: Path) -> Path:
    """A few non-zeros in a 200000 x 100000 sparse 'data' (160 GB once dense)."""
    import scipy.io
    import scipy.sparse

    n, d = 200_000, 100_000
    data = scipy.sparse.coo_matrix((np.ones(5), (np.arange(5), np.arange(5))), shape=(n, d)).tocsc()
    partial = scipy.sparse.coo_matrix((np.ones(n), (np.zeros(n, dtype=int), np.arange(n))), shape=(2, n)).tocsc()
    path = folder / "sparse.mat"
    scipy.io.savemat(path, {"data": data, "partial_target": partial}, do_compression=True)
    return path


def mat_compressed_bomb(folder: Path) -> Path:
    """A dense 'data' of 64 MiB of zeros, compressed: over a 16 MiB limit."""
    import scipy.io

    n = 64 * MiB // (8 * 64)
    path = folder / "dense.mat"
    scipy.io.savemat(path, {"data": np.zeros((n, 64)), "partial_target": np.ones((2, n))}, do_compression=True)
    return path


def _mat_bomb_at_default_limit(folder: Path, name: str) -> Path:
    """A MAT-file of about 1.1 MB whose one compressed variable ``name`` is 1.125 GiB of zeros:
    over the default 1 GiB limit (issue 23, item 8: such a file reached 2.23 GB of memory).

    Written by hand, a megabyte at a time, so the test itself never holds the zeros.
    """
    import struct
    import zlib

    rows, cols = 9 * 2**24 // 64, 64  # 1.125 GiB of float64
    data_bytes = rows * cols * 8
    name_bytes = name.encode() + b"\0" * (-len(name) % 8)
    body = (
        struct.pack("<II", 6, 8)
        + struct.pack("<II", 6, 0)  # miUINT32 array flags: mxDOUBLE_CLASS
        + struct.pack("<II", 5, 8)
        + struct.pack("<ii", rows, cols)  # miINT32 dimensions
        + struct.pack("<II", 1, len(name))
        + name_bytes  # miINT8 name
        + struct.pack("<II", 9, data_bytes)
    )  # miDOUBLE data, then the zeros
    compressor = zlib.compressobj(9)
    chunks = [compressor.compress(struct.pack("<II", 14, len(body) + data_bytes) + body)]
    zeros = bytes(MiB)
    for _ in range(data_bytes // MiB):
        chunks.append(compressor.compress(zeros))
    chunks.append(compressor.flush())
    compressed = b"".join(chunks)
    header = b"MATLAB 5.0 MAT-file, hostile corpus".ljust(116, b" ") + b"\0" * 8 + struct.pack("<H", 0x0100) + b"IM"
    path = folder / f"bomb_{name}.mat"
    path.write_bytes(header + struct.pack("<II", 15, len(compressed)) + compressed)
    return path


def mat_data_bomb_default_limit(folder: Path) -> Path:
    return _mat_bomb_at_default_limit(folder, "data")


def mat_unread_bomb_default_limit(folder: Path) -> Path:
    """The zeros in a variable winnow does not read: refused while inflating, never held."""
    return _mat_bomb_at_default_limit(folder, "junk")


def parquet_many_rows(folder: Path) -> Path:
    """Two million rows of one repeated value: tiny on disk, over a 16 MiB limit in memory."""
    n = 2_000_000
    path = folder / "rows.parquet"
    pd.DataFrame({"candidates": ["a|b"] * n, "f0": np.zeros(n)}).to_parquet(path, compression="zstd")
    return path


def giant_line(folder: Path) -> Path:
    """One 20 MB candidates cell on one line."""
    path = folder / "giant.csv"
    path.write_text("id,f0,candidates\nr1,1," + "a|" * (10 * 1_000_000) + "b\nr2,2,a\n")
    return path


def giant_header(folder: Path) -> Path:
    """A header of 200000 feature columns (a 1.5 MB line), and two rows."""
    path = folder / "wide.csv"
    d = 200_000
    row = ",".join(["0"] * d)
    path.write_text("candidates," + ",".join(f"f{j}" for j in range(d)) + f"\na|b,{row}\nb,{row}\n")
    return path


def rows_csv(
    name: str, ids: list[str], labels: list[str], encoding: str = "utf-8", newline: str = "\n"
) -> Callable[[Path], Path]:
    """A small CSV whose ids and labels are the given (possibly hostile) texts."""

    def make(folder: Path) -> Path:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator=newline)
        writer.writerow(["id", "f0", "f1", "candidates"])
        for i, item in enumerate(ids):
            writer.writerow([item, i, i % 3, "|".join(labels[(i + j) % len(labels)] for j in range(2))])
        path = folder / name
        if encoding == "utf-16":
            path.write_bytes(codecs.BOM_UTF16_LE + buffer.getvalue().encode("utf-16-le"))
        else:
            path.write_bytes(buffer.getvalue().encode(encoding))
        return path

    return make


PLAIN_IDS = [f"r{i}" for i in range(6)]
FORMULA_IDS = ['=HYPERLINK("http://x","y")', "+1+1", "-2+3", "@SUM(A1)", "=1/0", "\tx"]
MARKUP_IDS = ["**bold**", "<script>alert(1)</script>", "[a](http://x)", "# title", "`code`", "<img src=x onerror=y>"]
MARKUP_LABELS = ["<b>cat</b>", "**dog**", "# _bird_"]

CASES = [
    Case("npz zip bomb", npz_bomb, "the archive needs 68,157,", {"WINNOW_MAX_DECOMPRESSED_BYTES": "16M"}),
    Case("npz lying header", npz_lying_header, "array 'X' claims 80,000,000,000 bytes"),
    Case("sparse mat bomb", sparse_mat_bomb, "the sparse 200000x100000 matrix made dense needs 160,000,000,000 bytes"),
    # Refused from its dimensions, before its data are inflated.
    Case(
        "compressed mat bomb",
        mat_compressed_bomb,
        "variable 'data' of size 131072x64 needs 67,108,864 bytes",
        {"WINNOW_MAX_DECOMPRESSED_BYTES": "16M"},
    ),
    # The default limit (1 GiB): memory must stay under PEAK_BOUND while the file is refused.
    Case(
        "compressed mat bomb, default limit",
        mat_data_bomb_default_limit,
        "variable 'data' of size 2359296x64 needs 1,207,959,552 bytes",
    ),
    Case(
        "compressed mat bomb in an unread variable, default limit",
        mat_unread_bomb_default_limit,
        "inflates to more than 1,073,741,824 bytes",
    ),
    Case(
        "parquet of many rows",
        parquet_many_rows,
        "the table needs 144,000,000 bytes",  # 2M rows x (64 for the text column + 8 for f0)
        {"WINNOW_MAX_DECOMPRESSED_BYTES": "16M"},
    ),
    Case("giant line", giant_line, "is not valid delimited text"),
    Case("giant header", giant_header, None),
    Case(
        "latin-1 text",
        rows_csv("latin1.csv", ["café", "naïve", "r2", "r3", "r4", "r5"], ["a", "b"], "latin-1"),
        "is not UTF-8 text",
    ),
    Case(
        "utf-16 with BOM",
        rows_csv("utf16.csv", ["café", "naïve", "日本", "r3", "r4", "r5"], ["a", "b"], "utf-16"),
        None,
    ),
    Case("utf-8 with BOM and CRLF", rows_csv("bom.csv", PLAIN_IDS, ["a", "b"], "utf-8-sig", "\r\n"), None),
    Case("formula cells", rows_csv("formulas.csv", FORMULA_IDS, ["=cmd('calc')!A0", "+b", "@c"]), None),
    Case("markdown and html names", rows_csv("markup.csv", MARKUP_IDS, MARKUP_LABELS), None),
]


def counts(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as con:
        return {
            t: con.execute(f"select count(*) from {t}").fetchone()[0]
            for t in ("datasets", "instances", "labelling_sessions", "answer_events")
        }


@pytest.fixture(scope="module")
def seeded_db(tmp_path_factory) -> Path:
    """A store that already holds one dataset and session: a refused file must not change it."""
    folder = tmp_path_factory.mktemp("corpus-db")
    db = folder / "w.db"
    seed = rows_csv("seed.csv", PLAIN_IDS, ["a", "b"])(folder)
    code, _, err, _ = run_measured(
        ["import", str(seed), "--db", str(db), "--name", "seed", "--session", "s", "-k", "2"], {}
    )
    assert code == 0, err
    return db


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_file(case, seeded_db, tmp_path):
    path = case.make(tmp_path)
    assert path.stat().st_size < 8 * MiB or case.name.startswith("giant"), "the corpus stays small on disk"
    before = counts(seeded_db)
    code, out, err, peak = run_measured(
        ["import", str(path), "--db", str(seeded_db), "--name", case.name, "-k", "1"], case.env
    )
    assert "Traceback" not in err and "Traceback" not in out
    assert 0 < peak < PEAK_BOUND, f"peak memory {peak / MiB:.0f} MiB"
    if case.error is not None:
        assert code == 2, (code, out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and case.error in lines[0], err
        assert str(path.name) in lines[0]
        assert counts(seeded_db) == before
    else:
        assert code == 0, err
        after = counts(seeded_db)
        assert after["datasets"] == before["datasets"] + 1 and after["answer_events"] == before["answer_events"]


def test_names_come_back_exactly_as_written(seeded_db, tmp_path):
    """Markup and formulas are data: stored and exported as text; CSV formulas neutralised."""
    from app.store import close_stores, get_dataset_by_name, open_store

    path = rows_csv("names.csv", FORMULA_IDS[:3] + MARKUP_IDS[:3], MARKUP_LABELS)(tmp_path)
    db = tmp_path / "names.db"
    code, _, err, _ = run_measured(
        ["import", str(path), "--db", str(db), "--name", "names", "--session", "n", "-k", "2"], {}
    )
    assert code == 0, err
    try:
        with open_store(db)() as s:
            assert sorted(get_dataset_by_name(s, "names").label_names) == sorted(MARKUP_LABELS)
    finally:
        close_stores()
    out = tmp_path / "labelled.csv"
    code, _, err, _ = run_measured(["export", "n", "--what", "labelled", "-o", str(out), "--db", str(db)], {})
    assert code == 0, err
    exported = pd.read_csv(out, dtype=str, keep_default_na=False)["id"].tolist()
    assert exported[:3] == ["'" + FORMULA_IDS[0], "'+1+1", "'-2+3"]  # a spreadsheet runs none of them
    assert exported[3:] == MARKUP_IDS[:3]
