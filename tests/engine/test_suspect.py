"""Suspect sets: brute-force oracles for every score, the invariants, the conformal p-values and BH."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import (
    SUSPECT_CRITERIA,
    benjamini_hochberg,
    conformal_p_values,
    outside_suggestions,
    suspect_scores,
    suspect_sets,
    suspect_threshold,
)
from engine.exceptions import InvalidInput
from engine.suspect import conformal_bh_threshold, replace_sorted, sorted_conformal_p_values

# -- oracles -----------------------------------------------------------------------------


def brute_conflict(own: set[int], neighbour_sets: list[set[int]], weights: list[float], n_labels: int) -> float:
    """Dempster's conflict by enumerating every subset of the neighbours (focal sets as frozensets)."""
    omega = frozenset(range(n_labels))
    active = [frozenset(s) for s, wt in zip(neighbour_sets, weights, strict=True) if wt > 0 and set(s) != omega]
    mass: dict[frozenset[int], float] = {}
    for chosen in itertools.product([False, True], repeat=len(active)):
        focal = omega
        for take, s in zip(chosen, active, strict=True):
            if take:
                focal = focal & s
        mass[focal] = mass.get(focal, 0.0) + 0.5 ** len(active)
    empty = mass.get(frozenset(), 0.0)
    outside = sum(m for b, m in mass.items() if b and not (b & own))
    return outside / (1.0 - empty)


def commonality_conflict(own: set[int], neighbour_sets: list[set[int]], weights: list[float], n_labels: int) -> float:
    """The same K by inclusion-exclusion over label subsets: Q(U) = 2**(n(U) - m), an independent route."""
    active = [set(s) for s, wt in zip(neighbour_sets, weights, strict=True) if wt > 0]
    m = len(active)

    def q(u: tuple[int, ...]) -> float:
        return 2.0 ** (sum(set(u) <= s for s in active) - m)

    empty = sum((-1) ** len(u) * q(u) for r in range(n_labels + 1) for u in itertools.combinations(range(n_labels), r))
    pl = sum(
        (-1) ** (len(u) + 1) * q(u) for r in range(1, len(own) + 1) for u in itertools.combinations(sorted(own), r)
    )
    return (1.0 - empty - pl) / (1.0 - empty)


def brute_outside(own, neighbour_sets, weights, n_labels):
    votes = [sum(wt for s, wt in zip(neighbour_sets, weights, strict=True) if y in s) for y in range(n_labels)]
    total = sum(votes)
    return sum(v for y, v in enumerate(votes) if y not in own) / total if total > 0 else 0.0


def brute_disjoint(own, neighbour_sets, weights, n_labels):
    total = sum(weights)
    return (
        sum(wt for s, wt in zip(neighbour_sets, weights, strict=True) if not (set(s) & own)) / total if total else 0.0
    )


ORACLES = {"conflict": brute_conflict, "outside": brute_outside, "disjoint": brute_disjoint}


@st.composite
def problems(draw, max_k=5):
    n_labels = draw(st.integers(2, 4))
    n = draw(st.integers(2, 7))
    k = draw(st.integers(1, min(max_k, n - 1)))
    rows = draw(st.lists(st.sets(st.integers(0, n_labels - 1), min_size=1), min_size=n, max_size=n))
    Y = np.zeros((n, n_labels), dtype=bool)
    for i, s in enumerate(rows):
        Y[i, sorted(s)] = True
    idx = np.array([[(t + 1 + j) % n for j in range(k)] for t in range(n)])
    w = np.array(draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0]), min_size=n * k, max_size=n * k))).reshape(n, k)
    return Y, idx, w


def as_python(Y, idx, w, t):
    return (
        set(np.flatnonzero(Y[t]).tolist()),
        [set(np.flatnonzero(Y[j]).tolist()) for j in idx[t]],
        w[t].tolist(),
        Y.shape[1],
    )


# -- the scores against the oracles ------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(problems())
def test_every_score_equals_its_brute_force_definition(problem):
    Y, idx, w = problem
    for criterion, oracle in ORACLES.items():
        got = suspect_scores(idx, w, Y, criterion=criterion)
        want = [oracle(*as_python(Y, idx, w, t)) for t in range(Y.shape[0])]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12, err_msg=criterion)


@settings(max_examples=30, deadline=None)
@given(problems())
def test_the_conflict_agrees_with_the_commonality_route(problem):
    Y, idx, w = problem
    got = suspect_scores(idx, w, Y)
    want = [commonality_conflict(*as_python(Y, idx, w, t)) for t in range(Y.shape[0])]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_more_than_sixteen_active_neighbours_take_the_sequential_path_and_agree():
    rng = np.random.default_rng(3)
    n, k, n_labels = 24, 19, 3
    Y = rng.random((n, n_labels)) < 0.4
    Y[~Y.any(axis=1), 0] = True
    idx = np.array([[(t + 1 + j) % n for j in range(k)] for t in range(n)])
    w = np.ones((n, k))
    got = suspect_scores(idx, w, Y)
    want = [commonality_conflict(*as_python(Y, idx, w, t)) for t in range(n)]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert (np.sum(~Y[idx].all(axis=2), axis=1) > 16).any()  # the sequential path was taken


def test_hand_computed_conflicts():
    # Own {1}; neighbours {0}, {0}: K = 3/4 (three of four subsets give {0}).
    Y = np.array([[0, 1], [1, 0], [1, 0]], dtype=bool)
    assert suspect_scores([[1, 2]], [[1.0, 1.0]], Y, own=Y[:1])[0] == 0.75
    # Neighbours {0} and {1} disagree: m(∅) = 1/4 is divided out; outside {1} is m({0}) = 1/4 -> 1/3.
    Y = np.array([[0, 1, 0], [1, 0, 0], [0, 1, 0]], dtype=bool)
    assert suspect_scores([[1, 2]], [[1.0, 1.0]], Y, own=Y[:1])[0] == pytest.approx(1 / 3)
    # A neighbour of weight 0 takes no part.
    assert suspect_scores([[1, 2]], [[1.0, 0.0]], Y, own=Y[:1])[0] == 0.5


# -- invariants --------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(problems(), st.data())
def test_scores_are_antitone_in_the_own_set(problem, data):
    Y, idx, w = problem
    bigger = Y | np.array(data.draw(st.lists(st.booleans(), min_size=Y.size, max_size=Y.size))).reshape(Y.shape)
    for criterion in SUSPECT_CRITERIA:
        small = suspect_scores(idx, w, Y, own=Y, criterion=criterion)
        large = suspect_scores(idx, w, Y, own=bigger, criterion=criterion)
        assert (large <= small + 1e-12).all(), criterion
        assert ((small >= 0) & (small <= 1 + 1e-12)).all()


@settings(max_examples=60, deadline=None)
@given(problems(), st.floats(0.0, 0.99), st.booleans())
def test_a_target_whose_neighbours_all_vote_inside_its_set_is_never_suspect(problem, threshold, calibrate):
    Y, idx, w = problem
    # Each target's own set: the union of its neighbours' sets (every neighbour votes inside it).
    own = Y[idx].any(axis=1)
    for criterion in SUSPECT_CRITERIA:
        scores = suspect_scores(idx, w, Y, own=own, criterion=criterion)
        assert (scores == 0).all()
        kwargs = {"trusted": np.zeros(len(own), dtype=bool)} if calibrate else {"threshold": threshold}
        found = suspect_sets(idx, w, Y, own=own, criterion=criterion, **kwargs)
        assert not found.suspect.any()


def test_every_score_is_invariant_to_permuting_the_neighbours():
    rng = np.random.default_rng(0)
    Y = rng.random((30, 5)) < 0.35
    Y[~Y.any(axis=1), 2] = True
    idx = np.array([rng.choice(np.delete(np.arange(30), t), size=8, replace=False) for t in range(30)])
    w = rng.choice([0.0, 1.0, 0.5], size=idx.shape)
    perm = rng.permutation(8)
    for criterion in SUSPECT_CRITERIA:
        np.testing.assert_allclose(
            suspect_scores(idx, w, Y, criterion=criterion),
            suspect_scores(idx[:, perm], w[:, perm], Y, criterion=criterion),
            rtol=0,
            atol=1e-12,
        )


# -- suggestions -------------------------------------------------------------------------


def test_suggestions_are_the_most_held_labels_outside_the_set():
    Y = np.array([[1, 0, 0, 0], [0, 1, 1, 0], [0, 1, 0, 0], [0, 0, 1, 1], [1, 0, 0, 0]], dtype=bool)
    labels, support, holders = outside_suggestions([[1, 2, 3, 4]], [[1.0, 1.0, 1.0, 1.0]], Y, own=Y[:1])
    # Outside {0}: label 1 held by 2 neighbours, label 2 by 2 (tie: the smaller first), 3 by 1.
    assert labels.tolist() == [[1, 2]]
    assert holders.tolist() == [[2, 2]]
    assert support.tolist() == [[0.5, 0.5]]
    # Only one label outside is held: the second suggestion is -1.
    labels, support, holders = outside_suggestions([[2, 4]], [[1.0, 1.0]], Y, own=Y[:1])
    assert labels.tolist() == [[1, -1]] and holders.tolist() == [[1, 0]] and support.tolist() == [[0.5, 0.0]]


def test_suggestions_follow_the_weights():
    Y = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 1]], dtype=bool)
    labels, support, holders = outside_suggestions([[1, 2, 3]], [[3.0, 1.0, 1.0]], Y, own=Y[:1])
    assert labels.tolist() == [[1, 2]]
    assert support.tolist() == [[0.6, 0.4]]
    assert holders.tolist() == [[1, 2]]


# -- the threshold -----------------------------------------------------------------------


def test_the_threshold_is_the_conformal_quantile():
    scores = np.array([0.5, 0.1, 0.3, 0.2, 0.4])
    # n = 5, alpha = 0.2: rank ceil(6 * 0.8) = 5 -> the largest.
    assert suspect_threshold(scores, false_alarm=0.2) == 0.5
    # alpha = 0.4: rank ceil(6 * 0.6) = 4.
    assert suspect_threshold(scores, false_alarm=0.4) == 0.4
    assert suspect_threshold(scores, false_alarm=0.1) == math.inf  # rank 6 > 5
    assert suspect_threshold([], false_alarm=0.5) == math.inf


def test_correct_sets_are_flagged_at_most_at_the_false_alarm_rate():
    """Seeded simulation of the guarantee: exchangeable correct scores, a fresh one above the
    calibrated threshold with frequency <= alpha (up to the simulation's noise)."""
    rng = np.random.default_rng(11)
    alpha, n_cal, runs = 0.1, 29, 4000
    flagged = 0
    for _ in range(runs):
        scores = rng.beta(0.5, 3.0, size=n_cal + 1)
        flagged += scores[-1] > suspect_threshold(scores[:-1], false_alarm=alpha)
    rate = flagged / runs
    # Exact rate: 1 - ceil(30 * 0.9) / 30 = 0.1; three binomial sd above it.
    assert rate <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / runs)
    assert rate >= alpha - 3 * math.sqrt(alpha * (1 - alpha) / runs)  # and not vacuously conservative


def test_calibrated_flags_and_what_they_record():
    Y = np.array([[0, 1], [1, 0], [1, 0], [1, 0], [1, 0], [1, 0]], dtype=bool)
    idx = np.array([[1, 2, 3], [2, 3, 4], [3, 4, 5], [4, 5, 1], [5, 1, 2], [1, 2, 3]])
    w = np.ones(idx.shape)
    trusted = np.array([False, True, True, True, True, True])
    found = suspect_sets(idx, w, Y, trusted=trusted, tested=~trusted, fdr=0.4)
    # Five trusted scores of 0: the conflicting target's p-value is 1/6 <= 0.4 (m = 1).
    assert found.p_values.tolist() == [1 / 6] + [1.0] * 5
    assert found.suspect.tolist() == [True, False, False, False, False, False]
    assert found.threshold == 0.0 and found.n_tested == 1
    assert found.scores[0] == 7 / 8
    assert found.suggestions[0].tolist() == [0, -1] and found.holders[0].tolist() == [3, 0]
    assert found.n_trusted == 5 and found.fdr == 0.4 and found.criterion == "conflict"
    assert found.n_neighbors.tolist() == [3] * 6
    # Every target tested: m = 6 and 1/6 > 0.4 * 1/6, so nothing is flagged.
    everything = suspect_sets(idx, w, Y, trusted=trusted, fdr=0.4)
    assert not everything.suspect.any() and math.isinf(everything.threshold) and everything.n_tested == 6


# -- conformal p-values and Benjamini-Hochberg -------------------------------------------


def direct_p_values(calibration: list[float], scores: list[float]) -> list[float]:
    return [(1 + sum(c >= s for c in calibration)) / (len(calibration) + 1) for s in scores]


def direct_bh(p: list[float], level: float) -> list[bool]:
    """BH written from its definition: the largest k with p_(k) <= level * k / m, every p <= p_(k)
    rejected (ties at p_(k) included)."""
    m = len(p)
    qualifying = [k for k in range(1, m + 1) if sorted(p)[k - 1] <= level * k / m]
    if not qualifying:
        return [False] * m
    cut = sorted(p)[max(qualifying) - 1]
    return [value <= cut for value in p]


small_scores = st.lists(st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0]), max_size=12)


@settings(max_examples=200, deadline=None)
@given(small_scores, small_scores)
def test_conformal_p_values_match_the_direct_count(calibration, scores):
    np.testing.assert_allclose(conformal_p_values(calibration, scores), direct_p_values(calibration, scores))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([0.0, 0.001, 0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.5, 1.0]), max_size=10),
    st.sampled_from([0.01, 0.05, 0.1, 0.2, 0.5]),
)
def test_bh_matches_the_direct_computation(p, level):
    assert benjamini_hochberg(p, level=level).tolist() == direct_bh(p, level)


tie_scores = st.lists(st.sampled_from([0.0, 0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0]), max_size=60)


@settings(max_examples=400, deadline=None)
@given(tie_scores, tie_scores, st.sampled_from([0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.9]))
def test_the_threshold_from_sorted_scores_flags_what_bh_of_every_p_value_flags(calibration, tested, level):
    calibration_sorted, tested_array = np.sort(np.array(calibration)), np.array(tested)
    threshold = conformal_bh_threshold(calibration_sorted, np.sort(tested_array), level=level)
    expected = benjamini_hochberg(conformal_p_values(calibration, tested), level=level)
    assert (tested_array > threshold).tolist() == expected.tolist()
    np.testing.assert_array_equal(
        sorted_conformal_p_values(calibration_sorted, tested), conformal_p_values(calibration, tested)
    )


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_the_threshold_matches_bh_on_many_continuous_scores(data):
    # Enough scores that only the top of the tested ones is looked at.
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    zeros = data.draw(st.floats(0.0, 0.95))
    n, m = data.draw(st.integers(0, 3000)), data.draw(st.integers(1, 3000))
    calibration = np.where(rng.random(n) < zeros, 0.0, rng.beta(0.5, 3.0, size=n))
    tested = np.where(rng.random(m) < zeros, 0.0, rng.beta(data.draw(st.floats(0.3, 5.0)), 1.5, size=m))
    level = data.draw(st.sampled_from([0.01, 0.05, 0.1, 0.2]))
    threshold = conformal_bh_threshold(np.sort(calibration), np.sort(tested), level=level)
    expected = benjamini_hochberg(conformal_p_values(calibration, tested), level=level)
    assert np.array_equal(tested > threshold, expected)


@settings(max_examples=300, deadline=None)
@given(tie_scores, st.data())
def test_replace_sorted_equals_sorting_the_changed_multiset(values, data):
    kept = data.draw(st.lists(st.booleans(), min_size=len(values), max_size=len(values)))
    added = data.draw(tie_scores)
    removed = [v for v, keep in zip(values, kept, strict=True) if not keep]
    got = replace_sorted(np.sort(np.array(values, dtype=float)), np.array(removed), np.array(added))
    expected = np.sort(np.array([v for v, keep in zip(values, kept, strict=True) if keep] + added, dtype=float))
    np.testing.assert_array_equal(got, expected)


def test_replace_sorted_refuses_a_value_it_does_not_hold():
    with pytest.raises(InvalidInput, match="not among the values"):
        replace_sorted(np.array([0.0, 0.5]), np.array([0.5, 0.5]), np.array([]))
    with pytest.raises(InvalidInput, match="not among the values"):
        replace_sorted(np.array([0.0, 0.5]), np.array([0.7]), np.array([]))


def test_bh_on_the_worked_example_of_its_paper_style():
    # m = 5, level 0.1: thresholds 0.02, 0.04, 0.06, 0.08, 0.1; p_(3) = 0.05 <= 0.06 is the last.
    p = [0.05, 0.001, 0.5, 0.03, 0.09]
    assert benjamini_hochberg(p, level=0.1).tolist() == [True, True, False, True, False]
    assert benjamini_hochberg([], level=0.1).tolist() == []


def test_the_false_discovery_rate_holds_in_a_seeded_simulation():
    """Correct sets score like the calibration set; sets that miss the truth score higher. Over
    many draws the mean share of correct sets among the flagged ones stays at most the level
    (Bates et al. 2023, Theorem 2.4), and on clean data (every set correct) a flag is raised
    at all in at most a level's share of the draws."""
    rng = np.random.default_rng(31)
    level, n_cal, n_test, runs = 0.1, 200, 100, 1500
    fdp, any_flag_clean, power = [], 0, []
    for _ in range(runs):
        calibration = rng.beta(0.5, 3.0, size=n_cal)
        missing = rng.random(n_test) < 0.2
        scores = np.where(missing, rng.beta(4.0, 1.0, size=n_test), rng.beta(0.5, 3.0, size=n_test))
        flagged = benjamini_hochberg(conformal_p_values(calibration, scores), level=level)
        fdp.append((flagged & ~missing).sum() / max(int(flagged.sum()), 1))
        power.append((flagged & missing).sum() / max(int(missing.sum()), 1))
        clean = rng.beta(0.5, 3.0, size=n_test)
        any_flag_clean += bool(benjamini_hochberg(conformal_p_values(calibration, clean), level=level).any())
    sd = math.sqrt(level * (1 - level) / runs)
    assert np.mean(fdp) <= level + 3 * sd
    assert any_flag_clean / runs <= level + 3 * sd
    assert np.mean(power) > 0.3  # the test is not vacuous: it finds the outliers


# -- input errors ------------------------------------------------------------------------

Y3 = np.array([[1, 0], [0, 1], [1, 1]], dtype=bool)
IDX3 = np.array([[1, 2], [0, 2], [0, 1]])
W3 = np.ones((3, 2))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: suspect_scores(IDX3, W3, Y3, criterion="nope"), "criterion"),
        (lambda: suspect_scores(IDX3[:2], W3[:2], Y3), "pass own="),
        (lambda: suspect_scores(IDX3, W3, Y3, own=Y3[:2]), "own"),
        (lambda: suspect_scores(IDX3, W3, Y3, own=np.ones((3, 3), dtype=bool)), "label columns"),
        (lambda: suspect_scores(IDX3, -W3, Y3), "negative"),
        (lambda: suspect_sets(IDX3, W3, Y3), "exactly one of"),
        (lambda: suspect_sets(IDX3, W3, Y3, trusted=[1, 0, 1]), "bool array"),
        (lambda: suspect_sets(IDX3, W3, Y3, trusted=np.ones(3, bool), tested=[1, 0, 1]), "tested"),
        (lambda: suspect_sets(IDX3, W3, Y3, trusted=np.ones(3, bool), fdr=0.0), "fdr"),
        (lambda: benjamini_hochberg([0.5, 1.5]), r"\[0, 1\]"),
        (lambda: benjamini_hochberg([0.5], level=1.0), "level"),
        (lambda: conformal_p_values([np.nan], [0.1]), "calibration_scores"),
        (lambda: suspect_sets(IDX3, W3, Y3, threshold=-1.0), "threshold"),
        (lambda: suspect_threshold([0.1], false_alarm=1.0), "false_alarm"),
        (lambda: suspect_threshold([np.nan], false_alarm=0.5), "finite"),
        (lambda: outside_suggestions(IDX3, W3, Y3, n_suggestions=0), "n_suggestions"),
    ],
)
def test_bad_input_is_refused(call, message):
    with pytest.raises(InvalidInput, match=message):
        call()


def test_a_threshold_of_the_wrong_type_is_a_type_error():
    with pytest.raises(TypeError, match="false_alarm"):
        suspect_threshold([0.1], false_alarm="0.1")
