"""Accept scores: agreement with the learners that compute them, worked orderings, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import InvalidInput
from engine.accept_scores import dst_margin, margin_then_posterior, posterior_scores
from engine.decision_change import DecisionChangeRanker
from engine.dst import DstPllClassifier
from engine.neighbors import knn_graph


def random_problem(seed: int, n: int = 60, m: int = 4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    Y = rng.random((n, m)) < 0.4
    Y[np.arange(n), rng.integers(0, m, n)] = True
    return X, Y


@pytest.mark.parametrize("seed", range(3))
def test_dst_margin_is_the_classifiers_margin(seed):
    X, Y = random_problem(seed)
    clf = DstPllClassifier(n_neighbors=5, random_state=0).fit(X, Y)
    labels, margin = dst_margin(clf.disambiguate_belief_, clf.disambiguate_plausibility_)
    np.testing.assert_array_equal(margin, clf.disambiguate_margin_)
    sure = ~clf.disambiguate_guess_
    np.testing.assert_array_equal(labels[sure], clf.disambiguate_[sure])
    np.testing.assert_array_equal((margin > 0)[sure], clf.disambiguate_accepted_[sure])  # the reject option
    bel, pl = clf.belief_plausibility(X[:10] + 0.01)
    np.testing.assert_array_equal(dst_margin(bel, pl)[1], clf.decision_margin(X[:10] + 0.01))


def test_posterior_scores_on_the_answer_posterior_are_its_arg_max():
    X, Y = random_problem(7)
    idx, w = knn_graph(X, k=5)
    post = DecisionChangeRanker(idx, w, Y).posterior
    labels, scores = posterior_scores(post, Y)
    np.testing.assert_array_equal(labels, post.argmax(axis=1))
    np.testing.assert_allclose(scores, post.max(axis=1))
    assert Y[np.arange(Y.shape[0]), labels].all()


def test_posterior_is_restricted_to_the_candidates_and_uniform_without_votes():
    labels, scores = posterior_scores(
        [[3.0, 1.0, 4.0], [0.0, 0.0, 5.0], [2.0, 2.0, 0.0]],
        [[True, True, False], [True, True, False], [True, True, True]],
    )
    assert labels.tolist() == [0, 0, 0]  # 3:1; no vote on {0, 1} -> uniform, lowest index; 2:2 tie -> lowest index
    assert scores.tolist() == [0.75, 0.5, 0.5]
    labels, scores = posterior_scores([[3.0, 1.0, 4.0]])
    assert (labels.tolist(), scores.tolist()) == ([2], [0.5])


def test_worked_example_agreeing_neighbours_rank_above_split_ones():
    """Item 0 ({a, b}) has four neighbours {a}; item 1 ({a, b}) two {a} and two {b};
    item 2 ({a, b}) three {a} and one {b}. Every score orders 0 > 2 > 1."""
    Y = np.array([[1, 1], [1, 1], [1, 1], [1, 0], [1, 0], [1, 0], [1, 0], [0, 1], [0, 1]], dtype=bool)
    idx = np.array(
        [
            [3, 4, 5, 6],
            [3, 4, 7, 8],
            [3, 4, 5, 7],
            [4, 5, 6, 0],
            [3, 5, 6, 0],
            [3, 4, 6, 0],
            [3, 4, 5, 0],
            [8, 1, 2, 3],
            [7, 1, 2, 3],
        ]
    )
    w = np.ones(idx.shape)
    from engine.dst import transductive_decisions

    _, _, margin = transductive_decisions(Y, idx, [0, 1, 2])
    votes = np.stack([Y[idx[t]].sum(axis=0) for t in range(3)]).astype(float)
    _, knn = posterior_scores(votes, Y[:3])
    _, answer = posterior_scores(DecisionChangeRanker(idx, w, Y).posterior[:3], Y[:3])
    # DST, four neighbours {a}: bel(a) = 1 - 2^-4, pl(b) = 2^-4, margin 7/8.
    for score in (margin, knn, answer, margin_then_posterior(margin, knn)):
        assert score[0] > score[2] > score[1], score
    assert margin.tolist()[0] == pytest.approx(1 - 2 * 2**-4)
    assert knn.tolist() == [1.0, 0.5, 0.75]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([-1.0, -0.25, 0.0, 2**-10, 0.5, 0.75, 1.0]), st.integers(0, 64).map(lambda i: i / 64)
        ),
        min_size=1,
        max_size=40,
    )
)
def test_margin_then_posterior_keeps_the_margin_order_and_breaks_ties_by_posterior(pairs):
    margin = np.array([m for m, _ in pairs])
    post = np.array([p for _, p in pairs])
    score = margin_then_posterior(margin, post)
    for i in range(margin.size):
        for j in range(margin.size):
            if margin[i] > margin[j]:
                assert score[i] > score[j]
            elif margin[i] == margin[j] and post[i] > post[j]:
                assert score[i] > score[j]


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: dst_margin(np.ones(3), np.ones(3)), r"belief must be a 2-D"),
        (lambda: dst_margin(np.ones((2, 3)), np.ones((2, 2))), r"plausibility has shape \(2, 2\) but \(2, 3\)"),
        (lambda: dst_margin([[0.5, np.nan]], [[1.0, 1.0]]), r"belief row 0 has a negative, NaN"),
        (lambda: dst_margin([[True, False]], [[1.0, 1.0]]), r"belief must hold numbers"),
        (lambda: posterior_scores([[1.0, -1.0]]), r"posterior row 0 has a negative"),
        (lambda: posterior_scores([[1.0, 1.0]], [[False, False]]), r"candidates row 0 is an empty candidate set"),
        (lambda: posterior_scores([[1.0, 1.0]], [[True, True], [True, False]]), r"candidates has 2 rows but 1"),
        (lambda: margin_then_posterior([0.1, 0.2], [0.5]), r"margin and posterior must be 1-D arrays of one shape"),
        (lambda: margin_then_posterior([0.1, np.inf], [0.5, 0.5]), r"margin row 1 is inf"),
        (lambda: margin_then_posterior([0.1, 0.2], [0.5, 1.5]), r"posterior row 1 is 1.5"),
    ],
)
def test_bad_input_is_refused_with_a_message(call, match):
    with pytest.raises(InvalidInput, match=match):
        call()
