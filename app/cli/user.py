"""The ``winnow user`` group: the accounts of a team store and its audit log."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.table import Table

from app.cli.console import UserError, out
from app.cli.options import DbOption
from app.store import open_store
from engine import check_choice

user_app = typer.Typer(help="User accounts of a team store (admin, annotator, reviewer).", no_args_is_help=True)


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

    Then type the password twice.

    Example: winnow user add alice --role annotator
    """
    from app.service import create_user
    from app.store.models import ROLES

    check_choice(role, "--role", ROLES)
    password = _read_password(password_stdin)
    user = create_user(open_store(db, create=False), name, role=role, password=password)
    out.print(f"Added user {user.name!r} with role {user.role!r}.")


@user_app.command("list")
def user_list(db: str = DbOption) -> None:
    """List the accounts.

    Example: winnow user list
    """
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
    """Disable an account: it can no longer sign in or answer.

    Example: winnow user disable bob
    """
    from app.service import disable_user

    disable_user(open_store(db, create=False), name)
    out.print(f"Disabled user {name!r}.")


@user_app.command("role")
def user_role(
    name: str = typer.Argument(...),
    role: str = typer.Argument(..., help="admin, annotator or reviewer."),
    db: str = DbOption,
) -> None:
    """Change a user's role.

    Example: winnow user role bob reviewer
    """
    from app.service import change_role

    user = change_role(open_store(db, create=False), name, role)
    out.print(f"User {user.name!r} now has role {user.role!r}.")


@user_app.command("passwd")
def user_passwd(
    name: str = typer.Argument(...),
    password_stdin: bool = typer.Option(False, "--password-stdin", help="Read the password from standard input."),
    db: str = DbOption,
) -> None:
    """Set a user's password.

    Example: winnow user passwd alice
    """
    from app.service import change_password

    Session = open_store(db, create=False)
    change_password(Session, name, _read_password(password_stdin))
    out.print(f"Changed the password of {name!r}.")
