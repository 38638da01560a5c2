"""benchmarks/suspect.py on its smallest protocol: the crowd sample, one seed, every method."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks import suspect
from engine import knn_graph


def test_the_crowd_samples_truth_is_its_scripts_and_every_union_holds_it():
    X, y, votes, n_annotators = suspect.crowd_sample()
    shipped = pd.read_csv(suspect.ROOT / "sample_data" / "crowd_items.csv")
    np.testing.assert_array_equal(X, shipped[["tempo", "energy", "acoustic", "distortion"]].to_numpy())
    Y = suspect.union_of_votes(votes, 4)
    voted = np.array([bool(v) for v in votes])
    assert voted.sum() == 76 and n_annotators == 10
    # As shipped, no union of votes misses the truth: the clean protocol.
    assert Y[np.arange(y.size), y].all()


def test_every_method_ranks_the_planted_crowd_sample_and_the_report_says_where_winnow_is_behind():
    case = next(c for c in suspect.cases(1, quick=True) if c.protocol.startswith("crowd sample, 8"))
    idx, w = knn_graph(case.X, k=suspect.K)
    rows = pd.DataFrame(suspect.judge(case, 0, idx, w))
    ranked = rows[rows["method"].isin(suspect.WINNOW + suspect.CLEANLAB)]
    assert set(ranked["method"]) == set(suspect.WINNOW + suspect.CLEANLAB)
    assert (ranked["misses"] == 8).all()
    assert ranked["recall at 2m"].between(0, 1).all() and ranked["precision at m"].between(0, 1).all()
    flags = rows[rows["method"].isin(["flags", "flags on the suspicion"])]
    assert len(flags) == 2 and (flags["flagged misses"] + flags["false flags"] >= 0).all()
    # The suspicion's stacking weights: the neighbours' and each linear model's, summing to 1.
    weights = rows[rows["method"] == "suspicion weights"].filter(like="weight: ")
    assert len(weights) == 1 and weights.sum(axis=1).item() == pytest.approx(1.0)
    assert "| crowd sample, 8 planted misses |" in suspect.weight_table(rows)
    # The verdict compares the suspicion with the best cleanlab method of each cell.
    best = ranked[ranked["method"].isin(suspect.CLEANLAB)]["recall at 2m"].max()
    mine = ranked[ranked["method"] == "winnow suspicion"]["recall at 2m"].item()
    cells, behind = suspect.verdict(rows)
    assert cells == ("1 of 1" if mine >= best else "0 of 1") and len(behind) == (mine < best)


def test_precision_and_recall_at_the_cutoffs():
    miss = np.array([True, False, True, False, False, True])
    # m = 3: the first 3 hold 2 misses; the first 6 all 3.
    assert suspect.at_cutoffs(np.array([0, 1, 2, 3, 4, 5]), miss) == (2 / 3, 1.0)
    # A ranking that returns fewer items (find_label_issues) counts only what it returns.
    assert suspect.at_cutoffs(np.array([5]), miss) == (1 / 3, 1 / 3)


def test_a_protocol_runs_seeds_until_each_cell_holds_enough_misses(monkeypatch):
    """The crowd sample has about 4 misses per seed once half its items are answered: it runs
    seeds, never those the suspicion was chosen on, until every budget's cell holds
    ``CELL_MISSES`` misses, and not one seed more."""
    planted = [(name, make) for name, make in suspect.protocols(quick=True) if name.startswith("crowd sample, 8")]
    monkeypatch.setattr(suspect, "protocols", lambda quick=False: iter(planted))
    results = suspect.run(5)
    flags = results[results["method"] == "flags"]
    seeds = sorted(set(flags["seed"]))
    assert not set(seeds) & suspect.CHOICE_SEEDS and 5 < len(seeds) < suspect.MOST_SEEDS
    misses = flags.groupby("budget")["misses"].sum()
    assert (misses >= suspect.CELL_MISSES).all()
    without_last = flags[flags["seed"] != seeds[-1]].groupby("budget")["misses"].sum()
    assert (without_last < suspect.CELL_MISSES).any()
