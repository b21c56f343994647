"""Cancelling, superseding and retrying sweeps, pausing runner labels, and the PR events that cancel."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.adapters.github.errors import GitHubError
from app.core.clock import utcnow
from app.core.routing import HandlerContext, HandlerSkipped, Router
from app.core.sweepspec import (
    LABEL_RE,
    SweepError,
)
from app.flows.sweeps.ring import tick_later
from app.models.sweeps import JobState, RunnerLabel, Sweep, SweepJob, SweepState
from app.store.audit import record
from app.store.jobs import note_cancel_refused, requeue
from app.store.reports import mark_report_dirty
from app.store.sweeps import get_sweep, reopen

log = structlog.get_logger(__name__)

router = Router()  # this capability's webhook handlers (app/flows/ingest/handlers.py composes them)

BOT = "sweepbot"


class CancelGateway(Protocol):
    def cancel_run(self, repo: str, run_id: int) -> Any: ...


def refused(exc: Exception) -> bool:
    """GitHub said no for good: a 4xx (403 "Must have admin rights to Repository.", 404), which a
    second ask gets again. A 5xx or a rate limit is a ``TransientError``, worth asking again."""
    return isinstance(exc, GitHubError) and 400 <= exc.status < 500


def cancel_runs(
    gw: CancelGateway, repo: str, run_ids: Iterable[int], session: Session | None = None
) -> list[str]:
    """Ask GitHub to cancel each run; the errors, one per run not cancelled. With ``session``, a
    refusal (``refused``) is kept on the run's jobs (``run_cancel_refused``): no later
    ``workflow_run`` of it asks again."""
    errors = []
    for run_id in sorted(set(run_ids)):
        try:
            gw.cancel_run(repo, run_id)
        except Exception as exc:  # one run that cannot be cancelled must not block the others
            said = f"run {run_id}: {exc}"
            if session is not None and refused(exc):
                note_cancel_refused(session, run_id, str(exc))
                said += " (refused: not asked again)"
            errors.append(said)
            log.warning("cancel_run_failed", repo=repo, run_id=run_id, error=said)
    return errors


def close_sweep(
    session: Session,
    gw: CancelGateway | None,
    sweep: Sweep,
    *,
    state: str,
    actor: str,
    reason: str,
    superseded_by: int | None = None,
) -> list[str]:
    now = utcnow()
    jobs = session.scalars(
        select(SweepJob).where(SweepJob.sweep_id == sweep.id, SweepJob.state.notin_(JobState.FINAL))
    ).all()
    run_ids = [j.run_id for j in jobs if j.state in JobState.IN_FLIGHT and j.run_id is not None]
    for job in jobs:
        job.state, job.reason, job.finished_at, job.updated_at = JobState.CANCELLED, reason, now, now
    sweep.state, sweep.state_reason, sweep.updated_at, sweep.finished_at = state, reason, now, now
    if superseded_by is not None:
        sweep.superseded_by = superseded_by
    session.flush()
    errors = cancel_runs(gw, sweep.repo, run_ids, session) if gw is not None else []
    record(
        session,
        actor=actor,
        action="sweep.cancel" if state == SweepState.CANCELLED else "sweep.supersede",
        target=f"{sweep.repo}#{sweep.pr_number}",
        detail={
            "sweep": sweep.id,
            "reason": reason,
            "jobs": len(jobs),
            "runs_cancelled": sorted(set(run_ids)),
            "errors": errors,
        },
        outcome="ok" if not errors else "failed",
    )
    mark_report_dirty(session, sweep.id)
    return errors


def cancel_sweep(
    session: Session, gw: CancelGateway | None, sweep_id: int, *, actor: str, reason: str
) -> Sweep:
    """Cancel queued jobs and running runs (Actions cancel API) of one sweep. Idempotent."""
    sweep = get_sweep(session, sweep_id)
    stragglers = session.scalars(
        select(SweepJob.id).where(SweepJob.sweep_id == sweep.id, SweepJob.state.notin_(JobState.FINAL))
    ).first()
    if sweep.state in SweepState.FINAL and stragglers is None:
        return sweep
    close_sweep(
        session,
        gw,
        sweep,
        state=SweepState.CANCELLED if sweep.state in SweepState.OPEN else sweep.state,
        actor=actor,
        reason=reason,
    )
    return sweep


def cancel_pr_sweeps(
    session: Session,
    gw: CancelGateway | None,
    *,
    repo: str,
    pr_number: int,
    actor: str,
    reason: str,
    keep_head_sha: str | None = None,
    config_key: str | None = None,
) -> list[Sweep]:
    """Cancel every open sweep of a PR (or only those not at ``keep_head_sha``)."""
    query = select(Sweep).where(
        Sweep.repo == repo, Sweep.pr_number == pr_number, Sweep.state.in_(SweepState.OPEN)
    )
    if config_key is not None:
        query = query.where(Sweep.config_key == config_key)
    out = []
    for sweep in session.scalars(query.order_by(Sweep.id)).all():
        if keep_head_sha is not None and sweep.head_sha == keep_head_sha:
            continue
        state = SweepState.SUPERSEDED if keep_head_sha is not None else SweepState.CANCELLED
        close_sweep(session, gw, sweep, state=state, actor=actor, reason=reason)
        out.append(sweep)
    return out


def retry_job(session: Session, job_id: int, *, actor: str) -> SweepJob:
    """Put a failed or cancelled job back in the queue (its sweep reopens)."""
    job = session.get(SweepJob, job_id)
    if job is None:
        raise SweepError(f"job {job_id} does not exist")
    if job.state not in (JobState.FAILED, JobState.CANCELLED):
        raise SweepError(f"job {job_id} is {job.state}; only failed or cancelled jobs can be retried")
    sweep = get_sweep(session, job.sweep_id)
    if sweep.state == SweepState.SUPERSEDED:
        raise SweepError(f"sweep {sweep.id} was superseded by sweep {sweep.superseded_by}; retry that one")
    requeue(job, f"retried by {actor}")
    reopen(sweep)
    record(
        session,
        actor=actor,
        action="sweep.retry_job",
        target=f"{sweep.repo}#{sweep.pr_number}",
        detail={"sweep": sweep.id, "job": job.id},
    )
    mark_report_dirty(session, sweep.id)
    return job


def retry_sweep(session: Session, sweep_id: int, *, actor: str) -> Sweep:
    """Re-queue every failed or cancelled job of a sweep."""
    sweep = get_sweep(session, sweep_id)
    if sweep.state == SweepState.SUPERSEDED:
        raise SweepError(f"sweep {sweep.id} was superseded by sweep {sweep.superseded_by}; retry that one")
    jobs = session.scalars(
        select(SweepJob).where(
            SweepJob.sweep_id == sweep.id, SweepJob.state.in_((JobState.FAILED, JobState.CANCELLED))
        )
    ).all()
    if not jobs:
        raise SweepError(f"sweep {sweep.id} has no failed or cancelled job to retry")
    for job in jobs:
        requeue(job, f"retried by {actor}")
    reopen(sweep)
    record(
        session,
        actor=actor,
        action="sweep.retry",
        target=f"{sweep.repo}#{sweep.pr_number}",
        detail={"sweep": sweep.id, "jobs": [j.id for j in jobs]},
    )
    mark_report_dirty(session, sweep.id)
    return sweep


def set_label_paused(session: Session, label: str, paused: bool, *, actor: str) -> RunnerLabel:
    """Pause (nothing new is released; runs in flight finish) or resume a runner label."""
    if not LABEL_RE.match(label):
        raise SweepError(f"runner label {label!r} is malformed")
    row = session.get(RunnerLabel, label)
    if row is None:
        row = RunnerLabel(label=label, paused=False, release_seq=0)
        session.add(row)
    row.paused = paused
    row.paused_by, row.paused_at = (actor, utcnow()) if paused else (None, None)
    row.updated_at = utcnow()
    session.flush()
    record(session, actor=actor, action="runners.pause" if paused else "runners.resume", target=label)
    return row


@router.register("pull_request", "synchronize")
def on_pull_request_synchronize(ctx: HandlerContext[Session, CancelGateway]) -> None:
    payload = ctx.event.payload
    pr = payload.get("pull_request") or {}
    repo = ctx.event.repo
    new_sha = str((pr.get("head") or {}).get("sha") or "")
    if not repo or not new_sha:
        raise HandlerSkipped("no repository or head sha")
    closed = cancel_pr_sweeps(
        ctx.session,
        ctx.gateway(),
        repo=repo,
        pr_number=int(pr["number"]),
        actor=ctx.event.sender or BOT,
        reason=f"superseded by push {new_sha[:7]}",
        keep_head_sha=new_sha,
    )
    if not closed:
        raise HandlerSkipped("no open sweep on an older head")
    ctx.after_commit.append(tick_later)


@router.register("pull_request", "closed")
def on_pull_request_closed(ctx: HandlerContext[Session, CancelGateway]) -> None:
    pr = ctx.event.payload.get("pull_request") or {}
    repo = ctx.event.repo
    if not repo:
        raise HandlerSkipped("no repository")
    closed = cancel_pr_sweeps(
        ctx.session,
        ctx.gateway(),
        repo=repo,
        pr_number=int(pr["number"]),
        actor=ctx.event.sender or BOT,
        reason="pull request closed",
    )
    if not closed:
        raise HandlerSkipped("no open sweep")
