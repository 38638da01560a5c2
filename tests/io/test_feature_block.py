"""Text feature columns are converted in blocks (many columns per pandas call); the result must
be what converting each cell on its own gives, and a bad file must name the first bad cell in
reading order (top row first, then left column), as the column-by-column reader did."""

from __future__ import annotations

import csv
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.io import DataFileError, read_dataset
from app.io.readers import table as table_module

#: Cells that read as numbers, as non-finite numbers, and as text that is no number at all.
CELLS = st.sampled_from(["0", "1", "-2.5", "1e3", " 7 ", "inf", "nan", "", "x", "1,5", "0x1"])


def one_cell(cell: str) -> float:
    """The oracle: a single cell through the same parser, on its own."""
    return float(pd.to_numeric(pd.Series([cell], dtype=object), errors="coerce").iloc[0])


@settings(max_examples=60, deadline=None)
@given(
    grid=st.integers(1, 5).flatmap(
        lambda width: st.lists(st.lists(CELLS, min_size=width, max_size=width), min_size=2, max_size=6)
    ),
    block=st.integers(1, 7),
)
def test_blocks_read_every_cell_as_it_reads_alone(grid, block, tmp_path_factory):
    path = tmp_path_factory.mktemp("block") / "f.csv"
    width = len(grid[0])
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["candidates", *(f"f{j}" for j in range(width))])
        writer.writerows([["a|b", *row] for row in grid])
    expected = np.array([[one_cell(cell) for cell in row] for row in grid])
    bad = [(r, c) for r in range(len(grid)) for c in range(width) if not math.isfinite(expected[r, c])]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(table_module, "CONVERSION_BLOCK_CELLS", block)  # many blocks, uneven ends
        if not bad:
            np.testing.assert_array_equal(read_dataset(path).X, expected)
            return
        with pytest.raises(DataFileError) as raised:
            read_dataset(path)
    first_row, first_column = min(bad)
    assert raised.value.row == first_row + 1
    assert raised.value.column == f"f{first_column}"


def test_a_header_of_many_columns_is_read_at_once(tmp_path):
    path = tmp_path / "wide.csv"
    width = 5_000
    path.write_text(
        "candidates,"
        + ",".join(f"f{j}" for j in range(width))
        + "\n"
        + "a|b,"
        + ",".join(str(j) for j in range(width))
        + "\n"
        + "b,"
        + ",".join(str(-j) for j in range(width))
        + "\n"
    )
    X = read_dataset(path).X
    np.testing.assert_array_equal(X, [np.arange(width), -np.arange(width)])
