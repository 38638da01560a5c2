"""engine.estimates: the simulated served slots follow :func:`engine.labelling_loop.served_order`.

A ranked slot never answers an item the audit slots ahead are about to reach: the served order
keeps the first items of the audit queue for them, one per audit slot among the next slots (as
many as there are open items). The simulation must do the same, or its ranked answers fill the
audited prefix and the lot looks checked sooner than any session checks it.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.estimates import kept_for_audits, ranked_lot_item
from engine.labelling_loop import served_order


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
