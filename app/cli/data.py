"""Commands on datasets and answers: import, init, rank, answer, export and the demo.

Each parses its options and prints; the service layer (imported when the command runs, so that
``winnow --help`` stays instant) does the work.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import typer
from rich.table import Table

from app.cli.console import UserError, out, progress, progress_bar
from app.cli.options import (
    AudioColumnOption,
    AuditOption,
    ConfidenceOption,
    DbOption,
    FeaturesFromOption,
    IgnoreColumnsOption,
    ImageColumnOption,
    LinkColumnOption,
    MaxErrorOption,
    MediaRootOption,
    PromiseOption,
    TextColumnOption,
    content_options,
    label_settings,
)
from app.store import SessionSpec, open_store
from app.store.models import EVENT_KINDS
from engine import check_choice
from engine.choices import CRITERIA, DEFAULT_STRATEGY, WEIGHTINGS


def import_command(
    file: Path = typer.Argument(
        ...,
        help="CSV/TSV, Parquet, .mat (PLL benchmark) or .npz file, a Label Studio export (.json), or a folder "
        "of images (with --labels).",
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
    votes: Path | None = typer.Option(
        None,
        "--votes",
        help="Crowd votes (.csv, .tsv, .parquet, .jsonl with id,annotator,label[,time]): the candidate sets are "
        "made from them and the votes are stored.",
    ),
    min_votes: int | None = typer.Option(
        None,
        "--min-votes",
        help="With --votes: keep labels with at least N votes (default: every voted label); not with --min-share.",
    ),
    min_share: float | None = typer.Option(
        None,
        "--min-share",
        help="With --votes: keep labels with at least this share (0 to 1] of the item's votes; not with --min-votes.",
    ),
    user_map: Path | None = typer.Option(
        None,
        "--user-map",
        metavar="USERS.json",
        help="With a Label Studio export: its users (GET /api/users/, a JSON list with id and email), so that "
        "annotators named by id are kept by email.",
    ),
    session: str | None = typer.Option(None, help="Also create a labelling session with this name."),
    k: int = typer.Option(10, "-k", help="Neighbours of the session's k-NN vote."),
    weighting: str = typer.Option("uniform", help=f"One of {', '.join(WEIGHTINGS)}."),
    criterion: str = typer.Option(DEFAULT_STRATEGY, help=f"Query criterion: {', '.join(CRITERIA)}."),
    max_error: float | None = MaxErrorOption,
    confidence: float | None = ConfidenceOption,
    audit: float | None = AuditOption,
    promise: str | None = PromiseOption,
) -> None:
    """Import a partially labelled file, or a folder of images, into a database: all rows (and the
    session) or nothing.

    Items may carry content: a text, an image or an audio clip (and a link). Without numeric
    feature columns, texts get TF-IDF + SVD features and images built-in image features; audio
    needs numeric columns or --features-from.

    With --votes, the candidate sets come from a crowd's votes: the union of the labels voted
    for, or those with at least --min-votes N votes or --min-share S of the item's votes (one of
    the two; an item where no label reaches it keeps its most voted labels); items without a vote get every
    label. The votes are stored and shown to the expert.

    A Label Studio JSON export (project.json) is read as items and votes: each task's data (text,
    image, audio) and the annotators' single choices (--min-votes / --min-share apply to them);
    see docs/label_studio.md.

    Examples:
    winnow import sample_data/digits_partial.csv --db winnow.db --session first
    winnow import sample_data/texts.csv
    winnow import sample_data/photos --labels sample_data/photos_labels.csv
    winnow import sample_data/crowd_items.csv \\
      --votes sample_data/crowd_votes.csv --min-votes 2
    """
    from app.service import change_label_settings, import_file

    spec = None
    settings = label_settings(max_error, confidence, audit, promise)
    if settings is not None and session is None:
        raise UserError("--max-error, --confidence and --audit are settings of a session: give --session NAME too")
    if session is not None:  # every option is checked before anything is read or written
        check_choice(weighting, "--weighting", WEIGHTINGS)
        check_choice(criterion, "--criterion", CRITERIA)
        if k < 1:
            raise UserError(f"-k must be >= 1, got {k}")
        spec = SessionSpec(session, k=k, weighting=weighting, criterion=criterion, target_set="all")
    options = content_options(
        text_column, image_column, audio_column, link_column, ignore_columns, features_from, media_root
    )
    is_folder = file.is_dir()
    label_studio = file.suffix.lower() == ".json"  # a Label Studio export: its annotations are the votes
    if votes is None and (min_votes is not None or min_share is not None) and not label_studio:
        raise UserError("--min-votes and --min-share read the votes: give --votes FILE too")
    if min_votes is not None and min_share is not None:
        raise UserError("--min-votes and --min-share each decide which voted labels are kept: give one, not both")
    if votes is not None and label_studio:
        raise UserError(f"{file.name} is a Label Studio export: its annotations are the votes; drop --votes")
    if votes is not None and is_folder:
        raise UserError(f"--votes goes with a data file of items; {file} is a folder")
    if user_map is not None and not label_studio:
        raise UserError(f"--user-map goes with a Label Studio export (.json); {file.name} is not one")
    vote_options: dict[str, object] = (
        {"min_votes": min_votes, "min_share": min_share, "user_map": user_map} if label_studio else {}
    )
    if votes is not None:
        vote_options = {"votes": votes, "min_votes": min_votes, "min_share": min_share}
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
                **vote_options,  # type: ignore[arg-type]
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
                promise=settings.promise,
            )
        out.print(f"Created session {spec.name!r}.")


def init(db: str = DbOption) -> None:
    """Create an empty store (or upgrade an existing one); other commands than import need one.

    Then create the first admin: winnow user add ada --role admin --db team.db

    Example: winnow init --db team.db
    """
    open_store(db, create=True)
    out.print(f"{db} is a winnow store, its schema up to date.", markup=False, highlight=False)


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

    Add --workers 4 or --dask tcp://host:8786 to score over Dask. A file of texts works as it is.

    Examples:
    winnow rank sample_data/digits_partial.csv --criterion apl -k 10 -o ranked.csv
    winnow rank sample_data/texts.csv -o ranked.csv
    """
    if (file is None) == (session is None):
        raise UserError("give either a FILE or --session NAME")
    options = content_options(
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
        with progress_bar(f"rank {file.name}") as report:
            table = rank_file(
                file,
                criterion=criterion,
                k=k,
                weighting=weighting,
                seed=seed,
                dask=dask,
                workers=workers,
                progress=contextlib.nullcontext,  # the bar shows the steps
                report=report,
                **options,
            )
    elif session is not None:  # exactly one of FILE and --session, checked above
        Session = open_store(db, create=False)
        with progress_bar(f"session {session}") as report:
            bench = Workbench.open(Session, session_id_by_name(Session, session), progress=report)
            table = bench.ranked_table()
    if top is not None:
        table = table.head(top)
    path = write_table(table, output)
    out.print(f"Wrote {len(table)} ranked items to {path}.")


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
        help="Record every answer of a .csv, .tsv or .jsonl file with columns id,label[,kind][,annotator], "
        "all or none; kind is label (default), other_label, none_of_these or skip (blank label).",
    ),
) -> None:
    """Record one answer (for scripts and pipelines), or a file of answers with --from.

    An expert who labelled the ranked export offline records it with --from: a file with the
    header id,label,kind and rows such as "d0042,8", "d0043,,none_of_these" and
    "d0044,cat,other_label".

    Examples:
    winnow answer week1 d0042 8 --annotator alice --idempotency-key req-0042
    winnow answer week1 --from answers.csv
    """
    from app.service import record_answer, record_answers_file

    if from_file is not None:
        if item is not None or label is not None:
            raise UserError("--from FILE takes the answers from the file: give no ITEM or LABEL")
        if kind != "answer" or idempotency_key is not None:
            raise UserError(
                "--from FILE takes each row's kind from its kind column: --kind and --idempotency-key do not apply"
            )
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


def export(
    session: str = typer.Argument(..., help="Session name."),
    output: Path = typer.Option(..., "-o", "--output", help=".csv, .tsv, .json, .jsonl or .parquet"),
    what: str = typer.Option(
        "ranked",
        help="ranked (query list), labelled (dataset), events (answer log) or votes (the crowd votes imported).",
    ),
    fmt: str | None = typer.Option(
        None,
        "--format",
        help="csv, tsv, json, jsonl or parquet (default: from the output's extension), or label-studio "
        "(--what labelled: tasks Label Studio imports, and their labelling config beside them).",
    ),
    from_name: str | None = typer.Option(
        None, "--from-name", help="--format label-studio: name of the <Choices> control (default: label)."
    ),
    to_name: str | None = typer.Option(
        None,
        "--to-name",
        help="--format label-studio: name of the object the choices label (default: text, image or audio).",
    ),
    label_config: Path | None = typer.Option(
        None,
        "--label-config",
        metavar="CONFIG.xml",
        help="--format label-studio: the Label Studio project's labelling config; the tasks use its control "
        "and data key, and every label must be one of its choices.",
    ),
    db: str = DbOption,
) -> None:
    """Export a session's ranked query list, labelled dataset, answer log or crowd votes.

    The labelled dataset has every item's final label, its label_source (expert, given, crowd,
    model, undecided) and, for model labels, model_margin (DST-PLL's margin when the label was
    frozen: it orders model labels, it is not a probability). JSON writes {"table", "metadata",
    "label_names", "rows"}: the metadata holds the promise, the target error, the confidence, the
    stated labels and error bound, the audited answers and the counts per source; Parquet carries
    the same as key-value metadata ("winnow"); JSON Lines (.jsonl) carries the rows only.
    --format label-studio writes the labelled dataset as Label Studio tasks (the expert's answers
    as annotations, model labels as predictions with score and model_version) and
    TASKS.label_config.xml, the labelling config to paste into the project (docs/label_studio.md).

    A dataset imported with --votes: --what votes writes id, annotator, label, time per vote, and
    the labelled dataset gets a votes column ("jazz:2|blues:1").

    Examples:
    winnow export week1 --what labelled -o labelled.jsonl
    winnow export week1 --what labelled --format label-studio -o tasks.json
    """
    from app.io import TABLE_EXTENSIONS, write_table
    from app.service import (
        EXPORT_KINDS,
        LABEL_STUDIO_FORMAT,
        Workbench,
        check_label_studio_export,
        events_table,
        export_label_studio,
        session_id_by_name,
        session_table,
        votes_table,
    )

    check_choice(what, "--what", EXPORT_KINDS)
    if fmt is not None:
        check_choice(fmt, "--format", [*(e.lstrip(".") for e in TABLE_EXTENSIONS), LABEL_STUDIO_FORMAT])
    if fmt == LABEL_STUDIO_FORMAT:
        if what != "labelled":
            raise UserError(f"--format {LABEL_STUDIO_FORMAT} writes the labelled dataset: give --what labelled")
        if output.suffix.lower() != ".json":
            output = output.with_name(output.name + ".json")
    elif from_name is not None or to_name is not None or label_config is not None:
        raise UserError(f"--from-name, --to-name and --label-config go with --format {LABEL_STUDIO_FORMAT}")
    elif fmt is not None and output.suffix.lower() != f".{fmt}":
        output = output.with_name(output.name + f".{fmt}")
    for option, value in (("--from-name", from_name), ("--to-name", to_name)):
        if value is not None and not value.strip():
            raise UserError(f"{option} must not be empty")
    if label_config is not None and (from_name is not None or to_name is not None):
        raise UserError("--label-config names the control and its object: give no --from-name or --to-name")
    Session = open_store(db, create=False)
    session_id = session_id_by_name(Session, session)
    if fmt == LABEL_STUDIO_FORMAT:
        # Refused from the store alone, not after the session is opened and scored.
        check_label_studio_export(
            Session, session_id, actor=None, from_name=from_name, to_name=to_name, label_config=label_config
        )
        with progress_bar(f"session {session}") as report:
            bench = Workbench.open(Session, session_id, progress=report)
        files = export_label_studio(
            bench, output, actor=None, from_name=from_name, to_name=to_name, label_config=label_config
        )
        out.print(
            f"Wrote {files.n_tasks} Label Studio tasks ({files.n_annotations} expert answers as annotations, "
            f"{files.n_predictions} model labels as predictions) to {files.tasks}; "
            f"labelling config: {files.config}.",
            markup=False,
            highlight=False,
        )
        if files.n_withheld:
            out.print(
                f"{files.n_withheld} model labels still being checked by audits are written as undecided: "
                "annotators who saw them in Label Studio would no longer check them blind. "
                "`winnow export --what labelled` as CSV or JSON has them "
                "(with audits off, `winnow session settings --audit 0`, they go out as predictions).",
                markup=False,
                highlight=False,
            )
        if files.storage is not None:
            out.print(
                "Images and audio: start Label Studio with LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED=true "
                f"LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT={files.document_root} and add a Local files storage "
                f"on {files.storage} to the project.",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        return
    if what == "events":  # the log alone needs no neighbour graph
        table = events_table(Session, session_id, actor=None)
    elif what == "votes":  # nor do the votes
        table = votes_table(Session, session_id, actor=None)
    else:
        with progress_bar(f"session {session}") as report:
            bench = Workbench.open(Session, session_id, progress=report)
            table = session_table(bench, what, actor=None)
    path = write_table(table, output)
    out.print(f"Wrote {len(table)} rows to {path}.")


def demo(
    db: str | None = typer.Option(
        None, "--db", help="Keep the demo session in this database (default: a temporary one)."
    ),
    top: int = typer.Option(10, help="How many queries to show."),
) -> None:
    """Rank the bundled sample digits and explain the first query.

    Example: winnow demo
    """
    from app.service import Workbench, ensure_sample_session

    with contextlib.ExitStack() as stack:
        if db is None:
            db = str(Path(stack.enter_context(tempfile.TemporaryDirectory())) / "demo.db")
        Session = open_store(db, create=True)  # the demo imports the sample into it
        with progress("Importing the sample digits"):
            session_id = ensure_sample_session(Session)
        with progress_bar("demo") as report:
            bench = Workbench.open(Session, session_id, progress=report)
        st = bench.state
        out.print(
            f"[bold]{st.n_instances}[/] digits, {int(st.open_items.sum())} with several candidate labels, "
            f"{bench.n_open} targets whose k-NN decision is still open."
        )
        table = Table("rank", "id", "score", "candidates", "true label")
        for i, row in enumerate(bench.next_queries(top), 1):
            # No score while audits are interleaved (it would tell them apart): as `session status`.
            score = "-" if row["score"] is None else f"{row['score']:g}"
            table.add_row(str(i), row["id"], score, "|".join(row["candidates"]), row["true_label"] or "?")
        out.print(table)
        first = bench.queue(top=1)
        if first.size:
            # The demo's store is a temporary one of its own: nobody answers audits in it.
            why = bench.explain(int(first[0]), while_auditing=True)
            out.print(f"Asking about {why.item_id} can change the decision of {why.n_targets_changed} targets.")
            if why.example:
                ex = why.example
                out.print(f"  e.g. target {ex.target_id}: necessary {ex.necessary or '{}'}, possible {ex.possible}")
                if ex.witness_label is not None:
                    reading = ", ".join(f"{nid}→{lab}" for nid, lab, _ in ex.witness)
                    out.print(f"    {ex.witness_label} is possible: the neighbours could read {reading}")
                for lab, nl in ex.necessary_after.items():
                    out.print(f"    if {why.item_id} is {lab}: necessary becomes {nl or '{}'}")
        with progress("Labelling what the model can"):
            labels = bench.labels()
        out.print(
            f"Undecided: {labels.counts['undecided']} items have no label the model stands behind yet; "
            "they go to the expert (the Rejects page lists them)."
        )
        out.print(labels.statement, markup=False, highlight=False)
