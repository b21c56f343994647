"""What an operator does from the dashboard: cancel, retry and pause, and the GitHub work a cancel
leaves to a worker.

Each action changes the database only and says what is left to do on GitHub (``RunStop``): the
runs of cancelled jobs that are still going. The dashboard queues ``sweepbot.cancel_runs`` for
them once its transaction committed, so no request waits on GitHub. A missing object raises
``LookupError``; the domain refusing (already finished, superseded) raises ``ValueError``.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.sweepspec import SweepError
from app.flows.sweeps import cancel as sweepcancel
from app.flows.sweeps.job_finish import finish_job
from app.models.sweeps import JobState, RunnerLabel, Sweep, SweepJob
from app.models.tracking import Watch

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class RunStop:
    """Runs on GitHub that belong to jobs just cancelled (empty when none was in flight)."""

    repo: str
    run_ids: tuple[int, ...] = ()


def _sweep(session: Session, sweep_id: int) -> Sweep:
    sweep = session.get(Sweep, sweep_id)
    if sweep is None:
        raise LookupError(f"no sweep {sweep_id}")
    return sweep


def job_sweep_id(session: Session, job_id: int) -> int:
    """The sweep a job belongs to (where the dashboard goes back to after acting on it)."""
    job = session.get(SweepJob, job_id)
    if job is None:
        raise LookupError(f"no job {job_id}")
    return job.sweep_id


def cancel_sweep(session: Session, sweep_id: int, *, actor: str) -> RunStop:
    """Cancel a sweep's open jobs; the runs they had going are returned for a worker to stop."""
    sweep = _sweep(session, sweep_id)
    in_flight = session.scalars(
        select(SweepJob.run_id).where(
            SweepJob.sweep_id == sweep_id,
            SweepJob.state.in_(JobState.IN_FLIGHT),
            SweepJob.run_id.is_not(None),
        )
    ).all()
    sweepcancel.cancel_sweep(
        session, None, sweep_id, actor=actor, reason=f"cancelled from the dashboard by {actor}"
    )
    stop = RunStop(sweep.repo, tuple(sorted({int(r) for r in in_flight if r is not None})))
    log.info("operator_cancel_sweep", sweep=sweep_id, actor=actor, runs_to_stop=list(stop.run_ids))
    return stop


def cancel_job(session: Session, job_id: int, *, actor: str) -> RunStop:
    """Cancel one queued or running job (its sweep closes when it was the last open job)."""
    job = session.get(SweepJob, job_id)
    if job is None:
        raise LookupError(f"no job {job_id}")
    if job.state in JobState.FINAL:
        raise ValueError(f"job {job_id} is already {job.state}")
    sweep = _sweep(session, job.sweep_id)
    run_id = job.run_id if job.state in JobState.IN_FLIGHT else None
    finish_job(session, job_id, JobState.CANCELLED, reason=f"cancelled from the dashboard by {actor}")
    stop = RunStop(sweep.repo, (int(run_id),) if run_id is not None else ())
    log.info("operator_cancel_job", job=job_id, actor=actor, runs_to_stop=list(stop.run_ids))
    return stop


def retry_sweep(session: Session, sweep_id: int, *, actor: str) -> None:
    """Queue a sweep's failed and cancelled jobs again."""
    _sweep(session, sweep_id)
    sweepcancel.retry_sweep(session, sweep_id, actor=actor)


def retry_job(session: Session, job_id: int, *, actor: str) -> None:
    """Queue one failed or cancelled job again."""
    job_sweep_id(session, job_id)
    sweepcancel.retry_job(session, job_id, actor=actor)


def set_label_paused(session: Session, label: str, paused: bool, *, actor: str) -> RunnerLabel:
    """Pause or resume dispatch to a runner label (a malformed label is refused)."""
    try:
        return sweepcancel.set_label_paused(session, label, paused, actor=actor)
    except SweepError as exc:
        raise ValueError(str(exc)) from exc


def watch_title(session: Session, watch_id: int) -> str:
    """``repo#pr key`` of a watch, for the message of a queued check."""
    watch = session.get(Watch, watch_id)
    if watch is None:
        raise LookupError(f"no watch {watch_id}")
    return f"{watch.repo}#{watch.pr_number} {watch.config_key}"


def stop_runs(
    gw: sweepcancel.CancelGateway, repo: str, run_ids: list[int], session: Session | None = None
) -> list[str]:
    """The worker's half of a cancel: ask GitHub to cancel each run (one failing does not stop the
    others); the errors, one per run that could not be cancelled. With ``session``, a run GitHub
    refused to cancel is not asked again (``sweepcancel.cancel_runs``)."""
    errors = sweepcancel.cancel_runs(gw, repo, run_ids, session)
    log.info("operator_runs_stopped", repo=repo, runs=run_ids, errors=len(errors))
    return errors
