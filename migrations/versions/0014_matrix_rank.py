"""sweep_jobs.matrix_rank / matrix_twins: a job's place among its dispatch's run's jobs of the same
name. e2e-tests.yml's job names carry no seq-len, and a run also holds the points a sweep filtered
out (test-config selects by conc only), so a sweep filtered to 8k1k took the 1k1k job of its run for
its own (app/core/dispatchjobs.py). NULL for jobs stored before: they keep the old matching.

Revision ID: 0014_matrix_rank
Revises: 0013_run_cancel_refused
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_matrix_rank"
down_revision = "0013_run_cancel_refused"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sweep_jobs") as batch:
        batch.add_column(sa.Column("matrix_rank", sa.Integer()))
        batch.add_column(sa.Column("matrix_twins", sa.Integer()))


def downgrade() -> None:
    with op.batch_alter_table("sweep_jobs") as batch:
        batch.drop_column("matrix_twins")
        batch.drop_column("matrix_rank")
