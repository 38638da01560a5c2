"""The errors a winnow store raises: one family, all :class:`engine.exceptions.InvalidInput`.

So the CLI (and any caller that only knows :class:`ValueError`) reports every store problem
as one line: a bad write (:class:`InvalidRecord`), something the store does not hold
(:class:`RecordNotFound`), a store that cannot be opened (:class:`StoreUnavailable`), or a
read or write that the access policy refuses (:class:`PermissionDenied`, raised by
:mod:`app.store.policies`).
"""

from __future__ import annotations

from engine.exceptions import InvalidInput

__all__ = ["InvalidRecord", "RecordNotFound", "StoreUnavailable", "StoreBusy", "PermissionDenied", "RequestRefused"]


class InvalidRecord(InvalidInput):
    """Bad input to a store write: the message names the parameter and, for rows, the row.

    Attributes
    ----------
    row : int or None
        Position (0-based) of the offending instance, when there is one. Messages count rows
        as a person does, from 1: position 0 is "row 1".
    """

    def __init__(self, message: str, *, row: int | None = None) -> None:
        super().__init__(message)
        self.row = row


class RecordNotFound(InvalidRecord, LookupError):
    """A dataset, labelling session or instance that the store does not hold."""


class StoreUnavailable(InvalidRecord):
    """The store's path or URL is not usable, or its database cannot be opened or read."""


class StoreBusy(StoreUnavailable):
    """Another process held the store's lock for longer than this one waits (the busy timeout).

    The message names the store and, where the system tells, the process holding the lock.
    """


class PermissionDenied(InvalidRecord):
    """The user (or the lack of one) may not read or write this; the message says why."""


class RequestRefused(InvalidRecord):
    """One request of a batch was refused; nothing of the batch was written.

    Attributes
    ----------
    index : int
        Position (0-based) of the refused request in the batch.
    """

    def __init__(self, message: str, *, index: int) -> None:
        super().__init__(message)
        self.index = index
