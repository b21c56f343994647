"""report_states.body_digest: the sha256 of the body the sticky report comment was last given, so
a flush that renders the same text does not edit it (issue 19: one edit per debounce window per
comment; a job change the report does not show, such as a throughput job's success before its
result is collected, still marks the report dirty).

Revision ID: 0015_report_body_digest
Revises: 0014_matrix_rank
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_report_body_digest"
down_revision = "0014_matrix_rank"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("report_states") as batch:
        batch.add_column(sa.Column("body_digest", sa.String(64)))


def downgrade() -> None:
    with op.batch_alter_table("report_states") as batch:
        batch.drop_column("body_digest")
