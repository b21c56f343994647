"""ix_sweep_jobs_label_state_slots: the label's queued jobs by slots, so the tick reads the
narrowest job queued on a label as one index row (issue 29: the plan stops once nothing queued fits
the room left; app.store.jobs.narrowest_queued). It replaces ix_sweep_jobs_label_state, its prefix.

Revision ID: 0026_label_state_slots_index
Revises: 0025_sweeps_serving_index
"""

from __future__ import annotations

from alembic import op

revision = "0026_label_state_slots_index"
down_revision = "0025_sweeps_serving_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_sweep_jobs_label_state_slots", "sweep_jobs", ["runner_label", "state", "slots"])
    op.drop_index("ix_sweep_jobs_label_state", table_name="sweep_jobs")


def downgrade() -> None:
    op.create_index("ix_sweep_jobs_label_state", "sweep_jobs", ["runner_label", "state"])
    op.drop_index("ix_sweep_jobs_label_state_slots", table_name="sweep_jobs")
