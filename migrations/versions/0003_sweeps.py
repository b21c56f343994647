"""sweeps tables (owned by the sweeps capability; keep in step with app/models/sweeps.py)

Revision ID: 0003_sweeps
Revises: 0002_tracking
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_sweeps"
down_revision = "0002_tracking"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sweeps",
        sa.Column("id", sa.Integer, autoincrement=True, nullable=False),
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("pr_number", sa.Integer, nullable=False),
        sa.Column("head_sha", sa.String(40), nullable=False),
        sa.Column("head_ref", sa.String(255), nullable=False),
        sa.Column("base_ref", sa.String(255), nullable=False),
        sa.Column("head_repo", sa.String(200)),
        sa.Column("is_fork", sa.Boolean, nullable=False),
        sa.Column("config_key", sa.String(200), nullable=False),
        sa.Column("config_path", sa.String(400)),
        sa.Column("image", sa.String(400), nullable=False),
        sa.Column("fingerprint", sa.String(128), nullable=False),
        sa.Column("points_digest", sa.String(64), nullable=False),
        sa.Column("filters", sa.JSON),
        sa.Column("requested_by", sa.String(200), nullable=False),
        sa.Column("reason", sa.String(16), nullable=False),
        sa.Column("priority", sa.Integer, nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("state_reason", sa.Text),
        sa.Column("superseded_by", sa.Integer),
        sa.Column("approved_by", sa.String(200)),
        sa.Column("approved_sha", sa.String(40)),
        sa.Column("approved_at", sa.DateTime(timezone=True)),
        sa.Column("last_release", sa.Integer, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True)),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.ForeignKeyConstraint(
            ["superseded_by"], ["sweeps.id"], name=op.f("fk_sweeps_superseded_by_sweeps"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sweeps")),
    )
    op.create_index("ix_sweeps_repo_pr_key", "sweeps", ["repo", "pr_number", "config_key"])
    op.create_index("ix_sweeps_state", "sweeps", ["state"])

    op.create_table(
        "sweep_jobs",
        sa.Column("id", sa.Integer, autoincrement=True, nullable=False),
        sa.Column("sweep_id", sa.Integer, nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("point", sa.JSON, nullable=False),
        sa.Column("result_name", sa.String(400), nullable=False),
        sa.Column("runner_label", sa.String(100), nullable=False),
        sa.Column("seq", sa.String(32), nullable=False),
        sa.Column("conc", sa.Integer, nullable=False),
        sa.Column("tp", sa.Integer, nullable=False),
        sa.Column("group_key", sa.String(200), nullable=False),
        sa.Column("slots", sa.Integer, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("claim", sa.String(64)),
        sa.Column("run_name", sa.String(100)),
        sa.Column("run_id", sa.BigInteger),
        sa.Column("run_url", sa.String(500)),
        sa.Column("run_conclusion", sa.String(32)),
        sa.Column("result_url", sa.String(500)),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("dispatched_at", sa.DateTime(timezone=True)),
        sa.Column("started_at", sa.DateTime(timezone=True)),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.Column("updated_at", sa.DateTime(timezone=True)),
        sa.ForeignKeyConstraint(
            ["sweep_id"], ["sweeps.id"], name=op.f("fk_sweep_jobs_sweep_id_sweeps"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sweep_jobs")),
    )
    op.create_index("ix_sweep_jobs_sweep_position", "sweep_jobs", ["sweep_id", "position"])
    op.create_index("ix_sweep_jobs_label_state", "sweep_jobs", ["runner_label", "state"])
    op.create_index("ix_sweep_jobs_run_id", "sweep_jobs", ["run_id"])
    op.create_index("ix_sweep_jobs_run_name", "sweep_jobs", ["run_name"])

    op.create_table(
        "runner_labels",
        sa.Column("label", sa.String(100), nullable=False),
        sa.Column("paused", sa.Boolean, nullable=False),
        sa.Column("paused_by", sa.String(200)),
        sa.Column("paused_at", sa.DateTime(timezone=True)),
        sa.Column("capacity", sa.Integer),
        sa.Column("capacity_source", sa.String(200)),
        sa.Column("release_seq", sa.Integer, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True)),
        sa.PrimaryKeyConstraint("label", name=op.f("pk_runner_labels")),
    )


def downgrade() -> None:
    op.drop_table("runner_labels")
    op.drop_index("ix_sweep_jobs_run_name", table_name="sweep_jobs")
    op.drop_index("ix_sweep_jobs_run_id", table_name="sweep_jobs")
    op.drop_index("ix_sweep_jobs_label_state", table_name="sweep_jobs")
    op.drop_index("ix_sweep_jobs_sweep_position", table_name="sweep_jobs")
    op.drop_table("sweep_jobs")
    op.drop_index("ix_sweeps_state", table_name="sweeps")
    op.drop_index("ix_sweeps_repo_pr_key", table_name="sweeps")
    op.drop_table("sweeps")
