"""The repair poll: the fallback for missed deliveries (adopt runs by name, apply run states, time out)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.core.clock import aware, utcnow
from app.core.routing import TransientError
from app.flows.dispatch import find_job_run
from app.flows.jobfinish import finish_job
from app.flows.labelruns import adopt_label_run, find_label_run
from app.flows.ring import collect_later, tick_later
from app.flows.runtracking import apply_workflow_run
from app.flows.sweepcancel import cancel_runs
from app.models.sweeps import JobState, Sweep, SweepJob
from app.settings import get_settings
from app.store.audit import record
from app.store.jobs import requeue
from app.store.sweeps import sweep_mode

log = structlog.get_logger(__name__)

BOT = "sweepbot"
GatewayFactory = Callable[[Session], Any]


@dataclass
class RepairResult:
    checked: int = 0
    updated: int = 0
    timed_out: int = 0
    requeued: int = 0
    collect_enqueued: int = 0


def repair_jobs(session_factory: sessionmaker[Session], gw_factory: GatewayFactory) -> RepairResult:
    """Poll fallback for missed deliveries: adopt runs by name, apply run states, fail timeouts."""
    settings = get_settings()
    result = RepairResult()
    with session_factory() as session:
        ids = list(
            session.scalars(
                select(SweepJob.id).where(SweepJob.state.in_(JobState.IN_FLIGHT)).order_by(SweepJob.id)
            ).all()
        )
    done_runs: set[int] = set()
    for job_id in ids:
        after: list[Callable[[], None]] = []
        with session_factory() as session:
            job = session.get(SweepJob, job_id)
            if job is None or job.state not in JobState.IN_FLIGHT:
                continue
            if job.run_id is not None and job.run_id in done_runs:
                continue
            sweep = session.get(Sweep, job.sweep_id)
            if sweep is None:
                continue
            gw = gw_factory(session)
            result.checked += 1
            now = utcnow()
            age = (now - (aware(job.dispatched_at) or now)).total_seconds()
            try:
                if age > settings.job_timeout_seconds:
                    if job.run_id is not None:
                        cancel_runs(gw, sweep.repo, [job.run_id])
                    finish_job(
                        session,
                        job.id,
                        JobState.FAILED,
                        reason=f"timed out: no result {age:.0f} s after dispatch "
                        f"(limit job_timeout_seconds={settings.job_timeout_seconds:.0f})",
                    )
                    record(
                        session,
                        actor=BOT,
                        action="sweep.timeout",
                        target=job.run_name,
                        detail={"job": job.id, "run_id": job.run_id},
                    )
                    result.timed_out += 1
                    after.append(tick_later)
                elif job.run_id is None and sweep_mode(sweep) == "label":
                    # The repo starts this run itself (label + changelog change): find it, never
                    # re-queue (that would dispatch the same sweep a second way).
                    found = find_label_run(session, gw, sweep)
                    if found is not None and adopt_label_run(session, sweep, found):
                        apply_workflow_run(session, gw, found, after_commit=after, settings=settings)
                        result.updated += 1
                elif job.run_id is None:
                    found = find_job_run(gw, sweep, job, settings, session)
                    if found is not None:
                        if apply_workflow_run(session, gw, found, after_commit=after, settings=settings):
                            result.updated += 1
                    elif age > settings.dispatch_lost_grace_seconds:
                        requeue(job, "dispatch left no run; re-queued")
                        job.attempts = max(0, job.attempts - 1)
                        result.requeued += 1
                elif job.run_conclusion == "success":
                    # Collected results finish the job; re-ring in case the collect task was lost.
                    after.append(collect_later(job.id))
                    result.collect_enqueued += 1
                else:
                    run = gw.get_run(sweep.repo, job.run_id)
                    if apply_workflow_run(session, gw, run, after_commit=after, settings=settings):
                        result.updated += 1
                    if run.get("status") == "completed":
                        done_runs.add(job.run_id)
                session.commit()
            except TransientError as exc:
                session.rollback()
                log.warning("repair_job_transient", job=job_id, error=str(exc))
                continue
        for callback in after:
            callback()
    return result
