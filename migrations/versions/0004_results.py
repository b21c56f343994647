"""results tables (owned by the results capability; keep in step with app/models/results.py)

Revision ID: 0004_results
Revises: 0003_sweeps
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_results"
down_revision = "0003_sweeps"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "results",
        sa.Column("id", sa.Integer, autoincrement=True, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("result_name", sa.String(400), nullable=False),
        sa.Column("config_key", sa.String(200), nullable=False),
        sa.Column("image", sa.String(400), nullable=False),
        sa.Column("fingerprint", sa.String(128), nullable=False),
        sa.Column("model", sa.String(200)),
        sa.Column("framework", sa.String(64)),
        sa.Column("precision", sa.String(32)),
        sa.Column("runner", sa.String(64)),
        sa.Column("isl", sa.Integer),
        sa.Column("osl", sa.Integer),
        sa.Column("conc", sa.Integer, nullable=False),
        sa.Column("tp", sa.Integer, nullable=False),
        sa.Column("pp", sa.Integer, nullable=False),
        sa.Column("ep", sa.Integer, nullable=False),
        sa.Column("mean_tpot_ms", sa.Float),
        sa.Column("median_tpot_ms", sa.Float),
        sa.Column("p99_tpot_ms", sa.Float),
        sa.Column("std_tpot_ms", sa.Float),
        sa.Column("mean_ttft_ms", sa.Float),
        sa.Column("median_ttft_ms", sa.Float),
        sa.Column("p99_ttft_ms", sa.Float),
        sa.Column("mean_itl_ms", sa.Float),
        sa.Column("median_itl_ms", sa.Float),
        sa.Column("p99_itl_ms", sa.Float),
        sa.Column("mean_e2el_ms", sa.Float),
        sa.Column("median_e2el_ms", sa.Float),
        sa.Column("p99_e2el_ms", sa.Float),
        sa.Column("output_tput", sa.Float),
        sa.Column("total_tput", sa.Float),
        sa.Column("tput_per_gpu", sa.Float),
        sa.Column("interactivity", sa.Float),
        sa.Column("completed", sa.Integer),
        sa.Column("duration_s", sa.Float),
        sa.Column("schema", sa.String(32), nullable=False),
        sa.Column("job_id", sa.Integer),
        sa.Column("sweep_id", sa.Integer),
        sa.Column("repo", sa.String(200)),
        sa.Column("run_id", sa.BigInteger),
        sa.Column("run_url", sa.String(500)),
        sa.Column("artifact_id", sa.BigInteger),
        sa.Column("artifact_name", sa.String(400)),
        sa.Column("file_name", sa.String(400)),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_results")),
    )
    op.create_index(op.f("ix_results_result_name"), "results", ["result_name"])
    op.create_index(op.f("ix_results_config_key"), "results", ["config_key"])
    op.create_index(op.f("ix_results_job_id"), "results", ["job_id"])
    op.create_index(op.f("ix_results_sweep_id"), "results", ["sweep_id"])
    op.create_index("ix_results_reuse", "results", ["image", "fingerprint", "result_name"])

    op.create_table(
        "report_states",
        sa.Column("id", sa.Integer, autoincrement=True, nullable=False),
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("pr_number", sa.Integer, nullable=False),
        sa.Column("config_key", sa.String(200), nullable=False),
        sa.Column("sweep_id", sa.Integer, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("flushed_version", sa.Integer, nullable=False),
        sa.Column("marked_at", sa.DateTime(timezone=True)),
        sa.Column("flushed_at", sa.DateTime(timezone=True)),
        sa.Column("comment_id", sa.BigInteger),
        sa.Column("last_error", sa.Text),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_report_states")),
        sa.UniqueConstraint("repo", "pr_number", "config_key", name="uq_report_states_key"),
    )
    op.create_index(op.f("ix_report_states_sweep_id"), "report_states", ["sweep_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_report_states_sweep_id"), table_name="report_states")
    op.drop_table("report_states")
    op.drop_index("ix_results_reuse", table_name="results")
    op.drop_index(op.f("ix_results_sweep_id"), table_name="results")
    op.drop_index(op.f("ix_results_job_id"), table_name="results")
    op.drop_index(op.f("ix_results_config_key"), table_name="results")
    op.drop_index(op.f("ix_results_result_name"), table_name="results")
    op.drop_table("results")
