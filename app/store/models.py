"""The schema of a winnow store: datasets, instances, labelling sessions and answer events.

SQLAlchemy 2.0 typed models (:class:`DeclarativeBase`, ``Mapped[]`` columns). The schema is
created and upgraded only by the Alembic migrations in the ``migrations`` package; nothing here
calls ``create_all``. ``tests/store/test_migrations.py`` checks that the two never drift.

Storage choices
---------------
Features
    One ``LargeBinary`` per instance holding the row as little-endian float64 bytes
    (``d * 8`` bytes), so every instance is self-contained (one item can be shown without
    reading the whole matrix; the rows are written by the same bulk ``INSERT`` as the rest of
    the instance). Opening a session needs the whole matrix, and a blob per row makes a
    million small values to read (about 1 s at 1M items on a quiet machine, several under
    load), so each published dataset also keeps its matrix in a few blocks
    (:class:`FeatureBlock`, :mod:`app.store.features`): ``.npy`` bytes of up to 64 MiB each,
    well below SQLite's 1 GB limit on one value.
Candidate sets
    A bitmask string (:func:`encode_candidate_mask`): the hex digits of the row packed
    little-endian into bytes, so bit ``j`` of byte ``j // 8`` is label ``j`` (``{0, 3}`` is
    ``"09"``; 100 labels take 26 characters). All masks of a dataset decode at once with one
    ``bytes.fromhex`` and ``numpy.unpackbits`` -- a JSON list per row cost about 6 us of
    ``json.loads`` per row, most of the load time of a large dataset. Up to
    :data:`MAX_LABELS` labels.
Neighbour graphs
    One row per computed k-NN graph (:class:`NeighbourGraph`), keyed by a content hash of the
    features and the graph's parameters, so every process and every command reuses it; see
    :mod:`app.store.graphs`.
Answer events
    Append-only: a row is never updated or deleted (triggers added by the migration
    enforce it on SQLite and PostgreSQL). An undo is a new event pointing at the event it cancels; the current candidate
    sets are derived from the events (:func:`app.store.derive.derive_state`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    true,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

from app.dataset_rules import MAX_LABELS
from app.store.errors import StoreUnavailable
from engine.choices import CRITERIA, DEFAULT_STRATEGY, WEIGHTINGS

__all__ = [
    "Base",
    "Dataset",
    "Instance",
    "LabellingSession",
    "Annotator",
    "AnswerEvent",
    "NeighbourGraph",
    "User",
    "SessionAssignment",
    "SessionTeamSettings",
    "LabelSettingsChange",
    "AuditEvent",
    "ItemLease",
    "LeaseCursor",
    "LeaseOpenItem",
    "ROLES",
    "AUDIT_KINDS",
    "SIGN_IN_KINDS",
    "StoreSecret",
    "FeatureBlock",
    "SessionSnapshotPart",
    "Vote",
    "EVENT_KINDS",
    "LABELLED_KINDS",
    "WEIGHTINGS",
    "CRITERIA",
    "TARGET_SETS",
    "MEDIA_KINDS",
    "MEDIA_PATH_MAX",
    "LINK_MAX",
    "MEDIA_ROOT_MAX",
    "utcnow",
    "MAX_LABELS",
    "encode_candidate_mask",
    "encode_candidate_masks",
    "decode_candidate_masks",
]

#: Every kind of answer event, in the order the CHECK constraint lists them.
EVENT_KINDS: tuple[str, ...] = ("answer", "none_of_these", "other_label", "skip", "undo", "resolve")
#: Kinds that must carry a label index; every other kind must not.
LABELLED_KINDS: tuple[str, ...] = ("answer", "other_label", "resolve")
# WEIGHTINGS and CRITERIA are the engine's (engine.choices, which imports nothing): a session
# can only hold a choice the engine accepts.
TARGET_SETS: tuple[str, ...] = ("all", "unlabelled")
#: What an item's media file is (``instances.media_kind``).
MEDIA_KINDS: tuple[str, ...] = ("image", "audio")
#: Longest media path (relative to the media root), link and media root the schema holds.
MEDIA_PATH_MAX = 1024
LINK_MAX = 2048
MEDIA_ROOT_MAX = 4096
#: Roles of a user account (:mod:`app.store.users`).
ROLES: tuple[str, ...] = ("admin", "annotator", "reviewer")
#: Kinds of audit events: sign-ins and every change to an account, an assignment or a
#: session's settings (overlap, answer keys).
AUDIT_KINDS: tuple[str, ...] = (
    "sign_in",
    "sign_in_failed",
    "user_added",
    "role_changed",
    "user_disabled",
    "user_enabled",
    "password_changed",
    "assigned",
    "overlap_changed",
    "hotkeys_changed",
    "label_settings_changed",
)
#: The audit kinds that record a sign-in attempt (about no session).
SIGN_IN_KINDS: tuple[str, ...] = ("sign_in", "sign_in_failed")

# Deterministic constraint names: Alembic batch mode on SQLite needs them to alter tables.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


# MAX_LABELS (app.dataset_rules): most labels a dataset may have; the candidate mask column
# holds 2 * MAX_LABELS / 8 characters.


def encode_candidate_mask(row: np.ndarray) -> str:
    """The stored form of one candidate set: hex of ``numpy.packbits(row, bitorder="little")``.

    Parameters
    ----------
    row : array of shape (n_labels,), bool
    """
    return np.packbits(np.asarray(row, dtype=bool), bitorder="little").tobytes().hex()


def encode_candidate_masks(Y: np.ndarray) -> list[str]:
    """:func:`encode_candidate_mask` of every row of ``Y`` (vectorised)."""
    Y = np.asarray(Y, dtype=bool)
    packed = np.packbits(Y, axis=1, bitorder="little")
    width = packed.shape[1] * 2
    text = packed.tobytes().hex()
    return [text[i : i + width] for i in range(0, len(text), width)]


def decode_candidate_masks(masks: Sequence[str], n_labels: int) -> np.ndarray:
    """Decode stored candidate masks (all of the same width) into a bool array.

    Returns
    -------
    array of shape (len(masks), n_labels), bool
    """
    n_bytes = (n_labels + 7) // 8
    if not masks:
        return np.zeros((0, n_labels), dtype=bool)
    raw = np.frombuffer(bytes.fromhex("".join(masks)), dtype=np.uint8)
    if raw.size != len(masks) * n_bytes:
        raise StoreUnavailable(f"stored candidate masks do not all hold {n_labels} labels ({n_bytes} bytes)")
    bits = np.unpackbits(raw.reshape(len(masks), n_bytes), axis=1, bitorder="little")
    return bits[:, :n_labels].astype(bool)


def utcnow() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


def _in_list(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored as UTC and always read back timezone-aware.

    SQLite keeps no time zone, so values are normalised to UTC on the way in and tagged as
    UTC on the way out; PostgreSQL stores ``timestamp with time zone`` natively.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise TypeError(f"naive datetime {value!r}: store timezone-aware UTC timestamps")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)

    if TYPE_CHECKING:
        # Every model is mapped to one Table (never a join or a select), which the Core bulk
        # inserts and deletes of the store pass to insert()/delete().
        __table__: ClassVar[Table]


class Dataset(Base):
    """A feature matrix with candidate label sets, imported once and never edited."""

    __tablename__ = "datasets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    #: Ordered label names; label index ``j`` is ``label_names[j]``.
    label_names: Mapped[list[str]] = mapped_column(JSON)
    n_instances: Mapped[int] = mapped_column(Integer)
    n_features: Mapped[int] = mapped_column(Integer)
    feature_names: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    #: How to draw a feature row, e.g. ``"image:8x8"``; ``None`` for plain tables.
    layout: Mapped[str | None] = mapped_column(String(100), nullable=True)
    #: Absolute folder the items' ``media_path`` are relative to; ``None`` without media.
    media_root: Mapped[str | None] = mapped_column(String(MEDIA_ROOT_MAX), nullable=True)
    #: The featurizer that computed the features (``None``: the user gave numbers), as
    #: :class:`app.io.featurizers.FeaturizerRecord` keeps it: name, JSON parameters and a
    #: pickle-free ``.npz`` state, so that items imported later get the same transform.
    featurizer: Mapped[str | None] = mapped_column(String(100), nullable=True)
    featurizer_params: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    featurizer_state: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    #: For a dataset read from a Label Studio export: ``{"from_name", "to_name", "data_key"}``
    #: of the project's classification control and the content it labels, so that tasks
    #: written back fit the same project.
    label_studio_control: Mapped[dict[str, str] | None] = mapped_column(JSON, nullable=True)
    #: ``False`` while an import is still writing the instances in batches
    #: (:func:`app.store.staging.import_dataset`): every read ignores the dataset until the
    #: import's short final transaction publishes it.
    published: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    #: While unpublished: who is importing (``"host:pid"``) and when it last wrote a batch, so
    #: that an import whose process died can be told from one still running and removed.
    staged_by: Mapped[str | None] = mapped_column(String(200), nullable=True)
    staged_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)

    instances: Mapped[list[Instance]] = relationship(
        back_populates="dataset", order_by="Instance.position", lazy="raise_on_sql"
    )

    __table_args__ = (
        CheckConstraint("n_features >= 1", name="n_features_positive"),
        CheckConstraint("n_instances >= 0", name="n_instances_nonnegative"),
    )

    @property
    def n_labels(self) -> int:
        return len(self.label_names)

    def __repr__(self) -> str:
        return (
            f"Dataset(id={self.id!r}, name={self.name!r}, n_instances={self.n_instances!r}, "
            f"n_features={self.n_features!r}, n_labels={len(self.label_names or [])})"
        )


class Instance(Base):
    """One row of a dataset: its features and its original candidate set."""

    __tablename__ = "instances"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id"))
    #: Row number in the dataset, ``0 .. n_instances - 1``.
    position: Mapped[int] = mapped_column(Integer)
    external_id: Mapped[str] = mapped_column(String(200))
    #: The feature row as little-endian float64 bytes (``n_features * 8`` bytes).
    features: Mapped[bytes] = mapped_column(LargeBinary)
    #: The original candidate set as a hex bitmask (:func:`encode_candidate_mask`), never empty.
    candidate_mask: Mapped[str] = mapped_column(String(2 * MAX_LABELS // 8))
    #: The true label index, kept only for simulations; ``None`` when unknown.
    true_label: Mapped[int | None] = mapped_column(Integer, nullable=True)
    #: The item's content, what a person looks at (all ``None`` for a plain feature row):
    #: a text, a media file (path relative to the dataset's ``media_root``, ``/``-separated,
    #: with its kind) and an http(s) link to the item elsewhere.
    text: Mapped[str | None] = mapped_column(Text, nullable=True)
    media_path: Mapped[str | None] = mapped_column(String(MEDIA_PATH_MAX), nullable=True)
    media_kind: Mapped[str | None] = mapped_column(
        String(10), CheckConstraint(_in_list("media_kind", MEDIA_KINDS), name="media_kind"), nullable=True
    )
    link: Mapped[str | None] = mapped_column(String(LINK_MAX), nullable=True)

    dataset: Mapped[Dataset] = relationship(back_populates="instances")

    __table_args__ = (
        UniqueConstraint("dataset_id", "position"),
        UniqueConstraint("dataset_id", "external_id"),
        CheckConstraint("position >= 0", name="position_nonnegative"),
        CheckConstraint("true_label IS NULL OR true_label >= 0", name="true_label_nonnegative"),
    )

    def candidate_set(self, n_labels: int) -> np.ndarray:
        """The original candidate set as a bool array of shape (n_labels,)."""
        return decode_candidate_masks([self.candidate_mask], n_labels)[0]

    def __repr__(self) -> str:
        return (
            f"Instance(id={self.id!r}, dataset_id={self.dataset_id!r}, "
            f"position={self.position!r}, external_id={self.external_id!r})"
        )


class LabellingSession(Base):
    """A named labelling campaign on one dataset, with its query configuration."""

    __tablename__ = "labelling_sessions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id"), index=True)
    k: Mapped[int] = mapped_column(Integer, default=10)
    weighting: Mapped[str] = mapped_column(String(20), default="uniform")
    criterion: Mapped[str] = mapped_column(String(20), default=DEFAULT_STRATEGY)
    target_set: Mapped[str] = mapped_column(String(20), default="all")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    #: Bumped by every recorded event, so sessions can be listed by recent activity.
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    #: Keyboard keys, label name -> key (:mod:`app.store.hotkeys`); ``None``: the default keys.
    hotkeys: Mapped[dict[str, str] | None] = mapped_column(JSON, nullable=True)

    dataset: Mapped[Dataset] = relationship()

    __table_args__ = (
        CheckConstraint("k >= 1", name="k_positive"),
        CheckConstraint(_in_list("weighting", WEIGHTINGS), name="weighting"),
        CheckConstraint(_in_list("criterion", CRITERIA), name="criterion"),
        CheckConstraint(_in_list("target_set", TARGET_SETS), name="target_set"),
    )

    def __repr__(self) -> str:
        return (
            f"LabellingSession(id={self.id!r}, name={self.name!r}, "
            f"dataset_id={self.dataset_id!r}, k={self.k!r}, weighting={self.weighting!r}, "
            f"criterion={self.criterion!r}, target_set={self.target_set!r})"
        )


class Annotator(Base):
    """A person (or a simulated oracle) who answers queries."""

    __tablename__ = "annotators"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)

    def __repr__(self) -> str:
        return f"Annotator(id={self.id!r}, name={self.name!r})"


class AnswerEvent(Base):
    """One thing an annotator did to one instance in one session. Append-only.

    ``kind`` is one of :data:`EVENT_KINDS`. ``answer``, ``other_label`` and ``resolve`` carry a
    ``label`` index; the others do not. An ``undo`` names the event it cancels in
    ``undoes_event_id`` (unique: an event is undone at most once) and has the same instance.
    """

    __tablename__ = "answer_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_id: Mapped[int] = mapped_column(ForeignKey("labelling_sessions.id"))
    instance_id: Mapped[int] = mapped_column(ForeignKey("instances.id"), index=True)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotators.id"))
    kind: Mapped[str] = mapped_column(String(20))
    label: Mapped[int | None] = mapped_column(Integer, nullable=True)
    undoes_event_id: Mapped[int | None] = mapped_column(ForeignKey("answer_events.id"), nullable=True, unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    #: Set by a client that may retry: the store records one event per (session, key).
    idempotency_key: Mapped[str | None] = mapped_column(String(128), nullable=True)

    session: Mapped[LabellingSession] = relationship()
    instance: Mapped[Instance] = relationship()
    annotator: Mapped[Annotator] = relationship()

    __table_args__ = (
        CheckConstraint(_in_list("kind", EVENT_KINDS), name="kind"),
        CheckConstraint(
            f"({_in_list('kind', LABELLED_KINDS)} AND label IS NOT NULL AND label >= 0)"
            f" OR (NOT {_in_list('kind', LABELLED_KINDS)} AND label IS NULL)",
            name="label_presence",
        ),
        CheckConstraint(
            "(kind = 'undo' AND undoes_event_id IS NOT NULL) OR (kind <> 'undo' AND undoes_event_id IS NULL)",
            name="undo_target",
        ),
        Index("ix_answer_events_session_annotator", "session_id", "annotator_id", "id"),
        Index("ix_answer_events_session_id_id", "session_id", "id"),
        Index("uq_answer_events_session_idempotency_key", "session_id", "idempotency_key", unique=True),
        # The events of a few items of a session (leases read only the items they consider).
        Index("ix_answer_events_session_instance", "session_id", "instance_id", "id"),
    )

    def __repr__(self) -> str:
        return (
            f"AnswerEvent(id={self.id!r}, session_id={self.session_id!r}, "
            f"instance_id={self.instance_id!r}, annotator_id={self.annotator_id!r}, "
            f"kind={self.kind!r}, label={self.label!r}, undoes_event_id={self.undoes_event_id!r})"
        )


class NeighbourGraph(Base):
    """A persisted k-NN graph of a dataset: computed once, read by every process.

    ``content_hash`` (hex SHA-256) covers the feature matrix, ``k``, the weighting and the
    search algorithm with its parameters: a graph is found again exactly when the same
    features would give it. ``idx`` holds the neighbour rows as little-endian int32 bytes of
    shape ``(n_targets, k)``; ``w`` the vote weights as little-endian float64 bytes, or NULL
    when every weight is 1 (uniform weighting: nothing worth storing).
    """

    __tablename__ = "neighbour_graphs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id"), index=True)
    content_hash: Mapped[str] = mapped_column(String(64), unique=True)
    k: Mapped[int] = mapped_column(Integer)
    weighting: Mapped[str] = mapped_column(String(20))
    #: ``"exact"`` or ``"approx"`` (HNSW, with its parameters in the hash).
    algorithm: Mapped[str] = mapped_column(String(20))
    n_targets: Mapped[int] = mapped_column(Integer)
    idx: Mapped[bytes] = mapped_column(LargeBinary)
    w: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    #: Seconds the build took, so a reader can tell what reusing it saved.
    build_seconds: Mapped[float] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (
        CheckConstraint("k >= 1", name="k_positive"),
        CheckConstraint("n_targets >= 0", name="n_targets_nonnegative"),
    )

    def __repr__(self) -> str:
        return (
            f"NeighbourGraph(id={self.id!r}, dataset_id={self.dataset_id!r}, k={self.k!r}, "
            f"weighting={self.weighting!r}, algorithm={self.algorithm!r}, n_targets={self.n_targets!r})"
        )


class User(Base):
    """An account of the team: a name (immutable, the same as its annotator's), a role, an
    active flag and an argon2 password hash (never the password itself)."""

    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    role: Mapped[str] = mapped_column(String(20))
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    #: argon2id hash in PHC format; ``None`` for an account that signs in only through OIDC.
    password_hash: Mapped[str | None] = mapped_column(String(255), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (CheckConstraint(_in_list("role", ROLES), name="role"),)

    def __repr__(self) -> str:  # no hash in reprs: they end up in logs
        return f"User(id={self.id!r}, name={self.name!r}, role={self.role!r}, active={self.active!r})"


class SessionTeamSettings(Base):
    """A labelling session's team settings (no row: the defaults).

    Kept beside ``labelling_sessions`` rather than in it: adding a CHECKed column to that table
    would make SQLite's downgrade rebuild a table that the event log references.
    """

    __tablename__ = "session_team_settings"

    session_id: Mapped[int] = mapped_column(ForeignKey("labelling_sessions.id"), primary_key=True)
    #: How many annotators must answer each item (1 splits the work; 2+ measures agreement).
    overlap: Mapped[int] = mapped_column(Integer, default=1)

    __table_args__ = (CheckConstraint("overlap >= 1", name="overlap_positive"),)


class LabelSettingsChange(Base):
    """A labelling session's label settings from the moment they were set: one row per change,
    never updated (no row: the defaults of :class:`app.store.labels.LabelSettings`).

    The settings in force are the latest row. A lot of model labels is frozen under the
    settings of the latest row recorded before the first verdict that could test it
    (:mod:`engine.labelling_loop`): ``after_event_id`` is the largest event id when the change
    was made, so a change applies to the lots frozen after it and never to one already tested.
    The bounds are those :class:`~app.store.labels.LabelSettings` checks, kept by CHECK
    constraints too.
    """

    __tablename__ = "label_settings_changes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_id: Mapped[int] = mapped_column(ForeignKey("labelling_sessions.id"), index=True)
    #: The largest event id of the store when the change was made.
    after_event_id: Mapped[int] = mapped_column(Integer)
    #: Largest error accepted in model labels (a rate strictly between 0 and 0.5).
    max_error: Mapped[float] = mapped_column(Float)
    #: Probability with which the stated error must hold, in [0.5, 1).
    confidence: Mapped[float] = mapped_column(Float)
    #: Share of the served items that are audits, in [0, 0.5].
    audit_share: Mapped[float] = mapped_column(Float)
    #: What a stated error means: "confidence" or "average" (engine.promises.PROMISES).
    promise: Mapped[str] = mapped_column(String(20))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (
        CheckConstraint("max_error > 0 AND max_error < 0.5", name="max_error_range"),
        CheckConstraint("confidence >= 0.5 AND confidence < 1", name="confidence_range"),
        CheckConstraint("audit_share >= 0 AND audit_share <= 0.5", name="audit_share_range"),
        CheckConstraint("promise IN ('confidence', 'average')", name="promise_known"),
    )


class SessionAssignment(Base):
    """A user may answer in a labelling session."""

    __tablename__ = "session_assignments"

    session_id: Mapped[int] = mapped_column(ForeignKey("labelling_sessions.id"), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), primary_key=True, index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class AuditEvent(Base):
    """One sign-in (or failed attempt) or one change to an account or an assignment.

    ``user_name`` is the account concerned (kept as text: a failed sign-in may name no
    account); ``actor`` who did it (``None``: the command line, run by whoever holds the
    database). Never holds a password.
    """

    __tablename__ = "audit_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    kind: Mapped[str] = mapped_column(String(30))
    user_name: Mapped[str] = mapped_column(String(200))
    actor: Mapped[str | None] = mapped_column(String(200), nullable=True)
    session_id: Mapped[int | None] = mapped_column(ForeignKey("labelling_sessions.id"), nullable=True)
    detail: Mapped[str | None] = mapped_column(String(500), nullable=True)

    __table_args__ = (
        CheckConstraint(_in_list("kind", AUDIT_KINDS), name="kind"),
        Index("ix_audit_events_user_kind_created", "user_name", "kind", "created_at"),
    )


class ItemLease(Base):
    """An item reserved for one user of a session until ``expires_at``.

    One lease per (session, user); ``slot`` < the session's overlap numbers the annotators an
    item is reserved for, and (session, instance, slot) is unique, so two writers cannot take
    the same place on an item even outside the store's write lock.
    """

    __tablename__ = "item_leases"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_id: Mapped[int] = mapped_column(ForeignKey("labelling_sessions.id"))
    instance_id: Mapped[int] = mapped_column(ForeignKey("instances.id"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    slot: Mapped[int] = mapped_column(Integer)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())

    __table_args__ = (
        UniqueConstraint("session_id", "user_id"),
        UniqueConstraint("session_id", "instance_id", "slot"),
        CheckConstraint("slot >= 0", name="slot_nonnegative"),
    )


class LeaseOpenItem(Base):
    """An item of a session that has an annotator's verdict, is not settled, and so may want
    more annotators (overlap >= 2): a digest of the events that :func:`app.store.next_item`
    keeps up to date itself (:class:`LeaseCursor`), so that it finds these items without
    reading the event log.

    ``annotators`` counts the annotators with an active verdict on the item (>= 1); an item
    that is resolved, in conflict or without a verdict has no row.
    """

    __tablename__ = "lease_open_items"

    session_id: Mapped[int] = mapped_column(ForeignKey("labelling_sessions.id"), primary_key=True)
    instance_id: Mapped[int] = mapped_column(ForeignKey("instances.id"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    annotators: Mapped[int] = mapped_column(Integer)

    __table_args__ = (
        CheckConstraint("annotators >= 1", name="annotators_positive"),
        Index("ix_lease_open_items_session_position_annotators", "session_id", "position", "annotators"),
    )


class LeaseCursor(Base):
    """The last event of a session that :class:`LeaseOpenItem` takes into account."""

    __tablename__ = "lease_cursors"

    session_id: Mapped[int] = mapped_column(ForeignKey("labelling_sessions.id"), primary_key=True)
    last_event_id: Mapped[int] = mapped_column(Integer)


class SignInSession(Base):
    """A browser's signed-in session (team mode): the proof of identity its cookie carries.

    The browser holds a random token in an ``HttpOnly`` cookie; the store keeps only its
    SHA-256 (``token_hash``), so a copy of the database signs nobody in. A row is valid until
    ``expires_at``, until it is ended (``ended_at``: sign-out) or while its user is disabled.
    """

    __tablename__ = "sign_in_sessions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)

    __table_args__ = (CheckConstraint("length(token_hash) = 64", name="token_hash_sha256"),)

    def __repr__(self) -> str:  # never the hash in reprs: they end up in logs
        return f"SignInSession(id={self.id!r}, user_id={self.user_id!r}, expires_at={self.expires_at!r})"


class SessionSnapshotPart(Base):
    """One array of a session's working-state snapshot (:mod:`app.store.snapshots`).

    A snapshot is what a session at work derived from its event log and its neighbour graph
    (the ranker's arrays, the candidate sets they were computed from, the suspect scores),
    saved so that the next process starts from it instead of scoring afresh. It is a cache,
    never the only copy of anything: the event log stays the truth, and a reader rebuilds
    whatever does not match. Every part of one snapshot carries the same ``token`` (written
    in one transaction), format version, identity (the hash of the graph and the session's
    ranking parameters) and last event id; ``digest`` is a checksum of ``data`` (the ``.npy``
    bytes of one array, no pickle): :func:`app.store.snapshots.part_digest`, or the SHA-256 of
    parts written before it.
    """

    __tablename__ = "session_snapshot_parts"

    session_id: Mapped[int] = mapped_column(ForeignKey("labelling_sessions.id"), primary_key=True)
    name: Mapped[str] = mapped_column(String(40), primary_key=True)
    token: Mapped[str] = mapped_column(String(32))
    format_version: Mapped[int] = mapped_column(Integer)
    identity: Mapped[str] = mapped_column(String(64))
    last_event_id: Mapped[int] = mapped_column(Integer)
    digest: Mapped[str] = mapped_column(String(64))
    data: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    def __repr__(self) -> str:
        return f"SessionSnapshotPart(session_id={self.session_id!r}, name={self.name!r})"


class ItemColumn(Base):
    """One column of a dataset's items in one piece, or a graph key hashed from its features
    (:mod:`app.store.item_columns`).

    Reading the ``instances`` rows of 1M items (ids, external ids, candidate masks, true
    labels) took seconds of every open; these rows hold the same values as one blob each. A
    cache of the instances: every column of one write carries the same random ``token``, and
    any write of instances deletes them with the feature blocks (the rows stay the truth).
    ``digest`` is the checksum of ``data`` (:func:`app.store.snapshots.part_digest`).
    """

    __tablename__ = "item_columns"

    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id"), primary_key=True)
    name: Mapped[str] = mapped_column(String(80), primary_key=True)
    token: Mapped[str] = mapped_column(String(32))
    digest: Mapped[str] = mapped_column(String(64))
    data: Mapped[bytes] = mapped_column(LargeBinary)

    def __repr__(self) -> str:
        return f"ItemColumn(dataset_id={self.dataset_id!r}, name={self.name!r})"


class FeatureBlock(Base):
    """Rows ``start .. start + n_rows - 1`` of a dataset's feature matrix, as one blob.

    ``data`` is the ``.npy`` serialisation (format 1.0 or 2.0, no pickle) of a little-endian
    float64 array of shape ``(n_rows, n_features)``: the same numbers as those rows'
    ``instances.features``, read in one piece (:mod:`app.store.features`). The blocks of a
    dataset cover ``0 .. n_instances - 1`` without gaps; any write of instances deletes them
    and publishing the dataset writes them again.
    """

    __tablename__ = "feature_blocks"

    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id"), primary_key=True)
    start: Mapped[int] = mapped_column(Integer, primary_key=True)
    n_rows: Mapped[int] = mapped_column(Integer)
    data: Mapped[bytes] = mapped_column(LargeBinary)

    __table_args__ = (
        CheckConstraint("start >= 0", name="start_nonnegative"),
        CheckConstraint("n_rows >= 1", name="n_rows_positive"),
    )

    def __repr__(self) -> str:
        return f"FeatureBlock(dataset_id={self.dataset_id!r}, start={self.start!r}, n_rows={self.n_rows!r})"


class StoreSecret(Base):
    """A random key the store keeps for itself, by name (e.g. the key that hashes a typed
    sign-in name that is no account: :func:`app.store.users.unknown_name_tag`).

    Never shown, exported or logged; whoever reads it holds the database anyway.
    """

    __tablename__ = "store_secrets"

    name: Mapped[str] = mapped_column(String(50), primary_key=True)
    value: Mapped[bytes] = mapped_column(LargeBinary)


class Vote(Base):
    """One crowd vote an item received before winnow: who voted (``annotator``, a name as the
    source gives it, not a winnow user), for which label, when, and from which source.

    Written with the dataset's instances, in the same import (:mod:`app.store.votes`), and
    never changed afterwards; the item's original candidate set was made from its votes.
    """

    __tablename__ = "votes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    instance_id: Mapped[int] = mapped_column(ForeignKey("instances.id"), index=True)
    annotator: Mapped[str] = mapped_column(String(200))
    #: The label index (into the dataset's ``label_names``).
    label: Mapped[int] = mapped_column(Integer)
    #: When the vote was cast; ``None`` when the source does not say.
    voted_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    #: Where the vote came from, e.g. the votes file's name.
    source: Mapped[str] = mapped_column(String(200))

    __table_args__ = (CheckConstraint("label >= 0", name="label_nonnegative"),)

    def __repr__(self) -> str:
        return (
            f"Vote(id={self.id!r}, instance_id={self.instance_id!r}, "
            f"annotator={self.annotator!r}, label={self.label!r})"
        )
