import json
import re
import sqlite3

import numpy as np
import pandas as pd
import pytest

from tests.cli.conftest import SAMPLE


def count_rows(db, table):
    with sqlite3.connect(db) as con:
        return con.execute(f"select count(*) from {table}").fetchone()[0]


def test_help_everywhere_has_an_example(winnow):
    for command in (
        ["import"],
        ["rank"],
        ["session", "new"],
        ["session", "status"],
        ["answer"],
        ["export"],
        ["demo"],
        ["ui"],
    ):
        result = winnow(*command, "--help")
        assert "Example" in result.stdout, command


def test_rank_straight_from_a_file_without_a_database(winnow, small_csv, tmp_path):
    out = tmp_path / "ranked.csv"
    winnow("rank", small_csv, "--criterion", "apl", "-k", "5", "-o", out, cwd=tmp_path)
    table = pd.read_csv(out)
    assert list(table.columns) == [
        "rank",
        "id",
        "score",
        "candidates",
        "n_candidates",
        "open_targets_touched",
        "criterion",
        "params",
    ]
    assert table["rank"].tolist() == list(range(1, len(table) + 1))
    assert table["score"].is_monotonic_decreasing
    assert (table["n_candidates"] >= 2).all() and (table["criterion"] == "apl").all()
    assert json.loads(table["params"][0])["k"] == 5
    assert not list(tmp_path.glob("*.db")), "file mode must not create a database"


def test_rank_defaults_to_decision_change(winnow, tmp_path):
    """Without --criterion, `winnow rank` scores the bundled sample by the default strategy,
    decision_change: the expected number of k-NN decisions an answer changes."""
    from app.io import read_dataset
    from engine.choices import DEFAULT_STRATEGY
    from engine.decision_change import decision_change_scores
    from engine.neighbors import knn_graph
    from engine.query import ranking_order

    out = tmp_path / "ranked.csv"
    winnow("rank", SAMPLE, "-o", out, cwd=tmp_path)
    table = pd.read_csv(out, dtype={"id": str})
    assert DEFAULT_STRATEGY == "decision_change" and (table["criterion"] == "decision_change").all()
    assert json.loads(table["params"][0])["k"] == 10
    loaded = read_dataset(SAMPLE)
    idx, w = knn_graph(loaded.X, k=10, weights="uniform")
    scores = decision_change_scores(idx, w, loaded.candidates)
    expected = ranking_order(scores, loaded.candidates.sum(axis=1) >= 2)
    # The digits hold neighbours at tied distances; exact search keeps the first of them by
    # row in every process (engine.neighbors), so the subprocess ranks exactly as this one.
    assert table["id"].tolist() == [loaded.ids[i] for i in expected]
    np.testing.assert_allclose(table["score"], scores[expected], rtol=1e-12)
    assert table["score"].iloc[0] > 0


def test_new_sessions_default_to_decision_change(winnow, small_csv, tmp_path):
    db = tmp_path / "w.db"
    winnow("import", small_csv, "--db", db, "--name", "digits", "--session", "imported", "-k", "5")
    winnow("session", "new", "made", "--dataset", "digits", "--db", db, "-k", "5")
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT name, criterion FROM labelling_sessions ORDER BY name").fetchall()
    assert rows == [("imported", "decision_change"), ("made", "decision_change")]
    ranked = tmp_path / "ranked.csv"
    winnow("rank", "--session", "made", "--db", db, "-o", ranked)
    assert (pd.read_csv(ranked)["criterion"] == "decision_change").all()


def test_rank_json_and_baselines(winnow, small_csv, tmp_path):
    for criterion in ("most_partial", "random", "participation", "pl"):
        out = tmp_path / f"{criterion}.json"
        winnow("rank", small_csv, "--criterion", criterion, "-k", "5", "-o", out, "--top", "7")
        payload = json.loads(out.read_text())
        assert payload["criterion"] == criterion and len(payload["rows"]) == 7


def test_import_session_answer_undo_status_export(winnow, small_csv, tmp_path):
    db = tmp_path / "w.db"
    winnow("import", small_csv, "--db", db, "--name", "digits", "-k", "5")
    winnow("session", "new", "s1", "--dataset", "digits", "--db", db, "-k", "5")
    assert "s1" in winnow("session", "list", "--db", db).stdout
    status = json.loads(winnow("session", "status", "s1", "--db", db, "--json", "--top", "3").stdout)
    first = status["next"][0]
    assert status["instances"] == 120 and len(status["next"]) == 3
    winnow("answer", "s1", first["id"], first["candidates"][0], "--annotator", "ann", "--db", db)
    second = json.loads(winnow("session", "status", "s1", "--db", db, "--json").stdout)
    assert second["events"] == 1 and second["open"] == status["open"] - 1
    assert first["id"] not in [row["id"] for row in second["next"]]
    winnow("answer", "s1", "--kind", "undo", "--annotator", "ann", "--db", db)
    third = json.loads(winnow("session", "status", "s1", "--db", db, "--json").stdout)
    assert third["open"] == status["open"] and third["events"] == 2
    assert count_rows(db, "answer_events") == 2

    labelled = tmp_path / "labelled.csv"
    winnow("export", "s1", "--what", "labelled", "-o", labelled, "--db", db)
    assert len(pd.read_csv(labelled)) == 120
    events = tmp_path / "events.json"
    winnow("export", "s1", "--what", "events", "-o", events, "--db", db)
    assert len(json.loads(events.read_text())) == 2
    ranked = tmp_path / "ranked.csv"
    winnow("rank", "--session", "s1", "--db", db, "-o", ranked)
    # The query list: the open items and the suspect items to ask (one slot in SUSPECT_EVERY;
    # a suspect item may be open too).
    table = pd.read_csv(ranked)
    assert third["open"] <= len(table) <= third["open"] + third["suspects"]
    assert (table["n_candidates"] == 1).sum() <= third["suspects"]


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "empty"),
        ("a,candidates\n1,\n2,x\n3,x\n", "empty candidate set"),
        ("a,candidates\nfoo,x\n2,x\n3,x\n", "'foo' is not a number"),
        ("a,candidates\nnan,x\n2,x\n3,x\n", "NaN"),
        ("a,id,candidates\n1,r1,x\n2,r1,x\n3,r2,x\n", "duplicate id"),
    ],
)
def test_bad_files_give_one_line_and_write_nothing(winnow, tmp_path, content, message):
    db = tmp_path / "w.db"
    winnow("init", "--db", db)  # create the (empty) store first
    bad = tmp_path / "bad.csv"
    bad.write_text(content)
    result = winnow("import", bad, "--db", db, "-k", "1", check=False)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message.lower() in lines[0].lower(), result.stderr
    assert "Traceback" not in result.stderr
    assert count_rows(db, "datasets") == 0 and count_rows(db, "instances") == 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["rank", "-o", "x.csv"], "either a FILE or --session"),
        (["rank", "missing.csv", "-o", "x.csv"], "missing.csv"),
        (["rank", str(SAMPLE), "-o", "x.csv", "--criterion", "entropy"], "--criterion must be one of"),
        (
            ["rank", str(SAMPLE), "-o", "x.csv", "-k", "5000"],
            "k=5000 must be smaller than the number of instances (800)",
        ),
        (["session", "status", "nope"], "nope"),
        (["answer", "nope", "x", "1", "--kind", "shout"], "--kind must be one of"),
    ],
)
def test_user_errors_exit_2_with_one_line(winnow, tmp_path, args, message):
    winnow("init", "--db", tmp_path / "w.db")
    result = (
        winnow(*args, "--db", tmp_path / "w.db", check=False)
        if args[0] != "rank" or "--session" in args
        else winnow(*args, cwd=tmp_path, check=False)
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert message in result.stderr and result.stderr.startswith("error: ")


@pytest.mark.parametrize(
    "db, message",
    [
        ("", "path_or_url is empty"),
        ("   ", "path_or_url is empty"),
        ("bogus://x", "no SQLAlchemy dialect"),
        ("{tmp}/no/such/folder/w.db", "does not exist"),
        ("{tmp}/not-a-db.txt", "is not a winnow store (not a SQLite database)"),
    ],
)
def test_unusable_stores_exit_2_with_one_line(winnow, tmp_path, db, message):
    (tmp_path / "not-a-db.txt").write_text("plain text, not SQLite\n" * 100)
    result = winnow("session", "list", "--db", db.format(tmp=tmp_path), check=False)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.stderr


def test_bad_session_options_name_the_valid_choices(winnow, small_csv, tmp_path):
    db = tmp_path / "w.db"
    winnow("import", small_csv, "--db", db, "--name", "d")
    result = winnow("session", "new", "s", "--dataset", "d", "--db", db, "--criterion", "best", check=False)
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == "error: criterion must be one of apl, pl, participation, most_partial, random, decision_change; got 'best'"
    )
    result = winnow(
        "import", small_csv, "--db", db, "--name", "d2", "--session", "s", "--weighting", "cosine", check=False
    )
    assert result.returncode == 2 and "--weighting must be one of uniform, distance; got 'cosine'" in result.stderr
    assert count_rows(db, "datasets") == 1  # the bad option was refused before the import


def test_answer_outside_the_candidates_is_refused_and_not_stored(winnow, small_csv, tmp_path):
    db = tmp_path / "w.db"
    winnow("import", small_csv, "--db", db, "--name", "d", "--session", "s", "-k", "5")
    status = json.loads(winnow("session", "status", "s", "--db", db, "--json").stdout)
    item = status["next"][0]
    outside = next(str(d) for d in range(10) if str(d) not in item["candidates"])
    result = winnow("answer", "s", item["id"], outside, "--db", db, check=False)
    assert result.returncode == 2 and "other_label" in result.stderr
    assert count_rows(db, "answer_events") == 0


def test_demo_runs_on_the_bundled_sample(winnow, tmp_path):
    result = winnow("demo", "--db", tmp_path / "demo.db", "--top", "3")
    assert "800 digits" in result.stdout
    assert re.search(r"Undecided: \d+ items have no label the model stands behind", result.stdout)
