"""Exact possible labels (engine._possible via engine.winners) against hand-computed cases and
the brute-force completion oracle."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine._possible as possible_module
from engine.exceptions import InvalidInput, SolverError
from engine.winners import (
    approx_possible_labels,
    necessary_labels,
    possible_labels,
    witness,
)
from tests.engine import oracle


def _sets(*rows: tuple[int, ...], n_labels: int) -> np.ndarray:
    Y = np.zeros((len(rows), n_labels), dtype=bool)
    for i, row in enumerate(rows):
        Y[i, list(row)] = True
    return Y


def _one_target(Y: np.ndarray, weights) -> tuple[np.ndarray, np.ndarray]:
    return np.arange(Y.shape[0])[None, :], np.asarray(weights, dtype=float)[None, :]


def _assert_witness(idx_row, w_row, Y, label, completion) -> None:
    assert completion is not None, f"label {label} is possible but witness returned None"
    completion = np.asarray(completion)
    assert completion.shape == (idx_row.shape[0],)
    assert all(Y[row, lab] for row, lab in zip(idx_row, completion, strict=True)), (
        "a neighbour got a label outside its set"
    )
    assert label in oracle.winners(completion.tolist(), w_row, Y.shape[1])


# --------------------------------------------------------------------------- hand-computed


def test_equal_weights_need_flow_where_greedy_fails():
    # Label 1 has one sure vote (S = 1); the others need at most one vote each:
    # n3 -> 0 is forced, then n0 and n2 split 2 and 3. Greedy puts n0 on 0 (all totals 0,
    # first label) and then n3 overloads label 0; the max-flow finds the matching.
    Y = _sets((0, 2, 3), (1,), (2, 3), (0,), n_labels=4)
    idx, w = _one_target(Y, [1, 1, 1, 1])
    possible, stats = possible_labels(idx, w, Y, return_stats=True)
    np.testing.assert_array_equal(possible[0], [True, True, True, True])
    assert stats["flow"] >= 1
    np.testing.assert_array_equal(possible_labels(idx, w, Y, method="flow"), possible)
    np.testing.assert_array_equal(possible_labels(idx, w, Y, method="cpsat"), possible)
    completion = witness(idx[0], w[0], Y, 1)
    _assert_witness(idx[0], w[0], Y, 1, completion)
    assert completion[3] == 0 and {completion[0], completion[2]} == {2, 3}


def test_weighted_packing_found_where_greedy_fails():
    # Label 0 holds 6; rivals 1 and 2 may take at most 6 each. Items 3, 3, 2, 2, 2 (all {1, 2}):
    # heaviest-first onto the smaller total gives 3+2 | 3+2 and the last 2 overflows, but
    # 3+3 | 2+2+2 fits exactly (ties win).
    Y = _sets((0,), (1, 2), (1, 2), (1, 2), (1, 2), (1, 2), n_labels=3)
    idx, w = _one_target(Y, [6, 3, 3, 2, 2, 2])
    possible, stats = possible_labels(idx, w, Y, return_stats=True)
    assert possible[0, 0]
    assert stats["cpsat"] >= 1
    completion = witness(idx[0], w[0], Y, 0)
    _assert_witness(idx[0], w[0], Y, 0, completion)
    totals = np.bincount(completion, weights=w[0], minlength=3)
    np.testing.assert_array_equal(totals, [6, 6, 6])


def test_weighted_infeasible_inside_apl():
    # Label 0 holds 5; three rivals of weight 3 must split over labels 1 and 2: the total 9
    # fits in 5 + 5 but any packing puts 6 > 5 on one label. 0 is in APL (no rival has a sure
    # vote) yet impossible; labels 1 and 2 are possible (all three on one of them).
    Y = _sets((0,), (1, 2), (1, 2), (1, 2), n_labels=3)
    idx, w = _one_target(Y, [5, 3, 3, 3])
    assert approx_possible_labels(idx, w, Y)[0, 0]
    possible, stats = possible_labels(idx, w, Y, return_stats=True)
    np.testing.assert_array_equal(possible[0], [False, True, True])
    assert stats["cpsat"] == 1
    assert witness(idx[0], w[0], Y, 0) is None


def test_float_tie_is_decided_in_floats():
    # Label 0 holds 0.3; rivals 0.1, 0.2 (neighbour order) and 0.3, all {1, 2}. In reals
    # 0.1+0.2 | 0.3 ties; in floats 0.1 + 0.2 = 0.30000000000000004 > 0.3, so 0 cannot win.
    # CP-SAT's scaled relaxation is feasible, its assignment fails the float check, the
    # restriction is infeasible, and enumeration settles it.
    Y = _sets((0,), (1, 2), (1, 2), (1, 2), n_labels=3)
    idx, w = _one_target(Y, [0.3, 0.1, 0.2, 0.3])
    _, pl, _ = oracle.all_label_sets(idx, w, Y)
    possible, stats = possible_labels(idx, w, Y, return_stats=True)
    np.testing.assert_array_equal(possible, pl)
    assert not possible[0, 0]
    assert stats["enumeration"] == 1
    assert witness(idx[0], w[0], Y, 0) is None


def test_greedy_settles_ties_without_a_solver():
    # Label 0 holds 1 and is not necessary (Smax(1) = 2); n1 -> 1, n2 -> 2 ties at 1 and wins.
    # Labels 1 and 2 hold 2 each and n0 gives 1 to label 0. Greedy decides all three.
    Y = _sets((0,), (1, 2), (1, 2), n_labels=3)
    idx, w = _one_target(Y, [1.0, 1.0, 1.0])
    assert not necessary_labels(idx, w, Y).any()
    possible, stats = possible_labels(idx, w, Y, return_stats=True)
    np.testing.assert_array_equal(possible[0], [True, True, True])
    assert stats["greedy"] == 3 and stats["flow"] == stats["cpsat"] == 0


def test_zero_weights_and_unused_labels():
    # Label 3 is in no candidate set. n2 has weight 0 (distance weighting) and a set without 0.
    Y = _sets((0,), (1,), (1, 2), n_labels=4)
    idx, w = _one_target(Y, [1.0, 1.0, 0.0])
    possible = possible_labels(idx, w, Y)
    np.testing.assert_array_equal(possible[0], [True, True, False, False])
    completion = witness(idx[0], w[0], Y, 0)
    _assert_witness(idx[0], w[0], Y, 0, completion)
    assert completion[2] in (1, 2)  # the zero-weight neighbour still takes a label of its set
    # All weights zero: every label ties at 0 and wins, even the unused one.
    idx0, w0 = _one_target(Y, [0.0, 0.0, 0.0])
    assert possible_labels(idx0, w0, Y).all()
    _assert_witness(idx0[0], w0[0], Y, 3, witness(idx0[0], w0[0], Y, 3))


# --------------------------------------------------------------------------- properties

WEIGHT_KINDS = ("equal", "integer", "dyadic", "tenths", "float", "zeros")


@st.composite
def problems(draw, kinds=WEIGHT_KINDS):
    n_labels = draw(st.integers(1, 5))
    n_rows = draw(st.integers(1, 12))
    k = draw(st.integers(1, 7))
    n_targets = draw(st.integers(1, 4))
    rows = []
    for _ in range(n_rows):
        size = draw(st.integers(1, min(3, n_labels)))
        rows.append(draw(st.lists(st.integers(0, n_labels - 1), min_size=size, max_size=size, unique=True)))
    Y = np.zeros((n_rows, n_labels), dtype=bool)
    for i, row in enumerate(rows):
        Y[i, row] = True
    idx = np.array(
        draw(
            st.lists(
                st.lists(st.integers(0, n_rows - 1), min_size=k, max_size=k), min_size=n_targets, max_size=n_targets
            )
        ),
        dtype=np.intp,
    )
    kind = draw(st.sampled_from(kinds))
    shape = (n_targets, k)
    if kind == "equal":
        w = np.full(shape, draw(st.sampled_from([1.0, 0.1, 1 / 3, 2.5])))
    else:
        if kind == "integer":
            values = st.integers(1, 4).map(float)
        elif kind == "dyadic":
            values = st.integers(1, 16).map(lambda v: v / 8)
        elif kind == "tenths":  # forced near-ties: sums of tenths round differently
            values = st.integers(1, 6).map(lambda v: v / 10)
        elif kind == "float":
            values = st.floats(0.01, 1.0, allow_nan=False, allow_infinity=False)
        else:  # "zeros": integer weights with many zeros
            values = st.integers(0, 2).map(float)
        w = np.array(
            draw(st.lists(st.lists(values, min_size=k, max_size=k), min_size=n_targets, max_size=n_targets)),
            dtype=float,
        )
    return idx, w, Y


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(problems(), st.sampled_from(["auto", "cpsat"]))
def test_matches_oracle_and_bounds(problem, method):
    idx, w, Y = problem
    nl, pl, apl = oracle.all_label_sets(idx, w, Y)
    possible, stats = possible_labels(idx, w, Y, method=method, return_stats=True)
    np.testing.assert_array_equal(possible, pl)
    necessary = necessary_labels(idx, w, Y)
    approx = approx_possible_labels(idx, w, Y)
    assert not (necessary & ~possible).any(), "NL must be inside PL"
    assert not (possible & ~approx).any(), "PL must be inside APL"
    counts = [stats[key] for key in ("bounds", "greedy", "flow", "cpsat", "enumeration")]
    assert min(counts) >= 0 and sum(counts) == possible.size
    if method == "cpsat":
        assert stats["flow"] == 0


@SETTINGS
@given(problems(kinds=("equal",)))
def test_flow_matches_oracle_on_equal_weights(problem):
    idx, w, Y = problem
    _, pl, _ = oracle.all_label_sets(idx, w, Y)
    possible, stats = possible_labels(idx, w, Y, method="flow", return_stats=True)
    np.testing.assert_array_equal(possible, pl)
    assert stats["cpsat"] == 0 and stats["enumeration"] == 0


@SETTINGS
@given(problems())
def test_witness_for_every_label(problem):
    idx, w, Y = problem
    _, pl, _ = oracle.all_label_sets(idx, w, Y)
    for t in range(idx.shape[0]):
        for label in range(Y.shape[1]):
            completion = witness(idx[t], w[t], Y, label)
            if pl[t, label]:
                _assert_witness(idx[t], w[t], Y, label, completion)
            else:
                assert completion is None


@SETTINGS
@given(problems(kinds=("equal", "integer", "dyadic", "zeros")), st.randoms(use_true_random=False))
def test_permuting_neighbours_changes_nothing(problem, random):
    idx, w, Y = problem
    reference = possible_labels(idx, w, Y)
    perm = np.array([random.sample(range(idx.shape[1]), idx.shape[1]) for _ in range(idx.shape[0])])
    rows = np.arange(idx.shape[0])[:, None]
    np.testing.assert_array_equal(possible_labels(idx[rows, perm], w[rows, perm], Y), reference)
    np.testing.assert_array_equal(possible_labels(idx[rows, perm], w[rows, perm], Y, method="cpsat"), reference)


def test_chunked_targets_agree_with_oracle(monkeypatch):
    # Force many small chunks so the per-chunk bookkeeping (target offsets) is exercised.
    monkeypatch.setattr(possible_module, "CHUNK_CELLS", 1)
    rng = np.random.default_rng(7)
    Y = rng.random((15, 4)) < 0.4
    Y[np.arange(15), rng.integers(0, 4, 15)] = True
    idx = rng.integers(0, 15, (40, 5))
    w = rng.integers(1, 4, (40, 5)).astype(float)
    _, pl, _ = oracle.all_label_sets(idx, w, Y)
    possible, stats = possible_labels(idx, w, Y, return_stats=True)
    np.testing.assert_array_equal(possible, pl)
    assert sum(stats[key] for key in ("bounds", "greedy", "flow", "cpsat", "enumeration")) == 40 * 4


# --------------------------------------------------------------------------- errors


def test_flow_with_unequal_weights_raises():
    Y = _sets((0,), (1, 2), (1, 2), n_labels=3)
    idx, w = _one_target(Y, [1.0, 2.0, 1.0])
    with pytest.raises(InvalidInput, match=r"method='flow'.*w row 0"):
        possible_labels(idx, w, Y, method="flow")


def test_flow_ignores_zero_weights_when_checking_equality():
    Y = _sets((0,), (1, 2), (1, 2), n_labels=3)
    idx, w = _one_target(Y, [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(possible_labels(idx, w, Y, method="flow"), [[True, True, True]])


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"method": "greedy"}, InvalidInput, r"method must be one of auto, flow, cpsat; got 'greedy'"),
        ({"method": None}, InvalidInput, r"method must be one of"),
        ({"time_limit": 0.0}, InvalidInput, r"time_limit must be > 0"),
        ({"time_limit": float("nan")}, InvalidInput, r"time_limit must be finite"),
        ({"time_limit": "1"}, TypeError, r"time_limit must be a number"),
    ],
)
def test_parameter_errors(kwargs, error, match):
    Y = _sets((0,), (1, 2), n_labels=3)
    idx, w = _one_target(Y, [1.0, 1.0])
    with pytest.raises(error, match=match):
        possible_labels(idx, w, Y, **kwargs)


def test_solver_unknown_raises_naming_target_and_label(monkeypatch):
    from ortools.sat.python import cp_model

    monkeypatch.setattr(cp_model.CpSolver, "solve", lambda self, model, *args, **kwargs: cp_model.UNKNOWN)
    Y = _sets((0,), (1, 2), (1, 2), (1, 2), n_labels=3)
    idx, w = _one_target(Y, [5, 3, 3, 3])
    with pytest.raises(SolverError, match=r"UNKNOWN for target 0, label 0"):
        possible_labels(idx, w, Y)


def test_enumeration_limit_raises(monkeypatch):
    monkeypatch.setattr(possible_module, "MAX_ENUMERATION", 1)
    Y = _sets((0,), (1, 2), (1, 2), (1, 2), n_labels=3)
    idx, w = _one_target(Y, [0.3, 0.1, 0.2, 0.3])
    with pytest.raises(SolverError, match=r"target 0, label 0.*enumeration limit"):
        possible_labels(idx, w, Y)


def test_cpsat_alone_agrees_with_possible_labels():
    """The benchmark's CP-SAT-only baseline decides every pair as the staged solver does."""
    from engine.winners import possible_by_cpsat_alone

    rng = np.random.default_rng(3)
    Y = rng.random((30, 4)) < 0.4
    Y[np.arange(30), rng.integers(0, 4, 30)] = True
    idx = rng.integers(0, 30, (12, 5))
    w = rng.random((12, 5))
    possible = possible_labels(idx, w, Y)
    decided = np.array([[possible_by_cpsat_alone(idx[t], w[t], Y, m) for m in range(4)] for t in range(12)])
    np.testing.assert_array_equal(decided, possible)
