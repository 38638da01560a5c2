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

# Learners load scikit-learn (about a second): they are resolved on first access.
_LAZY = {
    "NotFittedError": "engine.exceptions",
    "DstPllClassifier": "engine.dst",
    "PlKnnClassifier": "engine.learners",
    "PlAknnClassifier": "engine.learners",
    "OnlinePartialLabelPerceptron": "engine.learners",
    "OnlinePartialLabelPegasos": "engine.learners",
    "RkNNClassifier": "engine.learners",
}
__all__ += list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
