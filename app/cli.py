"""The ``winnow`` command line: the browser app's work without the browser.

Commands parse their options and print; the work is done by the service layer
(:mod:`app.service`), the same functions the browser app calls. Every user error ends with
exit status 2 and one line on stderr (``error: ...``); the database is left unchanged because
each write is a single transaction.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from app.store import SessionSpec, open_store
from app.store.models import EVENT_KINDS, TARGET_SETS
from engine import check_choice
from engine.choices import CRITERIA, DEFAULT_STRATEGY, WEIGHTINGS
from engine.exceptions import InvalidInput, SolverError, WinnowError

if TYPE_CHECKING:
    from app.service.tasks import ProgressCallback, ProgressUpdate
    from app.store import LabelSettings

# The file readers, the workbench and the engine pull in pandas, scikit-learn and OR-Tools
# (seconds of imports): commands import the service layer when they run, so `--help` stays
# instant.

DEFAULT_DB = "winnow.db"
#: The ASGI app ``winnow ui`` serves: Streamlit behind winnow's sign-in gate.
UI_SERVER = Path(__file__).resolve().parent / "ui" / "server.py"

app = typer.Typer(
    name="winnow",
    help="Rank which partially labelled items an expert should settle first, and label them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
session_app = typer.Typer(help="Create, list and inspect labelling sessions.", no_args_is_help=True)
app.add_typer(session_app, name="session")
user_app = typer.Typer(help="User accounts of a team store (admin, annotator, reviewer).", no_args_is_help=True)
app.add_typer(user_app, name="user")

out = Console()
err = Console(stderr=True)

DbOption = typer.Option(DEFAULT_DB, "--db", help="SQLite file or any SQLAlchemy URL (postgresql://...).")


class UserError(InvalidInput):
    """A mistake in the command line the user can fix: printed as one line, exit status 2."""


@contextlib.contextmanager
def progress(description: str) -> Iterator[None]:
    """A spinner with elapsed time on stderr while work runs (only on a terminal)."""
    if not err.is_terminal:
        yield
        return
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err, transient=True
    ) as bar:
        bar.add_task(description, total=None)
        yield


@contextlib.contextmanager
def progress_bar(description: str) -> Iterator[ProgressCallback | None]:
    """A bar per stage of the work (rows, neighbours found, %, time left) on stderr.

    Yields the :class:`~app.service.tasks.ProgressCallback` to hand to the service layer,
    or ``None`` when stderr is not a terminal (scripts and pipes get no bar).
    """
    if not err.is_terminal:
        yield None
        return
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=err, transient=True) as bar:
        tasks: dict[str, TaskID] = {}

        def report(update: ProgressUpdate) -> None:
            task = tasks.get(update.stage)
            if task is None:
                task = tasks[update.stage] = bar.add_task(f"{description}: {update.label}", total=update.total)
            bar.update(task, completed=update.done, total=update.total)

        yield report


# ---------------------------------------------------------------------------- import

# Item content: the same options for `winnow import` and `winnow rank` (other tools rely on the names).
TextColumnOption = typer.Option(None, "--text-column", help="Column with each item's text (default: 'text').")
ImageColumnOption = typer.Option(
    None, "--image-column", help="Column with each item's image file or URL (default: 'image' or 'path')."
)
AudioColumnOption = typer.Option(None, "--audio-column", help="Column with each item's audio file (default: 'audio').")
LinkColumnOption = typer.Option(
    None, "--link-column", help="Column with an http(s) link per item (default: 'link' or 'url')."
)
IgnoreColumnsOption = typer.Option(
    None,
    "--ignore-columns",
    help="Columns to skip, comma-separated (repeat the option or not: a,b or --ignore-columns a --ignore-columns b).",
)
FeaturesFromOption = typer.Option(
    None, "--features-from", help="Embeddings aligned by id (.npy, .npz, .parquet) used as the features."
)
MediaRootOption = typer.Option(
    None, "--media-root", help="Folder the media paths are relative to (default: the data file's folder)."
)


MaxErrorOption = typer.Option(
    None, "--max-error", help="Largest error accepted in model labels, > 0 and < 0.5 (default 0.05)."
)
ConfidenceOption = typer.Option(
    None, "--confidence", help="Confidence with which the stated error must hold, >= 0.5 and < 1 (default 0.9)."
)
AuditOption = typer.Option(
    None, "--audit", help="Share of served items drawn at random to measure model labels, 0 to 0.5 (default 0.05)."
)


def _label_settings(max_error: float | None, confidence: float | None, audit: float | None) -> LabelSettings | None:
    """The label settings given on the command line (checked now, before anything is written),
    or ``None`` when none was given."""
    from app.store import LabelSettings

    if max_error is None and confidence is None and audit is None:
        return None
    defaults = LabelSettings()
    return LabelSettings(
        max_error=defaults.max_error if max_error is None else max_error,
        confidence=defaults.confidence if confidence is None else confidence,
        audit_share=defaults.audit_share if audit is None else audit,
    )


def _column_list(values: list[str] | None) -> tuple[str, ...]:
    """``--ignore-columns a,b --ignore-columns c`` as ``("a", "b", "c")``."""
    return tuple(part.strip() for value in values or () for part in value.split(",") if part.strip())


def _content_options(
    text_column: str | None,
    image_column: str | None,
    audio_column: str | None,
    link_column: str | None,
    ignore_columns: list[str] | None,
    features_from: Path | None,
    media_root: Path | None,
) -> dict[str, object]:
    """The content options as keyword arguments of the service layer (``None`` left out)."""
    options: dict[str, object] = {
        "text_column": text_column,
        "image_column": image_column,
        "audio_column": audio_column,
        "link_column": link_column,
        "features_from": features_from,
        "media_root": media_root,
    }
    options = {key: value for key, value in options.items() if value is not None}
    ignored = _column_list(ignore_columns)
    if ignored:
        options["ignore_columns"] = ignored
    return options


@app.command("import")
def import_command(
    file: Path = typer.Argument(
        ..., help="CSV/TSV, Parquet, .mat (PLL benchmark) or .npz file, or a folder of images (with --labels)."
    ),
    db: str = DbOption,
    name: str | None = typer.Option(None, help="Dataset name (default: the file name)."),
    candidates_column: str = typer.Option("candidates", help="Column with candidate sets like 'cat|dog'."),
    id_column: str | None = typer.Option(None, help="Id column (default: 'id' when present)."),
    true_label_column: str | None = typer.Option(None, help="True-label column, for simulations."),
    text_column: str | None = TextColumnOption,
    image_column: str | None = ImageColumnOption,
    audio_column: str | None = AudioColumnOption,
    link_column: str | None = LinkColumnOption,
    ignore_columns: list[str] | None = IgnoreColumnsOption,
    features_from: Path | None = FeaturesFromOption,
    media_root: Path | None = MediaRootOption,
    labels: Path | None = typer.Option(
        None, "--labels", help="For a folder of images: CSV with path,candidates[,id,true_label] per image."
    ),
    ignore_unlisted: bool = typer.Option(
        False, "--ignore-unlisted", help="For a folder with --labels: leave out images the CSV does not list."
    ),
    session: str | None = typer.Option(None, help="Also create a labelling session with this name."),
    k: int = typer.Option(10, "-k", help="Neighbours of the session's k-NN vote."),
    weighting: str = typer.Option("uniform", help=f"One of {', '.join(WEIGHTINGS)}."),
    criterion: str = typer.Option(DEFAULT_STRATEGY, help=f"Query criterion: {', '.join(CRITERIA)}."),
    max_error: float | None = MaxErrorOption,
    confidence: float | None = ConfidenceOption,
    audit: float | None = AuditOption,
) -> None:
    """Import a partially labelled file, or a folder of images, into a database: all rows (and the
    session) or nothing.

    Items may carry content: a text, an image or an audio clip (and a link). Without numeric
    feature columns, texts get TF-IDF + SVD features and images built-in image features; audio
    needs numeric columns or --features-from.

    Examples: winnow import sample_data/digits_partial.csv --db winnow.db --session first;
    winnow import sample_data/texts.csv; winnow import sample_data/photos --labels sample_data/photos_labels.csv
    """
    from app.service import change_label_settings, import_file

    spec = None
    settings = _label_settings(max_error, confidence, audit)
    if settings is not None and session is None:
        raise UserError("--max-error, --confidence and --audit are settings of a session: give --session NAME too")
    if session is not None:  # every option is checked before anything is read or written
        check_choice(weighting, "--weighting", WEIGHTINGS)
        check_choice(criterion, "--criterion", CRITERIA)
        if k < 1:
            raise UserError(f"-k must be >= 1, got {k}")
        spec = SessionSpec(session, k=k, weighting=weighting, criterion=criterion, target_set="all")
    options = _content_options(
        text_column, image_column, audio_column, link_column, ignore_columns, features_from, media_root
    )
    is_folder = file.is_dir()
    if labels is not None and not is_folder:
        raise UserError(f"--labels goes with a folder of images; {file} is not a folder")
    if ignore_unlisted and labels is None:
        raise UserError("--ignore-unlisted goes with a folder of images and --labels")
    if is_folder:
        extra = [f"--{key.replace('_', '-')}" for key in options if key != "features_from"]
        if extra:
            raise UserError(
                f"options for a data file ({', '.join(extra)}) do not apply to a folder of images; "
                "it takes --labels and --features-from"
            )
    Session = open_store(db, create=True)  # importing is what makes a store
    dataset_name = name or (file.resolve().name if is_folder else file.stem)
    with progress_bar(f"import {file.name}") as report:
        if is_folder:
            dataset_id, n = import_file(
                Session,
                file,
                name=dataset_name,
                min_rows=max(k, 0) + 1,
                labels=labels,
                unlisted="ignore" if ignore_unlisted else "error",
                progress=report,
                session=spec,
                **options,  # type: ignore[arg-type]
            )
        else:
            dataset_id, n = import_file(
                Session,
                file,
                name=dataset_name,
                candidates_column=candidates_column,
                id_column=id_column,
                true_label_column=true_label_column,
                min_rows=max(k, 0) + 1,
                progress=report,
                session=spec,
                **options,  # type: ignore[arg-type]
            )
    out.print(f"Imported {n} instances from {file} as dataset {dataset_name!r} (id {dataset_id}).")
    if spec is not None:
        if settings is not None:
            change_label_settings(
                Session,
                spec.name,
                max_error=settings.max_error,
                confidence=settings.confidence,
                audit_share=settings.audit_share,
            )
        out.print(f"Created session {spec.name!r}.")


@app.command()
def init(db: str = DbOption) -> None:
    """Create an empty store (or upgrade an existing one); other commands than import need one.

    Example: winnow init --db team.db   (then winnow user add ada --role admin --db team.db)
    """
    open_store(db, create=True)
    out.print(f"{db} is a winnow store, its schema up to date.", markup=False, highlight=False)


# ---------------------------------------------------------------------------- rank


@app.command()
def rank(
    file: Path | None = typer.Argument(None, help="Rank straight from a file, without a database."),
    session: str | None = typer.Option(None, help="Rank a stored session instead (its current answers count)."),
    db: str = DbOption,
    criterion: str = typer.Option(DEFAULT_STRATEGY, help=f"One of {', '.join(CRITERIA)} (file mode)."),
    k: int = typer.Option(10, "-k", help="Neighbours (file mode)."),
    weighting: str = typer.Option("uniform", help=f"One of {', '.join(WEIGHTINGS)} (file mode)."),
    seed: int = typer.Option(0, help="Seed of the 'random' criterion."),
    text_column: str | None = TextColumnOption,
    image_column: str | None = ImageColumnOption,
    audio_column: str | None = AudioColumnOption,
    link_column: str | None = LinkColumnOption,
    ignore_columns: list[str] | None = IgnoreColumnsOption,
    features_from: Path | None = FeaturesFromOption,
    media_root: Path | None = MediaRootOption,
    output: Path = typer.Option(..., "-o", "--output", help="ranked.csv or ranked.json"),
    top: int | None = typer.Option(None, help="Keep only the best N rows."),
    dask: str | None = typer.Option(
        None,
        "--dask",
        metavar="SCHEDULER_ADDRESS",
        help="Score on a running Dask scheduler (file mode; needs winnow[scale]).",
    ),
    workers: int | None = typer.Option(
        None, "--workers", min=1, help="Score on a local Dask cluster of N worker processes (file mode)."
    ),
) -> None:
    """Write the ranked query list: which partial items to settle first.

    Example: winnow rank sample_data/digits_partial.csv --criterion apl -k 10 -o ranked.csv
    (add --workers 4 or --dask tcp://host:8786 to score over Dask); a file of texts works as
    it is: winnow rank sample_data/texts.csv -o ranked.csv
    """
    if (file is None) == (session is None):
        raise UserError("give either a FILE or --session NAME")
    options = _content_options(
        text_column, image_column, audio_column, link_column, ignore_columns, features_from, media_root
    )
    if session is not None and options:
        raise UserError(
            f"options for a FILE ({', '.join('--' + key.replace('_', '-') for key in options)}) do not "
            "apply to --session: a stored session already has its features"
        )
    if dask is not None and (workers is not None or session is not None):
        raise UserError("--dask goes with a FILE and without --workers")
    if workers is not None and session is not None:
        raise UserError("--workers goes with a FILE, not with --session")
    from app.io import write_table
    from app.service import Workbench, rank_file, session_id_by_name

    if file is not None:
        check_choice(criterion, "--criterion", CRITERIA)
        check_choice(weighting, "--weighting", WEIGHTINGS)
        table = rank_file(
            file,
            criterion=criterion,
            k=k,
            weighting=weighting,
            seed=seed,
            dask=dask,
            workers=workers,
            progress=progress,
            **options,
        )  # type: ignore[arg-type]
    else:
        Session = open_store(db, create=False)
        with progress_bar(f"session {session}") as report:
            table = Workbench.open(Session, session_id_by_name(Session, session), progress=report).ranked_table()
    if top is not None:
        table = table.head(top)
    path = write_table(table, output)
    out.print(f"Wrote {len(table)} ranked items to {path}.")


# ---------------------------------------------------------------------------- sessions


@session_app.command("new")
def session_new(
    name: str = typer.Argument(..., help="Unique session name."),
    dataset: str = typer.Option(..., help="Name of an imported dataset."),
    db: str = DbOption,
    k: int = typer.Option(10, "-k"),
    weighting: str = typer.Option("uniform", help=f"One of {', '.join(WEIGHTINGS)}."),
    criterion: str = typer.Option(DEFAULT_STRATEGY, help=f"One of {', '.join(CRITERIA)}."),
    target_set: str = typer.Option("all", help=f"One of {', '.join(TARGET_SETS)}."),
    overlap: int = typer.Option(
        1, min=1, help="Annotators who answer each item (1 splits the work; 2+ measures agreement)."
    ),
    max_error: float | None = MaxErrorOption,
    confidence: float | None = ConfidenceOption,
    audit: float | None = AuditOption,
) -> None:
    """Start a labelling session on an imported dataset.

    Example: winnow session new week1 --dataset digits_partial --criterion apl -k 10 --max-error 0.05 --audit 0.05
    """
    from app.service import change_label_settings, create_session, dataset_id_by_name, set_session_overlap

    settings = _label_settings(max_error, confidence, audit)
    Session = open_store(db, create=False)
    create_session(
        Session,
        dataset_id=dataset_id_by_name(Session, dataset),
        name=name,
        k=k,
        weighting=weighting,
        criterion=criterion,
        target_set=target_set,
    )
    if settings is not None:
        change_label_settings(
            Session,
            name,
            max_error=settings.max_error,
            confidence=settings.confidence,
            audit_share=settings.audit_share,
        )
    if overlap != 1:
        set_session_overlap(Session, name, overlap)
    out.print(f"Created session {name!r} on dataset {dataset!r}" + (f" (overlap {overlap})." if overlap != 1 else "."))


@session_app.command("assign")
def session_assign(
    name: str = typer.Argument(..., help="Session name."),
    users: list[str] = typer.Argument(..., help="User names."),
    db: str = DbOption,
) -> None:
    """Let users answer in a session.  Example: winnow session assign week1 alice bob"""
    from app.service import assign

    added = assign(open_store(db, create=False), name, users)
    already = [u for u in users if u not in added]
    out.print(
        f"Assigned {', '.join(added) or 'nobody new'} to session {name!r}"
        + (f" ({', '.join(already)} already were)." if already else ".")
    )


@session_app.command("overlap")
def session_overlap_command(
    name: str = typer.Argument(..., help="Session name."),
    overlap: int = typer.Argument(..., min=1, help="Annotators who answer each item."),
    db: str = DbOption,
) -> None:
    """Set how many annotators answer each item.  Example: winnow session overlap week1 2"""
    from app.service import set_session_overlap

    set_session_overlap(open_store(db, create=False), name, overlap)
    out.print(f"Session {name!r}: each item is answered by {overlap} annotator(s).")


@session_app.command("settings")
def session_settings(
    name: str = typer.Argument(..., help="Session name."),
    db: str = DbOption,
    max_error: float | None = MaxErrorOption,
    confidence: float | None = ConfidenceOption,
    audit: float | None = AuditOption,
) -> None:
    """Show or change how far model labels must be trusted, and the share of audits.

    With no option, prints the current values. A target needs audits: with no error among
    them, 45 audited answers state 5% at 90% confidence (59 at 95%, 114 for 2% at 90%).

    Example: winnow session settings week1 --max-error 0.02 --confidence 0.95 --audit 0.1
    """
    from app.service import change_label_settings, session_label_settings
    from engine.calibration import audits_needed

    Session = open_store(db, create=False)
    if max_error is None and confidence is None and audit is None:
        settings = session_label_settings(Session, name)
    else:
        settings = change_label_settings(Session, name, max_error=max_error, confidence=confidence, audit_share=audit)
    out.print(
        f"Session {name!r}: max error {settings.max_error:g}, confidence {settings.confidence:g}, "
        f"audit share {settings.audit_share:g}; stating it needs at least "
        f"{audits_needed(settings.max_error, settings.confidence)} audited answers (none wrong).",
        markup=False,
        highlight=False,
    )


@session_app.command("list")
def session_list(db: str = DbOption) -> None:
    """List the sessions of a database.  Example: winnow session list --db winnow.db"""
    from app.service import session_summaries

    table = Table("session", "dataset", "k", "weighting", "criterion", "targets", "created")
    for x in session_summaries(open_store(db, create=False), actor=None):  # the command line sees every session
        table.add_row(
            x.name, x.dataset_name, str(x.k), x.weighting, x.criterion, x.target_set, f"{x.created_at:%Y-%m-%d %H:%M}"
        )
    out.print(table)


@session_app.command("status")
def session_status(
    name: str = typer.Argument(...),
    db: str = DbOption,
    top: int = typer.Option(5, help="How many next queries to show."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Progress of a session and its next queries.  Example: winnow session status week1"""
    from app.service import Workbench, overlap_of, session_id_by_name, team_figures

    Session = open_store(db, create=False)
    with progress_bar(f"session {name}") as report:
        bench = Workbench.open(Session, session_id_by_name(Session, name), progress=report)
    people, pairs, shared = team_figures(bench, actor=None)
    labels = bench.labels()
    summary: dict[str, Any] = {
        "session": name,
        **bench.summary(),
        "overlap": overlap_of(bench),
        **shared,
        "labels": dict(labels.counts),
        "audited_answers": labels.n_audited,
        "stated_error": labels.calibration.bound,
        "statement": labels.statement,
        "next": bench.next_queries(top),
        "annotators": [
            {
                "annotator": who,
                "answered": int(r.answered),
                "skipped": int(r.skipped),
                "resolved": int(r.resolved),
                "events": int(r.events),
                "seconds_per_event": _number(r.seconds_per_event),
            }
            for who, r in people.iterrows()
        ],
        "pairs": [
            {**row, "raw_agreement": _number(row["raw_agreement"]), "cohen_kappa": _number(row["cohen_kappa"])}
            for row in pairs.to_dict("records")
        ],
    }
    if as_json:
        out.print_json(json.dumps(summary))
        return
    for key in (
        "instances",
        "events",
        "answered",
        "partial",
        "open",
        "conflicts",
        "none_of_these",
        "open_targets",
        "overlap",
    ):
        out.print(f"{key.replace('_', ' '):>18}: {summary[key]}")
    for source, count in summary["labels"].items():
        out.print(f"{source + ' labels':>18}: {count}")
    out.print(summary["statement"], markup=False, highlight=False)
    if labels.settings.audit_share == 0:
        out.print(
            f"audits are off (audit share 0): no model label can be stated; "
            f"winnow session settings {name} --audit 0.05 turns them on",
            markup=False,
            highlight=False,
        )
    if summary["items_shared"]:
        out.print(f"{'raw agreement':>18}: {summary['raw_agreement']:.3f} over {summary['items_shared']} shared items")
    table = Table("rank", "id", "score", "candidates")
    for i, row in enumerate(summary["next"], 1):
        table.add_row(str(i), row["id"], f"{row['score']:g}", "|".join(row["candidates"]))
    out.print(table)
    if summary["annotators"]:
        table = Table("annotator", "answered", "skipped", "resolved", "events", "s / event")
        for row in summary["annotators"]:
            speed = row["seconds_per_event"]
            table.add_row(
                row["annotator"],
                str(row["answered"]),
                str(row["skipped"]),
                str(row["resolved"]),
                str(row["events"]),
                "-" if speed is None else f"{speed:.1f}",
            )
        out.print(table)
    if summary["pairs"]:
        table = Table("annotators", "shared items", "raw agreement", "Cohen's kappa")
        for row in summary["pairs"]:
            kappa = row["cohen_kappa"]
            table.add_row(
                f"{row['annotator_a']} / {row['annotator_b']}",
                str(row["items"]),
                f"{row['raw_agreement']:.3f}",
                "undefined" if kappa is None else f"{kappa:.3f}",
            )
        out.print(table)


def _number(value: float) -> float | None:
    """A float for JSON: NaN (undefined) becomes null."""
    return None if value != value else float(value)


# ---------------------------------------------------------------------------- users


def _read_password(password_stdin: bool, *, confirm: bool = True) -> str:
    """The password from one line of standard input, or from a prompt that does not echo."""
    if password_stdin:
        line = sys.stdin.readline()
        password = line[:-1] if line.endswith("\n") else line
        if not password:
            raise UserError("--password-stdin: standard input holds no password line")
        return password
    if not sys.stdin.isatty():
        raise UserError("no terminal to ask for the password on; pipe it in with --password-stdin")
    return typer.prompt("Password", hide_input=True, confirmation_prompt=confirm)


@user_app.command("add")
def user_add(
    name: str = typer.Argument(..., help="User name (immutable; the name on their answers)."),
    role: str = typer.Option(..., help="admin, annotator or reviewer."),
    password_stdin: bool = typer.Option(False, "--password-stdin", help="Read the password from standard input."),
    db: str = DbOption,
) -> None:
    """Create an account; the first admin is made this way.

    Example: winnow user add alice --role annotator   (then type the password twice)
    """
    from app.service import create_user
    from app.store.models import ROLES

    check_choice(role, "--role", ROLES)
    password = _read_password(password_stdin)
    user = create_user(open_store(db, create=False), name, role=role, password=password)
    out.print(f"Added user {user.name!r} with role {user.role!r}.")


@user_app.command("list")
def user_list(db: str = DbOption) -> None:
    """List the accounts.  Example: winnow user list"""
    from app.service import users

    table = Table("user", "role", "active", "sessions", "created")
    for u in users(open_store(db, create=False)):
        table.add_row(
            u.name, u.role, "yes" if u.active else "no", ", ".join(u.sessions), f"{u.created_at:%Y-%m-%d %H:%M}"
        )
    out.print(table)


@user_app.command("audit")
def user_audit(
    output: Path | None = typer.Option(None, "-o", "--output", help="Write it to a .csv, .json or .parquet file."),
    db: str = DbOption,
) -> None:
    """Show the audit log: sign-ins and failed ones, account, assignment and session-setting changes.

    Example: winnow user audit --db winnow.db -o audit.csv
    """
    import pandas as pd
    from rich.markup import escape

    from app.service import audit_table

    table = audit_table(open_store(db), actor=None)  # the command line holds the database
    if output is not None:
        from app.io import write_table

        out.print(f"Wrote {len(table)} rows to {write_table(table, output)}.")
        return
    shown = Table("id", "time", "kind", "user", "actor", "session", "detail")
    for row in table.itertuples(index=False):
        # Names and details are user content: escaped, never read as Rich markup.
        shown.add_row(
            str(row.audit_id),
            f"{row.created_at:%Y-%m-%d %H:%M:%S}",
            row.kind,
            escape(row.user),
            escape(row.actor or "-"),
            "-" if pd.isna(row.session_id) else str(row.session_id),
            escape(row.detail or ""),
        )
    out.print(shown)


@user_app.command("disable")
def user_disable(name: str = typer.Argument(...), db: str = DbOption) -> None:
    """Disable an account: it can no longer sign in or answer.  Example: winnow user disable bob"""
    from app.service import disable_user

    disable_user(open_store(db, create=False), name)
    out.print(f"Disabled user {name!r}.")


@user_app.command("role")
def user_role(
    name: str = typer.Argument(...),
    role: str = typer.Argument(..., help="admin, annotator or reviewer."),
    db: str = DbOption,
) -> None:
    """Change a user's role.  Example: winnow user role bob reviewer"""
    from app.service import change_role

    user = change_role(open_store(db, create=False), name, role)
    out.print(f"User {user.name!r} now has role {user.role!r}.")


@user_app.command("passwd")
def user_passwd(
    name: str = typer.Argument(...),
    password_stdin: bool = typer.Option(False, "--password-stdin", help="Read the password from standard input."),
    db: str = DbOption,
) -> None:
    """Set a user's password.  Example: winnow user passwd alice"""
    from app.service import change_password

    Session = open_store(db, create=False)
    change_password(Session, name, _read_password(password_stdin))
    out.print(f"Changed the password of {name!r}.")


# ---------------------------------------------------------------------------- answers


@app.command()
def answer(
    session: str = typer.Argument(..., help="Session name."),
    item: str | None = typer.Argument(None, help="Item id (not needed for undo, nor with --from)."),
    label: str | None = typer.Argument(None, help="Label name for answer / other_label / resolve."),
    kind: str = typer.Option("answer", help=f"One of {', '.join(EVENT_KINDS)}."),
    annotator: str = typer.Option(
        os.environ.get("USER", "cli") or "cli",
        help="Who answers; once the store has users, an active user assigned to the session.",
    ),
    db: str = DbOption,
    idempotency_key: str | None = typer.Option(
        None,
        "--idempotency-key",
        metavar="KEY",
        help="Any unique text; running the command again with the same KEY records nothing new.",
    ),
    from_file: Path | None = typer.Option(
        None,
        "--from",
        metavar="FILE",
        help="Record every answer of a .csv, .tsv or .jsonl file with columns id,label[,annotator], all or none.",
    ),
) -> None:
    """Record one answer (for scripts and pipelines), or a file of answers with --from.

    Examples: winnow answer week1 d0042 8 --annotator alice --idempotency-key req-0042;
    winnow answer week1 --from answers.csv (an expert who labelled the ranked export offline)
    """
    from app.service import record_answer, record_answers_file

    if from_file is not None:
        if item is not None or label is not None:
            raise UserError("--from FILE takes the answers from the file: give no ITEM or LABEL")
        if kind != "answer" or idempotency_key is not None:
            raise UserError("--from FILE records answers only: --kind and --idempotency-key do not apply")
        n = record_answers_file(open_store(db, create=False), session, from_file, annotator=annotator)
        out.print(f"Recorded {n} answers from {from_file}.", markup=False, highlight=False)
        return
    check_choice(kind, "--kind", EVENT_KINDS)
    if item is None and kind != "undo":
        raise UserError(f"--kind {kind} needs an ITEM id")
    event_id = record_answer(
        open_store(db, create=False),
        session,
        annotator=annotator,
        kind=kind,
        item=item,
        label=label,
        idempotency_key=idempotency_key,
    )
    out.print(f"Recorded {kind} (event {event_id}).")


# ---------------------------------------------------------------------------- export


@app.command()
def export(
    session: str = typer.Argument(..., help="Session name."),
    output: Path = typer.Option(..., "-o", "--output", help=".csv, .tsv, .json, .jsonl or .parquet"),
    what: str = typer.Option("ranked", help="ranked (query list), labelled (dataset) or events (answer log)."),
    fmt: str | None = typer.Option(
        None, "--format", help="csv, tsv, json, jsonl or parquet (default: from the output's extension)."
    ),
    db: str = DbOption,
) -> None:
    """Export a session's ranked query list, labelled dataset or answer log.

    The labelled dataset has every item's final label, its label_source (expert, given, model,
    undecided) and, for model labels, a confidence in [0, 1] (DST-PLL's margin mapped to [0, 1]:
    it orders model labels, it is not a probability). JSON writes {"table", "metadata", "label_names",
    "rows"}: the metadata holds the target error, the confidence, the stated error bound, the number of
    audited answers and the counts per source; Parquet carries the same as key-value metadata
    ("winnow"); JSON Lines (.jsonl) carries the rows only.

    Example: winnow export week1 --what labelled -o labelled.jsonl
    """
    from app.io import TABLE_EXTENSIONS, write_table
    from app.service import EXPORT_KINDS, Workbench, events_table, session_id_by_name, session_table

    check_choice(what, "--what", EXPORT_KINDS)
    if fmt is not None:
        check_choice(fmt, "--format", [e.lstrip(".") for e in TABLE_EXTENSIONS])
        if output.suffix.lower() != f".{fmt}":
            output = output.with_name(output.name + f".{fmt}")
    Session = open_store(db, create=False)
    session_id = session_id_by_name(Session, session)
    if what == "events":  # the log alone needs no neighbour graph
        table = events_table(Session, session_id, actor=None)
    else:
        with progress_bar(f"session {session}") as report:
            table = session_table(Workbench.open(Session, session_id, progress=report), what, actor=None)
    path = write_table(table, output)
    out.print(f"Wrote {len(table)} rows to {path}.")


# ---------------------------------------------------------------------------- demo and ui


@app.command()
def demo(
    db: str | None = typer.Option(
        None, "--db", help="Keep the demo session in this database (default: a temporary one)."
    ),
    top: int = typer.Option(10, help="How many queries to show."),
) -> None:
    """Rank the bundled sample digits and explain the first query.  Example: winnow demo"""
    from app.service import Workbench, ensure_sample_session

    with contextlib.ExitStack() as stack:
        if db is None:
            db = str(Path(stack.enter_context(tempfile.TemporaryDirectory())) / "demo.db")
        Session = open_store(db, create=True)  # the demo imports the sample into it
        with progress("Importing the sample digits and ranking them"):
            bench = Workbench.open(Session, ensure_sample_session(Session))
        st = bench.state
        out.print(
            f"[bold]{st.n_instances}[/] digits, {int(st.open_items.sum())} with several candidate labels, "
            f"{bench.n_open} targets whose k-NN decision is still open."
        )
        table = Table("rank", "id", "score", "candidates", "true label")
        for i, row in enumerate(bench.next_queries(top), 1):
            table.add_row(str(i), row["id"], f"{row['score']:g}", "|".join(row["candidates"]), row["true_label"] or "?")
        out.print(table)
        first = bench.queue(top=1)
        if first.size:
            why = bench.explain(int(first[0]))
            out.print(f"Asking about {why.item_id} can change the decision of {why.n_targets_changed} targets.")
            if why.example:
                ex = why.example
                out.print(f"  e.g. target {ex.target_id}: necessary {ex.necessary or '{}'}, possible {ex.possible}")
                if ex.witness_label is not None:
                    reading = ", ".join(f"{nid}→{lab}" for nid, lab, _ in ex.witness)
                    out.print(f"    {ex.witness_label} is possible: the neighbours could read {reading}")
                for lab, nl in ex.necessary_after.items():
                    out.print(f"    if {why.item_id} is {lab}: necessary becomes {nl or '{}'}")
        with progress("Running DST-PLL's reject option"):
            rejects = bench.rejects()
        out.print(
            f"DST-PLL refuses, or the audits cannot yet back, {rejects.n_rejected} of {rejects.positions.size} "
            "open items; they go to the expert."
        )
        out.print(bench.labels().statement, markup=False, highlight=False)


def check_port_free(port: int, address: str) -> None:
    """Refuse a port that is out of range or already taken on ``address``, as one line.

    Checked before the server starts: otherwise Streamlit's own failure is a traceback, and a
    server already on the port (another winnow) answers the health check as if it were ours.
    """
    import errno
    import socket

    if not 1 <= port <= 65535:
        raise UserError(f"--port must be between 1 and 65535, got {port}")
    try:
        addresses = {info[:2] + (info[4][0],) for info in socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)}
    except (socket.gaierror, UnicodeError) as exc:
        raise UserError(f"--address {address!r} is not an address of this machine ({exc})") from None
    for family, kind, host in sorted(addresses, key=str):
        with socket.socket(family, kind) as probe:
            # As the server will bind: SO_REUSEADDR, so a port in TIME_WAIT is not taken for busy.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise UserError(f"port {port} is in use on {host}; choose another with --port") from None
                if exc.errno == errno.EADDRNOTAVAIL and family == socket.AF_INET6:
                    continue  # no IPv6 on this machine: the server will not listen there either
                raise UserError(f"cannot listen on {host} port {port}: {exc.strerror or exc}") from None


@app.command()
def ui(
    db: str = DbOption,
    port: int = typer.Option(8501, help="Local port."),
    sample: bool = typer.Option(False, "--sample", help="Create a 'demo' session on the bundled sample if missing."),
    headless: bool = typer.Option(False, help="Do not open a browser window."),
    address: str = typer.Option("localhost", help="Interface to serve on; 0.0.0.0 shares the app on the network."),
    max_upload_mb: int | None = typer.Option(
        None,
        "--max-upload-mb",
        min=1,
        help="Largest upload in MB (default: $WINNOW_MAX_UPLOAD_MB, else 100).",
    ),
    require_sign_in: bool = typer.Option(
        False, "--require-sign-in", help="Sign-in even on localhost (e.g. behind a reverse proxy)."
    ),
    dev: bool = typer.Option(
        False, "--dev", help="Show full error details (tracebacks) in the browser: development only."
    ),
) -> None:
    """Open the annotator's browser app on a database.  Example: winnow ui --db winnow.db

    On localhost with no user accounts the app opens straight away (single-user mode); with
    accounts, or on any other address, everyone signs in first (see docs/deployment.md).
    """
    check_port_free(port, address)
    from app.io import MAX_UPLOAD_VARIABLE, max_upload_bytes
    from app.service import has_users, is_local_address

    Session = open_store(db, create=sample)  # --sample imports the sample: it may make the store
    if sample:
        from app.service import ensure_sample_session

        ensure_sample_session(Session)
    if (require_sign_in or not is_local_address(address)) and not has_users(Session):
        raise UserError(
            f"--address {address}{' --require-sign-in' if require_sign_in else ''}: everyone signs in, and the store has "
            "no user yet: create an admin first (winnow user add NAME --role admin)"
        )
    upload_mb = max_upload_mb if max_upload_mb is not None else max_upload_bytes() // 1_000_000
    # Streamlit always runs headless: otherwise its first run on a machine stops at an
    # interactive e-mail prompt. winnow opens the browser itself once the server answers.
    # The options that keep a shared server safe are set by app/ui/server.py itself, so they
    # hold whatever folder the server is started from.
    command = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(UI_SERVER),
        "--server.port",
        str(port),
        "--server.address",
        address,
        "--server.headless",
        "true",
        "--server.maxUploadSize",
        str(upload_mb),
        "--browser.gatherUsageStats",
        "false",
        "--",
        "--db",
        db,
        "--max-upload-mb",
        str(upload_mb),
        *(["--require-sign-in"] if require_sign_in else []),
        *(["--dev"] if dev else []),
    ]
    # The app checks uploads against the same limit as Streamlit (its own cap, in case the
    # browser's is bypassed).
    env = {**os.environ, MAX_UPLOAD_VARIABLE: str(upload_mb)}
    url = f"http://localhost:{port}"
    server = subprocess.Popen(command, env=env)
    with _forward_stop_signals(server):
        if _wait_until_healthy(server, f"{url}/_stcore/health"):
            out.print(f"winnow is running at {url} (Ctrl+C to stop)")
            if not headless:
                import webbrowser

                webbrowser.open(url)
        status = server.wait()  # returns once a forwarded signal has stopped the server
    raise typer.Exit(status)


@contextlib.contextmanager
def _forward_stop_signals(server: subprocess.Popen) -> Iterator[None]:
    """Pass SIGTERM / SIGINT / SIGHUP on to the Streamlit child, which then stops; the caller
    waits for it, so the port is free once ``winnow ui`` has exited."""
    import signal

    def forward(signum: int, frame: object) -> None:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM if signum == getattr(signal, "SIGHUP", None) else signum)

    names = ("SIGTERM", "SIGINT", "SIGHUP")
    wanted = [getattr(signal, name) for name in names if hasattr(signal, name)]
    previous = {signum: signal.signal(signum, forward) for signum in wanted}
    try:
        yield
    finally:
        if server.poll() is None:  # an error in this process: do not leave the server behind
            _wait_for(server)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _wait_for(server: subprocess.Popen, grace: float = 30.0) -> int:
    """Stop the child (SIGTERM, then SIGKILL after ``grace`` seconds) and return its status."""
    server.terminate()
    try:
        return server.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        server.kill()
        return server.wait()


def _wait_until_healthy(server: subprocess.Popen, health_url: str, timeout: float = 60.0) -> bool:
    import time
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with urllib.request.urlopen(health_url, timeout=1) as response:
                if response.status == 200:
                    return True
        except OSError:
            time.sleep(0.3)
    return False


# ---------------------------------------------------------------------------- simulate

from app.cli_simulate import simulate_command  # noqa: E402  (kept beside its registration)

app.command("simulate")(simulate_command)


# ---------------------------------------------------------------------------- entry point


def click_exception_classes(name: str) -> tuple[type[BaseException], ...]:
    """Every class called ``name`` that a click the CLI may run on defines.

    typer 0.29 and later parse the command line with their own copy of click
    (``typer._click``); older typers use the standalone ``click`` package. Which one raises is
    found here, at run time, by looking in both: a version check would break again with the
    next typer that moves them.
    """
    import importlib

    found: list[type[BaseException]] = []
    for module_name in ("typer._click.exceptions", "click.exceptions", "typer.exceptions", "typer"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        cls = getattr(module, name, None)
        if isinstance(cls, type) and issubclass(cls, BaseException) and cls not in found:
            found.append(cls)
    return tuple(found)


def _fail(message: str, status: int) -> None:
    """Print ``error: <message>`` as one line on stderr and exit with ``status``."""
    one_line = " ".join(message.split())
    err.print(f"error: {one_line}", markup=False, highlight=False, soft_wrap=True)
    sys.exit(status)


def _usage_message(exc: BaseException, argv: list[str]) -> str:
    """A click usage error in one line, with the ``--help`` to read and, for an unknown
    option that is really an item id starting with ``-``, how to pass it."""
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    ctx = getattr(exc, "ctx", None)
    command = getattr(ctx, "command_path", None) or "winnow"
    option = getattr(exc, "option_name", None)
    if option and not option.startswith("--") and option[1:2].isalnum():
        token = next((a for a in argv if a.startswith(option)), option)
        message += (
            f"; an id or label starting with '-' goes after '--', every option before it: "
            f"{command} [OPTIONS] -- ... {token}"
        )
    return f"{message} (see '{command} --help')"


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; user errors become one line on stderr and exit status 2."""
    args = sys.argv[1:] if argv is None else list(argv)
    no_args_is_help = click_exception_classes("NoArgsIsHelpError")
    usage_errors = click_exception_classes("ClickException")
    exits = click_exception_classes("Exit")
    aborts = click_exception_classes("Abort")
    try:
        result = app(args=args, standalone_mode=False)
    except no_args_is_help as exc:  # `winnow` or `winnow session` alone: the help, as --help
        ctx = getattr(exc, "ctx", None)
        out.print(ctx.get_help() if ctx is not None else str(exc), markup=False, highlight=False)
        sys.exit(0)
    except exits as exc:
        sys.exit(getattr(exc, "exit_code", 0))
    except SolverError as exc:
        _fail(str(exc), 1)
    except (UserError, WinnowError) as exc:
        _fail(str(exc), 2)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as exc:
        _fail(f"{exc.strerror}: {exc.filename}", 2)
    except OSError as exc:  # disk full, I/O error: not the user's typing, still no traceback
        _fail(f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else ""), 1)
    except usage_errors as exc:
        _fail(_usage_message(exc, args), getattr(exc, "exit_code", 2) or 2)
    except (KeyboardInterrupt, *aborts):  # click turns Ctrl+C into Abort
        err.print("interrupted")
        sys.exit(130)
    # Outside standalone mode click returns a command's exit status instead of exiting.
    sys.exit(result if isinstance(result, int) and not isinstance(result, bool) else 0)


if __name__ == "__main__":
    main()
