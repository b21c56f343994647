"""pr_heads: the heads the bot saw each pull request at (keep in step with app/models/heads.py)

Revision ID: 0006_pr_heads
Revises: 0005_nightly
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_pr_heads"
down_revision = "0005_nightly"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pr_heads",
        sa.Column("id", sa.Integer, autoincrement=True, nullable=False),
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("pr_number", sa.Integer, nullable=False),
        sa.Column("head_sha", sa.String(64), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("delivery_id", sa.String(64)),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pr_heads")),
    )
    op.create_index("ix_pr_heads_pr", "pr_heads", ["repo", "pr_number", "seen_at"])


def downgrade() -> None:
    op.drop_index("ix_pr_heads_pr", table_name="pr_heads")
    op.drop_table("pr_heads")
