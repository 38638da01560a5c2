"""The model a lot of labels is frozen from: DST-PLL's labels, ranked by how far two models agree.

A lot's labels are DST-PLL's transductive decisions (:func:`engine.dst.transductive_decisions`):
each item's own candidate set combined with its neighbours'. Which of them to put forward, and
in which layers (:mod:`engine.labelling_loop`), is a **score**: the better it ranks the right
labels above the wrong ones, the more labels a lot's best layers hold at the target error.

DST-PLL's own margin ``bel(ŷ) − max pl`` cannot tell apart items whose neighbours all carry the
same candidate set (the segments of one recording, say): on BirdSong after 500 answers the 400
items it is surest of are 5-6 % wrong. A linear model of the features, fitted to the candidate
sets by EM (:class:`engine.learners.EmLogisticPllClassifier`), sees the whole space instead.
:class:`LotModel` scores DST-PLL's label by the linear model's margin where both models name it
and DST-PLL accepts it (margin > 0), and puts every other item below zero (DST-PLL's margin
minus one, so that they keep their order): the items where two different models agree are the
cleanest. Where the features say nothing (a graph with no features), the score is DST-PLL's
margin alone.

Any score keeps the promise: a lot's labels and layers are fixed before its audits, which alone
certify it (:mod:`engine.promises`). The score only decides how many labels arrive.
"""

from __future__ import annotations

import threading

import numpy as np
from threadpoolctl import threadpool_limits

from engine.dst_evidence import transductive_decisions

__all__ = ["LotModel", "LINEAR_TRAIN_ROWS", "LINEAR_COMPONENTS"]

#: The linear model is fitted on at most this many items (drawn with a fixed seed) and this many
#: principal components of the features: a freeze stays about a second at 100,000 items.
LINEAR_TRAIN_ROWS = 10_000
LINEAR_COMPONENTS = 64
_LINEAR_SEED = 20_021

#: The model runs on one BLAS thread: sums split over threads round differently, and the EM fit
#: carries that into other scores (BirdSong: up to 0.003 apart between one and two threads), so
#: the lots a session freezes would depend on the machine's thread count. The thread limit is
#: process-wide, so freezes in one process take turns.
_ONE_BLAS_THREAD = threading.Lock()


class LotModel:
    """``model(candidates) -> (labels, scores, margins)`` for :func:`engine.labelling_loop.run_loop`:
    DST-PLL's labels, the lot score, and DST-PLL's margins.

    Parameters
    ----------
    idx : int array of shape (n_items, k)
        Each item's neighbours (the dataset's graph, no item its own neighbour).
    X : float array of shape (n_items, n_features), optional
        The features; without them (or when they are constant) the score is DST-PLL's margin.
    one_blas_thread : bool, default=True
        Run on one BLAS thread, so that every machine freezes the same lots (see
        ``_ONE_BLAS_THREAD``); False leaves the machine's threads (a benchmark's baseline).
    """

    def __init__(self, idx: np.ndarray, X: np.ndarray | None = None, *, one_blas_thread: bool = True) -> None:
        self.idx = np.asarray(idx)
        usable = X is not None and np.ndim(X) == 2 and bool((np.ptp(np.asarray(X), axis=0) > 0).any())
        self.X = np.asarray(X, dtype=np.float64) if usable else None
        self.one_blas_thread = bool(one_blas_thread)

    def __call__(self, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not self.one_blas_thread:
            return self._decide(candidates)
        with _ONE_BLAS_THREAD, threadpool_limits(limits=1):
            return self._decide(candidates)

    def _decide(self, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        labels, _, margins = transductive_decisions(candidates, self.idx, random_state=0)
        margins = np.asarray(margins, dtype=np.float64)
        if self.X is None:
            return labels, margins, margins
        partial = np.asarray(candidates).sum(axis=1) >= 2
        linear_labels, linear_margins = _linear_decisions(self.X, np.asarray(candidates, dtype=bool), partial)
        agree = (linear_labels == labels) & (margins > 0) & partial
        # Agreeing items by the linear model's margin, above every other item (which keep DST-PLL's order).
        return labels, np.where(agree, 1.0 + linear_margins, margins - 1.0), margins


def _linear_decisions(features: np.ndarray, sets: np.ndarray, needed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each needed item's label and margin under the EM logistic model fitted to ``sets``, its
    probabilities restricted to the item's own set (-1 and 0 elsewhere)."""
    # scipy.optimize: only when a lot is frozen
    from engine.learners.em_logistic import EmLogisticPllClassifier, project_on_principal_axes

    usable = np.flatnonzero(sets.any(axis=1))
    rng = np.random.default_rng(_LINEAR_SEED)
    train = (
        usable if usable.size <= LINEAR_TRAIN_ROWS else np.sort(rng.choice(usable, LINEAR_TRAIN_ROWS, replace=False))
    )
    rows = np.flatnonzero(needed)
    fit_on, predict_on = project_on_principal_axes(features[train], features[rows], LINEAR_COMPONENTS)
    model = EmLogisticPllClassifier().fit(fit_on, sets[train])
    proba = model.predict_proba(predict_on) * sets[rows]
    proba /= np.maximum(proba.sum(axis=1, keepdims=True), np.finfo(np.float64).tiny)
    top = np.sort(proba, axis=1)
    n = sets.shape[0]
    labels, margins = np.full(n, -1, dtype=np.int64), np.zeros(n)
    labels[rows] = proba.argmax(axis=1)
    margins[rows] = top[:, -1] - top[:, -2] if top.shape[1] > 1 else 1.0
    return labels, margins
