"""Suspicion: every item's chance that its candidate set misses the truth, to rank them all.

:mod:`engine.suspect` flags a set only when a test with a false-discovery-rate guarantee
rejects it, which at the first minute (a few hundred trusted sets against thousands of
tested ones) it rarely can. A user who suspects their sets first wants the list of the most
suspect items, in order, to look at; this module gives every item a score for that list,
as cleanlab's ``rank`` scores do for single labels [1]_ and CROWDLAB for votes [2]_.

The score
---------
cleanlab ranks a given label ``ŷ`` by its self-confidence ``p(ŷ | x)`` under an
*out-of-sample* model: the item's own, possibly wrong, label must not vouch for itself. For
a candidate set ``S`` the truth is missed with probability ``1 − Σ_{y∈S} p(y | x)``; the
model here is the one winnow already has, the item's ``k`` nearest neighbours, with their
candidate sets disambiguated by *their* neighbours, and the item itself left out of every
neighbourhood:

1. The PL-kNN vote [3]_ of each item ``l``: ``p⁰_l(y) ∝ Σ_m w_lm [y ∈ Y_m]`` over its
   neighbours ``m``; read inside ``l``'s own set, ``q⁰_l(y) ∝ p⁰_l(y) [y ∈ Y_l]`` (uniform
   on ``Y_l`` when the vote puts nothing there): what ``l`` most likely is, given its set
   and its neighbours.
2. Once more: ``p¹_j(y) ∝ Σ_l w_jl q⁰_l(y)``, ``q¹_j(y) ∝ p¹_j(y) [y ∈ Y_j]``. A neighbour
   holding ``{3, 8}`` in a neighbourhood of 8s now votes 8, not half of 3: an item whose set
   misses its truth stands out against its neighbours' *labels*, not against the unions of
   their candidates (which hold the same confusions as its own set).
3. ``P_t(y) ∝ Σ_j w_tj q¹_j(y)`` over the target's neighbours, with ``t`` removed from every
   neighbourhood on the way (its own vote in ``p⁰`` and ``p¹`` of the items that have it as
   a neighbour): ``P_t`` does not depend on ``Y_t`` at all. Where no neighbour of ``t`` has a
   positive weight there is no evidence and the suspicion is 0.

The **suspicion** of a target with set ``S`` is

``s(S) = 1 − ½ (P_t(S) + max_{y∈S} P_t(y))``,

the mean of the chance that the set misses the truth, ``1 − P_t(S)``, and the chance that
the label one would read from the set, its likeliest one, is wrong, ``1 − max_{y∈S} P_t(y)``
(cleanlab's self-confidence of that label). The second term ranks a wide set, one the
neighbours do not settle on any label of, above a narrow one of the same mass: wide sets are
what a crowd's disagreement leaves, and they miss the truth more often. The choice was
measured, not derived, with a first version of ``benchmarks/suspect.py`` (its protocols at
0, 100 and 300 answers, 5 seeds, cleanlab's rank scores with k-NN and logistic probabilities,
CROWDLAB and the majority vote as anchors): the mean recall at twice the number of misses
over the 60 (protocol, budget) cells was 88.0 % for ``1 − P_t(S)`` alone and 88.3 % for the
mean, at least the best anchor's in 50 and 54 cells; Dempster's conflict of
:mod:`engine.suspect` had 85.6 % and 43 cells. ``docs/results_suspect.md`` gives the
figures of the benchmark as it is.

The features
------------
The neighbours read the graph only. Where a linear model of the features tells the labels
apart better than the ``k`` nearest neighbours do (many features of noise, classes that are
half-spaces), a set that misses its truth can look right to its neighbours.
:func:`feature_evidence` adds two more posteriors of the truth that do not read ``Y_t``, both
multinomial logistic regressions of the features (:data:`FEATURE_MODELS`): one fitted by EM
to every candidate set (:class:`engine.learners.EmLogisticPllClassifier`), one to the
single-label sets alone (given single labels and the expert's answers). Each is
*cross-fitted*: the items are dealt into 5 folds (seeded), and an item's posterior
``P^m_t`` comes from the model fitted to the other folds.

With ``P^0_t`` the neighbours' ``P_t`` above, the suspicion reads the **mixture**
``P_t = Σ_m v_m P^m_t`` whose weights *stack* the three [4]_ [5]_: they maximise, on the
simplex, the log score of the sets themselves,

``ℓ(v) = Σ_t log Σ_m v_m P^m_t(Y_t)``,

the log-probability under the pool that each item's truth lies in its set, the partial-label
likelihood [6]_ (for an answered item: of its answer). Every ``P^m_t`` is out of sample, so
``ℓ`` is a cross-validated score: a model earns weight by predicting sets it was not fitted
to, and no weight is chosen by looking at the truth. ``ℓ`` is concave in ``v``; its maximum is
found by sequential quadratic programming (:func:`stacking_weights`). Two linear models
because a crowd's unions hold its confusions, which EM fits (the confusable label gets mass
where the sets hold it) and single labels do not, while single labels are fewer: which serves
better is the data's to say, through ``ℓ``; the mixture because ``ℓ`` is concave in its
weights, the stacking of predictive distributions of [5]_.

What it cannot do: the weights follow the sets, misses included. A mistake the neighbours
vouch for (a clump of identical wrong sets, each other's neighbours) stays hidden unless the
linear models predict the *other* sets better than the neighbours do, and a mixture is
suspicious only where every model with weight doubts the set. On the clean sample of
``make run`` the weights are (1, 0, 0): the neighbours alone.

Chosen on seeds the benchmark does not report (``benchmarks/suspect.py``, its 63 (protocol,
budget) cells on seeds 5-10; its seeds 0-4 were not looked at until the choice was made). In a
scratch run of those seeds, the suspicion was at least cleanlab's best recall at twice the
misses in 52 cells from the neighbours alone; pooled with the EM model alone in 58, with the
single-label model alone in 62, with both in 62; a product of experts
``∝ exp(a P^0) (P^1)^b``, its weights fitted the same way, in 60. The benchmark itself on those
seeds, with this module: 60 cells, mean recall 90.5 %. ``docs/results_suspect.md`` gives its
own seeds.

Votes
-----
Where the sets are unions of a crowd's votes, the votes say more than their union: a crowd
confuses some labels with some others, and an item whose votes all fall on the labels one
truth is confused with, while none names it, is a set that misses that truth.
:func:`crowd_evidence` fits one confusion matrix ``C`` for the whole crowd (row ``y``: the
law of a vote on an item whose truth is ``y``) by Dawid and Skene's EM [7]_, each item's
truth weighted by the pooled posterior ``P_t`` above (the expert's answer where there is
one), and the suspicion then reads

``P'_t(y) ∝ P_t(y) · (Π_{votes v on t} C[y, v])^τ``,  ``τ =`` :data:`VOTE_TEMPER` ``= 1/2``.

The power ``τ`` tempers the likelihood because ``P_t`` already read the neighbours' sets,
unions of the same crowd's votes, so the two are not independent evidence. ``C`` reads every
vote, the item's own included (as the stacking weights read every set). Chosen on seeds 5-10
of ``benchmarks/suspect.py``'s 33 cells with votes, its seeds 0-4 not looked at: the recall
at twice the misses was at least cleanlab's best (CROWDLAB included) in 32 cells without the
votes (mean 84.8 %), and with them in 33 for ``τ = 1/4`` (87.6 %) and ``τ = 1/2`` (92.2 %),
28 for ``τ = 3/4`` (91.5 %) and 19 for ``τ = 1`` (84.7 %); one matrix per annotator
(shrunk to the crowd's) did worse than one for the crowd (20 cells). The gain is on the
generated set, whose crowd confuses each label with two others (:func:`engine.noise.crowd_votes`):
from 15 % of its misses found to 54 % at 0 answers.

Properties
----------
* ``0 ≤ s ≤ 1``; ``s = 0`` when the evidence is all on one label of ``S``, or when no
  neighbour has a positive weight and no model of the features has weight.
* *Out of sample*: for given weights, ``P_t`` is the same whatever ``t``'s own set. The
  weights (three numbers fitted to every set) are the only way ``Y_t`` enters, as one term
  of ``ℓ`` in ``n``.
* *Antitone*: ``S ⊆ S'`` ⇒ ``s(S') ≤ s(S)`` (both terms grow with the set). With the first
  property, a correct set scores no higher than the singleton of its truth, so the
  conformal p-values of :mod:`engine.suspect` calibrated on correct singletons stay valid
  for the neighbours' score (with the features, up to the weights' dependence on every set;
  the service flags on Dempster's conflict, not on this score).

Complexity: ``O(n k M)`` for the first round over the rows needed, then per target
``O(k³)`` comparisons to find where it sits in its neighbours' neighbourhoods and ``O(k M)``
arithmetic, in chunks (100,000 items, k = 10, 20 labels: about 3 s on one core, three times
Dempster's conflict); ``targets=`` scores a few rows from the ``3``-hop neighbourhood they
depend on (what an answer changes is re-scored without a pass over the dataset).
:func:`feature_evidence` fits ``2 × 5`` logistic regressions on at most 10,000 rows and 64
principal components each, and the neighbour posterior of every item (the sample of
``make run``, 800 items: 0.35 s on one core of a busy machine, against 0.02 s for the
neighbours' suspicion; 100,000 items, 32 features, 10 labels: 8 s, 4 of them the neighbour
posterior).

References
----------
.. [1] C. Northcutt, L. Jiang and I. Chuang, "Confident learning: estimating uncertainty in
       dataset labels", Journal of Artificial Intelligence Research 70, 1373-1411, 2021
       (cleanlab; ``cleanlab.rank.get_label_quality_scores``, self-confidence).
.. [2] H. W. Goh, U. Tkachenko and J. Mueller, "CROWDLAB: supervised learning to infer
       consensus labels and quality scores for data with multiple annotators",
       arXiv:2210.06812, 2022.
.. [3] E. Hüllermeier and J. Beringer, "Learning from ambiguously labeled examples",
       Intelligent Data Analysis 10(5), 419-439, 2006.
.. [4] D. H. Wolpert, "Stacked generalization", Neural Networks 5(2), 241-259, 1992.
.. [5] Y. Yao, A. Vehtari, D. Simpson and A. Gelman, "Using stacking to average Bayesian
       predictive distributions", Bayesian Analysis 13(3), 917-1007, 2018.
.. [6] R. Jin and Z. Ghahramani, "Learning with multiple labels", Advances in Neural
       Information Processing Systems 15 (NIPS 2002), 897-904.
.. [7] A. P. Dawid and A. M. Skene, "Maximum likelihood estimation of observer error-rates
       using the EM algorithm", Applied Statistics 28(1), 20-28, 1979.

Examples
--------
Item 0 holds ``{1}``; its three neighbours hold ``{0}``, ``{0, 1}`` and ``{0}``. With item 0
left out, item 2's own neighbours are 0s, so it reads as a 0, and the evidence against item
0's set is complete; the others, whose neighbourhoods hold item 0's ``{1}``, are less suspect:

>>> import numpy as np
>>> Y = np.array([[0, 1], [1, 0], [1, 1], [1, 0]], dtype=bool)
>>> idx = np.array([[1, 2, 3], [2, 3, 0], [1, 3, 0], [1, 2, 0]])
>>> neighbour_posterior(idx, np.ones((4, 3)), Y, targets=[0]).round(3).tolist()
[[1.0, 0.0]]
>>> suspicion_scores(idx, np.ones((4, 3)), Y).round(3).tolist()
[1.0, 0.5, 0.167, 0.5]
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral
from typing import Any

import numpy as np

from engine._validation import check_candidates, check_features, check_neighbors, check_scalar
from engine.exceptions import InvalidInput

__all__ = [
    "FEATURE_MODELS",
    "VOTE_TEMPER",
    "CrowdEvidence",
    "FeatureEvidence",
    "crowd_evidence",
    "feature_evidence",
    "pooled_posterior",
    "neighbour_posterior",
    "stacking_weights",
    "suspicion_scores",
]

#: Bounds on what a chunk holds at once: targets * k**3 comparisons, rows * k * n_labels floats.
_CHUNK_COMPARISONS = 1 << 22
_CHUNK_FLOATS = 1 << 21

#: The models of the features pooled with the neighbours, in the order of their weights: a
#: multinomial logistic regression fitted by EM to every candidate set
#: (:class:`engine.learners.EmLogisticPllClassifier`), and one fitted to the single-label sets
#: alone (given single labels and answers).
FEATURE_MODELS: tuple[str, ...] = ("linear, every set", "linear, single labels")
#: Folds of the cross-fitting: an item's feature posteriors come from models fitted to the others.
FEATURE_FOLDS = 5
#: Each fold's models are fitted on at most this many items, drawn with the seed, on at most this
#: many principal components of the features (as :class:`engine.lot_model.LotModel` does).
LINEAR_TRAIN_ROWS = 10_000
LINEAR_COMPONENTS = 64
#: The stacking weights' optimisation stops when the mean log score gains less than this.
_STACKING_TOLERANCE = 1e-12
_STACKING_ITERATIONS = 200


#: The power of the crowd's vote likelihood in the suspicion's posterior (the module
#: docstring's *Votes*): the pooled posterior already read the neighbours' sets, unions of the
#: same crowd's votes, so the two are not independent evidence and the likelihood is tempered.
VOTE_TEMPER = 0.5
#: Dawid–Skene steps of :func:`crowd_evidence`, and the pseudo-count of every cell of the
#: crowd's confusion matrix (Laplace's rule).
CROWD_EM_STEPS = 10
CROWD_PSEUDO_COUNT = 1.0


@dataclass(frozen=True)
class CrowdEvidence:
    """The crowd's votes and the confusion matrix they are read with (:func:`crowd_evidence`).

    Attributes
    ----------
    items, labels : int arrays of shape (n_votes,), read-only
        Vote ``v`` said item ``items[v]`` is ``labels[v]``.
    confusion : float array of shape (n_labels, n_labels), read-only
        Row ``y``: the law of a vote on an item whose truth is ``y`` (rows sum to 1, every
        cell positive).
    """

    items: np.ndarray
    labels: np.ndarray
    confusion: np.ndarray

    def log_likelihood(self, rows: np.ndarray, n_labels: int) -> np.ndarray:
        """``Σ_votes of t log confusion[y, vote]`` for each ``t`` of ``rows`` and label ``y``
        (float array of shape (n_rows, n_labels); 0 for an item without votes)."""
        unique, inverse = np.unique(np.asarray(rows, dtype=np.intp), return_inverse=True)
        where = np.full(max(int(self.items.max(initial=-1)), int(unique.max(initial=-1))) + 1, -1, dtype=np.intp)
        where[unique] = np.arange(unique.size)
        at = where[self.items]
        kept = np.flatnonzero(at >= 0)  # in vote order: the same bits however many rows
        out = np.zeros((unique.size, n_labels))
        np.add.at(out, at[kept], np.log(self.confusion[:, self.labels[kept]]).T)
        return out[inverse.reshape(-1)]


@dataclass(frozen=True)
class FeatureEvidence:
    """What the suspicion pools with the neighbours: out-of-sample posteriors of models of the
    features and the pool's weights (:func:`feature_evidence`).

    Attributes
    ----------
    names : tuple of str
        The models that could be fitted, in :data:`FEATURE_MODELS`'s order.
    posteriors : float array of shape (n_models, n_instances, n_labels), read-only
        Each item's label distribution under each model, fitted without the item's fold.
    weights : float array of shape (n_models + 1,), read-only
        The pool's weights, the neighbour posterior's first; nonnegative, summing to 1.
    """

    names: tuple[str, ...]
    posteriors: np.ndarray
    weights: np.ndarray


def neighbour_posterior(idx: Any, w: Any, Y: Any, *, targets: Any = None) -> np.ndarray:
    """Each target's label distribution from its neighbours' disambiguated sets, the target left out.

    Parameters
    ----------
    idx : int array of shape (n_instances, k)
        Every item's neighbours (rows of ``Y``): the graph of the whole dataset.
    w : float array of shape (n_instances, k)
        Their weights, ``w >= 0``.
    Y : bool array of shape (n_instances, n_labels)
        Every item's candidate set.
    targets : int array of shape (n_targets,), optional
        The rows to compute (default: every row); only their 3-hop neighbourhood is read.

    Returns
    -------
    posterior : float array of shape (n_targets, n_labels)
        ``P_t`` of the module docstring; rows sum to 1 (uniform where ``t`` has no
        neighbour of positive weight).

    Raises
    ------
    InvalidInput
        A malformed graph or set, ``idx`` not one row per row of ``Y``, or a target outside
        ``0..n_instances-1``.
    """
    idx, w, Y, rows = _check(idx, w, Y, targets)
    return _posterior(idx, w, Y, rows)


def suspicion_scores(
    idx: Any,
    w: Any,
    Y: Any,
    *,
    targets: Any = None,
    own: Any = None,
    features: FeatureEvidence | None = None,
    crowd: CrowdEvidence | None = None,
) -> np.ndarray:
    """The suspicion of every target's set (higher: more likely that the set misses the truth).

    Parameters
    ----------
    idx, w, Y, targets
        As in :func:`neighbour_posterior`.
    own : bool array of shape (n_targets, n_labels), optional
        Sets to score instead of the targets' own (``Y[targets]``); the evidence is the same,
        since it never reads a target's own set.
    features : FeatureEvidence, optional
        The models of the features to pool with the neighbours (:func:`feature_evidence` of
        the same sets, or of earlier ones); without it the posterior is the neighbours' alone.
    crowd : CrowdEvidence, optional
        The crowd's votes on the items and their confusion matrix (:func:`crowd_evidence`):
        each target's posterior is multiplied by the likelihood of its own votes, raised to
        :data:`VOTE_TEMPER` (the module docstring's *Votes*).

    Returns
    -------
    suspicion : float array of shape (n_targets,)
        ``1 − ½ (P_t(S) + max_{y∈S} P_t(y))`` in ``[0, 1]``, ``P_t`` the pooled posterior; 0
        where a target has no neighbour of positive weight and no model of the features
        has weight.

    Raises
    ------
    InvalidInput
        As :func:`neighbour_posterior`, ``own`` of the wrong shape, or ``features`` made for
        another number of items or labels.
    TypeError
        ``features`` is not a :class:`FeatureEvidence`, or ``crowd`` not a :class:`CrowdEvidence`.
    """
    idx, w, Y, rows = _check(idx, w, Y, targets)
    sets = Y[rows] if own is None else check_candidates(own, name="own", n_rows=rows.size)
    if sets.shape[1] != Y.shape[1]:
        raise InvalidInput(f"own has {sets.shape[1]} label columns but Y has {Y.shape[1]}")
    posterior = _posterior(idx, w, Y, rows)
    evidence = _has_evidence(idx, w, rows)
    if features is not None:
        _check_features(features, Y.shape)
        posterior = _pool(posterior, features, rows)
        if features.weights[1:].sum() > 0:
            evidence = np.ones(rows.size, dtype=bool)
    if crowd is not None:
        _check_crowd(crowd, Y.shape)
        posterior = _with_votes(posterior, crowd.log_likelihood(rows, Y.shape[1]))
        evidence = evidence | np.isin(rows, crowd.items)
    inside = np.where(sets, posterior, 0.0)
    score = 1.0 - 0.5 * (inside.sum(axis=1) + inside.max(axis=1))
    return np.where(evidence, np.clip(score, 0.0, 1.0), 0.0)


def feature_evidence(
    X: Any, idx: Any, w: Any, Y: Any, *, n_folds: int = FEATURE_FOLDS, seed: int = 0
) -> FeatureEvidence:
    """The models of the features cross-fitted to the sets ``Y``, and their stacking weights
    with the neighbour posterior (the module docstring's *Features*).

    Parameters
    ----------
    X : float array of shape (n_instances, n_features)
        Every item's features.
    idx, w, Y
        As in :func:`neighbour_posterior`: the graph and the sets of every item.
    n_folds : int, default=5
        Folds of the cross-fitting (as many as items when there are fewer).
    seed : int, default=0
        Draws the folds and, past :data:`LINEAR_TRAIN_ROWS` items, the rows each model is fitted on.

    Returns
    -------
    FeatureEvidence
        No model (the neighbour posterior's weight 1) when the features are constant, there
        is one item, or no fold leaves a single-label set to fit the second model to.

    Raises
    ------
    InvalidInput
        As :func:`neighbour_posterior`, ``X`` not finite or not one row per item, or
        ``n_folds`` below 2.

    Examples
    --------
    Two groups of ten items on a line; the sets say which group, except item 0's, which
    names the other group's label. Its neighbours are its group, and so is the linear
    model fitted without it: its set is the most suspect.

    >>> X = np.r_[np.arange(10.0), 20 + np.arange(10.0)][:, None]
    >>> Y = np.zeros((20, 2), dtype=bool); Y[:10, 0] = True; Y[10:, 1] = True; Y[0] = [False, True]
    >>> from engine.neighbors import knn_graph
    >>> idx, w = knn_graph(X, k=3)
    >>> evidence = feature_evidence(X, idx, w, Y)
    >>> evidence.names, float(evidence.weights.sum())
    (('linear, every set', 'linear, single labels'), 1.0)
    >>> int(suspicion_scores(idx, w, Y, features=evidence).argmax())
    0
    """
    idx, w, Y, rows = _check(idx, w, Y, None)
    X = check_features(X)
    if X.shape[0] != Y.shape[0]:
        raise InvalidInput(f"X has {X.shape[0]} rows but Y has {Y.shape[0]}: one row of features per item")
    check_scalar(n_folds, "n_folds", kind=Integral, min_value=2)
    names, posteriors = _feature_posteriors(X, Y, int(n_folds), seed)
    models = [_posterior(idx, w, Y, rows), *posteriors]
    masses = np.stack([np.where(Y, p, 0.0).sum(axis=1) for p in models], axis=1)
    weights = _stacking_weights(masses)
    return FeatureEvidence(names, _readonly(np.asarray(posteriors).reshape(-1, *Y.shape)), _readonly(weights))


def pooled_posterior(
    idx: Any, w: Any, Y: Any, *, targets: Any = None, features: FeatureEvidence | None = None
) -> np.ndarray:
    """Each target's label distribution from the neighbours pooled with the models of the
    features, the target's own set never read (what the suspicion reads, before the votes).

    Parameters
    ----------
    idx, w, Y, targets
        As in :func:`neighbour_posterior`.
    features : FeatureEvidence, optional
        As in :func:`suspicion_scores`; without it, :func:`neighbour_posterior`.

    Returns
    -------
    posterior : float array of shape (n_targets, n_labels)
    """
    idx, w, Y, rows = _check(idx, w, Y, targets)
    posterior = _posterior(idx, w, Y, rows)
    if features is None:
        return posterior
    _check_features(features, Y.shape)
    return _pool(posterior, features, rows)


def crowd_evidence(
    items: Any, labels: Any, prior: Any, *, answers: Any = None, n_steps: int = CROWD_EM_STEPS
) -> CrowdEvidence:
    """The crowd's confusion matrix, fitted to its votes by Dawid and Skene's EM [7]_ with one
    matrix for the whole crowd, each item's truth weighted by ``prior``.

    Parameters
    ----------
    items, labels : int arrays of shape (n_votes,)
        Vote ``v`` said item ``items[v]`` is ``labels[v]``.
    prior : float array of shape (n_instances, n_labels)
        Each item's label distribution before its votes (:func:`pooled_posterior`); rows sum to 1.
    answers : int array of shape (n_instances,), optional
        The expert's label of an item, ``-1`` where there is none: its truth in the fit.
    n_steps : int, default=10
        EM steps.

    Returns
    -------
    CrowdEvidence

    Raises
    ------
    InvalidInput
        ``items`` and ``labels`` not of one length, an item or label out of range, ``prior``
        not a distribution per row, ``answers`` of the wrong shape or out of range, or
        ``n_steps`` below 1.

    Notes
    -----
    Starting from ``prior`` with the votes' labels preferred tenfold, each step counts the
    votes per (truth, vote) weighted by the items' posteriors, adds :data:`CROWD_PSEUDO_COUNT`
    to every cell, normalises the rows, and takes as each item's posterior ``prior`` times
    its votes' likelihood raised to :data:`VOTE_TEMPER` (an answered item: its answer).
    ``O(n_steps · (n_votes + n_instances) · n_labels)``.

    Examples
    --------
    Two labels; items 0-3 are 0s, 4-7 are 1s by their priors; everyone votes the truth,
    except on item 3, where two votes say 1: the matrix learns that 0s are sometimes called 1.

    >>> prior = np.repeat([[0.9, 0.1], [0.1, 0.9]], 4, axis=0)
    >>> items = np.repeat(np.arange(8), 2); labels = np.repeat([0, 0, 0, 1, 1, 1, 1, 1], 2)
    >>> crowd = crowd_evidence(items, labels, prior)
    >>> bool(crowd.confusion[0, 1] > crowd.confusion[1, 0])
    True
    """
    P = np.asarray(prior, dtype=np.float64)
    # A posterior made by differences of sums (neighbour_posterior) may dip below 0 by rounding.
    if P.ndim != 2 or P.shape[1] < 1 or not np.isfinite(P).all() or (P < -1e-9).any():
        raise InvalidInput(f"prior must be a 2-D array of probabilities, got shape {P.shape}")
    if not np.allclose(P.sum(axis=1), 1.0):
        raise InvalidInput("prior must sum to 1 on every row")
    P = np.clip(P, 0.0, None)
    n, n_labels = P.shape
    item, label = _check_votes(items, labels, n, n_labels)
    check_scalar(n_steps, "n_steps", kind=Integral, min_value=1)
    known = np.full(n, -1, dtype=np.intp) if answers is None else np.asarray(answers)
    if known.shape != (n,) or (known.size and known.dtype.kind not in "iu"):
        raise InvalidInput(f"answers must be an int array of shape ({n},), got {known.dtype} {known.shape}")
    if known.size and (known.min() < -1 or known.max() >= n_labels):
        raise InvalidInput(f"answers must be labels in 0..{n_labels - 1} or -1")
    answered = np.flatnonzero(known >= 0)
    voted = np.zeros((n, n_labels), dtype=bool)
    voted[item, label] = True
    posterior = P * np.where(voted, 10.0, 1.0)
    posterior /= posterior.sum(axis=1, keepdims=True)
    crowd = CrowdEvidence(_readonly_int(item), _readonly_int(label), np.full((n_labels, n_labels), 1.0 / n_labels))
    for _ in range(int(n_steps)):
        posterior[answered] = 0.0
        posterior[answered, known[answered]] = 1.0
        counts = np.full((n_labels, n_labels), CROWD_PSEUDO_COUNT)
        np.add.at(counts.T, label, posterior[item])
        crowd = CrowdEvidence(crowd.items, crowd.labels, _readonly(counts / counts.sum(axis=1, keepdims=True)))
        posterior = _with_votes(P, crowd.log_likelihood(np.arange(n), n_labels))
    return crowd


def stacking_weights(masses: Any) -> np.ndarray:
    """The mixture weights that maximise the log score ``Σ_t log Σ_m v_m masses[t, m]``.

    Parameters
    ----------
    masses : float array of shape (n_instances, n_models)
        What each model's out-of-sample posterior puts on each item's set, in ``[0, 1]``.

    Returns
    -------
    weights : float array of shape (n_models,)
        Nonnegative, summing to 1: the maximiser of the (concave) log score on the simplex,
        to about 1e-12 of the mean score; uniform when no row tells the models apart.

    Raises
    ------
    InvalidInput
        ``masses`` not 2-D, without a column, or outside ``[0, 1]``.

    Examples
    --------
    The first model puts all its mass on the sets of two items and none on the third's; the
    second, half on every one. With ``v`` on the first, the score
    ``2 log((1 + v) / 2) + log((1 − v) / 2)`` is largest at ``v = 1/3``:

    >>> stacking_weights([[1.0, 0.5], [1.0, 0.5], [0.0, 0.5]]).round(4).tolist()
    [0.3333, 0.6667]
    """
    arr = np.asarray(masses, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise InvalidInput(f"masses must be a 2-D (n_instances, n_models) array, got shape {arr.shape}")
    if not np.isfinite(arr).all() or (arr < 0).any() or (arr > 1).any():
        raise InvalidInput("masses must be probabilities, in [0, 1]")
    return _stacking_weights(arr)


def _check(idx: Any, w: Any, Y: Any, targets: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    Y = check_candidates(Y)
    idx, w = check_neighbors(idx, w, Y)
    if idx.shape[0] != Y.shape[0]:
        raise InvalidInput(
            f"idx has {idx.shape[0]} rows but Y has {Y.shape[0]}: the posterior needs the graph of every item "
            "(pass targets= to score some of them)"
        )
    if targets is None:
        return idx, w, Y, np.arange(Y.shape[0])
    rows = np.asarray(targets)
    if rows.ndim != 1 or (rows.size and rows.dtype.kind not in "iu"):
        raise InvalidInput(f"targets must be a 1-D array of row indices, got dtype {rows.dtype} shape {rows.shape}")
    rows = rows.astype(np.intp)
    if rows.size and (rows.min() < 0 or rows.max() >= Y.shape[0]):
        raise InvalidInput(f"targets must be rows in 0..{Y.shape[0] - 1}")
    return idx, w, Y, rows


def _readonly(array: np.ndarray) -> np.ndarray:
    out = np.ascontiguousarray(array, dtype=np.float64)
    out.setflags(write=False)
    return out


def _check_features(features: Any, shape: tuple[int, int]) -> None:
    if not isinstance(features, FeatureEvidence):
        raise TypeError(f"features must be a FeatureEvidence (from feature_evidence), got {type(features).__name__}")
    n_models = len(features.names)
    if features.posteriors.shape != (n_models, *shape) or features.weights.shape != (n_models + 1,):
        raise InvalidInput(
            f"features were made for posteriors of shape {features.posteriors.shape[1:]} but Y has shape {shape}"
        )


def _check_crowd(crowd: Any, shape: tuple[int, int]) -> None:
    if not isinstance(crowd, CrowdEvidence):
        raise TypeError(f"crowd must be a CrowdEvidence (from crowd_evidence), got {type(crowd).__name__}")
    if crowd.confusion.shape != (shape[1], shape[1]) or int(crowd.items.max(initial=-1)) >= shape[0]:
        raise InvalidInput(f"crowd was made for {crowd.confusion.shape[0]} labels or more items than Y's {shape}")


def _check_votes(items: Any, labels: Any, n: int, n_labels: int) -> tuple[np.ndarray, np.ndarray]:
    item, label = np.asarray(items), np.asarray(labels)
    if item.ndim != 1 or item.shape != label.shape:
        raise InvalidInput(f"items and labels must be 1-D of one length, got shapes {item.shape} and {label.shape}")
    for values, name, bound in ((item, "items", n), (label, "labels", n_labels)):
        if values.size and values.dtype.kind not in "iu":
            raise InvalidInput(f"{name} must be integers, got dtype {values.dtype}")
        if values.size and (values.min() < 0 or values.max() >= bound):
            raise InvalidInput(f"{name} must be in 0..{bound - 1}")
    return item.astype(np.intp), label.astype(np.intp)


def _readonly_int(array: np.ndarray) -> np.ndarray:
    out = np.ascontiguousarray(array, dtype=np.intp)
    out.setflags(write=False)
    return out


def _with_votes(posterior: np.ndarray, log_likelihood: np.ndarray) -> np.ndarray:
    """``posterior · exp(VOTE_TEMPER · log_likelihood)``, normalised per row (in logs, from
    each row's largest term: a vote likelihood underflows for an item with many votes)."""
    tempered = VOTE_TEMPER * log_likelihood
    weights = np.exp(tempered - tempered.max(axis=1, keepdims=True))
    out = posterior * weights
    total = out.sum(axis=1, keepdims=True)
    return np.where(total > 0, out / np.where(total > 0, total, 1.0), posterior)


def _pool(neighbour: np.ndarray, features: FeatureEvidence, rows: np.ndarray) -> np.ndarray:
    """The mixture of the neighbour posterior (of ``rows``) and the models' posteriors, summed
    in model order (the same bits for a row however many are computed)."""
    weights = features.weights
    out: np.ndarray = weights[0] * neighbour
    for m in range(len(features.names)):
        out = out + weights[m + 1] * features.posteriors[m][rows]
    return out


def _feature_posteriors(
    X: np.ndarray, Y: np.ndarray, n_folds: int, seed: int
) -> tuple[tuple[str, ...], list[np.ndarray]]:
    """Each model of :data:`FEATURE_MODELS` cross-fitted: the items of a fold predicted by the
    model fitted to the other folds' sets. A model some fold leaves nothing to fit to is left out."""
    from engine.learners.em_logistic import project_on_principal_axes  # scipy.optimize: only with features

    n = Y.shape[0]
    varying = np.ptp(X, axis=0) > 0
    if n < 2 or not varying.any():
        return (), []
    rng = np.random.default_rng(seed)
    sample = np.arange(n) if n <= LINEAR_TRAIN_ROWS else np.sort(rng.choice(n, LINEAR_TRAIN_ROWS, replace=False))
    # Principal axes read the features only: those of every item keep each fold out of sample.
    _, Z = project_on_principal_axes(X[sample][:, varying], X[:, varying], LINEAR_COMPONENTS)
    fold = rng.permutation(n) % min(n_folds, n)
    names: list[str] = []
    posteriors: list[np.ndarray] = []
    for name, trainable, em_steps in (
        (FEATURE_MODELS[0], np.ones(n, dtype=bool), 5),
        (FEATURE_MODELS[1], Y.sum(axis=1) == 1, 0),  # single labels: nothing for EM to disambiguate
    ):
        posterior = _cross_fitted(Z, Y, fold, trainable, em_steps, rng)
        if posterior is not None:
            names.append(name)
            posteriors.append(posterior)
    return tuple(names), posteriors


def _cross_fitted(
    Z: np.ndarray, Y: np.ndarray, fold: np.ndarray, trainable: np.ndarray, em_steps: int, rng: np.random.Generator
) -> np.ndarray | None:
    from engine.learners.em_logistic import EmLogisticPllClassifier

    posterior = np.empty(Y.shape)
    for f in range(int(fold.max()) + 1):
        train = np.flatnonzero((fold != f) & trainable)
        if train.size == 0:
            return None
        if train.size > LINEAR_TRAIN_ROWS:
            train = np.sort(rng.choice(train, LINEAR_TRAIN_ROWS, replace=False))
        held_out = fold == f
        model = EmLogisticPllClassifier(n_em_steps=em_steps).fit(Z[train], Y[train])
        posterior[held_out] = model.predict_proba(Z[held_out])
    return posterior


def _stacking_weights(masses: np.ndarray) -> np.ndarray:
    """The maximiser of the mean log score on the simplex, by sequential quadratic programming
    (the score is concave: its maximum is the only one, up to a face of equal scores)."""
    from scipy.optimize import minimize  # only with features

    n_models = masses.shape[1]
    uniform = np.full(n_models, 1.0 / n_models)
    # A row on which every model agrees adds the same to the score for every weighting.
    telling = masses[masses.max(axis=1) > masses.min(axis=1)]
    if telling.shape[0] == 0:
        return uniform
    tiny = np.finfo(np.float64).tiny

    def loss_and_gradient(weights: np.ndarray) -> tuple[float, np.ndarray]:
        mixture = np.maximum(telling @ weights, tiny)
        return -float(np.log(mixture).mean()), -(telling / mixture[:, None]).mean(axis=0)

    result = minimize(
        loss_and_gradient,
        uniform,
        jac=True,
        method="SLSQP",
        bounds=[(0.0, 1.0)] * n_models,
        constraints=[{"type": "eq", "fun": lambda v: v.sum() - 1.0, "jac": lambda v: np.ones_like(v)}],
        options={"ftol": _STACKING_TOLERANCE, "maxiter": _STACKING_ITERATIONS},
    )
    weights = np.clip(np.asarray(result.x, dtype=np.float64), 0.0, None)
    out: np.ndarray = weights / weights.sum()
    return out


def _has_evidence(idx: np.ndarray, w: np.ndarray, rows: np.ndarray) -> np.ndarray:
    evidence: np.ndarray = ((w[rows] > 0) & (idx[rows] != rows[:, None])).any(axis=1)
    return evidence


def _within(votes: np.ndarray, sets: np.ndarray) -> np.ndarray:
    """``votes`` restricted to ``sets`` and normalised over the last axis; uniform on the set
    where the votes put nothing inside it."""
    inside = np.where(sets, votes, 0.0)
    total = inside.sum(axis=-1, keepdims=True)
    uniform = sets / sets.sum(axis=-1, keepdims=True)
    out: np.ndarray = np.where(total > 0, inside / np.where(total > 0, total, 1.0), uniform)
    return out


#: Taking t's part out of a sum leaves rounding residue (1e-17) where the sum without it is 0;
#: a label with such a residue would count as voted for, where the definition finds nothing
#: inside the set and reads it uniformly. Values within this fraction of the sum they came from
#: are read as 0.
_RESIDUE = 1e-12


def _residue_to_zero(values: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``values``, with those at most ``_RESIDUE · scale`` (rounding left by a subtraction) set to 0."""
    out: np.ndarray = np.where(values <= _RESIDUE * scale, 0.0, values)
    return out


def _share(votes: np.ndarray, total: np.ndarray, n_labels: int) -> np.ndarray:
    """``votes / total`` over the last axis; uniform where the total weight is 0."""
    positive = total[..., None] > 0
    out: np.ndarray = np.where(positive, votes / np.where(positive, total[..., None], 1.0), 1.0 / n_labels)
    return out


def _weighted_sum(weights: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``Σ_a weights[..., a] values[..., a, :]``, summed in neighbour order (so that the same
    row gives the same bits however many rows are computed at once)."""
    out: np.ndarray = weights[..., 0, None] * values[..., 0, :]
    for a in range(1, weights.shape[-1]):
        out = out + weights[..., a, None] * values[..., a, :]
    return out


def _posterior(idx: np.ndarray, w: np.ndarray, Y: np.ndarray, rows: np.ndarray) -> np.ndarray:
    n, n_labels = Y.shape
    if rows.size == 0:
        return np.zeros((0, n_labels))
    # The first round is needed for the targets, their neighbours and their neighbours' neighbours.
    second = np.unique(idx[rows])
    needed = np.unique(np.concatenate([rows, second, idx[second].ravel()]))
    local = np.full(n, -1, dtype=np.intp)
    local[needed] = np.arange(needed.size)
    k = idx.shape[1]
    step = max(1, _CHUNK_FLOATS // (k * n_labels))
    totals = np.zeros(n)
    totals[needed] = w[needed].sum(axis=1)
    votes = np.empty((needed.size, n_labels))  # U_l: the PL-kNN vote of every needed row
    for start in range(0, needed.size, step):
        part = needed[start : start + step]
        votes[start : start + part.size] = _weighted_sum(w[part], Y[idx[part]].astype(np.float64))
    first = _within(_share(votes, totals[needed], n_labels), Y[needed])  # q⁰
    second_votes = np.zeros((needed.size, n_labels))  # V¹_j = Σ_l w_jl q⁰_l, for the neighbours j
    for start in range(0, second.size, step):
        part = second[start : start + step]
        second_votes[local[part]] = _weighted_sum(w[part], first[local[idx[part]]])
    out = np.empty((rows.size, n_labels))
    # The k**3 comparisons read rows of the graph at random: half the bytes as 32-bit indices.
    narrow = idx.astype(np.int32) if n < 2**31 else idx
    chunk = max(1, _CHUNK_COMPARISONS // k**3)
    for start in range(0, rows.size, chunk):
        t = rows[start : start + chunk]
        out[start : start + t.size] = _posterior_chunk(
            narrow, w, Y, t.astype(narrow.dtype), local, votes, totals, first, second_votes
        )
    return out


def _posterior_chunk(
    idx: np.ndarray,
    w: np.ndarray,
    Y: np.ndarray,
    t: np.ndarray,
    local: np.ndarray,
    votes: np.ndarray,
    totals: np.ndarray,
    first: np.ndarray,
    second_votes: np.ndarray,
) -> np.ndarray:
    """``P_t`` for the targets ``t``: the second round of each neighbour ``j`` with ``t`` taken
    out of ``j``'s neighbourhood and out of the first round of ``j``'s neighbours."""
    n_labels = Y.shape[1]
    J = idx[t]  # (T, k)
    L = idx[J]  # (T, k, k): the neighbours' neighbours
    w_jl = w[J]
    is_t = L == t[:, None, None]
    held = np.where(is_t, w_jl, 0.0)
    mutual = held[..., 0]
    for b in range(1, held.shape[-1]):
        mutual = mutual + held[..., b]
    # j's second-round vote without t's own first-round vote.
    raw = second_votes[local[J]] - mutual[..., None] * first[local[t]][:, None, :]
    totals_j = totals[J]
    weight = _residue_to_zero(totals_j - mutual, totals_j)
    # Where t is a neighbour of l (l a neighbour of j, l ≠ t), l's first round without t's vote.
    hit = idx[L] == t[:, None, None, None]  # (T, k, k, k)
    ti, ja, lb = np.nonzero(hit.any(axis=-1) & ~is_t)
    if ti.size:
        held_by = L[ti, ja, lb]
        back = np.where(hit[ti, ja, lb], w[held_by], 0.0).sum(axis=1)
        at = local[held_by]
        scale = totals[held_by]
        kept = _residue_to_zero(votes[at] - back[:, None] * Y[t[ti]], scale[:, None])
        fixed = _within(_share(kept, _residue_to_zero(scale - back, scale), n_labels), Y[held_by])
        change = w_jl[ti, ja, lb][:, None] * (fixed - first[at])
        # The triples come sorted by (target, neighbour): one sum per pair, in neighbour order.
        pair = ti * J.shape[1] + ja
        starts = np.flatnonzero(np.r_[True, pair[1:] != pair[:-1]])
        raw[ti[starts], ja[starts]] += np.add.reduceat(change, starts, axis=0)
    raw = _residue_to_zero(raw, totals_j[..., None])
    second = _within(_share(raw, weight, n_labels), Y[J])  # q¹_j without t
    w_tj = np.where(J == t[:, None], 0.0, w[t])
    total = w_tj.sum(axis=1)
    return _share(_weighted_sum(w_tj, second), total, n_labels)
