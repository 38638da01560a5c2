"""The labelled dataset through the installed entry point (issues 20, 28 and 42): label settings
on ``session new`` / ``import --session`` / ``session settings`` (the promise included),
``answer --from`` all or nothing, ``session status``'s counts and statement, and ``export --what
labelled`` in every format; reading a session writes nothing."""

from __future__ import annotations

import json
import re
import sqlite3

import pandas as pd
import pyarrow.parquet as pq
import pytest

from tests.cli.conftest import SAMPLE

NEW_COLUMNS = ["label", "label_source", "model_margin"]


def counts(db) -> dict[str, int]:
    with sqlite3.connect(db) as con:
        return {
            t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("labelling_sessions", "answer_events", "label_settings_changes", "audit_events")
        }


#: Tables that only keep work for later (a graph, a working state, columns in one piece): a
#: reader may fill them, and dropping them loses nothing but time.
CACHES = ("neighbour_graphs", "session_snapshot_parts", "item_columns", "feature_blocks")


def dump(db) -> list[str]:
    """Every row of the store but its caches, as SQL: equal dumps, nothing written."""
    with sqlite3.connect(db) as con:
        return [line for line in con.iterdump() if not any(f'"{table}"' in line for table in CACHES)]


def one_line_usage_error(result) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert "Traceback" not in result.stderr


@pytest.fixture
def imported(winnow, tmp_path):
    """The sample digits with a session 'week1' whose target is easy to back (20 % at 50 %
    confidence: a few audits) and half of the served items audits."""
    db = tmp_path / "w.db"
    winnow(
        "import",
        SAMPLE,
        "--db",
        db,
        "--session",
        "week1",
        "--true-label-column",
        "true_label",
        "--max-error",
        "0.2",
        "--confidence",
        "0.5",
        "--audit",
        "0.5",
    )
    return db


def true_answers(ranked_csv, path, n):
    """The first ``n`` rows of the ranked export, labelled with their true labels (an expert
    who labels the export offline)."""
    truth = pd.read_csv(SAMPLE, dtype=str).set_index("id")["true_label"]
    ranked = pd.read_csv(ranked_csv, dtype=str).head(n)
    ranked.assign(label=ranked["id"].map(truth))[["id", "label"]].to_csv(path, index=False)
    return path


def test_settings_are_set_at_import_shown_and_changed(winnow, imported):
    out = winnow("session", "settings", "week1", "--db", imported).stdout
    assert "max error 0.2 (20%), confidence 0.5 (50%), audit share 0.5 (50% of served items), promise confidence" in out
    out = winnow("session", "settings", "week1", "--db", imported, "--max-error", "0.05", "--confidence", "0.9").stdout
    assert "max error 0.05 (5%), confidence 0.9 (90%), audit share 0.5 (50% of served items), promise confidence" in out
    out = winnow("session", "settings", "week1", "--db", imported, "--promise", "average").stdout
    assert "promise average" in out
    assert counts(imported)["label_settings_changes"] == 3  # one row per change, none rewritten


@pytest.mark.parametrize("command", ["session-new", "import"])
def test_the_promise_is_kept_wherever_a_session_is_made(winnow, imported, tmp_path, command):
    if command == "session-new":
        winnow("session", "new", "other", "--dataset", "digits_partial", "--db", imported, "--promise", "average")
        db = imported
    else:
        db = tmp_path / "fresh.db"
        winnow("import", SAMPLE, "--db", db, "--session", "other", "--promise", "average")
    out = winnow("session", "settings", "other", "--db", db).stdout
    assert (
        "max error 0.05 (5%), confidence 0.9 (90%, not used on average), audit share 0.5 (50% of served items), "
        "promise average" in out
    )


def test_session_new_takes_the_settings(winnow, imported):
    winnow("session", "new", "other", "--dataset", "digits_partial", "--db", imported, "--audit", "0.1")
    out = winnow("session", "settings", "other", "--db", imported).stdout
    assert "max error 0.05 (5%), confidence 0.9 (90%), audit share 0.1 (10% of served items)" in out


@pytest.mark.parametrize(
    "args, match",
    [
        (
            ["session", "new", "other", "--dataset", "digits_partial", "--max-error", "0.7"],
            "max_error must be > 0 and < 0.5",
        ),
        (["session", "new", "other", "--dataset", "digits_partial", "--confidence", "1"], "confidence must be >= 0.5"),
        (["session", "new", "other", "--dataset", "digits_partial", "--audit", "0.9"], "audit_share must be >= 0"),
        (["session", "settings", "week1", "--audit", "-0.1"], "audit_share must be >= 0"),
        (["session", "settings", "week1", "--max-error", "x"], "--max-error"),
        (["import", str(SAMPLE), "--name", "again", "--max-error", "0.1"], "give --session NAME too"),
        (["import", str(SAMPLE), "--name", "again", "--session", "s2", "--max-error", "0.6"], "max_error must be"),
    ],
)
def test_bad_settings_are_one_line_and_write_nothing(winnow, imported, args, match):
    before = counts(imported)
    result = winnow(*args, "--db", imported, check=False)
    one_line_usage_error(result)
    assert match in result.stderr
    assert counts(imported) == before


def test_import_answer_from_export_labelled_has_the_columns(winnow, imported, tmp_path):
    untouched = dump(imported)
    status = winnow("session", "status", "week1", "--db", imported, "--json").stdout
    before_answers = json.loads(status)
    waiting = re.fullmatch(
        r"model labels: none yet — 50% of the served items are audits of the model's labels on (\d+) items, "
        r"for at most 800 more answers; undecided: 483",
        before_answers["statement"],
    )
    assert waiting, before_answers["statement"]
    assert 20 <= int(waiting[1]) <= 483 and before_answers["lot_ends_in_answers"] == 800
    assert before_answers["promise_left"] == 1.0 and before_answers["out_of_promise"] is False
    assert before_answers["audited_answers"] == 0 and before_answers["stated_error"] is None
    text = winnow("session", "status", "week1", "--db", imported).stdout
    assert before_answers["statement"] in text and "given labels: 317" in text
    before = winnow("export", "week1", "--what", "labelled", "-o", tmp_path / "before.csv", "--db", imported)
    assert before.returncode == 0
    table = pd.read_csv(tmp_path / "before.csv", dtype={"label": str})
    assert set(table["label_source"]) == {"given", "undecided"}  # no model label without audits

    winnow("export", "week1", "--what", "ranked", "-o", tmp_path / "ranked.csv", "--db", imported)
    assert dump(imported) == untouched  # status and exports read; they never write
    answers = true_answers(tmp_path / "ranked.csv", tmp_path / "answers.csv", 100)
    out = winnow("answer", "week1", "--from", answers, "--db", imported).stdout
    assert "Recorded 100 answers" in out
    assert counts(imported)["answer_events"] == 100

    status = winnow("session", "status", "week1", "--db", imported, "--json").stdout
    summary = json.loads(status)
    assert summary["labels"]["expert"] == 100 and summary["labels"]["model"] > 0, summary["statement"]
    assert summary["audited_answers"] >= 1
    assert 0 <= summary["stated_error"] <= 0.2
    checked = summary["stated_labels"] - summary["labels"]["model"]
    assert summary["statement"].startswith(
        f"model labels: {summary['labels']['model']} — these and the {checked} expert answers on the same "
        f"items are at most 20% wrong, with 50% confidence (bound now {summary['stated_error'] * 100:.1f}%, "
        f"from {summary['audited_answers']} audited answers, assumed right)"
    )

    winnow("export", "week1", "--what", "labelled", "-o", tmp_path / "labelled.csv", "--db", imported)
    table = pd.read_csv(tmp_path / "labelled.csv", dtype={"label": str})
    assert list(table.columns[3:6]) == NEW_COLUMNS
    assert {
        "id",
        "candidates",
        "n_candidates",
        "resolved",
        "none_of_these",
        "answered_by",
        "answered_at",
        "true_label",
    } <= set(table.columns)
    assert table["label_source"].value_counts().to_dict() == {k: v for k, v in summary["labels"].items() if v}
    model = table["label_source"] == "model"
    margin = table["model_margin"]
    assert (margin[model] > 0).all() and (margin[model] <= 1).all() and margin[~model].isna().all()
    assert table.loc[table["label_source"] != "undecided", "label"].notna().all()
    assert table.loc[model, "answered_by"].isna().all()  # model labels only where nobody answered

    winnow("export", "week1", "--what", "labelled", "-o", tmp_path / "labelled.json", "--db", imported)
    payload = json.loads((tmp_path / "labelled.json").read_text())
    assert payload["table"] == "labelled_dataset" and len(payload["rows"]) == 800
    meta = payload["metadata"]
    assert (meta["target_error"], meta["statement_confidence"]) == (0.2, 0.5)
    assert meta["stated_error_bound"] == summary["stated_error"]
    assert meta["audited_answers"] == summary["audited_answers"] and meta["counts"] == summary["labels"]
    assert meta["stated_labels"] == summary["stated_labels"] and "assumed right" in meta["promise_meaning"]
    assert meta["lots"] >= 1 and meta["statement"] == summary["statement"]
    assert "confidence" not in meta

    winnow("export", "week1", "--what", "labelled", "-o", tmp_path / "labelled", "--format", "jsonl", "--db", imported)
    lines = (tmp_path / "labelled.jsonl").read_text().splitlines()
    assert len(lines) == 800 and all(set(NEW_COLUMNS) <= set(json.loads(line)) for line in lines[:5])

    winnow("export", "week1", "--what", "labelled", "-o", tmp_path / "labelled.parquet", "--db", imported)
    assert list(pd.read_parquet(tmp_path / "labelled.parquet").columns[3:6]) == NEW_COLUMNS
    stored = json.loads(pq.read_schema(tmp_path / "labelled.parquet").metadata[b"winnow"])
    assert stored == meta

    winnow("export", "week1", "--what", "labelled", "-o", tmp_path / "labelled.tsv", "--db", imported)
    assert list(pd.read_csv(tmp_path / "labelled.tsv", sep="\t").columns[3:6]) == NEW_COLUMNS


def test_with_audits_off_the_status_says_so_and_the_export_is_the_ranking(winnow, imported, tmp_path):
    winnow("session", "settings", "week1", "--db", imported, "--audit", "0")
    summary = json.loads(winnow("session", "status", "week1", "--db", imported, "--json").stdout)
    assert summary["statement"] == (
        "model labels: none yet; audits are off (audit share 0%): no more model labels can be stated; undecided: 483"
    )
    assert summary["labels"]["model"] == 0
    winnow("export", "week1", "--what", "ranked", "-o", tmp_path / "ranked.csv", "--db", imported)
    ranked = pd.read_csv(tmp_path / "ranked.csv")
    assert ranked["rank"].tolist() == list(range(1, len(ranked) + 1))
    assert ranked["id"].tolist()[:5] == [q["id"] for q in summary["next"]]


@pytest.mark.parametrize(
    "name, text, match",
    [
        (
            "unknown.csv",
            "id,label\nd0184,{t184}\nnope,3\n",
            r"unknown\.csv, row 2 \(spreadsheet row 3\): no item with id 'nope'",
        ),
        ("label.csv", "id,label\nd0184,{t184}\nd0693,cat\n", r"label\.csv, row 2 \(spreadsheet row 3\): .*'cat'"),
        (
            "twice.tsv",
            "id\tlabel\nd0184\t{t184}\nd0184\t{t184}\n",
            r"twice\.tsv, row 2 \(spreadsheet row 3\), column 'id': "
            r"item 'd0184' is answered twice",
        ),
        (
            "blank.csv",
            "id,label\nd0184,{t184}\nd0693,\n",
            r"blank\.csv, row 2 .*column 'label': item 'd0693' has no label",
        ),
        ("nolabel.csv", "id,answer\nd0184,{t184}\n", r"nolabel\.csv: has no 'label' column"),
        (
            "bad.jsonl",
            '{{"id": "d0184", "label": "{t184}"}}\n[1, 2]\n',
            r"bad\.jsonl, row 2 \(1-based\): line 2 is not a JSON object",
        ),
        ("answers.xlsx", "id,label\n", r"cannot read answers from '\.xlsx' files"),
    ],
)
def test_bad_answer_files_are_refused_in_one_line_and_nothing_is_written(winnow, imported, tmp_path, name, text, match):
    truth = pd.read_csv(SAMPLE, dtype=str).set_index("id")["true_label"]
    path = tmp_path / name
    path.write_text(text.format(t184=truth["d0184"]))
    before = counts(imported)
    result = winnow("answer", "week1", "--from", path, "--db", imported, check=False)
    one_line_usage_error(result)
    assert pd.Series([result.stderr]).str.contains(match).all(), result.stderr
    assert counts(imported) == before  # the good first row was not written either


def test_answers_from_jsonl_with_annotators(winnow, imported, tmp_path):
    truth = pd.read_csv(SAMPLE, dtype=str).set_index("id")["true_label"]
    path = tmp_path / "answers.jsonl"
    path.write_text(
        "\n".join(
            json.dumps({"id": i, "label": truth[i], "annotator": who})
            for i, who in (("d0184", "alice"), ("d0693", "bob"))
        )
        + "\n"
    )
    winnow("answer", "week1", "--from", path, "--db", imported)
    winnow("export", "week1", "--what", "labelled", "-o", tmp_path / "l.csv", "--db", imported)
    table = pd.read_csv(tmp_path / "l.csv", dtype=str).set_index("id")
    assert table.loc[["d0184", "d0693"], "answered_by"].tolist() == ["alice", "bob"]
    assert table.loc[["d0184", "d0693"], "label_source"].tolist() == ["expert", "expert"]


def test_answer_from_refuses_an_item_or_a_kind_too(winnow, imported, tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("id,label\n")
    for extra in (["d0184"], ["--kind", "skip"]):
        result = winnow("answer", "week1", *extra, "--from", path, "--db", imported, check=False)
        one_line_usage_error(result)


def test_the_help_names_the_margin_every_label_source_and_the_audit_share_as_a_fraction(winnow):
    """Issue 46, item 8 (export) and item 3 (one audit share: the option is a fraction, and says
    which percent of the app it is)."""
    export = " ".join(winnow("export", "--help").stdout.replace("│", " ").split())
    assert (
        "model_margin (DST-PLL's margin when the label was frozen: it orders model labels, it is not a probability)"
        in (export)
    )
    assert "label_source (expert, given, crowd, model, undecided)" in export
    settings = " ".join(winnow("session", "settings", "--help").stdout.replace("│", " ").split())
    assert "a fraction from 0 to 0.5 (0.3 is the app's 30%" in settings
