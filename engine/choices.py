"""The named choices engine functions accept, in one place.

Every tuple here is the single source of its names: the engine modules re-export them
(``engine.query.CRITERIA``, ``engine.neighbors.WEIGHTINGS``, ``engine.winners.PL_METHODS``,
``engine.simulate.STRATEGY_NAMES``, ``engine.simulate.NOISE_MODES``,
``engine.noise.CANDIDATE_PROTOCOLS``) and validate against them with
:func:`engine.check_choice`. This module imports only ``typing``, and the ``engine``
package loads only numpy on the way, so callers that only need the names (command-line
help, database constraints) do not pay for scikit-learn, pandas or OR-Tools.

Examples
--------
>>> from engine.choices import CRITERIA
>>> CRITERIA[:2]
('apl', 'pl')
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "Criterion",
    "AmbiguityCriterion",
    "CRITERIA",
    "AMBIGUITY_CRITERIA",
    "WEIGHTINGS",
    "SEARCH_ALGORITHMS",
    "PL_METHODS",
    "STRATEGY_NAMES",
    "DEFAULT_STRATEGY",
    "NOISE_MODES",
    "CANDIDATE_PROTOCOLS",
]

#: The names of :data:`CRITERIA` and :data:`AMBIGUITY_CRITERIA` as types (for parameters).
#: :data:`AMBIGUITY_CRITERIA` is typed with its names, so that ``criterion in
#: AMBIGUITY_CRITERIA`` tells a type checker which names ``criterion`` can still be.
Criterion = Literal["apl", "pl", "participation", "most_partial", "random", "decision_change"]
AmbiguityCriterion = Literal["apl", "pl"]

#: Query criteria of :func:`engine.query.query_scores` (and of labelling sessions): the two
#: ambiguity criteria of Nguyen et al. first, then the baselines, then the expected number of
#: decisions an answer changes (:mod:`engine.decision_change`, the default). New names go at
#: the end: the store's CHECK constraint lists them in this order.
CRITERIA: tuple[str, ...] = ("apl", "pl", "participation", "most_partial", "random", "decision_change")

#: The criteria that score by changes of NL/APL (``"apl"``) or NL/PL (``"pl"``); the ones
#: :class:`engine.query.IncrementalRanker` keeps up to date.
AMBIGUITY_CRITERIA: tuple[AmbiguityCriterion, ...] = ("apl", "pl")

#: Named vote weightings of :func:`engine.neighbors.knn_graph` (a callable is accepted too).
WEIGHTINGS: tuple[str, ...] = ("uniform", "distance")

#: Neighbour search algorithms of :func:`engine.neighbors.knn_graph`.
SEARCH_ALGORITHMS: tuple[str, ...] = ("auto", "exact", "approx")

#: Exact solvers of :func:`engine.winners.possible_labels`.
PL_METHODS: tuple[str, ...] = ("auto", "flow", "cpsat")

#: Built-in strategies of :func:`engine.simulate.simulate`, in the order they are listed.
STRATEGY_NAMES: tuple[str, ...] = (
    "apl",
    "pl",
    "participation",
    "most_partial",
    "random",
    "least_confidence",
    "margin",
    "entropy",
    "dst_margin",
    "decision_change",
    "default",
)

#: The strategy a labelling session ranks by unless told otherwise; ``"default"`` in
#: :data:`STRATEGY_NAMES` stands for it, so a simulation compares exactly what sessions use.
#: It is a name in both :data:`CRITERIA` and :data:`STRATEGY_NAMES`. Why this one:
#: ``docs/choosing_a_strategy.md`` (evidence in ``docs/results_strategy.md``).
DEFAULT_STRATEGY: str = "decision_change"

#: Where the simulated expert's wrong answers come from (:class:`engine.simulate.NoisyOracle`).
NOISE_MODES: tuple[str, ...] = ("candidate", "any")

#: Candidate-set generators of :mod:`engine.noise` (``engine.noise.CANDIDATE_GENERATORS``).
CANDIDATE_PROTOCOLS: tuple[str, ...] = (
    "uniform",
    "class_dependent",
    "instance_dependent",
    "cluster",
    "crowd",
    "weak_rules",
)
