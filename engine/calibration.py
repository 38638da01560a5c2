"""An exact error bound and a threshold chosen from audits, valid for **one planned read**.

The app no longer states model labels with this module: its statement is re-read after every
answer, and :mod:`engine.lots` certifies frozen lots with an anytime-valid confidence sequence
instead. What stays here is the single-read procedure, which ``benchmarks/accept_scores.py``
uses to compare accept scores at a fixed audit budget (where one read is exactly the use).

What is computed
----------------
A few items are drawn uniformly at random among the items the model would label, an expert
answers them, and the answers say whether the model's label was right. From those audits:

* :func:`binomial_upper_bound` is the exact one-sided Clopper–Pearson [1]_ upper confidence
  bound on an error rate, from ``errors`` wrong labels among ``n`` audited ones;
* :func:`audits_needed` is the number of audits (with a given number of errors) from which
  that bound first reaches a target: 45 error-free audits state 5 % at 90 % confidence;
* :func:`calibrate_threshold` chooses the accept-score threshold above which model labels are
  kept, so that their error is at most ``target`` with probability at least ``confidence``,
  although the threshold is chosen from the same audits that judge it (Learn then Test [2]_).

The sampling model
------------------
The items the model would label, with their accept scores, are fixed when the audits are
drawn; only the draw is random. Audits are a uniform random sample of those items, with or
without replacement. For a threshold ``s``, the audits with score ``≥ s`` are, given how many
they are, a uniform random sample of the items with score ``≥ s``: so the number of wrong
labels among them is binomial (with replacement) or hypergeometric (without) with the error
rate of exactly the labels that threshold keeps. The binomial p-value below is exact for the
first and conservative for the second in the region where it rejects (a hypergeometric law
is more concentrated about its mean than the binomial of the same rate, Hoeffding 1963,
Theorem 4, and rejection needs a count well below the null mean). The guarantee is therefore
about the *kept labels themselves*, not about a population they were drawn from.

Answers to ranked queries are not a uniform sample (they are chosen where the model is least
sure) and must not be passed as audits.

References
----------
.. [1] C. J. Clopper and E. S. Pearson, "The use of confidence or fiducial limits illustrated
       in the case of the binomial", Biometrika 26(4), 404-413, 1934.
.. [2] A. N. Angelopoulos, S. Bates, E. J. Candès, M. I. Jordan and L. Lei, "Learn then Test:
       Calibrating Predictive Algorithms to Achieve Risk Control", arXiv:2110.01052, 2021.
.. [3] A. N. Angelopoulos, S. Bates, A. Fisch, L. Lei and T. Schuster, "Conformal Risk
       Control", ICLR 2024. arXiv:2208.02814.
.. [4] A. Javanmardi, Y. Sale, P. Hofman and E. Hüllermeier, "Conformal Prediction with
       Partially Labeled Data", COPA 2023. arXiv:2306.01191.
.. [5] T. Fuchs and F. Kalinke, "Partial-Label Learning with Conformal Candidate Cleaning",
       2025. arXiv:2502.07661.
.. [6] W. Hoeffding, "Probability inequalities for sums of bounded random variables",
       Journal of the American Statistical Association 58(301), 13-30, 1963.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import beta, binom

from engine._validation import check_count, check_level
from engine.exceptions import InvalidInput

__all__ = ["Calibration", "audits_needed", "binomial_upper_bound", "calibrate_threshold"]


def _upper_bound(errors: int, n: int, confidence: float) -> float:
    """Clopper–Pearson upper bound; trusts its input (see :func:`binomial_upper_bound`)."""
    if errors >= n:  # also n = 0: no audit bounds nothing
        return 1.0
    return float(beta.ppf(confidence, errors + 1, n - errors))


def binomial_upper_bound(errors: int, n: int, confidence: float = 0.9) -> float:
    """Exact one-sided upper confidence bound on an error rate (Clopper & Pearson, 1934).

    Derivation. Let ``X ~ Binomial(n, p)`` count the wrong labels among ``n`` audited ones.
    ``F(p) = P_p(X ≤ k)`` falls continuously from 1 at ``p = 0`` to 0 at ``p = 1`` (for
    ``k < n``), and by the beta–binomial identity ``F(p) = 1 − I_p(k + 1, n − k)``, where
    ``I_p`` is the regularised incomplete beta function, i.e. the distribution function of
    ``Beta(k + 1, n − k)``. The bound is the ``p`` at which observing ``k`` or fewer errors
    becomes as unlikely as ``α = 1 − confidence``::

        u(k) = the p with F(p) = α  =  Beta(k + 1, n − k).ppf(1 − α).

    Coverage: for the true ``p``, ``u(X) < p`` holds exactly when ``F_p(X) < α`` (``F`` is
    decreasing in ``p``), and ``P_p(F_p(X) < α) ≤ α`` because ``F_p(X)`` is the distribution
    function of ``X`` evaluated at ``X`` (it is stochastically no smaller than a uniform). So
    ``P(p ≤ u(X)) ≥ 1 − α`` for every ``p`` and every ``n``: exact, not asymptotic, and
    conservative only because ``X`` is discrete. With ``k = n`` (or ``n = 0``) nothing bounds
    the rate below 1. With no error the bound is ``1 − α^(1/n)``.

    Parameters
    ----------
    errors : int
        Wrong model labels among the audited ones, ``0 ≤ errors ≤ n``.
    n : int
        Audited model labels, ``n ≥ 0``.
    confidence : float, default=0.9
        ``1 − α``, strictly between 0 and 1.

    Returns
    -------
    bound : float
        The upper bound ``u`` in ``[0, 1]``; 1.0 when ``n = 0`` or ``errors = n``.

    Raises
    ------
    TypeError
        When a count is not an integer or ``confidence`` not a number.
    InvalidInput
        When a value is out of range (``errors > n``, a negative count, ``confidence`` not in (0, 1)).

    References
    ----------
    .. [1] C. J. Clopper and E. S. Pearson, "The use of confidence or fiducial limits
           illustrated in the case of the binomial", Biometrika 26(4), 404-413, 1934.

    Examples
    --------
    >>> round(binomial_upper_bound(0, 45, 0.9), 4)
    0.0499
    >>> round(binomial_upper_bound(2, 100, 0.9), 4)
    0.0523
    >>> binomial_upper_bound(0, 0)
    1.0
    """
    n = check_count(n, "n")
    errors = check_count(errors, "errors")
    if errors > n:
        raise InvalidInput(f"errors must be <= n ({n}), got {errors}")
    return _upper_bound(errors, n, check_level(confidence, "confidence"))


def audits_needed(target: float, confidence: float = 0.9, errors: int = 0) -> int:
    """Smallest number of audits, ``errors`` of them wrong, whose bound states ``target``.

    The smallest ``n`` with ``binomial_upper_bound(errors, n, confidence) ≤ target``, i.e.
    with ``P(Binomial(n, target) ≤ errors) ≤ 1 − confidence``. Without errors this is the
    smallest ``n`` with ``(1 − target)^n ≤ 1 − confidence``, ``⌈ln(1 − confidence) /
    ln(1 − target)⌉``: 45 audits for 5 % at 90 %, 59 at 95 %, 114 for 2 % at 90 %. Each error
    costs more audits (77 for 5 % at 90 % with one error).

    Parameters
    ----------
    target : float
        The error rate to state, strictly between 0 and 1.
    confidence : float, default=0.9
        Strictly between 0 and 1.
    errors : int, default=0
        Wrong labels among the audits.

    Returns
    -------
    n : int
        The number of audits (including the ``errors`` wrong ones).

    Examples
    --------
    >>> audits_needed(0.05, 0.9)
    45
    >>> audits_needed(0.05, 0.9, errors=1)
    77
    """
    target = check_level(target, "target")
    confidence = check_level(confidence, "confidence")
    errors = check_count(errors, "errors")
    return _audits_needed(target, confidence, errors)


def _audits_needed(target: float, confidence: float, errors: int) -> int:
    alpha = 1.0 - confidence
    # P(Bin(n, t) <= e) falls as n grows: start from the error-free count (a lower bound,
    # since more errors need more audits) and double, then bisect.
    low = max(errors + 1, math.ceil(math.log(alpha) / math.log1p(-target)))
    if binom.cdf(errors, low, target) <= alpha:
        # Rounding in the closed form can overshoot by one.
        while low > errors + 1 and binom.cdf(errors, low - 1, target) <= alpha:
            low -= 1
        return low
    high = 2 * low
    while binom.cdf(errors, high, target) > alpha:
        low, high = high, 2 * high
    while high - low > 1:  # binom.cdf(errors, low) > alpha >= binom.cdf(errors, high)
        mid = (low + high) // 2
        if binom.cdf(errors, mid, target) <= alpha:
            high = mid
        else:
            low = mid
    return high


@dataclass(frozen=True)
class Calibration:
    """Which model labels may be kept, and what is stated about their error.

    Attributes
    ----------
    threshold : float or None
        Keep the model labels whose accept score is ``≥ threshold``; ``None`` when the audits
        back no threshold (keep none).
    bound : float or None
        The error stated for the kept labels: ``target``, which they stay under with
        probability at least ``confidence``. ``None`` with no threshold: no rate is stated
        without evidence.
    audits : int
        Audits with score ``≥ threshold`` (all audits when ``threshold`` is None).
    errors : int
        Wrong model labels among those audits.
    more_audits_needed : int
        0 when a threshold was found. Otherwise how many more audits, all right, the whole
        set of audits would need before its Clopper–Pearson bound reached ``target``
        (``audits_needed(target, confidence, errors) − audits``), at least 1: a lower bound
        on the work left, since new audits may find errors. (When the whole set already
        reaches the target but an error among the most confident audits stopped the sequence,
        how many more are needed cannot be told; 1 is given.)
    target : float
        The error rate asked for.
    confidence : float
        The confidence asked for.
    observed_error : float or None
        ``errors / audits`` (None without audits), for display beside the stated bound.
    clopper_pearson : float
        :func:`binomial_upper_bound` of ``errors`` among ``audits``. Valid on its own only for
        a threshold fixed before seeing the audits; at a threshold chosen from them only
        ``bound`` is guaranteed.
    """

    threshold: float | None
    bound: float | None
    audits: int
    errors: int
    more_audits_needed: int
    target: float
    confidence: float
    observed_error: float | None
    clopper_pearson: float


def _check_audits(scores: Any, correct: Any) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores)
    if s.ndim != 1:
        raise InvalidInput(f"scores must be a 1-D array (one accept score per audit), got shape {s.shape}")
    if s.dtype == bool or s.dtype.kind not in "iuf":
        raise InvalidInput(f"scores must be numbers, got dtype {s.dtype}")
    s = s.astype(np.float64)
    bad = ~np.isfinite(s)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InvalidInput(f"scores row {row} is {s[row]}; accept scores must be finite")
    c = np.asarray(correct)
    if c.ndim != 1 or c.shape[0] != s.shape[0]:
        raise InvalidInput(f"correct must be a 1-D array of shape ({s.shape[0]},) like scores, got shape {c.shape}")
    if c.dtype != bool:
        if c.dtype.kind not in "iuf" or not np.isin(c, (0, 1)).all():
            raise InvalidInput(
                f"correct must be boolean (or 0/1): whether each audited model label was right; got dtype {c.dtype}"
            )
        c = c.astype(bool)
    return s, c


def calibrate_threshold(scores: Any, correct: Any, *, target: float, confidence: float = 0.9) -> Calibration:
    """The lowest accept-score threshold whose kept labels are backed at ``target`` error.

    Procedure (fixed-sequence testing, Learn then Test [2]_). The candidate thresholds are
    the distinct audit scores ``s_1 > s_2 > …``, from the most confident down. Threshold
    ``s_j`` keeps the items with score ``≥ s_j``; the audits among them, ``m_j`` of them with
    ``k_j`` wrong, are a uniform sample of those items (module docstring). Its null
    hypothesis "the kept labels' error exceeds ``target``" has the exact binomial p-value
    ``p_j = P(Binomial(m_j, target) ≤ k_j)``, and ``p_j ≤ α = 1 − confidence`` exactly when
    the Clopper–Pearson bound of ``(k_j, m_j)`` is ``≤ target``. The nulls are tested in
    order and the procedure stops at the first one it cannot reject; the threshold is the
    last rejected one.

    Why choosing from the same audits keeps the guarantee. A false statement needs the
    *first* true null of the sequence to be rejected, which happens with probability at most
    ``α``; every later hypothesis is reached only through it. So the family-wise error is at
    most ``α`` with no union bound over the thresholds (Angelopoulos et al. [2]_, Prop. 1
    on fixed-sequence testing), and the chosen threshold's kept labels have error
    ``≤ target`` with probability ``≥ confidence``.

    Thresholds kept by fewer than ``audits_needed(target, confidence)`` audits cannot be
    rejected even with no error; they are not tested (testing them would end the sequence
    at once). The sequence therefore starts at the ``audits_needed``-th highest audit score,
    a start that depends on where the audits fall, which the textbook argument (a sequence
    fixed in advance) does not cover word for word; each test is still exact given its audit
    count, and ``tests/engine/test_calibration.py`` checks the coverage by simulation. Ties:
    audits with equal scores enter together.

    What is not used: conformal risk control [3]_ bounds the *expected* error of the kept
    labels, not its value with high probability, which is what a stated "error ≤ 5 % at 90 %
    confidence" promises; the partial-label conformal methods [4]_ [5]_ calibrate
    prediction *sets* from candidate sets, while the audits here give exact right/wrong
    answers about single labels, so a binomial test is exact and needs no set-valued score.

    Parameters
    ----------
    scores : array-like of shape (n_audits,)
        Accept score of the model label of each audited item (higher is more trusted).
    correct : bool array-like of shape (n_audits,)
        Whether each audited model label was right.
    target : float
        Largest error rate accepted in the kept labels, strictly between 0 and 1.
    confidence : float, default=0.9
        Probability with which the statement must hold, strictly between 0 and 1.

    Returns
    -------
    Calibration
        The threshold (or None), the stated bound, and the audits behind it.

    References
    ----------
    .. [2] A. N. Angelopoulos, S. Bates, E. J. Candès, M. I. Jordan and L. Lei, "Learn then
           Test: Calibrating Predictive Algorithms to Achieve Risk Control", 2021.
    .. [3] A. N. Angelopoulos, S. Bates, A. Fisch, L. Lei and T. Schuster, "Conformal Risk
           Control", ICLR 2024.
    .. [4] A. Javanmardi, Y. Sale, P. Hofman and E. Hüllermeier, "Conformal Prediction with
           Partially Labeled Data", COPA 2023.
    .. [5] T. Fuchs and F. Kalinke, "Partial-Label Learning with Conformal Candidate
           Cleaning", 2025.

    Examples
    --------
    Fifty audits: the 45 most confident labels right, then 5 wrong ones.

    >>> import numpy as np
    >>> scores = np.linspace(1.0, 0.0, 50)
    >>> correct = np.arange(50) < 45
    >>> result = calibrate_threshold(scores, correct, target=0.05, confidence=0.9)
    >>> round(result.threshold, 4), result.audits, result.errors, result.bound
    (0.102, 45, 0, 0.05)
    >>> calibrate_threshold(scores[:30], correct[:30], target=0.05).more_audits_needed
    15
    """
    scores, correct = _check_audits(scores, correct)
    target = check_level(target, "target")
    confidence = check_level(confidence, "confidence")
    alpha = 1.0 - confidence
    n_total, errors_total = int(scores.size), int((~correct).sum())

    order = np.argsort(-scores, kind="stable")
    s_sorted, wrong = scores[order], ~correct[order]
    kept = np.arange(1, n_total + 1)
    errors = np.cumsum(wrong)
    # Only the last audit of a run of equal scores ends a threshold: ties enter together.
    ends = np.flatnonzero(np.r_[s_sorted[1:] != s_sorted[:-1], True]) if n_total else np.array([], dtype=np.intp)
    ends = ends[kept[ends] >= _audits_needed(target, confidence, 0)]
    p_values = binom.cdf(errors[ends], kept[ends], target)
    rejected = p_values <= alpha
    n_passed = int(np.argmin(rejected)) if not rejected.all() else rejected.size

    if n_passed == 0:
        needed = _audits_needed(target, confidence, errors_total) - n_total
        return Calibration(
            threshold=None,
            bound=None,
            audits=n_total,
            errors=errors_total,
            more_audits_needed=max(needed, 1),
            target=target,
            confidence=confidence,
            observed_error=errors_total / n_total if n_total else None,
            clopper_pearson=_upper_bound(errors_total, n_total, confidence),
        )
    last = int(ends[n_passed - 1])
    m, k = int(kept[last]), int(errors[last])
    return Calibration(
        threshold=float(s_sorted[last]),
        bound=target,
        audits=m,
        errors=k,
        more_audits_needed=0,
        target=target,
        confidence=confidence,
        observed_error=k / m,
        clopper_pearson=_upper_bound(k, m, confidence),
    )
