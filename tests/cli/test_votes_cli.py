"""`winnow import --votes` and `winnow export --what votes`, through the installed entry point."""

from __future__ import annotations

import csv

import pytest

from app.store import close_stores, list_datasets, open_store

from .conftest import ROOT

ITEMS = ROOT / "sample_data" / "crowd_items.csv"
VOTES = ROOT / "sample_data" / "crowd_votes.csv"


def _rows(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _stored_datasets(db):
    try:
        with open_store(db, create=False)() as s:
            return [d.name for d in list_datasets(s)]
    finally:
        close_stores()


def test_import_with_votes_then_export_them(winnow, tmp_path):
    db = tmp_path / "w.db"
    done = winnow("import", ITEMS, "--votes", VOTES, "--min-votes", "2", "--db", db, "--session", "crowd", "-k", "3")
    assert "Imported 80 instances" in done.stdout
    winnow("export", "crowd", "--what", "votes", "-o", tmp_path / "votes.csv", "--db", db)
    exported = _rows(tmp_path / "votes.csv")
    given = _rows(VOTES)
    assert list(exported[0]) == ["id", "annotator", "label", "time"]
    as_set = lambda rows: sorted((r["id"], r["annotator"], r["label"], r["time"].replace("+00:00", "Z")) for r in rows)  # noqa: E731
    assert as_set(exported) == as_set(given)

    winnow("export", "crowd", "--what", "labelled", "-o", tmp_path / "labelled.csv", "--db", db)
    labelled = {r["id"]: r for r in _rows(tmp_path / "labelled.csv")}
    assert list(next(iter(labelled.values())))[-1] == "votes"
    for item in {r["id"] for r in given}:
        labels = [r["label"] for r in given if r["id"] == item]
        counts = {name: labels.count(name) for name in set(labels)}
        # The votes column, most voted first; the set keeps labels with 2+ votes (or the most voted).
        shown = dict(part.split(":") for part in labelled[item]["votes"].split("|"))
        assert {k: int(v) for k, v in shown.items()} == counts
        top = max(counts.values())
        expected = {n for n, c in counts.items() if c >= 2} or {n for n, c in counts.items() if c == top}
        assert set(labelled[item]["candidates"].split("|")) == expected
    assert labelled["song079"]["votes"] == "" and labelled["song079"]["candidates"] == "blues|jazz|pop|rock"


def _items_with_candidates(tmp_path, column):
    rows = _rows(ITEMS)
    path = tmp_path / "items.csv"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, [*rows[0], "candidates"])
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, "candidates": column})
    return path


def _votes_with(tmp_path, extra):
    path = tmp_path / "votes.csv"
    path.write_text(VOTES.read_text() + extra)
    return path


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("unknown_label", r"votes.csv, row 1 (spreadsheet row 2), column 'label': unknown label 'jazz'"),
        ("unknown_item", r"votes.csv, row 300 (spreadsheet row 301), column 'id': unknown item 'song999'"),
        ("min_share", "min_share must be a number in (0, 1], got 1.5"),
        ("no_votes", "--min-votes and --min-share read the votes: give --votes FILE too"),
        ("both", "--min-votes and --min-share each decide which voted labels are kept: give one, not both"),
    ],
)
def test_bad_votes_are_one_line_exit_2_and_nothing_is_written(winnow, tmp_path, case, message):
    db = tmp_path / "w.db"
    items, votes, extra = ITEMS, VOTES, []
    if case == "unknown_label":
        items = _items_with_candidates(tmp_path, "blues|rock|pop")
    elif case == "unknown_item":
        votes = _votes_with(tmp_path, "song999,crowd01,jazz,\n")
    elif case == "min_share":
        extra = ["--min-share", "1.5"]
    elif case == "both":  # issue 44: the pair was accepted, and kept only the labels meeting both
        extra = ["--min-votes", "2", "--min-share", "0.5"]
    if case == "no_votes":
        args = ["import", items, "--min-votes", "2", "--db", db]
    else:
        args = ["import", items, "--votes", votes, *extra, "--db", db, "--session", "s", "-k", "3"]
    result = winnow(*args, check=False)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    if db.exists():
        assert _stored_datasets(db) == []
