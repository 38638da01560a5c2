"""Noise protocols that turn a supervised dataset into a partially labelled (or noisy) one.

Every protocol is seeded with :func:`numpy.random.default_rng` and never touches global
random state: the same ``seed`` gives the same output. The candidate protocols return a
bool candidate matrix of shape (n_instances, n_labels) in winnow's ``Y`` format.

``uniform_candidates``, ``class_dependent_candidates``, ``instance_dependent_candidates``
    The three protocols of Fuchs, Kalinke & Böhm (2025); the true label is always a
    candidate. Parameters default to the values of the authors' experiment script.
``cluster_candidates``
    The cluster-based bag generator of Errandonea et al. (2026, Section 4.1) with the
    label-confusion noise of rate ``noise_rate``; here the true label can be missing.
``crowd_candidates``, ``crowd_votes``
    A small simulated crowd, every annotator voting once per item; the set is the union of
    the votes, so the true label is missing when everyone erred. ``crowd_votes`` returns the
    individual votes (an int matrix of shape (n_instances, n_annotators), not a candidate
    matrix), for methods that aggregate votes (majority vote, Dawid–Skene).
``weak_rule_candidates``
    One-feature threshold rules per label (weak supervision); the set is the labels whose
    rules fire.
``binary_flips``
    Random classification noise for binary labels with class-dependent flip rates
    (Gao, Yang & Zhou), used to evaluate :class:`~engine.learners.RkNNClassifier`.

Complexity: every protocol is O(n_instances * n_labels) time and memory, plus the cost of
fitting one scikit-learn ``MLPClassifier`` (instance-dependent) or ``KMeans`` (cluster).

References
----------
.. [1] T. Fuchs, F. Kalinke and K. Böhm, "Partial-Label Learning with a Reject Option",
   Transactions on Machine Learning Research, 2025 (arXiv 2024), Section 5 "Noise
   Generation".
.. [2] N. A. Errandonea, S. Mazuelas, J. A. Lozano and S. Dasgupta, "Learnability with
   Partial Labels and Adaptive Nearest Neighbors", arXiv:2603.15781, 2026, Section 4.1.
.. [3] W. Gao, B.-B. Yang and Z.-H. Zhou, "On the Resistance of Nearest Neighbor to Random
   Noisy Labels", Section 2 (random noise model).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from numbers import Integral, Real
from typing import Any

import numpy as np

from engine._validation import check_features, check_labels, check_scalar
from engine.choices import CANDIDATE_PROTOCOLS
from engine.exceptions import InvalidInput

__all__ = [
    "CANDIDATE_PROTOCOLS",
    "CANDIDATE_GENERATORS",
    "uniform_candidates",
    "class_dependent_candidates",
    "instance_dependent_candidates",
    "cluster_candidates",
    "crowd_candidates",
    "crowd_votes",
    "weak_rule_candidates",
    "binary_flips",
]


def _one_hot(y: np.ndarray, n_labels: int) -> np.ndarray:
    Y = np.zeros((y.shape[0], n_labels), dtype=bool)
    Y[np.arange(y.shape[0]), y] = True
    return Y


def _check_probability(value: Any, name: str) -> float:
    return float(check_scalar(value, name, kind=Real, min_value=0.0, max_value=1.0))


def uniform_candidates(
    y: Any,
    n_labels: int | None = None,
    *,
    n_false: int = 2,
    fraction: float = 0.5,
    seed: int | np.random.Generator | None = None,
) -> np.ndarray:
    """Add ``n_false`` uniformly drawn false labels to a random ``fraction`` of the instances.

    Each instance is independently selected with probability ``fraction``; a selected
    instance receives ``n_false`` distinct false labels drawn uniformly (without
    replacement) from its ``n_labels - 1`` false labels. The others stay precise.

    Parameters
    ----------
    y : array of shape (n_instances,)
        True labels in ``0..n_labels-1``.
    n_labels : int, optional
        Number of labels; defaults to ``max(y) + 1``.
    n_false : int, default=2
        False labels added to a selected instance; needs ``n_false <= n_labels - 1``.
    fraction : float in [0, 1], default=0.5
        Probability that an instance is made partially labelled (gets false candidates).
    seed : int, Generator or None
        Seed of :func:`numpy.random.default_rng`.

    Returns
    -------
    Y : bool array of shape (n_instances, n_labels)
        Candidate sets; ``Y[i, y[i]]`` is always True.
    """
    y, n_labels = check_labels(y, n_labels=n_labels)
    check_scalar(n_false, "n_false", kind=Integral, min_value=0)
    if n_false > n_labels - 1:
        raise InvalidInput(
            f"n_false={n_false} exceeds the {n_labels - 1} false labels available with n_labels={n_labels}"
        )
    fraction = _check_probability(fraction, "fraction")
    rng = np.random.default_rng(seed)
    n = y.shape[0]
    Y = _one_hot(y, n_labels)
    selected = rng.random(n) < fraction
    if n_false == 0 or not selected.any():
        return Y
    rows = np.flatnonzero(selected)
    # Uniform subset of the false labels: random keys, the true label keyed out, take the
    # n_false smallest keys -> every n_false-subset of the false labels is equally likely.
    keys = rng.random((rows.shape[0], n_labels))
    keys[np.arange(rows.shape[0]), y[rows]] = np.inf
    chosen = np.argpartition(keys, n_false - 1, axis=1)[:, :n_false]
    Y[rows[:, None], chosen] = True
    return Y


def class_dependent_candidates(
    y: Any,
    n_labels: int | None = None,
    *,
    fraction: float = 0.7,
    partner_prob: float = 0.7,
    seed: int | np.random.Generator | None = None,
    return_partners: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Pair the labels at random and add mostly the partner label as the false candidate.

    The labels are randomly partitioned into pairs (with an odd ``n_labels`` one label has
    no partner). Each instance is independently selected with probability ``fraction`` and
    then receives exactly one false label: its true label's partner with probability
    ``max(partner_prob, 1 / (n_labels - 1))``, otherwise one of the remaining
    ``n_labels - 2`` false labels uniformly. An instance whose label has no partner gets a
    uniformly drawn false label. This follows the authors' implementation of [1]_, where the
    non-partner mass is spread over the labels other than the true label and the partner.

    Parameters
    ----------
    y : array of shape (n_instances,)
        True labels in ``0..n_labels-1``.
    n_labels : int, optional
        Number of labels (at least 2); defaults to ``max(y) + 1``.
    fraction : float in [0, 1], default=0.7
        Probability that an instance is made partially labelled (gets false candidates).
    partner_prob : float in [0, 1], default=0.7
        Probability that the added false label is the partner.
    seed : int, Generator or None
        Seed of :func:`numpy.random.default_rng`.
    return_partners : bool, default=False
        Also return the pairing.

    Returns
    -------
    Y : bool array of shape (n_instances, n_labels)
        Candidate sets; ``Y[i, y[i]]`` is always True.
    partners : int array of shape (n_labels,)
        Only with ``return_partners``: ``partners[l]`` is the partner of label ``l`` or -1.

    References
    ----------
    .. [1] T. Fuchs, F. Kalinke and K. Böhm, "Partial-Label Learning with a Reject Option",
       TMLR 2025 (code: ``Datasplit.augment_targets``, class-dependent setting).
    """
    y, n_labels = check_labels(y, n_labels=n_labels)
    if n_labels < 2:
        raise InvalidInput(f"class-dependent candidates need n_labels >= 2, got {n_labels}")
    fraction = _check_probability(fraction, "fraction")
    partner_prob = _check_probability(partner_prob, "partner_prob")
    rng = np.random.default_rng(seed)
    n = y.shape[0]

    perm = rng.permutation(n_labels)
    partners = np.full(n_labels, -1, dtype=np.intp)
    n_pairs = n_labels // 2
    first, second = perm[0 : 2 * n_pairs : 2], perm[1 : 2 * n_pairs : 2]
    partners[first], partners[second] = second, first

    p_partner = max(partner_prob, 1.0 / (n_labels - 1))
    Y = _one_hot(y, n_labels)
    selected = rng.random(n) < fraction
    use_partner = rng.random(n) < p_partner
    keys = rng.random((n, n_labels))  # drawn for every row so the stream does not depend on the mask
    rows = np.arange(n)
    partner_of = partners[y]
    has_partner = partner_of >= 0
    # Uniform draw among false labels that are not the partner (or among all false labels
    # when there is no partner).
    keys[rows, y] = np.inf
    keys[rows[has_partner], partner_of[has_partner]] = np.inf
    uniform_pick = np.argmin(keys, axis=1)
    pick = np.where(has_partner & use_partner, partner_of, uniform_pick)
    if n_labels == 2:  # the partner is the only false label
        pick = np.where(has_partner, partner_of, pick)
    Y[rows[selected], pick[selected]] = True
    if return_partners:
        return Y, partners
    return Y


def _instance_flip_probabilities(proba: np.ndarray, y: np.ndarray, mean_rate: float) -> np.ndarray:
    """Rescale a classifier's false-label probabilities so each row's false labels average ``mean_rate``."""
    n, n_labels = proba.shape
    false_p = proba.astype(np.float64, copy=True)
    false_p[np.arange(n), y] = 0.0
    row_mean = false_p.sum(axis=1, keepdims=True) / max(n_labels - 1, 1)
    # A row whose classifier puts all mass on the true label spreads mean_rate uniformly.
    flat = row_mean[:, 0] <= 1e-12
    scaled = np.where(row_mean > 1e-12, mean_rate * false_p / np.where(row_mean > 1e-12, row_mean, 1.0), 0.0)
    if flat.any():
        scaled[flat] = mean_rate
        scaled[np.flatnonzero(flat), y[flat]] = 0.0
    return np.clip(scaled, 0.0, 1.0)


def instance_dependent_candidates(
    X: Any,
    y: Any,
    n_labels: int | None = None,
    *,
    mean_rate: float = 0.3,
    hidden_layer_sizes: tuple[int, ...] = (32,),
    max_iter: int = 200,
    seed: int | np.random.Generator | None = None,
) -> np.ndarray:
    """Add false labels with probabilities taken from a small supervised MLP's predictions.

    A scikit-learn :class:`~sklearn.neural_network.MLPClassifier` is trained on ``(X, y)``;
    its predicted probabilities on every instance's false labels are rescaled so that they
    average ``mean_rate`` over that instance's ``n_labels - 1`` false labels, clipped to
    [0, 1], and each false label is added by an independent Bernoulli draw. Labels the
    classifier confuses with the true one are therefore added more often.

    Parameters
    ----------
    X : array of shape (n_instances, n_features)
        Features.
    y : array of shape (n_instances,)
        True labels in ``0..n_labels-1``.
    n_labels : int, optional
        Number of labels (at least 2); defaults to ``max(y) + 1``.
    mean_rate : float in [0, 1], default=0.3
        Average probability of adding a false label (before clipping).
    hidden_layer_sizes : tuple of int, default=(32,)
        Architecture of the MLP.
    max_iter : int, default=200
        Training epochs of the MLP.
    seed : int, Generator or None
        Seed of :func:`numpy.random.default_rng`; it also seeds the MLP.

    Returns
    -------
    Y : bool array of shape (n_instances, n_labels)
        Candidate sets; ``Y[i, y[i]]`` is always True.
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier

    X = check_features(X)
    y, n_labels = check_labels(y, n_labels=n_labels)
    if X.shape[0] != y.shape[0]:
        raise InvalidInput(f"X has {X.shape[0]} rows but y has {y.shape[0]}")
    if n_labels < 2:
        raise InvalidInput(f"instance-dependent candidates need n_labels >= 2, got {n_labels}")
    mean_rate = _check_probability(mean_rate, "mean_rate")
    check_scalar(max_iter, "max_iter", kind=Integral, min_value=1)
    rng = np.random.default_rng(seed)

    proba = np.zeros((X.shape[0], n_labels))
    present = np.unique(y)
    if present.shape[0] == 1:
        proba[:, present[0]] = 1.0
    else:
        mlp = MLPClassifier(
            hidden_layer_sizes=hidden_layer_sizes,
            max_iter=max_iter,
            random_state=int(rng.integers(2**31 - 1)),
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            mlp.fit(X, y)
        proba[:, mlp.classes_] = mlp.predict_proba(X)
    flip = _instance_flip_probabilities(proba, y, mean_rate)
    Y = rng.random(flip.shape) < flip
    Y[np.arange(y.shape[0]), y] = True
    return Y


def cluster_candidates(
    X: Any,
    y: Any,
    n_labels: int | None = None,
    *,
    noise_rate: float = 0.0,
    n_clusters: int = 5,
    alpha_max: float = 0.8,
    seed: int | np.random.Generator | None = None,
    return_details: bool = False,
) -> np.ndarray | tuple[np.ndarray, dict[str, np.ndarray]]:
    """PL A-kNN's cluster-based bag generator with label-confusion noise of rate ν.

    Following Section 4.1 of [1]_: the instances are partitioned into ``n_clusters``
    clusters (k-means on ``X``); for every cluster ``j`` and label ``i`` a rate
    ``alpha[j, i] ~ U[0, alpha_max]`` is drawn, the probability of adding *each* incorrect
    label to the bag of an instance of cluster ``j`` whose (possibly corrupted) label is
    ``i``. Noise: with probability ``noise_rate`` (ν) an instance's label is replaced by a
    label drawn uniformly from all ``n_labels`` labels (which may be the true one); the
    corrupted label is then treated as the ground truth of the bag generation, so it is
    always in the bag and the other labels - the true one included - are added with
    probability ``alpha[j, corrupted]``.

    So, unlike the other candidate protocols, **the true label can be missing**: this
    happens exactly when the label was replaced by a different one (probability
    ``ν (n_labels - 1) / n_labels``) and was not re-added as an incorrect label. With
    ``noise_rate=0`` the true label is always a candidate.

    Parameters
    ----------
    X : array of shape (n_instances, n_features)
        Features the clusters are computed on.
    y : array of shape (n_instances,)
        True labels in ``0..n_labels-1``.
    n_labels : int, optional
        Number of labels; defaults to ``max(y) + 1``.
    noise_rate : float in [0, 1], default=0.0
        ν, probability of replacing the ground-truth label before generating the bag.
    n_clusters : int, default=5
        Number of k-means clusters (at most ``n_instances``).
    alpha_max : float in [0, 1], default=0.8
        Upper end of the uniform distribution of the per-cluster, per-label rates.
    seed : int, Generator or None
        Seed of :func:`numpy.random.default_rng`; it also seeds k-means.
    return_details : bool, default=False
        Also return a dict with ``cluster`` (n,), ``alpha`` (n_clusters, n_labels),
        ``bag_label`` (n,) the label the bag was generated from, and ``corrupted`` (n,)
        bool, True where ``bag_label != y``.

    Returns
    -------
    Y : bool array of shape (n_instances, n_labels)
        Candidate sets; every row holds ``bag_label``.
    details : dict
        Only with ``return_details``.

    References
    ----------
    .. [1] N. A. Errandonea, S. Mazuelas, J. A. Lozano and S. Dasgupta, "Learnability with
       Partial Labels and Adaptive Nearest Neighbors", arXiv:2603.15781, 2026.
    """
    from sklearn.cluster import KMeans

    X = check_features(X)
    y, n_labels = check_labels(y, n_labels=n_labels)
    n = y.shape[0]
    if X.shape[0] != n:
        raise InvalidInput(f"X has {X.shape[0]} rows but y has {n}")
    noise_rate = _check_probability(noise_rate, "noise_rate")
    alpha_max = _check_probability(alpha_max, "alpha_max")
    check_scalar(n_clusters, "n_clusters", kind=Integral, min_value=1)
    if n_clusters > n:
        raise InvalidInput(f"n_clusters={n_clusters} exceeds the number of instances ({n})")
    rng = np.random.default_rng(seed)

    km = KMeans(n_clusters=n_clusters, n_init=3, random_state=int(rng.integers(2**31 - 1)))
    cluster = km.fit_predict(X).astype(np.intp)
    alpha = rng.uniform(0.0, alpha_max, size=(n_clusters, n_labels))

    corrupt_draw = rng.random(n) < noise_rate
    replacement = rng.integers(0, n_labels, size=n)
    bag_label = np.where(corrupt_draw, replacement, y)
    rate = alpha[cluster, bag_label]  # (n,)
    Y: np.ndarray = rng.random((n, n_labels)) < rate[:, None]
    Y[np.arange(n), bag_label] = True
    if return_details:
        details = {
            "cluster": cluster,
            "alpha": alpha,
            "bag_label": bag_label,
            "corrupted": bag_label != y,
        }
        return Y, details
    return Y


def binary_flips(
    y: Any,
    tau_pos: float,
    tau_neg: float,
    seed: int | np.random.Generator | None = None,
) -> np.ndarray:
    """Flip binary labels at random with class-dependent rates (random classification noise).

    ``tau_pos = P(observed 0 | true 1)`` and ``tau_neg = P(observed 1 | true 0)``, the
    noise proportions τ+ and τ− of Gao, Yang & Zhou; each label is flipped independently.

    Parameters
    ----------
    y : array of shape (n_instances,)
        True binary labels in {0, 1} (bool accepted).
    tau_pos, tau_neg : float in [0, 1)
        Flip rates of the positive and the negative class; ``tau_pos + tau_neg < 1``.
    seed : int, Generator or None
        Seed of :func:`numpy.random.default_rng`.

    Returns
    -------
    y_noisy : int array of shape (n_instances,)
        Observed labels in {0, 1}. This is *not* a candidate matrix: it is a single,
        possibly wrong, label per instance.
    """
    arr = np.asarray(y)
    if arr.dtype == bool:
        arr = arr.astype(np.intp)
    y, _ = check_labels(arr, n_labels=2)
    tau_pos = float(check_scalar(tau_pos, "tau_pos", kind=Real, min_value=0.0, max_value=1.0, include_max=False))
    tau_neg = float(check_scalar(tau_neg, "tau_neg", kind=Real, min_value=0.0, max_value=1.0, include_max=False))
    if tau_pos + tau_neg >= 1.0:
        raise InvalidInput(
            f"tau_pos + tau_neg must be < 1 (otherwise the labels carry no signal), got {tau_pos} + {tau_neg}"
        )
    rng = np.random.default_rng(seed)
    flip_prob = np.where(y == 1, tau_pos, tau_neg)
    flip = rng.random(y.shape[0]) < flip_prob
    y_noisy: np.ndarray = np.where(flip, 1 - y, y).astype(np.intp)
    return y_noisy


def crowd_votes(
    y: Any,
    n_labels: int | None = None,
    *,
    n_annotators: int = 3,
    accuracy: tuple[float, float] = (0.6, 0.9),
    n_confusions: int = 2,
    seed: int | np.random.Generator | None = None,
    return_confusions: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """A small crowd labels every item once each: the individual votes.

    How partial labels arise when a few people label the same items and nobody adjudicates.
    Every label ``c`` has ``n_confusions`` *confusable* labels, drawn once and shared by the
    crowd (some classes look alike to everyone). Annotator ``a`` has an accuracy drawn
    uniformly from ``accuracy`` and a confusion matrix whose row ``c`` puts that accuracy on
    ``c`` and the rest on ``c``'s confusable labels, split by Dirichlet(1) weights of its own.
    Each annotator votes one label per item from the row of the item's true label.

    :func:`crowd_candidates` is the union of these votes (the same ``seed`` gives the sets of
    the same votes); the votes themselves are what crowd aggregators (majority vote,
    Dawid–Skene) start from.

    Parameters
    ----------
    y : array of shape (n_instances,)
        True labels in ``0..n_labels-1``.
    n_labels : int, optional
        Number of labels (at least 2); defaults to ``max(y) + 1``.
    n_annotators : int, default=3
        Size of the crowd, 1 to 20.
    accuracy : (low, high), default=(0.6, 0.9)
        Range of the annotators' accuracies, ``0 <= low <= high <= 1``.
    n_confusions : int, default=2
        Confusable labels per label, ``1 <= n_confusions <= n_labels - 1``.
    seed : int, Generator or None
        Seed of :func:`numpy.random.default_rng`.
    return_confusions : bool, default=False
        Also return the confusion matrices.

    Returns
    -------
    votes : int array of shape (n_instances, n_annotators)
        ``votes[i, a]`` is annotator ``a``'s label for item ``i`` (every annotator votes on
        every item).
    confusions : float array of shape (n_annotators, n_labels, n_labels)
        Only with ``return_confusions``: row ``c`` of annotator ``a`` is the law of its vote
        on an item of true label ``c``.

    Complexity: O(n_instances · n_annotators · n_labels).

    Examples
    --------
    >>> votes = crowd_votes([0, 1, 2, 1], 3, n_annotators=2, accuracy=(1.0, 1.0), seed=0)
    >>> votes.tolist()
    [[0, 0], [1, 1], [2, 2], [1, 1]]
    """
    y, n_labels = check_labels(y, n_labels=n_labels)
    if n_labels < 2:
        raise InvalidInput(f"crowd candidates need n_labels >= 2, got {n_labels}")
    check_scalar(n_annotators, "n_annotators", kind=Integral, min_value=1, max_value=20)
    check_scalar(n_confusions, "n_confusions", kind=Integral, min_value=1, max_value=n_labels - 1)
    try:
        low, high = (float(v) for v in accuracy)
    except (TypeError, ValueError):
        raise InvalidInput(f"accuracy must be a pair (low, high) of probabilities; got {accuracy!r}") from None
    if not 0.0 <= low <= high <= 1.0:
        raise InvalidInput(f"accuracy must satisfy 0 <= low <= high <= 1; got {accuracy!r}")
    rng = np.random.default_rng(seed)
    # Confusable labels of every label: the n_confusions smallest random keys, own label keyed out.
    keys = rng.random((n_labels, n_labels))
    np.fill_diagonal(keys, np.inf)
    confusable = np.argsort(keys, axis=1)[:, :n_confusions]
    confusions = np.zeros((n_annotators, n_labels, n_labels))
    skill = rng.uniform(low, high, size=n_annotators)
    rows = np.arange(n_labels)
    for a in range(n_annotators):
        confusions[a, rows, rows] = skill[a]
        spread = rng.dirichlet(np.ones(n_confusions), size=n_labels) * (1.0 - skill[a])
        confusions[a, rows[:, None], confusable] = spread
    n = y.shape[0]
    votes = np.empty((n, n_annotators), dtype=np.intp)
    for a in range(n_annotators):
        # Inverse-CDF draw of one vote per item from its true label's row.
        cdf = np.cumsum(confusions[a][y], axis=1)
        votes[:, a] = np.minimum((rng.random(n)[:, None] >= cdf).sum(axis=1), n_labels - 1)
    if return_confusions:
        return votes, confusions
    return votes


def crowd_candidates(
    y: Any,
    n_labels: int | None = None,
    *,
    n_annotators: int = 3,
    accuracy: tuple[float, float] = (0.6, 0.9),
    n_confusions: int = 2,
    seed: int | np.random.Generator | None = None,
    return_confusions: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """A small crowd labels every item once each; the candidate set is the union of their votes.

    The crowd of :func:`crowd_votes` (same parameters, same ``seed``, same votes); an item's
    set holds every label somebody voted. So the true label is missing exactly when every
    annotator erred (probability ``Π_a (1 − acc_a)``), as with a real crowd.

    Parameters
    ----------
    y : array of shape (n_instances,)
        True labels in ``0..n_labels-1``.
    n_labels : int, optional
        Number of labels (at least 2); defaults to ``max(y) + 1``.
    n_annotators : int, default=3
        Size of the crowd, 1 to 20.
    accuracy : (low, high), default=(0.6, 0.9)
        Range of the annotators' accuracies, ``0 <= low <= high <= 1``.
    n_confusions : int, default=2
        Confusable labels per label, ``1 <= n_confusions <= n_labels - 1``.
    seed : int, Generator or None
        Seed of :func:`numpy.random.default_rng`.
    return_confusions : bool, default=False
        Also return the confusion matrices.

    Returns
    -------
    Y : bool array of shape (n_instances, n_labels)
        Candidate sets (one to ``n_annotators`` labels each).
    confusions : float array of shape (n_annotators, n_labels, n_labels)
        Only with ``return_confusions``: row ``c`` of annotator ``a`` is the law of its vote
        on an item of true label ``c``.

    Complexity: O(n_instances · n_annotators · n_labels).
    """
    votes, confusions = crowd_votes(
        y,
        n_labels,
        n_annotators=n_annotators,
        accuracy=accuracy,
        n_confusions=n_confusions,
        seed=seed,
        return_confusions=True,
    )
    Y = np.zeros((votes.shape[0], confusions.shape[1]), dtype=bool)
    Y[np.arange(votes.shape[0])[:, None], votes] = True
    if return_confusions:
        return Y, confusions
    return Y


def weak_rule_candidates(
    X: Any,
    y: Any,
    n_labels: int | None = None,
    *,
    rules_per_label: int = 3,
    coverage: float = 0.5,
    n_features_considered: int = 10,
    seed: int | np.random.Generator | None = None,
) -> np.ndarray:
    """Threshold rules vote for labels; the candidate set is the labels of the rules that fire.

    How partial labels arise from weak supervision (labelling functions): someone who knows
    the domain writes, for every label ``c``, ``rules_per_label`` one-feature rules
    "feature ``f`` beyond ``θ`` ⇒ ``c``". Here ``f`` is drawn among the
    ``n_features_considered`` features whose class-``c`` mean stands out most from the others
    (standardised mean difference), the side is where class ``c`` lies, and ``θ`` is set so the
    rule fires on a ``coverage`` share of class ``c``. A rule also fires on other classes
    wherever they cross ``θ``: that is its error. An item's set is the labels of the rules
    firing on it; where none fires the rules abstain and the set is every label. The true
    label is missing when other labels' rules fire but none of its own.

    Parameters
    ----------
    X : array of shape (n_instances, n_features)
        Features the rules look at.
    y : array of shape (n_instances,)
        True labels in ``0..n_labels-1`` (used to write the rules, as a domain expert would).
    n_labels : int, optional
        Number of labels (at least 2); defaults to ``max(y) + 1``.
    rules_per_label : int, default=3
        Rules per label, 1 to 50.
    coverage : float in (0, 1], default=0.5
        Share of its own class a rule fires on.
    n_features_considered : int, default=10
        How many of the most telling features each rule may use.
    seed : int, Generator or None
        Seed of :func:`numpy.random.default_rng`.

    Returns
    -------
    Y : bool array of shape (n_instances, n_labels)
        Candidate sets.

    Complexity: O(n_labels · (n_instances · n_features + rules_per_label · n_instances)).
    """
    X = check_features(X)
    y, n_labels = check_labels(y, n_labels=n_labels)
    if X.shape[0] != y.shape[0]:
        raise InvalidInput(f"X has {X.shape[0]} rows but y has {y.shape[0]}")
    if n_labels < 2:
        raise InvalidInput(f"weak-rule candidates need n_labels >= 2, got {n_labels}")
    check_scalar(rules_per_label, "rules_per_label", kind=Integral, min_value=1, max_value=50)
    check_scalar(n_features_considered, "n_features_considered", kind=Integral, min_value=1)
    coverage = float(check_scalar(coverage, "coverage", kind=Real, min_value=0.0, max_value=1.0, include_min=False))
    rng = np.random.default_rng(seed)
    n = y.shape[0]
    votes = np.zeros((n, n_labels), dtype=bool)
    spread = X.std(axis=0)
    spread[spread == 0] = 1.0
    for c in range(n_labels):
        own = X[y == c]
        if own.shape[0] == 0:
            continue  # no item of this label: nobody writes a rule for it
        rest = X[y != c] if (y != c).any() else X
        difference = (own.mean(axis=0) - rest.mean(axis=0)) / spread
        telling = np.argsort(-np.abs(difference), kind="stable")[: min(n_features_considered, X.shape[1])]
        for feature in rng.choice(telling, size=rules_per_label, replace=True):
            if difference[feature] >= 0:
                fires = X[:, feature] >= np.quantile(own[:, feature], 1.0 - coverage)
            else:
                fires = X[:, feature] <= np.quantile(own[:, feature], coverage)
            votes[fires, c] = True
    votes[~votes.any(axis=1)] = True  # every rule abstains: nothing is known
    return votes


# Some generators also return details when asked (``return_details=True``, ...).
CANDIDATE_GENERATORS: dict[str, Callable[..., np.ndarray | tuple[np.ndarray, Any]]] = {
    "uniform": uniform_candidates,
    "class_dependent": class_dependent_candidates,
    "instance_dependent": instance_dependent_candidates,
    "cluster": cluster_candidates,
    "crowd": crowd_candidates,
    "weak_rules": weak_rule_candidates,
}
"""Name (:data:`CANDIDATE_PROTOCOLS`) → candidate-set generator. ``instance_dependent`` and
``cluster`` and ``weak_rules`` take the features first: ``(X, y, n_labels, ...)``; the others
``(y, n_labels, ...)``."""
