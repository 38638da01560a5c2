"""Candidate sets from crowd votes: hand-computed cases, then properties with hypothesis."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.exceptions import InvalidInput
from engine.votes import candidate_sets_from_votes, vote_counts


def test_union_thresholds_and_items_without_votes():
    # item 0: jazz x3, blues x1; item 1: rock x1, pop x1; item 2: no vote.
    items = np.array([0, 0, 0, 0, 1, 1])
    labels = np.array([0, 0, 0, 1, 2, 3])
    sets = lambda **kw: candidate_sets_from_votes(items, labels, n_items=3, n_labels=4, **kw).astype(int).tolist()  # noqa: E731
    assert sets() == [[1, 1, 0, 0], [0, 0, 1, 1], [1, 1, 1, 1]]
    assert sets(min_votes=2) == [[1, 0, 0, 0], [0, 0, 1, 1], [1, 1, 1, 1]]
    assert sets(min_share=0.25) == sets()  # 1 of 4 votes is exactly a quarter: kept
    assert sets(min_share=0.3) == [[1, 0, 0, 0], [0, 0, 1, 1], [1, 1, 1, 1]]
    # No label of item 0 has 4 votes: its plurality label (jazz) stays; item 1 keeps its tie.
    assert sets(min_votes=4) == [[1, 0, 0, 0], [0, 0, 1, 1], [1, 1, 1, 1]]
    assert sets(min_votes=5, min_share=1.0) == [[1, 0, 0, 0], [0, 0, 1, 1], [1, 1, 1, 1]]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"min_votes": 0}, "min_votes must be an integer >= 1"),
        ({"min_votes": 1.5}, "min_votes must be an integer >= 1"),
        ({"min_votes": True}, "min_votes must be an integer >= 1"),
        ({"min_share": 0}, r"min_share must be a number in \(0, 1\]"),
        ({"min_share": 1.5}, r"min_share must be a number in \(0, 1\]"),
        ({"min_share": "half"}, r"min_share must be a number in \(0, 1\]"),
    ],
)
def test_bad_thresholds_are_refused(kwargs, match):
    with pytest.raises(InvalidInput, match=match):
        candidate_sets_from_votes([0], [0], n_items=1, n_labels=2, **kwargs)


def test_bad_index_arrays_are_refused():
    with pytest.raises(InvalidInput, match="outside"):
        vote_counts([0, 2], [0, 0], n_items=2, n_labels=1)
    with pytest.raises(InvalidInput, match="outside"):
        vote_counts([0], [-1], n_items=1, n_labels=1)
    with pytest.raises(InvalidInput, match="same length"):
        vote_counts([0, 0], [0], n_items=1, n_labels=1)
    with pytest.raises(TypeError, match="integers"):
        vote_counts([0.5], [0], n_items=1, n_labels=1)


@st.composite
def vote_tables(draw):
    n_items = draw(st.integers(1, 6))
    n_labels = draw(st.integers(1, 5))
    n_votes = draw(st.integers(0, 25))
    items = draw(st.lists(st.integers(0, n_items - 1), min_size=n_votes, max_size=n_votes))
    labels = draw(st.lists(st.integers(0, n_labels - 1), min_size=n_votes, max_size=n_votes))
    return np.array(items, dtype=int), np.array(labels, dtype=int), n_items, n_labels


@settings(max_examples=60, deadline=None)
@given(vote_tables(), st.integers(1, 6), st.integers(1, 6), st.floats(0.01, 1.0), st.floats(0.01, 1.0))
def test_properties(table, votes_a, votes_b, share_a, share_b):
    items, labels, n, m = table
    kw = {"n_items": n, "n_labels": m}
    counts = vote_counts(items, labels, **kw)
    union = candidate_sets_from_votes(items, labels, **kw)
    voted = counts.sum(axis=1) > 0
    # min_votes=1 is the union; unvoted items get every label; no set is empty.
    assert np.array_equal(candidate_sets_from_votes(items, labels, min_votes=1, **kw), union)
    assert np.array_equal(union[voted], counts[voted] > 0)
    assert union[~voted].all()
    plurality = counts == counts.max(axis=1, keepdims=True)
    low_v, high_v = sorted((votes_a, votes_b))
    low_s, high_s = sorted((share_a, share_b))
    for options in ({"min_votes": low_v}, {"min_share": low_s}, {"min_votes": low_v, "min_share": low_s}):
        strict = candidate_sets_from_votes(items, labels, **options, **kw)
        assert strict.any(axis=1).all()
        assert (strict <= union).all()  # a threshold never adds a label
        # The set always holds a plurality label of every voted item.
        assert (strict[voted] & plurality[voted]).any(axis=1).all()
    # Monotone: a higher threshold gives a subset.
    for low, high in (({"min_votes": low_v}, {"min_votes": high_v}), ({"min_share": low_s}, {"min_share": high_s})):
        assert (
            candidate_sets_from_votes(items, labels, **high, **kw)
            <= candidate_sets_from_votes(items, labels, **low, **kw)
        ).all()
