"""Runs the bot dispatched, followed until GitHub says they completed (app/store/dispatchruns.py).

Keep in step with migrations/versions/0012_dispatch_runs.py (a test compares them).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, BigInteger, DateTime, Index, Integer, String, func
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base


class DispatchRun(Base):
    """One run we dispatched: its jobs hold runners until the run completes, whether or not we still
    need their results (a retry's run re-runs the whole conc group). ``app.core.release_plan.RunSlots``."""

    __tablename__ = "dispatch_runs"

    run_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    repo: Mapped[str] = mapped_column(String(200))
    runner_label: Mapped[str] = mapped_column(String(100))
    run_name: Mapped[str] = mapped_column(String(100))
    slots: Mapped[int] = mapped_column(Integer)  # jobs on the label its command was planned to expand to
    jobs_seen: Mapped[list[int]] = mapped_column(JSON, default=list)  # GitHub job ids on the label
    jobs_done: Mapped[list[int]] = mapped_column(JSON, default=list)  # of them, completed
    # the callers (``eval /``) whose benchmark jobs were seen in the run; None: a run followed before
    # they were noted (app.flows.scheduler.unexpanded does not conclude from a prediction then)
    callers_seen: Mapped[list[str] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    completed_why: Mapped[str | None] = mapped_column(String(200))

    __table_args__ = (Index("ix_dispatch_runs_label_completed", "runner_label", "completed_at"),)
