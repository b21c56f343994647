"""Sweeps tables: a sweep (one PR + config key + image) owns one job per benchmark point.

Keep in step with migrations/versions/0003_sweeps.py (a test compares them).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    func,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base


class SweepState:
    AWAITING_APPROVAL = "awaiting_approval"  # fork PR: nothing runs before a maintainer approves
    ACTIVE = "active"
    DONE = "done"
    CANCELLED = "cancelled"
    SUPERSEDED = "superseded"

    OPEN = (AWAITING_APPROVAL, ACTIVE)
    FINAL = (DONE, CANCELLED, SUPERSEDED)


class JobState:
    QUEUED = "queued"
    DISPATCHED = "dispatched"  # claimed and sent (or being sent) to workflow_dispatch
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    REUSED = "reused"

    IN_FLIGHT = (DISPATCHED, RUNNING)
    FINAL = (SUCCEEDED, FAILED, CANCELLED, REUSED)


PRIORITIES = {"high": 0, "normal": 1, "low": 2}
# Nightly canaries (app.flows.nightly.watch): below every class a user can ask for, released only onto
# idle runners (app.core.release_policy). Not in PRIORITIES, so no command or API can request it.
CANARY_PRIORITY = 9
CANARY_REASON = "canary"


class Sweep(Base):
    __tablename__ = "sweeps"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    repo: Mapped[str] = mapped_column(String(200))
    pr_number: Mapped[int] = mapped_column(Integer)
    head_sha: Mapped[str] = mapped_column(String(40))
    head_ref: Mapped[str] = mapped_column(String(255))
    base_ref: Mapped[str] = mapped_column(String(255))  # fork sweeps dispatch from the base repo's branch
    head_repo: Mapped[str | None] = mapped_column(String(200))
    is_fork: Mapped[bool] = mapped_column(Boolean, default=False)
    config_key: Mapped[str] = mapped_column(String(200))
    config_path: Mapped[str | None] = mapped_column(String(400))
    image: Mapped[str] = mapped_column(String(400))
    fingerprint: Mapped[str] = mapped_column(String(128))
    points_digest: Mapped[str] = mapped_column(String(64))  # sha256 of the sorted result names
    filters: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # the dispatch workflow's matrix jobs GitHub never expands, read from the file at the dispatched
    # ref when the sweep was planned (app.flows.repo.bench_repo.workflow_prediction_at); None: not read
    unexpanded: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # the repo's utils/evals/thresholds.yaml at the ref the sweep runs (app.core.thresholds
    # Thresholds.as_json, or {"missing": path} / {"error": why}); None: not read
    eval_thresholds: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    requested_by: Mapped[str] = mapped_column(String(200))
    reason: Mapped[str] = mapped_column(String(16))  # command | bump | api | canary
    priority: Mapped[int] = mapped_column(Integer, default=PRIORITIES["normal"])
    state: Mapped[str] = mapped_column(String(20), default=SweepState.ACTIVE)
    state_reason: Mapped[str | None] = mapped_column(Text)
    superseded_by: Mapped[int | None] = mapped_column(ForeignKey("sweeps.id", ondelete="SET NULL"))
    approved_by: Mapped[str | None] = mapped_column(String(200))
    approved_sha: Mapped[str | None] = mapped_column(String(40))
    approved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Round-robin position: the label's release counter when this sweep last got a job released.
    last_release: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        Index("ix_sweeps_repo_pr_key", "repo", "pr_number", "config_key"),
        Index("ix_sweeps_state", "state"),
        # the tick reads active sweeps a page at a time in serving order (sweeps_in_serving_order)
        Index("ix_sweeps_serving", "state", "priority", "last_release", "id"),
    )


class SweepJob(Base):
    __tablename__ = "sweep_jobs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)  # the sweep's point order
    point: Mapped[dict[str, Any]] = mapped_column(JSON)
    result_name: Mapped[str] = mapped_column(String(400))
    runner_label: Mapped[str] = mapped_column(String(100))
    seq: Mapped[str] = mapped_column(String(32))
    conc: Mapped[int] = mapped_column(Integer)
    tp: Mapped[int] = mapped_column(Integer)
    # Jobs a single dispatch covers share a group key; ``slots`` is how many runners that dispatch
    # occupies (the workflow may expand more points than this sweep asked for).
    group_key: Mapped[str] = mapped_column(String(200))
    slots: Mapped[int] = mapped_column(Integer, default=1)
    # This point's job is the ``matrix_rank``-th of the ``matrix_twins`` jobs of its name in its
    # dispatch's run (matrix order; app.core.dispatchjobs): the run also holds points the sweep
    # filtered out, under the same names. None for jobs stored before migration 0014.
    matrix_rank: Mapped[int | None] = mapped_column(Integer)
    matrix_twins: Mapped[int | None] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16), default=JobState.QUEUED)
    reason: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=0)  # dispatches made so far
    claim: Mapped[str | None] = mapped_column(String(64))  # token of the tick that claimed it
    run_name: Mapped[str | None] = mapped_column(String(100))
    run_id: Mapped[int | None] = mapped_column(BigInteger)
    run_url: Mapped[str | None] = mapped_column(String(500))
    run_conclusion: Mapped[str | None] = mapped_column(String(32))
    # GitHub refused to cancel this job's run (a 4xx, e.g. 403 "Must have admin rights to
    # Repository."): what it said. Asking again is refused again, so the run is not asked again.
    run_cancel_refused: Mapped[str | None] = mapped_column(String(300))
    result_url: Mapped[str | None] = mapped_column(String(500))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    dispatched_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        Index("ix_sweep_jobs_sweep_position", "sweep_id", "position"),
        # by slots too: the narrowest job queued on a label is its first row (store.jobs.narrowest_queued)
        Index("ix_sweep_jobs_label_state_slots", "runner_label", "state", "slots"),
        Index("ix_sweep_jobs_run_id", "run_id"),
        Index("ix_sweep_jobs_run_name", "run_name"),
    )


class RunnerLabel(Base):
    """One row per runner label: pause switch, cached capacity, and the row ticks lock on."""

    __tablename__ = "runner_labels"

    label: Mapped[str] = mapped_column(String(100), primary_key=True)
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    paused_by: Mapped[str | None] = mapped_column(String(200))
    paused_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    capacity: Mapped[int | None] = mapped_column(Integer)  # last capacity used, for display
    capacity_source: Mapped[str | None] = mapped_column(String(200))
    release_seq: Mapped[int] = mapped_column(Integer, default=0)  # bumped under the lock
    updated_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
