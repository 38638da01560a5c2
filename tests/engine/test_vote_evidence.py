"""Votes and neighbours combined by Dempster's rule: hand-computed cases, then invariants with hypothesis."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.exceptions import InvalidInput
from engine.vote_evidence import (
    agreement_accuracies,
    combine_votes_and_neighbours,
    discount_from_accuracy,
    vote_log_contour,
)


def dense(votes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(items, annotators, labels) of a dense (n_items, n_annotators) vote table."""
    n, m = votes.shape
    return np.repeat(np.arange(n), m), np.tile(np.arange(m), n), votes.ravel()


def ring(n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each item's k next items around a ring (never itself), uniform weights."""
    idx = (np.arange(n)[:, None] + np.arange(1, k + 1)[None, :]) % n
    return idx, np.ones((n, k))


def combine(votes, idx, w, n_labels, answers=None):
    n, m = votes.shape
    return combine_votes_and_neighbours(
        *dense(votes), idx, w, n_items=n, n_labels=n_labels, n_annotators=m, answers=answers
    )


def test_discount_matches_the_one_coin_likelihood_ratio():
    # p = 0.8, L = 3: the vote's contour ratio 1 / (1 - r) equals p (L - 1) / (1 - p) = 8.
    assert discount_from_accuracy(0.8, 3) == pytest.approx(1 / 8)
    # No better than chance: no evidence.
    assert discount_from_accuracy(1 / 3, 3) == pytest.approx(1.0)
    assert discount_from_accuracy(0.2, 3) == 1.0
    with pytest.raises(InvalidInput, match="strictly between 0 and 1"):
        discount_from_accuracy(1.0, 3)


def test_counts_matter_where_the_union_forgets_them():
    # (a, a, b) and (a, b, b) make the same union {a, b}; the combined labels differ.
    votes = np.array([[0, 0, 1], [0, 1, 1]] + [[2, 2, 2]] * 4)
    no_neighbours = (np.zeros((6, 1), dtype=np.intp), np.zeros((6, 1)))
    result = combine(votes, *no_neighbours, n_labels=3)
    assert result.labels[:2].tolist() == [0, 1]


def test_a_label_outside_the_votes_wins_when_the_neighbours_outweigh_them():
    # 40 items of label 0 in a ring; two annotators who often disagree (each wrong on a
    # different fifth of them), so each vote weighs little; the k-NN names 0 everywhere.
    # Item 40's annotators split between 1 and 2; its neighbours are label-0 items.
    background = np.zeros((40, 2), dtype=np.int64)
    background[0:8, 0] = 1
    background[8:16, 1] = 2
    votes = np.vstack([background, [[1, 2]]])
    idx, w = ring(41, 10)
    idx[:40] %= 40  # the ring of the label-0 items leaves item 40 out
    idx[40] = np.arange(10)
    result = combine(votes, idx, w, n_labels=3)
    assert result.neighbour_accuracy > result.annotator_accuracy.max()
    assert result.labels[40] == 0
    assert 0 not in votes[40]
    assert (result.labels[:40] == 0).all()


def test_answers_are_final_and_inform_the_accuracies():
    votes = np.array([[0, 1], [0, 1], [0, 1], [1, 1]])
    idx, w = ring(4, 2)
    answers = np.array([1, 1, -1, -1])
    result = combine(votes, idx, w, n_labels=2, answers=answers)
    assert result.labels[:2].tolist() == [1, 1]
    # Annotator 1 agreed with both answers, annotator 0 with neither.
    assert result.annotator_accuracy[1] > result.annotator_accuracy[0]
    assert result.labels[2] == 1
    assert np.allclose(result.plausibility.sum(axis=1), 1.0)


def test_a_perfect_source_rules_out_the_other_labels_without_nan():
    # A vote of d = 0 for label 0 rules out 1 and 2; another vote of d = 0.5 for 1 weighs on 0.
    out = vote_log_contour(np.array([0, 0]), np.array([0, 1]), np.array([0.0, 0.5]), n_items=1, n_labels=3)
    assert out.tolist() == [[np.log(0.5), -np.inf, -np.inf]]
    # Two such votes for the same label: that label keeps contour 1 (no -inf - -inf).
    out = vote_log_contour(np.array([0, 0]), np.array([0, 0]), np.array([0.0, 0.0]), n_items=1, n_labels=3)
    assert out.tolist() == [[0.0, -np.inf, -np.inf]]


def test_accuracies_use_the_other_votes_majority_and_the_answers():
    items, annotators, labels = dense(np.array([[0, 0, 1], [2, 2, 2]]))
    acc = agreement_accuracies(items, annotators, labels, n_items=2, n_labels=3, n_annotators=3)
    # On item 0 annotators 0 and 1 see no strict majority among the others (one 0, one 1):
    # not compared there; annotator 2 disagreed with the others' majority (0).
    assert acc.tolist() == pytest.approx([2 / 3, 2 / 3, 2 / 4])
    acc = agreement_accuracies(
        items, annotators, labels, n_items=2, n_labels=3, n_annotators=3, answers=np.array([1, -1])
    )
    assert acc.tolist() == pytest.approx([2 / 4, 2 / 4, 3 / 4])


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"answers": np.array([0, 5, -1])}, r"answers\[1\] = 5"),
        ({"idx": np.array([[1], [3], [0]])}, r"idx must hold items in \[0, 3\)"),
        ({"w": -np.ones((3, 1))}, "finite non-negative"),
        ({"n_labels": 1}, "at least 2"),
        ({"annotators": np.array([0, 1, 0, 1, 0, 7])}, r"annotators must hold one index in \[0, 2\)"),
    ],
)
def test_bad_inputs_are_refused_with_what_is_wrong(change, match):
    items, annotators, labels = dense(np.array([[0, 1], [1, 1], [0, 0]]))
    kwargs = {
        "items": items,
        "annotators": annotators,
        "labels": labels,
        "idx": np.array([[1], [2], [0]]),
        "w": np.ones((3, 1)),
        "n_items": 3,
        "n_labels": 2,
        "n_annotators": 2,
    }
    kwargs.update(change)
    with pytest.raises(InvalidInput, match=match):
        combine_votes_and_neighbours(**kwargs)


@st.composite
def crowd_problems(draw):
    n_labels = draw(st.integers(2, 4))
    n_annotators = draw(st.integers(1, 4))
    n = draw(st.integers(4, 12))
    k = draw(st.integers(1, 3))
    votes = np.array(
        draw(
            st.lists(
                st.lists(st.integers(0, n_labels - 1), min_size=n_annotators, max_size=n_annotators),
                min_size=n,
                max_size=n,
            )
        )
    )
    answers = np.array(draw(st.lists(st.integers(-1, n_labels - 1), min_size=n, max_size=n)))
    return votes, answers, n_labels, k


@settings(max_examples=60, deadline=None)
@given(crowd_problems())
def test_invariants(problem):
    votes, answers, n_labels, k = problem
    n = votes.shape[0]
    idx, w = ring(n, k)
    result = combine(votes, idx, w, n_labels, answers=answers)
    answered = answers >= 0
    # An answer is never overruled.
    assert (result.labels[answered] == answers[answered]).all()
    # The plausibility transform is a distribution, and the label is its mode.
    assert np.allclose(result.plausibility.sum(axis=1), 1.0)
    assert np.allclose(result.plausibility.max(axis=1), result.plausibility[np.arange(n), result.labels])
    assert ((result.annotator_accuracy > 0) & (result.annotator_accuracy < 1)).all()


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 5), st.integers(1, 5), st.integers(5, 15), st.data())
def test_unanimous_votes_and_agreeing_neighbours_give_that_label(n_labels, n_annotators, n, data):
    truth = np.array(data.draw(st.lists(st.integers(0, n_labels - 1), min_size=n, max_size=n)))
    votes = np.repeat(truth[:, None], n_annotators, axis=1)
    # Every item's neighbours are items of its own label (itself excluded where it can be).
    idx = np.array([[j for j in np.flatnonzero(truth == truth[i]) if j != i][:1] or [(i + 1) % n] for i in range(n)])
    w = np.array([[1.0 if truth[idx[i, 0]] == truth[i] else 0.0] for i in range(n)])
    result = combine(votes, idx, w, n_labels)
    assert (result.labels == truth).all()


def dempster(masses: list[dict[frozenset, float]]) -> dict[frozenset, float]:
    """Dempster's rule by enumeration: the oracle of the contour-product shortcut."""
    combined = masses[0]
    for other in masses[1:]:
        joint: dict[frozenset, float] = {}
        for a, ma in combined.items():
            for b, mb in other.items():
                joint[a & b] = joint.get(a & b, 0.0) + ma * mb
        conflict = joint.pop(frozenset(), 0.0)
        combined = {s: m / (1.0 - conflict) for s, m in joint.items()}
    return combined


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 4),
    st.lists(st.tuples(st.integers(0, 3), st.floats(0.05, 1.0)), min_size=1, max_size=4),
)
def test_the_contour_of_the_votes_is_dempsters_rule_by_enumeration(n_labels, votes):
    votes = [(v % n_labels, d) for v, d in votes]
    frame = frozenset(range(n_labels))
    supports = [{frozenset([v]): 1.0 - d, frame: d} if d < 1 else {frame: 1.0} for v, d in votes]
    combined = dempster(supports)
    pl = np.array([sum(m for s, m in combined.items() if x in s) for x in range(n_labels)])
    log_pl = vote_log_contour(
        np.zeros(len(votes), dtype=np.int64),
        np.array([v for v, _ in votes]),
        np.array([d for _, d in votes]),
        n_items=1,
        n_labels=n_labels,
    )[0]
    np.testing.assert_allclose(np.exp(log_pl) / np.exp(log_pl).sum(), pl / pl.sum(), rtol=1e-9)


@settings(max_examples=30, deadline=None)
@given(crowd_problems(), st.randoms(use_true_random=False))
def test_invariant_to_the_order_of_neighbours_and_the_names_of_annotators(problem, random):
    votes, answers, n_labels, k = problem
    n, m = votes.shape
    idx, w = ring(n, k)
    w = w * np.array([random.choice([0.5, 1.0, 2.0]) for _ in range(n * k)]).reshape(n, k)
    result = combine(votes, idx, w, n_labels, answers=answers)
    columns = np.array(random.sample(range(k), k))
    annotators = np.array(random.sample(range(m), m))
    shuffled = combine(votes[:, annotators], idx[:, columns], w[:, columns], n_labels, answers=answers)
    np.testing.assert_allclose(shuffled.plausibility, result.plausibility, atol=1e-12)
    np.testing.assert_array_equal(shuffled.labels, result.labels)
    np.testing.assert_allclose(shuffled.annotator_accuracy, result.annotator_accuracy[annotators])


def test_non_integer_votes_are_a_type_error():
    with pytest.raises(TypeError, match="labels must hold integers"):
        combine(np.array([[0.5, 1.0]]), np.zeros((1, 1), dtype=np.intp), np.zeros((1, 1)), n_labels=2)
