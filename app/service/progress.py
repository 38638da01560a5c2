"""A session's progress: its events replayed one by one, and the candidate-set sizes.

:func:`replay_progress` measures the session after every event: answered and open items,
open targets (``NL ≠ APL``), DST-PLL's rejects, the items an expert labelled or that were
given one label, and, when true labels are known, DST-PLL's accuracy. It is incremental: each
event changes at most one item, so only the targets that hold that item among their neighbours
are re-examined (:class:`engine.neighbors.ReverseIndex`, :func:`engine.winners.label_sets`,
:func:`engine.dst.transductive_decisions`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from app.store import EventRecord, SessionState, authorize_session, derive_item, session_events
from engine.dst import transductive_decisions
from engine.neighbors import ReverseIndex, knn_graph
from engine.winners import label_sets, open_targets

if TYPE_CHECKING:
    from app.service.workbench import Workbench

__all__ = ["PROGRESS_COLUMNS", "replay_progress", "session_progress", "candidate_set_sizes"]

#: Columns of :func:`replay_progress` (plus ``dst_accuracy`` and ``accepted_accuracy`` when
#: true labels are known).
PROGRESS_COLUMNS: tuple[str, ...] = (
    "step",
    "event_id",
    "time",
    "kind",
    "answered",
    "open",
    "open_targets",
    "rejects",
    "expert_or_given",
)


def replay_progress(
    *,
    X: np.ndarray,
    original: np.ndarray,
    targets: np.ndarray,
    idx: np.ndarray,
    w: np.ndarray,
    k: int,
    events: Sequence[EventRecord],
    true_labels: np.ndarray | None,
    dst_idx: np.ndarray | None = None,
) -> pd.DataFrame:
    """Replay a session's events and measure it after each one.

    Each event changes at most one item; the item is re-derived from its own events
    (:func:`app.store.derive_item`), and only the targets that have it among their
    neighbours are re-examined: their ``NL``/``APL``, and DST-PLL's transductive decision for
    the item and every instance whose neighbourhood holds it. So the replay costs
    O(events · affected targets · K · M) after one full pass.

    Parameters
    ----------
    X : array of shape (n_instances, n_features)
    original : bool array of shape (n_instances, n_labels)
        Original candidate sets.
    targets : int array of shape (n_targets,)
        The session's targets; ``idx``/``w`` are their neighbourhoods.
    idx, w : arrays of shape (n_targets, k)
    k : int
        Neighbours of DST-PLL (its graph covers every instance).
    events : sequence of EventRecord
        The session's events, oldest first.
    true_labels : int array of shape (n_instances,) or None
        ``-1`` where unknown.
    dst_idx : int array of shape (n_instances, k), optional
        DST-PLL's ``k``-NN neighbours of every instance, when the caller has them (the
        persisted graph); by default ``idx`` when it is that graph, else searched here.

    Returns
    -------
    pandas.DataFrame
        One row before any event (``step`` 0) and one after each event, with the columns
        :data:`PROGRESS_COLUMNS` (``open_targets``: targets whose ``NL ≠ APL``; ``rejects``: open
        items whose DST-PLL label is not accepted; ``expert_or_given``: items left with one
        label and not set aside, the ``expert`` and ``given`` label sources together; the model's
        labels are not replayed, since their calibration reads the audits as they are now) and,
        when true labels are known,
        ``dst_accuracy`` (DST-PLL's label of every instance with a known truth) and
        ``accepted_accuracy`` (the same, over the labels DST-PLL accepts).
    """
    n = original.shape[0]
    Y = np.array(original, dtype=bool)
    votes = ReverseIndex(idx, n)
    if dst_idx is None and targets.size == n and np.array_equal(targets, np.arange(n)) and w.shape[1] == k:
        dst_idx = idx
    elif dst_idx is None:
        dst_idx, _ = knn_graph(X, k=k, weights="uniform", exclude_self=True)
    dst = ReverseIndex(dst_idx, n)

    is_open = open_targets(*label_sets(idx, w, Y))
    labels, accepted, _ = transductive_decisions(Y, dst_idx)
    answered = np.zeros(n, dtype=bool)
    set_aside = np.zeros(n, dtype=bool)  # conflicts and none-of-these
    known = None if true_labels is None else np.asarray(true_labels) >= 0
    if known is not None and not known.any():
        known = None

    per_item: dict[int, list[EventRecord]] = {}
    records: list[dict[str, object]] = []

    def measure(step: int, event: EventRecord | None) -> None:
        open_items = (Y.sum(axis=1) > 1) & ~set_aside
        row: dict[str, object] = {
            "step": step,
            "event_id": None if event is None else event.id,
            "time": None if event is None else event.created_at,
            "kind": None if event is None else event.kind,
            "answered": int(answered.sum()),
            "open": int(open_items.sum()),
            "open_targets": int(is_open.sum()),
            "rejects": int((open_items & ~accepted).sum()),
            "expert_or_given": int(((Y.sum(axis=1) == 1) & ~set_aside).sum()),
        }
        if known is not None and true_labels is not None:  # the second test is for the type checker
            right = labels[known] == true_labels[known]
            row["dst_accuracy"] = float(right.mean())
            kept = accepted[known]
            row["accepted_accuracy"] = float(right[kept].mean()) if kept.any() else np.nan
        records.append(row)

    measure(0, None)
    for step, event in enumerate(events, start=1):
        item = event.position
        per_item.setdefault(item, []).append(event)
        derived = derive_item(per_item[item], original[item])
        answered[item] = derived.answered_by is not None
        set_aside[item] = derived.none_of_these or derived.conflict is not None
        if not np.array_equal(derived.candidates, Y[item]):
            Y[item] = derived.candidates
            rows = votes.rows_holding(item)
            if rows.size:
                is_open[rows] = open_targets(*label_sets(idx[rows], w[rows], Y))
            touched = np.union1d(dst.rows_holding(item), [item])
            labels[touched], accepted[touched], _ = transductive_decisions(Y, dst_idx, touched)
        measure(step, event)
    return pd.DataFrame.from_records(records)


def session_progress(bench: Workbench, n_events: int | None = None, *, actor: str | None) -> pd.DataFrame:
    """:func:`replay_progress` of a workbench's session over its first ``n_events`` events
    (all by default), read from the store.

    ``actor`` must be allowed the session's ``progress`` (:mod:`app.store.policies.sessions`:
    an annotator only on a session assigned to them); ``None`` is the command line.
    """
    with bench.session_factory() as s:
        authorize_session(s, actor, "progress", bench.session_id)
        events = session_events(s, bench.session_id)
    state = bench.state
    return replay_progress(
        X=state.X,
        original=np.asarray(state.original_candidates),
        targets=bench.targets,
        idx=bench.idx,
        w=bench.w,
        k=bench.config.k,
        events=events if n_events is None else events[:n_events],
        true_labels=None if state.true_labels is None else np.asarray(state.true_labels),
        # DST-PLL's neighbours of every instance: the session's persisted graph (the
        # weighting changes weights, not neighbours), so no search runs here.
        dst_idx=bench.graph.idx,
    )


def candidate_set_sizes(state: SessionState) -> pd.DataFrame:
    """How many items have 1, 2, ... labels in their set, originally and now.

    Returns
    -------
    pandas.DataFrame
        Index ``labels in the set`` (1 .. n_labels), columns ``original`` and ``now``.
    """
    m = state.n_labels
    return pd.DataFrame(
        {
            "original": np.bincount(np.asarray(state.original_candidates).sum(axis=1), minlength=m + 1)[1:],
            "now": np.bincount(np.asarray(state.candidates).sum(axis=1), minlength=m + 1)[1:],
        },
        index=pd.Index(range(1, m + 1), name="labels in the set"),
    )
