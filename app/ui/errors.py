"""What the browser says when the service layer refuses: the refusal's own words, except for a
store that cannot be used now, whose message is the operator's.

:class:`~app.store.StoreBusy` names the store's path and the process holding its write lock
(pid and command line): right for ``winnow`` on the command line, which the operator runs, but
not for an annotator's browser (``docs/reliability.md``: the browser shows no server path). The
browser gets one plain sentence and the server's log keeps the details.
"""

from __future__ import annotations

import logging

from app.store import StoreBusy, StoreUnavailable
from engine.exceptions import InvalidInput

__all__ = ["STORE_BUSY", "STORE_UNAVAILABLE", "shown_error"]

log = logging.getLogger("winnow.store")

STORE_BUSY = (
    "Another process is writing to the store right now, so nothing was saved; "
    "try again in a moment (the server's log names the process)."
)
STORE_UNAVAILABLE = "The store cannot be used right now, so nothing was saved; the server's log says why."


def shown_error(exc: InvalidInput) -> str:
    """The text a browser shows for ``exc`` (to be displayed as text, never as Markdown)."""
    if isinstance(exc, StoreBusy):
        log.warning("shown to the browser as busy: %s", exc)
        return STORE_BUSY
    if isinstance(exc, StoreUnavailable):
        log.warning("shown to the browser as unavailable: %s", exc)
        return STORE_UNAVAILABLE
    return str(exc)
