import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import (
    InvalidInput,
    ambiguous_targets,
    approx_possible_labels,
    label_sets,
    necessary_labels,
    open_targets,
    vote_bounds,
)
from tests.engine import oracle
from tests.engine.strategies import vote_problems


def test_hand_computed_bounds_and_label_sets():
    # Labels a=0, b=1, c=2. Neighbours: {a}, {a}, {b}, {b,c}, {a,b}; equal weights.
    Y = np.array([[1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 1, 1], [1, 1, 0]], dtype=bool)
    idx = np.array([[0, 1, 2, 3, 4]])
    w = np.ones((1, 5))
    smin, smax = vote_bounds(idx, w, Y)
    np.testing.assert_array_equal(smin, [[2, 1, 0]])
    np.testing.assert_array_equal(smax, [[3, 3, 1]])
    # a: Smin 2 < Smax(b) 3 → not necessary; b needs Smin 1 ≥ 3 → no.
    np.testing.assert_array_equal(necessary_labels(idx, w, Y), [[False, False, False]])
    # APL: Smax ≥ max of the others' Smin: a 3 ≥ 1, b 3 ≥ 2, c 1 < 2.
    np.testing.assert_array_equal(approx_possible_labels(idx, w, Y), [[True, True, False]])


def test_necessary_label_with_a_tie_counts_as_a_win():
    Y = np.array([[1, 0], [0, 1]], dtype=bool)
    idx, w = np.array([[0, 1]]), np.ones((1, 2))
    np.testing.assert_array_equal(necessary_labels(idx, w, Y), [[True, True]])


@settings(max_examples=300, deadline=None)
@given(vote_problems())
def test_nl_and_apl_match_enumeration(problem):
    idx, w, Y = problem
    nl, _, apl = oracle.all_label_sets(idx, w, Y)
    np.testing.assert_array_equal(necessary_labels(idx, w, Y), nl)
    np.testing.assert_array_equal(approx_possible_labels(idx, w, Y), apl)


@settings(max_examples=200, deadline=None)
@given(vote_problems(weight_kinds=("equal", "small_int", "dyadic", "with_zeros")), st.randoms(use_true_random=False))
def test_permuting_neighbours_changes_nothing(problem, random):
    idx, w, Y = problem
    perm = list(range(idx.shape[1]))
    random.shuffle(perm)
    for fn in (necessary_labels, approx_possible_labels):
        np.testing.assert_array_equal(fn(idx, w, Y), fn(idx[:, perm], w[:, perm], Y))


def test_ambiguous_targets():
    nl = np.array([[True, False], [False, False]])
    pl = np.array([[True, False], [True, True]])
    np.testing.assert_array_equal(ambiguous_targets(nl, pl), [False, True])


@settings(max_examples=300, deadline=None)
@given(vote_problems(), st.integers(0, 40))
def test_label_sets_match_enumeration_and_the_float_bounds(problem, extra_rows):
    idx, w, Y = problem
    # Extra unused rows make the graph smaller than Y, which takes the renumbered path.
    Y_big = np.vstack([Y, np.ones((extra_rows, Y.shape[1]), dtype=bool)])
    nl_oracle, pl_oracle, apl_oracle = oracle.all_label_sets(idx, w, Y)
    nl, apl = label_sets(idx, w, Y_big)
    np.testing.assert_array_equal(nl, nl_oracle)
    np.testing.assert_array_equal(apl, apl_oracle)
    # The same sets by the definitions on the float bounds, label by label.
    smin, smax = vote_bounds(idx, w, Y)
    for t in range(idx.shape[0]):
        for m in range(Y.shape[1]):
            others = [o for o in range(Y.shape[1]) if o != m]
            assert nl[t, m] == all(smin[t, m] >= smax[t, o] for o in others)
            assert apl[t, m] == all(smax[t, m] >= smin[t, o] for o in others)
    np.testing.assert_array_equal(open_targets(nl, apl), (nl_oracle != apl_oracle).any(axis=1))
    # Open ⊇ ambiguous, as NL ⊆ PL ⊆ APL.
    assert not (ambiguous_targets(nl_oracle, pl_oracle) & ~open_targets(nl, apl)).any()


def test_label_sets_of_one_target_in_a_large_dataset():
    rng = np.random.default_rng(0)
    Y = rng.random((5000, 4)) < 0.4
    Y[np.arange(5000), rng.integers(0, 4, 5000)] = True
    idx = rng.choice(5000, size=(3, 7), replace=False)
    w = rng.random((3, 7))
    nl, apl = label_sets(idx, w, Y)
    np.testing.assert_array_equal(nl, necessary_labels(idx, w, Y))
    np.testing.assert_array_equal(apl, approx_possible_labels(idx, w, Y))


@pytest.mark.parametrize("fn", [open_targets, ambiguous_targets])
def test_target_flags_need_two_arrays_of_one_shape(fn):
    with pytest.raises(
        InvalidInput,
        match=r"must be bool arrays of the same shape \(n_targets, n_labels\); got shapes \(2, 2\) and \(2, 3\)",
    ):
        fn(np.zeros((2, 2), bool), np.zeros((2, 3), bool))


@pytest.mark.parametrize(
    "idx, w, Y, message",
    [
        ([[0, 1]], [[1.0, 1.0]], [[True], [False]], "Y row 1 is an empty candidate set"),
        ([[0, 2]], [[1.0, 1.0]], [[True], [True]], "idx row 0 refers to a training row outside"),
        ([[0, 1]], [[1.0, -1.0]], [[True], [True]], "w row 0 has a negative"),
        ([[0, 1]], [[1.0, np.nan]], [[True], [True]], "w row 0 has a negative, NaN"),
        ([[0, 1]], [[1.0]], [[True], [True]], "w has shape"),
        ([0, 1], [1.0, 1.0], [[True], [True]], "idx must be 2-D"),
        ([[0, 1]], [[1.0, 1.0]], [True, True], "Y must be a 2-D"),
        (np.zeros((1, 0), int), np.zeros((1, 0)), [[True]], "idx has no neighbour columns"),
        ([[0, 1]], [[1.0, 1.0]], [[2], [1]], "Y must be boolean"),
    ],
)
def test_bad_input_names_argument_and_row(idx, w, Y, message):
    with pytest.raises(InvalidInput, match=message):
        vote_bounds(np.asarray(idx), np.asarray(w), np.asarray(Y))
