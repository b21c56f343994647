"""The repair poll: the fallback for missed deliveries (apply run states, adopt runs by name, time out)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Protocol

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.core.clock import aware, utcnow
from app.core.routing import TransientError
from app.flows.scheduler import run_poll as runpoll
from app.flows.scheduler.dispatch import workflow_name
from app.flows.scheduler.run_tracking import apply_workflow_run, waits_for_run
from app.flows.sweeps.cancel import CancelGateway, cancel_runs
from app.flows.sweeps.job_finish import finish_job
from app.flows.sweeps.label_runs import LabelGateway, adopt_label_run, find_label_run
from app.flows.sweeps.ring import collect_later, tick_later
from app.models.sweeps import JobState, Sweep, SweepJob
from app.settings import Settings, get_settings
from app.store.audit import record
from app.store.dispatchruns import close_stale, open_runs, prune_completed
from app.store.jobs import requeue
from app.store.sweeps import sweep_mode

log = structlog.get_logger(__name__)

BOT = "sweepbot"


class RepairGateway(runpoll.PollGateway, LabelGateway, Protocol):
    """The poll's, and finding a label-mode sweep's run (the repo's runs listing)."""


GatewayFactory = Callable[[Session], RepairGateway]


@dataclass
class RepairResult:
    checked: int = 0
    updated: int = 0
    timed_out: int = 0
    requeued: int = 0
    collect_enqueued: int = 0
    pruned: int = 0  # rows of runs completed longer ago than the retention, deleted


@dataclass
class _Asked:
    """What this poll asked GitHub already, per run: the label-mode runs it read, and the timeout
    cancels it sent (True: that one failed transiently)."""

    label_runs: set[int] = field(default_factory=set)
    cancels: dict[int, bool] = field(default_factory=dict)


def _poll_targets(session_factory: sessionmaker[Session]) -> list[runpoll.Target]:
    """In-flight jobs of dispatched (not label-mode) sweeps whose run may still say something new."""
    with session_factory() as session:
        rows = session.execute(
            select(SweepJob, Sweep)
            .join(Sweep, Sweep.id == SweepJob.sweep_id)
            .where(SweepJob.state.in_(JobState.IN_FLIGHT))
            .order_by(SweepJob.id)
        ).all()
        targets = [
            runpoll.Target(
                job.id,
                sweep.repo,
                job.run_id,
                job.run_name,
                job.state,
                # a point with an eval waits for its run's completion (``waits_for_run``): until
                # then the run may still say something new to it
                None if waits_for_run(job) else job.run_conclusion,
                aware(job.dispatched_at),
            )
            for job, sweep in rows
            if sweep_mode(sweep) != "label" and (job.run_conclusion != "success" or waits_for_run(job))
        ]
        # Runs we follow that no job of ours waits on any more (a retry's siblings still run):
        # their completion frees runners, so the poll reads them too when the webhook was lost.
        covered = {t.run_id for t in targets}
        targets += [
            runpoll.Target(
                0, run.repo, run.run_id, run.run_name, JobState.RUNNING, None, aware(run.created_at)
            )
            for run in open_runs(session)
            if run.run_id not in covered
        ]
        return targets


def repair_jobs(session_factory: sessionmaker[Session], gw_factory: GatewayFactory) -> RepairResult:
    """Poll fallback for missed deliveries: apply run states, adopt runs by name, fail timeouts.

    Run states come from ``runpoll.poll_runs``: one conditional listing per repository (free when
    nothing changed), not one read per job; the budget may hold it back (webhooks only then).
    What is left per job costs no call: timeouts, lost dispatches, collections to ring again, and
    label-mode runs (the repo's own, not in the dispatch listing: read once per run).
    """
    settings = get_settings()
    result = RepairResult()
    with session_factory() as session:
        now = utcnow()
        if close_stale(session, now - timedelta(seconds=settings.job_timeout_seconds)):
            after_stale: list[Callable[[], None]] = [tick_later]
        else:
            after_stale = []
        result.pruned = prune_completed(
            session, now - timedelta(seconds=settings.dispatch_run_retention_seconds)
        )
        session.commit()
    for callback in after_stale:
        callback()
    polled = runpoll.poll_runs(
        session_factory,
        gw_factory,
        _poll_targets(session_factory),
        workflow=workflow_name(settings),
        settings=settings,
    )
    result.updated += polled.applied
    with session_factory() as session:
        ids = list(
            session.scalars(
                select(SweepJob.id).where(SweepJob.state.in_(JobState.IN_FLIGHT)).order_by(SweepJob.id)
            ).all()
        )
    asked = _Asked()
    for job_id in ids:
        after: list[Callable[[], None]] = []
        with session_factory() as session:
            job = session.get(SweepJob, job_id)
            sweep = session.get(Sweep, job.sweep_id) if job is not None else None
            if job is None or sweep is None or job.state not in JobState.IN_FLIGHT:
                continue
            result.checked += 1
            try:
                _repair_one(session, gw_factory, job, sweep, settings, polled, asked, after, result)
                session.commit()
            except TransientError as exc:
                session.rollback()
                log.warning("repair_job_transient", job=job_id, error=str(exc))
                continue
        for callback in after:
            callback()
    return result


def _repair_one(
    session: Session,
    gw_factory: GatewayFactory,
    job: SweepJob,
    sweep: Sweep,
    settings: Settings,
    polled: runpoll.RunPollResult,
    asked: _Asked,
    after: list[Callable[[], None]],
    result: RepairResult,
) -> None:
    now = utcnow()
    age = (now - (aware(job.dispatched_at) or now)).total_seconds()
    if age > settings.job_timeout_seconds:
        if _time_out(session, gw_factory(session), job, sweep, age, settings, asked.cancels):
            result.timed_out += 1
            after.append(tick_later)
    elif job.run_id is None and sweep_mode(sweep) == "label":
        # The repo starts this run itself (label + changelog change): find it, never
        # re-queue (that would dispatch the same sweep a second way).
        gw = gw_factory(session)
        found = find_label_run(session, gw, sweep)
        if found is not None and adopt_label_run(session, sweep, found):
            apply_workflow_run(session, gw, found, after_commit=after, settings=settings)
            result.updated += 1
    elif job.run_id is None:
        # The poll's listing adopts the run by its name; a complete listing without it, past the
        # grace period: the dispatch left no run.
        if job.id in polled.unseen and age > settings.dispatch_lost_grace_seconds:
            requeue(job, "dispatch left no run; re-queued", refund=True)
            result.requeued += 1
    elif job.run_conclusion == "success" and not (waits_for_run(job) and sweep_mode(sweep) != "label"):
        # Collected results finish the job; re-ring in case the collect task was lost. (A point
        # with an eval is collected when the poll's listing folds its completed run; label-mode
        # runs are not in that listing, and their collection keeps a result without its eval.)
        after.append(collect_later(job.id))
        result.collect_enqueued += 1
    elif sweep_mode(sweep) == "label" and job.run_id not in asked.label_runs:
        # The repo's own (pull_request) run is not in the dispatch listing: read it once per run.
        asked.label_runs.add(job.run_id)
        gw = gw_factory(session)
        if apply_workflow_run(
            session, gw, gw.get_run(sweep.repo, job.run_id), after_commit=after, settings=settings
        ):
            result.updated += 1


def _time_out(
    session: Session,
    gw: CancelGateway,
    job: SweepJob,
    sweep: Sweep,
    age: float,
    settings: Settings,
    cancels: dict[int, bool],
) -> bool:
    """Fail a job past the timeout once its run is cancelled, or GitHub refused to (a refusal is
    kept on the run's jobs, ``run_cancel_refused``, and not asked again); True when failed. A cancel
    that failed transiently (5xx, rate limit) leaves the job in flight, so the next repair poll asks
    again: a failed job is never looked at again, and its run would hold its runners until GitHub's
    own timeout. One ask per run and poll (``cancels``), whichever of its jobs comes first."""
    if job.run_id is not None and job.run_cancel_refused is None:
        if job.run_id not in cancels:
            errors = cancel_runs(gw, sweep.repo, [job.run_id], session)
            cancels[job.run_id] = bool(errors) and job.run_cancel_refused is None
        if cancels[job.run_id]:
            log.info("timeout_cancel_pending", job=job.id, run_id=job.run_id, why="asked again next poll")
            return False
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
    return True
