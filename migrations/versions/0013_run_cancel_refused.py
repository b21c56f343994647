"""sweep_jobs.run_cancel_refused: GitHub refused to cancel the job's run (a 4xx such as 403 "Must
have admin rights to Repository."), remembered so no later workflow_run asks again (each refused
POST spent the API budget; see app/flows/sweeps/cancel.py).

Revision ID: 0013_run_cancel_refused
Revises: 0012_dispatch_runs
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_run_cancel_refused"
down_revision = "0012_dispatch_runs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sweep_jobs") as batch:
        batch.add_column(sa.Column("run_cancel_refused", sa.String(300)))


def downgrade() -> None:
    with op.batch_alter_table("sweep_jobs") as batch:
        batch.drop_column("run_cancel_refused")
