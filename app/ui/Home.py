"""winnow's browser app: navigation, the store, and the tab's labelling session.

Run with ``winnow ui --db winnow.db`` (``streamlit run app/ui/Home.py -- --db winnow.db``).
Every rerun of every page goes through this script: it opens the store (one engine per
process, ``st.cache_resource``), sets up the tab's state, opens the tab's session or picks
up answers given in other tabs (a cheap event count, then :meth:`Workbench.refresh`), draws
the sidebar and runs the chosen page.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import streamlit as st

from app.service import (
    SignInRefused,
    Workbench,
    dataset_description,
    latest_session_id,
    session_id_by_name,
    session_summaries,
    sign_in_required,
)
from app.service.auth import sign_out as end_sign_in
from app.ui import components
from app.ui import state as ui
from app.ui.building import show_build_progress
from app.ui.errors import shown_error
from engine.exceptions import InvalidInput

if TYPE_CHECKING:  # types only: the UI runs no SQL
    from sqlalchemy.orm import Session, sessionmaker

logger = logging.getLogger("winnow.ui")

PAGES = Path(__file__).resolve().parent / "views"


def database_argument(argv: list[str]) -> str:
    """``--db FILE`` from the script arguments (after ``--`` on the streamlit command line)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--db", default="winnow.db")
    known, _ = parser.parse_known_args([a for a in argv if a != "--"])
    return known.db


def require_sign_in_argument(argv: list[str]) -> bool:
    """``--require-sign-in``: team mode even on localhost without users (behind a reverse
    proxy the server listens on localhost, yet the whole network reaches it)."""
    return "--require-sign-in" in argv


def open_or_explain(session_factory: sessionmaker[Session], tab: ui.TabState) -> Workbench | None:
    """The tab's session, opened; or, when it cannot be opened, ``None`` and one line saying why.

    A session that fails to load (a store written by an older winnow, a dataset edited by hand)
    must not lock anyone out: the error is shown as one line, without traceback or server
    paths, the tab forgets the session, and the navigation (with the Sessions page) is still
    drawn. The same session is not tried again on every rerun: only when it is opened anew.
    """
    if tab.session_id is not None and tab.session_id == tab.failed_session_id:
        tab.session_id = None
    try:
        return ui.sync_workbench(session_factory, tab)
    except InvalidInput as exc:
        reason = shown_error(exc)
    except Exception:  # noqa: BLE001 - anything else: logged for the operator, never shown
        logger.exception("session %s could not be opened", tab.session_id)
        reason = "an unexpected error (the server log has the details)"
    tab.failed_session_id, tab.session_id, tab.workbench, tab.building = tab.session_id, None, None, None
    st.error(components.md(f"This session cannot be opened: {reason}. Open or create another on the Sessions page."))
    return None


def main() -> None:
    """One run of the app: store, tab state, sidebar, then the chosen page."""
    st.set_page_config(page_title="winnow", page_icon="🏷️", layout="wide")

    components.style()
    tab = ui.tab_state(database_argument(sys.argv[1:]))
    session_factory = ui.store(tab.db)

    # Team mode (users exist, or the server is reachable beyond this machine): nothing but the
    # sign-in page until this browser proves who it is. The proof is checked on every run, so a
    # tab resumed by another connection (Streamlit resumes a session for anyone who names its
    # id) is signed in only if that connection carries the proof too, and a disabled user is
    # signed out at their next click.
    if require_sign_in_argument(sys.argv[1:]) or sign_in_required(session_factory, st.get_option("server.address")):
        try:
            account = ui.signed_in_account(session_factory, tab)
        except SignInRefused as exc:
            account = None
            tab.notice = ("error", str(exc))
            st.logout()
        if account is None:
            if tab.user is not None:
                tab.notice = tab.notice or ("info", "You were signed out (signed out elsewhere, expired or disabled).")
            tab.user = tab.role = None
            tab.workbench = None
            st.navigation([st.Page(PAGES / "sign_in.py", title="Sign in", icon=":material/login:")]).run()
            return
        tab.user, tab.role = account.name, account.role
        assigned = account.sessions
        if ui.ANNOTATOR_PARAM in st.query_params:  # the signed-in user answers, whatever a link says
            del st.query_params[ui.ANNOTATOR_PARAM]
    else:
        tab.user = tab.role = None
        assigned = ()

    # The URL names the session (a reload, a deep link, a new tab): it wins over the tab's own.
    unknown = ui.session_from_url(tab, lambda name: session_id_by_name(session_factory, name))
    if tab.session_id is None:
        # A tab on the bare address: the session this browser had open last, if the user may
        # still open it; else the most recently active one, so `winnow ui --sample` opens on a
        # query; a team member on the latest session assigned to them, if any.
        listable = {x.name: x.session_id for x in session_summaries(session_factory, actor=tab.user)}
        tab.session_id = ui.remembered_session(listable)
    if tab.session_id is None:
        tab.session_id = (
            session_id_by_name(session_factory, assigned[-1])
            if assigned
            else latest_session_id(session_factory, actor=tab.user)
        )
    bench = open_or_explain(session_factory, tab)
    if tab.building is None:  # while a session builds, the URL keeps naming it
        ui.show_session_in_url(tab, bench.config.name if bench is not None else None)
    if unknown is not None:
        # On every page, never silently: the address named a session that does not exist, and
        # the page shows another one (whose name the address now carries).
        instead = f" This page shows session {bench.config.name!r} instead." if bench is not None else ""
        st.error(components.md(unknown + instead))

    with st.sidebar:
        if bench is not None:
            # Names are user content: plain text, never Markdown.
            st.markdown("**Session**")
            st.text(f"{bench.config.name}\ndataset {bench.config.dataset_name}")
            ui.remember_session(bench.config.name)
            description = dataset_description(bench.config.dataset_name)
            if description is not None:
                st.caption(description)
        elif tab.building is not None:
            st.markdown("**Opening a session…**")
        else:
            st.markdown("**No session open**")
        if tab.user is not None:
            st.text(f"Signed in as {tab.user} ({tab.role})")
            st.button("Sign out", key=ui.Keys.SIGN_OUT, on_click=sign_out, args=(tab,))
        else:
            # Seeded through Session State rather than value=, so the field keeps what was typed;
            # the URL or the browser's cookie name the annotator after a reload or in a new tab.
            ui.annotator_from_browser(tab)
            st.session_state.setdefault(ui.Keys.ANNOTATOR, tab.annotator)
            st.text_input(
                "Annotator",
                key=ui.Keys.ANNOTATOR,
                max_chars=ui.NAME_MAX_CHARS,
                placeholder="Your name",
                help="Your answers are recorded under this name (kept in the address and in this browser).",
            )
            ui.remember_annotator(tab)
            # After Enter in the name field the focus goes back to the page, so keys answer again.
            components.keyboard()

    if tab.building is not None:
        show_build_progress(tab.building)

    # Every role's first screen is one it may use: the Query page for whoever answers in the
    # open session; otherwise the Review page (reviewers) or the Sessions page (admins).
    answers_here = tab.user is None or (bench is not None and bench.config.name in assigned)
    if answers_here or tab.role == "annotator":
        first = "query"
    else:
        first = "review" if tab.role == "reviewer" else "sessions"
    pages = [
        st.Page(PAGES / "query.py", title="Query", icon=":material/help_center:", default=first == "query"),
        st.Page(PAGES / "rejects.py", title="Rejects", icon=":material/block:"),
        st.Page(PAGES / "progress.py", title="Progress", icon=":material/monitoring:"),
        st.Page(PAGES / "sessions.py", title="Sessions", icon=":material/folder_open:", default=first == "sessions"),
    ]
    if ui.is_reviewer(tab):
        pages.insert(
            2, st.Page(PAGES / "review.py", title="Review", icon=":material/gavel:", default=first == "review")
        )
    # The pages live in views/, not pages/: a pages/ folder would put Streamlit in its older
    # folder-navigation mode, which runs page files without this script.
    st.navigation(pages).run()


def sign_out(tab: ui.TabState) -> None:
    """End the browser's signed-in session in the store (its cookie proves nothing any more,
    in every tab) and forget the tab's user; its reservation lapses with its lease."""
    end_sign_in(ui.store(tab.db), tab.sign_in_handle)
    tab.user = tab.role = tab.sign_in_handle = tab.oidc_user = None
    tab.workbench = None
    tab.notice = ("info", "Signed out.")
    if ui.oidc_signed_in():
        st.logout()


if __name__ == "__main__":
    main()
