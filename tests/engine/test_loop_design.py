"""engine.loop_design: one frozen record of the loop's design, each value's provenance in the docs."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import pytest

from engine.exceptions import InvalidInput
from engine.loop_design import DESIGN, LoopDesign

PAGE = Path(__file__).resolve().parents[2] / "docs" / "loop_design.md"


def test_the_docs_give_every_field_with_the_value_the_loop_runs():
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|", PAGE.read_text(encoding="utf-8"), flags=re.MULTILINE))
    for field in dataclasses.fields(LoopDesign):
        assert field.name in rows, f"docs/loop_design.md does not give {field.name}"
        assert rows[field.name].strip() == str(getattr(DESIGN, field.name)).replace(" ", "").replace(",", ", ")


def test_the_design_cannot_be_changed_in_place():
    with pytest.raises(dataclasses.FrozenInstanceError):
        DESIGN.lot_answers = 400  # type: ignore[misc]


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"layer_shares": (0.5, 0.25, 0.2)}, "layer_shares"),
        ({"layer_shares": (0.5, 0.5)}, "layer_shares"),
        ({"layer_fractions": (0.25, 0.5, 0.9)}, "layer_fractions"),
        ({"layer_fractions": (0.5, 0.25, 1.0)}, "layer_fractions"),
        ({"alone_layer_fractions": (0.0, 1.0)}, "alone_layer_fractions"),
        ({"alone_layer_fractions": (0.5, 1.5)}, "alone_layer_fractions"),
        ({"alone_layer_fractions": (0.6, 0.5)}, "alone_layer_fractions"),
        ({"lot_answers": 805}, "multiple of statement_every"),
        ({"retry_answers": 15}, "multiple of statement_every"),
        ({"statement_every": 0}, "at least 1"),
        ({"pilot_pass": 1.0}, "pilot_pass"),
        ({"average_first_lot_share": 1.0}, "average_first_lot_share"),
        ({"average_first_lot_share": 0.0}, "average_first_lot_share"),
        ({"average_first_lot_share": math.nan}, "average_first_lot_share"),
        ({"steep_pair_slope_factor": 0.9}, "steep_pair_slope_factor"),
        ({"steep_pair_slope_factor": math.nan}, "steep_pair_slope_factor"),
        ({"steep_pair_slope_factor": math.inf}, "steep_pair_slope_factor"),
        ({"steep_pair_audits": 0}, "steep_pair_audits"),
        ({"steep_pair_labels": 0}, "steep_pair_labels"),
        ({"average_plan_headroom": 0.0}, "average_plan_headroom"),
        ({"end_charge_floor": 1.5}, "end_charge_floor"),
        ({"end_charge_rates": ()}, "end_charge_rates"),
        ({"end_charge_rates": (0.01, 1.0)}, "end_charge_rates"),
    ],
)
def test_a_design_that_cannot_work_is_refused(changes, match):
    with pytest.raises(InvalidInput, match=match):
        dataclasses.replace(DESIGN, **changes)
