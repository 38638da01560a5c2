"""Labelling sessions keep their keyboard keys.

Revision ID: 0005
Revises: 0009 (numbered 0005 as planned; it follows 0009, the head of main when it was written)
Create Date: 2026-11-24

``labelling_sessions.hotkeys`` (JSON, nullable): label name -> key, as
:func:`app.store.hotkeys.set_session_hotkeys` validated it. ``NULL`` (every existing session)
means the default keys of :func:`app.store.hotkeys.default_hotkeys`, so an upgraded store keeps
working unchanged. A plain ``ADD COLUMN`` on both backends; the downgrade drops it again.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("labelling_sessions", sa.Column("hotkeys", sa.JSON(), nullable=True))


def downgrade() -> None:
    # Native DROP COLUMN (SQLite 3.35+): a batch copy of labelling_sessions would have to
    # rebuild the table answer_events references.
    op.drop_column("labelling_sessions", "hotkeys")
