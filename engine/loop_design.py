"""The labelling loop's design: every number the loop and its promises' tests are built from.

One frozen record, :data:`DESIGN`, read by :mod:`engine.labelling_loop` and
:mod:`engine.promises`. A user's settings (target, confidence, promise, audit share) are not
here: they are :class:`engine.labelling_loop.LoopSettings`, stored with each lot. What each value
does, where it comes from and what it was measured against is in ``docs/loop_design.md``;
a test keeps that page naming every field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.exceptions import InvalidInput

__all__ = ["LoopDesign", "DESIGN", "SERIES_FIRST_SHARE"]

#: The first term of the series the lots share the promise by, ``6 / (π² l²)`` at ``l = 1``:
#: lot 1's share unless its promise gives another (derived, not chosen; docs/loop_design.md).
SERIES_FIRST_SHARE = 6.0 / math.pi**2


@dataclass(frozen=True)
class LoopDesign:
    """The loop's design (``docs/loop_design.md`` gives each value's provenance).

    Attributes
    ----------
    statement_every : int
        Statements change, and lots are frozen, only every this many verdicts.
    lot_answers : int
        A lot is audited for at most this many verdicts after it is frozen.
    retry_answers : int
        When no lot can be frozen, the loop looks again this many verdicts later.
    layer_fractions, layer_shares : tuple of float
        A lot's layers by margin (the sets its statements are about hold the best
        ``layer_fractions[j]`` of it) and each layer's share of the lot's share of the promise.
    alone_layer_fractions : tuple of float
        On average, a lot frozen while no label is stated: its two layers end at these
        fractions of it (its best half, then the rest of its best 95 %; the last labels are left
        to later lots).
    average_plan_audits : int
        On average, a set is accepted within this many audits or never.
    average_first_lot_share : float
        On average, lot 1's share of the promise; the lots after it share the rest as the
        series does (:func:`engine.labelling_loop.lot_share`).
    steep_pair_labels : int
        On average, a lot's two layers that each hold at least this many labels past their
        pilots are tested with steeper, longer plans:
    steep_pair_slope_factor, steep_pair_audits : float, int
        those plans' slope, as a multiple of their budget, and their horizon in audits
        (:func:`engine.promises.average_plan`).
    pilot_audits : int
        A piloted part's pilot: its first this many audits.
    pilot_pass : float
        A part exactly as wrong as its test's rate passes its pilot with at least this probability.
    average_plan_headroom : float
        On average, a set charged by how its test ended (every set but a pair's layers) gets a
        plan at this fraction of its budget: the room left is what lets an end be charged less
        than the whole share (:mod:`engine.end_charges`).
    end_charge_rates : tuple of float
        The error rates whose expected charge the end charges are chosen to make smallest, on
        average over them (any choice keeps the promise; these decide where charges are low).
    end_charge_floor : float
        Least fraction of its share any end is charged: it stands for the error counts so high
        that acceptance is almost impossible, which are then not checked one by one.
    """

    statement_every: int = 10
    lot_answers: int = 800
    retry_answers: int = 20
    layer_fractions: tuple[float, ...] = (0.25, 0.5, 1.0)
    layer_shares: tuple[float, ...] = (0.5, 0.25, 0.25)
    alone_layer_fractions: tuple[float, float] = (0.5, 0.95)
    average_plan_audits: int = 150
    average_first_lot_share: float = 0.8
    steep_pair_labels: int = 3000
    steep_pair_slope_factor: float = 1.25
    steep_pair_audits: int = 300
    pilot_audits: int = 20
    pilot_pass: float = 0.9
    average_plan_headroom: float = 0.9
    end_charge_rates: tuple[float, ...] = (0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.3, 0.5)
    end_charge_floor: float = 0.001

    def __post_init__(self) -> None:
        for name in (
            "statement_every",
            "lot_answers",
            "retry_answers",
            "average_plan_audits",
            "pilot_audits",
            "steep_pair_labels",
            "steep_pair_audits",
        ):
            if int(getattr(self, name)) < 1:
                raise InvalidInput(f"{name} must be at least 1; got {getattr(self, name)}")
        # Lots are frozen and end only at checkpoints, where the items are kept.
        for name in ("lot_answers", "retry_answers"):
            if getattr(self, name) % self.statement_every:
                raise InvalidInput(f"{name} must be a multiple of statement_every ({self.statement_every})")
        _check_layers("layer", self.layer_fractions, self.layer_shares)
        first, last = self.alone_layer_fractions
        if not 0.0 < first < last <= 1.0:
            raise InvalidInput(f"alone_layer_fractions must rise from above 0 to at most 1; got {(first, last)}")
        for name in ("pilot_pass", "average_first_lot_share"):
            if not 0.0 < getattr(self, name) < 1.0:
                raise InvalidInput(f"{name} must be strictly between 0 and 1; got {getattr(self, name)}")
        if not 1.0 <= self.steep_pair_slope_factor < math.inf:
            raise InvalidInput(f"steep_pair_slope_factor must be at least 1; got {self.steep_pair_slope_factor}")
        for name in ("average_plan_headroom", "end_charge_floor"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise InvalidInput(f"{name} must be above 0 and at most 1; got {getattr(self, name)}")
        if not self.end_charge_rates or not all(0.0 < r < 1.0 for r in self.end_charge_rates):
            raise InvalidInput(
                f"end_charge_rates must be error rates strictly between 0 and 1; got {self.end_charge_rates}"
            )


def _check_layers(name: str, fractions: tuple[float, ...], shares: tuple[float, ...]) -> None:
    """Fractions rising to 1 (the last set is the whole lot), one positive share each, summing to 1."""
    rising = all(a < b for a, b in zip((0.0, *fractions), fractions, strict=False))
    if not fractions or not rising or fractions[-1] != 1.0:
        raise InvalidInput(f"{name}_fractions must rise from above 0 to 1; got {fractions}")
    if len(shares) != len(fractions) or min(shares) <= 0.0 or not math.isclose(sum(shares), 1.0):
        raise InvalidInput(f"{name}_shares must be one positive share per layer, summing to 1; got {shares}")


#: The design the loop runs.
DESIGN = LoopDesign()
