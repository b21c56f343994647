"""ix_sweeps_serving: the active sweeps in serving order (priority class, the sweep served least
recently, id), so the tick reads a page of them without sorting every active sweep (issue 29: the
tick's cost grew with the number of sweeps; app.store.jobs.sweeps_in_serving_order).

Revision ID: 0025_sweeps_serving_index
Revises: 0024_resync
"""

from __future__ import annotations

from alembic import op

revision = "0025_sweeps_serving_index"
down_revision = "0024_resync"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_sweeps_serving", "sweeps", ["state", "priority", "last_release", "id"])


def downgrade() -> None:
    op.drop_index("ix_sweeps_serving", table_name="sweeps")
