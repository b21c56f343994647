"""dashboard_sessions: the dashboard's sign-ins known to the server (issue 25).

The session cookie was only signed, so a saved copy kept authenticating after sign-out until it
expired. A cookie now names a row of this table; sign-out deletes the row, and a cookie without
one authenticates nothing (cookies issued before this migration included: sign in again).

Revision ID: 0018_session_revocation
Revises: 0017_watch_approval
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018_session_revocation"
down_revision = "0017_watch_approval"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dashboard_sessions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("user", sa.String(200), nullable=False),
        sa.Column("via", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_dashboard_sessions_expires_at", "dashboard_sessions", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_dashboard_sessions_expires_at", table_name="dashboard_sessions")
    op.drop_table("dashboard_sessions")
