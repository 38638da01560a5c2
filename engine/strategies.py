"""Query strategies of the simulated campaigns (:mod:`engine.simulate`): which item to ask next.

A strategy is a small class with a ``name`` and either ``scores(context) -> array of shape
(n_instances,)`` (higher = ask first; the base class :class:`Strategy` then takes the
``batch`` best still-partial items, ties broken by seeded random keys) or its own
``select(context, batch, rng)``. ``start(context, rng)`` resets per-campaign state and
``observe(instance, candidates)`` hears every answer, so incremental strategies stay cheap.
The built-in ones (:data:`STRATEGIES`):

``apl``, ``pl``
    Nguyen et al.'s query scores: the number of training targets whose ``NL``/``APL``
    (``NL``/``PL``) some answer for the item would change, kept up to date by
    :class:`engine.query.IncrementalRanker` (only targets whose neighbourhood holds an
    answered item are recomputed). Exact ``PL`` costs a max-flow (or CP-SAT) problem per
    target and hypothetical answer, so ``pl`` scores a seeded random sample of
    ``n_targets`` training targets (default 100; ``None`` = all): its score estimates
    ``f^PL`` up to a constant factor.
``participation``, ``most_partial``, ``random``
    The baselines, written once in :data:`engine.ranking.BASELINE_SCORES` (the sessions'
    :func:`engine.query.query_scores` reads them too): weighted number of target
    neighbourhoods the item sits in, candidate-set size, and pure random order, each behind a
    :class:`engine.ranking.StaticRanker` whose seeded keys break ties.
``least_confidence``, ``margin``, ``entropy``
    Classical uncertainty sampling on PL-kNN's normalised vote scores of each training
    item (its ``k`` nearest *other* training items vote). The scores are restricted to the
    item's own candidate set and renormalised, since the answer is known to lie in it
    (uniform over the set when no neighbour votes for any of its labels). Scores are
    ``1 − max p``, ``1 − (p₁ − p₂)`` and ``−Σ p log p``.
``dst_margin``
    DST-PLL's reject margin ``bel(ŷ) − max_{y≠ŷ} pl(y)`` of the transductive
    disambiguation of each training item (its own candidate set combined with the evidence
    of its ``k`` nearest other training items, as ``DstPllClassifier.fit`` does), smallest
    margin first, so rejected items come before accepted ones. The neighbours are those of
    :func:`engine.neighbors.knn_graph` (self removed by identity), recomputed from the
    current candidate sets at every step (no refit: the graph does not change).
``decision_change``
    The expected number of k-NN decisions an answer changes (the item's own label decision
    and the PL-kNN decisions of the targets it votes in), kept up to date by
    :class:`engine.decision_change.DecisionChangeRanker`; batches are chosen greedily so that
    each target's decision is counted once per batch (see :mod:`engine.decision_change`).
``default``
    The strategy labelling sessions rank by unless told otherwise
    (:data:`engine.choices.DEFAULT_STRATEGY`), under the name ``default``.


The strategies that rank by a query criterion (``apl``, ``pl``, ``decision_change`` and the
baselines) hold an :class:`engine.ranking.Ranker` (the same rankers the labelling sessions use)
and talk to it through that contract only: :class:`RankerStrategy`.

References
----------
.. [1] V.-L. Nguyen, S. Destercke and M.-H. Masson, "Querying partially labelled data to
       improve a K-nn classifier", AAAI 2017.
.. [2] T. Fuchs, F. Kalinke and K. Böhm, "Partial-Label Learning with a Reject Option",
       Transactions on Machine Learning Research, 2025.
.. [3] B. Settles, "Active Learning Literature Survey", University of Wisconsin-Madison,
       Computer Sciences Technical Report 1648, 2009 (uncertainty sampling).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from numbers import Integral
from typing import Any

import numpy as np

from engine._kernels import candidate_votes, normalise_rows, top_two
from engine._validation import check_choice, check_scalar
from engine.choices import AMBIGUITY_CRITERIA, DEFAULT_STRATEGY, STRATEGY_NAMES, AmbiguityCriterion
from engine.decision_change import DecisionChangeRanker
from engine.dst_evidence import transductive_decisions
from engine.exceptions import InvalidInput
from engine.query import IncrementalRanker
from engine.ranking import BASELINE_CRITERIA, Ranker, StaticRanker, ranking_order

__all__ = [
    "STRATEGIES",
    "STRATEGY_NAMES",
    "CampaignContext",
    "Strategy",
    "RankerStrategy",
    "AmbiguityStrategy",
    "BaselineStrategy",
    "VoteUncertaintyStrategy",
    "DstMarginStrategy",
    "DecisionChangeStrategy",
    "candidate_vote_scores",
    "make_strategy",
]


# --------------------------------------------------------------------------- context


@dataclass
class CampaignContext:
    """What a strategy may look at: features, current candidate sets, the neighbour graph.

    True labels are not here. ``candidates`` is read-only for strategies; the campaign
    loop owns it.

    Attributes
    ----------
    X : array of shape (n_instances, n_features)
        Training features.
    candidates : bool array of shape (n_instances, n_labels)
        Current candidate sets (answered items are precise).
    idx, w : arrays of shape (n_instances, k)
        Training k-NN graph, every instance left out of its own neighbourhood.
    n_answers : int
        Answers received so far.
    """

    X: np.ndarray
    candidates: np.ndarray
    idx: np.ndarray
    w: np.ndarray
    n_answers: int = 0

    @property
    def partial(self) -> np.ndarray:
        """Bool array of shape (n_instances,): candidate set of two or more labels."""
        partial: np.ndarray = self.candidates.sum(axis=1) >= 2
        return partial


# --------------------------------------------------------------------------- strategies


def _top_partial(scores: np.ndarray, partial: np.ndarray, batch: int, rng: np.random.Generator) -> np.ndarray:
    """The ``batch`` partial items of highest score; ties broken by seeded random keys."""
    keys = np.zeros(partial.shape[0])
    keys[partial] = rng.random(int(partial.sum()))
    return ranking_order(scores, partial, tiebreak=keys, top=batch)


class Strategy:
    """Base class of a query strategy: override ``scores`` or ``select`` (or both).

    Each is derived from the other: ``select`` asks the partial items of highest ``scores``,
    and ``scores`` rates the partial items in the order ``select`` asks them. A subclass that
    overrides neither is refused when it is defined. Subclasses set ``name``; ``start`` is
    called once before a campaign, ``observe`` after every answer (subclasses that keep
    per-campaign state extend both, calling these first).
    """

    name: str = "strategy"
    #: ``(n_instances, n_labels)`` of the campaign begun by :meth:`start`.
    campaign_shape: tuple[int, int] | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.scores is Strategy.scores and cls.select is Strategy.select:
            raise TypeError(f"{cls.__name__} must override scores() or select()")

    def start(self, context: CampaignContext, rng: np.random.Generator) -> None:
        """Begin a campaign on ``context``: the answers :meth:`observe` hears are checked
        against its items and labels."""
        n_instances, n_labels = context.candidates.shape
        self.campaign_shape = (int(n_instances), int(n_labels))

    def observe(self, instance: int, candidates: np.ndarray) -> None:
        """Hear that ``instance``'s candidate set is now ``candidates``, a non-empty boolean
        row of the campaign's labels (:class:`~engine.exceptions.InvalidInput` otherwise)."""
        if self.campaign_shape is None:
            raise RuntimeError(f"{type(self).__name__}.start() was not called")
        n_instances, n_labels = self.campaign_shape
        if not 0 <= instance < n_instances:
            raise InvalidInput(f"instance must be one of the campaign's {n_instances} items, got {instance}")
        row = np.asarray(candidates)
        if row.shape != (n_labels,) or row.dtype != bool or not row.any():
            raise InvalidInput(
                f"candidates must be a non-empty boolean row of {n_labels} labels, got shape {row.shape}, "
                f"dtype {row.dtype}"
            )

    def scores(self, context: CampaignContext) -> np.ndarray:
        """Usefulness of asking each training item, array of shape (n_instances,): by default
        the order in which :meth:`select` asks the partial items (the first highest; the
        settled items 0)."""
        order = np.asarray(self.select(context, int(context.partial.sum()), np.random.default_rng(0)), dtype=np.intp)
        usefulness = np.zeros(context.candidates.shape[0])
        usefulness[order] = np.arange(order.size, 0, -1)
        return usefulness

    def select(self, context: CampaignContext, batch: int, rng: np.random.Generator) -> np.ndarray:
        """Up to ``batch`` distinct partial items to ask, best first."""
        return _top_partial(self.scores(context), context.partial, batch, rng)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class RankerStrategy(Strategy):
    """A strategy that asks what an :class:`engine.ranking.Ranker` puts first.

    ``start`` builds the ranker from the campaign's context, ``observe`` passes every answer
    to :meth:`Ranker.update`, ``select`` takes :meth:`Ranker.select`. Subclasses say how the
    ranker is built (:meth:`make_ranker`); nothing here depends on which ranker it is.
    """

    #: A new ranker on the context's graph and current candidate sets: every subclass defines
    #: it (one that does not is refused when it is defined).
    make_ranker: Callable[[CampaignContext, np.random.Generator], Ranker]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not callable(getattr(cls, "make_ranker", None)):
            raise TypeError(f"{cls.__name__} must define make_ranker()")

    def __init__(self) -> None:
        self.ranker: Ranker | None = None

    def start(self, context: CampaignContext, rng: np.random.Generator) -> None:
        super().start(context, rng)
        self.ranker = self.make_ranker(context, rng)

    def _started(self) -> Ranker:
        if self.ranker is None:
            raise RuntimeError(f"{type(self).__name__}.start() was not called")
        return self.ranker

    def observe(self, instance: int, candidates: np.ndarray) -> None:
        super().observe(instance, candidates)
        self._started().update(instance, candidates)

    def scores(self, context: CampaignContext) -> np.ndarray:
        return self._started().scores

    def select(self, context: CampaignContext, batch: int, rng: np.random.Generator) -> np.ndarray:
        return self._started().select(batch)


class AmbiguityStrategy(RankerStrategy):
    """``apl`` / ``pl`` query scores kept incrementally by :class:`IncrementalRanker`.

    Ties are broken by keys the campaign's generator draws when the ranker is built.

    Parameters
    ----------
    criterion : {"apl", "pl"}
    n_targets : int or None
        Score over a seeded random sample of this many training targets (``None``: all).
    time_limit : float
        Seconds per exact-solver call (``pl``).
    """

    def __init__(
        self, criterion: AmbiguityCriterion = "apl", *, n_targets: int | None = None, time_limit: float = 10.0
    ) -> None:
        super().__init__()
        check_choice(criterion, "criterion", AMBIGUITY_CRITERIA)
        if n_targets is not None:
            check_scalar(n_targets, "n_targets", kind=Integral, min_value=1)
        self.criterion = criterion
        self.n_targets = n_targets
        self.time_limit = time_limit
        self.name = criterion

    def make_ranker(self, context: CampaignContext, rng: np.random.Generator) -> Ranker:
        n = context.idx.shape[0]
        if self.n_targets is None or self.n_targets >= n:
            targets = np.arange(n)
        else:
            targets = np.sort(rng.choice(n, size=self.n_targets, replace=False))
        return IncrementalRanker(
            context.idx[targets],
            context.w[targets],
            context.candidates,
            self.criterion,
            time_limit=self.time_limit,
            random_state=rng,
        )


class BaselineStrategy(RankerStrategy):
    """``participation``, ``most_partial`` or ``random``: a :class:`engine.ranking.StaticRanker`.

    The ranker is built afresh from the context at each step, seeded by the step's generator
    (the ``random`` order and the tie-breaking keys), so it needs no ``start``.
    """

    KINDS = BASELINE_CRITERIA

    def __init__(self, kind: str = "random") -> None:
        super().__init__()
        check_choice(kind, "kind", self.KINDS)
        self.kind = kind
        self.name = kind

    def make_ranker(self, context: CampaignContext, rng: np.random.Generator) -> Ranker:
        return StaticRanker(context.idx, context.w, context.candidates, self.kind, random_state=rng)

    def observe(self, instance: int, candidates: np.ndarray) -> None:
        # Only checked: a baseline's ranker is built afresh at every step, from the context.
        Strategy.observe(self, instance, candidates)

    def scores(self, context: CampaignContext) -> np.ndarray:
        return self.make_ranker(context, np.random.default_rng(0)).scores

    def select(self, context: CampaignContext, batch: int, rng: np.random.Generator) -> np.ndarray:
        return self.make_ranker(context, rng).select(batch)


def candidate_vote_scores(context: CampaignContext) -> np.ndarray:
    """PL-kNN vote scores of every training item, restricted to its own candidate set.

    Returns an array of shape (n_instances, n_labels), rows summing to one, zero outside
    the item's candidate set.
    """
    Y = context.candidates
    votes = candidate_votes(context.idx, context.w, Y) * Y
    return normalise_rows(votes, Y / Y.sum(axis=1, keepdims=True))


class VoteUncertaintyStrategy(Strategy):
    """Uncertainty sampling on PL-kNN vote scores: ``least_confidence``, ``margin``, ``entropy``."""

    MEASURES = ("least_confidence", "margin", "entropy")

    def __init__(self, measure: str = "least_confidence") -> None:
        check_choice(measure, "measure", self.MEASURES)
        self.measure = measure
        self.name = measure

    def scores(self, context: CampaignContext) -> np.ndarray:
        p = candidate_vote_scores(context)
        uncertainty: np.ndarray
        if self.measure == "least_confidence":
            uncertainty = 1.0 - p.max(axis=1)
        elif self.measure == "margin":
            _, first, second = top_two(p)
            uncertainty = 1.0 - (first - np.maximum(second, 0.0))  # one label: the runner-up scores 0
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                uncertainty = -np.where(p > 0, p * np.log(p), 0.0).sum(axis=1)
        return uncertainty


class DstMarginStrategy(Strategy):
    """DST-PLL reject margin of the training items' disambiguation, smallest first."""

    name = "dst_margin"

    def scores(self, context: CampaignContext) -> np.ndarray:
        _, _, margin = transductive_decisions(context.candidates, context.idx, random_state=0)
        return -margin


class DecisionChangeStrategy(RankerStrategy):
    """Expected number of k-NN decisions an answer changes (:mod:`engine.decision_change`), greedy batches."""

    name = "decision_change"

    def make_ranker(self, context: CampaignContext, rng: np.random.Generator) -> Ranker:
        return DecisionChangeRanker(context.idx, context.w, context.candidates, random_state=rng)


STRATEGIES: dict[str, Callable[[], Strategy]] = {
    "apl": lambda: AmbiguityStrategy("apl"),
    "pl": lambda: AmbiguityStrategy("pl", n_targets=100),
    "participation": lambda: BaselineStrategy("participation"),
    "most_partial": lambda: BaselineStrategy("most_partial"),
    "random": lambda: BaselineStrategy("random"),
    "least_confidence": lambda: VoteUncertaintyStrategy("least_confidence"),
    "margin": lambda: VoteUncertaintyStrategy("margin"),
    "entropy": lambda: VoteUncertaintyStrategy("entropy"),
    "dst_margin": DstMarginStrategy,
    "decision_change": DecisionChangeStrategy,
    "default": lambda: _renamed(STRATEGIES[DEFAULT_STRATEGY](), "default"),
}
"""Name → factory of every built-in strategy, in the order of :data:`STRATEGY_NAMES`.

``"default"`` builds :data:`engine.choices.DEFAULT_STRATEGY` (what sessions rank by) under the
name ``"default"``, so its rows stay apart from the same strategy asked for by its own name.
"""


def _renamed(strategy: Strategy, name: str) -> Strategy:
    strategy.name = name
    return strategy


def make_strategy(strategy: str | Strategy, *, fresh: bool = False) -> Strategy:
    """A new strategy object from a built-in name, or the strategy object itself.

    With ``fresh``, an object is deep-copied: :func:`simulate` gives every campaign its own
    object that way, so no state (a ranker, cached scores) leaks from one seed to the next.
    """
    if isinstance(strategy, Strategy):
        return copy.deepcopy(strategy) if fresh else strategy
    return STRATEGIES[check_choice(strategy, "strategy", STRATEGY_NAMES)]()
