"""The pages in team mode draw only what the store's session policy allows the signed-in user
(issue 23): an annotator lists and opens only the sessions assigned to them, sees only the
exports they may take, and no key editor or upload form; the Query page shows a refusal
that names a session as text, never as Markdown.

Tabs sign in as in tests/ui/conftest.py (:func:`signed_in`)."""

from __future__ import annotations

import sys

import pytest

from app.service import assign, create_session, create_user, dataset_id_by_name, session_id_by_name, session_rights
from app.store.db import open_store
from app.ui.components import md
from app.ui.state import STATE_KEY, Keys
from tests.ui.conftest import export_links, fetch_exports, no_exception, plain, sign_in

SECRET = "a long enough secret"
#: A session name that Markdown would turn into bold text and an image fetched from elsewhere.
HOSTILE = "**loud** ![x](http://attacker.invalid/p.png)"


@pytest.fixture
def team_db(small_db):
    """Sessions 'small' (ann assigned) and HOSTILE (nobody assigned) on one dataset; admin
    'ada', annotators 'ann' and 'cid' (assigned nowhere), reviewer 'rev'."""
    Session = open_store(small_db)
    create_user(Session, "ada", role="admin", password=SECRET)
    for name, role in (("ann", "annotator"), ("cid", "annotator"), ("rev", "reviewer")):
        create_user(Session, name, role=role, password=SECRET)
    create_session(
        Session,
        dataset_id=dataset_id_by_name(Session, "small"),
        name=HOSTILE,
        k=5,
        weighting="uniform",
        criterion="apl",
        target_set="all",
    )
    assign(Session, "small", ["ann"])
    return small_db


def signed_in(at, name):
    """The tab of ``at`` signed in as ``name`` as a browser is (tests/ui/conftest.py's
    ``sign_in``: a signed-in session in the store, its handle in ``st.user``)."""
    db = next(a for a in sys.argv if a.endswith(".db"))
    sign_in(at, db, name, SECRET)
    assert at.session_state[STATE_KEY].user == name, "the app did not sign the tab in"
    return at


def texts(at) -> str:
    return " ".join(plain(e.value) for e in (*at.error, *at.info, *at.caption, *at.text))


def session_choices(at) -> list[str]:
    box = at.selectbox(key=Keys.OPEN_SESSION)
    return [plain(option).split(" (dataset")[0] for option in box.options]


def test_an_annotator_lists_and_opens_only_the_sessions_assigned_to_them(app, team_db):
    ann = signed_in(app(team_db), "ann")
    ann.switch_page("views/sessions.py").run()
    no_exception(ann)
    assert session_choices(ann) == ["small"]
    # No upload form and no key editor: the keys are shown as text.
    assert not [b for b in ann.button if b.key in (Keys.CREATE, Keys.HOTKEYS_SAVE, Keys.HOTKEYS_RESET)]
    assert not ann.get("file_uploader") and not ann.text_area
    assert "An admin sets the keys of a session." in texts(ann)

    # An annotator assigned nowhere is opened no session at all (not one the Query page refuses).
    cid = signed_in(app(team_db), "cid")
    assert [t.value for t in cid.title] == ["Query"]
    assert "No labelling session is open yet" in texts(cid) and "small" not in texts(cid)
    assert not [b for b in cid.button if b.key and b.key.startswith("query_")]
    cid.switch_page("views/progress.py").run()
    no_exception(cid)
    assert not cid.get("link_button") and not cid.metric
    # Asked for by id (a tab that had it open), the session is still refused.
    cid.session_state["winnow"].session_id = ann.session_state["winnow"].session_id
    cid.run()
    no_exception(cid)
    assert "This session is not open to you" in texts(cid) and "is not assigned to session" in texts(cid)
    cid.switch_page("views/sessions.py").run()
    no_exception(cid)
    assert not [w for w in cid.selectbox if w.key == Keys.OPEN_SESSION]
    assert "No session is assigned to you yet" in texts(cid)


@pytest.mark.parametrize(
    ("who", "kinds"),
    [
        ("ann", {"ranked"}),  # the labelled data holds the model labels of items to audit
        ("rev", {"ranked", "labelled", "events"}),
        ("ada", {"ranked", "labelled", "events"}),
    ],
)
def test_the_progress_page_offers_only_the_exports_the_role_may_take(app, team_db, who, kinds):
    at = signed_in(app(team_db), who)
    at.switch_page("views/progress.py").run()
    no_exception(at)
    assert at.metric  # the page is drawn
    buttons = list(export_links(at))
    offered = {
        what
        for what in ("ranked", "labelled", "events")
        for fmt in ("csv", "json", "jsonl")
        if any(Keys.export(what, fmt) in b for b in buttons)
    }
    assert offered == kinds and len(buttons) == 3 * len(kinds)
    files = fetch_exports(at)  # as the tab's owner: each link gives its file
    assert sorted(name.rsplit("-", 1)[1] for name in files) == sorted(
        f"{what}.{fmt}" for what in kinds for fmt in ("csv", "json", "jsonl")
    )


def test_a_download_link_is_its_owners_and_is_checked_again_when_fetched(app, team_db):
    from app.service import change_role
    from app.store import PermissionDenied
    from app.ui.downloads import DOWNLOAD_PREFIX, DOWNLOADS, DownloadOwner

    rev = signed_in(app(team_db), "rev")
    rev.switch_page("views/progress.py").run()
    no_exception(rev)
    tab = rev.session_state[STATE_KEY]
    token = export_links(rev)[Keys.export("events", "csv")].split(DOWNLOAD_PREFIX, 1)[1]
    owner = DownloadOwner("rev", tab.sign_in_handle)
    assert tab.sign_in_handle and DOWNLOADS.redeem(token, owner) is not None
    # Another user, the same user through another sign-in, and nobody get nothing.
    for stranger in (
        DownloadOwner("ann", tab.sign_in_handle),
        DownloadOwner("rev", "0" * 64),
        DownloadOwner(None, None),
    ):
        assert DOWNLOADS.redeem(token, stranger) is None, stranger
    # Made when fetched, as the owner: a reviewer made annotator since the page was drawn gets no events log.
    change_role(open_store(team_db), "rev", "annotator")
    with pytest.raises(PermissionDenied):
        DOWNLOADS.redeem(token, owner).make()


def test_only_an_admin_gets_the_key_editor_and_the_new_session_form(app, team_db):
    ada = signed_in(app(team_db), "ada")
    ada.switch_page("views/sessions.py").run()
    no_exception(ada)
    assert session_choices(ada) == ["small", HOSTILE]
    assert [b for b in ada.button if b.key == Keys.CREATE] and ada.get("file_uploader")
    bench = ada.session_state[STATE_KEY].workbench
    field = Keys.hotkeys(bench.session_id)
    assert ada.text_area(key=field)
    rev = signed_in(app(team_db), "rev")
    rev.switch_page("views/sessions.py").run()
    no_exception(rev)
    assert session_choices(rev) == ["small", HOSTILE]  # a reviewer reads every session
    assert not rev.text_area and not [b for b in rev.button if b.key == Keys.CREATE]
    assert "change_keys" not in session_rights(open_store(team_db), bench.session_id, actor="rev")


def test_a_refusal_on_the_query_page_shows_the_session_name_as_text(app, team_db):
    """A reviewer opens every session but answers only where assigned: the Query page says so,
    and the session's name, which is Markdown, is shown as the text it is."""
    rev = signed_in(app(team_db), "rev")
    rev.switch_page("views/sessions.py").run()
    hostile = session_id_by_name(open_store(team_db), HOSTILE)
    rev.selectbox(key=Keys.OPEN_SESSION).select(hostile).run()
    if not rev.button(key=Keys.OPEN_BUTTON).disabled:  # not the session open already
        rev.button(key=Keys.OPEN_BUTTON).click().run()
    assert rev.session_state[STATE_KEY].workbench.session_id == hostile
    rev.switch_page("views/query.py").run()
    no_exception(rev)
    assert len(rev.error) == 1
    shown = rev.error[0].value
    expected = f"annotator 'rev' is not assigned to session {HOSTILE!r} (winnow session assign {HOSTILE} rev)"
    assert shown == md(expected) and plain(shown) == expected
    assert "![x](" not in shown and "**loud**" not in shown
