"""Partial-label (and noisy-label) classifiers, all scikit-learn-style estimators.

``fit(X, Y)`` takes the bool candidate matrix ``Y`` of shape (n_instances, n_labels)
(``RkNNClassifier`` takes binary labels), learned attributes end in ``_``, and using an
estimator before ``fit`` raises :class:`engine.exceptions.NotFittedError`.

The names are listed in ``__init__.pyi`` and loaded on first use with ``lazy_loader``, as
``engine``'s: importing one learner does not import the others (most load scikit-learn).
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
