"""sweeps.unexpanded and dispatch_runs.callers_seen: a run's never-created matrix jobs concluded
from the workflow file the sweep was planned at, without reading GitHub (issue 19: at InferenceX
843c6254 every run's `eval /` never expands, and reading why took the run's job list and the failed
job's annotations, two rate-limited calls per run with eval points).

``sweeps.unexpanded``: what app.core.unexpanded_workflow found in the dispatch workflow at the dispatched
ref; ``dispatch_runs.callers_seen``: the callers whose benchmark jobs the run's workflow_job events
showed. NULL in both (rows stored before this) keeps the reading path.

Revision ID: 0016_unexpanded_prediction
Revises: 0015_report_body_digest
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016_unexpanded_prediction"
down_revision = "0015_report_body_digest"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sweeps") as batch:
        batch.add_column(sa.Column("unexpanded", sa.JSON()))
    with op.batch_alter_table("dispatch_runs") as batch:
        batch.add_column(sa.Column("callers_seen", sa.JSON()))


def downgrade() -> None:
    with op.batch_alter_table("dispatch_runs") as batch:
        batch.drop_column("callers_seen")
    with op.batch_alter_table("sweeps") as batch:
        batch.drop_column("unexpanded")
