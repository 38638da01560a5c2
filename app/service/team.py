"""A team at work on a session: the next item reserved for each annotator, who answered
what, per-annotator progress and agreement.

Agreement is measured on the items two or more annotators gave a verdict on (their latest
``answer`` / ``other_label`` / ``none_of_these``, undone events left out; "none of these" is
a category of its own): the raw agreement (share of such items on which all verdicts are the
same) and, for every pair of annotators, their raw agreement and Cohen's kappa
(:func:`sklearn.metrics.cohen_kappa_score`) over the items both answered.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from app.store import EventRecord, authorize_session, next_item, session_events, session_overlap, write_transaction
from app.store.derive import VERDICT_KINDS

if TYPE_CHECKING:
    import pandas as pd

    from app.service.workbench import Workbench

__all__ = [
    "Verdict",
    "ConflictDetail",
    "reserve_next_item",
    "overlap_of",
    "conflict_details",
    "annotator_rows",
    "annotator_progress",
    "agreement",
    "pair_rows",
    "pair_agreement",
    "team_records",
    "team_figures",
]

NONE_OF_THESE = "none of these"


@dataclass(frozen=True)
class Verdict:
    """One annotator's current verdict on an item."""

    annotator: str
    label: str  # a label name, or "none of these"
    at: datetime | None
    event_id: int


@dataclass(frozen=True)
class ConflictDetail:
    """An unresolved conflict: the item and who answered what, and when."""

    position: int
    item_id: str
    labels: tuple[int, ...]
    verdicts: tuple[Verdict, ...]


#: Items of the served order a reservation tries before drawing all of it: more than a team
#: holds leases on at once.
RESERVE_FROM_HEAD = 256


def reserve_next_item(bench: Workbench, user: str) -> int | None:
    """The item ``user`` should answer next, reserved for them (:func:`app.store.next_item`),
    in the order of the query ranking; ``None`` when nothing is left for them.

    The queue is computed before the write transaction (drawing it may store audit draws, a
    write of its own); :func:`next_item` reads it only as far as the first free item. Its head
    (:data:`RESERVE_FROM_HEAD` items) is tried first: drawing the whole served order on every
    page run was a tenth of the server's CPU per answer at 20,000 items; the whole order is
    drawn only when every item of the head is taken or done."""
    head = bench.queue(top=RESERVE_FROM_HEAD)
    reserved = write_transaction(
        bench.session_factory, lambda s: next_item(s, session_id=bench.session_id, user=user, preferred=head)
    )
    if reserved is not None or head.size < RESERVE_FROM_HEAD:
        return reserved
    preferred = bench.queue()
    return write_transaction(
        bench.session_factory, lambda s: next_item(s, session_id=bench.session_id, user=user, preferred=preferred)
    )


def overlap_of(bench: Workbench) -> int:
    """The session's overlap: how many annotators answer each item."""
    with bench.session_factory() as s:
        return session_overlap(s, bench.session_id)


def _current_verdicts(
    events: Sequence[EventRecord], *, since_resolve: bool = False
) -> dict[int, dict[str, EventRecord]]:
    """Position -> annotator -> their latest active verdict (with ``since_resolve``: only
    those given after the item's last resolve, the ones a conflict is made of).

    A resolve settles an item, it does not erase what the annotators said: agreement and
    progress count every verdict."""
    undone = {e.undoes_event_id for e in events if e.kind == "undo"}
    verdicts: dict[int, dict[str, EventRecord]] = {}
    for e in sorted(events, key=lambda e: e.id):
        if e.kind == "undo" or e.id in undone:
            continue
        if e.kind == "resolve" and since_resolve:
            verdicts[e.position] = {}
        elif e.kind in VERDICT_KINDS:
            verdicts.setdefault(e.position, {})[e.annotator] = e
    return verdicts


def _verdict_label(e: EventRecord, label_names: Sequence[str]) -> str:
    return NONE_OF_THESE if e.kind == "none_of_these" or e.label is None else label_names[e.label]


def conflict_details(bench: Workbench, *, actor: str | None) -> list[ConflictDetail]:
    """Every unresolved conflict of the session with each annotator's verdict and its time.

    For those who settle conflicts: ``actor`` must be allowed to ``resolve`` in the session (a
    reviewer or an admin; ``None`` is the command line).
    """
    with bench.session_factory() as s:
        authorize_session(s, actor, "resolve", bench.session_id, what="conflicts")
        events = session_events(s, bench.session_id)
    current = _current_verdicts(events, since_resolve=True)
    names = bench.label_names
    details = []
    for conflict in bench.state.conflicts:
        verdicts = sorted(current.get(conflict.position, {}).values(), key=lambda e: e.id)
        details.append(
            ConflictDetail(
                position=conflict.position,
                item_id=bench.state.external_ids[conflict.position],
                labels=conflict.labels,
                verdicts=tuple(Verdict(e.annotator, _verdict_label(e, names), e.created_at, e.id) for e in verdicts),
            )
        )
    return details


#: The columns of :func:`annotator_progress` (its index first) and of :func:`pair_agreement`.
ANNOTATOR_COLUMNS = ("annotator", "answered", "skipped", "resolved", "events", "first", "last", "seconds_per_event")
PAIR_COLUMNS = ("annotator_a", "annotator_b", "items", "raw_agreement", "cohen_kappa")


def annotator_progress(events: Sequence[EventRecord]) -> pd.DataFrame:
    """Per annotator: items answered (current verdicts), skips, resolves, events, and speed.

    Returns
    -------
    pandas.DataFrame
        Index ``annotator``; columns ``answered``, ``skipped``, ``resolved``, ``events``,
        ``first``, ``last`` and ``seconds_per_event`` (median gap between an annotator's
        consecutive events; NaN with fewer than two).
    """
    import pandas as pd

    return pd.DataFrame(annotator_rows(events), columns=list(ANNOTATOR_COLUMNS)).set_index("annotator")


def annotator_rows(events: Sequence[EventRecord]) -> list[dict[str, Any]]:
    """The rows of :func:`annotator_progress` as plain dicts (keys :data:`ANNOTATOR_COLUMNS`),
    by annotator name: what the command line prints, without loading pandas."""
    undone = {e.undoes_event_id for e in events if e.kind == "undo"}
    rows: list[dict[str, Any]] = []
    by_annotator: dict[str, list[EventRecord]] = {}
    for e in events:
        by_annotator.setdefault(e.annotator, []).append(e)
    current = _current_verdicts(events)
    for who, own in sorted(by_annotator.items()):
        active = [e for e in own if e.kind != "undo" and e.id not in undone]
        times = sorted(e.created_at for e in own if e.created_at is not None)
        gaps = np.diff([t.timestamp() for t in times])
        rows.append(
            {
                "annotator": who,
                "answered": sum(who in verdicts for verdicts in current.values()),
                "skipped": sum(e.kind == "skip" for e in active),
                "resolved": sum(e.kind == "resolve" for e in active),
                "events": len(own),
                "first": times[0] if times else None,
                "last": times[-1] if times else None,
                "seconds_per_event": float(np.median(gaps)) if gaps.size else float("nan"),
            }
        )
    return rows


def pair_agreement(events: Sequence[EventRecord], label_names: Sequence[str]) -> pd.DataFrame:
    """For every pair of annotators with items in common: how many, raw agreement, Cohen's kappa.

    Kappa is NaN when it is undefined (both annotators used one and the same category).
    """
    import pandas as pd

    return pd.DataFrame(pair_rows(events, label_names), columns=list(PAIR_COLUMNS))


def pair_rows(events: Sequence[EventRecord], label_names: Sequence[str]) -> list[dict[str, Any]]:
    """The rows of :func:`pair_agreement` as plain dicts (keys :data:`PAIR_COLUMNS`)."""
    current = _current_verdicts(events)
    answers: dict[str, dict[int, str]] = {}
    for position, verdicts in current.items():
        for who, e in verdicts.items():
            answers.setdefault(who, {})[position] = _verdict_label(e, label_names)
    rows: list[dict[str, Any]] = []
    for a, b in itertools.combinations(sorted(answers), 2):
        common = sorted(set(answers[a]) & set(answers[b]))
        if not common:
            continue
        first = [answers[a][p] for p in common]
        second = [answers[b][p] for p in common]
        agree = float(np.mean([x == y for x, y in zip(first, second, strict=True)]))
        if len(set(first) | set(second)) < 2:
            kappa = float("nan")
        else:
            # Imported here: scikit-learn takes about a second to load, and most sessions
            # (one annotator per item) have no pair to measure.
            from sklearn.metrics import cohen_kappa_score

            kappa = float(cohen_kappa_score(first, second))
        rows.append(
            {"annotator_a": a, "annotator_b": b, "items": len(common), "raw_agreement": agree, "cohen_kappa": kappa}
        )
    return rows


def agreement(events: Sequence[EventRecord]) -> dict[str, float | int]:
    """Items answered by two or more annotators and the share on which all of them agree.

    Returns
    -------
    dict
        ``items_shared`` (int) and ``raw_agreement`` (float, NaN when no item is shared).
    """
    current = _current_verdicts(events)
    shared = [v for v in current.values() if len(v) >= 2]
    same = [len({(e.kind == "none_of_these", e.label) for e in v.values()}) == 1 for v in shared]
    return {"items_shared": len(shared), "raw_agreement": float(np.mean(same)) if same else float("nan")}


def team_figures(bench: Workbench, *, actor: str | None) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, float | int]]:
    """A session's :func:`annotator_progress`, :func:`pair_agreement` and :func:`agreement`,
    from its event log (what the Progress page shows).

    ``actor`` must be allowed the session's ``progress`` (``None``: the command line).
    """
    import pandas as pd

    people, pairs, shared = team_records(bench, actor=actor)
    return (
        pd.DataFrame(people, columns=list(ANNOTATOR_COLUMNS)).set_index("annotator"),
        pd.DataFrame(pairs, columns=list(PAIR_COLUMNS)),
        shared,
    )


def team_records(
    bench: Workbench, *, actor: str | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, float | int]]:
    """:func:`team_figures` as plain rows (:func:`annotator_rows`, :func:`pair_rows`) and
    :func:`agreement`: what ``winnow session status`` prints."""
    with bench.session_factory() as s:
        authorize_session(s, actor, "progress", bench.session_id)
        events = session_events(s, bench.session_id)
    return annotator_rows(events), pair_rows(events, bench.label_names), agreement(events)
