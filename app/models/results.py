"""Results tables: one normalized result per benchmark point, and the state of each sticky report.

``job_id``/``sweep_id`` are plain indexed integers rather than foreign keys: results outlive the
sweeps that produced them (reuse across sweeps) and may be imported offline without a job.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Float,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base


class Result(Base):
    __tablename__ = "results"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())

    # Identity of the point (the benchmark repo's result name plus its parts).
    result_name: Mapped[str] = mapped_column(String(400), index=True)
    config_key: Mapped[str] = mapped_column(String(200), index=True)
    image: Mapped[str] = mapped_column(String(400))
    fingerprint: Mapped[str] = mapped_column(String(128))
    model: Mapped[str | None] = mapped_column(String(200))
    framework: Mapped[str | None] = mapped_column(String(64))
    precision: Mapped[str | None] = mapped_column(String(32))
    runner: Mapped[str | None] = mapped_column(String(64))
    isl: Mapped[int | None] = mapped_column(Integer)
    osl: Mapped[int | None] = mapped_column(Integer)
    conc: Mapped[int] = mapped_column(Integer)
    tp: Mapped[int] = mapped_column(Integer)
    pp: Mapped[int] = mapped_column(Integer)
    ep: Mapped[int] = mapped_column(Integer)

    # Metrics: latencies in milliseconds, throughputs in tokens per second.
    mean_tpot_ms: Mapped[float | None] = mapped_column(Float)
    median_tpot_ms: Mapped[float | None] = mapped_column(Float)
    p99_tpot_ms: Mapped[float | None] = mapped_column(Float)
    std_tpot_ms: Mapped[float | None] = mapped_column(Float)
    mean_ttft_ms: Mapped[float | None] = mapped_column(Float)
    median_ttft_ms: Mapped[float | None] = mapped_column(Float)
    p99_ttft_ms: Mapped[float | None] = mapped_column(Float)
    mean_itl_ms: Mapped[float | None] = mapped_column(Float)
    median_itl_ms: Mapped[float | None] = mapped_column(Float)
    p99_itl_ms: Mapped[float | None] = mapped_column(Float)
    mean_e2el_ms: Mapped[float | None] = mapped_column(Float)
    median_e2el_ms: Mapped[float | None] = mapped_column(Float)
    p99_e2el_ms: Mapped[float | None] = mapped_column(Float)
    output_tput: Mapped[float | None] = mapped_column(Float)
    total_tput: Mapped[float | None] = mapped_column(Float)
    tput_per_gpu: Mapped[float | None] = mapped_column(Float)
    interactivity: Mapped[float | None] = mapped_column(Float)  # tok/s/user = 1000 / mean TPOT (ms)
    completed: Mapped[int | None] = mapped_column(Integer)
    duration_s: Mapped[float | None] = mapped_column(Float)
    schema: Mapped[str] = mapped_column(String(32))  # "raw" (benchmark_serving *_ms) or "aggregated"

    # Provenance.
    job_id: Mapped[int | None] = mapped_column(Integer, index=True)
    sweep_id: Mapped[int | None] = mapped_column(Integer, index=True)
    repo: Mapped[str | None] = mapped_column(String(200))
    run_id: Mapped[int | None] = mapped_column(BigInteger)
    run_url: Mapped[str | None] = mapped_column(String(500))
    artifact_id: Mapped[int | None] = mapped_column(BigInteger)
    artifact_name: Mapped[str | None] = mapped_column(String(400))
    file_name: Mapped[str | None] = mapped_column(String(400))

    __table_args__ = (Index("ix_results_reuse", "image", "fingerprint", "result_name"),)


class ReportState(Base):
    """One sticky report comment per PR and config key; ``version`` > ``flushed_version`` = dirty."""

    __tablename__ = "report_states"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    repo: Mapped[str] = mapped_column(String(200))
    pr_number: Mapped[int] = mapped_column(Integer)
    config_key: Mapped[str] = mapped_column(String(200))
    sweep_id: Mapped[int] = mapped_column(Integer, index=True)  # the newest sweep: the one shown
    version: Mapped[int] = mapped_column(Integer, default=0)
    flushed_version: Mapped[int] = mapped_column(Integer, default=0)
    marked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    flushed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    comment_id: Mapped[int | None] = mapped_column(BigInteger)
    # sha256 of the body the comment was last given: a flush that renders the same text does not
    # edit it (a job change the report does not show still marks it dirty)
    body_digest: Mapped[str | None] = mapped_column(String(64))
    last_error: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (UniqueConstraint("repo", "pr_number", "config_key", name="uq_report_states_key"),)


class EvalResult(Base):
    """One accuracy score of a point: a task and filter of an lm-eval result file, with provenance.

    Rows of one eval artifact are written together or not at all (the collector parses the whole
    artifact first). ``sweep_id``/``job_id`` are plain integers for the reason given above.
    """

    __tablename__ = "eval_results"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())

    # Identity of the point (as for results) ...
    result_name: Mapped[str] = mapped_column(String(400), index=True)
    config_key: Mapped[str] = mapped_column(String(200), index=True)
    image: Mapped[str] = mapped_column(String(400))
    fingerprint: Mapped[str] = mapped_column(String(128))
    model: Mapped[str | None] = mapped_column(String(200))
    framework: Mapped[str | None] = mapped_column(String(64))
    precision: Mapped[str | None] = mapped_column(String(32))
    runner: Mapped[str | None] = mapped_column(String(64))
    isl: Mapped[int | None] = mapped_column(Integer)
    osl: Mapped[int | None] = mapped_column(Integer)
    conc: Mapped[int] = mapped_column(Integer)
    tp: Mapped[int] = mapped_column(Integer)

    # ... and the score.
    task: Mapped[str] = mapped_column(String(200))
    metric: Mapped[str] = mapped_column(String(100))
    filter: Mapped[str] = mapped_column(String(100))
    score: Mapped[float] = mapped_column(Float)
    stderr: Mapped[float | None] = mapped_column(Float)
    n: Mapped[int | None] = mapped_column(Integer)  # effective samples scored
    n_original: Mapped[int | None] = mapped_column(Integer)
    limit: Mapped[float | None] = mapped_column(Float)  # --limit (None: the whole split)
    num_fewshot: Mapped[int | None] = mapped_column(Integer)
    # validate_scores.py gates this score (a declared metric of the task, or exact_match); None: stored
    # before this was recorded (then exact_match is assumed, the script's default)
    gated: Mapped[bool | None] = mapped_column(Boolean)
    lm_eval_version: Mapped[str | None] = mapped_column(String(64))
    meta_model: Mapped[str | None] = mapped_column(String(200))  # meta_env.json `model`
    meta_framework: Mapped[str | None] = mapped_column(String(64))  # meta_env.json `framework`

    # Provenance.
    job_id: Mapped[int | None] = mapped_column(Integer, index=True)
    sweep_id: Mapped[int | None] = mapped_column(Integer, index=True)
    repo: Mapped[str | None] = mapped_column(String(200))
    run_id: Mapped[int | None] = mapped_column(BigInteger)
    run_url: Mapped[str | None] = mapped_column(String(500))
    artifact_id: Mapped[int | None] = mapped_column(BigInteger)
    artifact_name: Mapped[str | None] = mapped_column(String(400))
    file_name: Mapped[str | None] = mapped_column(String(400))

    __table_args__ = (Index("ix_eval_results_reuse", "image", "fingerprint", "result_name"),)


# ``result_points.isl``/``osl`` of a result with no sequence lengths (agentic coding): a unique key
# needs a value (NULLs never conflict), so none is stored as this.
NO_SHAPE = -1


class ResultPoint(Base):
    """The index of the results pages: one row per config key, image, shape, tp and conc, kept
    current as results are stored (``app.store.resultpoints``). The pages read this, not every
    stored result, so their cost grows with the points a key has, not with its history."""

    __tablename__ = "result_points"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    config_key: Mapped[str] = mapped_column(String(200))
    image: Mapped[str] = mapped_column(String(400))
    isl: Mapped[int] = mapped_column(Integer)  # NO_SHAPE: none
    osl: Mapped[int] = mapped_column(Integer)
    tp: Mapped[int] = mapped_column(Integer)
    conc: Mapped[int] = mapped_column(Integer)
    latest_id: Mapped[int] = mapped_column(Integer)  # the newest result of the point
    first_id: Mapped[int] = mapped_column(Integer)
    runs: Mapped[int] = mapped_column(Integer)
    tpot_sum: Mapped[float] = mapped_column(Float)  # of the runs' mean TPOT, for the per-image mean
    tpot_n: Mapped[int] = mapped_column(Integer)
    first_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        UniqueConstraint("config_key", "image", "isl", "osl", "tp", "conc", name="uq_result_points_point"),
        Index("ix_result_points_key_latest", "config_key", "latest_id"),
    )
