"""A session's lots of model labels, read from its events.

One seam of :class:`app.service.workbench.Workbench`. The policy is
:func:`engine.labelling_loop.run_loop`'s; this module gives it what it reads from a session:
the first verdict on each item (the loop's clock and its outcomes), the candidate sets and the
label settings as they were before each verdict, and the lots frozen so far (kept, so that the
model is not run again for them). Reading the lots writes nothing: they are a function of the
answers, the store's audit key and the settings in force when each lot was frozen.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from app.store import VERDICT_KINDS, EventRecord, IncrementalDerivation, LabelSettings, derive_state
from engine.estimates import HeldOutError, held_out_error
from engine.labelling_loop import ItemsAt, Loop, LoopSettings, Lot, VerdictLog, run_loop

if TYPE_CHECKING:
    from app.service.ranking_state import SessionView

__all__ = ["SettingsHistory", "settings_in_force", "first_verdicts", "SessionLots"]

#: Every change of a session's label settings, oldest first: the id of the last event before
#: the change, and the settings from then on (:func:`app.store.label_settings_history`).
SettingsHistory = tuple[tuple[int, LabelSettings], ...]


def settings_in_force(history: SettingsHistory) -> LabelSettings:
    """The settings of the latest change, or the defaults when they were never changed.

    >>> settings_in_force(()) == LabelSettings()
    True
    """
    return history[-1][1] if history else LabelSettings()


def first_verdicts(events: Sequence[EventRecord]) -> tuple[list[EventRecord], VerdictLog]:
    """The first verdict on each item among ``events`` (the loop's clock and its outcomes), and
    those verdicts as the loop reads them ("none of these" as label -1)."""
    verdicts, seen = [], set()
    for e in events:
        if e.kind in VERDICT_KINDS and e.position not in seen:
            seen.add(e.position)
            verdicts.append(e)
    log = VerdictLog(
        np.asarray([e.position for e in verdicts], dtype=np.int64),
        np.asarray([-1 if e.kind == "none_of_these" else int(e.label or 0) for e in verdicts], dtype=np.int64),
    )
    return verdicts, log


def _items_at(events: Sequence[EventRecord], verdicts: Sequence[EventRecord], original: np.ndarray, v: int) -> ItemsAt:
    """The items as they were when the session had ``v`` verdicts: the events before the
    ``(v + 1)``-th verdict."""
    cut = verdicts[v].id if v < len(verdicts) else None
    derived = derive_state([e for e in events if cut is None or e.id < cut], original)
    return ItemsAt(derived.candidates, derived.answered)


class SessionLots:
    """A session's lots (:class:`engine.labelling_loop.Loop`), read from its events.

    The lots of one view and settings history are kept until either changes; the lots frozen
    so far are kept for longer logs (:func:`~engine.labelling_loop.run_loop`'s ``known``).

    Parameters
    ----------
    log : app.store.IncrementalDerivation
        The session's events seen so far (patched in place as more arrive: a view reads only
        its own).
    model : callable(candidates) -> (labels, scores, margins)
        What a lot freezes (:class:`engine.lot_model.LotModel`).
    key : bytes
        The store's audit key (seeds the audit order; never shown).
    session_id : int
    """

    def __init__(
        self,
        log: IncrementalDerivation,
        model: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]],
        *,
        key: bytes,
        session_id: int,
    ) -> None:
        self._log = log
        self._model = model
        self._key = key
        self._session_id = session_id
        self._lock = threading.Lock()
        self._kept: tuple[SessionView, SettingsHistory, Loop] | None = None
        self._frozen: dict[int, Lot | None] = {}

    def events(self, view: SessionView) -> list[EventRecord]:
        """The events of ``view`` only (the log may have moved on since it was taken)."""
        return [e for e in self._log.events() if e.id <= view.last_event_id]

    def verdict_log(self, view: SessionView) -> VerdictLog:
        """The first verdict on each item of ``view``, as the loop reads them."""
        return first_verdicts(self.events(view))[1]

    def at(self, view: SessionView, history: SettingsHistory) -> Loop:
        """The lots of ``view`` under the settings changes ``history``. Writes nothing."""
        kept = self._kept
        if kept is not None and kept[0] is view and kept[1] is history:
            return kept[2]
        with self._lock:
            events = self.events(view)
            verdicts, log = first_verdicts(events)
            original = np.asarray(view.state.original_candidates)

            def items_at(v: int) -> ItemsAt:
                return _items_at(events, verdicts, original, v)

            def settings_at(v: int) -> LoopSettings:
                # The settings recorded before the first verdict that could audit a lot frozen at v.
                cut = verdicts[v].id if v < len(verdicts) else None
                chosen = LabelSettings()
                for after_event_id, settings in history:
                    if cut is None or after_event_id < cut:
                        chosen = settings
                return LoopSettings(chosen.max_error, chosen.confidence, chosen.promise, chosen.audit_share)

            loop = run_loop(
                log,
                n_items=view.state.n_instances,
                items_at=items_at,
                model=self._model,
                settings_at=settings_at,
                key=self._key,
                session=self._session_id,
                known=self._frozen,
            )
            self._frozen = dict(loop.frozen)
            self._kept = (view, history, loop)
            return loop

    def held_out_error(self, view: SessionView, lot: Lot) -> HeldOutError:
        """The model's error on the items whose label was known when ``lot`` was frozen, each
        labelled with its label hidden (:func:`engine.estimates.held_out_error`): what the
        estimate of the answers left draws the lot's error rate from. Runs the model once per
        fold; the caller keeps the result per lot."""
        events = self.events(view)
        verdicts, _ = first_verdicts(events)
        items = _items_at(events, verdicts, np.asarray(view.state.original_candidates), lot.frozen_at)
        return held_out_error(self._model, np.asarray(items.candidates))

    def items_being_audited(self, view: SessionView, history: SettingsHistory) -> np.ndarray:
        """The items of the lot being audited (bool array of shape (n_instances,)): any of them
        may be an audit, so no page shows the model's guess for them."""
        active = self.at(view, history).active
        auditing = np.zeros(view.state.n_instances, dtype=bool)
        if active is not None:
            auditing[active.lot.items] = True
        return auditing

    def audits_served(self, view: SessionView, history: SettingsHistory) -> bool:
        """Whether the served order holds audits of a lot now (an audit share above 0 and a lot
        with audits still to serve)."""
        st = view.state
        return (
            settings_in_force(history).audit_share > 0
            and self.at(view, history).audit_queue(st.answered, st.skipped).size > 0
        )
