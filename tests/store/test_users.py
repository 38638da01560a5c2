"""Team mode in the store, on SQLite and PostgreSQL: accounts, roles checked on every write,
assignments, sign-in with its rate limit and audit, and leases of the next item."""

from __future__ import annotations

import logging
import multiprocessing
from datetime import timedelta

import pytest
from sqlalchemy import select, text

from app.store import (
    AnswerEvent,
    InvalidRecord,
    PermissionDenied,
    add_user,
    assign_users,
    audit_log,
    create_labelling_session,
    list_users,
    next_item,
    record_event,
    set_active,
    set_overlap,
    set_password,
    set_role,
    sign_in,
    users_exist,
    write_transaction,
)
from app.store.models import User, utcnow
from app.store.users import FAILED_SIGN_IN_WINDOW, MAX_FAILED_SIGN_INS
from tests.store.lease_worker import take_next_item

PASSWORD = "correct horse battery"


def run(small, work):
    return write_transaction(small.Session, work)


@pytest.fixture
def team(small):
    """admin 'ada', annotators 'ann' and 'bob' (assigned to the session), reviewer 'rev',
    annotator 'cid' (not assigned)."""

    def work(s):
        add_user(s, name="ada", role="admin", password=PASSWORD)
        for name, role in (("ann", "annotator"), ("bob", "annotator"), ("rev", "reviewer"), ("cid", "annotator")):
            add_user(s, name=name, role=role, password=PASSWORD, actor="ada")
        assign_users(s, session_id=small.session_id, names=["ann", "bob"], actor="ada")

    run(small, work)
    return small


def answer(small, who, position, label, kind="answer"):
    return run(
        small,
        lambda s: (
            record_event(
                s, session_id=small.session_id, annotator=who, kind=kind, instance_position=position, label=label
            ).id
        ),
    )


def test_without_users_every_write_is_allowed_as_before(small):
    with small.Session() as s:
        assert not users_exist(s)
    answer(small, "anyone", 0, "cat")
    answer(small, "someone", 0, "dog")
    answer(small, "anyone", 0, "cat", kind="resolve")


def test_an_annotator_answers_only_in_sessions_assigned_to_them(team):
    answer(team, "ann", 0, "cat")
    with pytest.raises(PermissionDenied, match=r"'cid' is not assigned to session 'first'.*session assign first cid"):
        answer(team, "cid", 1, "dog")
    with pytest.raises(PermissionDenied, match="'mallory' is not a user"):
        answer(team, "mallory", 1, "dog")
    run(team, lambda s: assign_users(s, session_id=team.session_id, names=["cid"], actor="ada"))
    answer(team, "cid", 1, "dog")
    with team.Session() as s:
        assert s.query(AnswerEvent).count() == 2


def test_only_reviewers_and_admins_resolve(team):
    answer(team, "ann", 0, "cat")
    answer(team, "bob", 0, "dog")
    with pytest.raises(PermissionDenied, match="'bob' has role 'annotator'; only a reviewer or an admin resolves"):
        answer(team, "bob", 0, "dog", kind="resolve")
    answer(team, "rev", 0, "dog", kind="resolve")
    answer(team, "ada", 0, "cat", kind="resolve")


def test_undo_cancels_only_your_own_events(team):
    ann_event = answer(team, "ann", 0, "cat")
    with pytest.raises(InvalidRecord, match="'bob' has no event left to undo"):
        answer(team, "bob", 0, None, kind="undo")
    bob_event = answer(team, "bob", 1, "dog")
    undo = run(
        team, lambda s: record_event(s, session_id=team.session_id, annotator="bob", kind="undo").undoes_event_id
    )
    assert undo == bob_event != ann_event


def test_a_disabled_user_cannot_sign_in_or_write(team):
    run(team, lambda s: set_active(s, name="ann", active=False, actor="ada"))
    result = run(team, lambda s: sign_in(s, name="ann", password=PASSWORD))
    assert result.user is None and "disabled" in result.reason
    with pytest.raises(PermissionDenied, match="'ann' is disabled"):
        answer(team, "ann", 0, "cat")
    run(team, lambda s: set_active(s, name="ann", active=True, actor="ada"))
    assert run(team, lambda s: sign_in(s, name="ann", password=PASSWORD)).user.name == "ann"


def test_only_an_active_admin_changes_accounts_and_the_last_admin_stays(team):
    with pytest.raises(PermissionDenied, match="only an active admin may do this, and 'rev' is not one"):
        run(team, lambda s: add_user(s, name="eve", role="admin", password=PASSWORD, actor="rev"))
    with pytest.raises(PermissionDenied):
        run(team, lambda s: set_role(s, name="ann", role="reviewer", actor="bob"))
    with pytest.raises(PermissionDenied):
        run(team, lambda s: create_labelling_session(s, dataset_id=team.dataset_id, name="x", actor="ann"))
    with pytest.raises(InvalidRecord, match="'ada' is the last active admin"):
        run(team, lambda s: set_active(s, name="ada", active=False, actor="ada"))
    run(team, lambda s: set_role(s, name="rev", role="admin", actor="ada"))
    run(team, lambda s: set_active(s, name="ada", active=False, actor="rev"))
    with pytest.raises(InvalidRecord, match="already exists"):
        run(team, lambda s: add_user(s, name="ann", role="annotator", password=PASSWORD))
    with pytest.raises(InvalidRecord, match="role must be one of admin, annotator, reviewer; got 'boss'"):
        run(team, lambda s: add_user(s, name="zed", role="boss", password=PASSWORD))
    with pytest.raises(InvalidRecord, match="password must be 8 to 1024 characters long, got 3"):
        run(team, lambda s: add_user(s, name="zed", role="annotator", password="abc"))


def test_user_names_are_immutable(team):
    with pytest.raises(Exception, match="immutable"):
        with team.Session.begin() as s:
            s.execute(text("UPDATE users SET name = 'anna' WHERE name = 'ann'"))


def test_passwords_are_never_stored_or_logged_in_clear(team, caplog):
    caplog.set_level(logging.DEBUG)
    run(team, lambda s: set_password(s, name="bob", password="bob's new secret", actor="bob"))
    run(team, lambda s: sign_in(s, name="bob", password="bob's new secret"))
    run(team, lambda s: sign_in(s, name="bob", password="a wrong guess 123"))
    with team.Session() as s:
        hashes = s.scalars(select(User.password_hash)).all()
        dump = " ".join(
            str(row)
            for table in ("users", "audit_events", "annotators")
            for row in s.execute(text(f"SELECT * FROM {table}")).all()
        )
    assert all(h.startswith("$argon2id$") for h in hashes)
    for secret in (PASSWORD, "bob's new secret", "a wrong guess 123"):
        assert secret not in dump
        assert secret not in caplog.text
    assert "failed sign-in for 'bob'" in caplog.text
    assert [u.name for u in list_users(team.Session())] == ["ada", "ann", "bob", "rev", "cid"]


def test_failed_sign_ins_are_rate_limited_per_name_in_the_database(team):
    now = utcnow()
    for i in range(MAX_FAILED_SIGN_INS):
        result = run(team, lambda s, i=i: sign_in(s, name="bob", password=f"guess number {i}", now=now))
        assert result.user is None and result.reason == "wrong user name or password"
    locked = run(team, lambda s: sign_in(s, name="bob", password=PASSWORD, now=now + timedelta(seconds=1)))
    assert locked.user is None and "too many failed sign-ins" in locked.reason
    # Another name is not affected; the lock lifts when the failures are old enough.
    assert run(team, lambda s: sign_in(s, name="ann", password=PASSWORD, now=now)).user is not None
    later = now + FAILED_SIGN_IN_WINDOW + timedelta(seconds=2)
    assert run(team, lambda s: sign_in(s, name="bob", password=PASSWORD, now=later)).user.name == "bob"
    # An unknown name is refused in the same words as a wrong password.
    assert run(team, lambda s: sign_in(s, name="nobody", password=PASSWORD)).reason == "wrong user name or password"


def test_the_audit_log_holds_sign_ins_and_account_changes(team):
    run(team, lambda s: sign_in(s, name="ann", password=PASSWORD))
    run(team, lambda s: sign_in(s, name="ann", password="not her password"))
    run(team, lambda s: set_role(s, name="ann", role="reviewer", actor="ada"))
    run(team, lambda s: set_active(s, name="bob", active=False, actor="ada"))
    with team.Session() as s:
        log = audit_log(s)
    kinds = [(e["kind"], e["user"], e["actor"]) for e in log]
    assert ("user_added", "ada", None) in kinds and ("user_added", "ann", "ada") in kinds
    assert ("assigned", "bob", "ada") in kinds
    assert kinds[-4:] == [
        ("sign_in", "ann", None),
        ("sign_in_failed", "ann", None),
        ("role_changed", "ann", "ada"),
        ("user_disabled", "bob", "ada"),
    ]
    assert log[-2]["detail"] == "annotator -> reviewer"
    with pytest.raises(Exception, match="append-only"):
        with team.Session.begin() as s:
            s.execute(text("DELETE FROM audit_events"))


def test_leases_split_the_items_and_overlap_shares_them(team):
    preferred = [3, 0, 1, 4]

    def take(who):
        return run(team, lambda s: next_item(s, session_id=team.session_id, user=who, preferred=preferred))

    assert take("ann") == 3
    assert take("bob") == 0  # 3 is reserved for ann
    assert take("ann") == 3  # asking again keeps the same item
    answer(team, "ann", 3, "cat")
    assert take("ann") == 1  # 0 is bob's
    with pytest.raises(PermissionDenied, match="'cid' is not assigned"):
        take("cid")

    run(team, lambda s: set_overlap(s, session_id=team.session_id, overlap=2, actor="ada"))
    answer(team, "bob", 0, "dog")
    assert take("ann") == 1  # her reservation holds until she answers it
    answer(team, "ann", 1, "dog")
    # Overlap 2: items that someone answered come first, for the other annotator.
    assert take("ann") == 0
    answer(team, "ann", 0, "cat")  # disagrees with bob: a conflict, left to a reviewer
    assert take("bob") == 1
    answer(team, "bob", 1, "dog")  # agrees with ann
    assert take("bob") == 3
    assert take("ann") == 4  # 0, 1 and 3 are hers already


def test_an_expired_lease_frees_its_item(team):
    now = utcnow()

    def take(who, when):
        return run(
            team,
            lambda s: next_item(
                s, session_id=team.session_id, user=who, preferred=[2, 4], ttl=timedelta(minutes=1), now=when
            ),
        )

    assert take("ann", now) == 2
    assert take("bob", now) == 4
    assert take("bob", now + timedelta(seconds=30)) == 4  # still bob's own item
    answer(team, "bob", 4, "fish")
    assert take("bob", now + timedelta(minutes=5)) == 2  # ann's lease on 2 has expired


def test_two_processes_asking_at_once_get_different_items(team):
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    preferred = [0, 1, 3, 4]
    workers = [
        ctx.Process(target=take_next_item, args=(team.url, team.session_id, who, preferred, barrier, results))
        for who in ("ann", "bob")
    ]
    for w in workers:
        w.start()
    got = [results.get(timeout=180) for _ in workers]
    for w in workers:
        w.join(timeout=60)
    assert all(not tb for _, _, tb in got), [tb for _, _, tb in got]
    positions = sorted(p for _, p, _ in got)
    assert positions == [0, 1]
