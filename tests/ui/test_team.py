"""Team mode in the browser app (AppTest): the sign-in page, the signed-in user as annotator,
leases, conflicts in overlap mode and the Review page."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from streamlit import config

from app.service import assign, create_user, set_session_overlap
from app.service.auth import SignInRefused, sign_out
from app.store.db import open_store
from app.ui.gate import IDENTITY_KEY
from app.ui.state import STATE_KEY, Keys
from tests.ui.conftest import events, no_exception, plain, position_on_screen
from tests.ui.conftest import sign_in as signed_in

SECRET = "a long enough secret"


@pytest.fixture
def team_db(small_db):
    Session = open_store(small_db)
    create_user(Session, "ada", role="admin", password=SECRET)
    for name in ("ann", "bob"):
        create_user(Session, name, role="annotator", password=SECRET)
    create_user(Session, "rev", role="reviewer", password=SECRET)
    assign(Session, "small", ["ann", "bob"])
    return small_db


def titles(at) -> list[str]:
    return [t.value for t in at.title]


def sign_in(at, name, password=SECRET):
    db = next(a for a in sys.argv if a.endswith(".db"))
    return signed_in(at, db, name, password)


def shown_item(at) -> str:
    heads = [plain(h.value) for h in at.subheader if plain(h.value).startswith("Item ")]
    assert len(heads) == 1, heads
    return heads[0].split(" ", 1)[1]


def test_localhost_without_users_opens_without_sign_in(app, small_db):
    at = app(small_db)
    assert titles(at) == ["Query"]
    assert at.text_input(key=Keys.ANNOTATOR).value  # the free-text name of single-user mode


def test_a_shared_address_without_users_asks_for_an_admin_first(app, small_db):
    config.set_option("server.address", "0.0.0.0")
    at = app(small_db)
    assert titles(at) == ["Sign in to winnow"]
    assert any("winnow user add NAME --role admin" in c.value for c in at.code)
    assert not at.button  # nothing to press, not even a sign-in button


def test_once_users_exist_only_the_sign_in_page_is_shown(app, team_db):
    at = app(team_db)
    assert titles(at) == ["Sign in to winnow"]
    assert not any(h.value.startswith("Item ") for h in at.subheader)
    assert [b.proto.url for b in at.get("link_button")] == ["/_winnow/sign-in?next=/"]
    with pytest.raises(SignInRefused, match="wrong user name or password"):
        sign_in(at, "ann", "wrong password!")
    at.user = {IDENTITY_KEY: "0" * 64}  # a handle of no signed-in session: proves nothing
    at.run()
    assert titles(at) == ["Sign in to winnow"]
    assert at.session_state[STATE_KEY].user is None
    sign_in(at, "ann")
    assert titles(at) == ["Query"]
    assert any(t.value == "Signed in as ann (annotator)" for t in at.sidebar.text)
    assert not [w for w in at.text_input if w.key == Keys.ANNOTATOR]  # no free-text name in team mode


def test_a_disabled_user_cannot_sign_in_and_is_signed_out(app, team_db):
    from app.service import disable_user

    at = sign_in(app(team_db), "bob")
    assert titles(at) == ["Query"]
    disable_user(open_store(team_db), "bob")
    at.run()
    assert titles(at) == ["Sign in to winnow"]
    assert "disabled" in at.info[0].value
    with pytest.raises(SignInRefused, match="this account is disabled"):
        sign_in(at, "bob")


def test_a_tab_resumed_without_the_proof_shows_only_the_sign_in_page(app, team_db):
    """The session state still says "ada" (a Streamlit session resumed by its id), but the
    connection carries no cookie: the app trusts the proof, not the state."""
    at = sign_in(app(team_db), "ada")
    assert any(t.value == "Signed in as ada (admin)" for t in at.sidebar.text)
    at.user = {}
    at.run()
    no_exception(at)
    assert titles(at) == ["Sign in to winnow"]
    assert not any("Signed in as" in t.value for t in at.sidebar.text)
    assert at.session_state[STATE_KEY].user is None


def test_signing_out_ends_the_signed_in_session_in_the_store(app, team_db):
    at = sign_in(app(team_db), "ann")
    handle = at.user[IDENTITY_KEY]
    at.button(key=Keys.SIGN_OUT).click().run()
    no_exception(at)
    assert titles(at) == ["Sign in to winnow"]
    assert not sign_out(open_store(team_db), handle)  # already ended: the cookie proves nothing
    at.run()  # the same connection, the same (now ended) handle
    assert titles(at) == ["Sign in to winnow"]


def test_each_role_starts_on_a_page_it_may_use(app, team_db):
    assert titles(sign_in(app(team_db), "ann")) == ["Query"]
    assert titles(sign_in(app(team_db), "rev")) == ["Review"]  # not assigned: nothing to answer
    assert titles(sign_in(app(team_db), "ada")) == ["Sessions"]


def test_two_annotators_get_different_items_then_a_reviewer_settles_their_conflict(app, team_db):
    ann = sign_in(app(team_db), "ann")
    bob = sign_in(app(team_db), "bob")
    first_ann, first_bob = shown_item(ann), shown_item(bob)
    assert first_ann != first_bob

    # Overlap 2: bob is given ann's item after she answered it, and disagrees.
    set_session_overlap(open_store(team_db), "small", 2)
    position = position_on_screen(ann)
    next(b for b in ann.button if b.key and b.key.startswith(f"query_answer_{position}_")).click().run()
    no_exception(ann)
    bob.button(key=Keys.skip(position_on_screen(bob))).click().run()  # bob passes on his own item
    no_exception(bob)
    assert shown_item(bob) == first_ann and position_on_screen(bob) == position
    ann_label = next(e["label_name"] for e in events(team_db) if e["annotator"] == "ann")
    other = next(
        b for b in bob.button if b.key and b.key.startswith(f"query_answer_{position}_") and plain(b.label) != ann_label
    )
    other.click().run()
    no_exception(bob)
    assert [plain(w.value) for w in bob.warning][0].startswith("Conflict recorded:")
    assert "ann answered differently. A reviewer will settle it." in plain(bob.warning[0].value)
    assert not bob.success

    rev = sign_in(app(team_db), "rev")
    rev.switch_page("views/review.py").run()
    no_exception(rev)
    assert titles(rev) == ["Review"]
    assert shown_item(rev) == first_ann
    table = rev.dataframe[0].value
    assert list(table["annotator"]) == ["ann", "bob"]
    resolve = next(b for b in rev.button if b.key and b.key.startswith("conflict_resolve_"))
    resolve.click().run()
    no_exception(rev)
    last = events(team_db)[-1]
    assert (last["kind"], last["annotator"]) == ("resolve", "rev")
    assert any("No conflict left to settle (1 settled by a reviewer so far)" in s.value for s in rev.success)


def test_require_sign_in_puts_localhost_without_users_in_team_mode(app, small_db, monkeypatch):
    at = app(small_db, run=False)
    monkeypatch.setattr(sys, "argv", [*sys.argv, "--require-sign-in"])
    at.run()
    no_exception(at)
    assert titles(at) == ["Sign in to winnow"]


def test_oidc_sign_in_maps_the_identity_to_an_active_account(team_db):
    from app.service import SignInRefused, disable_user, sign_in_with_identity
    from app.store import audit_log

    Session = open_store(team_db)
    user = sign_in_with_identity(Session, {"preferred_username": "rev", "email": "r@example.org"})
    assert (user.name, user.role) == ("rev", "reviewer")
    assert sign_in_with_identity(Session, {"email": "ann"}).name == "ann"
    with pytest.raises(SignInRefused, match="'nobody@example.org' has no active account here"):
        sign_in_with_identity(Session, {"email": "nobody@example.org"})
    disable_user(Session, "ann")
    with pytest.raises(SignInRefused, match="'ann' has no active account"):
        sign_in_with_identity(Session, {"preferred_username": "ann"})
    with pytest.raises(SignInRefused, match="none of the claims"):
        sign_in_with_identity(Session, {"sub": "1234"})
    with Session() as s:
        log = [(e["kind"], e["user"], e["detail"]) for e in audit_log(s) if e["kind"].startswith("sign_in")]
    assert log == [
        ("sign_in", "rev", "oidc"),
        ("sign_in", "ann", "oidc"),
        ("sign_in_failed", "nobody@example.org", "oidc: no such account"),
        ("sign_in_failed", "ann", "oidc: account disabled"),
    ]


def test_the_oidc_button_shows_only_with_an_auth_section(app, team_db):
    at = app(team_db)
    assert not [b for b in at.button if b.key == Keys.SIGN_IN_OIDC]
    at.secrets["auth"] = {"client_id": "winnow"}
    at.run()
    no_exception(at)
    assert [b for b in at.button if b.key == Keys.SIGN_IN_OIDC]


def test_an_annotator_cannot_create_a_session_from_the_app(team_db):
    from app.service import start_session
    from engine.exceptions import InvalidInput

    Session = open_store(team_db)
    with pytest.raises(InvalidInput, match="only an active admin may do this, and 'ann' is not one"):
        start_session(
            Session,
            name="mine",
            k=5,
            weighting="uniform",
            criterion="apl",
            target_set="all",
            dataset_name="small",
            actor="ann",
        )
    assert start_session(
        Session,
        name="mine",
        k=5,
        weighting="uniform",
        criterion="apl",
        target_set="all",
        dataset_name="small",
        actor="ada",
    )


def test_an_answer_about_an_item_not_reserved_for_the_user_is_refused(app, team_db):
    """Team mode's stale-answer check: the Query page offers the item leased to this user, so an
    answer about any other item (a late key press, a lease taken over) writes nothing."""
    from app.service import StaleAnswer

    ann = sign_in(app(team_db), "ann")
    bob = sign_in(app(team_db), "bob")
    bench = ann.session_state[STATE_KEY].workbench
    mine, his = position_on_screen(ann), position_on_screen(bob)
    label = int(np.flatnonzero(bench.state.candidates[his])[0])
    with pytest.raises(StaleAnswer, match="no longer the one to answer"):
        bench.record("ann", "answer", position=his, label=label, displayed="lease")
    assert events(team_db) == []
    label = int(np.flatnonzero(bench.state.candidates[mine])[0])
    bench.record("ann", "answer", position=mine, label=label, displayed="lease")
    assert [(e["annotator"], e["kind"]) for e in events(team_db)] == [("ann", "answer")]


def test_a_reservation_that_lapses_between_the_check_and_the_write_records_nothing(app, team_db, monkeypatch):
    """The lease is looked at again inside the answer's transaction: when it expired after the
    page's check (and the item may have gone to someone else), nothing is written."""
    from datetime import timedelta

    from sqlalchemy import update

    from app.service import StaleAnswer
    from app.service import workbench as workbench_module
    from app.store.models import ItemLease, utcnow

    ann = sign_in(app(team_db), "ann")
    bench = ann.session_state[STATE_KEY].workbench
    mine = position_on_screen(ann)
    write = workbench_module.write_transaction

    def lapse_first(*args, **kwargs):
        with open_store(team_db).begin() as s:
            s.execute(update(ItemLease).values(expires_at=utcnow() - timedelta(minutes=1)))
        return write(*args, **kwargs)

    monkeypatch.setattr(workbench_module, "write_transaction", lapse_first)
    label = int(np.flatnonzero(bench.state.candidates[mine])[0])
    with pytest.raises(StaleAnswer, match="no longer reserved for you"):
        bench.record("ann", "answer", position=mine, label=label, displayed="lease")
    assert events(team_db) == []


def test_with_overlap_another_annotators_answer_between_the_check_and_the_write_is_no_reason_to_refuse(
    team_db, monkeypatch
):
    from app.service import Workbench, session_id_by_name
    from app.service import workbench as workbench_module
    from app.store import write_transaction
    from app.store.leases import next_item

    Session = open_store(team_db)
    set_session_overlap(Session, "small", 2)
    session_id = session_id_by_name(Session, "small")
    bench, elsewhere = Workbench.open(Session, session_id), Workbench.open(Session, session_id)
    shared = int(bench.queue(top=1)[0])
    for user in ("ann", "bob"):  # both hold a lease on the same item (overlap 2)
        reserved = write_transaction(
            Session, lambda s, user=user: next_item(s, session_id=session_id, user=user, preferred=[shared])
        )
        assert reserved == shared
    label = int(np.flatnonzero(bench.state.candidates[shared])[0])
    write = workbench_module.write_transaction

    def bob_answers_first(*args, **kwargs):
        monkeypatch.setattr(workbench_module, "write_transaction", write)  # once: bob's own write
        elsewhere.record("bob", "answer", position=shared, label=label, displayed="lease")
        return write(*args, **kwargs)

    monkeypatch.setattr(workbench_module, "write_transaction", bob_answers_first)
    bench.record("ann", "answer", position=shared, label=label, displayed="lease")
    assert [(e["annotator"], e["position"]) for e in events(team_db)] == [("bob", shared), ("ann", shared)]


def test_a_key_pressed_after_the_account_was_disabled_says_so_and_records_nothing(app, team_db):
    from app.service import disable_user

    ann = sign_in(app(team_db), "ann")
    position = position_on_screen(ann)
    disable_user(open_store(team_db), "ann")
    next(b for b in ann.button if b.key and b.key.startswith(f"query_answer_{position}_")).click().run()
    no_exception(ann)
    assert events(team_db) == []
    assert titles(ann) == ["Sign in to winnow"]
    assert any("account was signed out or disabled" in e.value for e in ann.error)
