"""DST-PLL: hand-checked examples, the dict reference, Theorem 4.2 and input errors."""

from __future__ import annotations

import itertools
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.neighbors import NearestNeighbors

from engine.dst import DstPllClassifier, predict_from_neighbors, transductive_decisions
from engine.dst_evidence import combine, decide
from engine.exceptions import InvalidInput, NotFittedError
from tests.engine import dst_reference as ref

A, B, C = 0, 1, 2
PATHS = ("auto", "moebius", "enumerate", "sequential")


def sets(*members, n_labels=3):
    out = np.zeros((len(members), n_labels), dtype=bool)
    for row, labels in enumerate(members):
        out[row, list(labels)] = True
    return out


def line_fit(candidate_rows, k, **kwargs):
    """Training points 0, 1, 2, ... on a line; the query at -0.5 sees the first k."""
    Y = sets(*candidate_rows)
    X = np.arange(len(candidate_rows), dtype=float)[:, None]
    return DstPllClassifier(n_neighbors=k, **kwargs).fit(X, Y)


# -- the paper's worked examples and hand-checked combinations ---------------------------


def test_example_4_1_and_4_3_classification_rule_and_accept():
    # Examples 4.1/4.3 of Fuchs et al. (the formulas are lost in the plain-text copy; this is
    # the reading consistent with its words): labels {a, b, c}, a test instance whose three
    # neighbours have {a}, {a} and {a, b, c}. The third supports every label, so its bpa is
    # m(Y) = 1 (Algorithm 1, line 4); the other two give m({a}) = m(Y) = 1/2. Yager's rule
    # gives m({a}) = 1 - 1/4 = 3/4, m(Y) = 1/4, zero elsewhere; predict a. Reject option:
    # bel(a) = 3/4 > max(pl(b), pl(c)) = 1/4, so the prediction is accepted.
    clf = line_fit([{A}, {A}, {A, B, C}, {B}], k=3)
    assert clf.mass_functions([[-0.5]]) == [{frozenset({A}): 0.75, frozenset({A, B, C}): 0.25}]
    bel, pl = clf.belief_plausibility([[-0.5]])
    np.testing.assert_array_equal(bel, [[0.75, 0.0, 0.0]])
    np.testing.assert_array_equal(pl, [[1.0, 0.25, 0.25]])
    labels, accepted, guess = clf.predict_with_reject([[-0.5]], return_guess=True)
    assert labels.tolist() == [A] and accepted.tolist() == [True] and guess.tolist() == [False]
    np.testing.assert_array_equal(clf.decision_margin([[-0.5]]), [0.5])


def test_yager_with_conflict_moved_to_the_universe_after_the_last_neighbour():
    # Neighbours {a,b}, {a,c}, {c} of a test instance. Over the 8 subsets of neighbours
    # (mass 1/8 each): {} -> Y, {1} -> {a,b}, {2} -> {a,c}, {3} -> {c}, {1,2} -> {a},
    # {1,3} -> empty, {2,3} -> {c}, {1,2,3} -> empty. Conflict 2/8 goes to Y at the end.
    clf = line_fit([{A, B}, {A, C}, {C}, {B}], k=3)
    expected = {
        frozenset({A}): 1 / 8,
        frozenset({A, B}): 1 / 8,
        frozenset({A, C}): 1 / 8,
        frozenset({C}): 2 / 8,
        frozenset({A, B, C}): 1 / 8 + 2 / 8,
    }
    assert clf.mass_functions([[-0.5]]) == [expected]
    bel, pl = clf.belief_plausibility([[-0.5]])
    np.testing.assert_array_equal(bel, [[1 / 8, 0.0, 2 / 8]])
    np.testing.assert_array_equal(pl, [[6 / 8, 4 / 8, 6 / 8]])
    labels, accepted = clf.predict_with_reject([[-0.5]])
    # c has the largest belief, but a stays as plausible as 3/4 > 1/4: reject.
    assert labels.tolist() == [C] and accepted.tolist() == [False]
    np.testing.assert_array_equal(clf.decision_margin([[-0.5]]), [2 / 8 - 6 / 8])


def test_transductive_disambiguation_uses_own_candidates_and_other_rows():
    # Row 0 has S = {a, b}; its neighbours (rows 1..3) hold {a}, {b}, {a, c}, i.e. S∩N =
    # {a}, {b}, {a}. Subsets: {} -> S, {1} -> a, {2} -> b, {3} -> a, {1,3} -> a, and the
    # three subsets holding both 1 and 2 are empty. m({a}) = 3/8, m({b}) = 1/8,
    # m(S) = 1/8 + 3/8. pl(a) = 7/8, pl(b) = 5/8, pl(c) = 0: predict a, reject.
    X = np.array([[0.0], [1.0], [1.1], [1.2], [9.0]])
    Y = sets({A, B}, {A}, {B}, {A, C}, {C})
    clf = DstPllClassifier(n_neighbors=3, random_state=0).fit(X, Y)
    assert clf.mass_functions()[0] == {frozenset({A}): 3 / 8, frozenset({B}): 1 / 8, frozenset({A, B}): 4 / 8}
    assert clf.disambiguate_[0] == A
    assert not clf.disambiguate_accepted_[0]
    # Row 1 ({a}) has a single candidate: every neighbour is skipped and m({a}) = 1.
    assert clf.mass_functions()[1] == {frozenset({A}): 1.0}
    assert clf.disambiguate_[1] == A and clf.disambiguate_accepted_[1]


def test_pruning_after_the_conflict_move_renormalises():
    # S = {0,1,2,3}; 34 neighbours hold {0,1,2} and one holds {3}. The focal set {3} comes
    # from a single neighbour subset: mass 2**-35 < 1e-10, so it is pruned after the
    # conflict move and the rest renormalised. Only the sequential kernel can prune.
    own = np.ones((1, 4), dtype=bool)
    neighbours = np.zeros((1, 35, 4), dtype=bool)
    neighbours[0, :34, :3] = True
    neighbours[0, 34, 3] = True
    evidence = combine(own, neighbours)
    expected = ref.instance_mass(frozenset(range(4)), [frozenset({0, 1, 2})] * 34 + [frozenset({3})])
    assert frozenset({3}) not in expected
    bel, pl = ref.belief_plausibility(expected, 4)
    assert bel[3] == 0.0  # pl(3) keeps the mass of the universe, which holds 3
    assert abs(sum(expected.values()) - 1.0) < 1e-15
    np.testing.assert_allclose(evidence.belief[0], bel, rtol=0, atol=1e-12)
    np.testing.assert_allclose(evidence.plausibility[0], pl, rtol=0, atol=1e-12)


def test_tied_singletons_are_guessed_and_never_accepted():
    clf = line_fit([{A}, {B}, {C}, {C}], k=2, random_state=7)
    labels, accepted, guess = clf.predict_with_reject([[-0.5]] * 20, return_guess=True)
    assert set(labels.tolist()) == {A, B}  # 20 fair draws: both show up
    assert guess.all() and not accepted.any()
    again = clf.predict_with_reject([[-0.5]] * 20, return_guess=True)
    np.testing.assert_array_equal(labels, again[0])  # same seed, same draws


def test_no_singleton_mass_guesses_inside_the_heaviest_focal_set():
    # Neighbours {a,b}, {a,b}: m({a,b}) = 3/4, m(Y) = 1/4; no singleton has mass.
    clf = line_fit([{A, B}, {A, B}, {C}, {C}], k=2, random_state=3)
    labels, accepted, guess = clf.predict_with_reject([[-0.5]] * 20, return_guess=True)
    assert set(labels.tolist()) == {A, B}
    assert guess.all() and not accepted.any()
    assert (clf.decision_margin([[-0.5]]) <= 0).all()


def test_exact_duplicates_leave_only_the_row_itself_out():
    X = np.zeros((4, 2))
    Y = sets({A}, {A, B}, {B}, {A, C})
    clf = DstPllClassifier(n_neighbors=3).fit(X, Y)
    owns = [frozenset(np.flatnonzero(row).tolist()) for row in Y]
    for i, mass in enumerate(clf.mass_functions()):
        others = [owns[j] for j in range(4) if j != i]
        assert mass == ref.instance_mass(owns[i], others)


def test_many_labels_use_several_words():
    rng = np.random.default_rng(0)
    n_labels = 70
    own = np.ones((30, n_labels), dtype=bool)
    neighbours = rng.random((30, 6, n_labels)) < 0.05
    neighbours[:, :, 65] |= rng.random((30, 6)) < 0.5  # a label in the second word
    for path in ("auto", "enumerate", "sequential"):
        evidence = combine(own, neighbours, path=path)
        for i in range(30):
            mass = ref.instance_mass(
                frozenset(range(n_labels)), [frozenset(np.flatnonzero(s).tolist()) for s in neighbours[i]]
            )
            bel, pl = ref.belief_plausibility(mass, n_labels)
            np.testing.assert_allclose(evidence.belief[i], bel, rtol=0, atol=1e-12)
            np.testing.assert_allclose(evidence.plausibility[i], pl, rtol=0, atol=1e-12)


# -- the fast kernels against the dict reference ----------------------------------------


@st.composite
def problems(draw, max_labels=6, max_k=6, max_train=10):
    n_labels = draw(st.integers(1, max_labels))
    n_train = draw(st.integers(2, max_train))
    k = draw(st.integers(1, min(max_k, n_train - 1)))
    grid = st.integers(0, 2)  # few distinct points: many exact duplicates
    X = np.array(draw(st.lists(st.tuples(grid, grid), min_size=n_train, max_size=n_train)), dtype=float)
    rows = draw(st.lists(st.integers(1, 2**n_labels - 1), min_size=n_train, max_size=n_train))
    Y = np.array([[bool(r >> y & 1) for y in range(n_labels)] for r in rows]).reshape(n_train, n_labels)
    X_new = np.array(draw(st.lists(st.tuples(grid, grid), min_size=1, max_size=4)), dtype=float)
    seed = draw(st.integers(0, 2**16))
    return X, Y, X_new, k, seed


def assert_masses_equal(fast, slow):
    assert fast.keys() == slow.keys()
    for focal, value in slow.items():
        assert abs(fast[focal] - value) <= 1e-12


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_fit_time_disambiguation_equals_reference(problem):
    X, Y, _, k, seed = problem
    clf = DstPllClassifier(n_neighbors=k, random_state=seed).fit(X, Y)
    expected = ref.run(X, Y, None, n_neighbors=k, random_state=seed)
    np.testing.assert_array_equal(clf.disambiguate_, expected["labels"])
    np.testing.assert_array_equal(clf.disambiguate_accepted_, expected["accepted"])
    np.testing.assert_array_equal(clf.disambiguate_guess_, expected["guess"])
    for fast, slow in zip(clf.mass_functions(), expected["masses"], strict=True):
        assert_masses_equal(fast, slow)
    # Every kernel gives the same beliefs on the training rows.
    idx = clf.nn_.kneighbors(return_distance=False)
    for path in PATHS:
        evidence = combine(Y, Y[idx], path=path)
        np.testing.assert_allclose(evidence.belief, expected["bel"], rtol=0, atol=1e-12)
        np.testing.assert_allclose(evidence.plausibility, expected["pl"], rtol=0, atol=1e-12)
        labels, guess, _ = decide(evidence, np.random.default_rng(seed))
        np.testing.assert_array_equal(labels, expected["labels"])
        np.testing.assert_array_equal(guess, expected["guess"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_new_instances_equal_reference(problem):
    X, Y, X_new, k, seed = problem
    clf = DstPllClassifier(n_neighbors=k, random_state=seed).fit(X, Y)
    expected = ref.run(X, Y, X_new, n_neighbors=k, random_state=seed)
    bel, pl = clf.belief_plausibility(X_new)
    np.testing.assert_allclose(bel, expected["bel"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(pl, expected["pl"], rtol=0, atol=1e-12)
    labels, accepted, guess = clf.predict_with_reject(X_new, return_guess=True)
    np.testing.assert_array_equal(labels, expected["labels"])
    np.testing.assert_array_equal(accepted, expected["accepted"])
    np.testing.assert_array_equal(guess, expected["guess"])
    np.testing.assert_array_equal(clf.predict(X_new), expected["labels"])
    np.testing.assert_allclose(clf.decision_margin(X_new), expected["margin"], rtol=0, atol=1e-12)
    for fast, slow in zip(clf.mass_functions(X_new), expected["masses"], strict=True):
        assert_masses_equal(fast, slow)
    for i, options in enumerate(expected["options"]):  # a guess comes from the tie it names
        assert any(labels[i] in option for option in options)


# -- properties -------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(problems())
def test_masses_are_a_distribution_and_bound_belief_and_plausibility(problem):
    X, Y, X_new, k, seed = problem
    clf = DstPllClassifier(n_neighbors=k, random_state=seed).fit(X, Y)
    bel, pl = clf.belief_plausibility(X_new)
    for i, mass in enumerate(clf.mass_functions(X_new)):
        assert all(value > 0 for value in mass.values())
        assert abs(sum(mass.values()) - 1.0) <= 1e-12
        for y in range(Y.shape[1]):
            assert bel[i, y] == pytest.approx(mass.get(frozenset({y}), 0.0), abs=1e-12)
            assert pl[i, y] == pytest.approx(sum(v for f, v in mass.items() if y in f), abs=1e-12)
    assert (bel <= pl + 1e-12).all()
    assert ((0 <= bel) & (pl <= 1 + 1e-12)).all()


def completion_scores(mass, n_labels):
    """Every extreme point of the credal set: each focal set's mass on one of its labels."""
    focal = list(mass.items())
    for choice in itertools.product(*[sorted(f) for f, _ in focal]):
        scores = [0.0] * n_labels
        for (_, value), label in zip(focal, choice, strict=True):
            scores[label] += value
        yield scores


@settings(max_examples=60, deadline=None)
@given(problems(max_labels=4, max_k=4, max_train=7))
def test_theorem_4_2(problem):
    # (i) a guessed label has margin <= 0 and is rejected; (ii) an accepted label gets more
    # probability than any other label under every distribution of the credal set (it is
    # enough to check the extreme points: each focal set's mass on one of its labels), and
    # conversely a non-guessed label that wins at every extreme point is accepted, since
    # min over the credal set of P(ŷ) - P(y) equals bel(ŷ) - pl(y); (iii) bel(ŷ) > 1/2
    # implies acceptance.
    X, Y, X_new, k, seed = problem
    clf = DstPllClassifier(n_neighbors=k, random_state=seed).fit(X, Y)
    labels, accepted, guess = clf.predict_with_reject(X_new, return_guess=True)
    margin = clf.decision_margin(X_new)
    bel, _ = clf.belief_plausibility(X_new)
    for i, mass in enumerate(clf.mass_functions(X_new)):
        assume(np.prod([len(f) for f in mass]) <= 4096)
        if guess[i]:
            assert margin[i] <= 0 and not accepted[i]
            continue
        always_wins = all(
            all(scores[labels[i]] > s for y, s in enumerate(scores) if y != labels[i])
            for scores in completion_scores(mass, Y.shape[1])
        )
        assert accepted[i] == always_wins
        if bel[i, labels[i]] > 0.5:
            assert accepted[i]


# -- estimator contract and input errors -------------------------------------------------


def test_init_stores_parameters_only_and_clones():
    clf = DstPllClassifier(n_neighbors=3, random_state=1)
    assert clf.get_params() == {"n_neighbors": 3, "random_state": 1}
    assert not hasattr(clf, "nn_")
    assert clone(clf).get_params() == clf.get_params()


@pytest.mark.parametrize(
    "method", ["predict", "predict_with_reject", "belief_plausibility", "decision_margin", "mass_functions"]
)
def test_not_fitted(method):
    with pytest.raises(NotFittedError, match="not fitted"):
        getattr(DstPllClassifier(), method)([[0.0]])


X4 = np.arange(4.0)[:, None]
Y4 = sets({A}, {B}, {A, B}, {C})


@pytest.mark.parametrize(
    "X, Y, k, match",
    [
        (X4, np.vstack([Y4[:3], np.zeros((1, 3), dtype=bool)]), 1, "row 3 is an empty candidate set"),
        (X4, Y4[:3], 1, "has 3 rows but 4 were expected"),
        (X4, Y4[:, None], 1, "2-D"),
        (np.array([[0.0], [np.nan], [1.0], [2.0]]), Y4, 1, "row 1 column 0 is nan"),
        (X4, Y4, 4, "n_neighbors=4 must be smaller than the number of training instances"),
        (X4, Y4, 0, "n_neighbors must be >= 1"),
    ],
)
def test_fit_rejects_bad_input(X, Y, k, match):
    with pytest.raises(InvalidInput, match=match):
        DstPllClassifier(n_neighbors=k).fit(X, Y)


def test_fit_rejects_non_integer_neighbours():
    with pytest.raises(TypeError, match="n_neighbors must be an integer"):
        DstPllClassifier(n_neighbors=2.0).fit(X4, Y4)


def test_predict_rejects_bad_input():
    clf = DstPllClassifier(n_neighbors=2).fit(X4, Y4)
    with pytest.raises(InvalidInput, match="X has 2 features but DstPllClassifier was fitted with 1"):
        clf.predict(np.zeros((2, 2)))
    with pytest.raises(InvalidInput, match="finite"):
        clf.predict_with_reject([[np.inf]])


def test_training_evidence_attributes_match_the_reference_combination():
    X = np.array([[0.0], [0.1], [0.2], [5.0], [5.1], [5.2]])
    Y = np.array([[1, 1, 0], [1, 0, 0], [1, 0, 1], [0, 1, 1], [0, 1, 0], [0, 1, 0]], dtype=bool)
    clf = DstPllClassifier(n_neighbors=2, random_state=0).fit(X, Y)
    # Row 0 has set {0,1}; its neighbours {0} and {0,2} both meet it in {0}: two masses
    # (1/2 on {0}, 1/2 on {0,1}) combine to m({0}) = 3/4, m({0,1}) = 1/4.
    np.testing.assert_allclose(clf.disambiguate_belief_[0], [0.75, 0, 0])
    np.testing.assert_allclose(clf.disambiguate_plausibility_[0], [1.0, 0.25, 0])
    np.testing.assert_allclose(clf.disambiguate_margin_[0], 0.5)
    assert clf.disambiguate_accepted_[0] and clf.disambiguate_[0] == 0


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_update_candidates_equals_a_refit_on_the_new_sets(seed):
    rng = np.random.default_rng(seed)
    n, M = 30, 4
    X = rng.normal(size=(n, 2))
    Y = rng.random((n, M)) < 0.4
    Y[np.arange(n), rng.integers(0, M, n)] = True
    clf = DstPllClassifier(n_neighbors=4, random_state=0).fit(X, Y.copy())
    rows = rng.choice(n, size=3, replace=False)
    settled = np.zeros((3, M), dtype=bool)
    settled[np.arange(3), [np.flatnonzero(Y[r])[0] for r in rows]] = True
    affected = clf.update_candidates(rows, settled)
    Y2 = Y.copy()
    Y2[rows] = settled
    fresh = DstPllClassifier(n_neighbors=4, random_state=0).fit(X, Y2)
    assert set(rows) <= set(affected)
    np.testing.assert_array_equal(clf.candidates_, Y2)
    np.testing.assert_allclose(clf.disambiguate_belief_, fresh.disambiguate_belief_, atol=1e-12)
    np.testing.assert_allclose(clf.disambiguate_plausibility_, fresh.disambiguate_plausibility_, atol=1e-12)
    np.testing.assert_allclose(clf.disambiguate_margin_, fresh.disambiguate_margin_, atol=1e-12)
    np.testing.assert_array_equal(clf.disambiguate_accepted_, fresh.disambiguate_accepted_)
    decided = ~fresh.disambiguate_guess_
    np.testing.assert_array_equal(clf.disambiguate_[decided], fresh.disambiguate_[decided])


def test_update_candidates_rejects_bad_rows():
    X = np.arange(6, dtype=float)[:, None]
    Y = np.ones((6, 2), dtype=bool)
    clf = DstPllClassifier(n_neighbors=2).fit(X, Y)
    with pytest.raises(InvalidInput, match="rows must be training row indices"):
        clf.update_candidates([9], [[True, False]])
    with pytest.raises(InvalidInput, match="empty candidate set"):
        clf.update_candidates([0], [[False, False]])


def _random_problem(seed: int, n: int = 30, M: int = 4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    Y = rng.random((n, M)) < 0.4
    Y[np.arange(n), rng.integers(0, M, n)] = True
    return rng, X, Y


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_transductive_decisions_equal_the_fitted_disambiguation(seed):
    rng, X, Y = _random_problem(seed)
    clf = DstPllClassifier(n_neighbors=4, random_state=0).fit(X, Y)
    labels, accepted, margin = transductive_decisions(Y, clf.train_neighbors_)
    np.testing.assert_array_equal(labels, clf.disambiguate_)
    np.testing.assert_array_equal(accepted, clf.disambiguate_accepted_)
    np.testing.assert_array_equal(margin, clf.disambiguate_margin_)
    # A subset of rows: the same beliefs, so the same margins and acceptances.
    rows = np.sort(rng.choice(Y.shape[0], size=5, replace=False))
    _, accepted_rows, margin_rows = transductive_decisions(Y, clf.train_neighbors_, rows)
    np.testing.assert_array_equal(margin_rows, clf.disambiguate_margin_[rows])
    np.testing.assert_array_equal(accepted_rows, clf.disambiguate_accepted_[rows])


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_predict_from_neighbors_and_given_draws_equal_predict_with_reject(seed):
    rng, X, Y = _random_problem(seed)
    clf = DstPllClassifier(n_neighbors=4, random_state=3).fit(X, Y)
    queries = rng.normal(size=(12, 2))
    labels, accepted = clf.predict_with_reject(queries)
    idx = clf.nn_.kneighbors(queries, return_distance=False)
    got_labels, got_accepted, margin = predict_from_neighbors(Y, idx, random_state=3)
    np.testing.assert_array_equal(got_labels, labels)
    np.testing.assert_array_equal(got_accepted, accepted)
    np.testing.assert_array_equal(margin, clf.decision_margin(queries))
    draws = np.random.default_rng(3).random((12, 2))
    halves = [clf.decide_with_draws(queries[part], draws[part]) for part in (slice(0, 5), slice(5, 12))]
    np.testing.assert_array_equal(np.concatenate([h[0] for h in halves]), labels)
    np.testing.assert_array_equal(np.concatenate([h[1] for h in halves]), accepted)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: transductive_decisions(Y4, np.array([[1], [0]])), r"idx has 2 rows but 4 were expected"),
        (
            lambda: transductive_decisions(Y4, np.array([[1], [0], [3], [9]])),
            r"idx row 3 refers to a training row outside 0..3",
        ),
        (
            lambda: transductive_decisions(Y4, np.array([[1], [0], [3], [2]]), [4]),
            "rows must be training row indices in 0..3",
        ),
        (lambda: predict_from_neighbors(Y4, np.array([0, 1])), "idx must be 2-D"),
        (
            lambda: DstPllClassifier(n_neighbors=2).fit(X4, Y4).decide_with_draws(X4, np.zeros((4, 1))),
            r"draws must have shape \(4, 2\)",
        ),
    ],
)
def test_graph_decisions_reject_bad_input(call, match):
    with pytest.raises(InvalidInput, match=match):
        call()


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_fit_on_given_neighbours_equals_fit_with_the_search(seed):
    _, X, Y = _random_problem(seed)
    searched = DstPllClassifier(n_neighbors=4, random_state=0).fit(X, Y)
    with mock.patch.object(NearestNeighbors, "kneighbors", side_effect=AssertionError("fit searched neighbours")):
        given_graph = DstPllClassifier(n_neighbors=4, random_state=0).fit(X, Y, neighbors=searched.train_neighbors_)
    for attribute in (
        "train_neighbors_",
        "disambiguate_",
        "disambiguate_accepted_",
        "disambiguate_margin_",
        "disambiguate_belief_",
        "disambiguate_plausibility_",
    ):
        np.testing.assert_array_equal(getattr(given_graph, attribute), getattr(searched, attribute))
    np.testing.assert_array_equal(given_graph.predict(X[:3] + 0.01), searched.predict(X[:3] + 0.01))


@pytest.mark.parametrize(
    "neighbors, match",
    [
        (np.array([[1], [0], [3]]), "neighbors has 3 rows but 4 were expected"),
        (np.array([[1, 2], [0, 2], [3, 1], [0, 1]]), "neighbors has 2 columns but n_neighbors=1"),
        (np.array([[1], [0], [9], [2]]), r"neighbors row 2 refers to a training row outside 0..3"),
        (np.array([[1], [1], [3], [2]]), r"neighbors row 1 holds the row itself: \[1\]"),
        (np.array([[1.0], [0.0], [3.0], [2.0]]), "neighbors must hold integer row indices"),
    ],
)
def test_fit_refuses_bad_given_neighbours(neighbors, match):
    with pytest.raises(InvalidInput, match=match):
        DstPllClassifier(n_neighbors=1).fit(X4, Y4, neighbors=neighbors)


def test_transductive_decisions_in_blocks_equal_one_batch(monkeypatch):
    # Blocks of rows share one draw of uniforms: the labels drawn among ties are those of one
    # batch (and of a fit on the same graph), not a fresh draw per block.
    import engine.dst_evidence as evidence

    rng = np.random.default_rng(5)
    n, m, k = 60, 4, 3
    Y = rng.random((n, m)) < 0.5
    Y[np.arange(n), rng.integers(m, size=n)] = True
    idx = np.array([rng.choice(np.delete(np.arange(n), i), size=k, replace=False) for i in range(n)])
    whole = transductive_decisions(Y, idx)
    fit = DstPllClassifier(n_neighbors=k, random_state=0).fit(np.zeros((n, 1)), Y, neighbors=idx)
    assert fit.disambiguate_guess_.any()  # the case that matters: labels drawn among ties
    monkeypatch.setattr(evidence, "DECISION_BLOCK_ROWS", 7)
    blocked = transductive_decisions(Y, idx)
    for got, want in zip(blocked, whole, strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(blocked[0], fit.disambiguate_)
    np.testing.assert_array_equal(blocked[2], fit.disambiguate_margin_)
