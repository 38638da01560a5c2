"""benchmarks/crowd.py end to end on a tiny configuration, without the peers' packages."""

import sys

import numpy as np
import pytest

from benchmarks import crowd

TINY_BUDGETS = (0, 20)


@pytest.fixture
def without_peers(monkeypatch):
    """crowd-kit and cleanlab cannot be imported, whether or not they are installed."""
    for module in ("crowdkit", "crowdkit.aggregation", "cleanlab", "cleanlab.multiannotator"):
        monkeypatch.setitem(sys.modules, module, None)


@pytest.fixture
def iris_crowd_set():
    X, y = crowd.DATASETS["iris"]()
    return crowd.make_crowd_set(X, y, crowd.CROWDS[1], seed=0)


def test_runs_end_to_end_and_skips_the_missing_peers(without_peers):
    messages = []
    rows, skipped = crowd.run(["iris"], crowd.CROWDS[:1], [0], TINY_BUDGETS, log=messages.append)
    assert set(skipped) == {"Dawid–Skene", "CROWDLAB"}
    for name, package in (("Dawid–Skene", "crowdkit.aggregation"), ("CROWDLAB", "cleanlab.multiannotator")):
        assert skipped[name].startswith(f"{name} skipped: {package} cannot be imported")
        assert "benchmarks/requirements.txt" in skipped[name]
        assert skipped[name] in messages
    assert {"winnow", "majority vote"} <= set(rows["method"])
    assert not {"Dawid–Skene", "CROWDLAB"} & set(rows["method"])
    for _, curve in rows.groupby("method"):
        assert sorted(curve["budget"]) == list(TINY_BUDGETS)
        assert (curve["n_answers"] <= curve["budget"]).all()
        assert curve["accuracy"].between(0, 1).all()
    # Always-right answers only add right labels to majority vote's output.
    majority = rows[rows["method"] == "majority vote"].set_index("budget")["accuracy"]
    assert majority[20] >= majority[0]

    text = "\n".join(crowd.report(rows, skipped, {"seeds": "1"}))
    assert f"**{skipped['CROWDLAB']}**" in text
    assert "winnow better than every peer at every budget: **" in text
    assert "### iris · crowd of 3, accuracy 0.6–0.9" in text
    assert "| winnow | " in text and "| Dawid–Skene |" not in text


def test_main_writes_the_report(without_peers, tmp_path):
    out, raw = tmp_path / "crowd.md", tmp_path / "rows.csv"
    argv = ["--seeds", "1", "--datasets", "iris", "--budgets", "0", "10", "--output", str(out), "--raw", str(raw)]
    assert crowd.main(argv) == 0
    text = out.read_text()
    assert text.startswith("# Crowd-made sets")
    assert text.count("| majority vote |") == len(crowd.CROWDS)
    assert "version of crowd-kit" in text and "load average" in text
    assert raw.read_text().startswith("dataset,crowd,seed,method,budget,n_answers,accuracy")
    assert "## Where winnow's errors come from (0 answers)" in text

    # The report rebuilt from the rows (and the run's facts beside them) says the same.
    notes = tmp_path / "notes.md"
    notes.write_text("A reading of the numbers.")
    again = tmp_path / "again.md"
    assert crowd.main(["--from-raw", str(raw), "--notes", str(notes), "--output", str(again)]) == 0
    rebuilt = again.read_text()
    assert rebuilt.startswith(text.split("## Run")[0].replace("## Results", "A reading of the numbers.\n\n## Results"))
    assert "- report: rebuilt from the rows of that run (rows.csv)" in rebuilt
    assert "load average" in rebuilt


def test_error_sources_add_up_to_the_errors(iris_crowd_set):
    sources = crowd.error_sources(["iris"], crowd.CROWDS[1:], [0])
    row = sources.iloc[0]
    assert row["errors"] == pytest.approx(row["truth_missing"] + row["majority_right"] + row["other"])
    labels = crowd.winnow_labels(iris_crowd_set, [0])[0][0]
    assert row["errors"] == pytest.approx((labels != iris_crowd_set.y).mean())
    assert row["truth_missing"] > 0  # the weak crowd's sets miss the truth somewhere


def test_majority_vote_is_seeded_and_asks_lowest_agreement_first(iris_crowd_set):
    first = crowd.majority_labels(iris_crowd_set, [0, 30])
    again = crowd.majority_labels(iris_crowd_set, [0, 30])
    np.testing.assert_array_equal(first[30][0], again[30][0])
    votes = iris_crowd_set.votes
    agreement = np.array([np.bincount(v).max() / v.size for v in votes])
    asked = np.flatnonzero(first[30][0] != first[0][0])
    # Every item whose label the answers changed was among the least agreed ones.
    assert (agreement[asked] <= np.sort(agreement)[29]).all()
    np.testing.assert_array_equal(first[30][0][asked], iris_crowd_set.y[asked])


def test_winnow_serves_the_first_queue_even_a_set_that_misses_the_truth(iris_crowd_set):
    cs = iris_crowd_set
    Y = cs.candidates
    missing = np.flatnonzero(~Y[np.arange(cs.y.size), cs.y])
    assert missing.size  # the weak crowd misses the truth somewhere
    item = int(missing[0])
    before = crowd.winnow_labels(cs, [0])[0][0]
    after, used = crowd.winnow_labels(cs, [1], first=[item])[1]
    assert before[item] != cs.y[item]  # DST-PLL labels inside the set
    assert after[item] == cs.y[item] and used == 1
