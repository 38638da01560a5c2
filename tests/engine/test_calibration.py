"""The error bound and the threshold chosen from audits: exact small cases, an oracle, and the coverage claim."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

from engine.calibration import Calibration, audits_needed, binomial_upper_bound, calibrate_threshold


def exact_cdf(k: int, n: int, p: float) -> float:
    """P(Binomial(n, p) ≤ k) summed term by term (no scipy)."""
    return math.fsum(math.comb(n, i) * p**i * (1.0 - p) ** (n - i) for i in range(k + 1))


def bisect_bound(k: int, n: int, alpha: float) -> float:
    """The p at which the exact sum falls to alpha, by bisection (the sum decreases in p)."""
    low, high = 0.0, 1.0
    for _ in range(200):
        mid = 0.5 * (low + high)
        if exact_cdf(k, n, mid) > alpha:
            low = mid
        else:
            high = mid
    return high


# --------------------------------------------------------------------------- the bound


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 300).flatmap(lambda n: st.tuples(st.integers(0, n - 1), st.just(n))),
    st.sampled_from([0.5, 0.8, 0.9, 0.95, 0.99]),
)
def test_bound_is_where_the_binomial_tail_reaches_alpha(counts, confidence):
    errors, n = counts
    alpha = 1.0 - confidence
    u = binomial_upper_bound(errors, n, confidence)
    assert 0.0 < u < 1.0
    assert binom.cdf(errors, n, u) == pytest.approx(alpha, abs=1e-9)
    # The smallest such p: just below it, k or fewer errors are still more likely than alpha.
    assert exact_cdf(errors, n, u * (1 - 1e-7)) > alpha
    assert u == pytest.approx(bisect_bound(errors, n, alpha), abs=1e-9)


@pytest.mark.parametrize("n", [1, 2, 10, 45, 1000])
def test_bound_without_errors_has_the_closed_form(n):
    assert binomial_upper_bound(0, n, 0.9) == pytest.approx(1.0 - 0.1 ** (1.0 / n), rel=1e-12)


@pytest.mark.parametrize(("errors", "n"), [(0, 0), (3, 3), (1, 1)])
def test_no_audit_or_all_wrong_bounds_nothing(errors, n):
    assert binomial_upper_bound(errors, n, 0.9) == 1.0


def test_bound_grows_with_errors_and_confidence_and_falls_with_audits():
    assert binomial_upper_bound(1, 100) > binomial_upper_bound(0, 100)
    assert binomial_upper_bound(1, 100, 0.95) > binomial_upper_bound(1, 100, 0.9)
    assert binomial_upper_bound(1, 200) < binomial_upper_bound(1, 100)


# --------------------------------------------------------------------------- audits needed


@pytest.mark.parametrize(
    ("target", "confidence", "errors", "expected"),
    [(0.05, 0.9, 0, 45), (0.05, 0.95, 0, 59), (0.02, 0.9, 0, 114), (0.10, 0.9, 0, 22), (0.05, 0.9, 1, 77)],
)
def test_audits_needed_worked_values(target, confidence, errors, expected):
    assert audits_needed(target, confidence, errors) == expected


@settings(max_examples=200, deadline=None)
@given(st.floats(0.005, 0.5), st.floats(0.5, 0.99), st.integers(0, 20))
def test_audits_needed_is_the_smallest_count_that_states_the_target(target, confidence, errors):
    # The definition: the binomial p-value of "error > target" reaches alpha (the bound then
    # reaches the target, up to rounding at exact equality).
    alpha = 1.0 - confidence
    n = audits_needed(target, confidence, errors)
    assert binom.cdf(errors, n, target) <= alpha
    assert binomial_upper_bound(errors, n, confidence) <= target + 1e-12
    if n - 1 > errors:
        assert binom.cdf(errors, n - 1, target) > alpha


# --------------------------------------------------------------------------- the threshold


def fixed_sequence_oracle(scores, correct, target, confidence):
    """The procedure written out plainly: distinct scores from the top, stop at the first failure."""
    start = audits_needed(target, confidence)
    threshold = None
    for s in sorted(set(scores.tolist()), reverse=True):
        kept = scores >= s
        m, k = int(kept.sum()), int((~correct[kept]).sum())
        if m < start:
            continue
        if binom.cdf(k, m, target) <= 1.0 - confidence:  # p-value of "error among kept > target"
            threshold = s
        else:
            break
    return threshold


@st.composite
def audit_sets(draw):
    n = draw(st.integers(0, 120))
    scores = np.array(
        draw(
            st.lists(st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0]) | st.floats(-1, 1), min_size=n, max_size=n)
        )
    )
    # Mostly right labels, so that thresholds are found often.
    correct = np.array(
        draw(st.lists(st.booleans() | st.just(True) | st.just(True), min_size=n, max_size=n)), dtype=bool
    )
    return scores, correct, draw(st.sampled_from([0.05, 0.1, 0.2])), draw(st.sampled_from([0.8, 0.9]))


@settings(max_examples=300, deadline=None)
@given(audit_sets())
def test_threshold_matches_the_plain_procedure(case):
    scores, correct, target, confidence = case
    result = calibrate_threshold(scores, correct, target=target, confidence=confidence)
    assert result.threshold == fixed_sequence_oracle(scores, correct, target, confidence)
    if result.threshold is None:
        assert result.bound is None and result.more_audits_needed >= 1
        assert (result.audits, result.errors) == (scores.size, int((~correct).sum()))
    else:
        kept = scores >= result.threshold
        assert (result.audits, result.errors) == (int(kept.sum()), int((~correct[kept]).sum()))
        assert result.bound == target and result.more_audits_needed == 0
        assert result.clopper_pearson <= target + 1e-12


@settings(max_examples=100, deadline=None)
@given(audit_sets(), st.randoms(use_true_random=False))
def test_threshold_does_not_depend_on_the_order_of_the_audits(case, random):
    scores, correct, target, confidence = case
    order = list(range(scores.size))
    random.shuffle(order)
    assert calibrate_threshold(scores, correct, target=target, confidence=confidence) == calibrate_threshold(
        scores[order], correct[order], target=target, confidence=confidence
    )


def test_forty_five_right_audits_state_five_percent():
    scores = np.linspace(1.0, 0.0, 50)
    correct = np.arange(50) < 45
    result = calibrate_threshold(scores, correct, target=0.05, confidence=0.9)
    assert result.threshold == scores[44]
    assert (result.audits, result.errors, result.bound, result.observed_error) == (45, 0, 0.05, 0.0)


def test_an_error_among_the_most_confident_audits_ends_the_sequence():
    # 200 audits, one wrong at the top: the first tested threshold (45 audits, 1 error) fails,
    # and the sequence stops although the whole set (1 error in 200) would state 5 %.
    scores = np.linspace(1.0, 0.0, 200)
    correct = np.ones(200, dtype=bool)
    correct[0] = False
    result = calibrate_threshold(scores, correct, target=0.05, confidence=0.9)
    assert result.threshold is None and result.bound is None
    assert binomial_upper_bound(1, 200, 0.9) < 0.05  # the whole set alone would have stated it
    assert result.more_audits_needed == 1


def test_tied_scores_enter_together():
    # 44 right audits at score 1 and 2 wrong ones tied with the 45th at 0.5: the threshold 0.5
    # keeps all three (46 audits, 2 errors, not enough); nothing can be kept.
    scores = np.r_[np.ones(44), np.full(3, 0.5)]
    correct = np.r_[np.ones(45, bool), np.zeros(2, bool)]
    result = calibrate_threshold(scores, correct, target=0.05, confidence=0.9)
    assert result.threshold is None
    # Untied, the 45th right audit alone passes.
    result = calibrate_threshold(np.r_[np.ones(44), 0.6, 0.5, 0.5], correct, target=0.05, confidence=0.9)
    assert result.threshold == 0.6 and result.audits == 45


def test_without_audits_says_how_many_are_needed():
    result = calibrate_threshold([], [], target=0.05, confidence=0.9)
    assert result == Calibration(
        threshold=None,
        bound=None,
        audits=0,
        errors=0,
        more_audits_needed=45,
        target=0.05,
        confidence=0.9,
        observed_error=None,
        clopper_pearson=1.0,
    )
    result = calibrate_threshold(np.ones(30), np.ones(30, bool), target=0.05)
    assert result.more_audits_needed == 15
    # Three errors among 100: 132 audits with three errors would state 5 %.
    result = calibrate_threshold(np.ones(100), np.r_[np.zeros(3, bool), np.ones(97, bool)], target=0.05)
    assert result.more_audits_needed == audits_needed(0.05, 0.9, 3) - 100 == 32


def test_calibration_is_frozen():
    result = calibrate_threshold([], [], target=0.05)
    with pytest.raises(AttributeError):
        result.threshold = 0.0  # type: ignore[misc]


# --------------------------------------------------------------------------- the coverage claim


def test_stated_bound_covers_the_true_error_of_kept_labels_in_ninety_percent_of_runs():
    """A fixed synthetic set of model labels; 200 runs of random audits; the claim's frequency.

    The population: 3000 items the model would label, scores uniform in [0, 1], the model
    wrong with probability 0.3 (1 − s)^3 (about 8 % wrong overall, so keeping every label
    would break the target), drawn once. Each run audits 200 items at random (without
    replacement) and calibrates at 5 % and 90 %; the claim holds when the items with score
    ≥ threshold have true error ≤ 5 % (or when nothing is kept: nothing is stated).
    """
    rng = np.random.default_rng(20)
    n_items, n_audits, runs, target, confidence = 3000, 200, 200, 0.05, 0.9
    scores = rng.random(n_items)
    wrong = rng.random(n_items) < 0.3 * (1.0 - scores) ** 3
    failures, kept_runs = 0, 0
    for _ in range(runs):
        audited = rng.choice(n_items, size=n_audits, replace=False)
        result = calibrate_threshold(scores[audited], ~wrong[audited], target=target, confidence=confidence)
        if result.threshold is None:
            continue
        kept_runs += 1
        error = wrong[scores >= result.threshold].mean()
        failures += error > result.bound
    # Under the claim failures ~ Binomial(200, ≤ 0.1); more than its 99.9 % quantile refutes it.
    assert failures <= binom.ppf(0.999, runs, 1.0 - confidence)
    # Not trivially true: keeping everything would be wrong, yet almost every run keeps labels.
    assert wrong.mean() > target
    assert kept_runs >= 180
