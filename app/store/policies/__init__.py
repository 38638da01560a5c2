"""Access policies: one module per resource, the single home of who may read and write it.

Modelled on the Argilla server's ``api/policies/`` (one policy per resource). Every store
function that reads or writes a protected resource calls its policy first, so the command
line and the browser app cannot disagree, and a rule is changed in one place:

``actors``    who is asking: the command line operator (``None``), single-user mode, an account
``sessions``  labelling sessions: list, open, progress, exports, answers, keys, settings, create
``audit``     the audit log: admins
``users``     user accounts: admins (a user's own password: that user)
``uploads``   uploads and imports: admins

A refusal is :class:`app.store.errors.PermissionDenied` (an :class:`engine.exceptions.InvalidInput`),
whose message names the action, the user and what would allow it.
"""

from app.store.policies.actors import OPERATOR, REVIEW_ROLES, Actor, require_account, resolve_actor
from app.store.policies.audit import authorize_audit
from app.store.policies.sessions import (
    EVENT_ACTIONS,
    READ_ACTIONS,
    SESSION_ACTIONS,
    SessionRule,
    authorize_session,
    check_event_permission,
    session_actions,
    visible_session_ids,
)
from app.store.policies.uploads import authorize_upload
from app.store.policies.users import ACCOUNT_ACTIONS, authorize_accounts

__all__ = [
    "Actor",
    "OPERATOR",
    "REVIEW_ROLES",
    "resolve_actor",
    "require_account",
    "SessionRule",
    "SESSION_ACTIONS",
    "READ_ACTIONS",
    "EVENT_ACTIONS",
    "authorize_session",
    "session_actions",
    "visible_session_ids",
    "check_event_permission",
    "authorize_audit",
    "ACCOUNT_ACTIONS",
    "authorize_accounts",
    "authorize_upload",
]
