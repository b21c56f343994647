"""tracking tables (owned by the tracking capability; keep in step with app/models/tracking.py)

Revision ID: 0002_tracking
Revises: 0001_core
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_tracking"
down_revision = "0001_core"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "watches",
        sa.Column("id", sa.Integer, autoincrement=True, nullable=False),
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("pr_number", sa.Integer, nullable=False),
        sa.Column("config_key", sa.String(200), nullable=False),
        sa.Column("config_path", sa.String(400)),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("image_repo", sa.String(300)),
        sa.Column("pinned_image", sa.String(400)),
        sa.Column("pinned_missing_since", sa.DateTime(timezone=True)),
        sa.Column("chosen_tag", sa.String(300)),
        sa.Column("first_containing_tag", sa.String(300)),
        sa.Column("decision", sa.String(16)),
        sa.Column("reason", sa.Text),
        sa.Column("head_sha", sa.String(64)),
        sa.Column("checked_at", sa.DateTime(timezone=True)),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_watches")),
        sa.UniqueConstraint("repo", "pr_number", "config_key", name=op.f("uq_watches_repo_pr_key")),
    )
    op.create_index(op.f("ix_watches_repo"), "watches", ["repo"])
    op.create_index(op.f("ix_watches_state"), "watches", ["state"])

    op.create_table(
        "watch_dependencies",
        sa.Column("id", sa.Integer, autoincrement=True, nullable=False),
        sa.Column("watch_id", sa.Integer, nullable=False),
        sa.Column("dep_repo", sa.String(200), nullable=False),
        sa.Column("dep_number", sa.Integer, nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("merge_sha", sa.String(64)),
        sa.Column("title", sa.String(400)),
        sa.Column("contained_in", sa.String(300)),
        sa.Column("dropped", sa.Boolean, nullable=False),
        sa.Column("dropped_by", sa.String(200)),
        sa.Column("added_by", sa.String(200)),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_watch_dependencies")),
        sa.ForeignKeyConstraint(
            ["watch_id"],
            ["watches.id"],
            ondelete="CASCADE",
            name=op.f("fk_watch_dependencies_watch_id_watches"),
        ),
        sa.UniqueConstraint(
            "watch_id", "dep_repo", "dep_number", name=op.f("uq_watch_dependencies_watch_dep")
        ),
    )
    op.create_index(op.f("ix_watch_dependencies_watch_id"), "watch_dependencies", ["watch_id"])

    op.create_table(
        "image_tags",
        sa.Column("id", sa.Integer, autoincrement=True, nullable=False),
        sa.Column("image_repo", sa.String(300), nullable=False),
        sa.Column("tag", sa.String(300), nullable=False),
        sa.Column("commit_sha", sa.String(64)),
        sa.Column("digest", sa.String(100)),
        sa.Column("pushed_at", sa.DateTime(timezone=True)),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("first_seen_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True)),
        sa.Column("deleted_at", sa.DateTime(timezone=True)),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_image_tags")),
        sa.UniqueConstraint("image_repo", "tag", name=op.f("uq_image_tags_image_tag")),
    )
    op.create_index(op.f("ix_image_tags_image_repo"), "image_tags", ["image_repo"])

    op.create_table(
        "compare_cache",
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("base", sa.String(64), nullable=False),
        sa.Column("head", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("ahead_by", sa.Integer, nullable=False),
        sa.Column("behind_by", sa.Integer, nullable=False),
        sa.Column("fetched_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("repo", "base", "head", name=op.f("pk_compare_cache")),
    )

    op.create_table(
        "bumps",
        sa.Column("id", sa.Integer, autoincrement=True, nullable=False),
        sa.Column("watch_id", sa.Integer, nullable=False),
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("config_key", sa.String(200), nullable=False),
        sa.Column("image", sa.String(400), nullable=False),
        sa.Column("old_image", sa.String(400)),
        sa.Column("config_path", sa.String(400)),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("branch", sa.String(300)),
        sa.Column("commit_sha", sa.String(64)),
        sa.Column("bump_pr_number", sa.Integer),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("detail", sa.JSON),
        sa.Column("sweep_requested", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bumps")),
        sa.ForeignKeyConstraint(
            ["watch_id"], ["watches.id"], ondelete="CASCADE", name=op.f("fk_bumps_watch_id_watches")
        ),
        sa.UniqueConstraint("watch_id", "image", name=op.f("uq_bumps_watch_image")),
    )
    op.create_index(op.f("ix_bumps_watch_id"), "bumps", ["watch_id"])
    op.create_index(op.f("ix_bumps_config_key"), "bumps", ["config_key"])

    op.create_table(
        "status_comments",
        sa.Column("id", sa.Integer, autoincrement=True, nullable=False),
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("pr_number", sa.Integer, nullable=False),
        sa.Column("comment_id", sa.Integer),
        sa.Column("body_sha", sa.String(64)),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_status_comments")),
        sa.UniqueConstraint("repo", "pr_number", name=op.f("uq_status_comments_repo_pr")),
    )

    op.create_table(
        "bot_configs",
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("ok", sa.Boolean, nullable=False),
        sa.Column("present", sa.Boolean, nullable=False),
        sa.Column("blob_sha", sa.String(64)),
        sa.Column("config", sa.JSON),
        sa.Column("error", sa.Text),
        sa.Column("read_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("repo", name=op.f("pk_bot_configs")),
    )


def downgrade() -> None:
    op.drop_table("bot_configs")
    op.drop_table("status_comments")
    op.drop_index(op.f("ix_bumps_config_key"), table_name="bumps")
    op.drop_index(op.f("ix_bumps_watch_id"), table_name="bumps")
    op.drop_table("bumps")
    op.drop_table("compare_cache")
    op.drop_index(op.f("ix_image_tags_image_repo"), table_name="image_tags")
    op.drop_table("image_tags")
    op.drop_index(op.f("ix_watch_dependencies_watch_id"), table_name="watch_dependencies")
    op.drop_table("watch_dependencies")
    op.drop_index(op.f("ix_watches_state"), table_name="watches")
    op.drop_index(op.f("ix_watches_repo"), table_name="watches")
    op.drop_table("watches")
