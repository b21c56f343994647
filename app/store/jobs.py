"""Queries and state changes of sweep jobs: what is queued, what holds runner slots, runs by name."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import Session

from app.core.clock import utcnow
from app.core.release import DispatchSlots, slots_in_use
from app.models.sweeps import CANARY_REASON, JobState, Sweep, SweepJob, SweepState


def labels_with_work(session: Session) -> list[tuple[str, str]]:
    rows = session.execute(
        select(SweepJob.runner_label, func.min(Sweep.repo))
        .join(Sweep, Sweep.id == SweepJob.sweep_id)
        .where(SweepJob.state == JobState.QUEUED, Sweep.state == SweepState.ACTIVE)
        .group_by(SweepJob.runner_label)
    ).all()
    return [(str(r[0]), str(r[1])) for r in rows]


def inflight_slots(session: Session, label: str) -> int:
    """Runner slots in use on ``label`` (``app.core.release.slots_in_use``): each in-flight dispatch
    counts its slots once, less the jobs of it GitHub already said finished."""
    rows = session.execute(
        select(
            SweepJob.run_name, SweepJob.id, SweepJob.slots, SweepJob.run_conclusion, SweepJob.run_id
        ).where(SweepJob.runner_label == label, SweepJob.state.in_(JobState.IN_FLIGHT))
    ).all()
    per_run: dict[str, list[int]] = {}  # run name -> [slots, running, finished]
    run_of: dict[int, str] = {}  # run id -> run name, of dispatches with jobs still running
    for run_name, job_id, slots, conclusion, run_id in rows:
        key = run_name or f"job-{job_id}"
        got = per_run.setdefault(key, [1, 0, 0])
        got[0] = max(got[0], int(slots or 1))
        got[1 if conclusion is None else 2] += 1
        if run_name and run_id is not None:
            run_of[int(run_id)] = key
    if run_of:
        # Jobs of those runs already final (failed, or collected) finished there too. By run id:
        # a retried group is dispatched again under the same run name.
        for run_id, count in session.execute(
            select(SweepJob.run_id, func.count())
            .where(SweepJob.run_id.in_(list(run_of)), SweepJob.state.in_(JobState.FINAL))
            .group_by(SweepJob.run_id)
        ).all():
            per_run[run_of[int(run_id or 0)]][2] += int(count)
    return slots_in_use([DispatchSlots(*got) for got in per_run.values()])


def match_jobs(session: Session, run_id: int, run_name: str | None) -> list[SweepJob]:
    jobs = list(session.scalars(select(SweepJob).where(SweepJob.run_id == run_id)).all())
    if run_name and run_name.startswith("sweepbot-"):
        # Jobs whose dispatch never recorded the run id (204 answer, crash): adopt them by name.
        jobs += session.scalars(
            select(SweepJob).where(
                SweepJob.run_name == run_name,
                SweepJob.run_id.is_(None),
                SweepJob.state.in_(JobState.IN_FLIGHT),
            )
        ).all()
    return jobs


def dispatch_group(session: Session, jobs: Sequence[SweepJob]) -> list[SweepJob]:
    """Every job of the sweeps' dispatch groups of ``jobs``, whatever their state or run, by id (the
    repo's expansion order): the points a dispatch of that group runs, as far as the sweep knows."""
    keys = {(j.sweep_id, j.group_key) for j in jobs}
    if not keys:
        return []
    rows = session.scalars(
        select(SweepJob)
        .where(SweepJob.sweep_id.in_({k[0] for k in keys}), SweepJob.group_key.in_({k[1] for k in keys}))
        .order_by(SweepJob.id)
    ).all()
    return [j for j in rows if (j.sweep_id, j.group_key) in keys]


def requeue(job: SweepJob, reason: str) -> None:
    job.state, job.reason, job.claim = JobState.QUEUED, reason, None
    job.run_id = job.run_url = job.run_name = job.run_conclusion = None
    job.dispatched_at = job.started_at = job.finished_at = None
    job.updated_at = utcnow()


def queued_on_label(session: Session, label: str) -> list[tuple[SweepJob, Sweep]]:
    """Queued jobs of active sweeps on ``label``, in serving order: priority class, the sweep
    served least recently, sweep id, then the sweep's point order."""
    rows = session.execute(
        select(SweepJob, Sweep)
        .join(Sweep, Sweep.id == SweepJob.sweep_id)
        .where(
            SweepJob.runner_label == label,
            SweepJob.state == JobState.QUEUED,
            Sweep.state == SweepState.ACTIVE,
        )
        .order_by(Sweep.priority, Sweep.last_release, Sweep.id, SweepJob.position)
    ).all()
    return [(job, sweep) for job, sweep in rows]


def real_waiting_slots(session: Session, label: str) -> int:
    """Runner slots the queued real (non-canary) dispatches on ``label`` need: one count per group."""
    waiting = session.execute(
        select(SweepJob.sweep_id, SweepJob.group_key, func.max(SweepJob.slots))
        .join(Sweep, Sweep.id == SweepJob.sweep_id)
        .where(
            SweepJob.runner_label == label,
            SweepJob.state == JobState.QUEUED,
            Sweep.state == SweepState.ACTIVE,
            Sweep.reason != CANARY_REASON,
        )
        .group_by(SweepJob.sweep_id, SweepJob.group_key)
    ).all()
    return sum(max(1, int(r[2] or 1)) for r in waiting)


def running_canaries(session: Session, label: str) -> dict[str, list[tuple[SweepJob, Sweep]]]:
    """Canary jobs holding runner slots on ``label``, by run name."""
    running = session.execute(
        select(SweepJob, Sweep)
        .join(Sweep, Sweep.id == SweepJob.sweep_id)
        .where(
            SweepJob.runner_label == label,
            SweepJob.state.in_(JobState.IN_FLIGHT),
            Sweep.reason == CANARY_REASON,
            or_(SweepJob.run_conclusion.is_(None), SweepJob.run_conclusion != "success"),
        )
    ).all()
    by_run: dict[str, list[tuple[SweepJob, Sweep]]] = {}
    for job, sweep in running:
        by_run.setdefault(job.run_name or f"job-{job.id}", []).append((job, sweep))
    return by_run


def claim_group(session: Session, ids: list[int], *, token: str, run_name: str) -> int:
    """Claim queued jobs for one dispatch (guarded: only rows still queued); how many were claimed."""
    now = utcnow()
    result = session.execute(
        update(SweepJob)
        .where(SweepJob.id.in_(ids), SweepJob.state == JobState.QUEUED)
        .values(
            state=JobState.DISPATCHED,
            claim=token,
            run_name=run_name,
            dispatched_at=now,
            updated_at=now,
            attempts=SweepJob.attempts + 1,
            reason=None,
        )
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]
