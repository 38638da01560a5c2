"""winnow's engine: k-NN vote ambiguity, query scores and partial-label learners.

Pure numpy / scipy / scikit-learn / OR-Tools; no files, databases or user interface.
"""

from engine._validation import check_candidates, check_choice
from engine.exceptions import InvalidInput, SolverError, WinnowError
from engine.neighbors import ReverseIndex, knn_graph
from engine.query import IncrementalRanker, open_neighbourhoods, query_scores, ranking_order
from engine.winners import (
    ambiguous_targets,
    approx_possible_labels,
    label_sets,
    necessary_labels,
    open_targets,
    possible_labels,
    vote_bounds,
    witness,
)

__all__ = [
    "WinnowError",
    "InvalidInput",
    "SolverError",
    "NotFittedError",
    "check_candidates",
    "check_choice",
    "knn_graph",
    "ReverseIndex",
    "vote_bounds",
    "necessary_labels",
    "approx_possible_labels",
    "label_sets",
    "possible_labels",
    "witness",
    "open_targets",
    "ambiguous_targets",
    "query_scores",
    "open_neighbourhoods",
    "ranking_order",
    "IncrementalRanker",
]

# Learners load scikit-learn (about a second): they are resolved on first access.
_LAZY = {
    "NotFittedError": "engine.exceptions",
    "DstPllClassifier": "engine.dst",
    "transductive_decisions": "engine.dst",
    "predict_from_neighbors": "engine.dst",
    "PlKnnClassifier": "engine.learners",
    "PlAknnClassifier": "engine.learners",
    "OnlinePartialLabelPerceptron": "engine.learners",
    "OnlinePartialLabelPegasos": "engine.learners",
    "RkNNClassifier": "engine.learners",
    # scipy.stats loads in about half a second: the calibration names are lazy too.
    "Calibration": "engine.calibration",
    "audits_needed": "engine.calibration",
    "binomial_upper_bound": "engine.calibration",
    "calibrate_threshold": "engine.calibration",
    "dst_margin": "engine.accept_scores",
    "posterior_scores": "engine.accept_scores",
    "margin_then_posterior": "engine.accept_scores",
}
__all__ += list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
