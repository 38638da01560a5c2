"""Download links that belong to the browser sign-in that made them, and expire.

Streamlit serves a ``st.download_button``'s file from ``/media/<hash>``: a URL named by the
file's content, kept in memory for as long as Streamlit likes, that any client holding it may
fetch. An export is a session's data, so winnow does not hand exports to Streamlit. A page
asks :data:`DOWNLOADS` for a ticket instead: a random token bound to the tab's owner (the
signed-in account and the browser sign-in it came through), valid for :data:`LIFETIME`
seconds after the page last drew it, naming a function that makes the file. The sign-in gate
(:mod:`app.ui.gate`) serves ``/_winnow/download/<token>``: only to the same owner, only before
the ticket expires, making the file at that moment as that user (the store checks the export
right again, so a role taken away since the page was drawn downloads nothing).

The gate refuses every file Streamlit's media route would serve as an attachment, so a
``st.download_button`` added later cannot reopen the hole; images and audio shown on the
pages (inline media) are untouched.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["DOWNLOAD_PREFIX", "DOWNLOADS", "LIFETIME", "Download", "DownloadOwner", "DownloadTickets", "download_path"]

#: Where the gate serves tickets (below Streamlit's ``server.baseUrlPath``).
DOWNLOAD_PREFIX = "/_winnow/download/"
#: Seconds a ticket stays valid after the page last drew it. The page redraws its links well
#: within this while the tab is open, so only a link copied out of the page dies.
LIFETIME = 15 * 60.0


@dataclass(frozen=True)
class DownloadOwner:
    """Who may fetch a download: the account's name and the handle of the browser sign-in
    (the SHA-256 of its cookie's token). Both are ``None`` in single-user mode; the handle is
    ``None`` for an identity provider's sign-in, which has no cookie of winnow's."""

    user: str | None
    sign_in: str | None


@dataclass(frozen=True)
class Download:
    """One file a ticket names: made by ``make`` when fetched."""

    owner: DownloadOwner
    file_name: str
    mime: str
    make: Callable[[], bytes]
    expires: float


class DownloadTickets:
    """The live download tickets of this process, in memory (a server restart ends them all).

    Parameters
    ----------
    lifetime : float
        Seconds a ticket stays valid after it was last issued or renewed.
    max_tickets : int
        Tickets kept at most; when full, the expired ones go first, then the oldest.
    clock : callable
        Seconds from a monotonic clock (tests pass their own).
    """

    def __init__(
        self, lifetime: float = LIFETIME, *, max_tickets: int = 20_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.lifetime = lifetime
        self.max_tickets = max_tickets
        self.clock = clock
        self._tickets: dict[str, Download] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._tickets)

    def issue(
        self,
        owner: DownloadOwner,
        file_name: str,
        mime: str,
        make: Callable[[], bytes],
        *,
        renew: str | None = None,
    ) -> str:
        """A token for ``make``'s file, fetchable by ``owner`` for :attr:`lifetime` seconds.

        ``renew`` is the token this page drew last time: while it is live and ``owner``'s, it is
        kept (the link on the page does not change) and its clock starts again.
        """
        now = self.clock()
        ticket = Download(owner, file_name, mime, make, now + self.lifetime)
        with self._lock:
            previous = self._tickets.get(renew) if renew else None
            if renew and previous is not None and previous.owner == owner and previous.expires > now:
                del self._tickets[renew]  # re-inserted last: the dict's order is the tickets' age
                self._tickets[renew] = ticket
                return renew
            if len(self._tickets) >= self.max_tickets:
                self._forget(now)
            token = secrets.token_urlsafe(32)
            self._tickets[token] = ticket
            return token

    def redeem(self, token: str, requester: DownloadOwner) -> Download | None:
        """The download ``token`` names when ``requester`` owns it and it has not expired, else
        ``None`` (the caller tells no one which of the two it was)."""
        now = self.clock()
        with self._lock:
            ticket = self._tickets.get(token)
            if ticket is None:
                return None
            if ticket.expires <= now:
                del self._tickets[token]
                return None
        return ticket if ticket.owner == requester else None

    def _forget(self, now: float) -> None:
        """Drop the expired tickets, then the oldest until there is room (lock held)."""
        for token in [t for t, ticket in self._tickets.items() if ticket.expires <= now]:
            del self._tickets[token]
        while len(self._tickets) >= self.max_tickets:
            del self._tickets[next(iter(self._tickets))]


#: This process's tickets: pages issue, the gate redeems.
DOWNLOADS = DownloadTickets()


def download_path(token: str, base_url_path: str = "") -> str:
    """The path a browser fetches the ticket ``token`` from (under ``server.baseUrlPath``).

    >>> download_path("abc"), download_path("abc", "/winnow/")
    ('/_winnow/download/abc', '/winnow/_winnow/download/abc')
    """
    base = base_url_path.strip("/")
    return (f"/{base}" if base else "") + DOWNLOAD_PREFIX + token
