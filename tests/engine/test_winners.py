import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import InvalidInput, ambiguous_targets, approx_possible_labels, necessary_labels, vote_bounds
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
