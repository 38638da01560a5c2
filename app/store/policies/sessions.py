"""Who may do what with a labelling session, reads included: the single home of these rules.

=====================  =====================  ==================  ============  =========
action                 annotator              reviewer            admin         operator
=====================  =====================  ==================  ============  =========
list, open, progress   assigned sessions      every session       every         yes
export ranked list     assigned sessions      every session       every         yes
export labelled data   no                     every session       every         yes
export events          no                     every session       every         yes
  with its audit rows  no                     no                  every         yes
answer, skip           assigned sessions      assigned sessions   assigned      yes
undo (own events)      yes                    yes                 yes           yes
resolve a conflict     no                     every session       every         yes
change answer keys     no                     no                  every         yes
change settings        no                     no                  every         yes
create a session       no                     no                  yes           yes
=====================  =====================  ==================  ============  =========

*operator* is the command line (``actor=None``) and anyone in single-user mode (a store
without users); a name that is not an active account may do nothing. Settings are the
overlap, the assignments and the label settings (target error, confidence, audit share:
:func:`app.store.set_label_settings`). The store's reads and writes call :func:`authorize_session`
(or :func:`check_event_permission` for events), so the command line and the browser app
cannot disagree; the pages ask :func:`session_actions` only to leave out what would be
refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.store.errors import PermissionDenied
from app.store.models import LabellingSession
from app.store.policies.actors import REVIEW_ROLES, Actor, require_account, resolve_actor
from app.store.records import assigned_session_ids, get_labelling_session, is_assigned

__all__ = [
    "SessionRule",
    "SESSION_ACTIONS",
    "READ_ACTIONS",
    "EVENT_ACTIONS",
    "authorize_session",
    "session_actions",
    "visible_session_ids",
    "check_event_permission",
]


@dataclass(frozen=True)
class SessionRule:
    """One action on a session: who may take it, and what a refusal says.

    Attributes
    ----------
    allows : callable
        ``allows(actor, assigned)``: may this active account (``assigned``: to the session)
        take the action?
    refusal : str
        The message, formatted with ``what``, ``name``, ``role`` and ``session``.
    """

    allows: Callable[[Actor, bool], bool]
    refusal: str


def _admin(actor: Actor, assigned: bool) -> bool:
    return actor.role == "admin"


def _reviewer(actor: Actor, assigned: bool) -> bool:
    return actor.role in REVIEW_ROLES


def _reviewer_or_assigned(actor: Actor, assigned: bool) -> bool:
    return actor.role in REVIEW_ROLES or assigned


def _assigned(actor: Actor, assigned: bool) -> bool:
    return assigned


def _any_account(actor: Actor, assigned: bool) -> bool:
    return True


_ADMINS = "{what}: only an active admin may do this, and {name!r} is not one"
_READERS = (
    "{what}: {name!r} ({role}) is not assigned to session {session!r}; an annotator uses only the sessions "
    "assigned to them (winnow session assign {session} {name})"
)
_REVIEWERS = "{what}: only a reviewer or an admin may do this, and {name!r} has role {role!r}"

#: Every action on a session and its rule (the table of the module docstring).
SESSION_ACTIONS: dict[str, SessionRule] = {
    "list": SessionRule(_reviewer_or_assigned, _READERS),
    "open": SessionRule(_reviewer_or_assigned, _READERS),
    "progress": SessionRule(_reviewer_or_assigned, _READERS),
    "export_ranked": SessionRule(_reviewer_or_assigned, _READERS),
    # The labelled data carries the model's labels, those of items still to be audited
    # included: an annotator who could read them would see the answer an audit checks.
    "export_labelled": SessionRule(
        _reviewer,
        "{what}: only a reviewer or an admin may do this, and {name!r} has role {role!r} (the labelled data "
        "holds the model's labels of items an annotator may yet be asked to audit)",
    ),
    "export_events": SessionRule(_reviewer, _REVIEWERS),
    "export_audit": SessionRule(_admin, _ADMINS),
    "answer": SessionRule(
        _assigned, "annotator {name!r} is not assigned to session {session!r} (winnow session assign {session} {name})"
    ),
    "undo": SessionRule(_any_account, ""),
    "resolve": SessionRule(
        _reviewer, "annotator {name!r} has role {role!r}; only a reviewer or an admin resolves conflicts"
    ),
    "change_keys": SessionRule(_admin, _ADMINS),
    "change_settings": SessionRule(_admin, _ADMINS),
    "create": SessionRule(_admin, _ADMINS),
}
#: The actions that only read a session.
READ_ACTIONS: tuple[str, ...] = ("list", "open", "progress", "export_ranked", "export_labelled", "export_events")
#: The action each event kind is.
EVENT_ACTIONS: dict[str, str] = {
    "answer": "answer",
    "other_label": "answer",
    "none_of_these": "answer",
    "skip": "answer",
    "undo": "undo",
    "resolve": "resolve",
}


def _rule(action: str) -> SessionRule:
    rule = SESSION_ACTIONS.get(action)
    if rule is None:
        raise ValueError(f"action must be one of {', '.join(SESSION_ACTIONS)}; got {action!r}")
    return rule


def _labelling(session: Session, labelling: LabellingSession | int | None) -> LabellingSession | None:
    if labelling is None or isinstance(labelling, LabellingSession):
        return labelling
    return get_labelling_session(session, labelling)


def _is_assigned(session: Session, actor: Actor, labelling: LabellingSession | None) -> bool:
    return labelling is not None and actor.user_id is not None and is_assigned(session, labelling.id, actor.user_id)


def authorize_session(
    session: Session,
    actor: str | None,
    action: str,
    labelling: LabellingSession | int | None = None,
    *,
    what: str | None = None,
) -> Actor:
    """Refuse ``action`` on ``labelling`` unless ``actor`` may take it.

    Parameters
    ----------
    session : sqlalchemy.orm.Session
    actor : str or None
        A user name; ``None`` is the command line.
    action : str
        A key of :data:`SESSION_ACTIONS`.
    labelling : LabellingSession or int, optional
        The session acted on, or its id (``None`` for ``create``; an unknown id raises
        :class:`~app.store.errors.RecordNotFound`).
    what : str, optional
        How the message names the action (default: the action).

    Returns
    -------
    Actor
        Who was allowed.

    Raises
    ------
    PermissionDenied
        Naming the action, the user, their role and what would allow it.
    """
    rule = _rule(action)
    what = what or action.replace("_", " ")
    labelling = _labelling(session, labelling)
    who = resolve_actor(session, actor)
    if who.unrestricted:
        return who
    require_account(who, f"{what}: {who.name!r}")
    if not rule.allows(who, _is_assigned(session, who, labelling)):
        raise PermissionDenied(
            rule.refusal.format(
                what=what, name=who.name, role=who.role, session=labelling.name if labelling is not None else ""
            )
        )
    return who


def session_actions(session: Session, actor: str | None, labelling: LabellingSession | int) -> frozenset[str]:
    """The actions of :data:`SESSION_ACTIONS` that ``actor`` may take on ``labelling`` (a
    session or its id)."""
    row = _labelling(session, labelling)
    who = resolve_actor(session, actor)
    if who.unrestricted:
        return frozenset(SESSION_ACTIONS)
    if not (who.is_account and who.active):
        return frozenset()
    assigned = _is_assigned(session, who, row)
    return frozenset(action for action, rule in SESSION_ACTIONS.items() if rule.allows(who, assigned))


def visible_session_ids(session: Session, actor: str | None) -> set[int] | None:
    """The ids of the sessions ``actor`` may list; ``None`` means every session."""
    who = resolve_actor(session, actor)
    if who.unrestricted:
        return None
    if not (who.is_account and who.active):
        return set()
    rule = SESSION_ACTIONS["list"]
    if rule.allows(who, False):
        return None
    if who.user_id is None or not rule.allows(who, True):
        return set()
    return assigned_session_ids(session, who.user_id)


def check_event_permission(session: Session, labelling: LabellingSession, annotator: str, kind: str) -> None:
    """Refuse an event that ``annotator`` may not record (team mode only).

    Answers and skips need an assignment to the session, ``resolve`` a reviewer or an admin,
    ``undo`` an active account (which event it cancels is :func:`app.store.record_event`'s
    business: only the annotator's own).

    Raises
    ------
    PermissionDenied
        Naming the annotator, the session and what would allow it.
    """
    action = EVENT_ACTIONS.get(kind)
    if action is None:
        raise ValueError(f"kind must be one of {', '.join(EVENT_ACTIONS)}; got {kind!r}")
    who = resolve_actor(session, annotator)
    if who.unrestricted:
        return
    require_account(
        who,
        f"annotator {annotator!r}",
        hint="; once users exist every answer is given by a signed-in user (winnow user list)",
    )
    rule = SESSION_ACTIONS[action]
    if not rule.allows(who, _is_assigned(session, who, labelling)):
        raise PermissionDenied(rule.refusal.format(what=kind, name=who.name, role=who.role, session=labelling.name))
