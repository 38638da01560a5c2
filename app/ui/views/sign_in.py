"""Sign in: the only page a visitor sees in team mode until their browser proves who it is.

The name and password form is not a Streamlit page: it is served by the sign-in gate
(:mod:`app.ui.gate`, ``/_winnow/sign-in``), which sets the ``HttpOnly`` cookie a Streamlit
script cannot set. A browser normally reaches it straight away (pages without a valid cookie
are redirected there); this page is what a tab shows when its sign-in ends while it is open
(signed out elsewhere, expired, account disabled) or when a connection carries no proof. When
``.streamlit/secrets.toml`` configures an OpenID Connect provider (an ``[auth]`` section), it
also offers ``st.login``.
"""

from __future__ import annotations

from urllib.parse import quote

import streamlit as st

from app.service import has_users
from app.ui import components
from app.ui import state as ui
from app.ui.gate import SIGN_IN_PATH, safe_next

tab = ui.current()
session_factory = ui.store(tab.db)

st.title("Sign in to winnow")
# The message may quote a name: components.show_notice shows it as text, not Markdown.
components.show_notice(tab)

if not has_users(session_factory):
    st.warning("This server is shared beyond this machine, so everyone signs in, but the store has no user yet.")
    st.code("winnow user add NAME --role admin", language="bash")
    st.stop()

# Back to the page this tab was on once signed in.
here = st.context.url or "/"
path = "/" + here.split("://", 1)[-1].split("/", 1)[-1] if "://" in here else here
st.link_button("Sign in", f"{SIGN_IN_PATH}?next={quote(safe_next(path))}", type="primary")
st.caption(
    "Opens the sign-in form; your browser keeps the proof of who you are in a cookie that page scripts cannot read."
)

if ui.oidc_configured():
    st.divider()
    st.button("Sign in with your organisation's account", key=ui.Keys.SIGN_IN_OIDC, on_click=st.login)
