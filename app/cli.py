"""The ``winnow`` command line: the browser app's work without the browser.

Every user error ends with exit status 2 and one line on stderr (``error: ...``); the
database is left unchanged because each write is a single transaction.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator, Optional

import numpy as np
import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from app.store import db as store_db
from app.store import repo
from app.store.models import CRITERIA, TARGET_SETS, WEIGHTINGS
from engine.exceptions import SolverError, WinnowError

# The file readers, the workbench and the engine pull in pandas, scikit-learn and OR-Tools
# (seconds of imports): commands import them when they run, so `--help` stays instant.

DEFAULT_DB = "winnow.db"
SAMPLE_FILE = Path(__file__).resolve().parent.parent / "sample_data" / "digits_partial.csv"
UI_HOME = Path(__file__).resolve().parent / "ui" / "Home.py"
ANSWER_KINDS = ("answer", "none_of_these", "other_label", "skip", "undo", "resolve")

app = typer.Typer(
    name="winnow",
    help="Rank which partially labelled items an expert should settle first, and label them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
session_app = typer.Typer(help="Create, list and inspect labelling sessions.", no_args_is_help=True)
app.add_typer(session_app, name="session")

out = Console()
err = Console(stderr=True)

DbOption = typer.Option(DEFAULT_DB, "--db", help="SQLite file or any SQLAlchemy URL (postgresql://...).")


class UserError(Exception):
    """A mistake the user can fix: printed as one line, exit status 2."""


@contextlib.contextmanager
def progress(description: str) -> Iterator[None]:
    """A spinner with elapsed time on stderr while work runs (only on a terminal)."""
    if not err.is_terminal:
        yield
        return
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err, transient=True) as bar:
        bar.add_task(description, total=None)
        yield


def _store(db: str):
    return store_db.open_store(db)


def _session_id(Session, name: str) -> int:
    with Session() as s:
        return repo.get_session_by_name(s, name).id


def _instance_position(s, session_id: int, external_id: str) -> int:
    from sqlalchemy import select

    from app.store.models import Instance, LabellingSession

    dataset_id = s.get(LabellingSession, session_id).dataset_id
    position = s.scalar(select(Instance.position).where(Instance.dataset_id == dataset_id, Instance.external_id == external_id))
    if position is None:
        raise UserError(f"no item with id {external_id!r} in this session's dataset")
    return int(position)


def _choice(value: str, choices: tuple[str, ...], option: str) -> str:
    if value not in choices:
        raise UserError(f"{option} must be one of {', '.join(choices)}; got {value!r}")
    return value


# ---------------------------------------------------------------------------- import


def import_file(
    Session,
    path: Path,
    *,
    name: str | None,
    candidates_column: str = "candidates",
    id_column: str | None = None,
    true_label_column: str | None = None,
    min_rows: int = 2,
) -> tuple[int, int]:
    """Read, validate and store a file as a dataset; returns (dataset id, n instances)."""
    from app.io import read_dataset

    loaded = read_dataset(
        path,
        candidates_column=candidates_column,
        id_column=id_column,
        true_label_column=true_label_column,
        min_rows=min_rows,
    )

    def work(s):
        dataset = repo.create_dataset(
            s,
            name=name or Path(path).stem,
            X=loaded.X,
            candidates=loaded.candidates,
            label_names=loaded.label_names,
            external_ids=loaded.ids,
            true_labels=loaded.true_labels,
            feature_names=loaded.feature_names,
            layout=loaded.layout,
        )
        s.flush()
        return dataset.id

    return store_db.write_transaction(Session, work), loaded.n_instances


def create_session(Session, *, dataset_id: int, name: str, k: int, weighting: str, criterion: str, target_set: str) -> int:
    def work(s):
        labelling = repo.create_labelling_session(
            s, dataset_id=dataset_id, name=name, k=k, weighting=weighting, criterion=criterion, target_set=target_set
        )
        s.flush()
        return labelling.id

    return store_db.write_transaction(Session, work)


@app.command("import")
def import_command(
    file: Path = typer.Argument(..., help="CSV/TSV, Parquet, .mat (PLL benchmark) or .npz file."),
    db: str = DbOption,
    name: Optional[str] = typer.Option(None, help="Dataset name (default: the file name)."),
    candidates_column: str = typer.Option("candidates", help="Column with candidate sets like 'cat|dog'."),
    id_column: Optional[str] = typer.Option(None, help="Id column (default: 'id' when present)."),
    true_label_column: Optional[str] = typer.Option(None, help="True-label column, for simulations."),
    session: Optional[str] = typer.Option(None, help="Also create a labelling session with this name."),
    k: int = typer.Option(10, "-k", help="Neighbours of the session's k-NN vote."),
    weighting: str = typer.Option("uniform", help="uniform or distance."),
    criterion: str = typer.Option("apl", help=f"Query criterion: {', '.join(CRITERIA)}."),
) -> None:
    """Import a partially labelled file into a database (all rows or none).

    Example: winnow import sample_data/digits_partial.csv --db winnow.db --session first
    """
    Session = _store(db)
    with progress(f"Reading and storing {file}"):
        dataset_id, n = import_file(
            Session, file, name=name, candidates_column=candidates_column, id_column=id_column,
            true_label_column=true_label_column, min_rows=k + 1,
        )
    out.print(f"Imported {n} instances from {file} as dataset {name or file.stem!r} (id {dataset_id}).")
    if session:
        create_session(Session, dataset_id=dataset_id, name=session, k=k, weighting=_choice(weighting, WEIGHTINGS, "--weighting"),
                       criterion=_choice(criterion, CRITERIA, "--criterion"), target_set="all")
        out.print(f"Created session {session!r}.")


# ---------------------------------------------------------------------------- rank


@app.command()
def rank(
    file: Optional[Path] = typer.Argument(None, help="Rank straight from a file, without a database."),
    session: Optional[str] = typer.Option(None, help="Rank a stored session instead (its current answers count)."),
    db: str = DbOption,
    criterion: str = typer.Option("apl", help=f"One of {', '.join(CRITERIA)} (file mode)."),
    k: int = typer.Option(10, "-k", help="Neighbours (file mode)."),
    weighting: str = typer.Option("uniform", help="uniform or distance (file mode)."),
    seed: int = typer.Option(0, help="Seed of the 'random' criterion."),
    output: Path = typer.Option(..., "-o", "--output", help="ranked.csv or ranked.json"),
    top: Optional[int] = typer.Option(None, help="Keep only the best N rows."),
    dask: Optional[str] = typer.Option(None, "--dask", metavar="SCHEDULER_ADDRESS", help="Score on a running Dask scheduler (file mode; needs winnow[scale])."),
    workers: Optional[int] = typer.Option(None, "--workers", min=1, help="Score on a local Dask cluster of N worker processes (file mode)."),
) -> None:
    """Write the ranked query list: which partial items to settle first.

    Example: winnow rank sample_data/digits_partial.csv --criterion apl -k 10 -o ranked.csv
    (add --workers 4 or --dask tcp://host:8786 to score over Dask)
    """
    if (file is None) == (session is None):
        raise UserError("give either a FILE or --session NAME")
    if dask is not None and (workers is not None or session is not None):
        raise UserError("--dask goes with a FILE and without --workers")
    if workers is not None and session is not None:
        raise UserError("--workers goes with a FILE, not with --session")
    from app import workbench as wb
    from app.io import ranked_query_table, read_dataset, write_table
    from engine.neighbors import knn_graph
    from engine.query import ambiguous_neighbourhoods, query_scores
    from engine.winners import approx_possible_labels, necessary_labels

    if file is not None:
        _choice(criterion, CRITERIA, "--criterion")
        _choice(weighting, WEIGHTINGS, "--weighting")
        loaded = read_dataset(file)  # knn_graph says it when k is too large for the file
        with progress(f"Building the {k}-NN graph of {loaded.n_instances} instances"):
            idx, w = knn_graph(loaded.X, k=k, weights=weighting)
        if dask is not None or workers is not None:
            from engine.distributed import dask_client, distributed_label_sets, distributed_query_scores

            with progress(f"Scoring with criterion {criterion} over Dask"), dask_client(dask, n_workers=workers) as client:
                scores = distributed_query_scores(idx, w, loaded.candidates, criterion=criterion, random_state=seed, client=client)
                ambiguous = np.not_equal(*distributed_label_sets(idx, w, loaded.candidates, client=client)).any(axis=1)
        else:
            with progress(f"Scoring with criterion {criterion}"):
                scores = query_scores(idx, w, loaded.candidates, criterion=criterion, random_state=seed)
                nl = necessary_labels(idx, w, loaded.candidates)
                ambiguous = (nl != approx_possible_labels(idx, w, loaded.candidates)).any(axis=1)
        touched = ambiguous_neighbourhoods(idx, ambiguous, loaded.n_instances)
        table = ranked_query_table(
            scores, loaded.candidates, loaded.label_names, loaded.ids, touched,
            criterion=criterion, params={"k": k, "weighting": weighting, "source": str(file)},
        )
    else:
        Session = _store(db)
        with progress(f"Loading session {session}"):
            bench = wb.Workbench.open(Session, _session_id(Session, session))
            table = bench.ranked_table()
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
    weighting: str = typer.Option("uniform", help="uniform or distance."),
    criterion: str = typer.Option("apl", help=f"One of {', '.join(CRITERIA)}."),
    target_set: str = typer.Option("all", help=f"One of {', '.join(TARGET_SETS)}."),
) -> None:
    """Start a labelling session on an imported dataset.

    Example: winnow session new week1 --dataset digits_partial --criterion apl -k 10
    """
    Session = _store(db)
    with Session() as s:
        dataset_id = repo.get_dataset_by_name(s, dataset).id
    create_session(Session, dataset_id=dataset_id, name=name, k=k, weighting=weighting, criterion=criterion, target_set=target_set)
    out.print(f"Created session {name!r} on dataset {dataset!r}.")


@session_app.command("list")
def session_list(db: str = DbOption) -> None:
    """List the sessions of a database.  Example: winnow session list --db winnow.db"""
    Session = _store(db)
    table = Table("session", "dataset", "k", "weighting", "criterion", "targets", "created")
    with Session() as s:
        for labelling in repo.list_sessions(s):
            table.add_row(labelling.name, labelling.dataset.name, str(labelling.k), labelling.weighting,
                          labelling.criterion, labelling.target_set, f"{labelling.created_at:%Y-%m-%d %H:%M}")
    out.print(table)


@session_app.command("status")
def session_status(
    name: str = typer.Argument(...),
    db: str = DbOption,
    top: int = typer.Option(5, help="How many next queries to show."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Progress of a session and its next queries.  Example: winnow session status week1"""
    from app import workbench as wb

    Session = _store(db)
    with progress(f"Loading session {name}"):
        bench = wb.Workbench.open(Session, _session_id(Session, name))
    st = bench.state
    queue = bench.queue(top=top)
    summary = {
        "session": name,
        "instances": st.n_instances,
        "events": st.n_events,
        "partial": int((np.asarray(st.candidates).sum(axis=1) >= 2).sum()),
        "open": int(st.open_items.sum()),
        "conflicts": len(st.conflicts),
        "none_of_these": int(st.none_of_these.sum()),
        "ambiguous_targets": bench.n_ambiguous,
        "next": [
            {"id": st.external_ids[p], "score": float(bench.scores[p]),
             "candidates": [st.label_names[m] for m in np.flatnonzero(st.candidates[p])]}
            for p in queue
        ],
    }
    if as_json:
        out.print_json(json.dumps(summary))
        return
    for key in ("instances", "events", "partial", "open", "conflicts", "none_of_these", "ambiguous_targets"):
        out.print(f"{key.replace('_', ' '):>18}: {summary[key]}")
    table = Table("rank", "id", "score", "candidates")
    for i, row in enumerate(summary["next"], 1):
        table.add_row(str(i), row["id"], f"{row['score']:g}", "|".join(row["candidates"]))
    out.print(table)


# ---------------------------------------------------------------------------- answers


@app.command()
def answer(
    session: str = typer.Argument(..., help="Session name."),
    item: Optional[str] = typer.Argument(None, help="Item id (not needed for undo)."),
    label: Optional[str] = typer.Argument(None, help="Label name for answer / other_label / resolve."),
    kind: str = typer.Option("answer", help=f"One of {', '.join(ANSWER_KINDS)}."),
    annotator: str = typer.Option(os.environ.get("USER", "cli") or "cli", help="Who answers."),
    db: str = DbOption,
) -> None:
    """Record one answer (for scripts and pipelines).

    Example: winnow answer week1 d0042 8 --annotator alice
    """
    _choice(kind, ANSWER_KINDS, "--kind")
    Session = _store(db)
    session_id = _session_id(Session, session)
    position = None
    if item is not None:
        with Session() as s:
            position = _instance_position(s, session_id, item)
    elif kind != "undo":
        raise UserError(f"--kind {kind} needs an ITEM id")

    def work(s):
        event = repo.record_event(s, session_id=session_id, annotator=annotator, kind=kind, instance_position=position, label=label)
        s.flush()
        return event.id

    event_id = store_db.write_transaction(Session, work)
    out.print(f"Recorded {kind} (event {event_id}).")


# ---------------------------------------------------------------------------- export


@app.command()
def export(
    session: str = typer.Argument(..., help="Session name."),
    output: Path = typer.Option(..., "-o", "--output", help=".csv, .json or .parquet"),
    what: str = typer.Option("ranked", help="ranked (query list), labelled (dataset) or events (answer log)."),
    db: str = DbOption,
) -> None:
    """Export a session's ranked query list, labelled dataset or answer log.

    Example: winnow export week1 --what labelled -o labelled.csv
    """
    _choice(what, ("ranked", "labelled", "events"), "--what")
    from app import workbench as wb
    from app.io import write_table

    Session = _store(db)
    session_id = _session_id(Session, session)
    if what == "events":
        import pandas as pd

        with Session() as s:
            table = pd.DataFrame(repo.event_log(s, session_id))
    else:
        with progress(f"Loading session {session}"):
            bench = wb.Workbench.open(Session, session_id)
        table = bench.ranked_table() if what == "ranked" else bench.labelled_table()
    path = write_table(table, output)
    out.print(f"Wrote {len(table)} rows to {path}.")


# ---------------------------------------------------------------------------- demo and ui


def _ensure_sample_session(db: str, name: str = "demo") -> int:
    if not SAMPLE_FILE.exists():
        raise UserError(f"the bundled sample {SAMPLE_FILE} is missing; run python sample_data/make_sample.py")
    Session = _store(db)
    with Session() as s:
        existing = [x for x in repo.list_sessions(s) if x.name == name]
        if existing:
            return existing[0].id
        datasets = [d for d in repo.list_datasets(s) if d.name == "digits_partial"]
    dataset_id = datasets[0].id if datasets else import_file(Session, SAMPLE_FILE, name="digits_partial", min_rows=11)[0]
    return create_session(Session, dataset_id=dataset_id, name=name, k=10, weighting="uniform", criterion="apl", target_set="all")


@app.command()
def demo(
    db: Optional[str] = typer.Option(None, "--db", help="Keep the demo session in this database (default: a temporary one)."),
    top: int = typer.Option(10, help="How many queries to show."),
) -> None:
    """Rank the bundled sample digits and explain the first query.  Example: winnow demo"""
    from app import workbench as wb

    with contextlib.ExitStack() as stack:
        if db is None:
            db = str(Path(stack.enter_context(tempfile.TemporaryDirectory())) / "demo.db")
        Session = _store(db)
        with progress("Importing the sample digits and ranking them"):
            session_id = _ensure_sample_session(db)
            bench = wb.Workbench.open(Session, session_id)
        st = bench.state
        out.print(f"[bold]{st.n_instances}[/] digits, {int(st.open_items.sum())} with several candidate labels, "
                  f"{bench.n_ambiguous} targets whose k-NN decision is still open.")
        table = Table("rank", "id", "score", "candidates", "true label")
        for i, p in enumerate(bench.queue(top=top), 1):
            truth = st.label_names[st.true_labels[p]] if st.true_labels is not None and st.true_labels[p] >= 0 else "?"
            table.add_row(str(i), st.external_ids[p], f"{bench.scores[p]:g}",
                          "|".join(st.label_names[m] for m in np.flatnonzero(st.candidates[p])), truth)
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
        out.print(f"DST-PLL refuses {rejects.n_rejected} of {rejects.positions.size} partial items; they go to the expert.")


@app.command()
def ui(
    db: str = DbOption,
    port: int = typer.Option(8501, help="Local port."),
    sample: bool = typer.Option(False, "--sample", help="Create a 'demo' session on the bundled sample if missing."),
    headless: bool = typer.Option(False, help="Do not open a browser window."),
    address: str = typer.Option("localhost", help="Interface to serve on; 0.0.0.0 shares the app on the network."),
) -> None:
    """Open the annotator's browser app on a database.  Example: winnow ui --db winnow.db"""
    if sample:
        _ensure_sample_session(db)
    else:
        _store(db)
    # Streamlit always runs headless: otherwise its first run on a machine stops at an
    # interactive e-mail prompt. winnow opens the browser itself once the server answers.
    command = [
        sys.executable, "-m", "streamlit", "run", str(UI_HOME),
        "--server.port", str(port), "--server.address", address, "--server.headless", "true",
        "--browser.gatherUsageStats", "false", "--", "--db", db,
    ]
    url = f"http://localhost:{port}"
    server = subprocess.Popen(command)
    try:
        if _wait_until_healthy(server, f"{url}/_stcore/health"):
            out.print(f"winnow is running at {url} (Ctrl+C to stop)")
            if not headless:
                import webbrowser

                webbrowser.open(url)
        raise typer.Exit(server.wait())
    except KeyboardInterrupt:
        server.terminate()
        raise typer.Exit(server.wait())


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


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; user errors become one line on stderr and exit status 2."""
    try:
        app(args=argv, standalone_mode=False)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except SolverError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(1)
    except (UserError, WinnowError, FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        message = str(exc) if not isinstance(exc, OSError) else f"{exc.strerror}: {exc.filename}"
        err.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except Exception as exc:  # click usage errors come through here in standalone_mode=False
        import click

        if isinstance(exc, click.exceptions.ClickException):
            err.print(f"error: {exc.format_message()}", markup=False, highlight=False)
            sys.exit(exc.exit_code)
        raise


if __name__ == "__main__":
    main()
