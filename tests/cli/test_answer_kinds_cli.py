"""``winnow answer --from`` with a kind column, and what ``winnow session status`` prints of
names it did not write itself (issue 29), through the installed entry point."""

from __future__ import annotations

import json
import sqlite3

import pytest


@pytest.fixture
def store(winnow, tmp_path):
    items = tmp_path / "items.csv"
    items.write_text("id,x,candidates\nr1,1,a|b\nr2,2,a|b\nr3,3,c\nr4,4,a\nr5,5,b|c\nr6,6,a|c\n")
    db = tmp_path / "w.db"
    winnow("import", items, "--db", db, "--session", "s", "-k", "2")
    return db


def test_a_file_of_kinds_is_recorded_as_single_answers_would_be(winnow, store, tmp_path):
    answers = tmp_path / "answers.csv"
    answers.write_text(
        "id,label,kind,annotator,rank\nr1,,skip,ada,1\nr2,,none_of_these,ada,2\nr4,c,other_label,bob,3\nr5,b,,bob,4\nr6,c,label,ada,5\n"
    )
    assert "Recorded 5 answers" in winnow("answer", "s", "--from", answers, "--db", store).stdout
    winnow("export", "s", "--what", "events", "-o", tmp_path / "events.csv", "--db", store)
    lines = (tmp_path / "events.csv").read_text().splitlines()[1:]
    assert [tuple(line.split(",")[2:7]) for line in lines] == [
        ("ada", "skip", "0", "r1", ""),
        ("ada", "none_of_these", "1", "r2", ""),
        ("bob", "other_label", "3", "r4", "c"),
        ("bob", "answer", "4", "r5", "b"),
        ("ada", "answer", "5", "r6", "c"),
    ]


def test_session_status_escapes_control_characters_and_writes_strict_json(winnow, store, tmp_path):
    # Names written behind winnow's back (an older winnow accepted them): shown, never executed.
    winnow("answer", "s", "r1", "a", "--annotator", "ada", "--db", store)
    with sqlite3.connect(store) as connection:
        connection.execute("INSERT INTO annotators (name) VALUES (?)", ("\x1b]0;pwned\x07mallory",))
        (who,) = connection.execute("SELECT id FROM annotators WHERE name LIKE '%mallory'").fetchone()
        connection.execute(
            "INSERT INTO answer_events (session_id, instance_id, annotator_id, kind, label, created_at) "
            "SELECT 1, id, ?, 'skip', NULL, CURRENT_TIMESTAMP FROM instances WHERE external_id = 'r2'",
            (who,),
        )
    text = winnow("session", "status", "s", "--db", store).stdout
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b]0;pwned\\x07mallory" in text

    def no_constants(name: str) -> None:
        raise AssertionError(f"session status --json wrote {name}")

    summary = json.loads(winnow("session", "status", "s", "--json", "--db", store).stdout, parse_constant=no_constants)
    assert {row["annotator"] for row in summary["annotators"]} == {"ada", "\x1b]0;pwned\x07mallory"}
