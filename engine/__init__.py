"""winnow's engine: k-NN vote ambiguity, query scores and partial-label learners.

Pure numpy / scipy / scikit-learn / OR-Tools; no files, databases or user interface.
"""

from engine.exceptions import InvalidInput, NotFittedError, SolverError, WinnowError
from engine.neighbors import knn_graph
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
]
