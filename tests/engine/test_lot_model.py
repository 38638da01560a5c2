"""engine.lot_model: a lot's model gives the same labels and scores on every machine."""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits

from engine.lot_model import LotModel
from engine.neighbors import knn_graph


def test_the_scores_do_not_depend_on_the_blas_threads():
    """5,000 items, 38 features, 13 classes (BirdSong's shape): the scores came out 1e-13 apart
    with one and two BLAS threads before the model was run on one, and the EM fit carries such
    a difference much further on real data (0.003 on BirdSong), so lots frozen by two machines
    would differ."""
    rng = np.random.default_rng(0)
    n, d, c = 5000, 38, 13
    truth = rng.integers(0, c, n)
    X = rng.normal(scale=2.0, size=(c, d))[truth] + rng.normal(scale=2.5, size=(n, d))
    Y = rng.random((n, c)) < 0.35
    Y[np.arange(n), truth] = True
    idx, _ = knn_graph(X, k=10)
    model = LotModel(idx, X)
    outputs = []
    for threads in (1, 2):
        with threadpool_limits(limits=threads):
            outputs.append(model(Y))
    for one, two in zip(*outputs, strict=True):
        assert np.array_equal(one, two)
