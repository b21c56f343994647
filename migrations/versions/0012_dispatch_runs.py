"""dispatch_runs: every run the bot dispatched, followed until GitHub says it completed (issue 19)

A retry re-dispatches a whole conc group, so the run re-runs siblings whose results we have; they
hold runners the scheduler must count until the run completes (app/models/dispatchruns.py).

Revision ID: 0012_dispatch_runs
Revises: 0011_delivery_body_lz4
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_dispatch_runs"
down_revision = "0011_delivery_body_lz4"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dispatch_runs",
        sa.Column("run_id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("runner_label", sa.String(100), nullable=False),
        sa.Column("run_name", sa.String(100), nullable=False),
        sa.Column("slots", sa.Integer, nullable=False),
        sa.Column("jobs_seen", sa.JSON, nullable=False),
        sa.Column("jobs_done", sa.JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("completed_at", sa.DateTime(timezone=True)),
        sa.Column("completed_why", sa.String(200)),
    )
    op.create_index("ix_dispatch_runs_label_completed", "dispatch_runs", ["runner_label", "completed_at"])


def downgrade() -> None:
    op.drop_index("ix_dispatch_runs_label_completed", table_name="dispatch_runs")
    op.drop_table("dispatch_runs")
