"""Expected decision change: hand-computed cases, a brute-force oracle, incremental = fresh."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from engine import InvalidInput
from engine.decision_change import DecisionChangeRanker, decision_change_scores
from engine.neighbors import knn_graph
from engine.query import query_scores
from tests.engine.strategies import vote_problems

EXACT_WEIGHTS = ("equal", "small_int", "dyadic", "with_zeros")  # sums exact: ties compare as in PL-kNN


def _brute_force(idx, w, Y, targets):
    """The definition, item by item, answer by answer, with votes summed afresh (no kernels)."""
    n, m = Y.shape
    own_row = {int(item): row for row, item in enumerate(targets)}

    def votes(row, sets):
        v = np.zeros(m)
        for j in range(idx.shape[1]):
            v = v + w[row, j] * sets[idx[row, j]]
        return v

    def decision(v):
        lead = (v == v.max()).astype(float)
        return lead / lead.sum()

    scores = np.zeros(n)
    for item in range(n):
        labels = np.flatnonzero(Y[item])
        if labels.size < 2:
            continue
        row = own_row.get(item)
        own_votes = votes(row, Y) if row is not None else np.zeros(m)
        prior = w[row].mean() if row is not None else 1.0
        prior = (prior if prior > 0 else 1.0) / labels.size
        mass = np.where(Y[item], own_votes + prior, 0.0)
        post = mass / mass.sum()
        total = 1.0 - post.max()
        for t in range(idx.shape[0]):
            for j in range(idx.shape[1]):
                if idx[t, j] != item or w[t, j] == 0:
                    continue
                before = decision(votes(t, Y))
                for lam in labels:
                    answered = Y.copy()
                    answered[item] = False
                    answered[item, lam] = True
                    total += post[lam] * 0.5 * np.abs(decision(votes(t, answered)) - before).sum()
        scores[item] = total
    return scores


@st.composite
def graph_problems(draw):
    idx, w, Y = draw(vote_problems(weight_kinds=EXACT_WEIGHTS))
    assume(idx.shape[0] <= Y.shape[0])  # every target is one item
    targets = np.array(draw(st.permutations(list(range(Y.shape[0]))))[: idx.shape[0]], dtype=np.intp)
    return idx, w, Y, targets


def test_hand_computed_score():
    # Items {0}, {1}, {0,1}; each item's two neighbours are the other two (k = 2, weight 1).
    # Item 2: posterior (1 + 1/2, 1 + 1/2) -> own term 1/2. Target 0 votes (1, 2): answering 0
    # ties it (change 1/2), answering 1 changes nothing -> 1/4; target 1 likewise -> 1/4.
    Y = np.array([[1, 0], [0, 1], [1, 1]], dtype=bool)
    idx = np.array([[1, 2], [0, 2], [0, 1]])
    w = np.ones((3, 2))
    np.testing.assert_allclose(decision_change_scores(idx, w, Y), [0.0, 0.0, 1.0])


@settings(max_examples=120, deadline=None)
@given(graph_problems())
def test_scores_match_the_definition(problem):
    idx, w, Y, targets = problem
    np.testing.assert_allclose(
        decision_change_scores(idx, w, Y, targets=targets), _brute_force(idx, w, Y, targets), atol=1e-12
    )


@settings(max_examples=60, deadline=None)
@given(graph_problems(), st.data())
def test_incremental_scores_equal_fresh_scores_bit_for_bit(problem, data):
    idx, w, Y, targets = problem
    ranker = DecisionChangeRanker(idx, w, Y, targets=targets)
    for item in data.draw(st.lists(st.integers(0, Y.shape[0] - 1), max_size=6)):
        row = np.zeros(Y.shape[1], dtype=bool)
        row[data.draw(st.sampled_from(np.flatnonzero(ranker.Y[item]).tolist()))] = True
        ranker.update(item, row)
        np.testing.assert_array_equal(ranker.scores, decision_change_scores(idx, w, ranker.Y, targets=targets))


@settings(max_examples=60, deadline=None)
@given(graph_problems(), st.data())
def test_updates_of_several_items_at_once_equal_fresh_terms_and_scores_bit_for_bit(problem, data):
    # A session opened from its snapshot applies every item another process answered in one
    # update: answers, narrowed sets and widened ones (an undo gives the set back).
    idx, w, Y, targets = problem
    ranker = DecisionChangeRanker(idx, w, Y, targets=targets)
    for _ in range(data.draw(st.integers(1, 3))):
        items = data.draw(st.lists(st.integers(0, Y.shape[0] - 1), min_size=1, max_size=5, unique=True))
        sets = np.array([data.draw(st.lists(st.booleans(), min_size=Y.shape[1], max_size=Y.shape[1])) for _ in items])
        assume(sets.any(axis=1).all())
        ranker.update(np.array(items), sets)
        fresh = DecisionChangeRanker(idx, w, ranker.Y, targets=targets)
        np.testing.assert_array_equal(ranker.posterior, fresh.posterior)
        np.testing.assert_array_equal(ranker.terms, fresh.terms)
        np.testing.assert_array_equal(ranker.scores, fresh.scores)


def _greedy(ranker, batch):
    """Greedy batch by the definition: pick the best, take its targets' terms off, repeat."""
    work = np.where(ranker.Y.sum(axis=1) >= 2, ranker.scores, -np.inf)
    claimed, picks = set(), []
    for _ in range(min(batch, int(np.isfinite(work).sum()))):
        best = max(np.flatnonzero(np.isfinite(work)), key=lambda m: (work[m], -ranker._keys[m]))
        picks.append(int(best))
        work[best] = -np.inf
        for t in range(ranker.idx.shape[0]):
            if best in ranker.idx[t] and t not in claimed:
                claimed.add(t)
                for j, m in enumerate(ranker.idx[t]):
                    work[m] -= ranker.terms[t, j]
    return picks


@settings(max_examples=60, deadline=None)
@given(graph_problems(), st.integers(1, 6), st.integers(0, 3))
def test_greedy_batch_matches_the_definition(problem, batch, seed):
    idx, w, Y, targets = problem
    ranker = DecisionChangeRanker(idx, w, Y, targets=targets, random_state=seed)
    picks = ranker.select(batch)
    assert picks.tolist() == _greedy(ranker, batch)
    if picks.size:
        assert picks[0] == ranker.ranking()[0]


def test_batch_spreads_over_neighbourhoods():
    # Two separate pairs of clusters; the first pick claims its targets, so the second pick
    # comes from the other cluster even though its own score is lower.
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(0, 0.1, (20, 2)), rng.normal(10, 0.1, (20, 2))])
    Y = np.zeros((40, 2), dtype=bool)
    Y[:, 0] = True
    Y[::2, 1] = True  # every second item is {0, 1}
    idx, w = knn_graph(X, k=5)
    ranker = DecisionChangeRanker(idx, w, Y, random_state=0)
    first, second = ranker.select(2)
    assert (first < 20) != (second < 20)


def test_ties_follow_the_seed():
    # Every item is {0, 1} on a symmetric ring: all scores tie, the order is the seed's.
    n = 12
    idx = np.array([[(i - 1) % n, (i + 1) % n] for i in range(n)])
    w = np.ones((n, 2))
    Y = np.ones((n, 2), dtype=bool)
    orders = {seed: DecisionChangeRanker(idx, w, Y, random_state=seed).ranking().tolist() for seed in (0, 1, 2)}
    assert orders[0] == DecisionChangeRanker(idx, w, Y, random_state=0).ranking().tolist()
    assert len({tuple(order) for order in orders.values()}) > 1
    assert all(sorted(order) == list(range(n)) for order in orders.values())


def test_items_apl_scores_zero_still_get_meaningful_scores():
    # Every neighbour is partial: no single answer changes any NL or APL, so apl ties all
    # items at 0; the expected decision change still ranks the uncertain ones first.
    rng = np.random.default_rng(3)
    X = rng.random((60, 2))
    Y = rng.random((60, 4)) < 0.6
    Y[Y.sum(axis=1) < 3] = True  # every set holds at least three labels
    idx, w = knn_graph(X, k=6)
    assert not query_scores(idx, w, Y, criterion="apl").any()
    scores = decision_change_scores(idx, w, Y)
    assert (scores > 0).all()
    assert np.unique(scores).size > 10


def test_precise_items_score_zero_and_cold_start_works():
    X = np.arange(10, dtype=float)[:, None]
    idx, w = knn_graph(X, k=3)
    cold = np.ones((10, 3), dtype=bool)  # no precise item at all
    assert (decision_change_scores(idx, w, cold) > 0).all()
    Y = cold.copy()
    Y[:5] = [True, False, False]
    scores = decision_change_scores(idx, w, Y)
    assert (scores[:5] == 0).all() and (scores[5:] > 0).all()


def test_bad_inputs():
    Y = np.array([[1, 0], [0, 1], [1, 1]], dtype=bool)
    idx = np.array([[1, 2], [0, 2]])
    w = np.ones((2, 2))
    with pytest.raises(InvalidInput, match="idx has 2 target rows but Y has 3 items: pass targets="):
        decision_change_scores(idx, w, Y)
    with pytest.raises(InvalidInput, match="targets must be distinct item rows in 0..2"):
        decision_change_scores(idx, w, Y, targets=np.array([0, 0]))
    with pytest.raises(InvalidInput, match="targets must be 2 integer item rows"):
        decision_change_scores(idx, w, Y, targets=np.array([0.0, 1.0]))
    ranker = DecisionChangeRanker(idx, w, Y, targets=np.array([0, 1]))
    with pytest.raises(InvalidInput, match="candidates for instance 2 must be a non-empty bool row of length 2"):
        ranker.update(2, np.zeros(2, dtype=bool))
    with pytest.raises(InvalidInput, match="instance must be an item row in 0..2; got 7"):
        ranker.update(7, np.array([True, False]))
