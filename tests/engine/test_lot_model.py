"""engine.lot_model: a lot's model gives the same labels and scores on every machine."""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits

from benchmarks.bench_lot_model_threads import generated
from engine.lot_model import LotModel


def test_the_scores_do_not_depend_on_the_blas_threads():
    """5,000 items, 38 features, 13 classes (BirdSong's shape): the scores came out 1e-13 apart
    with one and two BLAS threads before the model was run on one, and the EM fit carries such
    a difference much further on real data (0.003 on BirdSong), so lots frozen by two machines
    would differ."""
    X, Y, idx = generated(5000, features=38, classes=13)
    model = LotModel(idx, X)
    outputs = []
    for threads in (1, 2):
        with threadpool_limits(limits=threads):
            outputs.append(model(Y))
    for one, two in zip(*outputs, strict=True):
        assert np.array_equal(one, two)
