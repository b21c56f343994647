"""nightly regression watch tables (keep in step with app/models/nightly.py)

Revision ID: 0005_nightly
Revises: 0004_results
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_nightly"
down_revision = "0004_results"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "nightly_canaries",
        sa.Column("id", sa.Integer, autoincrement=True, nullable=False),
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("config_key", sa.String(200), nullable=False),
        sa.Column("image_repo", sa.String(300), nullable=False),
        sa.Column("tag", sa.String(300), nullable=False),
        sa.Column("image", sa.String(400), nullable=False),
        sa.Column("commit_sha", sa.String(64)),
        sa.Column("pushed_at", sa.DateTime(timezone=True)),
        sa.Column("tag_seq", sa.Integer, nullable=False),
        sa.Column("purpose", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("sweep_id", sa.Integer),
        sa.Column("branch", sa.String(300)),
        sa.Column("branch_sha", sa.String(64)),
        sa.Column("preempted_hours", sa.Float, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True)),
        sa.Column("measured_at", sa.DateTime(timezone=True)),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("repo", "config_key", "tag", name="uq_nightly_canaries_key_tag"),
    )
    op.create_index("ix_nightly_canaries_repo_key", "nightly_canaries", ["repo", "config_key"])
    op.create_index("ix_nightly_canaries_sweep_id", "nightly_canaries", ["sweep_id"])
    op.create_table(
        "nightly_regressions",
        sa.Column("id", sa.Integer, autoincrement=True, nullable=False),
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("config_key", sa.String(200), nullable=False),
        sa.Column("image_repo", sa.String(300), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("last_good_tag", sa.String(300), nullable=False),
        sa.Column("first_bad_tag", sa.String(300), nullable=False),
        sa.Column("last_good_sha", sa.String(64)),
        sa.Column("first_bad_sha", sa.String(64)),
        sa.Column("series", sa.JSON, nullable=False),
        sa.Column("bisect_runs", sa.Integer, nullable=False),
        sa.Column("source_repo", sa.String(200)),
        sa.Column("commits", sa.JSON),
        sa.Column("pulls", sa.JSON),
        sa.Column("compare_url", sa.String(500)),
        sa.Column("issue_repo", sa.String(200)),
        sa.Column("issue_number", sa.Integer),
        sa.Column("recovered_tag", sa.String(300)),
        sa.Column("noted_watches", sa.JSON),
        sa.Column("reason", sa.Text),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True)),
        sa.Column("closed_at", sa.DateTime(timezone=True)),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_nightly_regressions_repo_key", "nightly_regressions", ["repo", "config_key"])


def downgrade() -> None:
    op.drop_index("ix_nightly_regressions_repo_key", table_name="nightly_regressions")
    op.drop_table("nightly_regressions")
    op.drop_index("ix_nightly_canaries_sweep_id", table_name="nightly_canaries")
    op.drop_index("ix_nightly_canaries_repo_key", table_name="nightly_canaries")
    op.drop_table("nightly_canaries")
