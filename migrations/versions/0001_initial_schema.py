"""Initial schema: datasets, instances, labelling sessions, annotators, answer events.

Revision ID: 0001
Revises:
Create Date: 2026-11-21

``answer_events`` is append-only: on SQLite and PostgreSQL a trigger rejects every UPDATE and
DELETE of it (current candidate sets are derived from the events, never stored).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_KINDS = "('answer', 'none_of_these', 'other_label', 'skip', 'undo', 'resolve')"
_LABELLED = "('answer', 'other_label', 'resolve')"

_SQLITE_TRIGGERS = (
    """
    CREATE TRIGGER answer_events_no_update BEFORE UPDATE ON answer_events
    BEGIN SELECT RAISE(ABORT, 'answer_events is append-only: record a new event instead'); END
    """,
    """
    CREATE TRIGGER answer_events_no_delete BEFORE DELETE ON answer_events
    BEGIN SELECT RAISE(ABORT, 'answer_events is append-only: record an undo event instead'); END
    """,
)

_POSTGRESQL_TRIGGERS = (
    """
    CREATE FUNCTION answer_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'answer_events is append-only: record a new event instead';
    END
    $$
    """,
    """
    CREATE TRIGGER answer_events_append_only BEFORE UPDATE OR DELETE ON answer_events
    FOR EACH ROW EXECUTE FUNCTION answer_events_append_only()
    """,
)


def upgrade() -> None:
    op.create_table(
        "annotators",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_annotators")),
        sa.UniqueConstraint("name", name=op.f("uq_annotators_name")),
    )
    op.create_table(
        "datasets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("label_names", sa.JSON(), nullable=False),
        sa.Column("n_instances", sa.Integer(), nullable=False),
        sa.Column("n_features", sa.Integer(), nullable=False),
        sa.Column("feature_names", sa.JSON(), nullable=True),
        sa.Column("layout", sa.String(length=100), nullable=True),
        sa.CheckConstraint("n_features >= 1", name=op.f("ck_datasets_n_features_positive")),
        sa.CheckConstraint("n_instances >= 0", name=op.f("ck_datasets_n_instances_nonnegative")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_datasets")),
        sa.UniqueConstraint("name", name=op.f("uq_datasets_name")),
    )
    op.create_table(
        "instances",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("external_id", sa.String(length=200), nullable=False),
        sa.Column("features", sa.LargeBinary(), nullable=False),
        sa.Column("candidate_mask", sa.String(length=256), nullable=False),
        sa.Column("true_label", sa.Integer(), nullable=True),
        sa.CheckConstraint("position >= 0", name=op.f("ck_instances_position_nonnegative")),
        sa.CheckConstraint(
            "true_label IS NULL OR true_label >= 0",
            name=op.f("ck_instances_true_label_nonnegative"),
        ),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"], name=op.f("fk_instances_dataset_id_datasets")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_instances")),
        sa.UniqueConstraint("dataset_id", "external_id", name=op.f("uq_instances_dataset_id_external_id")),
        sa.UniqueConstraint("dataset_id", "position", name=op.f("uq_instances_dataset_id_position")),
    )
    op.create_table(
        "labelling_sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("k", sa.Integer(), nullable=False),
        sa.Column("weighting", sa.String(length=20), nullable=False),
        sa.Column("criterion", sa.String(length=20), nullable=False),
        sa.Column("target_set", sa.String(length=20), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "criterion IN ('apl', 'pl', 'participation', 'most_partial', 'random')",
            name=op.f("ck_labelling_sessions_criterion"),
        ),
        sa.CheckConstraint("target_set IN ('all', 'unlabelled')", name=op.f("ck_labelling_sessions_target_set")),
        sa.CheckConstraint("weighting IN ('uniform', 'distance')", name=op.f("ck_labelling_sessions_weighting")),
        sa.CheckConstraint("k >= 1", name=op.f("ck_labelling_sessions_k_positive")),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name=op.f("fk_labelling_sessions_dataset_id_datasets")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_labelling_sessions")),
        sa.UniqueConstraint("name", name=op.f("uq_labelling_sessions_name")),
    )
    op.create_index(op.f("ix_labelling_sessions_dataset_id"), "labelling_sessions", ["dataset_id"], unique=False)
    op.create_table(
        "answer_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("instance_id", sa.Integer(), nullable=False),
        sa.Column("annotator_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("label", sa.Integer(), nullable=True),
        sa.Column("undoes_event_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "(kind = 'undo' AND undoes_event_id IS NOT NULL) OR (kind <> 'undo' AND undoes_event_id IS NULL)",
            name=op.f("ck_answer_events_undo_target"),
        ),
        sa.CheckConstraint(
            f"(kind IN {_LABELLED} AND label IS NOT NULL AND label >= 0)"
            f" OR (NOT kind IN {_LABELLED} AND label IS NULL)",
            name=op.f("ck_answer_events_label_presence"),
        ),
        sa.CheckConstraint(f"kind IN {_KINDS}", name=op.f("ck_answer_events_kind")),
        sa.ForeignKeyConstraint(
            ["annotator_id"], ["annotators.id"], name=op.f("fk_answer_events_annotator_id_annotators")
        ),
        sa.ForeignKeyConstraint(["instance_id"], ["instances.id"], name=op.f("fk_answer_events_instance_id_instances")),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["labelling_sessions.id"],
            name=op.f("fk_answer_events_session_id_labelling_sessions"),
        ),
        sa.ForeignKeyConstraint(
            ["undoes_event_id"],
            ["answer_events.id"],
            name=op.f("fk_answer_events_undoes_event_id_answer_events"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_answer_events")),
        sa.UniqueConstraint("undoes_event_id", name=op.f("uq_answer_events_undoes_event_id")),
    )
    op.create_index(op.f("ix_answer_events_instance_id"), "answer_events", ["instance_id"], unique=False)
    op.create_index(
        "ix_answer_events_session_annotator",
        "answer_events",
        ["session_id", "annotator_id", "id"],
        unique=False,
    )
    op.create_index("ix_answer_events_session_id_id", "answer_events", ["session_id", "id"], unique=False)

    dialect = op.get_bind().dialect.name
    triggers = {"sqlite": _SQLITE_TRIGGERS, "postgresql": _POSTGRESQL_TRIGGERS}.get(dialect, ())
    for statement in triggers:
        op.execute(statement)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS answer_events_no_delete")
        op.execute("DROP TRIGGER IF EXISTS answer_events_no_update")
    elif dialect == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS answer_events_append_only ON answer_events")
        op.execute("DROP FUNCTION IF EXISTS answer_events_append_only()")
    op.drop_index("ix_answer_events_session_id_id", table_name="answer_events")
    op.drop_index("ix_answer_events_session_annotator", table_name="answer_events")
    op.drop_index(op.f("ix_answer_events_instance_id"), table_name="answer_events")
    op.drop_table("answer_events")
    op.drop_index(op.f("ix_labelling_sessions_dataset_id"), table_name="labelling_sessions")
    op.drop_table("labelling_sessions")
    op.drop_table("instances")
    op.drop_table("datasets")
    op.drop_table("annotators")
