"""redelivery tables (owned by app/flows/ingest/redelivery.py; keep in step with app/models/redelivery.py)

Revision ID: 0008_redelivery
Revises: 0007_audit_caused_by
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_redelivery"
down_revision = "0007_audit_caused_by"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "redelivery_requests",
        sa.Column("guid", sa.String(64), nullable=False),
        sa.Column("hook", sa.String(220), nullable=False),
        sa.Column("github_delivery_id", sa.BigInteger, nullable=False),
        sa.Column("event", sa.String(64), nullable=False),
        sa.Column("action", sa.String(64)),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("failure", sa.Text),
        sa.Column("error", sa.Text),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("guid", name=op.f("pk_redelivery_requests")),
    )
    op.create_table(
        "redelivery_scans",
        sa.Column("hook", sa.String(220), nullable=False),
        sa.Column("watermark", sa.BigInteger),
        sa.Column("resume_cursor", sa.String(200)),
        sa.Column("pending_top", sa.BigInteger),
        sa.Column("scanned_at", sa.DateTime(timezone=True)),
        sa.PrimaryKeyConstraint("hook", name=op.f("pk_redelivery_scans")),
    )


def downgrade() -> None:
    op.drop_table("redelivery_scans")
    op.drop_table("redelivery_requests")
