"""Finishing a job: its final state, and its sweep's when it was the last open job."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.core.clock import utcnow
from app.core.sweepspec import SweepError
from app.models.sweeps import JobState, Sweep, SweepJob
from app.store.reports import mark_report_dirty
from app.store.sweeps import maybe_finish_sweep


def finish_job(
    session: Session, job_id: int, state: str, *, reason: str | None = None, result_url: str | None = None
) -> SweepJob:
    """Record a job's final state (idempotent: a job already final keeps its first outcome)."""
    if state not in JobState.FINAL:
        raise SweepError(f"finish_job state {state!r} must be one of {', '.join(JobState.FINAL)}")
    job = session.get(SweepJob, job_id)
    if job is None:
        raise SweepError(f"job {job_id} does not exist")
    if job.state in JobState.FINAL:
        return job
    now = utcnow()
    job.state, job.finished_at, job.updated_at = state, now, now
    if reason is not None:
        job.reason = reason
    if result_url is not None:
        job.result_url = result_url
    session.flush()
    sweep = session.get(Sweep, job.sweep_id)
    if sweep is not None:
        maybe_finish_sweep(session, sweep)
    mark_report_dirty(session, job.sweep_id)
    return job
