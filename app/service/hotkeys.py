"""A session's keyboard keys as text a person edits: one line per label, ``key = label``.

The Sessions page shows the keys in force with :func:`hotkeys_text` and reads an edited text
back with :func:`parse_hotkeys_text`; :func:`set_session_keys` then has the store check who
asks (admins only in team mode), validate, store and audit the mapping
(:func:`app.store.set_session_hotkeys`). A key is one character, so the first ``=`` of a line
always ends it: a label may itself contain ``=``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from app.store import check_hotkeys, set_session_hotkeys, write_transaction
from engine.exceptions import InvalidInput

if TYPE_CHECKING:
    from app.service.workbench import Workbench

__all__ = ["hotkeys_text", "parse_hotkeys_text", "set_session_keys"]


def set_session_keys(
    bench: Workbench, mapping: Mapping[str, str | None] | None, *, actor: str | None
) -> dict[str, str]:
    """Store a session's keyboard keys as ``actor`` (``None``: back to the default keys).

    The store refuses anyone but an admin in team mode (:mod:`app.store.policies.sessions`,
    ``change_keys``; ``actor=None`` is the command line), validates the mapping and records the
    change in the audit log; the workbench then uses the new keys. Returns the mapping now in
    force. Other tabs that have the session open see the new keys when they open it again.

    Raises
    ------
    app.store.PermissionDenied
        ``actor`` may not change the keys.
    InvalidInput
        A mapping :func:`app.store.check_hotkeys` refuses.
    """
    with bench.lock:
        stored = write_transaction(
            bench.session_factory, lambda s: set_session_hotkeys(s, bench.session_id, mapping, actor=actor)
        )
        config = replace(bench.config, hotkeys=None if mapping is None else dict(stored))
        bench.state = replace(bench.state, config=config)
    return stored


def hotkeys_text(hotkeys: Mapping[str, str], label_names: Sequence[str]) -> str:
    """Every label on its own line, ``key = label`` (``= label`` when it has no key).

    >>> print(hotkeys_text({"cat": "1", "dog": "2"}, ["cat", "dog", "eel"]))
    1 = cat
    2 = dog
      = eel
    """
    return "\n".join(f"{hotkeys.get(name, ' ')} = {name}" for name in label_names)


def parse_hotkeys_text(text: str, label_names: Sequence[str]) -> dict[str, str]:
    """The mapping an edited :func:`hotkeys_text` describes, checked like a stored one.

    Parameters
    ----------
    text : str
        Lines ``key = label``; blank lines are ignored, a label left out or with an empty key
        has no key.
    label_names : sequence of str
        The dataset's labels.

    Returns
    -------
    dict of str to str
        Label name -> key.

    Raises
    ------
    InvalidInput
        A line without ``=``, a label named twice, or a mapping :func:`app.store.check_hotkeys`
        refuses; the message names the line.

    Examples
    --------
    >>> parse_hotkeys_text("1 = cat\\n= dog\\nx = a=b", ["cat", "dog", "a=b"])
    {'cat': '1', 'a=b': 'x'}
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    mapping: dict[str, str] = {}
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        key, sep, label = line.partition("=")
        if not sep:
            raise InvalidInput(f"line {number}: {line.strip()[:80]!r} has no '='; write 'key = label'")
        label = label.strip()
        if label in seen:
            raise InvalidInput(f"line {number}: label {label!r} is already given a key on line {seen[label]}")
        seen[label] = number
        try:
            checked = check_hotkeys({label: key}, label_names)
        except InvalidInput as exc:
            raise InvalidInput(f"line {number}: {exc}") from None
        mapping.update(checked)
    # The checks across lines (a key given twice) come from the whole mapping.
    return check_hotkeys(mapping, label_names)
