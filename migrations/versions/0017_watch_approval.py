"""watches.admitted_by, approved_sha, body_changed_at: who admitted a watch (issue 25).

A watch counts only when its dependency lines were written by someone with write access, or a
maintainer approved it (``/depends-on approve``, bound to the head they reviewed). Watches stored
before this: those of the bot config and of commands (which always needed write) are admitted as
before (``admitted_by`` = their source); body watches get NULL and are admitted again at their next
check when the PR's author has write access, else they wait for a maintainer. Every watch's pin is
read again (``head_sha`` cleared), so its image repository is admitted from the default branch.

Revision ID: 0017_watch_approval
Revises: 0016_unexpanded_prediction
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017_watch_approval"
down_revision = "0016_unexpanded_prediction"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("watches") as batch:
        batch.add_column(sa.Column("admitted_by", sa.String(200)))
        batch.add_column(sa.Column("approved_sha", sa.String(64)))
        batch.add_column(sa.Column("body_changed_at", sa.DateTime(timezone=True)))
    op.execute("UPDATE watches SET admitted_by = source WHERE source IN ('config', 'command')")
    # Re-read every pin at its next check: the image repository a watch tracks is admitted from
    # the default branch from now on, and one stored before was taken from the PR's head.
    op.execute("UPDATE watches SET head_sha = NULL")


def downgrade() -> None:
    with op.batch_alter_table("watches") as batch:
        batch.drop_column("body_changed_at")
        batch.drop_column("approved_sha")
        batch.drop_column("admitted_by")
