"""When a session is done, and the estimate of the answers left (issue 46), on the bundled sample
replayed with the loop a session runs (:class:`benchmarks.replay_lots.Campaign`).

The estimate is read from the last checkpoint only: between two checkpoints it must not move,
or an annotator watching it could tell whether the last item was an audit.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.service.completion import work_is_done
from benchmarks.labels_delivered import sample_pool
from benchmarks.replay_lots import Campaign
from engine.estimates import estimate_answers, held_out_error
from engine.labelling_loop import Loop, LoopSettings
from engine.loop_design import DESIGN


@pytest.fixture(scope="module")
def campaign_at_25() -> tuple[Campaign, list]:
    """The sample after 25 answers (the true labels, in the served order), and the loop after each."""
    pool = sample_pool()
    campaign = Campaign(pool, LoopSettings(), key=bytes(range(32)), session=1)
    loops = []
    for _ in range(25):
        loop = campaign.loop()
        loops.append((loop, campaign.verdict_log()))
        ranked = np.flatnonzero((campaign.Y.sum(axis=1) >= 2) & ~campaign.answered)
        item = int(campaign.served(ranked, loop).positions[0])
        campaign.answer(item, int(pool.truth[item]))
    loops.append((campaign.loop(), campaign.verdict_log()))
    return campaign, loops


def test_done_needs_no_undecided_item_and_no_lot_being_checked(campaign_at_25):
    _, loops = campaign_at_25
    checking, _ = loops[0]
    assert checking.active is not None  # lot 1 is frozen at the first answer and checked
    assert not work_is_done(0, checking)
    nothing = Loop(lots=(), checkpoint=0, verdicts=0)
    assert work_is_done(0, nothing) and not work_is_done(1, nothing)


def test_the_estimate_moves_only_at_checkpoints(campaign_at_25):
    campaign, loops = campaign_at_25
    partial = campaign.pool.Y.sum(axis=1) >= 2
    estimates = [estimate_answers(loop, log, partial, 0.5, runs=20) for loop, log in loops[10:25]]
    assert all(e is not None for e in estimates)
    by_checkpoint: dict[int, set] = {}
    for verdicts, estimate in enumerate(estimates, start=10):
        assert estimate.checkpoint == verdicts // DESIGN.statement_every * DESIGN.statement_every
        by_checkpoint.setdefault(estimate.checkpoint, set()).add(estimate)
    # One estimate per checkpoint, whatever the answers (audits or not) given since.
    assert {k: len(v) for k, v in by_checkpoint.items()} == {10: 1, 20: 1}
    for estimate in estimates:
        assert estimate.checkpoint <= estimate.done_low <= estimate.done <= estimate.done_high
        assert estimate.first_statement is None or estimate.first_statement <= estimate.done_high


def test_a_clean_held_out_measure_lowers_the_estimate_before_the_first_audit(campaign_at_25):
    """The sample's model is wrong on none of the known items it would label with their labels
    hidden: the estimate drawn with that measure expects fewer answers than the prior alone."""
    campaign, loops = campaign_at_25
    partial = campaign.pool.Y.sum(axis=1) >= 2
    loop, log = loops[0]
    measure = held_out_error(campaign.model, campaign.items_at(loop.active.lot.frozen_at).candidates)
    assert measure.labelled > 200 and measure.wrong == 0
    with_measure = estimate_answers(loop, log, partial, 0.5, runs=40, held_out=measure)
    prior_alone = estimate_answers(loop, log, partial, 0.5, runs=40)
    assert with_measure.done < prior_alone.done
