"""winnow's store: the schema (SQLAlchemy 2.0 models, Alembic migrations) and every write.

Open a store with :func:`open_store` (runs the migrations, one engine per process), write in
:func:`write_transaction` (or ``with Session.begin():``), read a labelling session as pure data
with :func:`load_state`. SQL lives only in this package.

Modules
-------
``db``        engines, migrations, write transactions
``models``    the schema
``errors``    InvalidRecord ⊃ RecordNotFound, StoreUnavailable ⊃ StoreBusy (all ``InvalidInput``)
``checks``    argument checks shared by the writes
``datasets``  check_dataset, create_dataset (validated, all rows or none), look-ups
``staging``   import_dataset: stage instances in batches, publish dataset + session at once
``sessions``  labelling sessions, load_state
``events``    record_event and the event log
``records``   look-ups shared by the modules above
``derive``    the pure event -> state derivation and the derived dataclasses
``hotkeys``   a session's keyboard keys: defaults and the checks before they are stored
``graphs``    persisted k-NN graphs, found by content hash
``users``     accounts, roles, assignments, sign-in, the audit log (team mode)
``policies``  who may read and write each resource (one module per resource; team mode)
``leases``    the item reserved for each team member
``features``  each dataset's feature matrix in a few blocks, read when a session opens
``item_columns`` each dataset's item ids, sets and true labels in one piece, and its graph keys
``snapshots`` a session's working state (ranker arrays, suspect scores), read when it opens
``sign_ins``  signed-in browser sessions: the account behind a cookie (team mode)
``labels``    a session's label settings (target error, confidence, audit share) and audit draws
``votes``     crowd votes, written with their dataset's instances, read per item or per dataset
"""

from app.store.checks import check_name
from app.store.datasets import (
    CheckedDataset,
    DatasetContent,
    DatasetSpec,
    StoredFeaturizer,
    check_dataset,
    check_dataset_name_free,
    create_dataset,
    dataset_content,
    dataset_featurizer,
    get_dataset_by_id,
    get_dataset_by_name,
    list_datasets,
)
from app.store.db import (
    BUSY_TIMEOUT_MS,
    BUSY_TIMEOUT_VARIABLE,
    alembic_config,
    busy_timeout_ms,
    close_stores,
    database_url,
    downgrade_database,
    is_locked_error,
    make_engine,
    open_store,
    upgrade_database,
    write_transaction,
)
from app.store.derive import (
    VERDICT_KINDS,
    Conflict,
    DerivedState,
    EventRecord,
    IncrementalDerivation,
    ItemState,
    LazyFeatures,
    SessionConfig,
    SessionState,
    active_events,
    derive_item,
    derive_state,
    derived_fields,
    event_to_undo,
    readonly,
)
from app.store.errors import (
    InvalidRecord,
    PermissionDenied,
    RecordNotFound,
    RequestRefused,
    StoreBusy,
    StoreUnavailable,
)
from app.store.events import (
    BATCH_EVENT_KINDS,
    IDEMPOTENCY_KEY_MAX,
    EventRequest,
    count_events,
    event_log,
    events_after,
    instance_position,
    record_event,
    record_events,
    session_events,
)
from app.store.features import FeatureMatrix, feature_matrix_stored, load_feature_matrix, save_feature_matrix
from app.store.graphs import StoredGraph, find_graph, graph_hashes, save_graph, session_dataset_size
from app.store.hotkeys import (
    ACTION_KEYS,
    LABEL_KEYS,
    RESERVED_KEYS,
    check_hotkeys,
    default_hotkeys,
    set_session_hotkeys,
)
from app.store.item_columns import find_graph_key, save_graph_key, save_item_columns
from app.store.labels import (
    LabelSettings,
    audit_secret,
    label_settings,
    label_settings_history,
    set_label_settings,
    stored_audit_secret,
)
from app.store.leases import LEASE_TTL, ItemProgress, item_progress, lease_holders, next_item, release_lease
from app.store.models import (
    CRITERIA,
    EVENT_KINDS,
    LABELLED_KINDS,
    MEDIA_KINDS,
    TARGET_SETS,
    WEIGHTINGS,
    Annotator,
    AnswerEvent,
    Base,
    Dataset,
    FeatureBlock,
    Instance,
    LabellingSession,
    NeighbourGraph,
    SessionSnapshotPart,
    Vote,
)
from app.store.policies import (
    READ_ACTIONS,
    SESSION_ACTIONS,
    authorize_audit,
    authorize_session,
    authorize_upload,
    session_actions,
)
from app.store.records import get_or_create_annotator
from app.store.sessions import (
    SessionSpec,
    check_session_name_free,
    check_session_spec,
    create_labelling_session,
    get_session_by_name,
    list_sessions,
    load_state,
    session_configs,
)
from app.store.sign_ins import SIGN_IN_LIFETIME, end_sign_in_session, signed_in_user, start_sign_in_session, token_hash
from app.store.snapshots import (
    SnapshotHeader,
    StoredSnapshot,
    drop_session_snapshot,
    load_session_snapshot,
    save_session_snapshot,
)
from app.store.staging import ImportResult, import_dataset, remove_abandoned_imports
from app.store.users import (
    SignInResult,
    UserInfo,
    add_user,
    assign_users,
    audit_log,
    get_user,
    list_users,
    session_members,
    session_overlap,
    set_active,
    set_overlap,
    set_password,
    set_role,
    sign_in,
    sign_in_external,
    unknown_name_tag,
    users_exist,
)
from app.store.votes import (
    CheckedVotes,
    StoredVote,
    VoteSpec,
    check_votes,
    dataset_has_votes,
    dataset_vote_counts,
    dataset_votes,
    votes_of_item,
)

__all__ = [
    # db
    "BUSY_TIMEOUT_MS",
    "BUSY_TIMEOUT_VARIABLE",
    "alembic_config",
    "busy_timeout_ms",
    "close_stores",
    "database_url",
    "downgrade_database",
    "is_locked_error",
    "make_engine",
    "open_store",
    "upgrade_database",
    "write_transaction",
    # models
    "Base",
    "Dataset",
    "Instance",
    "LabellingSession",
    "Annotator",
    "AnswerEvent",
    "NeighbourGraph",
    "FeatureBlock",
    "SessionSnapshotPart",
    "SnapshotHeader",
    "StoredSnapshot",
    "drop_session_snapshot",
    "load_session_snapshot",
    "save_session_snapshot",
    "EVENT_KINDS",
    "LABELLED_KINDS",
    "MEDIA_KINDS",
    "WEIGHTINGS",
    "CRITERIA",
    "TARGET_SETS",
    # errors
    "InvalidRecord",
    "RecordNotFound",
    "StoreUnavailable",
    "StoreBusy",
    "RequestRefused",
    # derive
    "EventRecord",
    "Conflict",
    "ItemState",
    "DerivedState",
    "SessionConfig",
    "SessionState",
    "VERDICT_KINDS",
    "active_events",
    "event_to_undo",
    "derive_item",
    "derive_state",
    "derived_fields",
    "IncrementalDerivation",
    "readonly",
    # writes and reads
    "check_name",
    "CheckedDataset",
    "DatasetSpec",
    "check_dataset",
    "check_dataset_name_free",
    "create_dataset",
    "ImportResult",
    "import_dataset",
    "remove_abandoned_imports",
    "SessionSpec",
    "check_session_spec",
    "check_session_name_free",
    "list_datasets",
    "get_dataset_by_name",
    "get_dataset_by_id",
    "DatasetContent",
    "StoredFeaturizer",
    "dataset_content",
    "dataset_featurizer",
    "create_labelling_session",
    "list_sessions",
    "session_configs",
    "get_session_by_name",
    "get_or_create_annotator",
    "record_event",
    "record_events",
    "EventRequest",
    "BATCH_EVENT_KINDS",
    "IDEMPOTENCY_KEY_MAX",
    "load_state",
    "event_log",
    "session_events",
    "events_after",
    "count_events",
    "instance_position",
    # keyboard keys
    "ACTION_KEYS",
    "RESERVED_KEYS",
    "LABEL_KEYS",
    "default_hotkeys",
    "check_hotkeys",
    "set_session_hotkeys",
    # graphs
    "StoredGraph",
    "find_graph",
    "save_graph",
    "graph_hashes",
    "session_dataset_size",
    # users, roles, audit
    "PermissionDenied",
    "SignInResult",
    "UserInfo",
    "add_user",
    "assign_users",
    "audit_log",
    "get_user",
    "list_users",
    "session_members",
    "session_overlap",
    "set_active",
    "set_overlap",
    "set_password",
    "set_role",
    "sign_in",
    "sign_in_external",
    "unknown_name_tag",
    "users_exist",
    # access policies
    "SESSION_ACTIONS",
    "READ_ACTIONS",
    "authorize_session",
    "authorize_audit",
    "authorize_upload",
    "session_actions",
    # signed-in browser sessions
    "SIGN_IN_LIFETIME",
    "end_sign_in_session",
    "signed_in_user",
    "start_sign_in_session",
    "token_hash",
    # leases
    "LEASE_TTL",
    "ItemProgress",
    "item_progress",
    "lease_holders",
    "next_item",
    "release_lease",
    # label settings and the audit key
    "LabelSettings",
    "label_settings",
    "label_settings_history",
    "set_label_settings",
    "audit_secret",
    "stored_audit_secret",
    # feature matrices in blocks
    "save_feature_matrix",
    "save_item_columns",
    "FeatureMatrix",
    "LazyFeatures",
    "find_graph_key",
    "save_graph_key",
    "load_feature_matrix",
    "feature_matrix_stored",
    # crowd votes
    "Vote",
    "VoteSpec",
    "CheckedVotes",
    "StoredVote",
    "check_votes",
    "votes_of_item",
    "dataset_votes",
    "dataset_vote_counts",
    "dataset_has_votes",
]
