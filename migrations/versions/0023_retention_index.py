"""result_points: the index of the results pages, one row per config key, image, shape, tp and
conc (issue 29: the pages grouped every stored result, p95 95 -> 186 ms at 3x history). Backfilled
from the results stored so far; kept current by app/store/resultpoints.py as results are stored.

Revision ID: 0023_retention_index
Revises: 0022_runner_controller
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023_retention_index"
down_revision = "0022_runner_controller"
branch_labels = None
depends_on = None

NO_SHAPE = -1  # app.models.results.NO_SHAPE (a migration never imports the app's models)


def upgrade() -> None:
    op.create_table(
        "result_points",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("config_key", sa.String(200), nullable=False),
        sa.Column("image", sa.String(400), nullable=False),
        sa.Column("isl", sa.Integer(), nullable=False),
        sa.Column("osl", sa.Integer(), nullable=False),
        sa.Column("tp", sa.Integer(), nullable=False),
        sa.Column("conc", sa.Integer(), nullable=False),
        sa.Column("latest_id", sa.Integer(), nullable=False),
        sa.Column("first_id", sa.Integer(), nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("tpot_sum", sa.Float(), nullable=False),
        sa.Column("tpot_n", sa.Integer(), nullable=False),
        sa.Column("first_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_result_points"),
        sa.UniqueConstraint("config_key", "image", "isl", "osl", "tp", "conc", name="uq_result_points_point"),
    )
    op.create_index("ix_result_points_key_latest", "result_points", ["config_key", "latest_id"])
    op.execute(
        sa.text(
            "INSERT INTO result_points (config_key, image, isl, osl, tp, conc, latest_id, first_id, runs,"
            " tpot_sum, tpot_n, first_at, last_at)"
            f" SELECT config_key, image, COALESCE(isl, {NO_SHAPE}), COALESCE(osl, {NO_SHAPE}), tp, conc,"
            " MAX(id), MIN(id), COUNT(*), COALESCE(SUM(mean_tpot_ms), 0), COUNT(mean_tpot_ms),"
            " MIN(created_at), MAX(created_at)"
            f" FROM results GROUP BY config_key, image, COALESCE(isl, {NO_SHAPE}), COALESCE(osl, {NO_SHAPE}),"
            " tp, conc"
        )
    )


def downgrade() -> None:
    op.drop_index("ix_result_points_key_latest", table_name="result_points")
    op.drop_table("result_points")
