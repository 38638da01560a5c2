"""The one error :mod:`app.io` raises for a bad data file.

Row convention
--------------
``DataFileError.row`` is the **1-based data row**: the first instance in the file is row 1,
whatever the format. For files with a header line (CSV, TSV, TXT) the message also gives the
*spreadsheet row*, i.e. the row number a spreadsheet shows with the header as row 1, so
``row 5 (spreadsheet row 6)``. Records are counted, not physical lines: a quoted cell that spans
two lines still belongs to one row, exactly as in a spreadsheet.
"""

from __future__ import annotations

import os

from engine.exceptions import InvalidInput

__all__ = ["DataFileError"]


class DataFileError(InvalidInput):
    """A data file cannot be imported; the message is one line naming file, row, column and problem.

    Parameters
    ----------
    path : str or os.PathLike
        The file being read or written.
    problem : str
        What is wrong, phrased for the person who made the file.
    row : int, optional
        1-based data row (first instance = 1), see the module docstring.
    column : str, optional
        Column name (text and Parquet files) or array / key name (``.npz``, ``.mat``).
    has_header : bool, default True
        Whether the file has a header row; when it has, the spreadsheet row (``row + 1``) is
        shown next to ``row``.

    Attributes
    ----------
    path, problem, row, column : as above.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        problem: str,
        *,
        row: int | None = None,
        column: str | None = None,
        has_header: bool = True,
    ) -> None:
        self.path = os.fspath(path)
        self.problem = problem
        self.row = row
        self.column = column
        where = []
        if row is not None:
            where.append(f"row {row} (spreadsheet row {row + 1})" if has_header else f"row {row} (1-based)")
        if column is not None:
            where.append(f"column {column!r}")
        location = f", {', '.join(where)}" if where else ""
        # Keep the message on one line whatever the offending value contains.
        text = f"{self.path}{location}: {problem}".replace("\r", "\\r").replace("\n", "\\n")
        super().__init__(text)
