"""The ``winnow`` typer app with every command registered, and its entry points.

:func:`main` turns every user error into one line on stderr and exit status 2, never a traceback;
:func:`run` is the installed command.
"""

from __future__ import annotations

import gc
import inspect
import io
import sys
from collections.abc import Callable, Iterator
from typing import Any

import typer
import typer.main

from app.cli.console import UserError, err, out, printable
from app.cli.data import answer, demo, export, import_command, init, rank
from app.cli.server import ui
from app.cli.session import session_app
from app.cli.user import user_app
from app.cli_simulate import simulate_command
from app.store import close_stores
from engine.exceptions import SolverError, WinnowError

# The file readers, the workbench and the engine pull in pandas, scikit-learn and OR-Tools
# (seconds of imports): commands import the service layer when they run, so `--help` stays
# instant.

app = typer.Typer(
    name="winnow",
    help="Rank which partially labelled items an expert should settle first, and label them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(session_app, name="session")
app.add_typer(user_app, name="user")

app.command("import")(import_command)
app.command()(init)
app.command()(rank)
app.command()(answer)
app.command()(export)
app.command()(demo)
app.command()(ui)
app.command("simulate")(simulate_command)


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


def _not_utf8(value: str) -> bool:
    """True when ``value`` holds a lone surrogate: on POSIX, Python decodes the bytes of an
    argument that are not UTF-8 as U+DC80-U+DCFF ("surrogateescape")."""
    return any("\ud800" <= ch <= "\udfff" for ch in value)


def _as_typed(value: str) -> str:
    r"""``value`` as the user typed it, its undecodable bytes written ``\xff``."""
    try:
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no byte decodes to: not from the command line
        return value.encode("utf-8", "backslashreplace").decode("utf-8")


def _utf8_names(previous: Callable[..., Any] | None) -> Callable[..., Any]:
    """A click parameter callback refusing a value that is not UTF-8, then calling ``previous``.

    Names, ids, labels, column names and store URLs are stored and compared as UTF-8 text; a
    database lookup with one that is not ended in a ``UnicodeEncodeError`` traceback. A file
    argument (a ``Path`` parameter) may be any name the system opens: it is not checked here.
    """

    def check(ctx: Any, param: Any, value: Any) -> Any:
        values = value if isinstance(value, (list, tuple)) else [value]
        for one in values:
            if isinstance(one, str) and _not_utf8(one):
                label = param.opts[0] if param.param_type_name == "option" else param.human_readable_name
                raise UserError(
                    f"{label} '{printable(_as_typed(one)).plain}' is not UTF-8 text (see '{ctx.command_path} --help')"
                )
        return value if previous is None else previous(ctx, param, value)

    return check


def _commands(command: Any) -> Iterator[Any]:
    yield command
    for sub in getattr(command, "commands", {}).values():
        yield from _commands(sub)


def readable_help(text: str | None) -> str | None:
    r"""``text`` with each prose paragraph on one line, for the help to wrap at the terminal's width.

    typer keeps a docstring's line breaks after its first paragraph, so a sentence broke where
    the source does and again where the terminal does ("with no error among" / "them" at 80
    columns). A paragraph beginning with "Example" keeps its lines: one command line each.

    >>> readable_help("Show it.\n\nWith no option,\nprints it.\n\nExamples:\nwinnow a\nwinnow b")
    'Show it.\n\nWith no option, prints it.\n\nExamples:\nwinnow a\nwinnow b'
    """
    if not text:
        return text
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(p if p.startswith("Example") else " ".join(p.split()) for p in paragraphs)


def cli_command() -> Any:
    """The click command of :data:`app`: every text parameter refusing a value that is not
    UTF-8 before any command runs (one home for the rule, whatever command a new name is
    added to), and every help text as :func:`readable_help` makes it."""
    command = typer.main.get_command(app)
    for each in _commands(command):
        each.help = readable_help(each.help)
        for param in each.params:
            if param.type.name == "text":
                param.callback = _utf8_names(param.callback)
    return command


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
    # click turns Ctrl+C into Abort.
    interrupts: tuple[type[BaseException], ...] = (KeyboardInterrupt, *click_exception_classes("Abort"))
    try:
        result = cli_command()(args=args, standalone_mode=False)
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
    except interrupts:
        err.print("interrupted")
        sys.exit(130)
    # Outside standalone mode click returns a command's exit status instead of exiting.
    sys.exit(result if isinstance(result, int) and not isinstance(result, bool) else 0)


def run() -> None:
    """The installed ``winnow`` command: :func:`main`, then a quick exit.

    Once a command is done, the interpreter's last garbage collections walk every object its
    imports made, SQLAlchemy's above all: 0.1 s of every command, a tenth of ``session
    status`` on 100,000 items (``docs/benchmarks.md``). The stores are closed here (SQLite
    checkpoints its WAL, a PostgreSQL server sees the connections end), the commands close
    their files themselves, and what is left is frozen out of those collections; exit
    handlers still run.

    A path that is not UTF-8 (``d\\xff.csv``, a file the system opens) is written back to
    standard output as the bytes it is, as Python does in the POSIX locale: in a UTF-8
    locale, naming it once the work was done ended in a ``UnicodeEncodeError`` traceback.
    """
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(errors="surrogateescape")
    try:
        main()
    finally:
        close_stores()
        gc.freeze()
