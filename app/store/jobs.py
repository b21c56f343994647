"""Queries and state changes of sweep jobs: what is queued, what holds runner slots, runs by name."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, NamedTuple

from sqlalchemy import and_, case, exists, func, null, or_, select, true, update
from sqlalchemy.orm import Session

from app.core.clock import utcnow
from app.core.release_plan import DispatchSlots, run_slots_in_use, slots_in_use
from app.models.sweeps import CANARY_REASON, JobState, Sweep, SweepJob, SweepState
from app.store.dispatchruns import followed, open_runs, run_slots


def labels_with_work(session: Session) -> list[tuple[str, str]]:
    rows = session.execute(
        select(SweepJob.runner_label, func.min(Sweep.repo))
        .join(Sweep, Sweep.id == SweepJob.sweep_id)
        .where(SweepJob.state == JobState.QUEUED, Sweep.state == SweepState.ACTIVE)
        .group_by(SweepJob.runner_label)
    ).all()
    return [(str(r[0]), str(r[1])) for r in rows]


def inflight_slots(session: Session, label: str) -> int:
    """Runner slots in use on ``label``: every job of a run we dispatched and follow
    (``app.store.dispatchruns``) until GitHub says the run completed, ours or not
    (``app.core.release_plan.run_slots_in_use``); and for in-flight jobs of runs we do not follow (no run
    id yet, label mode, runs dispatched before runs were followed), each dispatch's slots once, less
    the jobs of it GitHub already said finished (``app.core.release_plan.slots_in_use``)."""
    rows = session.execute(
        select(
            SweepJob.run_name, SweepJob.id, SweepJob.slots, SweepJob.run_conclusion, SweepJob.run_id
        ).where(SweepJob.runner_label == label, SweepJob.state.in_(JobState.IN_FLIGHT))
    ).all()
    runs = open_runs(session, label)
    known = {r.run_id for r in runs} | followed(
        session, sorted({int(r[4]) for r in rows if r[4] is not None} - {r.run_id for r in runs})
    )
    rows = [r for r in rows if r[4] is None or int(r[4]) not in known]
    ours_done: dict[int, int] = {}
    if runs:
        # our jobs of those runs known finished (final, or GitHub said how they ended)
        ours_done = {
            int(run_id or 0): int(count)
            for run_id, count in session.execute(
                select(SweepJob.run_id, func.count())
                .where(
                    SweepJob.run_id.in_([r.run_id for r in runs]),
                    or_(SweepJob.state.in_(JobState.FINAL), SweepJob.run_conclusion.is_not(None)),
                )
                .group_by(SweepJob.run_id)
            ).all()
        }
    held = run_slots_in_use([run_slots(r, ours_done.get(r.run_id, 0)) for r in runs])
    return held + _unfollowed_slots(session, rows)


def _unfollowed_slots(session: Session, rows: Sequence[Any]) -> int:
    """In-flight jobs of runs we do not follow: each dispatch counts its slots once, less the jobs of
    it GitHub already said finished."""
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


def requeue(job: SweepJob, reason: str, *, refund: bool = False) -> None:
    """Back in the queue. ``refund``: the dispatch that claimed it does not count against the job's
    infrastructure-retry budget (it never ran: a GitHub 5xx, a preemption, a new head, a lost
    dispatch), so only real runs that failed use retries up."""
    job.state, job.reason, job.claim = JobState.QUEUED, reason, None
    job.run_id = job.run_url = job.run_name = job.run_conclusion = job.run_cancel_refused = None
    job.dispatched_at = job.started_at = job.finished_at = None
    job.updated_at = utcnow()
    if refund:
        job.attempts = max(0, job.attempts - 1)


def note_cancel_refused(session: Session, run_id: int, said: str) -> int:
    """GitHub refused to cancel ``run_id`` (a 4xx: asking again is refused again): kept on the
    run's jobs so no later event asks again; how many jobs."""
    jobs = session.scalars(select(SweepJob).where(SweepJob.run_id == run_id)).all()
    for job in jobs:
        job.run_cancel_refused = said[:300]
    return len(jobs)


class QueuedRow(NamedTuple):
    """A queued job as the release plan reads it: no point, no ORM object (a queue is thousands)."""

    job_id: int
    sweep_id: int
    group_key: str
    slots: int
    position: int


class QueuedOnLabel(NamedTuple):
    rows: list[QueuedRow]  # in serving order
    sweeps: dict[int, Sweep]
    unread: dict[int, int]  # sweep id -> the first position not read, of the sweeps read in part


def sweeps_in_serving_order(session: Session, label: str, *, offset: int, limit: int) -> list[int]:
    """Ids of the active sweeps with jobs queued on ``label``, in serving order (priority class,
    the sweep served least recently, sweep id: the order ``queued_on_label`` gives their jobs in),
    ``limit`` of them after the first ``offset``. The tick reads the queue so, a page of sweeps at
    a time, until its plan ends among them (``app.core.release_plan.plan_release_prefix``)."""
    queued = exists().where(
        SweepJob.sweep_id == Sweep.id, SweepJob.runner_label == label, SweepJob.state == JobState.QUEUED
    )
    stmt = (
        select(Sweep.id)
        .where(Sweep.state == SweepState.ACTIVE, queued)
        .order_by(Sweep.priority, Sweep.last_release, Sweep.id)
        .offset(offset)
        .limit(limit)
    )
    return [int(i) for i in session.scalars(stmt)]


def narrowest_queued(session: Session, label: str) -> int | None:
    """Slots of the narrowest job queued on ``label`` of an active sweep (at least 1; None: none
    queued): what ``app.core.release_plan.narrowest_queued`` says of the whole queue, read without
    reading every sweep. The first row of ``ix_sweep_jobs_label_state_slots`` in slots order whose
    sweep is active (most are: a closed sweep's queued jobs are cancelled with it)."""
    slots = session.scalar(
        select(SweepJob.slots)
        .join(Sweep, Sweep.id == SweepJob.sweep_id)
        .where(
            SweepJob.runner_label == label,
            SweepJob.state == JobState.QUEUED,
            Sweep.state == SweepState.ACTIVE,
        )
        .order_by(SweepJob.slots)
        .limit(1)
    )
    return None if slots is None else max(1, int(slots))


def _queued_on(label: str, sweeps: Collection[int] | None) -> tuple[Any, ...]:
    """The queued jobs on ``label`` (of ``sweeps`` only, when given)."""
    if sweeps is None:
        return (SweepJob.runner_label == label, SweepJob.state == JobState.QUEUED)
    # A page of sweeps: found by sweep (ix_sweep_jobs_sweep_position), not by scanning the label's
    # whole queue (ix_sweep_jobs_label_state_slots), which SQLite's planner prefers for its two equalities
    # unless they cannot use it: `label || ''` and `state || ''` compare the same, unindexed.
    return (
        Sweep.id.in_(sorted(sweeps)),
        SweepJob.sweep_id.in_(sorted(sweeps)),
        SweepJob.runner_label.concat("") == label,
        SweepJob.state.concat("") == JobState.QUEUED,
    )


def queued_on_label(
    session: Session,
    label: str,
    free: int | None = None,
    *,
    auto_overcommit: bool = False,
    sweeps: Collection[int] | None = None,
) -> QueuedOnLabel:
    """Queued jobs of active sweeps on ``label``, in serving order (priority class, the sweep
    served least recently, sweep id, then the sweep's point order), and their sweeps by id.

    ``free``: only the dispatch groups of each sweep a release plan with that many free slots can
    reach (a group's place is its first job's; a group is read whole): its first two, each whose
    earlier groups fit in ``free`` together, and the first of each width that fits (a backfill).
    A tick so reads what it can release, not the whole queue. One pass of window functions over
    the queued rows, no join back.

    ``auto_overcommit`` (``SWEEPBOT_RUNNER_OVERCOMMIT=auto``): the plan lets a group out while one
    slot is free, so it may release each group with fewer than ``free`` slots before it and hold the
    one after: also read is each group with fewer than ``free`` + the sweep's widest group before it.

    ``sweeps``: only these sweeps' jobs (a page of ``sweeps_in_serving_order``)."""
    group = (SweepJob.sweep_id, SweepJob.group_key)
    jobs = (
        select(
            SweepJob.id,
            SweepJob.sweep_id,
            SweepJob.group_key,
            SweepJob.slots,
            SweepJob.position,
            Sweep.priority,
            Sweep.last_release,
            func.min(SweepJob.position).over(partition_by=group).label("first"),
            func.max(SweepJob.slots).over(partition_by=group).label("cost"),
        )
        .join(Sweep, Sweep.id == SweepJob.sweep_id)
        .where(*_queued_on(label, sweeps), Sweep.state == SweepState.ACTIVE)
        .subquery()
    )
    j = jobs.c
    if free is None:
        final = select(*j, true().label("reach"), null().label("unread")).subquery()
    else:
        cost = case((j.cost < 1, 1), else_=j.cost)
        in_order: Any = {"partition_by": j.sweep_id, "order_by": (j.first, j.group_key)}
        # Each group's cost once (at its first job), summed over the groups up to and with this one.
        upto = func.sum(case((j.position == j.first, cost), else_=0)).over(**in_order)
        # ... and each sweep's first group of every width that fits: what a backfill can take
        # (app.core.release_plan: one group a sweep and plan, the first of its width)
        by_width = func.dense_rank().over(partition_by=(j.sweep_id, cost), order_by=(j.first, j.group_key))
        ranked = select(
            *j,
            (upto - cost).label("before"),
            func.dense_rank().over(**in_order).label("rank"),
            by_width.label("wrank"),
            cost.label("width"),
            func.max(cost).over(partition_by=j.sweep_id).label("widest"),
        )
        r = ranked.subquery().c
        reaches = or_(r.rank <= 2, r.before <= max(0, free), and_(r.wrank == 1, r.width <= max(0, free)))
        if auto_overcommit:
            reaches = or_(reaches, r.before < max(0, free) + r.widest)
        first_unread = func.min(case((reaches, None), else_=r.position)).over(partition_by=r.sweep_id)
        final = select(*r, reaches.label("reach"), first_unread.label("unread")).subquery()
    f = final.c
    stmt = select(f.id, f.sweep_id, f.group_key, f.slots, f.position, f.unread).where(f.reach)
    out: list[QueuedRow] = []
    unread: dict[int, int] = {}
    for job_id, sweep_id, group_key, slots, pos, first in session.execute(
        stmt.order_by(f.priority, f.last_release, f.sweep_id, f.position)
    ).all():
        out.append(QueuedRow(int(job_id), int(sweep_id), str(group_key), int(slots), int(pos)))
        if first is not None:
            unread[int(sweep_id)] = int(first)
    ids = sorted({row.sweep_id for row in out})
    sweeps = {s.id: s for s in session.scalars(select(Sweep).where(Sweep.id.in_(ids))).all()} if ids else {}
    return QueuedOnLabel(out, sweeps, unread)


def job_points(session: Session, ids: Collection[int]) -> dict[int, tuple[str, dict[str, Any] | None]]:
    """Result name and point of each job in ``ids`` (what a reuse lookup needs), in one query."""
    if not ids:
        return {}
    rows = session.execute(
        select(SweepJob.id, SweepJob.result_name, SweepJob.point).where(SweepJob.id.in_(list(ids)))
    ).all()
    return {int(i): (str(name), point if isinstance(point, dict) else None) for i, name, point in rows}


def jobs_by_id(session: Session, ids: Collection[int]) -> dict[int, SweepJob]:
    if not ids:
        return {}
    return {j.id: j for j in session.scalars(select(SweepJob).where(SweepJob.id.in_(list(ids)))).all()}


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


def next_attempt(session: Session, ids: Collection[int]) -> int:
    """The attempt a dispatch of ``ids`` is (1 for a first dispatch): one more than any of them has
    made (``attempts`` counts dispatches; app.core.runmatch.attempt_run_name names the run by it)."""
    most = session.scalar(select(func.max(SweepJob.attempts)).where(SweepJob.id.in_(list(ids))))
    return int(most or 0) + 1


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
