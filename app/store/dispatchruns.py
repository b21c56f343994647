"""Runs the bot dispatched, followed until GitHub says they completed: what they hold on a label.

A retry re-dispatches a whole conc group, so its run re-runs siblings whose results we have; the
bot counts their runners (``app.core.release_plan.run_slots_in_use``) from the ``workflow_job`` events
of every job of the run, ours or not, until the run completes (its ``workflow_run`` event, or the
repair poll reading it). Label-mode runs are the repo's, not ours: not recorded here. The repair
poll deletes a row ``SWEEPBOT_DISPATCH_RUN_RETENTION_SECONDS`` after its run completed
(``prune_completed``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import structlog
from sqlalchemy import delete, exists, select
from sqlalchemy.orm import Session

from app.core.clock import aware, utcnow
from app.core.release_plan import RunSlots
from app.core.runmatch import parse_job_name, run_fits_dispatch
from app.models.dispatchruns import DispatchRun
from app.models.sweeps import JobState, SweepJob

log = structlog.get_logger(__name__)


def note_run(session: Session, *, run_id: int, repo: str, label: str, run_name: str, slots: int) -> bool:
    """Follow a run we dispatched (idempotent); True when it was not followed yet."""
    if session.get(DispatchRun, run_id) is not None:
        return False
    session.add(
        DispatchRun(
            run_id=run_id,
            repo=repo,
            runner_label=label,
            run_name=run_name,
            slots=max(1, slots),
            jobs_seen=[],
            jobs_done=[],
            callers_seen=[],
        )
    )
    session.flush()
    return True


def follow_run(session: Session, jobs: Sequence[SweepJob], run_id: int, repo: str) -> bool:
    """Follow the run a dispatch of ``jobs`` (one group) made, until it completes."""
    return note_run(
        session,
        run_id=run_id,
        repo=repo,
        label=jobs[0].runner_label,
        run_name=jobs[0].run_name or "",
        slots=max(max(1, j.slots) for j in jobs),
    )


def fold_run_job(session: Session, wf_job: dict[str, Any]) -> bool:
    """A ``workflow_job`` (webhook or REST shape) of a run we follow, ours or a sibling: note it on
    the run (seen; completed; its caller, ``eval /``, for a benchmark job); True when that changed
    the run's count."""
    run_id, job_id = wf_job.get("run_id"), wf_job.get("id")
    if run_id is None or job_id is None:
        return False
    run = session.get(DispatchRun, int(run_id), with_for_update=True)
    if run is None or run.completed_at is not None:
        return False
    parsed = parse_job_name(str(wf_job.get("name") or ""))
    if parsed is not None and run.callers_seen is not None and parsed.caller not in run.callers_seen:
        run.callers_seen = [*run.callers_seen, parsed.caller]  # app.flows.scheduler.unexpanded reads it
    labels = wf_job.get("labels")
    on_label = (
        run.runner_label in labels
        if isinstance(labels, list)
        else parsed is not None  # no labels given: a benchmark job
    )
    if not on_label:
        return False  # get-jobs, collect-results ... run on hosted runners
    changed = False
    if int(job_id) not in run.jobs_seen:
        run.jobs_seen, changed = [*run.jobs_seen, int(job_id)], True
    if wf_job.get("status") == "completed" and int(job_id) not in run.jobs_done:
        run.jobs_done, changed = [*run.jobs_done, int(job_id)], True
    return changed


def close_run(session: Session, run_id: int, why: str) -> bool:
    """GitHub said the run completed (or it is given up on): its runners are free. True if it was open."""
    run = session.get(DispatchRun, run_id, with_for_update=True)
    if run is None or run.completed_at is not None:
        return False
    run.completed_at, run.completed_why = utcnow(), why[:200]
    log.info("dispatch_run_closed", run_id=run_id, label=run.runner_label, why=why)
    return True


def reopen_run(session: Session, run_id: int) -> bool:
    """A run closed too early (a cancel that did not take): its runners are held again until GitHub
    says it completed. True if it was closed."""
    run = session.get(DispatchRun, run_id, with_for_update=True)
    if run is None or run.completed_at is None:
        return False
    run.completed_at = run.completed_why = None
    log.info("dispatch_run_reopened", run_id=run_id, label=run.runner_label)
    return True


def open_runs(session: Session, label: str | None = None) -> list[DispatchRun]:
    query = select(DispatchRun).where(DispatchRun.completed_at.is_(None)).order_by(DispatchRun.run_id)
    if label is not None:
        query = query.where(DispatchRun.runner_label == label)
    return list(session.scalars(query).all())


def followed(session: Session, run_ids: Sequence[int]) -> set[int]:
    """Which of ``run_ids`` are runs we follow (open or completed): their jobs count through the run."""
    if not run_ids:
        return set()
    query = select(DispatchRun.run_id).where(DispatchRun.run_id.in_(run_ids))
    return {int(r) for r in session.scalars(query)}


def adoptable(session: Session, run: Mapping[str, Any], jobs: Sequence[SweepJob]) -> list[SweepJob]:
    """Of the jobs found by ``run``'s name (in flight, no run id yet), those that may take the run
    (``run_fits_dispatch``): none when we follow it already — its dispatch recorded it, and only a
    retry (``requeue``) lets go of a run id, so the run is an earlier attempt's — nor a job whose
    dispatch was claimed after the run was created: a late event of the run a retry retries."""
    named = [j for j in jobs if j.run_id is None and j.state in JobState.IN_FLIGHT]
    if not named:
        return []
    bound = followed(session, [int(run["id"])])
    out = []
    for job in named:
        why = run_fits_dispatch(run, claimed_at=aware(job.dispatched_at), bound=bound)
        if why is None:
            out.append(job)
        else:
            log.info("run_not_adopted", run_id=run.get("id"), job=job.id, why=why)
    return out


def run_slots(run: DispatchRun, ours_done: int = 0) -> RunSlots:
    return RunSlots(
        slots=run.slots,
        seen=len(run.jobs_seen or []),
        done=len(run.jobs_done or []),
        completed=run.completed_at is not None,
        ours_done=ours_done,
    )


def callers_seen(session: Session, run_id: int | None) -> frozenset[str] | None:
    """The callers whose benchmark jobs a followed run showed (``fold_run_job``); None when the
    run is not followed, or was before they were noted."""
    run = session.get(DispatchRun, run_id) if run_id is not None else None
    return frozenset(run.callers_seen) if run is not None and run.callers_seen is not None else None


def close_stale(session: Session, older_than: datetime) -> list[int]:
    """Give up on open runs dispatched before ``older_than`` (no completion ever heard: the run was
    deleted, or every event and poll missed it), so they cannot hold runners forever."""
    stale = session.scalars(
        select(DispatchRun).where(DispatchRun.completed_at.is_(None), DispatchRun.created_at < older_than)
    ).all()
    for run in stale:
        close_run(session, run.run_id, "no completion heard within the job timeout")
    return [r.run_id for r in stale]


def prune_completed(session: Session, completed_before: datetime) -> int:
    """Delete the rows of runs that completed before ``completed_before``: nothing counts them any
    more. A run not completed is never deleted (its runners are held), nor one a job of ours still
    waits on in flight (its runners would be counted again through the job). How many went."""
    held = exists().where(SweepJob.run_id == DispatchRun.run_id, SweepJob.state.in_(JobState.IN_FLIGHT))
    gone = session.execute(
        delete(DispatchRun)
        .where(
            DispatchRun.completed_at.is_not(None),
            DispatchRun.completed_at < completed_before,
            ~held,
        )
        .execution_options(synchronize_session=False)
    )
    count = int(gone.rowcount)  # type: ignore[attr-defined]  # a CursorResult for DELETE
    if count:
        log.info("dispatch_runs_pruned", count=count, completed_before=completed_before.isoformat())
    return count
