"""Files uploaded in the browser, imported as a dataset: a data file alone, a data file with its
images or audio clips, a zip archive, or a folder of images sent as many files.

A data file alone is read from a temporary copy (it is not needed afterwards). As soon as media
come with it, they must outlive the upload: they are written to a folder of their own under
:func:`media_folder` (beside a SQLite store, or ``$WINNOW_MEDIA_DIR``), which becomes the
dataset's media root; the folder is removed again when the import fails.

What is accepted
----------------
* one data file (``.csv``, ``.tsv``, ``.txt``, ``.parquet``, ``.mat``, ``.npz``, or a Label Studio
  export ``.json``); its media
  paths and http(s) links are checked as in ``winnow import``;
* a data file and image / audio files: the files are stored flat (their base names), so the
  data file names them by file name (``cat.png``);
* a ``.zip``: every member checked before it is unpacked (:mod:`app.io.zips`: no absolute paths,
  no ``..``, no links, no encryption, no two members on one file, image headers, at most
  :data:`MAX_ZIP_MEMBERS` members and :data:`MAX_ZIP_BYTES` bytes once unpacked, counted again
  while unpacking), members keeping their names; it may hold
  the data file, or a data file may be uploaded beside it. Without any data file, the archive
  (or the uploaded images) must be one sub-folder per label, as ``winnow import photos/``.

A votes file may come with a data file (``votes``): the candidate sets are made from it as with
``winnow import --votes`` (:func:`app.service.votes.read_items_with_votes`), with the same
``min_votes`` / ``min_share`` choices.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from app.service.sessions import create_session, import_file, session_id_by_name
from app.service.tasks import ProgressCallback
from app.store import (
    SessionSpec,
    authorize_session,
    authorize_upload,
    check_session_spec,
    list_datasets,
    session_configs,
)
from engine.exceptions import InvalidInput

__all__ = [
    "MAX_ZIP_BYTES",
    "MAX_ZIP_MEMBERS",
    "UPLOAD_EXTENSIONS",
    "DATA_FILE_EXTENSIONS",
    "ARCHIVE_EXTENSIONS",
    "MEDIA_EXTENSIONS",
    "safe_file_name",
    "start_session",
    "media_folder",
    "import_upload",
    "upload_columns",
]

#: Largest total size of a zip archive's members once extracted (2 GiB).
MAX_ZIP_BYTES = 2 << 30
#: Most members a zip archive may hold.
MAX_ZIP_MEMBERS = 50_000

#: Extensions of the data files an upload may hold (the readers of ``winnow import``).
DATA_FILE_EXTENSIONS: tuple[str, ...] = (".csv", ".tsv", ".txt", ".parquet", ".mat", ".npz", ".json")
#: Extensions of an archive of data and media files.
ARCHIVE_EXTENSIONS: tuple[str, ...] = (".zip",)
#: Extensions of the images and audio clips an upload may hold.
MEDIA_EXTENSIONS: tuple[str, ...] = (
    ".png",
    ".jpg",
    ".jpeg",
    ".gif",
    ".bmp",
    ".tif",
    ".tiff",
    ".webp",
    ".wav",
    ".wave",
    ".mp3",
    ".ogg",
    ".oga",
    ".opus",
    ".flac",
    ".m4a",
    ".aac",
)
#: Extensions the upload form accepts (data files, a zip archive, images and audio clips).
UPLOAD_EXTENSIONS: tuple[str, ...] = (*DATA_FILE_EXTENSIONS, *ARCHIVE_EXTENSIONS, *MEDIA_EXTENSIONS)


def safe_file_name(name: str) -> str:
    """A file's base name with only harmless characters: never empty, never hidden, never a
    path (the one rule for every name a user gives a file winnow writes or serves).

    >>> safe_file_name("../my data (1).csv")
    'my_data_1_.csv'
    >>> safe_file_name(".."), safe_file_name(".env")
    ('file', 'env')
    """
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name).name).lstrip(".")
    return cleaned or "file"


def media_folder(session_factory: sessionmaker[Session]) -> Path:
    """Where uploaded media are kept: ``$WINNOW_MEDIA_DIR``, else ``<store>-media`` beside a
    SQLite file, else ``~/.local/share/winnow/media``."""
    configured = os.environ.get("WINNOW_MEDIA_DIR", "").strip()
    if configured:
        return Path(configured).expanduser().resolve()
    bind = session_factory.kw.get("bind")
    url = getattr(bind, "url", None)
    database = getattr(url, "database", None)
    if url is not None and url.get_backend_name() == "sqlite" and database and database != ":memory:":
        db = Path(database).resolve()
        return db.with_name(f"{db.stem}-media")
    return Path.home() / ".local" / "share" / "winnow" / "media"


def upload_columns(file_name: str, content: bytes) -> list[str]:
    """The column names of an uploaded CSV/TSV/TXT or Parquet file (``[]`` when unreadable),
    so the form can offer them as text, image and audio columns."""
    import csv
    import io

    extension = Path(file_name).suffix.lower()
    try:
        if extension == ".parquet":
            import pyarrow.parquet as pq

            return [str(n) for n in pq.ParquetFile(io.BytesIO(content)).schema_arrow.names]
        if extension in (".csv", ".tsv", ".txt"):
            text = content[:65536].decode("utf-8-sig", errors="replace")
            first = next((line for line in text.splitlines() if line.strip()), "")
            delimiter = {".csv": ",", ".tsv": "\t"}.get(extension) or max("\t,;", key=first.count)
            return [cell.strip() for cell in next(csv.reader([first], delimiter=delimiter), []) if cell.strip()]
    except Exception:  # noqa: BLE001 - any unreadable upload simply offers no columns; the import says why
        return []
    return []


def _extract_zip(content: bytes, target: Path, shown: str) -> None:
    """Check, then unpack, an uploaded archive into ``target`` (:func:`app.io.zips.unpack_zip`)."""
    import io

    from app.io.zips import ZipLimits, unpack_zip

    unpack_zip(io.BytesIO(content), target, shown, ZipLimits(max_members=MAX_ZIP_MEMBERS, max_bytes=MAX_ZIP_BYTES))


def import_upload(
    session_factory: sessionmaker[Session],
    files: Sequence[tuple[str, bytes]],
    *,
    name: str,
    min_rows: int,
    columns: Mapping[str, Any] | None = None,
    media_dir: str | os.PathLike[str] | None = None,
    progress: ProgressCallback | None = None,
    session: SessionSpec | None = None,
    votes: tuple[str, bytes] | None = None,
    min_votes: int | None = None,
    min_share: float | None = None,
) -> int:
    """Import uploaded files as the dataset ``name``; returns its id (see the module docstring).

    Parameters
    ----------
    files : sequence of (str, bytes)
        Each uploaded file's name (as the user called it) and content.
    name : str
        The dataset's name.
    min_rows : int
        Fewest items accepted.
    columns : mapping, optional
        Content options of :func:`app.service.import_file` (``text_column``, ``image_column``,
        ``audio_column``, ``link_column``, ``ignore_columns``).
    media_dir : str or os.PathLike, optional
        Where media folders are made (default :func:`media_folder`).
    progress : ProgressCallback, optional
        Told about the import's ``read`` and ``store`` stages (:func:`app.service.import_file`).
    session : SessionSpec, optional
        A labelling session to create with the dataset, all or nothing (see
        :func:`app.service.import_file`).
    votes : (str, bytes), optional
        An uploaded votes file (name and content): the candidate sets are made from it.
    min_votes, min_share : optional
        With ``votes``: the thresholds of :func:`app.service.import_file`.

    Raises
    ------
    InvalidInput
        Nothing usable uploaded, two data files, an unsafe archive, votes without a data
        file, or a file the reader rejects (its message names the file as the user called it).
    """
    with tempfile.TemporaryDirectory(prefix="winnow-votes-") as votes_dir:
        vote_options: dict[str, Any] = {}
        shown_votes: tuple[str, str] | None = None
        if votes is not None:
            votes_path = Path(votes_dir) / safe_file_name(votes[0])
            votes_path.write_bytes(votes[1])
            vote_options = {"votes": votes_path, "min_votes": min_votes, "min_share": min_share}
            shown_votes = (str(votes_path), votes[0])
        elif min_votes is not None or min_share is not None:
            raise InvalidInput("the vote thresholds apply to a votes file: upload one too")
        return _import_upload(
            session_factory, files, name, min_rows, columns, media_dir, progress, session, vote_options, shown_votes
        )


def _import_upload(
    session_factory: sessionmaker[Session],
    files: Sequence[tuple[str, bytes]],
    name: str,
    min_rows: int,
    columns: Mapping[str, Any] | None,
    media_dir: str | os.PathLike[str] | None,
    progress: ProgressCallback | None,
    session: SessionSpec | None,
    vote_options: dict[str, Any],
    shown_votes: tuple[str, str] | None,
) -> int:
    from app.io import DataFileError  # pandas and pyarrow: only when an upload comes

    options = dict(columns or {})
    unknown = sorted(set(options) - {"text_column", "image_column", "audio_column", "link_column", "ignore_columns"})
    if unknown:
        raise TypeError(f"columns holds unknown options {unknown}")
    if not files:
        raise InvalidInput("choose a file to upload first")
    by_kind: dict[str, list[tuple[str, bytes]]] = {"table": [], "zip": [], "media": []}
    for file_name, content in files:
        extension = Path(file_name).suffix.lower()
        kind = (
            "table"
            if extension in DATA_FILE_EXTENSIONS
            else "zip"
            if extension in ARCHIVE_EXTENSIONS
            else "media"
            if extension in MEDIA_EXTENSIONS
            else None
        )
        if kind is None:
            raise InvalidInput(
                f"{Path(file_name).name!r} is not a data file, a zip archive, an image or an audio clip "
                f"(accepted: {', '.join(UPLOAD_EXTENSIONS)})"
            )
        by_kind[kind].append((file_name, content))
    if len(by_kind["table"]) > 1:
        raise InvalidInput(f"upload one data file at a time; got {', '.join(repr(n) for n, _ in by_kind['table'])}")

    if not by_kind["zip"] and not by_kind["media"]:
        file_name, content = by_kind["table"][0]
        with tempfile.TemporaryDirectory(prefix="winnow-upload-") as tmp_dir:
            path = Path(tmp_dir) / safe_file_name(file_name)
            path.write_bytes(content)
            try:
                dataset_id, _ = import_file(
                    session_factory,
                    path,
                    name=name,
                    min_rows=min_rows,
                    progress=progress,
                    session=session,
                    **vote_options,
                    **options,
                )
            except DataFileError as exc:
                # The reader names the temporary copy; show the name the user knows.
                raise InvalidInput(_shown(str(exc), shown_votes).replace(str(path), file_name)) from None
        return dataset_id

    root = Path(media_dir) if media_dir is not None else media_folder(session_factory)
    folder = root / f"{safe_file_name(name)}-{secrets.token_hex(4)}"
    folder.mkdir(parents=True)
    try:
        for file_name, content in by_kind["zip"]:
            _extract_zip(content, folder, repr(Path(file_name).name))
        for file_name, content in by_kind["media"]:
            destination = folder / safe_file_name(file_name)
            if destination.exists():  # "x y.png" and "x_y.png" are both stored as x_y.png
                raise InvalidInput(
                    f"{Path(file_name).name!r} would replace another uploaded file ({destination.name!r}); rename one"
                )
            destination.write_bytes(content)
        tables = [(n, c) for n, c in by_kind["table"]]
        data: Path | None  # None: a folder of images, one sub-folder per label
        if tables:
            file_name, content = tables[0]
            data = folder / safe_file_name(file_name)
            data.write_bytes(content)
            shown = file_name
        else:
            found = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in DATA_FILE_EXTENSIONS)
            if len(found) > 1:
                raise InvalidInput(
                    f"the archive holds {len(found)} data files "
                    f"({', '.join(p.relative_to(folder).as_posix() for p in found[:3])}); keep one"
                )
            data = found[0] if found else None
            shown = data.relative_to(folder).as_posix() if data is not None else "the uploaded images"
        try:
            if data is None:
                if vote_options:
                    raise InvalidInput("votes are about the items of a data file; upload the data file too")
                if options:
                    raise InvalidInput(
                        "column choices apply to a data file; these images have none (one "
                        "sub-folder per label is expected)"
                    )
                dataset_id, _ = import_file(
                    session_factory, folder, name=name, min_rows=min_rows, progress=progress, session=session
                )
            else:
                dataset_id, _ = import_file(
                    session_factory,
                    data,
                    name=name,
                    min_rows=min_rows,
                    progress=progress,
                    session=session,
                    **vote_options,
                    **options,
                )
        except DataFileError as exc:
            raise InvalidInput(
                _shown(str(exc), shown_votes)
                .replace(str(data if data is not None else folder), shown)
                .replace(str(folder.resolve()), "upload")
                .replace(str(folder), "upload")
            ) from None
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return dataset_id


def _shown(message: str, shown_votes: tuple[str, str] | None) -> str:
    """``message`` with the votes file's temporary path replaced by the name the user gave it."""
    return message if shown_votes is None else message.replace(shown_votes[0], shown_votes[1])


def start_session(
    session_factory: sessionmaker[Session],
    *,
    name: str,
    k: int,
    weighting: str,
    criterion: str,
    target_set: str,
    upload: tuple[str, bytes] | None = None,
    dataset_name: str | None = None,
    files: Sequence[tuple[str, bytes]] = (),
    columns: Mapping[str, Any] | None = None,
    progress: ProgressCallback | None = None,
    actor: str | None = None,
    votes: tuple[str, bytes] | None = None,
    min_votes: int | None = None,
    min_share: float | None = None,
) -> int:
    """The Sessions page's "Create session": import an upload (or take a stored dataset), then
    create the session. Returns the session id.

    In team mode ``actor`` (the signed-in user) must be an admin (the upload and session
    policies of :mod:`app.store.policies`); that is checked before anything is read or imported.

    Parameters
    ----------
    name : str
        Session name; empty uses the uploaded data file's (or archive's) or the dataset's name.
    upload : (str, bytes), optional
        An uploaded file's name and content.
    dataset_name : str, optional
        A dataset already in the store. Give either uploads or ``dataset_name``.
    files : sequence of (str, bytes), optional
        More uploaded files: a data file with its images or audio clips, a zip archive, or a
        folder of images (see :mod:`app.service.uploads`).
    columns : mapping, optional
        The upload's content options (``text_column``, ``image_column``, ``audio_column``,
        ``link_column``, ``ignore_columns``), as in :func:`import_file`.
    progress : ProgressCallback, optional
        Told about the import's ``read`` and ``store`` stages (:func:`import_file`).
    votes : (str, bytes), optional
        An uploaded votes file: the candidate sets are made from it (:func:`import_upload`).
    min_votes, min_share : optional
        With ``votes``: keep labels with at least this many votes / this share of the votes.

    Raises
    ------
    InvalidInput
        Nothing chosen, a name already taken, or a file the reader rejects (its message names
        the file as the user called it, not the temporary copy).
    """
    from app.io import check_upload_size  # pandas and pyarrow: only when an upload comes

    uploads = ([upload] if upload is not None else []) + list(files)
    with session_factory() as s:
        if uploads:
            authorize_upload(s, actor)
        authorize_session(s, actor, "create", what="create a session")
    for file_name, content in uploads + ([votes] if votes is not None else []):
        check_upload_size(file_name, len(content))  # the browser's cap may be off: the app's own
    if votes is not None and not uploads:
        raise InvalidInput("votes come with an uploaded data file of items, not with a stored dataset")
    if uploads and dataset_name is not None:
        raise InvalidInput("give an uploaded file or a stored dataset, not both")
    if not uploads and dataset_name is None:
        raise InvalidInput("choose a file to upload first")
    dataset_stem = _upload_stem(uploads) if uploads else str(dataset_name)
    name = name.strip() or dataset_stem
    if not name:
        raise InvalidInput("give the session a name")
    spec = check_session_spec(SessionSpec(name, k, weighting, criterion, target_set))
    with session_factory() as s:
        known_sessions = {x.name for x in session_configs(s)}
        known_datasets = {d.name: d.id for d in list_datasets(s)}
    if name in known_sessions:
        raise InvalidInput(f"a session called {name!r} already exists; choose another name or open it above")
    if uploads:
        if dataset_stem in known_datasets:
            raise InvalidInput(
                f"a dataset called {dataset_stem!r} is already stored; "
                "rename the file or create the session from the stored dataset"
            )
        # Dataset and session are published together: a bad upload leaves neither.
        import_upload(
            session_factory,
            uploads,
            name=dataset_stem,
            min_rows=k + 1,
            columns=columns,
            progress=progress,
            session=spec,
            votes=votes,
            min_votes=min_votes,
            min_share=min_share,
        )
        return session_id_by_name(session_factory, spec.name)
    if dataset_name not in known_datasets:
        raise InvalidInput(f"no dataset called {dataset_name!r}; known datasets: {sorted(known_datasets)}")
    return create_session(
        session_factory,
        dataset_id=known_datasets[dataset_name],
        name=spec.name,
        k=spec.k,
        weighting=spec.weighting,
        criterion=spec.criterion,
        target_set=spec.target_set,
        actor=actor,
    )


def _upload_stem(uploads: Sequence[tuple[str, bytes]]) -> str:
    """The dataset name an upload gets: its data file's, else its archive's, else "images"."""
    names = [Path(safe_file_name(n)) for n, _ in uploads]
    for group in (DATA_FILE_EXTENSIONS, ARCHIVE_EXTENSIONS):
        found = [p for p in names if p.suffix.lower() in group]
        if found:
            return found[0].stem
    return "images"
