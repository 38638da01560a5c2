"""``python -m app.cli``: the ``winnow`` command without the installed entry point."""

from app.cli import run

run()
