"""The public names other packages rely on: one ranking order, one choice check, single-sourced names."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine
from engine import InvalidInput, check_choice, choices, open_neighbourhoods, ranking_order


@st.composite
def ranking_problems(draw):
    n = draw(st.integers(0, 30))
    # Few distinct scores so that ties are common.
    scores = np.array(draw(st.lists(st.sampled_from([0.0, 1.0, 2.5, -1.0, 7.0]), min_size=n, max_size=n)))
    askable = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    deferred = None
    if draw(st.booleans()):
        deferred = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    tiebreak = None
    if draw(st.booleans()):
        tiebreak = np.array(draw(st.lists(st.sampled_from([0.0, 0.25, 0.5]), min_size=n, max_size=n)))
    top = draw(st.none() | st.integers(0, n + 2))
    return scores, askable, deferred, tiebreak, top


def brute_force_order(scores, askable, deferred, tiebreak, top):
    rows = [r for r in range(len(scores)) if askable[r]]
    key = lambda r: (  # noqa: E731 - the oracle reads best as one expression
        bool(deferred[r]) if deferred is not None else False,
        -scores[r],
        tiebreak[r] if tiebreak is not None else 0.0,
        r,
    )
    ordered = sorted(rows, key=key)
    return ordered if top is None else ordered[:top]


@settings(max_examples=400, deadline=None)
@given(ranking_problems())
def test_ranking_order_matches_sorted(problem):
    scores, askable, deferred, tiebreak, top = problem
    got = ranking_order(scores, askable, deferred=deferred, tiebreak=tiebreak, top=top)
    assert got.tolist() == brute_force_order(scores, askable, deferred, tiebreak, top)


@settings(max_examples=200, deadline=None)
@given(ranking_problems())
def test_ranking_order_top_is_a_prefix_of_the_full_order(problem):
    scores, askable, deferred, tiebreak, _ = problem
    full = ranking_order(scores, askable, deferred=deferred, tiebreak=tiebreak)
    for top in range(len(full) + 2):
        got = ranking_order(scores, askable, deferred=deferred, tiebreak=tiebreak, top=top)
        np.testing.assert_array_equal(got, full[:top])


def test_ranking_order_puts_deferred_rows_last_whatever_their_score():
    scores = np.array([9.0, 1.0, 5.0])
    order = ranking_order(scores, np.ones(3, bool), deferred=np.array([True, False, False]))
    assert order.tolist() == [2, 1, 0]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(scores=np.ones((2, 2)), askable=np.ones(2, bool)), r"scores must be 1-D"),
        (dict(scores=np.ones(3), askable=np.ones(2, bool)), r"askable must be a bool array of shape \(3,\)"),
        (dict(scores=np.ones(2), askable=np.array([1, 0])), r"askable must be a bool array"),
        (
            dict(scores=np.ones(2), askable=np.ones(2, bool), deferred=np.ones(3, bool)),
            r"deferred must be a bool array",
        ),
        (dict(scores=np.ones(2), askable=np.ones(2, bool), tiebreak=np.ones(3)), r"tiebreak must have shape \(2,\)"),
        (dict(scores=np.array([1.0, np.nan]), askable=np.ones(2, bool)), r"scores row 1 is NaN"),
        (dict(scores=np.ones(2), askable=np.ones(2, bool), top=-1), r"top must be >= 0"),
    ],
)
def test_ranking_order_rejects_bad_input(kwargs, match):
    with pytest.raises(InvalidInput, match=match):
        ranking_order(**kwargs)


def test_ranking_order_ignores_nan_scores_of_rows_it_does_not_rank():
    order = ranking_order(np.array([np.nan, 2.0]), np.array([False, True]))
    assert order.tolist() == [1]


def test_check_choice_has_one_message_format():
    assert check_choice("pl", "criterion", choices.CRITERIA) == "pl"
    with pytest.raises(
        InvalidInput,
        match=r"^criterion must be one of apl, pl, participation, most_partial, random, decision_change; got 'x'$",
    ):
        check_choice("x", "criterion", choices.CRITERIA)
    with pytest.raises(InvalidInput, match=r"got \['apl'\]"):
        check_choice(["apl"], "criterion", choices.CRITERIA)  # unhashable
    with pytest.raises(InvalidInput, match="got True"):
        check_choice(True, "flag", (1, 0))  # a bool is not an int choice
    assert check_choice(np.str_("apl"), "criterion", choices.CRITERIA) == "apl"


def test_every_engine_module_uses_the_single_sourced_names():
    from engine import neighbors, noise, query, simulate, winners

    assert query.CRITERIA is choices.CRITERIA
    assert query.AMBIGUITY_CRITERIA is choices.AMBIGUITY_CRITERIA
    assert neighbors.WEIGHTINGS is choices.WEIGHTINGS
    assert winners.PL_METHODS is choices.PL_METHODS
    assert simulate.NOISE_MODES is choices.NOISE_MODES
    assert simulate.STRATEGY_NAMES is choices.STRATEGY_NAMES
    assert tuple(simulate.STRATEGIES) == choices.STRATEGY_NAMES
    assert tuple(noise.CANDIDATE_GENERATORS) == choices.CANDIDATE_PROTOCOLS
    for name in choices.STRATEGY_NAMES:
        assert simulate.make_strategy(name).name == name


def test_public_names_are_exported():
    for name in (
        "label_sets",
        "open_targets",
        "ReverseIndex",
        "ranking_order",
        "check_candidates",
        "check_choice",
        "open_neighbourhoods",
        "transductive_decisions",
        "predict_from_neighbors",
    ):
        assert name in engine.__all__
        assert getattr(engine, name) is not None


def test_open_neighbourhoods_counts_open_targets_holding_each_item():
    idx = np.array([[0, 1], [1, 2], [2, 3]])
    touched = open_neighbourhoods(idx, np.array([True, False, True]), 5)
    assert touched.tolist() == [1, 1, 1, 1, 0]
