"""The ``winnow`` command line: the browser app's work without the browser.

Commands parse their options and print; the work is done by the service layer
(:mod:`app.service`), the same functions the browser app calls. Every user error ends with
exit status 2 and one line on stderr (``error: ...``); the database is left unchanged because
each write is a single transaction.
"""

from app.cli.entry import app, click_exception_classes, main, readable_help, run

__all__ = ["app", "click_exception_classes", "main", "readable_help", "run"]
