"""The ``winnow session`` group: create, assign, configure, list and inspect labelling sessions."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.table import Table

from app.cli.console import json_safe, out, printable, progress_bar
from app.cli.options import (
    AuditOption,
    ConfidenceOption,
    DbOption,
    MaxErrorOption,
    PromiseOption,
    label_settings,
)
from app.store import open_store
from app.store.models import TARGET_SETS
from engine.choices import CRITERIA, DEFAULT_STRATEGY, WEIGHTINGS

session_app = typer.Typer(help="Create, list and inspect labelling sessions.", no_args_is_help=True)


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
    promise: str | None = PromiseOption,
) -> None:
    """Start a labelling session on an imported dataset.

    Example:
    winnow session new week1 --dataset digits_partial --criterion apl -k 10 \\
      --max-error 0.05 --audit 0.3
    """
    from app.service import change_label_settings, create_session, dataset_id_by_name, set_session_overlap

    settings = label_settings(max_error, confidence, audit, promise)
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
            promise=settings.promise,
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
    """Let users answer in a session.

    Example: winnow session assign week1 alice bob
    """
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
    """Set how many annotators answer each item.

    Example: winnow session overlap week1 2
    """
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
    promise: str | None = PromiseOption,
) -> None:
    """Show or change how far model labels must be trusted, and the share of audits.

    With no option, prints the current values. A change applies to the lots of model labels
    frozen after it; a lot keeps the settings it was frozen with. Shares are fractions here
    (--audit 0.3 is the app's "Audit share 30%"). `winnow session status` says about how many
    answers the session needs.

    Example: winnow session settings week1 --max-error 0.02 --confidence 0.95 --audit 0.3
    """
    from app.service import change_label_settings, session_label_settings, share_percent

    Session = open_store(db, create=False)
    if max_error is None and confidence is None and audit is None and promise is None:
        settings = session_label_settings(Session, name)
    else:
        settings = change_label_settings(
            Session, name, max_error=max_error, confidence=confidence, audit_share=audit, promise=promise
        )
    # Fractions, as the options take them, with the percent the app shows beside each.
    out.print(
        f"Session {name!r}: max error {settings.max_error:g} ({share_percent(settings.max_error)}), "
        f"confidence {settings.confidence:g} ({share_percent(settings.confidence)}"
        f"{', not used on average' if settings.promise == 'average' else ''}), "
        f"audit share {settings.audit_share:g} ({share_percent(settings.audit_share)} of served items), "
        f"promise {settings.promise}.",
        markup=False,
        highlight=False,
    )


@session_app.command("list")
def session_list(db: str = DbOption) -> None:
    """List the sessions of a database.

    Example: winnow session list --db winnow.db
    """
    from app.service import session_summaries

    table = Table("session", "dataset", "k", "weighting", "criterion", "targets", "created")
    for x in session_summaries(open_store(db, create=False), actor=None):  # the command line sees every session
        table.add_row(
            printable(x.name),
            printable(x.dataset_name),
            str(x.k),
            x.weighting,
            x.criterion,
            x.target_set,
            f"{x.created_at:%Y-%m-%d %H:%M}",
        )
    out.print(table)


@session_app.command("status")
def session_status(
    name: str = typer.Argument(...),
    db: str = DbOption,
    top: int = typer.Option(5, help="How many next queries to show."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Progress of a session and its next queries.

    Example: winnow session status week1
    """
    from app.service import Workbench, overlap_of, session_id_by_name, team_records

    Session = open_store(db, create=False)
    with progress_bar(f"session {name}") as report:
        bench = Workbench.open(Session, session_id_by_name(Session, name), progress=report)
    people, pairs, shared = team_records(bench, actor=None)
    labels = bench.label_statement()
    work = bench.work_status(with_estimate=True)
    estimate = work.estimate
    summary: dict[str, Any] = {
        "session": name,
        "done": work.done,
        "work": work.headline,
        "more_answers": work.more_answers,
        "answers_estimate": None
        if estimate is None
        else {"done": estimate.done, "low": estimate.done_low, "high": estimate.done_high},
        **bench.summary(),
        "overlap": overlap_of(bench),
        **shared,
        "labels": dict(labels.counts),
        "audited_answers": labels.n_audited,
        "stated_labels": labels.summary.stated,
        "stated_error": labels.summary.error_bound,
        "audit_share": labels.settings.audit_share,
        "lot_ends_in_answers": labels.summary.lot_ends_in,
        "promise_left": labels.summary.promise_left,
        "out_of_promise": labels.summary.out_of_promise,
        "statement": labels.statement,
        "next": bench.next_queries(top),
        "annotators": [
            {
                "annotator": r["annotator"],
                "answered": int(r["answered"]),
                "skipped": int(r["skipped"]),
                "resolved": int(r["resolved"]),
                "events": int(r["events"]),
                "seconds_per_event": _number(r["seconds_per_event"]),
            }
            for r in people
        ],
        "pairs": [
            {**row, "raw_agreement": _number(row["raw_agreement"]), "cohen_kappa": _number(row["cohen_kappa"])}
            for row in pairs
        ],
    }
    if as_json:
        # soft_wrap: a long string (the statement) must not be broken across lines by the console.
        out.print(
            json.dumps(json_safe(summary), allow_nan=False, indent=2), markup=False, highlight=False, soft_wrap=True
        )
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
        "suspects",
        "overlap",
    ):
        out.print(f"{key.replace('_', ' '):>18}: {summary[key]}")
    for source, count in summary["labels"].items():
        # "undecided" is the items without a label (the Rejects page's count), not a kind of label.
        out.print(f"{source + (' items' if source == 'undecided' else ' labels'):>18}: {count}")
    out.print(summary["statement"], markup=False, highlight=False)
    out.print(summary["work"], markup=False, highlight=False)
    out.print(summary["more_answers"], markup=False, highlight=False)
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
        score = "-" if row["score"] is None else f"{row['score']:g}"
        table.add_row(str(i), printable(row["id"]), score, printable("|".join(row["candidates"])))
    out.print(table)
    if summary["annotators"]:
        table = Table("annotator", "answered", "skipped", "resolved", "events", "s / event")
        for row in summary["annotators"]:
            speed = row["seconds_per_event"]
            table.add_row(
                printable(row["annotator"]),
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
                printable(f"{row['annotator_a']} / {row['annotator_b']}"),
                str(row["items"]),
                f"{row['raw_agreement']:.3f}",
                "undefined" if kappa is None else f"{kappa:.3f}",
            )
        out.print(table)


def _number(value: float) -> float | None:
    """A float for JSON: NaN (undefined) becomes null."""
    return None if value != value else float(value)
