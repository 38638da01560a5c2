"""Hypothesis strategies for small vote problems the brute-force oracle can enumerate."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

WEIGHT_KINDS = ("equal", "small_int", "dyadic", "float", "with_zeros")


@st.composite
def vote_problems(draw, max_k: int = 7, max_labels: int = 5, max_targets: int = 4, weight_kinds=WEIGHT_KINDS):
    """(idx, w, Y): up to ``max_targets`` targets over a small training set.

    Weight kinds force ties (equal, small integers, dyadic fractions) as well as generic floats.
    """
    n_labels = draw(st.integers(1, max_labels))
    k = draw(st.integers(1, max_k))
    n = draw(st.integers(k, k + 5))
    rows = draw(
        st.lists(
            st.lists(st.booleans(), min_size=n_labels, max_size=n_labels).filter(any),
            min_size=n,
            max_size=n,
        )
    )
    Y = np.array(rows, dtype=bool)
    n_targets = draw(st.integers(1, max_targets))
    perms = st.permutations(list(range(n)))
    idx = np.array([draw(perms)[:k] for _ in range(n_targets)], dtype=np.intp)
    kind = draw(st.sampled_from(weight_kinds))
    shape = (n_targets, k)
    if kind == "equal":
        w = np.full(shape, draw(st.sampled_from([1.0, 0.5, 3.0])))
    elif kind == "small_int":
        w = np.array(draw(st.lists(st.integers(1, 3), min_size=n_targets * k, max_size=n_targets * k)), float).reshape(
            shape
        )
    elif kind == "dyadic":
        w = (
            np.array(draw(st.lists(st.integers(1, 16), min_size=n_targets * k, max_size=n_targets * k)), float).reshape(
                shape
            )
            / 8
        )
    elif kind == "with_zeros":
        w = np.array(draw(st.lists(st.integers(0, 2), min_size=n_targets * k, max_size=n_targets * k)), float).reshape(
            shape
        )
    else:
        w = np.array(
            draw(st.lists(st.floats(0.01, 10.0, allow_nan=False), min_size=n_targets * k, max_size=n_targets * k)),
            float,
        ).reshape(shape)
    return idx, w, Y
