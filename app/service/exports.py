"""What winnow exports: the ranked query list, the labelled dataset, the answer log and the
crowd votes a dataset was made from.

``winnow export``, ``winnow rank`` and the Progress page's download buttons build their tables
here and write them with :func:`app.io.write_table`, so a file from the browser and one from
the command line are the same bytes. The ranked list is always in the order of
:func:`engine.query.ranking_order` (skipped items last), the order the Query page asks in.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from sqlalchemy.orm import Session, sessionmaker

from app.service import session_tables
from app.service.suspects import session_suspects, session_suspicion
from app.service.tasks import ProgressCallback, ProgressTracker
from app.service.votes import crowd_votes, vote_column, votes_table
from app.store import (
    DatasetContent,
    audit_log,
    authorize_session,
    dataset_content,
    event_log,
    get_dataset_by_id,
    session_actions,
    session_dataset_size,
)
from engine import check_choice
from engine.choices import DEFAULT_STRATEGY
from engine.exceptions import InvalidInput

if TYPE_CHECKING:
    from app.io.label_studio_tasks import LabelConfig
    from app.service.workbench import Workbench
    from engine.choices import Criterion
    from engine.neighbors import Weights

__all__ = [
    "EXPORT_KINDS",
    "EXPORT_FORMATS",
    "EXPORT_MIME",
    "EVENT_COLUMNS",
    "AUDIT_COLUMNS",
    "session_table",
    "events_table",
    "audit_table",
    "export_bytes",
    "rank_file",
    "LABEL_STUDIO_FORMAT",
    "LabelStudioFiles",
    "prediction_model_version",
    "LabelStudioPlan",
    "check_label_studio_export",
    "export_label_studio",
]

#: What a session export can hold (``winnow export --what``).
EXPORT_KINDS: tuple[str, ...] = ("ranked", "labelled", "events", "votes")
#: Download formats of the browser app (the CLI also writes ``.tsv`` and ``.parquet``).
EXPORT_MIME: dict[str, str] = {"csv": "text/csv", "json": "application/json", "jsonl": "application/jsonl"}
EXPORT_FORMATS: tuple[str, ...] = tuple(EXPORT_MIME)

#: A step of a long computation: ``with progress("Scoring"): ...`` (the CLI shows a spinner).
Progress = Callable[[str], AbstractContextManager[object]]


def _quiet(description: str) -> AbstractContextManager[object]:
    return contextlib.nullcontext()


def session_table(bench: Workbench, what: str, *, actor: str | None) -> pd.DataFrame:
    """The ``ranked`` query list, the ``labelled`` dataset, the ``events`` log or the crowd
    ``votes`` of a session (:func:`app.service.votes.votes_table`). The labelled dataset gets
    the ``suspect`` flag and the ``suspicion`` of every item (:mod:`app.service.suspects`,
    :func:`app.service.session_tables.with_suspect_columns`); one of a dataset made from votes
    a last ``votes`` column (``"jazz:2|blues:1"``).

    ``actor`` must be allowed the export (``export_ranked``, ``export_labelled`` or
    ``export_events`` of :mod:`app.store.policies.sessions`); ``None`` is the command line.

    Raises
    ------
    app.store.PermissionDenied
        ``actor`` may not export this.
    """
    check_choice(what, "what", EXPORT_KINDS)
    if what == "events":
        return events_table(bench.session_factory, bench.session_id, actor=actor)
    if what == "votes":
        return votes_table(bench.session_factory, bench.session_id, actor=actor)
    with bench.session_factory() as s:
        authorize_session(s, actor, f"export_{what}", bench.session_id, what=f"export {what}")
    if what == "ranked":
        return bench.ranked_table()
    state = bench.state  # read once: the flags and the suspicion of one moment
    suspects = session_suspects(bench.graph, state)
    table = session_tables.with_suspect_columns(
        bench.labelled_table(), state, suspects.flags, session_suspicion(bench.graph, state, bench), fdr=suspects.fdr
    )
    # A dataset made from crowd votes: each item's votes as "jazz:2|blues:1", after the
    # existing columns (which stay as they are).
    votes = vote_column(bench.session_factory, bench.config.dataset_id)
    if votes is not None:
        table = table.copy()  # keeps the table's metadata (attrs)
        table["votes"] = votes  # the rows are the items in position order
    return table


#: Columns of the answer-log export, in order.
EVENT_COLUMNS: tuple[str, ...] = (
    "event_id",
    "created_at",
    "annotator",
    "kind",
    "position",
    "external_id",
    "label",
    "label_index",
    "undoes_event_id",
    "undone_by_event_id",
)


def events_table(session_factory: sessionmaker[Session], session_id: int, *, actor: str | None) -> pd.DataFrame:
    """Every event of a session, oldest first (:func:`app.store.event_log` as a table).

    ``label`` is the label's *name* (``"3"``, never ``3.0``; empty for a skip, an undo or
    "none of these"); ``label_index`` its column in the dataset. Integer columns that may be
    empty (``label_index``, ``undoes_event_id``, ``undone_by_event_id``) stay integers: a
    float column would write ``3.0``.

    ``actor`` must be allowed ``export_events`` (a reviewer or an admin; ``None`` is the
    command line). For an admin (and the command line) the audit events about this session
    (assignments, overlap and answer-key changes: :func:`app.store.audit_log`) are merged in by
    time, with their ``kind``, the user as ``annotator``, and the ``audit_id``, ``actor`` and
    ``detail`` columns; never the rest of the audit log (sign-ins, other sessions). Without any
    such event the table is the plain answer log.

    Raises
    ------
    app.store.PermissionDenied
        ``actor`` may not export the session's events.
    """
    with session_factory() as s:
        authorize_session(s, actor, "export_events", session_id, what="export events")
        log = event_log(s, session_id)
        with_audit = "export_audit" in session_actions(s, actor, session_id)
        audit = audit_log(s, actor=actor, session_id=session_id) if with_audit else []
    table = pd.DataFrame(
        {
            "event_id": pd.array([e["event_id"] for e in log], dtype="Int64"),
            "created_at": [e["created_at"] for e in log],
            "annotator": pd.Series([e["annotator"] for e in log], dtype=object),
            "kind": pd.Series([e["kind"] for e in log], dtype=object),
            "position": pd.array([e["position"] for e in log], dtype="Int64"),
            "external_id": pd.Series([e["external_id"] for e in log], dtype=object),
            "label": pd.Series([e["label_name"] for e in log], dtype=object),
            "label_index": pd.array([e["label"] for e in log], dtype="Int64"),
            "undoes_event_id": pd.array([e["undoes_event_id"] for e in log], dtype="Int64"),
            "undone_by_event_id": pd.array([e["undone_by_event_id"] for e in log], dtype="Int64"),
        },
        columns=list(EVENT_COLUMNS),
    )
    if not audit:
        return table
    rows = pd.DataFrame(
        {
            "audit_id": pd.array([a["audit_id"] for a in audit], dtype="Int64"),
            "created_at": [a["created_at"] for a in audit],
            "annotator": pd.Series([a["user"] for a in audit], dtype=object),
            "kind": pd.Series([a["kind"] for a in audit], dtype=object),
            "actor": pd.Series([a["actor"] for a in audit], dtype=object),
            "detail": pd.Series([a["detail"] for a in audit], dtype=object),
        }
    )
    merged = (
        pd.concat([table, rows], ignore_index=True)
        if not table.empty
        else rows.reindex(columns=[*EVENT_COLUMNS, "audit_id", "actor", "detail"])
    )
    return merged.sort_values("created_at", kind="stable").reset_index(drop=True)


#: Columns of the audit log table, in order.
AUDIT_COLUMNS: tuple[str, ...] = ("audit_id", "created_at", "kind", "user", "actor", "session_id", "detail")


def audit_table(session_factory: sessionmaker[Session], *, actor: str | None) -> pd.DataFrame:
    """The whole audit log, oldest first (``winnow user audit``): sign-ins and failed ones
    (an unknown name only as its tag), account changes, assignments, overlap and answer-key
    changes.

    ``actor`` must be an active admin (``None`` is the command line).

    Raises
    ------
    app.store.PermissionDenied
        ``actor`` may not read the audit log.
    """
    with session_factory() as s:
        rows = audit_log(s, actor=actor)
    return pd.DataFrame(
        {
            "audit_id": pd.array([r["audit_id"] for r in rows], dtype="Int64"),
            "created_at": [r["created_at"] for r in rows],
            **{key: pd.Series([r[key] for r in rows], dtype=object) for key in ("kind", "user", "actor")},
            "session_id": pd.array([r["session_id"] for r in rows], dtype="Int64"),
            "detail": pd.Series([r["detail"] for r in rows], dtype=object),
        },
        columns=list(AUDIT_COLUMNS),
    )


#: ``winnow export --format`` value of the Label Studio tasks export (``--what labelled`` only).
LABEL_STUDIO_FORMAT = "label-studio"


@dataclass(frozen=True)
class LabelStudioFiles:
    """What :func:`export_label_studio` wrote.

    Attributes
    ----------
    tasks, config : Path
        The tasks file and the labelling config beside it.
    n_tasks, n_annotations, n_predictions : int
        Tasks written, expert answers as annotations, model labels as predictions.
    n_withheld : int
        Model labels of the lot still being audited, written as undecided (see
        :func:`export_label_studio`).
    document_root, storage : Path or None
        Where Label Studio must serve the media files from
        (:class:`app.io.label_studio_tasks.LocalFilesSetup`): its
        ``LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT`` and the folder of the project's "Local files"
        storage; ``None`` without media files, or for files uploaded to Label Studio.
    """

    tasks: Path
    config: Path
    n_tasks: int
    n_annotations: int
    n_predictions: int
    n_withheld: int = 0
    document_root: Path | None = None
    storage: Path | None = None


def prediction_model_version(session_name: str) -> str:
    """The ``model_version`` of winnow's predictions: ``winnow-<version>-dstpll-<session>``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("winnow")
    except PackageNotFoundError:  # running from a checkout that was never installed
        installed = "unknown"
    return f"winnow-{installed}-dstpll-{session_name}"


@dataclass(frozen=True)
class LabelStudioPlan:
    """What :func:`check_label_studio_export` found: the export can be made.

    Attributes
    ----------
    content : DatasetContent
        The items' content (some item has some).
    shown : str
        What the tasks show: ``"image"``, ``"audio"``, ``"text"`` or ``"link"``.
    project : LabelConfig or None
        The project's labelling config, when one was given (read and checked against the labels).
    from_name, to_name, data_key : str or None
        The control, its object and the data key: given, or those of the Label Studio project
        the dataset was imported from.
    """

    content: DatasetContent
    shown: str
    project: LabelConfig | None
    from_name: str | None
    to_name: str | None
    data_key: str | None


def check_label_studio_export(
    session_factory: sessionmaker[Session],
    session_id: int,
    *,
    actor: str | None,
    from_name: str | None = None,
    to_name: str | None = None,
    label_config: str | Path | None = None,
) -> LabelStudioPlan:
    """Refuse a Label Studio export that cannot be made, from the store alone: before the
    session is opened and scored (tens of seconds on 20,000 items), so a refusal is immediate.

    Parameters are those of :func:`export_label_studio`.

    Raises
    ------
    app.store.PermissionDenied
        ``actor`` may not export the labelled dataset.
    InvalidInput
        The items have no content, a name and a config both given, or a
        :class:`~app.io.DataFileError` naming ``label_config`` (unreadable, or its control
        cannot show the items or lacks a label).
    """
    from app.io.label_studio_tasks import check_tasks_fit, read_label_config

    project = read_label_config(label_config) if label_config is not None else None
    if project is not None and (from_name is not None or to_name is not None):
        raise InvalidInput("the labelling config names the control and its object: give no from_name or to_name")
    with session_factory() as s:
        authorize_session(s, actor, "export_labelled", session_id, what="export labelled")
        dataset_id, _ = session_dataset_size(s, session_id)
        content = dataset_content(s, dataset_id)
        dataset = get_dataset_by_id(s, dataset_id)
        imported, label_names = dataset.label_studio_control, list(dataset.label_names)
    if not content.has_content:
        raise InvalidInput(
            "the items have no content (text, image, audio or link): Label Studio has nothing to show; "
            "export --what labelled as CSV or JSON instead"
        )
    kinds = [k for k in content.media_kinds if k is not None]
    shown = kinds[0] if kinds else "text" if any(t is not None for t in content.texts) else "link"
    if project is not None and label_config is not None:
        check_tasks_fit(project, label_config, label_names, shown)
    data_key = project.data_key if project is not None else None
    if project is None and from_name is None and to_name is None and imported:
        # A dataset read from a Label Studio export: the tasks fit the same project's control.
        from_name, to_name, data_key = imported["from_name"], imported["to_name"], imported.get("data_key")
    return LabelStudioPlan(content, shown, project, from_name, to_name, data_key)


def export_label_studio(
    bench: Workbench,
    path: str | Path,
    *,
    actor: str | None,
    from_name: str | None = None,
    to_name: str | None = None,
    label_config: str | Path | None = None,
) -> LabelStudioFiles:
    """Write the session's labelled dataset as Label Studio tasks, with their labelling config
    beside them (:mod:`app.io.label_studio_tasks`).

    The expert's answers become annotations, the model labels winnow stands behind become
    predictions (``score`` = their confidence, ``model_version`` = :func:`prediction_model_version`).
    While a lot's audits are served (:meth:`Workbench.lot_audits_served`), the model labels of
    its items (:meth:`Workbench.items_being_audited`) are written as undecided, with no label:
    the tasks are opened by annotators in Label Studio, and one who saw the label an audit
    checks would no longer check it blind (their answers come back as winnow answers).
    ``winnow export --what labelled`` as CSV or JSON has them; with audits off (audit share 0)
    no audit is pending and they go out as predictions.

    Parameters
    ----------
    bench : Workbench
    path : str or Path
        The tasks file (``.json``); the config goes to ``<stem>.label_config.xml``.
    actor : str or None
        Must be allowed ``export_labelled`` (``None`` is the command line).
    from_name, to_name : str, optional
        Names of the ``<Choices>`` control and of the object it labels (defaults: those of the
        Label Studio project the dataset was imported from, else ``"label"`` and the content
        key: ``"text"``, ``"image"``, ...).
    label_config : str or Path, optional
        The Label Studio project's labelling config (XML): the tasks use its control, object
        and data key, and every label must be one of its choices; it is copied beside the tasks.

    Raises
    ------
    app.store.PermissionDenied
        ``actor`` may not export the labelled dataset.
    InvalidInput
        The items have no content, or a bad name or path; a
        :class:`~app.io.DataFileError` naming ``label_config`` when the tasks do not fit it.
        What can be refused before the session is opened is
        :func:`check_label_studio_export`'s, which callers holding no workbench yet call first.
    """
    from app.io.label_studio_tasks import (
        DEFAULT_FROM_NAME,
        label_studio_tasks,
        labelling_config,
        local_files_setup,
        write_label_studio,
    )

    plan = check_label_studio_export(
        bench.session_factory,
        bench.session_id,
        actor=actor,
        from_name=from_name,
        to_name=to_name,
        label_config=label_config,
    )
    project, content, shown = plan.project, plan.content, plan.shown
    from_name, to_name, data_key = plan.from_name, plan.to_name, plan.data_key
    table = bench.labelled_table()
    withheld = (table["label_source"].to_numpy() == "model") & bench.items_being_audited()
    withheld &= bench.lot_audits_served()
    if withheld.any():
        table = table.copy()
        table.loc[withheld, "label"] = None
        table.loc[withheld, "model_margin"] = np.nan
        table.loc[withheld, "label_source"] = "undecided"
    paths = [p for p in content.media_paths if p is not None]
    files = local_files_setup(content.media_root, paths) if content.media_root is not None and paths else None
    control = project.from_name if project is not None else from_name or DEFAULT_FROM_NAME
    tasks, target = label_studio_tasks(
        table,
        media_kinds=content.media_kinds,
        votes=crowd_votes(bench.session_factory, bench.config.dataset_id),
        model_version=prediction_model_version(bench.config.name),
        from_name=control,
        to_name=project.to_name if project is not None else to_name,
        files=files,
        data_key=data_key,
        candidate_sets=[
            [bench.label_names[j] for j in np.flatnonzero(row)] for row in np.asarray(bench.state.original_candidates)
        ],
    )
    if project is not None and label_config is not None:
        config = Path(label_config).read_text(encoding="utf-8-sig").rstrip("\n")
    else:
        keys = {key for task in tasks for key in task["data"] if key != "id"}
        if data_key is not None and data_key in keys:
            keys = (keys - {data_key}) | {shown}
        config = labelling_config(
            bench.label_names, data_keys=sorted(keys), from_name=control, to_name=target, data_key=data_key
        )
    tasks_file, config_file = write_label_studio(tasks, config, path)
    return LabelStudioFiles(
        tasks_file,
        config_file,
        len(tasks),
        sum(len(task["annotations"]) for task in tasks),
        sum(len(task["predictions"]) for task in tasks),
        int(withheld.sum()),
        files.document_root if files is not None else None,
        files.storage if files is not None else None,
    )


def export_bytes(table: pd.DataFrame, fmt: str) -> bytes:
    """The file :func:`app.io.write_table` writes for ``table`` (same bytes as the CLI's)."""
    from app.io import write_table

    check_choice(fmt, "fmt", EXPORT_FORMATS)
    with tempfile.TemporaryDirectory(prefix="winnow-export-") as folder:
        return write_table(table, Path(folder) / f"export.{fmt}").read_bytes()


def rank_file(
    path: str | Path,
    *,
    criterion: str = DEFAULT_STRATEGY,
    k: int = 10,
    weighting: str = "uniform",
    seed: int = 0,
    dask: str | None = None,
    workers: int | None = None,
    progress: Progress = _quiet,
    report: ProgressCallback | None = None,
    **content: Any,
) -> pd.DataFrame:
    """The ranked query list of a file, without a database (``winnow rank FILE``).

    Parameters
    ----------
    path : str or Path
        Any file :func:`app.io.read_dataset` reads.
    criterion, k, weighting, seed
        As in :func:`engine.query.query_scores` and :func:`engine.neighbors.knn_graph`; the
        criterion defaults to :data:`engine.choices.DEFAULT_STRATEGY`.
    dask : str, optional
        Address of a running Dask scheduler to score on.
    workers : int, optional
        Score on a local Dask cluster of this many worker processes.
    progress : callable, optional
        Context-manager factory wrapped around each long step (given its description).
    report : ProgressCallback, optional
        Told about each stage with counts (:class:`app.service.tasks.ProgressUpdate`):
        ``read``, ``search`` (and ``index`` for an approximate graph), ``score``.
    **content
        The content options of :func:`app.io.read_dataset` (``text_column``, ``image_column``,
        ``audio_column``, ``link_column``, ``ignore_columns``, ``media_root``,
        ``features_from``); a file without numeric columns gets computed features.

    Returns
    -------
    pandas.DataFrame
        :func:`app.io.ranked_query_table` of every partial item.
    """
    from app.io import ranked_query_table, read_dataset
    from engine.neighbors import WEIGHTINGS, knn_graph
    from engine.query import CRITERIA, open_neighbourhoods, query_scores
    from engine.winners import label_sets, open_targets

    # check_choice returns the value unchanged, now known to be one of the names.
    chosen_criterion: Criterion = check_choice(criterion, "criterion", CRITERIA)
    weights: Weights = check_choice(weighting, "weighting", WEIGHTINGS)
    allowed = {
        "text_column",
        "image_column",
        "audio_column",
        "link_column",
        "ignore_columns",
        "media_root",
        "features_from",
    }
    unknown = sorted(set(content) - allowed)
    if unknown:
        raise TypeError(f"rank_file got unexpected keyword arguments {unknown}")
    tracker = ProgressTracker(report)
    tracker("read", 0, None)
    with progress(f"Reading {Path(path).name}"):
        loaded = read_dataset(path, **content)  # knn_graph says it when k is too large for the file
    tracker("read", loaded.n_instances, loaded.n_instances)
    with progress(f"Building the {k}-NN graph of {loaded.n_instances} instances"):
        idx, w = knn_graph(loaded.X, k=k, weights=weights, progress=tracker)
    Y = loaded.candidates
    tracker("score", 0, loaded.n_instances)
    if dask is not None or workers is not None:
        from engine.distributed import dask_client, distributed_label_sets, distributed_query_scores

        with progress(f"Scoring with criterion {criterion} over Dask"), dask_client(dask, n_workers=workers) as client:
            scores = distributed_query_scores(idx, w, Y, criterion=chosen_criterion, random_state=seed, client=client)
            is_open = open_targets(*distributed_label_sets(idx, w, Y, client=client))
    else:
        with progress(f"Scoring with criterion {criterion}"):
            scores = query_scores(idx, w, Y, criterion=chosen_criterion, random_state=seed)
            is_open = open_targets(*label_sets(idx, w, Y))
    tracker("score", loaded.n_instances, loaded.n_instances)
    return ranked_query_table(
        scores,
        Y,
        loaded.label_names,
        loaded.ids,
        open_neighbourhoods(idx, is_open, loaded.n_instances),
        criterion=criterion,
        params={"k": k, "weighting": weighting, "source": str(path)},
        content={"text": loaded.texts, "media_path": loaded.media_paths, "link": loaded.links},
    )
