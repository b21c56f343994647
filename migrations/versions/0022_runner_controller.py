"""runner_controller: the priority controller's facts and last plan, one row per repository
(issue 27: sweepbot places every GPU job of the repo on GitHub's runner-label contract).

Revision ID: 0022_runner_controller
Revises: 0021_accuracy_threshold
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022_runner_controller"
down_revision = "0021_accuracy_threshold"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runner_controller",
        sa.Column("repo", sa.String(200), primary_key=True),
        sa.Column("facts", sa.JSON(), nullable=False),
        sa.Column("view", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("runner_controller")
