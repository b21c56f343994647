"""nightly_regressions.commits_total: the compare API's total_commits of a regression's range
(owned by the nightly watch; see app/models/nightly.py). More than the commits read means the
issue says the range was truncated.

Revision ID: 0010_nightly_range_total
Revises: 0009_evals
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_nightly_range_total"
down_revision = "0009_evals"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("nightly_regressions") as batch:
        batch.add_column(sa.Column("commits_total", sa.Integer))


def downgrade() -> None:
    with op.batch_alter_table("nightly_regressions") as batch:
        batch.drop_column("commits_total")
