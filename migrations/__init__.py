"""Alembic migrations of the winnow store schema.

The app runs them programmatically (:func:`app.store.db.upgrade_database`) with
``script_location`` set to this package's directory, so they work from any working directory.
From a checkout, ``alembic -c migrations/alembic.ini upgrade head`` does the same on
``winnow.db`` (override with ``-x url=sqlite:///other.db``).
"""
