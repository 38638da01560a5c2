"""Candidate sets as they arise in practice: a small crowd, and weak labelling rules."""

import numpy as np
import pytest

from engine.exceptions import InvalidInput
from engine.noise import CANDIDATE_GENERATORS, crowd_candidates, crowd_votes, weak_rule_candidates

RNG = np.random.default_rng(0)
Y_TRUE = RNG.integers(0, 6, size=3000)


def test_crowd_confusions_are_stochastic_and_concentrated():
    Y, confusions = crowd_candidates(Y_TRUE, 6, n_annotators=4, n_confusions=2, seed=1, return_confusions=True)
    assert confusions.shape == (4, 6, 6)
    np.testing.assert_allclose(confusions.sum(axis=2), 1.0)
    diagonal = np.einsum("akk->ak", confusions)
    assert ((diagonal >= 0.6) & (diagonal <= 0.9)).all()
    # Every label has the same two confusable labels for the whole crowd.
    support = confusions > 0
    np.testing.assert_array_equal(support[0], support[3])
    assert (support[0].sum(axis=1) == 3).all()


def test_crowd_set_is_the_union_of_votes():
    Y = crowd_candidates(Y_TRUE, 6, n_annotators=3, seed=2)
    sizes = Y.sum(axis=1)
    assert sizes.min() >= 1 and sizes.max() <= 3
    # The truth is missing only when all three erred: rare, not never.
    missing = 1 - Y[np.arange(Y_TRUE.size), Y_TRUE].mean()
    assert 0 < missing < 0.1
    # Perfect annotators: precise, true sets.
    perfect = crowd_candidates(Y_TRUE, 6, n_annotators=5, accuracy=(1.0, 1.0), seed=3)
    np.testing.assert_array_equal(perfect.argmax(axis=1), Y_TRUE)
    assert (perfect.sum(axis=1) == 1).all()


def test_crowd_is_seeded_and_grows_with_the_crowd():
    np.testing.assert_array_equal(crowd_candidates(Y_TRUE, 6, seed=5), crowd_candidates(Y_TRUE, 6, seed=5))
    small = crowd_candidates(Y_TRUE, 6, n_annotators=3, seed=5).sum(axis=1).mean()
    large = crowd_candidates(Y_TRUE, 6, n_annotators=5, seed=5).sum(axis=1).mean()
    assert large > small


def test_weak_rules_fire_on_their_coverage():
    # Two labels split by feature 0; feature 1 is noise. A rule fires on half its class.
    rng = np.random.default_rng(1)
    y = np.repeat([0, 1], 500)
    X = np.column_stack([y * 4.0 + rng.normal(size=1000), rng.normal(size=1000)])
    Y = weak_rule_candidates(X, y, 2, rules_per_label=1, coverage=0.5, n_features_considered=1, seed=0)
    own = Y[np.arange(1000), y]
    # Its own rule fires on about half of each class; where no rule fires the set is both labels.
    for c in (0, 1):
        fired_own = (Y[y == c, c] & (Y[y == c].sum(axis=1) == 1)).mean()
        assert 0.4 < fired_own < 0.6
    assert own.mean() > 0.95  # the two classes barely overlap on feature 0


def test_weak_rules_abstain_to_all_labels_and_are_seeded():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(400, 5))
    y = rng.integers(0, 4, size=400)
    Y = weak_rule_candidates(X, y, 4, seed=9)
    assert Y.any(axis=1).all()
    np.testing.assert_array_equal(Y, weak_rule_candidates(X, y, 4, seed=9))
    assert not np.array_equal(Y, weak_rule_candidates(X, y, 4, seed=10))
    assert CANDIDATE_GENERATORS["weak_rules"] is weak_rule_candidates
    assert CANDIDATE_GENERATORS["crowd"] is crowd_candidates


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: crowd_candidates([0, 1, 2], 3, n_annotators=0), "n_annotators"),
        (lambda: crowd_candidates([0, 1, 2], 3, n_confusions=3), "n_confusions"),
        (
            lambda: crowd_candidates([0, 1, 2], 3, accuracy=(0.9, 0.5)),
            r"accuracy must satisfy 0 <= low <= high <= 1; got \(0.9, 0.5\)",
        ),
        (lambda: crowd_candidates([0, 1, 2], 3, accuracy=0.5), "accuracy must be a pair"),
        (lambda: crowd_candidates([0, 0], 1), "n_labels >= 2"),
        (lambda: weak_rule_candidates(np.zeros((3, 2)), [0, 1], 2), "X has 3 rows but y has 2"),
        (lambda: weak_rule_candidates(np.zeros((2, 2)), [0, 1], 2, coverage=0.0), "coverage"),
        (lambda: weak_rule_candidates(np.zeros((2, 2)), [0, 1], 2, rules_per_label=0), "rules_per_label"),
    ],
)
def test_bad_parameters(call, match):
    with pytest.raises(InvalidInput, match=match):
        call()


def test_crowd_votes_are_the_votes_behind_the_sets():
    votes, confusions = crowd_votes(Y_TRUE, 6, n_annotators=4, seed=7, return_confusions=True)
    Y, same = crowd_candidates(Y_TRUE, 6, n_annotators=4, seed=7, return_confusions=True)
    assert votes.shape == (Y_TRUE.size, 4) and votes.dtype.kind == "i"
    np.testing.assert_array_equal(confusions, same)
    # The set of an item is exactly the labels somebody voted.
    union = np.zeros_like(Y)
    union[np.arange(Y_TRUE.size)[:, None], votes] = True
    np.testing.assert_array_equal(union, Y)
    # Each annotator errs at about 1 - its accuracy, and only towards the confusable labels.
    skill = np.einsum("akk->ak", confusions)[:, 0]
    np.testing.assert_allclose((votes == Y_TRUE[:, None]).mean(axis=0), skill, atol=0.03)
    assert (confusions[np.arange(4)[:, None], Y_TRUE, votes.T] > 0).all()


def test_crowd_votes_refuse_what_crowd_candidates_refuse():
    with pytest.raises(InvalidInput, match="n_annotators"):
        crowd_votes([0, 1, 2], 3, n_annotators=21)
