"""eval_results: accuracy scores per point (owned by the results capability; see app/models/results.py)

Revision ID: 0009_evals
Revises: 0008_redelivery
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_evals"
down_revision = "0008_redelivery"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "eval_results",
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
        sa.Column("task", sa.String(200), nullable=False),
        sa.Column("metric", sa.String(100), nullable=False),
        sa.Column("filter", sa.String(100), nullable=False),
        sa.Column("score", sa.Float, nullable=False),
        sa.Column("stderr", sa.Float),
        sa.Column("n", sa.Integer),
        sa.Column("n_original", sa.Integer),
        sa.Column("limit", sa.Float),
        sa.Column("num_fewshot", sa.Integer),
        sa.Column("lm_eval_version", sa.String(64)),
        sa.Column("meta_model", sa.String(200)),
        sa.Column("meta_framework", sa.String(64)),
        sa.Column("job_id", sa.Integer),
        sa.Column("sweep_id", sa.Integer),
        sa.Column("repo", sa.String(200)),
        sa.Column("run_id", sa.BigInteger),
        sa.Column("run_url", sa.String(500)),
        sa.Column("artifact_id", sa.BigInteger),
        sa.Column("artifact_name", sa.String(400)),
        sa.Column("file_name", sa.String(400)),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_eval_results")),
    )
    op.create_index(op.f("ix_eval_results_result_name"), "eval_results", ["result_name"])
    op.create_index(op.f("ix_eval_results_config_key"), "eval_results", ["config_key"])
    op.create_index(op.f("ix_eval_results_job_id"), "eval_results", ["job_id"])
    op.create_index(op.f("ix_eval_results_sweep_id"), "eval_results", ["sweep_id"])
    op.create_index("ix_eval_results_reuse", "eval_results", ["image", "fingerprint", "result_name"])


def downgrade() -> None:
    op.drop_table("eval_results")
