"""Signed-in browser sessions: identity proven by an HttpOnly cookie, not by a Streamlit session id.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25

``sign_in_sessions`` keeps, for every browser that signed in, the SHA-256 of the random token
its cookie carries, the user, and until when it is valid (issue 23: a Streamlit session id
taken from an upload URL resumed a signed-in admin's session).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "sign_in_sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("length(token_hash) = 64", name=op.f("ck_sign_in_sessions_token_hash_sha256")),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("fk_sign_in_sessions_user_id_users")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sign_in_sessions")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_sign_in_sessions_token_hash")),
    )


def downgrade() -> None:
    op.drop_table("sign_in_sessions")
