"""Partial-label (and noisy-label) classifiers, all scikit-learn-style estimators.

``fit(X, Y)`` takes the bool candidate matrix ``Y`` of shape (n_instances, n_labels)
(``RkNNClassifier`` takes binary labels), learned attributes end in ``_``, and using an
estimator before ``fit`` raises :class:`engine.exceptions.NotFittedError`.
"""

from engine.learners.aknn import PlAknnClassifier
from engine.learners.em_logistic import EmLogisticPllClassifier
from engine.learners.online import OnlinePartialLabelPegasos, OnlinePartialLabelPerceptron
from engine.learners.plknn import PlKnnClassifier
from engine.learners.rknn import RkNNClassifier

__all__ = [
    "PlKnnClassifier",
    "PlAknnClassifier",
    "OnlinePartialLabelPerceptron",
    "OnlinePartialLabelPegasos",
    "RkNNClassifier",
    "EmLogisticPllClassifier",
]
