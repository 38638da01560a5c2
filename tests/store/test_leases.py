"""Leases without a log scan (issue 21), on SQLite and PostgreSQL.

:func:`app.store.next_item` reads only the events of the items it considers and a digest it
keeps itself (``lease_open_items``). The algorithm it replaced, which replayed the whole event
log, is kept here as the oracle (:func:`next_item_by_replay`): on random event logs (answers,
skips, resolves, undos, several annotators, overlap 1 to 3, leases live and expired) both
reserve the same item and leave the same leases. Leases stay distinct across two OS processes
reserving many items at once, and a store written at revision 0015 upgrades and serves the
same items.
"""

from __future__ import annotations

import itertools
import multiprocessing
from collections.abc import Sequence
from datetime import datetime, timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from app.store import (
    LEASE_TTL,
    InvalidRecord,
    ItemProgress,
    PermissionDenied,
    add_user,
    assign_users,
    create_dataset,
    create_labelling_session,
    item_progress,
    make_engine,
    next_item,
    open_store,
    record_event,
    session_events,
    set_overlap,
    upgrade_database,
    write_transaction,
)
from app.store.models import Instance, ItemLease, User, utcnow
from app.store.records import get_labelling_session
from app.store.users import check_event_permission, session_overlap
from tests.store.conftest import CANDIDATES, LABELS, TRUE_LABELS
from tests.store.lease_worker import take_many_items

PASSWORD = "correct horse battery"
ANNOTATORS = ("ann", "bob", "cyd")
_names = itertools.count()


# --------------------------------------------------------------------------------------------
# The oracle: next_item as it was before issue 21 (it replays the whole log on every call)


def _settled(item: ItemProgress | None) -> bool:
    return item is not None and (item.resolved or item.in_conflict)


def next_item_by_replay(
    session: Session,
    *,
    session_id: int,
    user: str,
    preferred: Sequence[int],
    ttl: timedelta = LEASE_TTL,
    now: datetime | None = None,
) -> int | None:
    labelling = get_labelling_session(session, session_id)
    check_event_permission(session, labelling, user, "answer")
    who = session.scalar(select(User).where(User.name == user))
    assert who is not None
    now = now or utcnow()
    overlap = session_overlap(session, labelling.id)
    session.execute(delete(ItemLease).where(ItemLease.session_id == labelling.id, ItemLease.expires_at <= now))
    progress = item_progress(session_events(session, labelling.id))
    leases = session.execute(
        select(ItemLease.id, Instance.position, ItemLease.user_id, ItemLease.slot, User.name)
        .join(Instance, Instance.id == ItemLease.instance_id)
        .join(User, User.id == ItemLease.user_id)
        .where(ItemLease.session_id == labelling.id)
    ).all()

    def done_by_user(position: int) -> bool:
        item = progress.get(position)
        return item is not None and (user in item.verdicts or user in item.skipped_by)

    own = next((lease for lease in leases if lease.user_id == who.id), None)
    if own is not None:
        if not done_by_user(own.position) and not _settled(progress.get(own.position)):
            session.get(ItemLease, own.id).expires_at = now + ttl  # type: ignore[union-attr]
            session.flush()
            return int(own.position)
        session.execute(delete(ItemLease).where(ItemLease.id == own.id))
        leases = [lease for lease in leases if lease.id != own.id]

    held: dict[int, list[tuple[str, int]]] = {}
    for lease in leases:
        held.setdefault(int(lease.position), []).append((lease.name, lease.slot))
    started = [p for p, item in progress.items() if 0 < len(item.verdicts) < overlap and not _settled(item)]
    order = list(dict.fromkeys([*started, *map(int, preferred)]))
    for position in order:
        item = progress.get(position)
        if done_by_user(position) or _settled(item):
            continue
        answered = set(item.verdicts) if item is not None else set()
        if item is not None and len(answered) >= overlap:
            continue
        taken = {slot for _, slot in held.get(position, [])}
        if len(answered | {name for name, _ in held.get(position, [])}) >= overlap:
            continue
        slot = min(set(range(overlap)) - taken)
        instance_id = session.scalar(
            select(Instance.id).where(Instance.dataset_id == labelling.dataset_id, Instance.position == position)
        )
        if instance_id is None:
            continue
        try:
            with session.begin_nested():
                session.add(
                    ItemLease(
                        session_id=labelling.id,
                        instance_id=instance_id,
                        user_id=who.id,
                        slot=slot,
                        expires_at=now + ttl,
                    )
                )
                session.flush()
        except IntegrityError:
            continue
        return position
    return None


# --------------------------------------------------------------------------------------------
# Random event logs


N_ITEMS = len(CANDIDATES)

events = st.lists(
    st.tuples(
        st.sampled_from([*ANNOTATORS, "rev"]),
        st.sampled_from(["answer", "answer", "other_label", "none_of_these", "skip", "resolve", "undo", "undo_item"]),
        st.integers(0, N_ITEMS - 1),
        st.integers(0, len(LABELS) - 1),
    ),
    max_size=16,
)
leases = st.lists(
    st.tuples(st.sampled_from(ANNOTATORS), st.integers(0, N_ITEMS - 1), st.integers(0, 2), st.booleans()),
    max_size=4,
)


def _event(s: Session, session_id: int, who: str, kind: str, position: int, choice: int) -> None:
    """Record one event made valid for the toy dataset, or nothing when the store refuses it."""
    original = np.flatnonzero(CANDIDATES[position])
    outside = np.flatnonzero(~CANDIDATES[position])
    label: int | None = None
    if kind == "answer":
        label = int(original[choice % original.size])
    elif kind == "other_label":
        if not outside.size:
            return
        label = int(outside[choice % outside.size])
    elif kind == "resolve":
        label = choice
    if kind.startswith("undo"):
        where = position if kind == "undo_item" else None
        kind = "undo"
    else:
        where = position
    try:
        with s.begin_nested():
            record_event(s, session_id=session_id, annotator=who, kind=kind, instance_position=where, label=label)
    except (InvalidRecord, PermissionDenied):  # nothing to undo, a resolve by an annotator...
        pass


def _set_leases(s: Session, session_id: int, dataset_id: int, wanted, now: datetime) -> None:
    """Replace the session's leases by ``wanted`` (user, position, slot, expired)."""
    s.execute(delete(ItemLease).where(ItemLease.session_id == session_id))
    for name, position, slot, expired in wanted:
        user_id = s.scalar(select(User.id).where(User.name == name))
        instance_id = s.scalar(
            select(Instance.id).where(Instance.dataset_id == dataset_id, Instance.position == position)
        )
        expires = now - timedelta(minutes=1) if expired else now + timedelta(minutes=5)
        try:
            with s.begin_nested():
                s.add(
                    ItemLease(
                        session_id=session_id, instance_id=instance_id, user_id=user_id, slot=slot, expires_at=expires
                    )
                )
                s.flush()
        except IntegrityError:  # a user holds one lease, a slot of an item one user
            pass


def _lease_rows(s: Session, session_id: int) -> list[tuple[str, int, int, datetime]]:
    return sorted(
        s.execute(
            select(User.name, Instance.position, ItemLease.slot, ItemLease.expires_at)
            .join(Instance, Instance.id == ItemLease.instance_id)
            .join(User, User.id == ItemLease.user_id)
            .where(ItemLease.session_id == session_id)
        ).all()
    )


def _both(Session_: sessionmaker[Session], session_id: int, user: str, preferred: list[int], now: datetime):
    """What the oracle and next_item each reserve and leave, from the same state (rolled back)."""
    outcomes = []
    for reserve in (next_item_by_replay, next_item):
        with Session_() as s:
            try:
                got = reserve(s, session_id=session_id, user=user, preferred=preferred, now=now)
            except PermissionDenied as refused:
                got = f"refused: {refused}"
            outcomes.append((got, _lease_rows(s, session_id)))
            s.rollback()
    return outcomes


@pytest.fixture
def team_small(small):
    """'ann', 'bob', 'cyd' assigned to the toy session's dataset sessions; 'rev' a reviewer."""

    def work(s):
        add_user(s, name="ada", role="admin", password=PASSWORD)
        for name in ANNOTATORS:
            add_user(s, name=name, role="annotator", password=PASSWORD, actor="ada")
        add_user(s, name="rev", role="reviewer", password=PASSWORD, actor="ada")

    write_transaction(small.Session, work)
    return small


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    before=events,
    after=events,
    leases_now=leases,
    overlaps=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    user=st.sampled_from(ANNOTATORS),
    preferred=st.lists(st.integers(0, N_ITEMS + 1), max_size=8),
)
def test_next_item_reserves_what_the_full_replay_reserved(
    team_small, before, after, leases_now, overlaps, user, preferred
):
    """Two rounds of events with a reservation in between (so that the digest is brought up to
    date from a cursor, not only from the start), then the oracle and next_item agree."""
    small = team_small
    now = utcnow()

    def new_session(s):
        ls = create_labelling_session(s, dataset_id=small.dataset_id, name=f"leases-{next(_names)}", k=2)
        assign_users(s, session_id=ls.id, names=list(ANNOTATORS), actor="ada")
        set_overlap(s, session_id=ls.id, overlap=overlaps[0], actor="ada")
        for event in before:
            _event(s, ls.id, *event)
        return ls.id

    session_id = write_transaction(small.Session, new_session)
    first = _both(small.Session, session_id, user, preferred, now)
    assert first[0] == first[1]
    # Reserve for real: next_item's digest now stands at the last event of the first round.
    write_transaction(
        small.Session, lambda s: next_item(s, session_id=session_id, user=user, preferred=preferred, now=now)
    )

    def second_round(s):
        set_overlap(s, session_id=session_id, overlap=overlaps[1], actor="ada")
        for event in after:
            _event(s, session_id, *event)
        _set_leases(s, session_id, small.dataset_id, leases_now, now)

    write_transaction(small.Session, second_round)
    for who in ANNOTATORS:
        oracle, new = _both(small.Session, session_id, who, preferred, now)
        assert new == oracle, (who, preferred)


def test_an_undone_answer_frees_its_item(team_small):
    small = team_small

    def work(s):
        ls = create_labelling_session(s, dataset_id=small.dataset_id, name="undo-frees", k=2)
        assign_users(s, session_id=ls.id, names=list(ANNOTATORS), actor="ada")
        return ls.id

    session_id = write_transaction(small.Session, work)

    def take(who):
        return write_transaction(
            small.Session, lambda s: next_item(s, session_id=session_id, user=who, preferred=[2, 4])
        )

    def act(who, kind, label=None):
        write_transaction(
            small.Session,
            lambda s: record_event(
                s, session_id=session_id, annotator=who, kind=kind, instance_position=2, label=label
            ),
        )

    assert take("ann") == 2
    act("ann", "answer", 0)
    assert take("bob") == 4  # 2 is answered
    assert take("ann") is None  # ann answered 2; bob holds 4
    act("ann", "undo")
    assert take("ann") == 2  # her answer undone: 2 needs one again
    assert take("cyd") is None  # 2 is ann's again, 4 bob's


@pytest.mark.parametrize("store_url", [pytest.param("postgresql", marks=pytest.mark.postgresql)], indirect=True)
def test_two_processes_reserving_many_items_never_share_one(team_small):
    """Overlap 1, PostgreSQL: two OS processes, each with two users reserving, answering and
    reserving again, in rounds where both processes ask at the same moment; no item is reserved
    by two users, and none is answered twice."""
    small = team_small
    n_items = 40
    rounds = n_items // 4 + 3  # four users take four items a round; spare rounds for a late lease
    rng = np.random.default_rng(1)
    candidates = rng.random((n_items, 3)) < 0.7
    candidates[:, 0] = True

    def work(s):
        ds = create_dataset(
            s,
            name="many",
            X=rng.normal(size=(n_items, 2)),
            candidates=candidates,
            label_names=["a", "b", "c"],
            external_ids=[f"m{i}" for i in range(n_items)],
        )
        ls = create_labelling_session(s, dataset_id=ds.id, name="race", k=2)
        assign_users(s, session_id=ls.id, names=list(ANNOTATORS), actor="ada")
        add_user(s, name="dan", role="annotator", password=PASSWORD, actor="ada")
        assign_users(s, session_id=ls.id, names=["dan"], actor="ada")
        return ls.id

    session_id = write_transaction(small.Session, work)
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    preferred = list(range(n_items))
    workers = [
        ctx.Process(
            target=take_many_items,
            args=(small.url, session_id, users, preferred, rounds, barrier, results),
        )
        for users in (["ann", "bob"], ["cyd", "dan"])
    ]
    for w in workers:
        w.start()
    got = [results.get(timeout=300) for _ in workers]
    for w in workers:
        w.join(timeout=60)
    assert all(not tb for _, tb in got), [tb for _, tb in got]
    reservations = [r for taken, _ in got for r in taken]
    # Each reservation was answered before its user asked again, so an item reserved twice
    # would have been answered twice.
    with small.Session() as s:
        log = session_events(s, session_id)
    answered = [e.position for e in log if e.kind == "answer"]
    assert len(reservations) == n_items and sorted(p for _, p in reservations) == preferred
    assert sorted(answered) == preferred
    # In the first round all four asked at once and each got an item.
    assert {who for who, _ in reservations} == {"ann", "bob", "cyd", "dan"}


def test_a_store_written_at_0015_upgrades_and_serves_the_same_items(store_url, monkeypatch):
    """Events and leases written before revision 0016: after the upgrade the first
    reservation builds the digest from the whole log and agrees with the oracle."""
    upgrade_database(store_url, "0015")
    # Today's code writes the old store: the item columns it drops on a write of instances
    # (revision 0020) did not exist, and the code of 0015 had none to drop.
    monkeypatch.setattr("app.store.datasets.drop_item_columns", lambda session, dataset_id: None)
    engine = make_engine(store_url)
    try:
        old = sessionmaker(bind=engine)

        def work(s):
            ds = create_dataset(
                s,
                name="toy",
                X=np.zeros((N_ITEMS, 2)),
                candidates=CANDIDATES,
                label_names=LABELS,
                external_ids=[f"item-{i}" for i in range(N_ITEMS)],
                true_labels=TRUE_LABELS,
            )
            ls = create_labelling_session(s, dataset_id=ds.id, name="old", k=2)
            add_user(s, name="ada", role="admin", password=PASSWORD)
            for name in ANNOTATORS:
                add_user(s, name=name, role="annotator", password=PASSWORD, actor="ada")
            assign_users(s, session_id=ls.id, names=list(ANNOTATORS), actor="ada")
            set_overlap(s, session_id=ls.id, overlap=2, actor="ada")
            for who, position, label in (("ann", 0, 0), ("ann", 1, 1), ("bob", 1, 2), ("cyd", 3, 2)):
                record_event(s, session_id=ls.id, annotator=who, kind="answer", instance_position=position, label=label)
            record_event(s, session_id=ls.id, annotator="cyd", kind="undo")
            record_event(s, session_id=ls.id, annotator="bob", kind="answer", instance_position=4, label=3)
            _set_leases(s, ls.id, ds.id, [("cyd", 2, 0, False)], utcnow())
            return ls.id

        with old.begin() as s:
            session_id = work(s)
    finally:
        engine.dispose()
    Session_ = open_store(store_url)  # upgrades to the head
    now = utcnow()
    for who in ANNOTATORS:
        oracle, new = _both(Session_, session_id, who, [4, 3, 2, 1, 0], now)
        assert new == oracle
    # Items 0 and 4 have one verdict each (1 is in conflict, 3's answer undone): bob answered
    # 4, so he is sent to 0 first; cyd keeps her lease on 2.
    assert _both(Session_, session_id, "bob", [3], now)[1][0] == 0
    assert _both(Session_, session_id, "ann", [3], now)[1][0] == 4
    assert _both(Session_, session_id, "cyd", [3], now)[1][0] == 2
