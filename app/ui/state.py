"""Per-tab state of the winnow pages: one typed object in ``st.session_state``, set up once.

Everything a page keeps between reruns lives in :class:`TabState`, stored under the single
key :data:`STATE_KEY` of ``st.session_state`` (so it belongs to one browser tab, never to the
process). :func:`tab_state` creates it on the first run of a tab and returns the same object
afterwards.

A session's :class:`~app.service.Workbench` (features, neighbour graph, query ranking) is
the same for every tab: it is derived from the store's event log, which every tab refreshes
from. So it is built once per process, in a background thread of the process's
:class:`~app.service.BuildRegistry` (``st.cache_resource``), keyed by the database, the
session and its dataset's size; every tab holds a reference to that one read-only copy, and
a second tab opening a session that is still being built joins the build and shows its
progress. A dataset with new items gets a new key, so the next rerun loads afresh.

Widget keys are listed in :class:`Keys` so that the pages and the ``AppTest`` tests name the
same widgets.

What survives a reload lives in the browser, not in the tab's state (which a reload, a deep
link or a new tab starts afresh): the open session is the URL's ``?session=<name>``
(:func:`session_from_url`, :func:`show_session_in_url`), and in single-user mode the annotator
is the URL's ``&annotator=<name>`` and a cookie of the browser (:func:`annotator_from_browser`,
:func:`remember_annotator`), so a new tab opened on the bare address answers under the same
name. Nobody is named by default (never the operating system's user): until a name is given
nothing is recorded (:func:`record`). In team mode the signed-in user is the annotator, always.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

import streamlit as st

from app.service import BuildJob, BuildRegistry, StaleAnswer, Workbench, session_dataset
from app.service.auth import account_signed_in, active_user, sign_in_with_identity
from app.store import LabelSettings, UserInfo, open_store
from app.ui.building import OPENING, build_progress_text
from app.ui.errors import shown_error
from app.ui.gate import IDENTITY_KEY, oidc_configured
from engine.exceptions import InvalidInput

if TYPE_CHECKING:  # types only: the UI runs no SQL (import-linter checks it)
    from sqlalchemy.orm import Session, sessionmaker

__all__ = [
    "STATE_KEY",
    "Keys",
    "TabState",
    "store",
    "builds",
    "tab_state",
    "current",
    "annotator",
    "SESSION_PARAM",
    "ANNOTATOR_PARAM",
    "ANNOTATOR_COOKIE",
    "NAME_MAX_CHARS",
    "session_from_url",
    "show_session_in_url",
    "annotator_from_browser",
    "remember_annotator",
    "SESSION_COOKIE",
    "remembered_session",
    "remember_session",
    "sync_workbench",
    "BACKGROUND_FROM_ITEMS",
    "BACKGROUND_FROM_BYTES",
    "oidc_configured",
    "oidc_signed_in",
    "signed_in_account",
    "is_reviewer",
]

STATE_KEY = "winnow"
#: The URL's query parameters: the open session's name, and the annotator (single-user mode).
SESSION_PARAM, ANNOTATOR_PARAM = "session", "annotator"
#: The browser's cookie that remembers the annotator (single-user mode) for new tabs.
ANNOTATOR_COOKIE = "winnow_annotator"
#: The browser's cookie that remembers the session last open, for a tab opened on the bare address.
SESSION_COOKIE = "winnow_session"
#: The longest annotator name the sidebar field takes (and a URL or cookie may carry).
NAME_MAX_CHARS = 200

#: Sessions of at least this many items open in the background, with a progress element,
#: while the app stays usable; smaller ones open within the run that asks (about a second).
BACKGROUND_FROM_ITEMS = 20_000
#: A smaller session is opened within the run: a progress bar appears when it takes longer
#: than this (a session whose graph is stored opens in a blink), and follows the build.
FOREGROUND_QUIET_SECONDS = 0.3
FOREGROUND_POLL_SECONDS = 0.25
#: Uploads of at least this many bytes are imported in the background, with progress.
BACKGROUND_FROM_BYTES = 5_000_000


class Keys:
    """Stable widget keys (tests drive the pages through them)."""

    # Home / sidebar
    ANNOTATOR = "annotator"
    SIGN_OUT = "sign_out"
    # Sign-in page
    SIGN_IN_OIDC = "sign_in_oidc"
    # Sessions page
    OPEN_SESSION = "sessions_open_choice"
    OPEN_BUTTON = "sessions_open"
    SOURCE = "sessions_source"
    UPLOAD = "sessions_upload"
    DATASET = "sessions_dataset"
    NEW_NAME = "sessions_new_name"
    K = "sessions_k"
    WEIGHTING = "sessions_weighting"
    CRITERION = "sessions_criterion"
    TARGET_SET = "sessions_target_set"
    CREATE = "sessions_create"
    HOTKEYS_SAVE = "sessions_hotkeys_save"
    HOTKEYS_RESET = "sessions_hotkeys_reset"
    LABEL_SETTINGS_SAVE = "sessions_label_settings_save"
    # ``label_setting(session_id, field)``: the open session's model-label settings
    # Review page: ``resolve(position, label)``, ``review_other(position)``, ``review_other_submit(position)``
    # Rejects page
    REJECTS_SHOWN = "rejects_shown"
    # Progress page: ``export(what, fmt)``

    # Query page: the details toggle stays on from item to item.
    QUERY_DETAILS = "query_details"
    # Query page, once the work is done: go on checking model labels, or stop.
    KEEP_ANSWERING = "query_keep_answering"
    STOP_ANSWERING = "query_stop_answering"
    # Query page. Every key names the item on screen (its position): a key press that arrives
    # after the next item is drawn hits a widget that no longer exists, and Streamlit drops it.

    @staticmethod
    def answer(position: int, label: int) -> str:
        return f"query_answer_{position}_{label}"

    @staticmethod
    def none_of_these(position: int) -> str:
        return f"query_none_{position}"

    @staticmethod
    def skip(position: int) -> str:
        return f"query_skip_{position}"

    @staticmethod
    def other(position: int) -> str:
        """The "Another label" button (key A) that opens the label search."""
        return f"query_other_{position}"

    @staticmethod
    def other_label(position: int) -> str:
        """The search box of labels outside the item's set (choosing one records it)."""
        return f"query_other_label_{position}"

    @staticmethod
    def undo(event_id: int | None) -> str:
        """Undo names the event it offers to undo (``None``: nothing to undo)."""
        return f"query_undo_{event_id if event_id is not None else 'none'}"

    @staticmethod
    def suspect_choice(position: int) -> str:
        """The select box of a label outside a suspect item's set on the Rejects page."""
        return f"rejects_suspect_choice_{position}"

    @staticmethod
    def suspect_record(position: int) -> str:
        """The Record button beside it (nothing is recorded before a label is chosen)."""
        return f"rejects_suspect_record_{position}"

    @staticmethod
    def review_other(position: int) -> str:
        """The Review page's choice of a label outside the conflict's labels."""
        return f"review_other_label_{position}"

    @staticmethod
    def review_other_submit(position: int) -> str:
        return f"review_other_submit_{position}"

    @staticmethod
    def hotkeys(session_id: int) -> str:
        """The keyboard-keys text of a session on the Sessions page."""
        return f"sessions_hotkeys_{session_id}"

    @staticmethod
    def label_setting(session_id: int, name: str) -> str:
        """A model-label setting of a session on the Sessions page (``name``: ``"max_error"``,
        ``"confidence"`` or ``"audit_share"``, each entered in percent, or ``"promise"``)."""
        return f"sessions_{name}_{session_id}"

    @staticmethod
    def new_label_setting(name: str) -> str:
        """A model-label setting on the New-session form (percent, like :meth:`label_setting`)."""
        return f"sessions_new_{name}"

    @staticmethod
    def confirm(position: int, label: int) -> str:
        return f"rejects_confirm_{position}_{label}"

    @staticmethod
    def leave(position: int) -> str:
        return f"rejects_leave_{position}"

    @staticmethod
    def resolve(position: int, label: int) -> str:
        return f"conflict_resolve_{position}_{label}"

    @staticmethod
    def export(what: str, fmt: str) -> str:
        return f"export_{what}_{fmt}"


@dataclass
class TabState:
    """What one browser tab remembers between reruns."""

    db: str
    #: Who answers in single-user mode ("" until a name is given: nothing is recorded before).
    annotator: str = ""
    #: The session name and annotator last written to (or read from) the URL: a URL that
    #: differs was changed outside the page (a deep link, the browser's history) and wins.
    url_session: str | None = None
    url_annotator: str | None = None
    #: The labelling session open in this tab (``None`` until one is chosen or created).
    session_id: int | None = None
    #: A reference to the process's shared workbench of ``session_id`` (never a copy).
    workbench: Workbench | None = None
    #: The background build of ``session_id`` while it runs (``workbench`` is then None).
    building: BuildJob | None = None
    #: A "Create session" import running in the background (large uploads).
    creating: BuildJob | None = None
    #: One-shot message shown at the top of the next run: ``(level, plain text)`` with level
    #: ``"ok"``, ``"info"`` or ``"error"`` (e.g. what was just recorded).
    notice: tuple[str, str] | None = None
    #: The item whose "another label" search is open (its position), if any.
    other_label_for: int | None = None
    #: One-shot outcome of saving the keyboard keys on the Sessions page (like ``notice``).
    hotkeys_notice: tuple[str, str] | None = None
    #: The model-label settings of the New-session form, applied once the session is created.
    new_label_settings: LabelSettings | None = None
    #: One-shot outcome of saving the model-label settings on the Sessions page (like ``notice``).
    label_settings_notice: tuple[str, str] | None = None
    #: A page to switch to on this run (set by a callback, which cannot switch pages itself).
    next_page: str | None = None
    #: Rejected predictions the expert chose to leave alone in this tab, by position.
    left_alone: set[int] = field(default_factory=set)
    #: Team mode: the user signed in in this tab, and their role; ``None`` in single-user mode
    #: or before signing in. Set again on every run from the browser's proof of identity
    #: (:func:`signed_in_account`), never trusted from an earlier run on its own.
    user: str | None = None
    role: str | None = None
    #: The handle of the browser's signed-in session (the hash of its cookie's token, as the
    #: sign-in gate passed it), or the identity provider's name for an ``st.login`` sign-in.
    sign_in_handle: str | None = None
    #: The download tickets the Progress page last drew (``"ranked.csv"`` -> token), renewed on
    #: each draw so a link on screen keeps working (:mod:`app.ui.downloads`).
    download_tokens: dict[str, str] = field(default_factory=dict)
    #: The identity-provider account whose sign-in this tab has already audited.
    oidc_user: str | None = None
    #: The last session that failed to open in this tab: not tried again until chosen anew.
    failed_session_id: int | None = None
    #: The session (id) whose work is done but whose model labels this tab chose to go on
    #: checking: the Query page then serves items again instead of the done panel.
    answering_after_done: int | None = None


@st.cache_resource(show_spinner=False)
def store(db: str) -> sessionmaker[Session]:
    """The process's sessionmaker for ``db`` (engine and schema upgrade done once, shared)."""
    return open_store(db)


@st.cache_resource(show_spinner=False)
def builds() -> BuildRegistry:
    """The process's background builds: one per (database, session, dataset size)."""
    return BuildRegistry()


def tab_state(db: str) -> TabState:
    """This tab's state, created on its first run. Switching ``db`` starts afresh."""
    state = st.session_state.get(STATE_KEY)
    if not isinstance(state, TabState) or state.db != db:
        state = TabState(db=db)
        st.session_state[STATE_KEY] = state
    return state


def current() -> TabState:
    """The state :func:`tab_state` set up in ``Home.py`` on this run (pages call this)."""
    state = st.session_state.get(STATE_KEY)
    if not isinstance(state, TabState):
        raise RuntimeError("app/ui/Home.py sets up the tab state; run the app through it")
    return state


def annotator(state: TabState) -> str:
    """Who is answering: the signed-in user in team mode; otherwise the sidebar field's
    latest value (also inside a button callback, which runs before the script has read the
    field on this run); ``""`` while no name was given."""
    if state.user is not None:
        return state.user
    typed = st.session_state.get(Keys.ANNOTATOR)
    if isinstance(typed, str):
        state.annotator = typed.strip()
    return state.annotator


def valid_name(value: object) -> str | None:
    """A name carried by a URL or a cookie, stripped; ``None`` when empty or too long."""
    if not isinstance(value, str):
        return None
    name = value.strip()
    return name if 0 < len(name) <= NAME_MAX_CHARS else None


def session_from_url(state: TabState, session_id_by_name: Callable[[str], int]) -> str | None:
    """Open the session the URL names (``?session=<name>``) when the URL changed outside the
    page: on a reload, a deep link or a new tab (the tab's state is new), or the browser's
    back button. Returns a one-line reason when no session has that name (the tab then keeps
    its own), else ``None``. A URL the page wrote itself changes nothing."""
    wanted = st.query_params.get(SESSION_PARAM)
    if wanted is None or wanted == state.url_session:
        return None
    state.url_session = wanted
    try:
        session_id = session_id_by_name(wanted)
    except InvalidInput:
        return f"No session is called {wanted!r}: the link may be out of date. Open one on the Sessions page."
    if session_id != state.session_id:
        state.session_id, state.workbench, state.failed_session_id = session_id, None, None
    return None


def show_session_in_url(state: TabState, name: str | None) -> None:
    """Write the open session's name into the URL (so a reload or a copied link opens it)."""
    if name is None:
        if SESSION_PARAM in st.query_params:
            del st.query_params[SESSION_PARAM]
    elif st.query_params.get(SESSION_PARAM) != name:
        st.query_params[SESSION_PARAM] = name
    state.url_session = name


def annotator_from_browser(state: TabState) -> None:
    """Before the sidebar's name field is drawn (single-user mode): take the annotator the URL
    names when it changed outside the page, else, on a tab that has no name yet, the one the
    browser's cookie remembers."""
    from_url = valid_name(st.query_params.get(ANNOTATOR_PARAM))
    if from_url is not None and from_url != state.url_annotator:
        chosen: str | None = from_url
    elif not state.annotator and not st.session_state.get(Keys.ANNOTATOR):
        remembered = st.context.cookies.get(ANNOTATOR_COOKIE)
        chosen = valid_name(unquote(remembered)) if remembered else None
    else:
        return
    if chosen is not None:
        state.annotator = chosen
        st.session_state[Keys.ANNOTATOR] = chosen
        state.url_annotator = from_url


_REMEMBER_JS = """
export default function (component) {
  const { data } = component;
  if (data && data.cookie) document.cookie = data.cookie;
}
"""
_remember = st.components.v2.component("winnow_remember_annotator", js=_REMEMBER_JS)


def remember_annotator(state: TabState) -> None:
    """After the field (single-user mode): the annotator's name into the URL and, for new tabs
    of this browser, into a cookie (a year; sent only to this server)."""
    name = annotator(state)
    if not name:
        if ANNOTATOR_PARAM in st.query_params:
            del st.query_params[ANNOTATOR_PARAM]
        state.url_annotator = None
        return
    if st.query_params.get(ANNOTATOR_PARAM) != name:
        st.query_params[ANNOTATOR_PARAM] = name
    state.url_annotator = name
    cookie = f"{ANNOTATOR_COOKIE}={quote(name, safe='')}; path=/; max-age=31536000; SameSite=Strict"
    _remember(key="remember_annotator", data={"cookie": cookie}, height=0, width="stretch")


def remembered_session(listable: Mapping[str, int]) -> int | None:
    """The session this browser had open last (its cookie), when it is among ``listable`` (the
    sessions this user may open, by name); else ``None``."""
    remembered = st.context.cookies.get(SESSION_COOKIE)
    name = valid_name(unquote(remembered)) if remembered else None
    return listable.get(name) if name is not None else None


def remember_session(name: str | None) -> None:
    """Remember the open session in a cookie of this browser (a year; sent only to this server),
    so that a tab opened on the bare address opens it rather than the most recently active one."""
    if name is None:
        return
    cookie = f"{SESSION_COOKIE}={quote(name, safe='')}; path=/; max-age=31536000; SameSite=Strict"
    _remember(key="remember_session", data={"cookie": cookie}, height=0, width="stretch")


def signed_in_account(session_factory: sessionmaker[Session], state: TabState) -> UserInfo | None:
    """Who this browser proves to be on this run, or ``None``.

    The proof is the sign-in gate's header (``st.user[IDENTITY_KEY]``: a valid cookie on this
    connection) or an identity provider's sign-in (``st.login``; Streamlit's signed cookie).
    Either is checked against the store on every call: a user disabled or signed out
    elsewhere is signed out here at their next click.
    """
    handle = st.user.get(IDENTITY_KEY)
    if isinstance(handle, str) and handle:
        state.sign_in_handle = handle
        return account_signed_in(session_factory, handle)
    if oidc_signed_in():
        claims = st.user.to_dict()
        if state.oidc_user is None:
            user = sign_in_with_identity(session_factory, claims)  # audited once per tab
            state.oidc_user = user.name
            return user
        return active_user(session_factory, state.oidc_user)
    state.sign_in_handle = None
    return None


def record(
    state: TabState,
    kind: str,
    *,
    position: int | None = None,
    label: int | str | None = None,
    displayed: str | None = None,
    undoes: int | None = None,
) -> int | None:
    """Write one event as this tab's annotator (the keywords as in :meth:`Workbench.record`).

    Returns the event id; or ``None`` when nothing was written, and the tab's notice then says
    why (a stale press is information, anything else refused is an error).
    """
    if state.workbench is None:
        return None
    if not annotator(state):
        # Who answers is never guessed: the first visit asks for a name.
        state.notice = ("error", "Nothing was recorded: enter your name (Annotator, in the sidebar) first.")
        return None
    if state.user is not None and signed_in_account(store(state.db), state) is None:
        # Callbacks run before Home.py checks the account: say why nothing was recorded.
        state.notice = ("error", "Nothing was recorded: this account was signed out or disabled. Sign in again.")
        return None
    try:
        return state.workbench.record(
            annotator(state), kind, position=position, label=label, displayed=displayed, undoes=undoes
        )
    except StaleAnswer as exc:
        state.notice = ("info", str(exc))
    except InvalidInput as exc:
        state.notice = ("error", shown_error(exc))
    return None


def is_reviewer(state: TabState) -> bool:
    """May this tab settle conflicts? Anyone in single-user mode; reviewers and admins in a team."""
    return state.user is None or state.role in ("reviewer", "admin")


def oidc_signed_in() -> bool:
    """True when ``st.login`` has signed this browser in with the identity provider."""
    # A Mapping lookup rather than the attribute: AppTest's stand-in user has no such key.
    return oidc_configured() and bool(st.user.get("is_logged_in", False))


def sync_workbench(session_factory: sessionmaker[Session], state: TabState) -> Workbench | None:
    """Open the tab's session, or bring it up to date with answers given elsewhere.

    The session's workbench comes from the process's :func:`builds` (started there, or
    joined when another tab started it). A session of :data:`BACKGROUND_FROM_ITEMS` items
    or more is left building: this returns ``None`` with ``state.building`` set, and the
    page shows its progress. Once open, every run calls :meth:`Workbench.refresh`: it re-reads
    the session's label settings (an admin's change writes no event, yet the audit share decides
    which served slots are audits) and catches up with the events after the last one it saw,
    each counted once, while the tab's readers keep the previous snapshot. That costs a few
    indexed reads, independent of the log's length (a ``COUNT`` of the events would not be).
    """
    if state.session_id is None:
        state.workbench = state.building = None
        return None
    session_id = state.session_id
    dataset_id, n_items = session_dataset(session_factory, session_id)
    key = (state.db, session_id, dataset_id, n_items)
    job = builds().start(
        key, lambda report: Workbench.open(session_factory, session_id, progress=report), group=(state.db, session_id)
    )
    if n_items < BACKGROUND_FROM_ITEMS:
        if not job.wait(FOREGROUND_QUIET_SECONDS):
            # Waited for in this run (the page needs it), with the stage, its count and the
            # time left shown as the build reports them.
            bar = st.progress(0.0, text=OPENING)
            while not job.wait(FOREGROUND_POLL_SECONDS):
                bar.progress(*build_progress_text(job))
            bar.empty()
    elif not job.wait(0.5):
        state.workbench, state.building = None, job
        return None
    state.building = None
    if job.error is not None:
        builds().discard(key)
        state.workbench = None
        raise job.error
    bench = job.result
    assert bench is not None, "a build finished without an error holds its workbench"
    if bench is not state.workbench:
        state.workbench = bench
        state.left_alone = set()
    # Also for a tab that has just taken the process's workbench (a reload, a new tab): it may be
    # behind answers recorded elsewhere (the command line, another process) since any tab last ran.
    bench.refresh()
    return bench
