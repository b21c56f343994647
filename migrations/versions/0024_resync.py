"""watches.registry_error / registry_error_since: the registry a watch's image lives in could not
be read (issue 29: it looked like "no nightly contains the PR yet" and only a worker log line
told). Set by app/flows/tracking/evaluate.py, read by the overview's "Needs a human" and /metrics.

Revision ID: 0024_resync
Revises: 0023_retention_index
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024_resync"
down_revision = "0023_retention_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("watches") as batch:
        batch.add_column(sa.Column("registry_error", sa.Text(), nullable=True))
        batch.add_column(sa.Column("registry_error_since", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("watches") as batch:
        batch.drop_column("registry_error_since")
        batch.drop_column("registry_error")
