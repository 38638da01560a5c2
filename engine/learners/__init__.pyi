"""Public names of engine.learners, loaded on first use (see __init__.py)."""

from .aknn import PlAknnClassifier
from .em_logistic import EmLogisticPllClassifier
from .online import OnlinePartialLabelPegasos, OnlinePartialLabelPerceptron
from .plknn import PlKnnClassifier
from .rknn import RkNNClassifier

__all__ = [
    "PlKnnClassifier",
    "PlAknnClassifier",
    "OnlinePartialLabelPerceptron",
    "OnlinePartialLabelPegasos",
    "RkNNClassifier",
    "EmLogisticPllClassifier",
]
