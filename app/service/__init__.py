"""winnow's service layer: a labelling session at work, for the CLI and the browser app.

``app/cli.py`` and the pages in ``app/ui/`` call these functions and add no logic of their
own; this layer reads and writes through :mod:`app.store`, reads files through :mod:`app.io`
and computes with public :mod:`engine` names only.

Modules
-------
``workbench``  :class:`Workbench`: a session's graph, query queue, explanations, rejects
``sessions``   import a file, start / find / list sessions, record an answer by item id
``uploads``    files uploaded in the browser (data file, media, zip archive) as a dataset
``progress``   replay a session's events and measure it after each one
``exports``    the ranked list, labelled data and answer log as tables and files
``hotkeys``    a session's keyboard keys as editable text, and changing them (admins)
``graphs``     a dataset's k-NN graph, built once, persisted and loaded by content hash
``tasks``      progress reports of heavy work, and background builds shared per process
``auth``       accounts, sign-in and the single-user / team mode decision
``team``       the item reserved for each annotator, conflicts in detail, progress, agreement
"""

from __future__ import annotations

import importlib
from typing import Any

# The workbench pulls in pandas, scikit-learn and OR-Tools (seconds of imports): names are
# resolved on first use, so `winnow --help` and the store-only commands stay fast.
_MODULE_OF = {
    **dict.fromkeys(
        (
            "Workbench", "QueryExplanation", "TargetExplanation", "RejectQueue", "ItemContent", "Neighbour",
            "AnswerEffect", "StaleAnswer", "OFFERS", "ACTION_KEYS",
        ),
        "workbench",
    ),
    **dict.fromkeys(
        (
            "import_file", "import_image_folder", "store_dataset", "featurize_items", "create_session",
            "start_session", "session_id_by_name", "dataset_id_by_name", "session_summaries", "dataset_names",
            "latest_session_id", "record_answer", "session_rights", "check_session_action", "creation_rights", "SESSION_ACTIONS",
            "READ_ACTIONS",
            "ensure_sample_session", "safe_file_name", "SAMPLE_FILE", "SAMPLE_DATASET",
        ),
        "sessions",
    ),
    **dict.fromkeys(("media_folder", "import_upload", "upload_columns", "UPLOAD_EXTENSIONS"), "uploads"),
    **dict.fromkeys(("GraphResult", "graph_key", "graph_algorithm", "dataset_graph", "graph_builds", "session_dataset"), "graphs"),
    **dict.fromkeys(
        ("ProgressUpdate", "ProgressCallback", "ProgressTracker", "BuildJob", "BuildRegistry", "STAGE_NAMES"), "tasks"
    ),
    **dict.fromkeys(("replay_progress", "session_progress", "candidate_set_sizes", "PROGRESS_COLUMNS"), "progress"),
    **dict.fromkeys(
        (
            "LOCAL_ADDRESSES", "SignInRefused", "is_local_address", "sign_in_required", "has_users",
            "sign_in_with_password", "sign_in_with_identity", "active_user", "create_user", "users", "change_role",
            "disable_user", "change_password", "assign", "set_session_overlap",
        ),
        "auth",
    ),
    **dict.fromkeys(
        (
            "Verdict", "ConflictDetail", "reserve_next_item", "overlap_of", "conflict_details", "annotator_progress",
            "agreement", "pair_agreement", "team_figures",
        ),
        "team",
    ),
    **dict.fromkeys(
        ("session_table", "events_table", "audit_table", "export_bytes", "rank_file", "EXPORT_KINDS", "EXPORT_FORMATS",
         "EXPORT_MIME", "EVENT_COLUMNS", "AUDIT_COLUMNS"),
        "exports",
    ),
    **dict.fromkeys(("hotkeys_text", "parse_hotkeys_text", "set_session_keys"), "hotkeys"),
}

__all__ = list(_MODULE_OF)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted(__all__)
