"""Final labels from two bodies of evidence: the crowd's votes and the item's neighbours.

A candidate set made from votes forgets the counts ((a, a, b) and (a, b, b) both give
{a, b}) and can miss the truth. Here every vote and the neighbours' labels are pieces of
evidence in the sense of Dempster–Shafer theory (Shafer 1976), combined with Dempster's
rule, so that the counts matter and a label outside the votes can win when the neighbours
support it strongly enough.

The evidence
------------
**A vote** of annotator ``a`` for label ``v`` is a *simple support function*: mass ``r_a``
on ``{v}`` and ``1 - r_a`` on the whole frame Θ (Shafer's *discounting* of a categorical
vote by the source's reliability, Shafer 1976 ch. 11; Smets 1993). Its contour function
(the plausibility of each singleton) is ``pl(v) = 1`` and ``pl(x) = 1 - r_a`` for
``x ≠ v``. The discount is derived from the annotator's estimated accuracy ``p_a`` under
the one-coin model (Dawid & Skene 1979, with errors spread over the ``L - 1`` other
labels): the likelihood ratio of "the truth is ``v``" against "the truth is ``x ≠ v``" is
``p_a (L - 1) / (1 - p_a)``; setting the contour ratio ``1 / (1 - r_a)`` equal to it gives

    ``1 - r_a = min(1, (1 - p_a) / (p_a (L - 1)))``

so an annotator no better than chance (``p_a <= 1 / L``) carries no evidence.

**The neighbours** are one more source, treated like an annotator: the k-NN votes the
label of highest weighted mean ``q`` of its neighbours' soft labels (an answered neighbour:
its answer; otherwise the normalised contour of its votes alone, i.e. the plausibility
transform of Cobb & Shenoy 2006; the item's own votes never enter its ``q``). That vote is a
simple support function discounted by the k-NN's learnt accuracy with the same formula
(Denœux 1995 combines neighbours as discounted simple supports; here the neighbourhood
votes as one source, since neighbours share their evidence and are not independent). A tie
in ``q`` supports the set of the tied labels; an item without neighbour weight gets none.

**Accuracies** are *learnt from agreement*: a source's accuracy is its agreement with the
**expert's answer** on the items answered, and elsewhere with the **strict majority of the
other votes** on the item (items without one are not counted), under a uniform Beta(1, 1)
prior (Laplace's rule: ``(agreements + 1) / (comparisons + 2)``). This is the
agreement-with-consensus estimate of annotator quality that CROWDLAB starts from (Goh,
Tkachenko & Mueller 2022); answers, where given, are the truth itself. For the k-NN the
"other votes" are all the item's votes (the k-NN is not a voter).

Combination and decision
------------------------
Under Dempster's rule the contour function of the combination is proportional to the
product of the sources' contour functions (Shafer 1976; Cobb & Shenoy 2006, Theorem 3.1),
so the combined plausibility of label ``x`` is, up to a constant,

    ``log pl(x) = Σ_votes [v ≠ x] log(1 - r_a) + [x not a top label of q] log(1 - r_nn)``

and the final label is the label of highest plausibility (the decision of the plausibility
transform, Cobb & Shenoy 2006); ties go to the smallest label index. An answered item's
final label is its answer. Without neighbours the rule is the one-coin weighted majority
vote; the counts enter through the sum, and a label nobody voted for wins when the k-NN
names it and outweighs the votes.

The accuracies are then re-estimated against the combined labels (answers stay the truth)
and the combination repeated, as Dawid & Skene's EM re-estimates against its posterior,
until the labels no longer change (at most ``n_rounds`` rounds).

References
----------
Shafer, G. (1976). *A Mathematical Theory of Evidence*. Princeton University Press.
Dawid, A. P. & Skene, A. M. (1979). Maximum likelihood estimation of observer error-rates
using the EM algorithm. *Applied Statistics* 28(1), 20–28.
Smets, Ph. (1993). Belief functions: the disjunctive rule of combination and the generalized
Bayesian theorem. *IJAR* 9(1), 1–35.
Denœux, T. (1995). A k-nearest neighbor classification rule based on Dempster–Shafer theory.
*IEEE Trans. SMC* 25(5), 804–813.
Cobb, B. R. & Shenoy, P. P. (2006). On the plausibility transformation method for translating
belief function models to probability models. *IJAR* 41(3), 314–330.
Goh, H. W., Tkachenko, U. & Mueller, J. (2022). CROWDLAB: Supervised learning to infer
consensus labels and quality scores for data with multiple annotators. arXiv:2210.06812.

Complexity: ``O(n_votes + n_items * (k + n_labels) * n_labels)`` time, ``O(n_items *
n_labels)`` memory.

Examples
--------
Three items, two annotators, three labels; item 2 has no vote, and its neighbours (items
0 and 1) both lean to label 0:

>>> import numpy as np
>>> items = np.array([0, 0, 1, 1])
>>> annotators = np.array([0, 1, 0, 1])
>>> labels = np.array([0, 0, 0, 1])
>>> idx = np.array([[1, 2], [0, 2], [0, 1]])
>>> w = np.ones((3, 2))
>>> result = combine_votes_and_neighbours(
...     items, annotators, labels, idx, w, n_items=3, n_labels=3, n_annotators=2
... )
>>> result.labels
array([0, 0, 0])
>>> bool(result.plausibility[2, 0] > result.plausibility[2, 2])
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.exceptions import InvalidInput
from engine.votes import vote_counts

__all__ = [
    "VoteEvidence",
    "discount_from_accuracy",
    "agreement_accuracies",
    "vote_log_contour",
    "combine_votes_and_neighbours",
]

NO_ANSWER = -1
"""The value of ``answers`` for an item the expert has not answered."""


def discount_from_accuracy(accuracy: Any, n_labels: int) -> np.ndarray:
    """``1 - r``: the contour of a label a source did not name, from the source's accuracy.

    ``1 - r = min(1, (1 - p) / (p (L - 1)))`` (see the module docstring).

    Parameters
    ----------
    accuracy : float or array of floats in (0, 1)
    n_labels : int
        ``L``, at least 2.

    Returns
    -------
    float array of the shape of ``accuracy``, in ``[0, 1]``

    >>> discount_from_accuracy([0.5, 0.9, 0.25], 4).round(4)
    array([0.3333, 0.037 , 1.    ])
    """
    if n_labels < 2:
        raise InvalidInput(f"n_labels must be at least 2, got {n_labels}")
    p = np.asarray(accuracy, dtype=np.float64)
    if not ((p > 0) & (p < 1)).all():
        raise InvalidInput("accuracy must lie strictly between 0 and 1")
    return np.minimum(1.0, (1.0 - p) / (p * (n_labels - 1)))


def _strict_majority(counts: np.ndarray) -> np.ndarray:
    """Per row, the label holding more than half of the row's votes, else ``NO_ANSWER``."""
    total = counts.sum(axis=1)
    top = counts.argmax(axis=1)
    has = counts[np.arange(counts.shape[0]), top] * 2 > total
    return np.where(has & (total > 0), top, NO_ANSWER)


def agreement_accuracies(
    items: np.ndarray,
    annotators: np.ndarray,
    labels: np.ndarray,
    *,
    n_items: int,
    n_labels: int,
    n_annotators: int,
    answers: Any = None,
) -> np.ndarray:
    """Every annotator's accuracy, learnt from agreement (see the module docstring).

    A vote is compared with the expert's answer when its item has one, else with the strict
    majority of the item's *other* votes (not counted when they have none); the accuracy is
    ``(agreements + 1) / (comparisons + 2)``. An annotator none of whose votes could be
    compared so is compared with the strict majority of all the item's votes instead (Dawid &
    Skene's start from the majority vote).

    Parameters
    ----------
    items, annotators, labels : int arrays of shape (n_votes,)
        One row per vote: its item, its annotator (in ``[0, n_annotators)``), its label.
    n_items, n_labels, n_annotators : int
    answers : int array of shape (n_items,), optional
        The expert's answer per item, ``-1`` where none.

    Returns
    -------
    float array of shape (n_annotators,), in (0, 1)

    >>> agreement_accuracies(
    ...     np.array([0, 0, 0, 1, 1, 1]), np.array([0, 1, 2, 0, 1, 2]), np.array([1, 1, 0, 2, 2, 2]),
    ...     n_items=2, n_labels=3, n_annotators=3,
    ... ).round(3)
    array([0.667, 0.667, 0.5  ])
    """
    counts = vote_counts(items, labels, n_items=n_items, n_labels=n_labels)
    annotator_idx = np.asarray(annotators, dtype=np.int64)
    if annotator_idx.shape != np.shape(items) or (
        annotator_idx.size and (annotator_idx.min() < 0 or annotator_idx.max() >= n_annotators)
    ):
        raise InvalidInput(f"annotators must hold one index in [0, {n_annotators}) per vote")
    item_idx = np.asarray(items, dtype=np.int64)
    label_idx = np.asarray(labels, dtype=np.int64)
    answer = _check_answers(answers, n_items, n_labels)
    # The other votes of the vote's item: remove this vote from the item's counts.
    others = counts[item_idx].copy()
    others[np.arange(item_idx.size), label_idx] -= 1
    reference = _strict_majority(others)
    answered = answer[item_idx] != NO_ANSWER
    reference[answered] = answer[item_idx][answered]
    compared = reference != NO_ANSWER
    agree = compared & (reference == label_idx)
    n_compared = np.bincount(annotator_idx[compared], minlength=n_annotators)
    n_agree = np.bincount(annotator_idx[agree], minlength=n_annotators)
    # An annotator whom nothing else checks (the only voter on each of their items, no answer
    # there) is compared with the majority of all the item's votes, their own included: Dawid
    # & Skene's start from the majority vote. The uniform prior alone would give exactly 1/2,
    # which for two labels is chance: a lone annotator's votes, and the neighbours' labels
    # made from them, would carry no evidence at all.
    alone = (n_compared == 0)[annotator_idx]
    if alone.any():
        start = _strict_majority(counts[item_idx[alone]])
        checked = start != NO_ANSWER
        who = annotator_idx[alone][checked]
        n_compared += np.bincount(who, minlength=n_annotators)
        n_agree += np.bincount(who[start[checked] == label_idx[alone][checked]], minlength=n_annotators)
    return (n_agree + 1.0) / (n_compared + 2.0)


def _check_answers(answers: Any, n_items: int, n_labels: int) -> np.ndarray:
    if answers is None:
        return np.full(n_items, NO_ANSWER, dtype=np.int64)
    answer = np.asarray(answers)
    if answer.shape != (n_items,) or not np.issubdtype(answer.dtype, np.integer):
        raise InvalidInput(f"answers must be an int array of shape ({n_items},), got {answer.dtype} {answer.shape}")
    if ((answer < NO_ANSWER) | (answer >= n_labels)).any():
        bad = int(np.flatnonzero((answer < NO_ANSWER) | (answer >= n_labels))[0])
        raise InvalidInput(f"answers[{bad}] = {int(answer[bad])} is neither -1 nor a label in [0, {n_labels})")
    return answer.astype(np.int64)


def vote_log_contour(
    items: np.ndarray,
    labels: np.ndarray,
    discount: np.ndarray,
    *,
    n_items: int,
    n_labels: int,
) -> np.ndarray:
    """``log pl(x)`` of the votes combined by Dempster's rule: ``Σ_votes [v ≠ x] log(1 - r)``.

    Parameters
    ----------
    items, labels : int arrays of shape (n_votes,)
    discount : float array of shape (n_votes,)
        ``1 - r`` of each vote's annotator (:func:`discount_from_accuracy`), in ``[0, 1]``.
    n_items, n_labels : int

    Returns
    -------
    float array of shape (n_items, n_labels), at most 0 (``-inf`` where a vote of a perfectly
    reliable source rules the label out)

    >>> vote_log_contour(np.array([0, 0]), np.array([1, 1]), np.array([0.5, 0.5]), n_items=1, n_labels=2)
    array([[-1.38629436,  0.        ]])
    """
    item_idx = np.asarray(items, dtype=np.int64)
    label_idx = np.asarray(labels, dtype=np.int64)
    vote_counts(item_idx, label_idx, n_items=n_items, n_labels=n_labels)  # checks the indices
    d = np.asarray(discount, dtype=np.float64)
    if d.shape != item_idx.shape or ((d < 0) | (d > 1)).any():
        raise InvalidInput("discount must hold one value in [0, 1] per vote")
    # Σ over the votes not for x = Σ over all the item's votes − Σ over those for x; votes of
    # a perfectly reliable source (d = 0, log −inf) are counted apart so that no −inf − −inf
    # arises: x is ruled out when such a vote names another label.
    zero = d == 0
    log_d = np.log(np.where(zero, 1.0, d))
    total = np.zeros(n_items)
    np.add.at(total, item_idx, log_d)
    own = np.zeros((n_items, n_labels))
    np.add.at(own, (item_idx, label_idx), log_d)
    zeros_total = np.bincount(item_idx[zero], minlength=n_items)
    zeros_own = np.zeros((n_items, n_labels), dtype=np.int64)
    np.add.at(zeros_own, (item_idx[zero], label_idx[zero]), 1)
    out = total[:, None] - own
    out[zeros_total[:, None] > zeros_own] = -np.inf
    return out


def _normalised(log_pl: np.ndarray) -> np.ndarray:
    """The plausibility transform: contour / its sum per row (Cobb & Shenoy 2006).

    A row whose every label is ruled out (total conflict between perfectly reliable sources)
    says nothing: uniform.
    """
    top = log_pl.max(axis=1, keepdims=True)
    conflict = ~np.isfinite(top[:, 0])
    pl = np.exp(log_pl - np.where(np.isfinite(top), top, 0.0))
    pl[conflict] = 1.0
    out: np.ndarray = pl / pl.sum(axis=1, keepdims=True)
    return out


def _neighbour_log_contour(q: np.ndarray, informed: np.ndarray, discount: float) -> np.ndarray:
    """``log pl`` of the k-NN's vote: a simple support on the label(s) of highest ``q``.

    A tie among several top labels supports their set (contour 1 on each); an item without
    neighbour weight gets no evidence (contour 1 everywhere).
    """
    top = q >= q.max(axis=1, keepdims=True) - 1e-12
    out = np.where(top, 0.0, np.log(discount) if discount > 0 else -np.inf)
    out[~informed] = 0.0
    return out


@dataclass(frozen=True)
class VoteEvidence:
    """What :func:`combine_votes_and_neighbours` found.

    Attributes
    ----------
    labels : int array of shape (n_items,)
        The final label: the answer where given, else the label of highest plausibility.
    plausibility : float array of shape (n_items, n_labels)
        The combined contour normalised per row (the plausibility transform); one-hot on
        answered items.
    vote_plausibility : float array of shape (n_items, n_labels)
        The same from the votes alone.
    annotator_accuracy : float array of shape (n_annotators,)
        Each annotator's learnt accuracy.
    neighbour_accuracy : float
        The k-NN's learnt accuracy.
    """

    labels: np.ndarray
    plausibility: np.ndarray
    vote_plausibility: np.ndarray
    annotator_accuracy: np.ndarray
    neighbour_accuracy: float


def combine_votes_and_neighbours(
    items: Any,
    annotators: Any,
    labels: Any,
    idx: Any,
    w: Any,
    *,
    n_items: int,
    n_labels: int,
    n_annotators: int,
    answers: Any = None,
    n_rounds: int = 10,
) -> VoteEvidence:
    """Final labels from the votes and the neighbours, combined by Dempster's rule.

    See the module docstring for the derivation.

    Parameters
    ----------
    items, annotators, labels : int arrays of shape (n_votes,)
        One row per vote.
    idx : int array of shape (n_items, k)
        Every item's neighbours (items, never the item itself), e.g. from
        :func:`engine.neighbors.knn_graph`.
    w : float array of shape (n_items, k)
        Non-negative neighbour weights; a row of zeros means no neighbour evidence.
    n_items, n_labels, n_annotators : int
    answers : int array of shape (n_items,), optional
        The expert's answers, ``-1`` where none. They are the truth: an answered item's
        final label, a one-hot neighbour label, and the reference for the accuracies.
    n_rounds : int, default=10
        At most this many rounds of re-estimating the accuracies against the combined
        labels (stops when the labels no longer change); 1 keeps the first estimate.

    Returns
    -------
    VoteEvidence

    Raises
    ------
    InvalidInput
        Malformed votes, graph or answers, or fewer than 2 labels.
    """
    if n_labels < 2:
        raise InvalidInput(f"n_labels must be at least 2, got {n_labels}")
    items = np.asarray(items)
    labels = np.asarray(labels)
    counts = vote_counts(items, labels, n_items=n_items, n_labels=n_labels)
    answer = _check_answers(answers, n_items, n_labels)
    neighbours = np.asarray(idx)
    weights = np.asarray(w, dtype=np.float64)
    if neighbours.ndim != 2 or neighbours.shape[0] != n_items or weights.shape != neighbours.shape:
        raise InvalidInput(f"idx and w must both have shape ({n_items}, k), got {neighbours.shape} and {weights.shape}")
    if neighbours.size and (neighbours.min() < 0 or neighbours.max() >= n_items):
        raise InvalidInput(f"idx must hold items in [0, {n_items})")
    if (~np.isfinite(weights) | (weights < 0)).any():
        raise InvalidInput("w must hold finite non-negative weights")

    annotator_idx = np.asarray(annotators, dtype=np.int64)
    answered = answer != NO_ANSWER
    # Round 0: accuracies from agreement with the answers / the other votes' strict majority.
    accuracy = agreement_accuracies(
        items, annotators, labels, n_items=n_items, n_labels=n_labels, n_annotators=n_annotators, answers=answer
    )
    reference = _strict_majority(counts)
    reference[answered] = answer[answered]
    mass = weights.sum(axis=1)
    informed = mass > 0
    final = np.full(n_items, NO_ANSWER, dtype=np.int64)
    for _ in range(n_rounds):
        discount = discount_from_accuracy(accuracy, n_labels)[annotator_idx]
        vote_log = vote_log_contour(items, labels, discount, n_items=n_items, n_labels=n_labels)
        soft = _normalised(vote_log)
        soft[answered] = 0.0
        soft[answered, answer[answered]] = 1.0
        # The neighbours' soft vote q (Denœux 1995 with soft neighbour labels): from their
        # votes alone, so that no item's evidence comes back to it through its neighbours.
        q = np.einsum("ik,ikl->il", weights, soft[neighbours]) / np.where(informed, mass, 1.0)[:, None]
        compared = (reference != NO_ANSWER) & informed
        agree = compared & (q.argmax(axis=1) == reference)
        nn_accuracy = (float(agree.sum()) + 1.0) / (float(compared.sum()) + 2.0)
        nn_log = _neighbour_log_contour(q, informed, float(discount_from_accuracy(nn_accuracy, n_labels)))
        combined = _normalised(vote_log + nn_log)
        combined[answered] = 0.0
        combined[answered, answer[answered]] = 1.0
        new_final = combined.argmax(axis=1)
        if np.array_equal(new_final, final):
            break
        final = new_final
        # Next round (EM-like, as Dawid & Skene 1979 re-estimate against their posterior):
        # every source's accuracy is its agreement with the combined labels (answers stay the truth).
        reference = final.copy()
        hits = reference[np.asarray(items, dtype=np.int64)] == np.asarray(labels, dtype=np.int64)
        accuracy = (np.bincount(annotator_idx[hits], minlength=n_annotators) + 1.0) / (
            np.bincount(annotator_idx, minlength=n_annotators) + 2.0
        )
    return VoteEvidence(
        labels=final.astype(np.intp),
        plausibility=combined,
        vote_plausibility=_normalised(vote_log),
        annotator_accuracy=accuracy,
        neighbour_accuracy=nn_accuracy,
    )
