"""Labelling sessions in the store, and a session read as pure data.

:func:`load_state` reads a session, its dataset and its events and returns a
:class:`~app.store.derive.SessionState` of plain numpy arrays and tuples (the current sets come
from :func:`~app.store.derive.derive_state`). Writes run inside a SAVEPOINT of the caller's
session; the caller owns the outer transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.store.checks import check_choice, check_int, check_name
from app.store.derive import DerivedState, EventRecord, SessionConfig, SessionState, derive_state, readonly
from app.store.errors import InvalidRecord, RecordNotFound
from app.store.events import session_events
from app.store.features import FeatureMatrix, features_from_rows, load_feature_matrix
from app.store.item_columns import load_item_columns
from app.store.models import (
    CRITERIA,
    TARGET_SETS,
    WEIGHTINGS,
    Dataset,
    Instance,
    LabellingSession,
    decode_candidate_masks,
    utcnow,
)
from app.store.policies import authorize_session, visible_session_ids
from app.store.records import dataset_of, get_labelling_session
from engine.choices import DEFAULT_STRATEGY

__all__ = [
    "SessionSpec",
    "check_session_spec",
    "check_session_name_free",
    "create_labelling_session",
    "list_sessions",
    "session_configs",
    "get_session_by_name",
    "load_state",
]


@dataclass(frozen=True)
class SessionSpec:
    """The options of a labelling session, checked by :func:`check_session_spec`.

    Attributes
    ----------
    name : str
        Unique session name.
    k : int, default=10
        Neighbours per target: at least 1 and fewer than the dataset's items.
    weighting : {"uniform", "distance"}
    criterion : {"decision_change", "apl", "pl", "participation", "most_partial", "random"}
        Default :data:`engine.choices.DEFAULT_STRATEGY` (``"decision_change"``).
    target_set : {"all", "unlabelled"}
    """

    name: str
    k: int = 10
    weighting: str = "uniform"
    criterion: str = DEFAULT_STRATEGY
    target_set: str = "all"


def check_session_spec(
    spec: SessionSpec, *, n_instances: int | None = None, dataset_name: str | None = None
) -> SessionSpec:
    """``spec`` with every option checked (names stripped), without touching the database.

    Parameters
    ----------
    spec : SessionSpec
    n_instances : int, optional
        Items of the dataset the session will work on: ``k`` must be smaller (a k-NN vote
        leaves the target itself out). Checked before anything is stored, so a session that
        could never be opened is never written.
    dataset_name : str, optional
        For the message.

    Raises
    ------
    InvalidRecord
        Naming the option, the bad value and the valid choices or range.
    """
    if not isinstance(spec, SessionSpec):
        raise TypeError(f"spec must be a SessionSpec, got {type(spec).__name__}")
    name = check_name(spec.name, "name")
    k = check_int(spec.k, "k")
    if k < 1:
        raise InvalidRecord(f"k must be >= 1, got {k}")
    if n_instances is not None and k >= n_instances:
        of = f" of dataset {dataset_name!r}" if dataset_name is not None else ""
        raise InvalidRecord(
            f"k={k} must be smaller than the number of items{of} ({n_instances}): "
            f"each item's k nearest neighbours are other items (k <= {n_instances - 1})"
        )
    weighting = check_choice(spec.weighting, "weighting", WEIGHTINGS)
    criterion = check_choice(spec.criterion, "criterion", CRITERIA)
    target_set = check_choice(spec.target_set, "target_set", TARGET_SETS)
    return SessionSpec(name, k, weighting, criterion, target_set)


def check_session_name_free(session: Session, name: str) -> None:
    """Raise :class:`InvalidRecord` when a labelling session is already called ``name``."""
    if session.scalar(select(LabellingSession.id).where(LabellingSession.name == name)) is not None:
        raise InvalidRecord(f"name: a labelling session called {name!r} already exists")


def create_labelling_session(
    session: Session,
    *,
    dataset_id: int,
    name: str,
    k: int = 10,
    weighting: str = "uniform",
    criterion: str = DEFAULT_STRATEGY,
    target_set: str = "all",
    actor: str | None = None,
) -> LabellingSession:
    """Create a labelling session on a dataset.

    Parameters
    ----------
    dataset_id : int
        A published dataset (an import still running has none to offer).
    name, k, weighting, criterion, target_set
        As in :class:`SessionSpec`; ``k`` must be smaller than the dataset's number of items.
    actor : str or None
        In team mode (the store has users) an active admin; ``None`` is the command line.

    Returns
    -------
    LabellingSession
        Flushed (it has its ``id``).
    """
    spec = check_session_spec(SessionSpec(name, k, weighting, criterion, target_set))
    dataset_id = check_int(dataset_id, "dataset_id")
    dataset = session.get(Dataset, dataset_id)
    if dataset is None or not dataset.published:
        raise RecordNotFound(f"dataset_id {dataset_id} does not exist")
    authorize_session(session, actor, "create", what="session new")
    spec = check_session_spec(spec, n_instances=dataset.n_instances, dataset_name=dataset.name)
    check_session_name_free(session, spec.name)
    with session.begin_nested():
        now = utcnow()
        labelling = LabellingSession(
            name=spec.name,
            dataset_id=dataset_id,
            k=spec.k,
            weighting=spec.weighting,
            criterion=spec.criterion,
            target_set=spec.target_set,
            created_at=now,
            updated_at=now,
        )
        session.add(labelling)
        session.flush()
    return labelling


def list_sessions(session: Session, *, actor: str | None = None) -> list[LabellingSession]:
    """The labelling sessions ``actor`` may list (:mod:`app.store.policies.sessions`;
    ``None``, the command line, lists every one), oldest first."""
    visible = visible_session_ids(session, actor)
    query = select(LabellingSession).order_by(LabellingSession.id)
    if visible is not None:
        query = query.where(LabellingSession.id.in_(sorted(visible)))
    return list(session.scalars(query))


def session_configs(session: Session, *, actor: str | None = None) -> list[SessionConfig]:
    """The labelling sessions ``actor`` may list, with their dataset's name, oldest first, as
    plain data (``None``, the command line: every session)."""
    visible = visible_session_ids(session, actor)
    query = select(LabellingSession, Dataset).join(Dataset, Dataset.id == LabellingSession.dataset_id)
    if visible is not None:
        query = query.where(LabellingSession.id.in_(sorted(visible)))
    return [
        _session_config(labelling, dataset)
        for labelling, dataset in session.execute(query.order_by(LabellingSession.id))
    ]


def get_session_by_name(session: Session, name: str) -> LabellingSession:
    """The labelling session called ``name``; :class:`RecordNotFound` otherwise."""
    found = (
        session.scalar(select(LabellingSession).where(LabellingSession.name == name)) if "\x00" not in name else None
    )
    if found is None:
        known = session.scalars(select(LabellingSession.name).order_by(LabellingSession.id)).all()
        raise RecordNotFound(f"no labelling session called {name!r}; known sessions: {known}")
    return found


def load_state(
    session: Session,
    session_id: int,
    *,
    derive: Callable[[Sequence[EventRecord], np.ndarray], DerivedState] = derive_state,
) -> SessionState:
    """Read a labelling session, its dataset and its events into a :class:`SessionState`.

    The features come from the dataset's stored blocks (:func:`~app.store.features.
    load_feature_matrix`: a few blobs, not a row per item) or, when there are none, from the
    instances' rows; the instances' ids, external ids, candidate sets and true labels from the
    dataset's item columns (:func:`~app.store.item_columns.load_item_columns`, their token
    kept as ``item_columns_token``) or, when there are none, one ordered ``SELECT`` of the
    instances' rows; then one of the events, and ``derive`` (the events and the original sets -> the
    derived state; :func:`~app.store.derive.derive_state` unless a caller that keeps the
    derivation up to date itself, :class:`~app.store.derive.IncrementalDerivation`, passes
    its own, so that the log is read and derived once).
    """
    labelling = get_labelling_session(session, session_id)
    dataset = dataset_of(session, labelling)
    n, d, m = dataset.n_instances, dataset.n_features, len(dataset.label_names)

    columns = load_item_columns(session, dataset.id, n, m)
    features: np.ndarray | FeatureMatrix
    if columns is not None:
        instance_ids, external_ids = columns.instance_ids, columns.external_ids
        original, true_labels = columns.candidates, columns.true_labels
        # The graph key is kept with the columns: the features are read when first used.
        features = FeatureMatrix(session.get_bind(), dataset.id, (n, d), columns.token)
    else:
        instance_ids, external_ids, original, true_labels = _items_from_rows(session, dataset, n, m)
        X = load_feature_matrix(session, dataset.id, n, d)
        if X is None:
            X = features_from_rows(session, dataset.id, n, d)
        features = readonly(X) if X.flags.writeable else X

    derived = derive(session_events(session, labelling.id), original)
    return SessionState(
        config=_session_config(labelling, dataset),
        label_names=tuple(dataset.label_names),
        feature_names=tuple(dataset.feature_names) if dataset.feature_names is not None else None,
        layout=dataset.layout,
        external_ids=external_ids,
        instance_ids=readonly(instance_ids),
        features=features,
        true_labels=readonly(true_labels) if true_labels is not None else None,
        original_candidates=readonly(original),
        derived=derived,
        item_columns_token=None if columns is None else columns.token,
    )


def _items_from_rows(
    session: Session, dataset: Dataset, n: int, m: int
) -> tuple[np.ndarray, tuple[str, ...], np.ndarray, np.ndarray | None]:
    """The instances' ids, external ids, original sets and true labels (``None`` when no item
    has one) from their rows: one ordered ``SELECT``."""
    result = session.connection().execute(
        select(Instance.id, Instance.external_id, Instance.candidate_mask, Instance.true_label)
        .where(Instance.dataset_id == dataset.id)
        .order_by(Instance.position)
    )
    # The driver's plain tuples: the four columns are integers and strings, which SQLAlchemy
    # hands back as the driver gives them, and making a Row of each of 1M items took a
    # second of every open (docs/benchmarks.md, issue 32).
    try:
        rows = result.cursor.fetchall()
    finally:
        result.close()
    if len(rows) != n:  # pragma: no cover - create_dataset writes all rows or none
        raise InvalidRecord(f"dataset {dataset.name!r} holds {len(rows)} instances, expected {n}")
    ids_col, external_col, masks_col, truth_col = zip(*rows, strict=True) if rows else ((), (), (), ())
    instance_ids = np.fromiter(ids_col, dtype=np.int64, count=n)
    original = decode_candidate_masks(masks_col, m)
    true_labels = None
    if any(t is not None for t in truth_col):
        true_labels = np.array([-1 if t is None else t for t in truth_col], dtype=np.int64)
    return instance_ids, tuple(external_col), original, true_labels


def _session_config(labelling: LabellingSession, dataset: Dataset) -> SessionConfig:
    return SessionConfig(
        session_id=labelling.id,
        name=labelling.name,
        dataset_id=dataset.id,
        dataset_name=dataset.name,
        k=labelling.k,
        weighting=labelling.weighting,
        criterion=labelling.criterion,
        target_set=labelling.target_set,
        created_at=labelling.created_at,
        updated_at=labelling.updated_at,
        hotkeys=dict(labelling.hotkeys) if labelling.hotkeys is not None else None,
    )
