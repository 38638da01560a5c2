"""Datasets and labelling sessions: import a file, start a session, find and list them.

What ``winnow import``, ``winnow session new|list``, ``winnow answer``, ``winnow demo`` and the
Sessions page do, written once. Everything is checked before anything is written, and every
write is all or nothing: an answer or a session is one transaction
(:func:`app.store.write_transaction`); an import stages its rows and publishes the dataset
together with its session (:func:`app.store.import_dataset`). A file the reader rejects, a bad
option or a name already taken leaves the store unchanged. Errors are :class:`engine.exceptions.InvalidInput`
(readers: :class:`~app.io.errors.DataFileError`; store: :class:`~app.store.InvalidRecord`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from app.service.tasks import ProgressCallback, ProgressTracker
from app.service.votes import check_vote_options, read_items_with_votes, votes_brought_by
from app.store import (
    READ_ACTIONS,
    SESSION_ACTIONS,
    DatasetSpec,
    EventRequest,
    InvalidRecord,
    PermissionDenied,
    RequestRefused,
    SessionConfig,
    SessionSpec,
    VoteSpec,
    authorize_session,
    authorize_upload,
    check_dataset,
    check_dataset_name_free,
    check_name,
    check_session_name_free,
    check_session_spec,
    create_labelling_session,
    dataset_featurizer,
    get_dataset_by_id,
    get_dataset_by_name,
    get_session_by_name,
    import_dataset,
    instance_position,
    list_datasets,
    record_event,
    record_events,
    remove_abandoned_imports,
    session_actions,
    session_configs,
    write_transaction,
)
from engine import check_choice
from engine.choices import DEFAULT_STRATEGY
from engine.exceptions import InvalidInput

if TYPE_CHECKING:
    from app.io import LoadedDataset

__all__ = [
    "SAMPLE_FILE",
    "SAMPLE_DATASET",
    "dataset_description",
    "import_file",
    "import_image_folder",
    "store_dataset",
    "featurize_items",
    "create_session",
    "session_id_by_name",
    "dataset_id_by_name",
    "session_summaries",
    "session_rights",
    "check_session_action",
    "creation_rights",
    "SESSION_ACTIONS",
    "READ_ACTIONS",
    "dataset_names",
    "latest_session_id",
    "record_answer",
    "record_answers_file",
    "ensure_sample_session",
]

#: The bundled sample the demo and ``winnow ui --sample`` run on.
SAMPLE_FILE = Path(__file__).resolve().parents[2] / "sample_data" / "digits_partial.csv"
SAMPLE_DATASET = "digits_partial"
#: What the bundled sample is, for a person who opened the demo without reading sample_data/README.md.
SAMPLE_DESCRIPTION = (
    "Demo data: 800 handwritten digits (8×8 pixels, scikit-learn's digits). 483 of them carry two to four "
    "candidate labels, one of them true; the other 317 have one label, given in the data. Answer with the "
    "digit you see."
)


def dataset_description(dataset_name: str) -> str | None:
    """What a dataset is, in plain words, when winnow knows (the bundled sample); else None."""
    return SAMPLE_DESCRIPTION if dataset_name == SAMPLE_DATASET else None


def import_file(
    session_factory: sessionmaker[Session],
    path: str | Path,
    *,
    name: str | None,
    candidates_column: str = "candidates",
    id_column: str | None = None,
    true_label_column: str | None = None,
    min_rows: int = 2,
    text_column: str | None = None,
    image_column: str | None = None,
    audio_column: str | None = None,
    link_column: str | None = None,
    ignore_columns: Sequence[str] = (),
    media_root: str | Path | None = None,
    features_from: str | Path | None = None,
    labels: str | Path | None = None,
    unlisted: str = "error",
    progress: ProgressCallback | None = None,
    session: SessionSpec | None = None,
    votes: str | Path | None = None,
    min_votes: int | None = None,
    min_share: float | None = None,
    user_map: str | Path | None = None,
) -> tuple[int, int]:
    """Read, validate and store a file (or an image folder) as a dataset, with a labelling
    session if asked: all of it or nothing.

    Every check runs before anything is written: the session's options and the names (dataset
    and session not taken) before the file is even read, then the file, then the store's own
    checks of the data. The rows are then staged in short transactions and the dataset and the
    session published together (:func:`app.store.import_dataset`), so answers in other sessions
    keep flowing during a long import and a crash leaves nothing visible.

    Parameters
    ----------
    session_factory : sessionmaker
        From :func:`app.store.open_store`.
    path : str or Path
        Any file :func:`app.io.read_dataset` reads, or a folder of images
        (:func:`app.io.read_image_dataset`: with ``labels``, or one sub-folder per label).
    name : str or None
        Dataset name; ``None`` uses the file or folder name without its extension.
    candidates_column, id_column, true_label_column : str
        Columns of a text or Parquet file, as in :func:`app.io.read_dataset`.
    min_rows : int, default 2
        Fewest rows accepted (a session with ``k`` neighbours needs ``k + 1``).
    text_column, image_column, audio_column, link_column, ignore_columns, media_root, features_from
        As in :func:`app.io.read_dataset` (``features_from`` applies to image folders too).
    labels : str or Path, optional
        For a folder: the CSV giving each image's candidate set.
    unlisted : {"error", "ignore"}, default "error"
        For a folder with ``labels``: what to do with images the CSV does not list.
    progress : ProgressCallback, optional
        Told when the ``read`` stage starts and ends, and after each staged batch of the
        ``store`` stage, with the rows of each.
    session : SessionSpec, optional
        A labelling session to create on the new dataset, published with it.
    votes : str or Path, optional
        A file of crowd votes (:func:`app.io.read_votes`): the candidate sets are made from it
        and the votes stored with the items (:func:`app.service.votes.read_items_with_votes`).
    min_votes, min_share : optional
        With ``votes`` or a Label Studio export (``.json``, whose annotations are the votes):
        keep the labels with at least this many votes, or this share of the item's votes
        (:mod:`engine.votes`); one of the two, not both.
    user_map : str or Path, optional
        With a Label Studio export: the JSON list of its users (``GET /api/users/``), so that
        annotators named by id are kept by email (:func:`app.io.read_user_map`).

    A Label Studio export that winnow wrote brings its expert answers too: they are recorded
    in ``session`` (required then) by who gave them, in the transaction that publishes it.

    Returns
    -------
    (int, int)
        The dataset id and its number of instances.

    Raises
    ------
    InvalidInput
        A bad option, a name already taken, or a file the reader or the store rejects
        (:class:`~app.io.DataFileError`: one line naming the file, the row counted from 1 and
        the column).
    """
    from app.io import DataFileError, read_dataset, read_image_dataset  # pandas and pyarrow: only when read
    from app.io.readers.label_studio import read_user_map

    dataset_name = check_name(name or Path(path).stem, "name")
    brings_votes = Path(path).suffix.lower() == ".json"  # a Label Studio export: its annotations
    if votes is None and (min_votes is not None or min_share is not None) and not brings_votes:
        raise InvalidInput("min_votes and min_share apply to votes: give a votes file too")
    if votes is not None and brings_votes:
        raise InvalidInput(
            f"{Path(path).name!r} is a Label Studio export: its annotations are the votes; give no votes file"
        )
    if user_map is not None and not brings_votes:
        raise InvalidInput("a user map goes with a Label Studio export (.json)")
    if votes is not None or brings_votes:
        check_vote_options(min_votes, min_share)
        if Path(path).is_dir():
            raise InvalidInput(f"votes go with a data file of items; {Path(path).name!r} is a folder")
    if session is not None:
        session = check_session_spec(session)
        min_rows = max(min_rows, session.k + 1)
    remove_abandoned_imports(session_factory)  # an import whose process died holds no name
    with session_factory() as s:  # cheap, and spares reading a large file for nothing
        check_dataset_name_free(s, dataset_name)
        if session is not None:
            check_session_name_free(s, session.name)
    report = ProgressTracker(progress)
    report("read", 0, None)
    vote_spec: VoteSpec | None = None
    if Path(path).is_dir():
        column_options = {
            "text_column": text_column,
            "image_column": image_column,
            "audio_column": audio_column,
            "link_column": link_column,
            "media_root": media_root,
        }
        given = [option for option, value in column_options.items() if value is not None]
        if given or tuple(ignore_columns):
            raise InvalidInput(
                f"{', '.join(given or ['ignore_columns'])} apply to data files; a folder of images "
                "takes labels (its CSV) and features_from"
            )
        loaded = read_image_dataset(
            path, labels, unlisted=check_choice(unlisted, "unlisted", ("error", "ignore")), features_from=features_from
        )
        if loaded.n_instances < min_rows:
            raise DataFileError(loaded.source, f"has {loaded.n_instances} images but at least {min_rows} are needed")
    else:
        if labels is not None:
            raise InvalidInput(f"labels applies to a folder of images; {Path(path).name!r} is a file")
        read_options: dict[str, Any] = dict(
            candidates_column=candidates_column,
            id_column=id_column,
            true_label_column=true_label_column,
            min_rows=min_rows,
            text_column=text_column,
            image_column=image_column,
            audio_column=audio_column,
            link_column=link_column,
            ignore_columns=tuple(ignore_columns),
            media_root=media_root,
            features_from=features_from,
        )
        if votes is None:
            if user_map is not None:
                read_options["user_names"] = read_user_map(user_map)
            loaded = read_dataset(path, **read_options)
            if loaded.votes is not None:
                loaded, vote_spec = votes_brought_by(loaded, min_votes=min_votes, min_share=min_share)
        else:
            loaded, vote_spec = read_items_with_votes(
                path, votes, min_votes=min_votes, min_share=min_share, read_options=read_options
            )
    n = loaded.n_instances
    if loaded.expert_answers and session is None:
        raise InvalidInput(
            f"{Path(path).name!r} carries {len(loaded.expert_answers)} expert answers (winnow's own export): "
            "give a session (--session NAME) to record them"
        )
    report("read", n, n)
    report("store", 0, n)
    dataset_id = store_dataset(
        session_factory,
        loaded,
        name=dataset_name,
        session=session,
        on_batch=lambda done, total: report("store", done, total),
        votes=vote_spec,
    )
    return dataset_id, n


def store_dataset(
    session_factory: sessionmaker[Session],
    loaded: LoadedDataset,
    *,
    name: str,
    session: SessionSpec | None = None,
    on_batch: Callable[[int, int], None] | None = None,
    votes: VoteSpec | None = None,
) -> int:
    """Write a dataset read by :mod:`app.io` (features, sets, content, featurizer record), and
    the labelling ``session`` and the crowd ``votes`` if given, all or nothing
    (:func:`app.store.import_dataset`);
    returns the dataset's id. A limit of the store the reader did not check is reported as a
    :class:`~app.io.DataFileError` naming the file."""
    from app.io import DataFileError

    record = loaded.featurizer
    answers = loaded.expert_answers or ()
    try:
        checked = check_dataset(
            DatasetSpec(
                name=name,
                X=loaded.X,
                candidates=loaded.candidates,
                label_names=loaded.label_names,
                external_ids=loaded.ids,
                true_labels=loaded.true_labels,
                feature_names=loaded.feature_names,
                layout=loaded.layout,
                texts=loaded.texts,
                media_paths=loaded.media_paths,
                media_kinds=loaded.media_kinds,
                links=loaded.links,
                media_root=loaded.media_root,
                featurizer=record.name if record is not None else None,
                featurizer_params=record.params if record is not None else None,
                featurizer_state=record.state if record is not None else None,
                votes=votes,
                label_studio_control=loaded.label_studio_control,
            )
        )
    except InvalidRecord as exc:
        raise DataFileError(loaded.source, str(exc)) from None
    position_of = {item_id: position for position, item_id in enumerate(loaded.ids)}

    def record_answers(s: Session, session_id: int) -> None:
        # winnow's own answers, back with who gave them: an answer within the item's set,
        # another label outside it (a resolve comes back as the label it settled on).
        for answer in answers:
            position = position_of[answer.item_id]
            inside = answer.label in {loaded.label_names[j] for j in np.flatnonzero(loaded.candidates[position])}
            try:
                record_event(
                    s,
                    session_id=session_id,
                    annotator=answer.annotator,
                    kind="answer" if inside else "other_label",
                    instance_position=position,
                    label=answer.label,
                )
            except InvalidInput as exc:
                raise DataFileError(
                    loaded.source, f"task {answer.item_id}: the expert answer: {exc}", row=answer.row, has_header=False
                ) from None

    return import_dataset(
        session_factory, checked, labelling=session, on_batch=on_batch, in_session=record_answers if answers else None
    ).dataset_id


def import_image_folder(
    session_factory: sessionmaker[Session],
    folder: str | Path,
    labels: str | Path | None = None,
    *,
    name: str | None = None,
    min_rows: int = 2,
    unlisted: str = "error",
    features_from: str | Path | None = None,
) -> tuple[int, int]:
    """``winnow import photos/ --labels labels.csv``: a folder of images as a dataset.

    The images stay where they are (the folder is the dataset's media root). See
    :func:`app.io.read_image_folder` for the two layouts. Returns the dataset id and its number
    of items.
    """
    if not Path(folder).is_dir():
        raise InvalidInput(f"{Path(folder).name!r} is not a folder of images")
    return import_file(
        session_factory,
        folder,
        name=name or Path(folder).resolve().name,
        min_rows=min_rows,
        labels=labels,
        unlisted=unlisted,
        features_from=features_from,
    )


def featurize_items(session_factory: sessionmaker[Session], dataset: int | str, items: Sequence[Any]) -> np.ndarray:
    """Features of new items with the featurizer recorded on ``dataset`` at its import.

    The same transform, fitted once on the dataset's items: a text featurized here gets the
    features it would have had in the original import, bit for bit.

    Parameters
    ----------
    dataset : int or str
        The dataset's id or name.
    items : sequence
        Texts (text featurizer) or image paths / uint8 arrays (image featurizer).

    Returns
    -------
    ndarray of shape (len(items), n_features), float64

    Raises
    ------
    InvalidInput
        The dataset's features were given as numbers (no featurizer is recorded), or an item
        cannot be featurized (:class:`app.io.media.ContentError`, naming its 1-based row).
    """
    from app.io.featurizers import FeaturizerRecord, featurizer_from_record

    with session_factory() as s:
        found = get_dataset_by_name(s, dataset) if isinstance(dataset, str) else get_dataset_by_id(s, dataset)
        stored = dataset_featurizer(s, found.id)
        dataset_name = found.name
    if stored is None:
        raise InvalidInput(
            f"dataset {dataset_name!r} records no featurizer: its features were imported as numbers, "
            "so new items need their features too"
        )
    featurizer = featurizer_from_record(FeaturizerRecord(stored.name, stored.params, stored.state))
    return np.asarray(featurizer.transform(list(items)), dtype=np.float64)


def create_session(
    session_factory: sessionmaker[Session],
    *,
    dataset_id: int,
    name: str,
    k: int,
    weighting: str,
    criterion: str = DEFAULT_STRATEGY,
    target_set: str,
    actor: str | None = None,
) -> int:
    """Create a labelling session on a stored dataset; returns its id.

    ``criterion`` defaults to :data:`engine.choices.DEFAULT_STRATEGY`, what sessions rank by
    unless told otherwise. ``actor``: the signed-in user in team mode (an admin); ``None`` for
    the command line.
    """

    def work(s: Session) -> int:
        labelling = create_labelling_session(
            s,
            dataset_id=dataset_id,
            name=name,
            k=k,
            weighting=weighting,
            criterion=criterion,
            target_set=target_set,
            actor=actor,
        )
        s.flush()
        return labelling.id

    return write_transaction(session_factory, work)


def session_id_by_name(session_factory: sessionmaker[Session], name: str) -> int:
    """The id of the labelling session called ``name`` (:class:`~app.store.RecordNotFound`)."""
    with session_factory() as s:
        return get_session_by_name(s, name).id


def dataset_id_by_name(session_factory: sessionmaker[Session], name: str) -> int:
    """The id of the dataset called ``name`` (:class:`~app.store.RecordNotFound`)."""
    with session_factory() as s:
        return get_dataset_by_name(s, name).id


def session_summaries(session_factory: sessionmaker[Session], *, actor: str | None) -> list[SessionConfig]:
    """The labelling sessions ``actor`` may list (configuration and dataset name), oldest first.

    ``actor`` is the signed-in user (an annotator sees only the sessions assigned to them:
    :mod:`app.store.policies.sessions`); ``None`` is the command line or single-user mode,
    which see every session.
    """
    with session_factory() as s:
        return session_configs(s, actor=actor)


def session_rights(session_factory: sessionmaker[Session], session_id: int, *, actor: str | None) -> frozenset[str]:
    """What ``actor`` may do with a session: keys of :data:`SESSION_ACTIONS` (``"open"``,
    ``"export_events"``, ``"change_keys"``, ...). The pages draw only what this allows; the
    store checks each read and write again."""
    with session_factory() as s:
        return session_actions(s, actor, session_id)


def creation_rights(session_factory: sessionmaker[Session], *, actor: str | None) -> frozenset[str]:
    """What ``actor`` may bring into the store: ``"create"`` (a session on a stored dataset)
    and ``"upload"`` (a file), as :mod:`app.store.policies` decides (admins in team mode)."""
    rights = set()
    with session_factory() as s:
        for right, check in (
            ("create", lambda: authorize_session(s, actor, "create")),
            ("upload", lambda: authorize_upload(s, actor)),
        ):
            try:
                check()
            except PermissionDenied:
                continue
            rights.add(right)
    return frozenset(rights)


def check_session_action(
    session_factory: sessionmaker[Session], session_id: int, action: str, *, actor: str | None
) -> None:
    """Refuse ``action`` (a key of :data:`SESSION_ACTIONS`) on a session unless ``actor`` may.

    Raises
    ------
    app.store.PermissionDenied
        An :class:`~engine.exceptions.InvalidInput` whose message says who may.
    """
    with session_factory() as s:
        authorize_session(s, actor, action, session_id)


def dataset_names(session_factory: sessionmaker[Session]) -> list[str]:
    """The names of the stored datasets, oldest first."""
    with session_factory() as s:
        return [d.name for d in list_datasets(s)]


def latest_session_id(session_factory: sessionmaker[Session], *, actor: str | None = None) -> int | None:
    """The session with the most recent activity among those ``actor`` may list (the one the
    browser app opens first; ``None``: every session)."""
    sessions = session_summaries(session_factory, actor=actor)
    return max(sessions, key=lambda x: (x.updated_at, x.session_id)).session_id if sessions else None


def record_answer(
    session_factory: sessionmaker[Session],
    session_name: str,
    *,
    annotator: str,
    kind: str,
    item: str | None = None,
    label: str | None = None,
    idempotency_key: str | None = None,
) -> int:
    """Record one event about the item with external id ``item``; returns the event id.

    ``item`` may be omitted for an ``undo`` (the annotator's latest event is undone). A request
    retried with the same ``idempotency_key`` is recorded once: the retry returns the id of the
    event the first one recorded (see :func:`app.store.record_event`).
    """
    session_id = session_id_by_name(session_factory, session_name)

    def work(s: Session) -> int:
        position = None if item is None else instance_position(s, session_id, item)
        event = record_event(
            s,
            session_id=session_id,
            annotator=annotator,
            kind=kind,
            instance_position=position,
            label=label,
            idempotency_key=idempotency_key,
        )
        s.flush()
        return event.id

    return write_transaction(session_factory, work)


def record_answers_file(
    session_factory: sessionmaker[Session], session_name: str, path: str | Path, *, annotator: str
) -> int:
    """Record every answer of a file (``id,label[,kind][,annotator]``) in one transaction;
    returns how many.

    All or nothing: the file is read and checked first (:func:`app.io.read_answers`: columns,
    kinds, blank cells, an id given twice, the bounds of :mod:`app.io.limits`), then every
    answer is checked by the store as a single answer is (:func:`app.store.record_events`: an
    unknown id, a label that is not a candidate of the item for ``label``, one that is for
    ``other_label``, who may answer) before any is written; the first refusal names the file
    and the row and writes nothing. The write lock is held for that one transaction: a few
    seconds for 60,000 answers (the items are looked up in a few queries, the events inserted
    in one statement). Rows without an ``annotator`` are ``annotator``'s.

    Raises
    ------
    DataFileError
        Naming the file, the row and the problem; nothing is written.
    """
    from app.io import DataFileError, read_answers

    rows = read_answers(path)
    has_header = Path(path).suffix.lower() != ".jsonl"
    session_id = session_id_by_name(session_factory, session_name)
    requests = [EventRequest(row.annotator or annotator, row.kind, row.item, row.label) for row in rows]

    def work(s: Session) -> int:
        try:
            return record_events(s, session_id=session_id, requests=requests)
        except RequestRefused as exc:
            raise DataFileError(path, str(exc), row=rows[exc.index].row, has_header=has_header) from None

    return write_transaction(session_factory, work)


def ensure_sample_session(session_factory: sessionmaker[Session], name: str = "demo") -> int:
    """The session ``name`` on the bundled sample digits, imported and created if missing."""
    if not SAMPLE_FILE.exists():
        raise InvalidInput(f"the bundled sample {SAMPLE_FILE.name} is missing; run python sample_data/make_sample.py")
    existing = [x.session_id for x in session_summaries(session_factory, actor=None) if x.name == name]
    if existing:
        return existing[0]
    spec = SessionSpec(name, k=10, weighting="uniform", criterion=DEFAULT_STRATEGY, target_set="all")
    if SAMPLE_DATASET in dataset_names(session_factory):
        return create_session(
            session_factory,
            dataset_id=dataset_id_by_name(session_factory, SAMPLE_DATASET),
            name=spec.name,
            k=spec.k,
            weighting=spec.weighting,
            criterion=spec.criterion,
            target_set=spec.target_set,
        )
    import_file(session_factory, SAMPLE_FILE, name=SAMPLE_DATASET, session=spec)
    return session_id_by_name(session_factory, name)
