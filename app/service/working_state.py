"""A session's working state, kept between processes: read at open, brought up to date, saved.

One seam of :class:`app.service.workbench.Workbench`. What a session at work derives from its
event log and its dataset's neighbour graph (the criterion's ranker with its arrays, the NL/APL
kept beside it, the suspect scores) took seconds at 1M items, and every command paid it again.
:func:`open_ranking` reads the session's last snapshot (:mod:`app.store.snapshots`) instead,
checks it, and brings it up to date with the candidate sets the event log gives now.

Why a snapshot can be trusted, and when it is not:

* The ranker, the NL/APL and the suspect scores are functions of the graph, the session's
  ranking parameters and the current candidate sets alone (the rankers' incremental updates
  equal a full recomputation; ``tests/engine`` checks it). The snapshot holds the candidate
  sets it was computed from (``ranker.Y``); the items whose set differs from the event log's
  now (answers, skips, undos, whoever wrote them) are applied as one incremental update. So
  a snapshot brought up to date equals a derivation from the whole log, which stays the
  truth: the log is read and derived at every open as before.
* Its **identity** hashes the snapshot format, the graph's content key (features, ``k``,
  weighting, search), the session, its dataset, criterion, target set and shape: a snapshot
  of another graph, dataset, criterion or format does not match and is rebuilt.
* DST-PLL's transductive label and margin of every item (:class:`~app.service.model_view.
  ModelDecisions`, what freezing a lot reads) are functions of the graph and the sets
  ``ranker.Y`` alone too; the model view brings them up to date for the items the changed
  sets touch, and any process that had to fit the classifier to get them skips it.
* One **ahead of the log** (its last event id above the log's: a store restored from an
  older copy) is rebuilt.
* A **corrupt** one (a part whose SHA-256 does not match, parts of two writes, an array of
  the wrong shape or kind) is rebuilt (:func:`app.store.load_session_snapshot`,
  :meth:`RankingState.restore`).

A rebuilt snapshot is saved at once; a trusted one is saved again when more than
:data:`RESAVE_AFTER` items differ from it, so the update a process applies at open stays
small. The served order and the audit draws are never part of it (they are the audits'
own, computed after the ranking).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, replace

import numpy as np
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from app.service import suspects
from app.service.graphs import GraphResult
from app.service.model_view import ModelDecisions
from app.service.ranking_state import RankingState
from app.service.tasks import ProgressTracker
from app.store import (
    SessionState,
    SnapshotHeader,
    StoreUnavailable,
    load_session_snapshot,
    readonly,
    save_session_snapshot,
    write_transaction,
)
from engine.exceptions import InvalidInput

__all__ = ["SNAPSHOT_FORMAT", "RESAVE_AFTER", "OpenedRanking", "open_ranking", "snapshot_identity"]

logger = logging.getLogger(__name__)

#: Version of what a snapshot holds and how; a snapshot of another version is rebuilt.
#: 2: DST-PLL's decisions (MODEL_LABELS_PART, MODEL_MARGINS_PART) are kept too.
SNAPSHOT_FORMAT = 2

#: A trusted snapshot is saved again at open when more items than this differ from it.
RESAVE_AFTER = 1000

#: The part holding the suspect scores (the others are :meth:`RankingState.state_arrays`).
SUSPECT_PART = "suspect_scores"

#: The parts holding DST-PLL's transductive labels and margins for the sets ``ranker.Y``.
MODEL_LABELS_PART = "model.labels"
MODEL_MARGINS_PART = "model.margins"


@dataclass(frozen=True)
class OpenedRanking:
    """The ranking of a session just opened, and how it was made.

    Attributes
    ----------
    ranking : RankingState
        Up to date with the candidate sets the open was given.
    source : {"snapshot", "built"}
        Read back from the session's snapshot, or scored afresh.
    applied : int
        Items whose set differed from the snapshot's (0 when built).
    saved : bool
        Whether a new snapshot was saved by this open.
    decisions : ModelDecisions or None
        DST-PLL's decisions of every item for some candidate sets (the snapshot's, or the
        current ones when this open saved them), for the model view to bring up to date;
        ``None`` without a snapshot.
    """

    ranking: RankingState
    source: str
    applied: int
    saved: bool
    decisions: ModelDecisions | None = None


def snapshot_identity(state: SessionState, graph: GraphResult) -> str:
    """The hex SHA-256 that a snapshot of this session on this graph carries."""
    cfg = state.config
    fields = (
        SNAPSHOT_FORMAT,
        graph.key,
        cfg.session_id,
        cfg.dataset_id,
        cfg.criterion,
        cfg.target_set,
        state.n_instances,
        state.n_labels,
    )
    return hashlib.sha256("|".join(map(str, fields)).encode()).hexdigest()


def open_ranking(
    session_factory: sessionmaker[Session],
    state: SessionState,
    graph: GraphResult,
    last_event_id: int,
    *,
    report: ProgressTracker | None = None,
    use_snapshot: bool = True,
) -> OpenedRanking:
    """The session's ranking for ``state`` (derived from the log up to ``last_event_id``):
    from its snapshot when one matches, scored afresh otherwise (and saved).

    ``use_snapshot=False`` neither reads nor writes a snapshot (the derivation from scratch
    the tests compare with). Also computes the suspect scores of ``state`` (every open needed
    them for the served order) so that they are kept with the ranking.
    """
    cfg = state.config
    candidates = np.asarray(state.candidates)
    identity = snapshot_identity(state, graph)
    ranking: RankingState | None = None
    decisions: ModelDecisions | None = None
    applied = 0
    if use_snapshot:
        ranking, applied, decisions = _restored(session_factory, state, graph, identity, last_event_id)
    source = "snapshot" if ranking is not None else "built"
    if ranking is None:
        ranking = RankingState.build(cfg, graph, state.original_candidates, np.array(candidates))
        applied = 0
    # NL/APL (when the ranker does not keep them) and the suspect scores, as every open needs.
    ranking.label_sets(candidates)
    suspects.session_suspects(graph, state)
    saved = False
    if use_snapshot and (source == "built" or applied > RESAVE_AFTER or decisions is None):
        header = SnapshotHeader(SNAPSHOT_FORMAT, identity, last_event_id)
        saved, decisions = _save(session_factory, state, graph, ranking, header, decisions)
    if report is not None:
        n_targets = int(ranking.targets.size)
        report("score", n_targets, n_targets)
    return OpenedRanking(ranking, source, applied, saved, decisions)


def _restored(
    session_factory: sessionmaker[Session], state: SessionState, graph: GraphResult, identity: str, last_event_id: int
) -> tuple[RankingState | None, int, ModelDecisions | None]:
    """The snapshot's ranking brought up to date with ``state``'s sets, how many items
    differed, and the snapshot's DST-PLL decisions (for its own sets); ``(None, 0, None)``
    when there is no usable snapshot."""
    with session_factory() as s:
        stored = load_session_snapshot(s, state.config.session_id)
    if stored is None:
        return None, 0, None
    header = stored.header
    if header.format_version != SNAPSHOT_FORMAT or header.identity != identity or header.last_event_id > last_event_id:
        logger.info("session %s: snapshot does not match (%s); rebuilt", state.config.session_id, header)
        return None, 0, None
    arrays = stored.arrays
    candidates = np.asarray(state.candidates)
    scores = arrays.pop(SUSPECT_PART, None)
    model_labels, model_margins = arrays.pop(MODEL_LABELS_PART, None), arrays.pop(MODEL_MARGINS_PART, None)
    if "ranker.Y" not in arrays:
        return None, 0, None
    # The snapshot's own sets, for the suspect scores (the ranker takes and patches the array).
    then = readonly(np.array(arrays["ranker.Y"]))
    try:
        ranking = RankingState.restore(state.config, graph, state.original_candidates, arrays, candidates)
    except (InvalidInput, ValueError) as error:
        logger.info("session %s: snapshot refused (%s); rebuilt", state.config.session_id, error)
        return None, 0, None
    decisions = None
    if model_labels is not None and model_margins is not None:
        decisions = ModelDecisions(then, model_labels, model_margins)
        if not decisions.fits(state.n_instances, state.n_labels):
            logger.info(
                "session %s: the snapshot's model decisions are refused; decided afresh", state.config.session_id
            )
            decisions = None
    changed = np.flatnonzero((then != candidates).any(axis=1))
    if scores is not None:
        try:
            suspects.remember_scores(graph, replace(state, derived=replace(state.derived, candidates=then)), scores)
        except ValueError:
            pass  # scored afresh by the first session_suspects
    return ranking, int(changed.size), decisions


def _save(
    session_factory: sessionmaker[Session],
    state: SessionState,
    graph: GraphResult,
    ranking: RankingState,
    header: SnapshotHeader,
    decisions: ModelDecisions | None,
) -> tuple[bool, ModelDecisions]:
    """Save the snapshot, with DST-PLL's decisions for the ranker's sets (brought up to date
    from ``decisions``, or decided afresh); returns whether it was saved, and the decisions.

    A store that refuses it (read-only, busy) costs the next open time only.
    """
    arrays = ranking.state_arrays()
    sets = arrays["ranker.Y"]
    decisions = ModelDecisions.decide(sets, graph.idx) if decisions is None else decisions.brought_to(sets, graph.idx)
    arrays[MODEL_LABELS_PART], arrays[MODEL_MARGINS_PART] = decisions.labels, decisions.margins
    scores = suspects.kept_scores(graph, state)
    if scores is not None:
        arrays[SUSPECT_PART] = scores
    try:
        write_transaction(session_factory, lambda s: save_session_snapshot(s, state.config.session_id, header, arrays))
    except (SQLAlchemyError, StoreUnavailable) as error:
        logger.warning("session %s: snapshot not saved (%s)", state.config.session_id, error)
        return False, decisions
    return True, decisions
