"""engine.estimates: the simulated served slots follow :func:`engine.labelling_loop.served_order`,
and the lot's error rates are drawn from the model's held-out error weighed by the audits.

A ranked slot never answers an item the audit slots ahead are about to reach: the served order
keeps the first items of the audit queue for them, one per audit slot among the next slots (as
many as there are open items). The simulation must do the same, or its ranked answers fill the
audited prefix and the lot looks checked sooner than any session checks it.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.estimates import HeldOutError, LotErrorBelief, held_out_error, kept_for_audits, ranked_lot_item
from engine.labelling_loop import served_order
from engine.promises import error_rate_prior


@settings(max_examples=200, deadline=None)
@given(
    size=st.integers(1, 40),
    outside=st.integers(0, 10),
    share=st.sampled_from([0.2, 0.5, 0.8]),
    seed=st.integers(0, 10_000),
)
def test_the_items_kept_for_audits_are_those_served_order_audits(size, outside, share, seed):
    rng = np.random.default_rng(seed)
    known = rng.random(size) < 0.3
    queue_start = int(rng.integers(0, size + 1))  # the items before it: layers already passed
    queue = queue_start + np.flatnonzero(~known[queue_start:])
    # The ranked queue: the open items outside the lot first, then the lot's open items.
    outside_items = size + rng.permutation(outside)
    lot_items = rng.permutation(np.flatnonzero(~known))
    ranked = np.concatenate([outside_items, lot_items]).astype(np.int64)
    u = rng.random(ranked.size + queue.size + 1)
    order = served_order(ranked, queue, base=0, audit_share=share, uniforms=lambda m: u[:m])

    flags_before = np.concatenate([[0], np.cumsum(u < share)])
    audit_slots = int(flags_before[ranked.size])  # audit slots among the next, one per open item
    kept = kept_for_audits(known, queue_start, audit_slots)
    assert set(order.positions[order.audit].tolist()) == set(np.flatnonzero(kept).tolist())

    # The lot item the simulation's first ranked slot takes, when the lot's open items come
    # in the ranked queue's order: the one the served order gives the first ranked slot.
    priority = np.zeros(size)
    priority[lot_items] = np.linspace(1.0, 0.5, lot_items.size)
    if outside == 0 and u[0] >= share:
        expected = int(order.positions[0]) if order.positions.size else None
        assert ranked_lot_item(known, priority, queue_start, flags_before, 0, 0) == expected


def test_held_out_error_hides_each_known_label_from_the_model_that_labels_it():
    """Cross-fitting: every known item is labelled once, by a call where its set (its label) is
    all labels; the partial items are never hidden, and only items scored above 0 count."""
    rng = np.random.default_rng(3)
    Y = rng.random((30, 4)) < 0.4
    Y[:, :2] = True  # every item partial, but
    Y[:12] = np.eye(4, dtype=bool)[np.arange(12) % 4]  # 12 known items, label i % 4
    hidden_in: list[np.ndarray] = []

    def model(candidates):
        hidden = np.flatnonzero(candidates.all(axis=1) & ~Y.all(axis=1))
        hidden_in.append(hidden)
        labels = np.zeros(len(candidates), dtype=np.int64)  # right on label 0 only
        scores = np.where(np.arange(len(candidates)) % 3 == 0, -1.0, 1.0)  # items 0, 3, 6, 9 not labelled
        return labels, scores, scores

    measure = held_out_error(model, Y, folds=5)
    hidden = np.concatenate(hidden_in)
    assert len(hidden_in) == 5 and sorted(hidden.tolist()) == list(range(12))
    labelled = [i for i in range(12) if i % 3 != 0]
    assert measure == HeldOutError(labelled=len(labelled), wrong=sum(i % 4 != 0 for i in labelled))


def test_held_out_error_with_no_known_item_measures_nothing():
    Y = np.ones((5, 3), dtype=bool)
    assert held_out_error(lambda c: (np.zeros(5), np.ones(5), np.ones(5)), Y) == HeldOutError(0, 0)


def test_the_lot_error_belief_without_a_measure_is_the_confidence_sequence_prior():
    seen, bad = np.array([10, 3]), np.array([1, 0])
    for measure in (None, HeldOutError(0, 0)):
        belief = LotErrorBelief.of(0.05, measure, seen, bad)
        assert belief.priors == (error_rate_prior(0.05),) and belief.weights == (1.0,)


def test_the_audits_weigh_the_measure_against_the_prior_by_their_likelihood():
    a, b = error_rate_prior(0.05)  # (1, 80)
    measure = HeldOutError(labelled=100, wrong=0)
    before = LotErrorBelief.of(0.05, measure, np.array([0, 0]), np.array([0, 0]))
    assert before.priors == ((a, b + 100), (a, b)) and before.weights == pytest.approx((0.5, 0.5))
    # One audit, wrong: likely a / (a + b) under each hypothesis, 1/181 against 1/81.
    after = LotErrorBelief.of(0.05, measure, np.array([1, 0]), np.array([1, 0]))
    assert after.weights == pytest.approx((81 / 262, 181 / 262))
    # Clean audits favour the clean measure, and keep doing so as they grow.
    clean = [LotErrorBelief.of(0.05, measure, np.array([n, 0]), np.array([0, 0])).weights[0] for n in (10, 50, 200)]
    assert 0.5 < clean[0] < clean[1] < clean[2] < 1
