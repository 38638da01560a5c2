"""winnow's engine: k-NN vote ambiguity, query scores and partial-label learners.

Pure numpy / scipy / scikit-learn / OR-Tools; no files, databases or user interface.
"""

from engine.exceptions import InvalidInput, SolverError, WinnowError
from engine.neighbors import knn_graph
from engine.query import IncrementalRanker, query_scores
from engine.winners import (
    ambiguous_targets,
    approx_possible_labels,
    necessary_labels,
    possible_labels,
    vote_bounds,
    witness,
)

__all__ = [
    "WinnowError",
    "InvalidInput",
    "SolverError",
    "NotFittedError",
    "knn_graph",
    "vote_bounds",
    "necessary_labels",
    "approx_possible_labels",
    "possible_labels",
    "witness",
    "ambiguous_targets",
    "query_scores",
    "IncrementalRanker",
]
# The learners live in engine.dst and engine.learners; import them from there so that
# `import engine` stays light for the vote kernels.


def __getattr__(name: str):
    if name == "NotFittedError":  # built lazily: see engine.exceptions
        from engine import exceptions

        return exceptions.NotFittedError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
