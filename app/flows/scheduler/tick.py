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
  run by the unique run name ``sweepbot-<sweep id>-<job id>`` (``-a<attempt>`` on a retry), or
  re-queues it when no run exists.
  So a job is never dispatched twice by two ticks, and never lost.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Protocol

import structlog
from sqlalchemy.orm import Session, sessionmaker

from app.core.clock import aware, utcnow
from app.core.release_plan import CanaryHours, QueuedJob, Release, SweepQueue, plan_release_prefix
from app.core.release_policy import AUTO, CanaryRun, LabelView, Overcommit, fits_nothing, pick_preemptions
from app.core.routing import TransientError
from app.core.runmatch import attempt_run_name
from app.flows.repo.bench_repo import RepoFiles, label_capacity
from app.flows.scheduler.canary_budget import canary_budget, note_preempted_hours
from app.flows.scheduler.dispatch import Claimed, DispatchGateway, TickResult, dispatch_claim
from app.flows.scheduler.runner_control import VariableGateway, contract_on_cached
from app.flows.sweeps.cancel import CancelGateway, cancel_runs
from app.models.sweeps import CANARY_REASON, JobState, Sweep, SweepJob
from app.settings import get_settings
from app.store import reuse
from app.store.audit import record
from app.store.dispatchruns import close_run, reopen_run
from app.store.jobs import (
    QueuedOnLabel,
    QueuedRow,
    claim_group,
    inflight_slots,
    job_points,
    jobs_by_id,
    labels_with_work,
    narrowest_queued,
    next_attempt,
    queued_on_label,
    real_waiting_slots,
    requeue,
    running_canaries,
    sweeps_in_serving_order,
)
from app.store.reports import mark_report_dirty
from app.store.reuse import result_link
from app.store.runnerlabels import ensure_label, lock_label
from app.store.sweeps import maybe_finish_sweep

log = structlog.get_logger(__name__)

BOT = "sweepbot"


class TickGateway(RepoFiles, DispatchGateway, CancelGateway, VariableGateway, Protocol):
    """What a tick uses: runner capacity (runners.yaml), the dispatch, cancelling the runs of
    preempted canaries, and the repo variable saying whether the runner-label contract is on."""


# With the contract on (PRIORITY_SCHEDULER_ENABLED), the bot's dispatches go out when asked and
# queue at GitHub like every other job: the priority controller (app/flows/scheduler/runner_control.py)
# decides which runner takes which job and when. The dispatch-time hold stays for repos without it.
UNHELD = 1_000_000


GatewayFactory = Callable[[Session], TickGateway]


def _canary_hours(session: Session, repo: str) -> CanaryHours:
    """``repo``'s canary runner-hours this week (used, budget, what one canary takes)."""
    usage = canary_budget(session, repo)
    return CanaryHours(usage.used_hours, usage.budget_hours, usage.expected_job_hours)


def _preempt_canaries(
    session: Session, label: str, capacity: int, in_flight: int, result: TickResult
) -> bool:
    """Put back in the queue the canary runs that stand in the way of waiting real work."""
    by_run = running_canaries(session, label)  # few, and none most of the time: asked first
    if not by_run:
        return False
    real_waiting = real_waiting_slots(session, label)
    if real_waiting == 0 or capacity - in_flight >= min(real_waiting, capacity):
        return False
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
            requeue(job, f"preempted by real work waiting on {label}", refund=True)
        if run_id is not None:
            result.preempted.append((sweep0.repo, int(run_id)))
            # Cancelled right after this commit: its runners go to the waiting real work in this
            # tick (a cancel takes seconds; waiting a tick for its confirmation would idle them).
            close_run(session, int(run_id), "preempted: cancelled by the bot for real work")
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


def _preempt_failed(session: Session, run_id: int, error: str) -> None:
    """A preempted canary's run was not cancelled (GitHub refused, or did not answer): it goes on,
    so its runners count again until GitHub says it completed (the preemption closed it to give
    them to the waiting real work in the same tick). Not asked again: its jobs are back in the
    queue, so nothing holds the intent; ``error`` says whether GitHub refused."""
    reopen_run(session, run_id)
    record(
        session,
        actor=BOT,
        action="canary.preempt_failed",
        target=str(run_id),
        outcome="failed",
        detail={"run_id": run_id, "error": error},
    )


def _queue(sweep: Sweep, queued: list[QueuedRow], known: dict[int, Any]) -> SweepQueue:
    """A sweep's queued jobs as the release plan reads them (``known``: reuse lookups so far)."""
    return SweepQueue(
        sweep_id=sweep.id,
        priority=sweep.priority,
        jobs=tuple(
            QueuedJob(
                j.job_id, j.group_key, j.slots, (known[j.job_id] is not None) if j.job_id in known else None
            )
            for j in queued
        ),
        canary=sweep.reason == CANARY_REASON,
        repo=sweep.repo,
    )


def _look_up(
    session: Session, rows: list[QueuedRow], sweeps: dict[int, Sweep], known: dict[int, Any]
) -> None:
    """Whether a stored result answers each of ``rows`` (into ``known``), in a few queries for all."""
    points = job_points(session, [r.job_id for r in rows])
    lookups = [
        reuse.PointLookup(
            sweeps[r.sweep_id].image, sweeps[r.sweep_id].fingerprint, points[r.job_id][0], points[r.job_id][1]
        )
        for r in rows
    ]
    known.update(zip((r.job_id for r in rows), reuse.reusable_for_points(session, lookups), strict=True))


def _plan(
    session: Session,
    label: str,
    queue: QueuedOnLabel,
    capacity: int,
    in_flight: int,
    overcommit: Overcommit = 0,
    known: dict[int, Any] | None = None,
    narrowest: int | None = None,
) -> tuple[list[Release], dict[int, Any], bool]:
    """Plan the label's releases, looking up reuse for each job the plan reaches (``plan_release``);
    ``known``: lookups made already (the tick plans again over a longer read); ``narrowest``: the
    narrowest job queued on the label (None: of ``queue``, the whole queue). The third value: the
    plan went past the last sweep read (``plan_release_prefix``)."""
    rows, sweeps = queue.rows, queue.sweeps
    by_id = {row.job_id: row for row in rows}
    hours = {s.repo: _canary_hours(session, s.repo) for s in sweeps.values() if s.reason == CANARY_REASON}
    known = {} if known is None else known  # job id -> the stored result that answers it, or None
    # Each sweep's first job is reached in the plan's first round: looked up up front, all at once,
    # so the plan is made once or twice, not once per sweep (a long queue made the tick quadratic);
    # after a lookup only that sweep's queue is made again.
    per_sweep: dict[int, list[QueuedRow]] = {}  # in serving order
    for row in rows:
        per_sweep.setdefault(row.sweep_id, []).append(row)
    _look_up(session, [q[0] for q in per_sweep.values() if q[0].job_id not in known], sweeps, known)
    queues = {sid: _queue(sweeps[sid], queued, known) for sid, queued in per_sweep.items()}
    while True:
        plan, past_last = plan_release_prefix(
            list(queues.values()),
            capacity,
            in_flight,
            label=label,
            canary_hours=hours,
            overcommit=overcommit,
            narrowest=narrowest,
        )
        if not plan or plan[-1].action != "check":
            return plan, known, past_last
        asked = by_id[plan[-1].job_ids[0]]
        _look_up(session, [asked], sweeps, known)
        queues[asked.sweep_id] = _queue(sweeps[asked.sweep_id], per_sweep[asked.sweep_id], known)


def _reached_unread(plan: list[Release], queue: QueuedOnLabel) -> bool:
    """Did the plan, over what was read, reach a sweep's jobs that were not read? A sweep's next job
    is its first by position, so it did if it used up what was read of a sweep, or took up a job
    placed after that sweep's first unread one (stored results answered the jobs in between)."""
    position = {row.job_id: row.position for row in queue.rows}
    read: dict[int, int] = {}
    for row in queue.rows:
        read[row.sweep_id] = read.get(row.sweep_id, 0) + 1
    used: dict[int, int] = {}
    for step in plan:
        if step.sweep_id not in queue.unread:
            continue
        # a backfill reaches past a sweep's next groups on purpose, and only into what was read
        if not step.backfill and position[step.job_ids[0]] > queue.unread[step.sweep_id]:
            return True
        if step.action in ("reuse", "dispatch"):
            used[step.sweep_id] = used.get(step.sweep_id, 0) + len(step.job_ids)
    return any(used.get(sid, 0) >= read[sid] for sid in queue.unread)


# Sweeps read at first (in serving order): this many, and as many more as free slots (a plan serves
# a sweep a turn and each release takes a slot). When the plan goes past them (held heads, reused
# or finished sweeps) every sweep is read: then the plan reaches most of them (with room left that
# a narrow job queued somewhere fits, it holds every sweep in turn until it reaches one), and a
# second, larger page cost more than it saved (docs/benchmarks.md, "Tick").
FIRST_SWEEPS = 8


def _planned(
    session: Session, label: str, capacity: int, in_flight: int, overcommit: Overcommit = 0
) -> tuple[QueuedOnLabel, list[Release], dict[int, Any]]:
    """The plan over the sweeps it can reach and, of each, the dispatch groups the free slots
    reach; or over the whole queue when those did not suffice.

    Sweeps are read in serving order (``sweeps_in_serving_order``), a page of them, and the plan
    over them kept when it ends among them (nothing queued fits the room left:
    ``plan_release_prefix``), so a tick's cost follows what it can release, not the number of
    sweeps queued; past those, every sweep is read.
    Of each sweep, its groups go out in order while they fit (one wider than the label alone; with
    the ``"auto"`` overcommit, while one slot is free) and it is held at the first that does not,
    so those groups decide it, unless stored results answer a run of its heads
    (``_reached_unread``). A canary read with anything unread (its turn counts the real work queued
    behind every sweep) makes the tick read the whole queue.

    The plan ends once nothing queued fits the room left (``fits_nothing``, by the narrowest job
    queued on the label: one index row); when that holds from the start (a full label), no sweep is
    read at all."""
    view = LabelView(label, capacity, in_flight, overcommit=overcommit)
    # no free slot: nothing fits whatever is queued, and the narrowest is not even asked for
    narrowest = None if fits_nothing(view, 1) else narrowest_queued(session, label)
    if narrowest is None or fits_nothing(view, narrowest):
        return QueuedOnLabel([], {}, {}), [], {}
    known: dict[int, Any] = {}
    ids: list[int] = []
    for page in (FIRST_SWEEPS + max(0, view.room), None):  # None: every sweep
        every_sweep = page is None
        if page is not None:
            more = sweeps_in_serving_order(session, label, offset=len(ids), limit=page)
            ids += more
            every_sweep = len(more) < page
        queue = queued_on_label(
            session,
            label,
            free=view.room,
            auto_overcommit=overcommit == AUTO,
            sweeps=None if page is None else ids,
        )
        if any(s.reason == CANARY_REASON for s in queue.sweeps.values()) and (
            queue.unread or not every_sweep
        ):
            break
        plan, known, past_last = _plan(
            session, label, queue, capacity, in_flight, overcommit, known, narrowest
        )
        if past_last and not every_sweep:
            continue
        if not _reached_unread(plan, queue):
            return queue, plan, known
        log.info("tick_reads_whole_queue", label=label, why="the plan reached jobs of a sweep not read")
        break
    queue = queued_on_label(session, label)
    plan, known, _ = _plan(session, label, queue, capacity, in_flight, overcommit, known, narrowest)
    return queue, plan, known


def _claim_label(
    session: Session, gw: TickGateway, label: str, repo: str, result: TickResult
) -> list[Claimed]:
    """Under the label's lock: plan this label's releases (``app.core.release_plan``) and apply them."""
    row = lock_label(session, label)
    if row is None or row.paused:
        result.skipped_labels.append(label)
        return []
    capacity, source = label_capacity(gw, label, repo)
    row.capacity, row.capacity_source = capacity, source
    in_flight = inflight_slots(session, label)
    if _preempt_canaries(session, label, capacity, in_flight, result):
        in_flight = inflight_slots(session, label)
    # Jobs allowed to wait on GitHub for a runner (SWEEPBOT_RUNNER_OVERCOMMIT): decided by the
    # plan (app.core.release_policy); canaries are preempted for, and released onto, runners only.
    overcommit = UNHELD if contract_on_cached(gw, repo) else get_settings().runner_overcommit
    queue, plan, known = _planned(session, label, capacity, in_flight, overcommit)
    sweeps = queue.sweeps
    # Only the jobs the plan acts on are loaded whole (a head names its dispatch; a reuse is marked).
    jobs = jobs_by_id(session, [step.job_ids[0] for step in plan if step.action in ("reuse", "dispatch")])
    claimed: list[Claimed] = []
    token = uuid.uuid4().hex
    now = utcnow()
    reused_sweeps: dict[int, Sweep] = {}
    for step in plan:
        sweep = sweeps[step.sweep_id]
        if step.action == "reuse":
            job = jobs[step.job_ids[0]]
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
            job = jobs[step.job_ids[0]]
            # a retry's run gets a name of its own: the run it retries never passes for it
            run_name = attempt_run_name(step.run_name, next_attempt(session, ids))
            if claim_group(session, ids, token=token, run_name=run_name) != len(ids):
                # cannot happen under the label lock; refuse rather than double-run
                raise TransientError(f"label {label}: claim of jobs {ids} raced; retrying the tick")
            session.expire(job)  # the claim was a bulk UPDATE
            row.release_seq += 1
            sweep.last_release = row.release_seq
            claimed.append(_claimed(sweep, job, step, token, run_name))
            mark_report_dirty(session, sweep.id)
    for sweep in reused_sweeps.values():
        maybe_finish_sweep(session, sweep)
    return claimed


def _claimed(sweep: Sweep, head: SweepJob, step: Release, token: str, run_name: str) -> Claimed:
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
        run_name,
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
                    errors = cancel_runs(gw_factory(session), run_repo, [run_id], session)
                    if errors:
                        _preempt_failed(session, run_id, errors[0])
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
