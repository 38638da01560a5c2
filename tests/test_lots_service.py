"""A failing lot gives way to a clearly cleaner one, and a lot whose items a later lot took again is
never certified (app.service.lots), on hand-made lots where every outcome is known."""

from __future__ import annotations

import numpy as np
import pytest

from app.service.lots import (
    FAILING_MIN_AUDITS,
    ItemStatus,
    failing,
    freeze_lot,
    lots_now,
)
from app.store import LabelLotRecord, LabelSettings
from engine.lots import LotVerdict, lot_alpha

N_ITEMS = 1_000
N_LABELS = 2
SETTINGS = LabelSettings(max_error=0.05, audit_share=0.05)


def verdict(audited: int, errors: int, *, certified: bool = False) -> LotVerdict:
    return LotVerdict(500, audited, errors, errors, 500 - audited, 0, 0, 1.0, certified, False, 10)


@pytest.mark.parametrize(
    ("audited", "errors", "certified", "expected"),
    [
        (FAILING_MIN_AUDITS, 1, False, True),  # 5 % wrong: more than half the 5 % target
        (FAILING_MIN_AUDITS - 1, 1, False, False),  # too few audits to say
        (40, 1, False, False),  # 2.5 %: exactly half the target is not more
        (41, 2, False, True),
        (FAILING_MIN_AUDITS, 1, True, False),  # a certified lot is delivering, not failing
    ],
)
def test_a_lot_fails_when_its_audits_are_more_than_half_the_target_wrong(audited, errors, certified, expected):
    assert failing(verdict(audited, errors, certified=certified), 0.05) is expected


def make_lot(number: int, positions: np.ndarray, threshold: float = 1e-9) -> LabelLotRecord:
    positions = np.asarray(positions, dtype=np.int64)
    return LabelLotRecord(
        number=number,
        positions=positions,
        labels=np.zeros(positions.size, dtype=np.int64),  # every frozen label says 0
        margins=np.full(positions.size, 0.5),
        alpha=lot_alpha(0.1, number),
        target=0.05,
        threshold=threshold,
        after_event_id=0,
    )


def status(right: np.ndarray, wrong: np.ndarray) -> ItemStatus:
    """Every item open with both labels as candidates, except the answered ones: ``right`` were
    answered 0 (the frozen label), ``wrong`` were answered 1."""
    candidates = np.ones((N_ITEMS, N_LABELS), dtype=bool)
    candidates[right, 1] = False
    candidates[wrong, 0] = False
    answered = np.zeros(N_ITEMS, dtype=bool)
    answered[right] = answered[wrong] = True
    nothing = np.zeros(N_ITEMS, dtype=bool)
    return ItemStatus(candidates, answered, nothing, nothing, ~answered)


def first_lot_audited(right: int, wrong: int) -> tuple[LabelLotRecord, ItemStatus]:
    """A lot of the first 600 items, whose audit prefix holds ``wrong`` wrong labels first."""
    lot = make_lot(1, np.arange(600))
    order = lot.positions
    return lot, status(order[wrong : wrong + right], order[:wrong])


def freeze(lot, items, learned, margins):
    now = lots_now([lot], items, SETTINGS)
    return now, freeze_lot(
        now,
        items,
        np.zeros(N_ITEMS, dtype=np.int64),
        margins,
        SETTINGS,
        learned=learned,
        secret=b"k" * 32,
        session_id=1,
        last_event_id=1,
    )


def test_a_failing_lot_is_still_audited_until_a_clearly_cleaner_lot_replaces_it():
    lot, items = first_lot_audited(right=36, wrong=4)  # 10 % wrong on 40 audits
    margins = np.linspace(0.0, 1.0, N_ITEMS)
    now = lots_now([lot], items, SETTINGS)
    assert now.failing and now.active == 0 and now.new_lot_due
    assert now.audit_share(SETTINGS) == 0.5  # audits go on at the first statement's share

    # The audits rescored: the four wrong ones low, so the learned threshold sits above them.
    m = np.r_[np.full(4, 0.2), np.linspace(0.6, 1.0, 36)]
    right = np.r_[np.zeros(4, dtype=bool), np.ones(36, dtype=bool)]
    _, fresh = freeze(lot, items, (m, right), margins)
    assert fresh is not None and fresh.number == 2
    assert fresh.threshold > lot.threshold and (margins[fresh.positions] >= fresh.threshold).all()
    assert not items.answered[fresh.positions].any()
    after = lots_now([lot, fresh], items, SETTINGS)
    assert after.active == 1 and not after.failing

    # Clean above, but fewer than FAILING_MIN_AUDITS audited items there: no new lot.
    m_few = np.r_[np.full(40 - FAILING_MIN_AUDITS + 1, 0.2), np.linspace(0.6, 1.0, FAILING_MIN_AUDITS - 1)]
    right_few = m_few > 0.5
    assert freeze(lot, items, (m_few, right_few), margins)[1] is None


def test_a_lot_that_is_not_failing_is_not_replaced():
    lot, items = first_lot_audited(right=40, wrong=0)
    m, right = np.linspace(0.6, 1.0, 40), np.ones(40, dtype=bool)
    now, fresh = freeze(lot, items, (m, right), np.linspace(0.0, 1.0, N_ITEMS))
    assert not now.failing and not now.new_lot_due and fresh is None


def test_a_lot_whose_items_a_later_lot_took_again_is_never_certified():
    # 80 right audits certify a lot of 600 on their own (lot_verdict's doctest certifies 400 on 75).
    lot, items = first_lot_audited(right=80, wrong=0)
    assert lots_now([lot], items, SETTINGS).verdicts[0].certified
    overlapping = make_lot(2, np.arange(500, 900), threshold=0.5)
    now = lots_now([lot, overlapping], items, SETTINGS)
    assert not now.verdicts[0].certified and now.verdicts[0].audits_left == -1
    kept, _, _ = now.delivered(N_ITEMS)
    assert not kept.any()
    disjoint = make_lot(2, np.arange(600, 900), threshold=0.5)
    now = lots_now([lot, disjoint], items, SETTINGS)
    assert now.verdicts[0].certified
    kept, _, _ = now.delivered(N_ITEMS)
    assert kept.sum() == 600 - 80 and kept[lot.positions[80:]].all()


def test_a_lot_above_a_higher_threshold_but_nearly_as_wrong_does_not_replace_a_failing_one():
    lot, items = first_lot_audited(right=58, wrong=2)  # 3.3 % wrong on 60 audits: failing
    assert lots_now([lot], items, SETTINGS).failing
    m = np.linspace(0.3, 1.0, 60)
    right = np.ones(60, dtype=bool)
    right[[0, 55]] = False  # one wrong at the bottom, one near the top
    # The learned threshold drops the bottom one; above it 1 of 59 are wrong (1.7 %), more than
    # half the failing lot's 3.3 %: the failing lot goes on.
    assert freeze(lot, items, (m, right), np.linspace(0.0, 1.0, N_ITEMS))[1] is None
    right[55] = True  # now clean above: it replaces the failing lot
    assert freeze(lot, items, (m, right), np.linspace(0.0, 1.0, N_ITEMS))[1] is not None
