"""The weekly runner-hour budget of nightly canaries: what they used this ISO week, and the limit.

Read by the scheduler's release decision (``app.core.release_policy``) and shown on the dashboard.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.bot_config import NightlyWatch
from app.models.nightly import NightlyCanary
from app.models.sweeps import CANARY_REASON, Sweep, SweepJob
from app.store.bot_configs import stored_config

DEFAULT_JOB_HOURS = 0.5  # expected runner-hours of one canary job before any has finished


def _now() -> datetime:
    return datetime.now(UTC)


def _aware(value: datetime | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def week_start(now: datetime) -> datetime:
    """Monday 00:00 UTC of ``now``'s ISO week: the budget's period."""
    day = now.astimezone(UTC)
    return (day - timedelta(days=day.weekday())).replace(hour=0, minute=0, second=0, microsecond=0)


@dataclass(frozen=True)
class CanaryBudget:
    repo: str
    week_start: datetime
    used_hours: float
    budget_hours: float | None
    expected_job_hours: float
    jobs: int  # canary jobs dispatched this week

    def to_json(self) -> dict[str, Any]:
        return {
            "repo": self.repo,
            "week_start": self.week_start.isoformat(),
            "used_hours": round(self.used_hours, 3),
            "budget_hours": self.budget_hours,
            "expected_job_hours": round(self.expected_job_hours, 3),
            "jobs": self.jobs,
        }


def _watch_settings(session: Session, repo: str) -> NightlyWatch:
    cfg = stored_config(session, repo)
    return cfg.watch_nightlies if cfg is not None else NightlyWatch()


def canary_budget(session: Session, repo: str, *, now: datetime | None = None) -> CanaryBudget:
    """Runner-hours the repo's canaries used this ISO week (running ones up to now), and the budget.

    A job holds ``slots`` runners from its dispatch until its workflow job finished (or now);
    runner time lost to preemption (the run was cancelled) counts too.
    """
    moment = now or _now()
    start = week_start(moment)
    rows = session.execute(
        select(SweepJob.run_name, SweepJob.id, SweepJob.slots, SweepJob.dispatched_at, SweepJob.finished_at)
        .join(Sweep, Sweep.id == SweepJob.sweep_id)
        .where(Sweep.repo == repo, Sweep.reason == CANARY_REASON, SweepJob.dispatched_at.is_not(None))
        .order_by(SweepJob.id.desc())
        .limit(5000)
    ).all()
    per_run: dict[str, float] = {}
    durations: list[float] = []
    for run_name, job_id, slots, dispatched, finished in rows:
        began = _aware(dispatched)
        if began is None or began < start:
            continue
        ended = _aware(finished) or moment
        hours = max(0.0, (ended - began).total_seconds() / 3600.0)
        key = run_name or f"job-{job_id}"
        per_run[key] = max(per_run.get(key, 0.0), hours * max(1, int(slots or 1)))
        if finished is not None and len(durations) < 20:
            durations.append(hours)
    preempted = sum(
        float(h or 0.0)
        for h, updated in session.execute(
            select(NightlyCanary.preempted_hours, NightlyCanary.updated_at).where(
                NightlyCanary.repo == repo, NightlyCanary.preempted_hours > 0
            )
        ).all()
        if (_aware(updated) or moment) >= start
    )
    expected = sum(durations) / len(durations) if durations else DEFAULT_JOB_HOURS
    return CanaryBudget(
        repo=repo,
        week_start=start,
        used_hours=sum(per_run.values()) + preempted,
        budget_hours=_watch_settings(session, repo).budget_hours,
        expected_job_hours=expected,
        jobs=len(per_run),
    )


def note_preempted_hours(session: Session, sweep_id: int, hours: float) -> None:
    """The scheduler cancelled a canary run: count the runner time it had used against the budget."""
    row = session.scalars(select(NightlyCanary).where(NightlyCanary.sweep_id == sweep_id)).first()
    if row is None:
        return
    row.preempted_hours = float(row.preempted_hours or 0.0) + max(0.0, hours)
    row.updated_at = _now()
