"""The order a session serves its items in: the ranked queue, with the suspects and the audits in their slots.

One seam of :class:`app.service.workbench.Workbench`. The ranked queue is the open items by
score (:meth:`app.service.ranking_state.RankingView.queue`), then the items of lots, then the
skipped ones in the order they were skipped, with one slot in
:data:`~app.service.suspects.SUSPECT_EVERY` for the suspect items still to ask; the slots that
are audits (chosen by a stream seeded by the store's audit key) serve the active lot's items
in its random audit order (:func:`engine.labelling_loop.served_order`). The Query page,
``winnow session status`` and the ranked export all serve this order.

The items drawn as the first of the queue are remembered for a while, so that an answer about
the item a page still shows is taken after the queue moved on, and a second press about it is
not (:meth:`ServedQueue.offers`, :meth:`Workbench.record`'s ``displayed="query"``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from app.service import suspects
from app.service.graphs import GraphResult
from app.service.lots import SessionLots, SettingsHistory, settings_in_force
from app.service.ranking_state import SessionView
from app.store import IncrementalDerivation, SessionState
from engine.labelling_loop import ServedOrder, served_order, slot_uniforms

__all__ = ["SERVED_REMEMBERED", "ServedQueue"]

#: How many items the Query page drew (as the first of the queue) are remembered as still on
#: someone's screen (see :meth:`ServedQueue.offers`).
SERVED_REMEMBERED = 1024


class ServedQueue:
    """What a session serves, kept per view and settings history.

    Parameters
    ----------
    graph : GraphResult
        The dataset's graph over all instances (the suspects are read from it).
    log : app.store.IncrementalDerivation
        The session's events seen so far (when each skip happened).
    lots : SessionLots
        The session's lots (their items come after the open ones; their audits fill the slots).
    key : bytes
        The store's audit key (which slots are audits).
    session_id : int
    """

    def __init__(
        self, graph: GraphResult, log: IncrementalDerivation, lots: SessionLots, *, key: bytes, session_id: int
    ) -> None:
        self._graph = graph
        self._log = log
        self._lots = lots
        self._key = key
        self._session_id = session_id
        #: The last whole served order, with the view and settings history it was made from.
        self._kept: tuple[SessionView, SettingsHistory, ServedOrder] | None = None
        #: Items drawn as the first of the queue -> the largest event id the queue was made from
        #: the last time (oldest first, at most :data:`SERVED_REMEMBERED`), and its lock.
        self._heads: OrderedDict[int, int] = OrderedDict()
        self._heads_lock = threading.Lock()

    def suspects_to_ask(self, view: SessionView) -> np.ndarray:
        """The suspect items still to ask (:func:`app.service.suspects.suspects_to_serve`)."""
        return suspects.suspects_to_serve(suspects.session_suspects(self._graph, view.state), view.state)

    def ranked(self, view: SessionView, history: SettingsHistory, top: int | None = None) -> np.ndarray:
        """The ranked queue alone (no audits), its first ``top`` items (all with ``None``)."""
        # Open items by score; then the items of lots (delivered, or served by the audit
        # slots); then the skipped ones in the order they were skipped, whatever they are, so
        # that where a skipped item comes back says nothing about it.
        st = view.state
        asked = self.suspects_to_ask(view)
        in_lots = self._lots.at(view, history).in_lots(st.n_instances)
        skipped = np.asarray(st.skipped)
        open_items = np.asarray(st.open_items)
        nothing = np.zeros(st.n_instances, dtype=bool)
        first = view.ranking.queue(open_items & ~in_lots & ~skipped, nothing)
        later = view.ranking.queue(open_items & in_lots & ~skipped, nothing)
        ranked = np.concatenate([first, later, self._skipped_in_order(st)])
        served = suspects.interleave_suspects(ranked, asked, deferred=skipped | in_lots)
        return served if top is None else served[:top]

    def _skipped_in_order(self, st: SessionState) -> np.ndarray:
        """The open items skipped now, in the order of their skips (oldest first)."""
        skipped = np.flatnonzero(np.asarray(st.skipped) & np.asarray(st.open_items))
        when = [max(e.id for e in self._log.item_events(p) if e.kind == "skip") for p in skipped.tolist()]
        return skipped[np.argsort(when, kind="stable")] if skipped.size else skipped

    def served(self, view: SessionView, history: SettingsHistory, top: int | None = None) -> ServedOrder:
        """The ranked queue with the audits interleaved, its first ``top`` items (all with
        ``None``); its first item is remembered as drawn (:meth:`offers`)."""
        # The whole served order is kept per view (and settings): team mode reserves from it
        # on every page run, and it changes only when the state does.
        kept = self._kept
        if kept is not None and kept[0] is view and kept[1] is history:
            order = kept[2]
        else:
            st = view.state
            key, session_id = self._key, self._session_id
            ranked = self.ranked(view, history)
            order = served_order(
                ranked,
                self._lots.at(view, history).audit_queue(st.answered, st.skipped),
                base=int(np.asarray(st.answered).sum() + np.asarray(st.skipped).sum()),
                audit_share=settings_in_force(history).audit_share,
                uniforms=lambda n: slot_uniforms(key, session_id, n),
                skipped_at_end=int(np.asarray(st.skipped)[ranked].sum()),
            )
            self._kept = (view, history, order)
        if top is not None:
            order = ServedOrder(order.positions[:top], order.audit[:top])
        if order.positions.size:
            self._remember(int(order.positions[0]), view.last_event_id)
        return order

    def _remember(self, position: int, last_event_id: int) -> None:
        """Remember that the first of the queue, made from the events up to ``last_event_id``,
        was ``position``."""
        # The latest moment counts: an item served again after someone skipped it is on screen
        # as it is now. A quick second press about an item just answered or skipped finds an
        # event after the moment it was served (the page drew the next item meanwhile).
        with self._heads_lock:
            heads = self._heads
            heads[position] = max(last_event_id, heads.get(position, 0))
            heads.move_to_end(position)
            while len(heads) > SERVED_REMEMBERED:
                heads.popitem(last=False)

    def offers(self, position: int, view: SessionView, history: SettingsHistory) -> bool:
        """Whether the Query page without leases may still show ``position``: it is the first
        of the queue now, or it was drawn as the first and has had no event since."""
        top = self.served(view, history, 1).positions
        if top.size and int(top[0]) == position:
            return True
        served_after = self._heads.get(position)
        if served_after is None or not view.state.open_items[position]:
            return False
        return all(e.id <= served_after for e in self._log.item_events(position))
