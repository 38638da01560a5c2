"""Sign in: the only page a visitor sees in team mode until they have signed in.

A name and password form (checked by :func:`app.service.sign_in_with_password`: argon2 hash,
rate limit and audit in the store), and, when ``.streamlit/secrets.toml`` configures an
OpenID Connect provider (an ``[auth]`` section), a button that signs in through
``st.login``. The signed-in name is kept in this tab's server-side session state only.
"""

from __future__ import annotations

import streamlit as st

from app.service import SignInRefused, has_users, sign_in_with_password
from app.ui import components
from app.ui import state as ui

tab = ui.current()
Session = ui.store(tab.db)


def submit() -> None:
    """The Sign in button's callback: check the form; keep the user in the tab on success."""
    name = st.session_state.get(ui.Keys.SIGN_IN_NAME) or ""
    password = st.session_state.get(ui.Keys.SIGN_IN_PASSWORD) or ""
    # The password field is emptied whatever happens: it is not kept in the session state.
    st.session_state[ui.Keys.SIGN_IN_PASSWORD] = ""
    try:
        user = sign_in_with_password(Session, name, password)
    except SignInRefused as exc:
        tab.notice = ("error", str(exc))
        return
    tab.user, tab.role = user.name, user.role
    tab.notice = ("ok", f"Signed in as {user.name} ({user.role}).")


st.title("Sign in to winnow")
# The message may quote the typed name: components.show_notice shows it as text, not Markdown.
components.show_notice(tab)

if not has_users(Session):
    st.warning("This server is shared beyond this machine, so everyone signs in, but the store has no user yet.")
    st.code("winnow user add NAME --role admin", language="bash")
    st.stop()

st.text_input("User name", key=ui.Keys.SIGN_IN_NAME, max_chars=200, autocomplete="username")
st.text_input("Password", key=ui.Keys.SIGN_IN_PASSWORD, type="password", max_chars=1024,
              autocomplete="current-password")
st.button("Sign in", key=ui.Keys.SIGN_IN, type="primary", on_click=submit)

if ui.oidc_configured():
    st.divider()
    st.button("Sign in with your organisation's account", key=ui.Keys.SIGN_IN_OIDC, on_click=st.login)
