# The public names of the service layer, loaded lazily by __init__.py (lazy_loader.attach_stub).
from .auth import (
    LOCAL_ADDRESSES,
    SignInRefused,
    active_user,
    assign,
    change_password,
    change_role,
    create_user,
    disable_user,
    has_users,
    is_local_address,
    set_session_overlap,
    sign_in_required,
    sign_in_with_identity,
    sign_in_with_password,
    users,
)
from .delivery import (
    LABEL_SOURCES,
    DeliveredLabels,
    change_label_settings,
    session_label_settings,
)
from .exports import (
    EVENT_COLUMNS,
    EXPORT_FORMATS,
    EXPORT_KINDS,
    EXPORT_MIME,
    AUDIT_COLUMNS,
    audit_table,
    events_table,
    export_bytes,
    rank_file,
    session_table,
)
from .graphs import GraphResult, dataset_graph, graph_algorithm, graph_builds, graph_key, session_dataset
from .hotkeys import hotkeys_text, parse_hotkeys_text, set_session_keys
from .progress import PROGRESS_COLUMNS, candidate_set_sizes, replay_progress, session_progress
from .sessions import (
    READ_ACTIONS,
    SAMPLE_DATASET,
    SAMPLE_FILE,
    SESSION_ACTIONS,
    check_session_action,
    create_session,
    creation_rights,
    dataset_id_by_name,
    dataset_names,
    ensure_sample_session,
    featurize_items,
    import_file,
    import_image_folder,
    latest_session_id,
    record_answer,
    record_answers_file,
    session_id_by_name,
    session_rights,
    session_summaries,
    store_dataset,
)
from .tasks import STAGE_NAMES, BuildJob, BuildRegistry, ProgressCallback, ProgressTracker, ProgressUpdate
from .team import (
    ConflictDetail,
    Verdict,
    agreement,
    annotator_progress,
    conflict_details,
    overlap_of,
    pair_agreement,
    reserve_next_item,
    team_figures,
)
from .uploads import UPLOAD_EXTENSIONS, import_upload, media_folder, safe_file_name, start_session, upload_columns
from .workbench import (
    ACTION_KEYS,
    OFFERS,
    AnswerEffect,
    ItemContent,
    Neighbour,
    QueryExplanation,
    RejectQueue,
    StaleAnswer,
    TargetExplanation,
    Workbench,
)

__all__ = [
    "Workbench", "QueryExplanation", "TargetExplanation", "RejectQueue", "ItemContent", "Neighbour",
    "AnswerEffect", "StaleAnswer", "OFFERS", "ACTION_KEYS",
    "import_file", "import_image_folder", "store_dataset", "featurize_items", "create_session",
    "start_session", "session_id_by_name", "dataset_id_by_name", "session_summaries", "dataset_names",
    "latest_session_id", "record_answer", "record_answers_file", "session_rights", "check_session_action",
    "creation_rights", "SESSION_ACTIONS", "READ_ACTIONS", "ensure_sample_session", "safe_file_name", "SAMPLE_FILE",
    "SAMPLE_DATASET",
    "media_folder", "import_upload", "upload_columns", "UPLOAD_EXTENSIONS",
    "GraphResult", "graph_key", "graph_algorithm", "dataset_graph", "graph_builds", "session_dataset",
    "ProgressUpdate", "ProgressCallback", "ProgressTracker", "BuildJob", "BuildRegistry", "STAGE_NAMES",
    "replay_progress", "session_progress", "candidate_set_sizes", "PROGRESS_COLUMNS",
    "LOCAL_ADDRESSES", "SignInRefused", "is_local_address", "sign_in_required", "has_users",
    "sign_in_with_password", "sign_in_with_identity", "active_user", "create_user", "users", "change_role",
    "disable_user", "change_password", "assign", "set_session_overlap",
    "Verdict", "ConflictDetail", "reserve_next_item", "overlap_of", "conflict_details", "annotator_progress",
    "agreement", "pair_agreement", "team_figures",
    "session_table", "events_table", "export_bytes", "rank_file", "EXPORT_KINDS", "EXPORT_FORMATS", "EXPORT_MIME",
    "EVENT_COLUMNS", "audit_table", "AUDIT_COLUMNS",
    "hotkeys_text", "parse_hotkeys_text", "set_session_keys",
    "DeliveredLabels", "LABEL_SOURCES", "session_label_settings", "change_label_settings",
]
