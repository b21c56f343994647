"""audit_log.caused_by: who caused a write, beside who made it (actor)

A GitHub write is always made by the bot (its token); a maintainer's `/depends-on drop` or an
operator's dashboard action is what caused it. Before, such writes were recorded under the
maintainer's name as if they had made them.

Revision ID: 0007_audit_caused_by
Revises: 0006_pr_heads
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_audit_caused_by"
down_revision = "0006_pr_heads"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("audit_log") as batch:
        batch.add_column(sa.Column("caused_by", sa.String(200), nullable=True))
        batch.create_index("ix_audit_log_caused_by", ["caused_by"])


def downgrade() -> None:
    with op.batch_alter_table("audit_log") as batch:
        batch.drop_index("ix_audit_log_caused_by")
        batch.drop_column("caused_by")
