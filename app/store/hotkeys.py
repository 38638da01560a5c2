"""Keyboard keys of a labelling session: which key answers with which label.

Every label may have one key, the same on every item (like Label Studio's per-label hotkeys),
so an annotator learns them once. A session stores its own mapping in
``labelling_sessions.hotkeys`` (JSON, label name -> key); ``NULL`` means
:func:`default_hotkeys`. :func:`set_session_hotkeys` validates a mapping before it is written:

- a key is one ASCII letter or digit (the browser app binds it without modifiers);
- no two labels share a key;
- no label takes a key of an action (:data:`ACTION_KEYS`: none of these, skip, undo, another
  label, leave) or one Streamlit reserves (:data:`RESERVED_KEYS`).

The keys are a session setting: in team mode only an admin changes them (an annotator who
swapped two keys made the next one record the wrong label), and every change is an audit
event (``hotkeys_changed``: who, which session, which keys moved).

The default mapping gives a label whose name is itself a usable key that key (label ``"1"`` is
key ``1``, label ``"b"`` is key ``b``), then gives the other labels the free keys in the order
of :data:`LABEL_KEYS`, in vocabulary order. Labels beyond the free keys get none (they are
answered by clicking, or through "another label").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.orm import Session

from app.store.errors import InvalidRecord
from app.store.models import LabellingSession
from app.store.policies import authorize_session
from app.store.records import dataset_of, get_labelling_session
from app.store.users import record_audit

__all__ = [
    "ACTION_KEYS",
    "RESERVED_KEYS",
    "LABEL_KEYS",
    "default_hotkeys",
    "check_hotkeys",
    "set_session_hotkeys",
    "describe_hotkey_change",
]

#: The key of each action the labelling pages offer (the event kind it records, or "leave":
#: set a rejected item aside on the Rejects page).
ACTION_KEYS: dict[str, str] = {
    "none_of_these": "n",
    "skip": "s",
    "undo": "u",
    "other_label": "a",
    "leave": "l",
}
_ACTION_OF_KEY = {key: action for action, key in ACTION_KEYS.items()}
#: Keys Streamlit keeps for itself ("c" clears the caches, "r" reruns the app).
RESERVED_KEYS: dict[str, str] = {"c": "reserved by Streamlit (clear caches)", "r": "reserved by Streamlit (rerun)"}
#: Keys a label may have, in the order the default mapping hands them out: digits first
#: (as on the number row), then the free letters in keyboard order.
LABEL_KEYS: tuple[str, ...] = tuple(
    key for key in "1234567890qwertyuiopasdfghjklzxcvbnm" if key not in _ACTION_OF_KEY and key not in RESERVED_KEYS
)


def default_hotkeys(label_names: Sequence[str]) -> dict[str, str]:
    """The mapping a session uses until someone sets its own.

    Parameters
    ----------
    label_names : sequence of str
        The dataset's labels, in vocabulary order.

    Returns
    -------
    dict of str to str
        Label name -> key, in vocabulary order; labels without a key are left out.

    Examples
    --------
    >>> default_hotkeys(["0", "1", "2"])
    {'0': '0', '1': '1', '2': '2'}
    >>> default_hotkeys(["cat", "dog", "3"])
    {'cat': '1', 'dog': '2', '3': '3'}
    >>> default_hotkeys(["yes", "n", "b"])  # "n" is the key of "none of these"
    {'yes': '1', 'n': '2', 'b': 'b'}
    """
    keys: dict[str, str] = {}
    taken: set[str] = set()
    # A label whose name is a usable key gets that key first, so that no other label can take
    # it: label "1" is answered with 1, never label "0".
    for name in label_names:
        own = name.strip().lower()
        if len(own) == 1 and own in LABEL_KEYS and own not in taken:
            keys[name] = own
            taken.add(own)
    free = iter(key for key in LABEL_KEYS if key not in taken)
    for name in label_names:
        if name not in keys:
            key = next(free, None)
            if key is None:
                break
            keys[name] = key
    return {name: keys[name] for name in label_names if name in keys}


def check_hotkeys(mapping: Mapping[str, str | None], label_names: Sequence[str]) -> dict[str, str]:
    """Validate a label -> key mapping; returns it normalised (lower-case keys, vocabulary order).

    Parameters
    ----------
    mapping : mapping of str to (str or None)
        Label name -> key. A label left out, or mapped to ``None`` or ``""``, has no key.
    label_names : sequence of str
        The dataset's labels.

    Returns
    -------
    dict of str to str

    Raises
    ------
    InvalidRecord
        A label outside the vocabulary, a key that is not one letter or digit, a key of an
        action or one Streamlit reserves, or a key given to two labels.
    TypeError
        ``mapping`` is not a mapping of strings.
    """
    if not isinstance(mapping, Mapping):
        raise TypeError(f"hotkeys must be a mapping of label name to key, got {type(mapping).__name__}")
    known = set(label_names)
    owner: dict[str, str] = {}
    for label, key in mapping.items():
        if not isinstance(label, str):
            raise TypeError(f"hotkeys: label names are str, got {type(label).__name__} {label!r}")
        if label not in known:
            shown = list(label_names)[:20]
            more = f" and {len(label_names) - 20} more" if len(label_names) > 20 else ""
            raise InvalidRecord(f"hotkeys: {label!r} is not a label of this dataset; labels: {shown}{more}")
        if key is None:
            continue
        if not isinstance(key, str):
            raise TypeError(f"hotkeys: the key of {label!r} must be a str, got {type(key).__name__}")
        key = key.strip().lower()
        if not key:
            continue
        if len(key) != 1 or not (key.isascii() and key.isalnum()):
            raise InvalidRecord(f"hotkeys: the key of {label!r} must be one letter or digit, got {key!r}")
        if key in _ACTION_OF_KEY:
            raise InvalidRecord(
                f"hotkeys: key {key!r} of {label!r} is the key of the action {_ACTION_OF_KEY[key]!r}; "
                f"free keys: {' '.join(k for k in LABEL_KEYS if k not in owner)}"
            )
        if key in RESERVED_KEYS:
            raise InvalidRecord(f"hotkeys: key {key!r} of {label!r} is {RESERVED_KEYS[key]}; choose another")
        if key in owner:
            raise InvalidRecord(f"hotkeys: key {key!r} is given to both {owner[key]!r} and {label!r}")
        owner[key] = label
    keys = {label: key for key, label in owner.items()}
    return {name: keys[name] for name in label_names if name in keys}


def describe_hotkey_change(before: Mapping[str, str], after: Mapping[str, str], label_names: Sequence[str]) -> str:
    """What changed between two mappings, label by label (the audit event's detail).

    >>> describe_hotkey_change({"cat": "3", "dog": "8"}, {"cat": "8", "dog": "3"}, ["cat", "dog"])
    "'cat' 3 -> 8; 'dog' 8 -> 3"
    >>> describe_hotkey_change({"cat": "1"}, {}, ["cat"])
    "'cat' 1 -> none"
    """
    changes = [
        f"{name!r} {before.get(name, 'none')} -> {after.get(name, 'none')}"
        for name in label_names
        if before.get(name) != after.get(name)
    ]
    return "; ".join(changes) or "no change"


def set_session_hotkeys(
    session: Session, session_id: int, mapping: Mapping[str, str | None] | None, *, actor: str | None = None
) -> dict[str, str]:
    """Store a session's keyboard keys (``None``: back to :func:`default_hotkeys`).

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        The caller owns the transaction.
    session_id : int
        The labelling session.
    mapping : mapping of str to (str or None), or None
        As in :func:`check_hotkeys`.
    actor : str or None
        In team mode an active admin (:mod:`app.store.policies.sessions`, ``change_keys``);
        ``None`` is the command line. The change is recorded in the audit log either way.

    Returns
    -------
    dict of str to str
        The mapping now in force.

    Raises
    ------
    PermissionDenied
        ``actor`` may not change the session's keys.
    """
    labelling: LabellingSession = get_labelling_session(session, session_id)
    authorize_session(session, actor, "change_keys", labelling, what="session keys")
    names = list(dataset_of(session, labelling).label_names)
    checked: dict[str, Any] | None = None if mapping is None else check_hotkeys(mapping, names)
    before = default_hotkeys(names) if labelling.hotkeys is None else dict(labelling.hotkeys)
    after = default_hotkeys(names) if checked is None else checked
    detail = describe_hotkey_change(before, after, names)
    if checked is None:
        detail = f"default keys: {detail}"
    with session.begin_nested():
        labelling.hotkeys = checked
        record_audit(
            session, "hotkeys_changed", actor or "(command line)", actor=actor, session_id=labelling.id, detail=detail
        )
        session.flush()
    return after
