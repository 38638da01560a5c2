"""Accept scores: how much to trust each model label, from what the learners already compute.

A model label can be kept when its accept score reaches a threshold chosen from audits (the
app freezes lots above a learned threshold and certifies them with :mod:`engine.lots`;
``benchmarks/accept_scores.py`` compares scores with
:func:`engine.calibration.calibrate_threshold`); the better a score ranks right labels above
wrong ones, the more labels a target error lets through. Each function here takes arrays a
learner already has and returns, per item, the model label and its score (higher is more
trusted). Nothing is fitted or searched.

* :func:`dst_margin` — DST-PLL's margin ``bel(ŷ) − max_{y≠ŷ} pl(y)`` [1]_ (its reject
  option accepts exactly the positive ones, guesses aside), in ``[−1, 1]``.
* :func:`posterior_scores` — the largest posterior probability among an item's candidates:
  the PL-kNN vote [2]_ restricted to the candidate set and normalised, or
  :class:`engine.decision_change.DecisionChangeRanker`'s answer posterior ``p_n`` (its
  ``posterior`` attribute), in ``[0, 1]``.
* :func:`margin_then_posterior` — the DST-PLL margin with ties broken by a posterior: margins
  are multiples of ``2^-m`` and take few values, and a threshold can only keep or drop a
  whole run of equal scores.

Only the order of the scores matters to the threshold, not their scale.

References
----------
.. [1] T. Fuchs, F. Kalinke and K. Böhm, "Partial-Label Learning with a Reject Option",
       Transactions on Machine Learning Research, 2025.
.. [2] E. Hüllermeier and J. Beringer, "Learning from ambiguously labeled examples",
       Intelligent Data Analysis 10(5), 419-439, 2006.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine._validation import check_candidates
from engine.exceptions import InvalidInput

__all__ = ["dst_margin", "margin_then_posterior", "posterior_scores"]


def _check_matrix(values: Any, name: str, *, shape: tuple[int, ...] | None = None) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise InvalidInput(
            f"{name} must be a 2-D (n_items, n_labels) array with at least one label, got shape {arr.shape}"
        )
    if shape is not None and arr.shape != shape:
        raise InvalidInput(f"{name} has shape {arr.shape} but {shape} was expected")
    if arr.dtype == bool or arr.dtype.kind not in "iuf":
        raise InvalidInput(f"{name} must hold numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    bad = ~np.isfinite(arr).all(axis=1) | (arr < 0).any(axis=1)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InvalidInput(f"{name} row {row} has a negative, NaN or infinite value: {arr[row].tolist()}")
    return arr


def dst_margin(belief: Any, plausibility: Any) -> tuple[np.ndarray, np.ndarray]:
    """DST-PLL's label and margin ``bel(ŷ) − max_{y≠ŷ} pl(y)`` from beliefs and plausibilities.

    ``ŷ`` is the label of largest singleton belief (the lowest index among exact ties, whose
    margin is then ``≤ 0``: a tie is a guess, never accepted). The margin is what
    :attr:`engine.dst.DstPllClassifier.disambiguate_margin_` and
    :meth:`~engine.dst.DstPllClassifier.decision_margin` hold; positive exactly when the
    label passes DST-PLL's reject option (Fuchs et al., Theorem 4.2).

    Parameters
    ----------
    belief : float array of shape (n_items, n_labels)
        Singleton beliefs ``m({y})``, e.g. ``DstPllClassifier.disambiguate_belief_`` or the
        first array of :meth:`~engine.dst.DstPllClassifier.belief_plausibility`.
    plausibility : float array of shape (n_items, n_labels)
        Plausibilities ``pl(y)``.

    Returns
    -------
    labels : int array of shape (n_items,)
        ``ŷ``.
    margin : float array of shape (n_items,)
        In ``[−1, 1]``; with a single label, ``bel(ŷ)``.

    Examples
    --------
    Belief 0.625 on label 0, plausibility 0.25 of the others (the worked example of
    :class:`~engine.dst.DstPllClassifier`): margin 0.375. A flat mass gives a negative margin.

    >>> labels, margin = dst_margin([[0.625, 0.0, 0.0], [0.0, 0.0, 0.0]], [[1.0, 0.25, 0.25], [1.0, 1.0, 1.0]])
    >>> labels.tolist(), margin.tolist()
    ([0, 0], [0.375, -1.0])
    """
    bel = _check_matrix(belief, "belief")
    pl = _check_matrix(plausibility, "plausibility", shape=bel.shape)
    rows = np.arange(bel.shape[0])
    labels = bel.argmax(axis=1)
    if bel.shape[1] == 1:
        return labels, bel[:, 0].copy()
    others = pl.copy()
    others[rows, labels] = -np.inf
    return labels, bel[rows, labels] - others.max(axis=1)


def posterior_scores(posterior: Any, candidates: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """The label of largest posterior among an item's candidates and that posterior.

    The posterior is restricted to the candidate set (the true label is in it) and
    normalised there: ``p(y) = v(y) [y ∈ S] / Σ_{y' ∈ S} v(y')``. A row with no weight on its
    candidates gets the uniform posterior ``1 / |S|``. Ties take the lowest label index.

    Parameters
    ----------
    posterior : float array of shape (n_items, n_labels)
        Non-negative weights per label: PL-kNN vote totals (``PlKnnClassifier.votes``, or
        the transductive votes of the neighbour graph), or the answer posterior of
        :class:`engine.decision_change.DecisionChangeRanker` (``.posterior``, already
        restricted and normalised).
    candidates : bool array of shape (n_items, n_labels), optional
        Candidate sets; all labels when omitted (a new item may be any label).

    Returns
    -------
    labels : int array of shape (n_items,)
    scores : float array of shape (n_items,)
        The posterior of ``labels``, in ``[1/|S|, 1]``.

    Examples
    --------
    Votes 3, 1 and 4 for labels 0, 1, 2; the candidate set ``{0, 1}`` leaves 3 : 1.

    >>> labels, scores = posterior_scores([[3.0, 1.0, 4.0]], [[True, True, False]])
    >>> labels.tolist(), scores.tolist()
    ([0], [0.75])
    """
    votes = _check_matrix(posterior, "posterior")
    sets = (
        np.ones(votes.shape, dtype=bool)
        if candidates is None
        else check_candidates(candidates, name="candidates", n_rows=votes.shape[0])
    )
    if sets.shape != votes.shape:
        raise InvalidInput(f"candidates has shape {sets.shape} but posterior has shape {votes.shape}")
    mass = np.where(sets, votes, 0.0)
    total = mass.sum(axis=1, keepdims=True)
    uniform = sets / sets.sum(axis=1, keepdims=True)
    post = np.where(total > 0, mass / np.where(total > 0, total, 1.0), uniform)
    labels = post.argmax(axis=1)
    return labels, post[np.arange(post.shape[0]), labels]


def margin_then_posterior(margin: Any, posterior: Any) -> np.ndarray:
    """One score ordering items by DST-PLL margin first, then by a posterior among equal margins.

    ``score = margin + posterior · ε`` with ``ε`` smaller than half the smallest gap between
    distinct margins, so the order of distinct margins is kept and only ties are broken
    (between posteriors that differ by more than the float resolution of the sum, about
    ``1e-16 / ε``: ample for vote shares, which are ratios of small integers).
    The label to deliver stays DST-PLL's (the posterior only breaks ties of trust).

    Parameters
    ----------
    margin : float array of shape (n_items,)
        From :func:`dst_margin`.
    posterior : float array of shape (n_items,)
        In ``[0, 1]``, e.g. the score of :func:`posterior_scores`.

    Returns
    -------
    scores : float array of shape (n_items,)

    Examples
    --------
    >>> margin_then_posterior([0.5, 0.5, 0.25], [0.6, 0.9, 1.0]).argsort().tolist()
    [2, 0, 1]
    """
    m = np.asarray(margin, dtype=np.float64)
    p = np.asarray(posterior, dtype=np.float64)
    if m.ndim != 1 or p.shape != m.shape:
        raise InvalidInput(f"margin and posterior must be 1-D arrays of one shape, got {m.shape} and {p.shape}")
    for name, arr in (("margin", m), ("posterior", p)):
        bad = ~np.isfinite(arr)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise InvalidInput(f"{name} row {row} is {arr[row]}; scores must be finite")
    if ((p < 0) | (p > 1)).any():
        row = int(np.flatnonzero((p < 0) | (p > 1))[0])
        raise InvalidInput(f"posterior row {row} is {p[row]}; it must be in [0, 1]")
    levels = np.unique(m)
    gap = float(np.diff(levels).min()) if levels.size > 1 else 1.0
    return m + p * (gap / 4.0)
