"""sweeps.eval_thresholds and eval_results.gated: the report judges accuracy against the benchmark
repo's own gate (issue 26) as well as against the reference.

``sweeps.eval_thresholds``: the repo's ``utils/evals/thresholds.yaml`` read at the ref the sweep
runs when it was planned (app.core.thresholds); ``eval_results.gated``: whether the repo's
``validate_scores.py`` checks that score (a metric the task declares, else exact_match). NULL in
both (rows stored before this): thresholds not read, exact_match assumed.

Revision ID: 0021_accuracy_threshold
Revises: 0018_session_revocation
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021_accuracy_threshold"
down_revision = "0018_session_revocation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sweeps") as batch:
        batch.add_column(sa.Column("eval_thresholds", sa.JSON()))
    with op.batch_alter_table("eval_results") as batch:
        batch.add_column(sa.Column("gated", sa.Boolean()))


def downgrade() -> None:
    with op.batch_alter_table("eval_results") as batch:
        batch.drop_column("gated")
    with op.batch_alter_table("sweeps") as batch:
        batch.drop_column("eval_thresholds")
