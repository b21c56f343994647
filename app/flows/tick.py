"""The tick: release queued jobs onto free runner capacity, one runner label at a time.

Concurrency contract (several workers, several beat ticks at once; docs/scheduling.md):

- A tick works one runner label at a time inside a short transaction that first takes that
  label's lock row (``SELECT ... FOR UPDATE SKIP LOCKED`` on PostgreSQL: a label another tick is
  serving is skipped; on SQLite the first statement is a guarded UPDATE of the row, which takes
  the database write lock so the in-flight count read after it is current). Under that lock it
  counts the runner slots in flight, picks jobs, and claims them with a guarded
  ``UPDATE ... WHERE state='queued'``. The claim commits *before* the GitHub call.
- The dispatch then happens outside any transaction and its run id is recorded afterwards. A crash
  between claim and record leaves a ``dispatched`` job without a run id; the repair poll finds its
  run by the unique run name ``sweepbot-<sweep id>-<job id>``, or re-queues it when no run exists.
  So a job is never dispatched twice by two ticks, and never lost.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Protocol

import structlog
from sqlalchemy.orm import Session, sessionmaker

from app.core.clock import aware, utcnow
from app.core.release import CanaryHours, QueuedJob, Release, SweepQueue, plan_release
from app.core.release_policy import CanaryRun, LabelView, pick_preemptions
from app.core.routing import TransientError
from app.flows.benchrepo import RepoFiles, label_capacity
from app.flows.canary_budget import canary_budget, note_preempted_hours
from app.flows.dispatch import Claimed, DispatchGateway, TickResult, dispatch_claim
from app.flows.sweepcancel import CancelGateway, cancel_runs
from app.models.sweeps import CANARY_REASON, JobState, Sweep, SweepJob
from app.settings import get_settings
from app.store import reuse
from app.store.audit import record
from app.store.jobs import (
    claim_group,
    inflight_slots,
    labels_with_work,
    queued_on_label,
    real_waiting_slots,
    requeue,
    running_canaries,
)
from app.store.reports import mark_report_dirty
from app.store.reuse import result_link
from app.store.runnerlabels import ensure_label, lock_label
from app.store.sweeps import maybe_finish_sweep

log = structlog.get_logger(__name__)

BOT = "sweepbot"


class TickGateway(RepoFiles, DispatchGateway, CancelGateway, Protocol):
    """What a tick uses: runner capacity (runners.yaml), the dispatch, and cancelling the runs of
    preempted canaries."""


GatewayFactory = Callable[[Session], TickGateway]


def _canary_hours(session: Session, repo: str) -> CanaryHours:
    """``repo``'s canary runner-hours this week (used, budget, what one canary takes)."""
    usage = canary_budget(session, repo)
    return CanaryHours(usage.used_hours, usage.budget_hours, usage.expected_job_hours)


def _preempt_canaries(
    session: Session, label: str, capacity: int, in_flight: int, result: TickResult
) -> bool:
    """Put back in the queue the canary runs that stand in the way of waiting real work."""
    real_waiting = real_waiting_slots(session, label)
    if real_waiting == 0 or capacity - in_flight >= min(real_waiting, capacity):
        return False
    by_run = running_canaries(session, label)
    runs = [
        CanaryRun(name, max(max(1, j.slots) for j, _ in pairs), aware(pairs[0][0].dispatched_at) or utcnow())
        for name, pairs in by_run.items()
    ]
    view = LabelView(label=label, capacity=capacity, in_flight=in_flight, real_waiting_slots=real_waiting)
    picked = pick_preemptions(view, runs)
    now = utcnow()
    for name in picked:
        pairs = by_run[name]
        job0, sweep0 = pairs[0]
        spent = ((now - (aware(job0.dispatched_at) or now)).total_seconds() / 3600.0) * max(1, job0.slots)
        run_id = job0.run_id
        for job, _ in pairs:
            requeue(job, f"preempted by real work waiting on {label}")
            job.attempts = max(0, job.attempts - 1)
        if run_id is not None:
            result.preempted.append((sweep0.repo, int(run_id)))
        note_preempted_hours(session, sweep0.id, spent)
        record(
            session,
            actor=BOT,
            action="canary.preempt",
            target=name,
            detail={
                "sweep": sweep0.id,
                "jobs": [j.id for j, _ in pairs],
                "run_id": run_id,
                "label": label,
                "real_waiting_slots": real_waiting,
                "runner_hours": round(spent, 4),
            },
        )
    return bool(picked)


def _queues(rows: list[tuple[SweepJob, Sweep]], known: dict[int, Any]) -> list[SweepQueue]:
    """The label's queued jobs as the release plan reads them (``known``: reuse lookups so far)."""
    jobs: dict[int, list[SweepJob]] = {}
    sweeps: dict[int, Sweep] = {}
    for job, sweep in rows:
        jobs.setdefault(sweep.id, []).append(job)
        sweeps[sweep.id] = sweep
    return [
        SweepQueue(
            sweep_id=sid,
            priority=sweeps[sid].priority,
            jobs=tuple(
                QueuedJob(j.id, j.group_key, j.slots, (known[j.id] is not None) if j.id in known else None)
                for j in queued
            ),
            canary=sweeps[sid].reason == CANARY_REASON,
            repo=sweeps[sid].repo,
        )
        for sid, queued in jobs.items()
    ]


def _plan(
    session: Session, label: str, rows: list[tuple[SweepJob, Sweep]], capacity: int, in_flight: int
) -> tuple[list[Release], dict[int, Any]]:
    """Plan the label's releases, looking up reuse for each job the plan reaches (``plan_release``)."""
    by_id = {job.id: (job, sweep) for job, sweep in rows}
    hours = {s.repo: _canary_hours(session, s.repo) for _, s in rows if s.reason == CANARY_REASON}
    known: dict[int, Any] = {}  # job id -> the stored result that answers it, or None

    def look_up(job: SweepJob, sweep: Sweep) -> None:
        known[job.id] = reuse.reusable_for_point(
            session,
            image=sweep.image,
            fingerprint=sweep.fingerprint,
            result_name=job.result_name,
            point=job.point if isinstance(job.point, dict) else None,
        )

    # Each sweep's first job is reached in the plan's first round: looked up up front, so the plan
    # is made once or twice, not once per sweep (a long queue made the tick quadratic).
    heads: dict[int, tuple[SweepJob, Sweep]] = {}
    for job, sweep in rows:
        heads.setdefault(sweep.id, (job, sweep))
    for job, sweep in heads.values():
        look_up(job, sweep)
    while True:
        plan = plan_release(_queues(rows, known), capacity, in_flight, label=label, canary_hours=hours)
        if not plan or plan[-1].action != "check":
            return plan, known
        look_up(*by_id[plan[-1].job_ids[0]])


def _claim_label(session: Session, gw: RepoFiles, label: str, repo: str, result: TickResult) -> list[Claimed]:
    """Under the label's lock: plan this label's releases (``app.core.release``) and apply them."""
    row = lock_label(session, label)
    if row is None or row.paused:
        result.skipped_labels.append(label)
        return []
    capacity, source = label_capacity(gw, label, repo)
    row.capacity, row.capacity_source = capacity, source
    in_flight = inflight_slots(session, label)
    if _preempt_canaries(session, label, capacity, in_flight, result):
        in_flight = inflight_slots(session, label)
    rows = queued_on_label(session, label)
    plan, known = _plan(session, label, rows, capacity, in_flight)
    by_id = {job.id: (job, sweep) for job, sweep in rows}
    claimed: list[Claimed] = []
    token = uuid.uuid4().hex
    now = utcnow()
    reused_sweeps: dict[int, Sweep] = {}
    for step in plan:
        job, sweep = by_id[step.job_ids[0]]
        if step.action == "reuse":
            job.state, job.finished_at, job.updated_at = JobState.REUSED, now, now
            job.result_url = result_link(known[job.id])
            job.reason = step.reason
            result.reused += 1
            mark_report_dirty(session, sweep.id)
            reused_sweeps[sweep.id] = sweep
        elif step.action == "hold" and step.canary and step.reason not in result.held:
            result.held.append(step.reason)
            log.info("canary_held", label=label, sweep=sweep.id, reason=step.reason)
        elif step.action == "dispatch":
            ids = list(step.job_ids)
            if claim_group(session, ids, token=token, run_name=step.run_name) != len(ids):
                # cannot happen under the label lock; refuse rather than double-run
                raise TransientError(f"label {label}: claim of jobs {ids} raced; retrying the tick")
            for jid in ids:
                session.expire(by_id[jid][0])
            row.release_seq += 1
            sweep.last_release = row.release_seq
            claimed.append(_claimed(sweep, job, step, token))
            mark_report_dirty(session, sweep.id)
    for sweep in reused_sweeps.values():
        maybe_finish_sweep(session, sweep)
    return claimed


def _claimed(sweep: Sweep, head: SweepJob, step: Release, token: str) -> Claimed:
    return Claimed(
        sweep.id,
        sweep.repo,
        sweep.pr_number,
        sweep.is_fork,
        sweep.approved_sha,
        sweep.head_sha,
        sweep.head_ref,
        sweep.base_ref,
        sweep.config_key,
        step.run_name,
        list(step.job_ids),
        head.seq,
        head.conc,
        head.tp,
        token,
        sweep.config_path or "",
    )


def tick(session_factory: sessionmaker[Session], gw_factory: GatewayFactory) -> TickResult:
    """Release queued jobs onto free runner capacity. Safe to run concurrently (module docstring).

    ``gw_factory(session)`` returns the GitHub gateway (writes audited in that session).
    """
    settings = get_settings()
    result = TickResult()
    with session_factory() as session:
        labels = labels_with_work(session)
    for label, repo in labels:
        ensure_label(session_factory, label)
        with session_factory() as session:
            try:
                claims = _claim_label(session, gw_factory(session), label, repo, result)
                session.commit()
            except Exception:
                session.rollback()
                raise
        for run_repo, run_id in result.preempted:
            with session_factory() as session:
                try:
                    errors = cancel_runs(gw_factory(session), run_repo, [run_id])
                    session.commit()
                except Exception as exc:  # the requeued job runs again later; the stray run is harmless
                    session.rollback()
                    errors = [str(exc)]
                result.errors.extend(errors)
        result.preempted.clear()
        for claim in claims:
            with session_factory() as session:
                try:
                    dispatch_claim(session, gw_factory(session), claim, settings, result)
                    session.commit()
                except Exception as exc:
                    # Leave the jobs dispatched: the repair poll finds the run by name or re-queues.
                    session.rollback()
                    log.exception("dispatch_error", run_name=claim.run_name)
                    result.errors.append(f"{claim.run_name}: {exc}")
    if result.dispatched_runs or result.reused:
        log.info(
            "scheduler_tick",
            dispatched=result.dispatched_jobs,
            runs=result.dispatched_runs,
            reused=result.reused,
            skipped=result.skipped_labels,
        )
    return result
