# The public names of the engine package, loaded lazily by __init__.py (lazy_loader.attach_stub).
from ._validation import check_candidates, check_choice
from .decision_change import DecisionChangeRanker
from .dst import DstPllClassifier, predict_from_neighbors, transductive_decisions
from .exceptions import InvalidInput, NotFittedError, SolverError, WinnowError
from .learners import (
    EmLogisticPllClassifier,
    OnlinePartialLabelPegasos,
    OnlinePartialLabelPerceptron,
    PlAknnClassifier,
    PlKnnClassifier,
    RkNNClassifier,
)
from .neighbors import ReverseIndex, knn_graph
from .query import IncrementalRanker, open_neighbourhoods, query_scores
from .ranking import BASELINE_CRITERIA, Ranker, StaticRanker, ranking_order
from .suspect import (
    SUSPECT_CRITERIA,
    SuspectSets,
    benjamini_hochberg,
    conformal_p_values,
    outside_suggestions,
    suspect_scores,
    suspect_sets,
    suspect_threshold,
)
from .suspicion import (
    CrowdEvidence,
    FeatureEvidence,
    crowd_evidence,
    feature_evidence,
    neighbour_posterior,
    pooled_posterior,
    suspicion_scores,
)
from .winners import (
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
    "Ranker",
    "StaticRanker",
    "BASELINE_CRITERIA",
    "IncrementalRanker",
    "DecisionChangeRanker",
    "DstPllClassifier",
    "transductive_decisions",
    "predict_from_neighbors",
    "PlKnnClassifier",
    "PlAknnClassifier",
    "OnlinePartialLabelPerceptron",
    "OnlinePartialLabelPegasos",
    "RkNNClassifier",
    "EmLogisticPllClassifier",
    "SUSPECT_CRITERIA",
    "SuspectSets",
    "suspect_scores",
    "suspect_threshold",
    "suspect_sets",
    "outside_suggestions",
    "conformal_p_values",
    "benjamini_hochberg",
    "neighbour_posterior",
    "suspicion_scores",
    "FeatureEvidence",
    "feature_evidence",
    "CrowdEvidence",
    "crowd_evidence",
    "pooled_posterior",
]
