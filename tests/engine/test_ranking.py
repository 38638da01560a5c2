"""One Ranker contract: the three rankers answer the same questions the same way."""

from __future__ import annotations

import numpy as np
import pytest

from engine import InvalidInput, query_scores
from engine.decision_change import DecisionChangeRanker
from engine.neighbors import knn_graph
from engine.query import IncrementalRanker
from engine.ranking import BASELINE_CRITERIA, StaticRanker, ranking_order


def _problem(seed: int, n: int = 40, n_labels: int = 4, k: int = 5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    Y = rng.random((n, n_labels)) < 0.45
    Y[np.arange(n), rng.integers(0, n_labels, n)] = True
    idx, w = knn_graph(X, k=k)
    return idx, w, Y


RANKERS = {
    "apl": lambda idx, w, Y: IncrementalRanker(idx, w, Y, criterion="apl"),
    "decision_change": lambda idx, w, Y: DecisionChangeRanker(idx, w, Y, random_state=0),
    **{
        name: (lambda idx, w, Y, name=name: StaticRanker(idx, w, Y, name, random_state=0)) for name in BASELINE_CRITERIA
    },
}


@pytest.mark.parametrize("name", list(RANKERS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_ranker_keeps_the_contract_through_answers(name, seed):
    idx, w, Y = _problem(seed)
    ranker = RANKERS[name](idx, w, Y)
    rng = np.random.default_rng(seed + 10)
    current = Y.copy()
    for step in range(6):
        partial = np.flatnonzero(current.sum(axis=1) >= 2)
        # One item, then two at once: update takes one item or several.
        items = rng.choice(partial, size=1 + step % 2, replace=False)
        rows = np.zeros((items.size, Y.shape[1]), dtype=bool)
        rows[np.arange(items.size), [rng.choice(np.flatnonzero(current[i])) for i in items]] = True
        before = ranker.scores.copy()
        rescored = ranker.update(items, rows)
        current[items] = rows
        # Every score that moved belongs to an item the ranker says it re-scored.
        moved = np.flatnonzero(before != ranker.scores)
        assert set(moved.tolist()) <= set(np.asarray(rescored).tolist())
        # The rows a change touches are exactly the targets holding a changed item.
        expected_rows = np.flatnonzero(np.isin(idx, items).any(axis=1))
        np.testing.assert_array_equal(ranker.targets_of(items), expected_rows)
        for item in items:
            assert set(ranker.moved_targets(int(item)).tolist()) <= set(ranker.targets_of(int(item)).tolist())
    # Incremental scores equal a fresh ranker's on the same sets (a baseline's stay those of the start).
    fresh = RANKERS[name](idx, w, current if name not in BASELINE_CRITERIA else Y)
    np.testing.assert_array_equal(ranker.scores, fresh.scores)
    order = ranker.ranking()
    assert set(order.tolist()) == set(np.flatnonzero(current.sum(axis=1) >= 2).tolist())
    picks = ranker.select(3)
    if name == "decision_change":  # greedy batches: the first pick is the head of the ranking
        assert picks[0] == order[0] and len(set(picks.tolist())) == 3
    else:
        assert picks.tolist() == order[:3].tolist()
    sets = ranker.label_sets()
    assert sets is None or (sets[0].shape == sets[1].shape == (idx.shape[0], Y.shape[1]))


@pytest.mark.parametrize("criterion", BASELINE_CRITERIA)
def test_static_ranker_scores_are_the_baseline_query_scores(criterion):
    idx, w, Y = _problem(3)
    ranker = StaticRanker(idx, w, Y, criterion, random_state=7)
    np.testing.assert_array_equal(ranker.scores, query_scores(idx, w, Y, criterion=criterion, random_state=7))
    assert (ranker.scores[Y.sum(axis=1) < 2] == 0).all()
    assert ranker.moved_targets(0).size == 0 and ranker.label_sets() is None
    # Without a seed, ties go by row: the order of ranking_order itself.
    plain = StaticRanker(idx, w, Y, criterion if criterion != "random" else "most_partial")
    np.testing.assert_array_equal(plain.ranking(), ranking_order(plain.scores, Y.sum(axis=1) >= 2))


@pytest.mark.parametrize("name", list(RANKERS))
def test_every_ranker_refuses_a_bad_update_the_same_way(name):
    idx, w, Y = _problem(4)
    ranker = RANKERS[name](idx, w, Y)
    with pytest.raises(InvalidInput, match="candidates for instance 2 must be a non-empty bool row of length 4"):
        ranker.update(2, np.zeros(4, dtype=bool))
    with pytest.raises(InvalidInput, match=r"instance must be an item row in 0\.\.39; got 99"):
        ranker.update(99, np.ones(4, dtype=bool))
    with pytest.raises(InvalidInput, match="criterion must be one of participation, most_partial, random"):
        StaticRanker(idx, w, Y, "apl")
