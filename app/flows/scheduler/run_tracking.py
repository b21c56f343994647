"""Following our runs: fold workflow_run / workflow_job (webhook or REST) into jobs' states."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.clock import utcnow
from app.core.failures import Failure, FailureClass, Policy
from app.core.routing import HandlerContext, HandlerSkipped, Router, TransientError
from app.core.runmatch import (
    assign_jobs,
    classify_failure,
    has_benchmark_jobs,
    job_matches_point,
    parse_job_name,
    run_name_in_title,
)
from app.core.unexpanded_jobs import MatrixDefect, covering
from app.flows.scheduler.unexpanded import end_not_run, foreseen, note_eval_not_run, run_defects
from app.flows.sweeps.cancel import CancelGateway, cancel_runs
from app.flows.sweeps.job_finish import finish_job
from app.flows.sweeps.label_runs import adopt_label_run, drop_label_run, label_sweeps_for_run
from app.flows.sweeps.ring import collect_later, tick_later
from app.models.sweeps import JobState, Sweep, SweepJob
from app.settings import Settings, get_settings
from app.store.audit import record
from app.store.dispatchruns import adoptable, close_run, fold_run_job, follow_run
from app.store.jobs import dispatch_group, match_jobs, requeue
from app.store.reports import mark_report_dirty
from app.store.sweeps import sweep_mode

log = structlog.get_logger(__name__)

router = Router()  # this capability's webhook handlers (app/flows/ingest/handlers.py composes them)

BOT = "sweepbot"


class TrackingGateway(CancelGateway, Protocol):
    """What following runs uses: a run's jobs, a failed job's annotations, cancelling a run."""

    def list_run_jobs(self, repo: str, run_id: int) -> list[dict[str, Any]]: ...
    def list_check_run_annotations(self, repo: str, check_run_id: int) -> list[dict[str, Any]]: ...


def failure_of(gw: TrackingGateway | None, repo: str, wf_job: dict[str, Any]) -> Any:
    """Why a finished workflow job failed (runmatch.Failure), from its check-run annotations.

    On GitHub a job's check run has the job's id; a lost runner is only said there.
    """
    annotations: list[dict[str, Any]] = []
    if gw is not None and wf_job.get("id") is not None and repo:
        try:
            annotations = gw.list_check_run_annotations(repo, int(wf_job["id"]))
        except TransientError:
            raise
        except Exception as exc:  # an unreadable annotation list must not lose the job's state
            log.warning("annotations_unreadable", job=wf_job.get("id"), error=str(exc))
    return classify_failure(
        annotations, conclusion=str(wf_job.get("conclusion") or ""), steps=wf_job.get("steps") or []
    )


def _job_for_wf_job(
    session: Session, gw: TrackingGateway | None, jobs: Sequence[SweepJob], wf_job: dict[str, Any]
) -> SweepJob | None:
    """Our job (of ``jobs``, the ones dispatched into this run) that a workflow job runs.

    By the real job-name format (app.core.runmatch). e2e-tests.yml's names carry no seq-len, and a
    run holds more than the jobs we follow in it under the same names: the points the sweep
    filtered out (test-config selects by conc only), and on a retry the siblings that succeeded in
    the first run. A job knows its place among its run's jobs of its name (``matrix_rank`` of
    ``matrix_twins``, app.core.dispatchjobs); one stored before that is told apart among every
    point the dispatch's group holds (``dispatch_group``) by matrix order.
    """
    parsed = parse_job_name(str(wf_job.get("name") or ""))
    if parsed is None:
        return None  # get-jobs, collect-results, ...: not a benchmark job
    ours = [j for j in jobs if job_matches_point(parsed, j.point)]
    if not ours:
        return None
    if all(j.matrix_twins is not None for j in ours):
        if len(ours) == 1 and ours[0].matrix_twins == 1:
            return ours[0]  # the only job of its name in the run
        hits = ours
    else:
        hits = [j for j in dispatch_group(session, jobs) if job_matches_point(parsed, j.point)]
        if len(hits) <= 1:
            return ours[0]
    if gw is None or wf_job.get("run_id") is None:
        return None
    run_jobs = run_job_list(gw, sweep_repo(session, hits[0]), wf_job)
    assigned = assign_jobs(run_jobs, [j.point for j in hits], [j.matrix_rank for j in hits])
    for index, got in assigned.items():
        if got.get("id") == wf_job.get("id"):
            return hits[index] if hits[index] in ours else None
    return None


RUN_JOBS_CACHED = 256
_run_jobs: OrderedDict[tuple[str, int, int], list[dict[str, Any]]] = OrderedDict()
_run_jobs_lock = threading.Lock()


def run_job_list(gw: TrackingGateway, repo: str, wf_job: dict[str, Any]) -> list[dict[str, Any]]:
    """The jobs of ``wf_job``'s run in matrix order, read once per run attempt and process.

    Only names and order are used (``assign_jobs``), and they do not change within an attempt, so
    every later event of the run is told apart without a call; a list that does not hold this job
    under its name (a new attempt, another run) is read again.
    """
    key = (repo, int(wf_job["run_id"]), int(wf_job.get("run_attempt") or 1))
    with _run_jobs_lock:
        cached = _run_jobs.get(key)
        if cached is not None and any(
            j.get("id") == wf_job.get("id") and j.get("name") == wf_job.get("name") for j in cached
        ):
            _run_jobs.move_to_end(key)
            return cached
    fresh = gw.list_run_jobs(repo, key[1])
    with _run_jobs_lock:
        _run_jobs[key] = fresh
        while len(_run_jobs) > RUN_JOBS_CACHED:
            _run_jobs.popitem(last=False)
    return fresh


def clear_run_jobs_cache() -> None:
    with _run_jobs_lock:
        _run_jobs.clear()


def retry_or_fail(session: Session, job: SweepJob, why: str, settings: Settings) -> str:
    retries = job.attempts - 1  # the first dispatch is not a retry
    sweep = session.get(Sweep, job.sweep_id)
    if sweep is not None and sweep_mode(sweep) == "label":
        # The repo's run, not ours: re-dispatching through e2e-tests.yml would be both modes.
        finish_job(
            session,
            job.id,
            JobState.FAILED,
            reason=f"infrastructure failure in the repo's sweep run (label mode does not re-run it; "
            f"re-run the failed job there or re-add the sweep label): {why}",
        )
        return "failed"
    if retries < settings.infra_retry_limit:
        record(
            session,
            actor=BOT,
            action="sweep.infra_retry",
            target=job.run_name,
            detail={"job": job.id, "run_id": job.run_id, "reason": why, "attempt": job.attempts},
        )
        requeue(job, f"infrastructure failure, retry {retries + 1}/{settings.infra_retry_limit}: {why}")
        mark_report_dirty(session, job.sweep_id)
        return "requeued"
    finish_job(
        session,
        job.id,
        JobState.FAILED,
        reason=f"infrastructure failure after {job.attempts} attempt(s): {why}",
    )
    return "failed"


def apply_workflow_job(
    session: Session,
    wf_job: dict[str, Any],
    *,
    after_commit: list[Callable[[], None]],
    settings: Settings | None = None,
    gw: TrackingGateway | None = None,
) -> bool:
    """Fold one ``workflow_job`` (webhook or REST shape) into our job; True when something changed.

    ``gw`` reads the failed job's check-run annotations (and, rarely, the run's job list).
    """
    settings = settings or get_settings()
    run_id = wf_job.get("run_id")
    if run_id is None:
        return False
    counted = fold_run_job(session, wf_job)  # every job of a run we follow holds a runner, ours or not
    if counted and wf_job.get("status") == "completed":
        after_commit.append(tick_later)  # a runner is free (a sibling's too): waiting work may go
    job = _job_for_wf_job(session, gw, match_jobs(session, int(run_id), None), wf_job)
    if job is None or job.run_id != int(run_id):
        return counted
    status, conclusion = wf_job.get("status"), wf_job.get("conclusion")
    now = utcnow()
    if job.state in JobState.FINAL:
        return counted
    if status == "in_progress" and job.state == JobState.DISPATCHED:
        job.state, job.started_at, job.updated_at = JobState.RUNNING, now, now
        mark_report_dirty(session, job.sweep_id)
        return True
    if status != "completed":
        return counted
    if conclusion == "success":
        if job.run_conclusion != "success":
            job.run_conclusion, job.updated_at = "success", now
            job.started_at = job.started_at or now
            job.state = JobState.RUNNING  # until collection stores the result
            if not waits_for_run(job):
                after_commit.append(collect_later(job.id))
            after_commit.append(tick_later)
            mark_report_dirty(session, job.sweep_id)
            return True
        return counted
    job.run_conclusion = str(conclusion)
    fold_failure(session, job, failure_of(gw, sweep_repo(session, job), wf_job), wf_job, settings)
    after_commit.append(tick_later)
    return True


def waits_for_run(job: SweepJob) -> bool:
    """Whether ``job`` is collected once its run completes rather than when its own job succeeds:
    a point that also runs an eval (``run-eval``, not ``eval-only``). e2e-tests.yml (and
    run-sweep.yml) run that eval as a job of its own (`eval /`, `eval-only: true`; the throughput
    job passes `run-eval: false`), so its `eval_` artifact is uploaded by another job, which may
    end after the throughput job; the run completes only when both have. When GitHub never
    created that eval job (the real e2e-tests.yml's `eval /` matrix does not evaluate,
    ``app.core.unexpanded_jobs``), the point is collected for its throughput and says why it has no
    eval."""
    point = job.point if isinstance(job.point, dict) else {}
    return bool(point.get("run-eval")) and not point.get("eval-only")


def _failed_eval_job(wf_jobs: Sequence[dict[str, Any]], job: SweepJob) -> dict[str, Any] | None:
    """The completed, not successful `eval /` job of ``job``'s point among a run's jobs, if any."""
    for wf_job in wf_jobs:
        parsed = parse_job_name(str(wf_job.get("name") or ""))
        if (
            parsed is not None
            and wf_job.get("status") == "completed"
            and wf_job.get("conclusion") != "success"
            and job_matches_point(parsed, job.point, eval_job=True)
        ):
            return wf_job
    return None


def fold_failure(
    session: Session, job: SweepJob, failure: Failure, wf_job: dict[str, Any], settings: Settings
) -> None:
    """A workflow job of ours that did not succeed, handled by its class's policy
    (app.core.failures.POLICY): retried on another runner (the machine failed), left cancelled
    (cancelled through the API or the UI: whoever did wanted the runner back), never retried (the
    workflow's defect: every run fails the same way), or failed and reported (the benchmark's own
    failure, for a person to fix)."""
    url = wf_job.get("html_url") or job.run_url
    policy = failure.policy
    if policy is Policy.RETRY_ELSEWHERE:
        runner = wf_job.get("runner_name") or "the runner"
        retry_or_fail(session, job, f"{runner}: {failure.message}", settings)
    elif policy is Policy.NEVER_RETRY:
        reason = f"workflow defect, not retried (fix the workflow): {failure.message} (see {url})"
        finish_job(session, job.id, JobState.FAILED, reason=reason)
    elif policy is Policy.LEAVE:
        finish_job(session, job.id, JobState.CANCELLED, reason=cancelled_reason(failure.message, url))
    else:
        what = "benchmark" if failure.kind is FailureClass.BENCHMARK else f"{failure.kind} failure:"
        conclusion = wf_job.get("conclusion")
        finish_job(
            session, job.id, JobState.FAILED, reason=f"{what} {conclusion}: {failure.message} (see {url})"
        )


def cancelled_reason(said: str, url: Any) -> str:
    return f"{said}, not by sweepbot: not re-run (retry it from the dashboard to run it again; see {url})"


def apply_workflow_run(
    session: Session,
    gw: TrackingGateway | None,
    run: dict[str, Any],
    *,
    after_commit: list[Callable[[], None]],
    settings: Settings | None = None,
) -> bool:
    """Fold one ``workflow_run`` (webhook or REST shape) into our jobs; True when something changed."""
    settings = settings or get_settings()
    run_id = int(run["id"])
    changed = False
    if run.get("status") == "completed" and close_run(session, run_id, f"run {run.get('conclusion')}"):
        changed = True
        after_commit.append(tick_later)  # its runners are free, siblings of ours included
    # `name` is the workflow's name; the run's own title (run-name) is `display_title`.
    jobs = match_jobs(session, run_id, run_name_in_title(str(run.get("display_title") or "")))
    if not jobs:
        return changed
    now = utcnow()
    adopted = adoptable(session, run, jobs)
    for job in adopted:  # found by name: adopt the run
        job.run_id, job.run_url, changed = run_id, run.get("html_url"), True
    if adopted and not is_label_job(session, adopted[0]):
        follow_run(session, adopted, run_id, sweep_repo(session, adopted[0]))
        if run.get("status") == "completed":
            close_run(session, run_id, f"run {run.get('conclusion')}")
    live = [j for j in jobs if j.state not in JobState.FINAL and j.run_id == run_id]
    if run.get("status") != "completed":
        cancelled = [j for j in jobs if j.state == JobState.CANCELLED and j.run_id == run_id]
        # A cancel that did not take is asked again; one GitHub refused (run_cancel_refused) is
        # not: it would be refused again, one POST per event of the run until it ends.
        if cancelled and not live and gw is not None and not any(j.run_cancel_refused for j in cancelled):
            cancel_runs(gw, sweep_repo(session, jobs[0]), [run_id], session)
        if run.get("status") == "in_progress":
            for job in live:
                if job.state == JobState.DISPATCHED:
                    job.state, job.started_at, job.updated_at = JobState.RUNNING, now, now
                    mark_report_dirty(session, job.sweep_id)
                    changed = True
        return changed
    if not live:
        return changed
    wf_jobs: list[dict[str, Any]] | None = None
    label_jobs = [j for j in live if is_label_job(session, j)]
    if label_jobs:
        wf_jobs = _label_run_jobs(session, gw, run, label_jobs)
        if wf_jobs is None:  # not the run that runs this sweep: dropped, the next one is followed
            return True
    return _run_completed(session, gw, run, live, wf_jobs, after_commit, settings) or changed


def _label_run_jobs(
    session: Session, gw: TrackingGateway | None, run: dict[str, Any], label_jobs: list[SweepJob]
) -> list[dict[str, Any]] | None:
    """A completed repo run that label-mode jobs follow: its jobs, or None when it is not the run
    that runs the sweep (and the jobs were let go of it, to follow the next one)."""
    run_id = int(run["id"])
    sweep = session.get(Sweep, label_jobs[0].sweep_id)
    if sweep is None:
        return []
    if run.get("conclusion") == "cancelled":
        # run-sweep.yml cancels a PR's older run when a newer one starts (its concurrency group):
        # follow the next run instead of reading the cancel as the benchmark's failure.
        drop_label_run(
            session, sweep, label_jobs, run_id, f"the repo cancelled its run {run_id}", ignore=False
        )
        return None
    wf_jobs = gw.list_run_jobs(sweep.repo, run_id) if gw is not None else None
    if wf_jobs is not None and not has_benchmark_jobs(wf_jobs):
        # e.g. the run a push to the PR started before it had the sweep label: run-sweep.yml's
        # check-changelog ran, its setup (and so every benchmark job) was skipped.
        drop_label_run(
            session, sweep, label_jobs, run_id, f"the repo's run {run_id} ran no benchmark job", ignore=True
        )
        return None
    return wf_jobs


def _run_completed(
    session: Session,
    gw: TrackingGateway | None,
    run: dict[str, Any],
    live: list[SweepJob],
    wf_jobs: list[dict[str, Any]] | None,
    after_commit: list[Callable[[], None]],
    settings: Settings,
) -> bool:
    """A completed run: success frees the runners and collects; otherwise each job's own outcome.

    A run that did not succeed is read (its jobs; the annotations of a caller job GitHub failed
    unexpanded, ``app.flows.scheduler.unexpanded``) only when a job of ours still waits on it and the sweep's
    prediction does not explain why: at InferenceX 843c6254 every run fails (its `eval /` matrix
    never evaluates) though its benchmarks succeed, as the workflow file said (``foreseen``).
    """
    run_id, conclusion, now = int(run["id"]), run.get("conclusion"), utcnow()
    by_job: dict[int, dict[str, Any]] = {}
    defects: list[MatrixDefect] = []
    waiting = [j for j in live if not _collecting(j)]
    unread = conclusion != "success" and wf_jobs is None and waiting
    explained = foreseen(session, run_id, [(j, _on_eval(j)) for j in waiting]) if unread else None
    if explained is not None:
        for job, defect in explained:  # no GitHub call: the file said so when the sweep was planned
            if _on_eval(job):
                note_eval_not_run(session, job, defect)
                after_commit.append(collect_later(job.id))
            else:
                end_not_run(session, job, defect)
        after_commit.append(tick_later)
        return True
    if conclusion != "success" and gw is not None and waiting:
        repo = sweep_repo(session, live[0])
        if wf_jobs is None:
            wf_jobs = gw.list_run_jobs(repo, run_id)
        # every point of the dispatch takes its place in matrix order, ours or not (a retry's run
        # holds siblings that succeeded before, and every run the points the sweep filtered out)
        ordered = dispatch_group(session, live)
        ranks = [j.matrix_rank for j in ordered]
        for index, got in assign_jobs(wf_jobs, [j.point for j in ordered], ranks).items():
            by_job[ordered[index].id] = dict(got)
        if any(_missing_job(j, by_job.get(j.id), wf_jobs) for j in waiting):
            defects = run_defects(gw, repo, wf_jobs)
    changed = False
    for job in waiting:
        wf_job = by_job.get(job.id)
        if waits_for_run(job) and _succeeded(wf_job) and job.run_conclusion != "success":
            job.run_conclusion, job.state, job.updated_at = "success", JobState.RUNNING, now
            job.started_at = job.started_at or now  # its throughput job's event never came
        if job.run_conclusion == "success" and job.state == JobState.RUNNING and waits_for_run(job):
            seen = wf_jobs if conclusion != "success" else None
            if _settle_with_eval(session, gw, job, seen, defects, settings):
                after_commit.append(collect_later(job.id))  # its eval job is done too: every artifact is in
            after_commit.append(tick_later)
            changed = True
        elif conclusion == "success":
            job.run_conclusion, job.state, job.updated_at = "success", JobState.RUNNING, now
            job.started_at = job.started_at or now
            after_commit.append(collect_later(job.id))
            mark_report_dirty(session, job.sweep_id)
            changed = True
        elif wf_job is not None and wf_job.get("status") == "completed":
            changed |= _apply_assigned(session, gw, job, {**wf_job, "run_id": run_id}, after_commit, settings)
        else:
            _no_job(
                session,
                job,
                run,
                covering(defects, job.point, eval_job=bool(job.point.get("eval-only"))),
                settings,
            )
            after_commit.append(tick_later)
            changed = True
    return changed


def _settle_with_eval(
    session: Session,
    gw: TrackingGateway | None,
    job: SweepJob,
    wf_jobs: list[dict[str, Any]] | None,
    defects: Sequence[MatrixDefect],
    settings: Settings,
) -> bool:
    """A point whose throughput succeeded, once its run is done (``waits_for_run``): its eval job
    failed (folded: a lost runner is retried like any other), was never created (collected for its
    throughput, saying why), or is done (collected with its eval). True when it is to be collected.
    ``wf_jobs``: None for a run that succeeded (nothing to look at)."""
    failed = _failed_eval_job(wf_jobs, job) if wf_jobs is not None else None
    if failed is not None:
        fold_failure(session, job, failure_of(gw, sweep_repo(session, job), failed), failed, settings)
        return False
    if wf_jobs is not None and _missing_job(job, None, wf_jobs):
        defect = covering(defects, job.point, eval_job=True)
        if defect is not None:
            note_eval_not_run(session, job, defect)
    return True


def _no_job(
    session: Session, job: SweepJob, run: Mapping[str, Any], defect: MatrixDefect | None, settings: Settings
) -> None:
    """A run that did not succeed holds no finished job for ``job``'s point."""
    run_id, conclusion = run.get("id"), run.get("conclusion")
    if defect is not None:  # GitHub never created it: the workflow's defect, not retried
        end_not_run(session, job, defect)
    elif conclusion == "startup_failure":
        retry_or_fail(session, job, "run startup_failure", settings)
    elif conclusion == "cancelled":
        # Our own cancels never get here (their jobs are final or re-queued first).
        reason = cancelled_reason(f"run {run_id} cancelled on GitHub", run.get("html_url"))
        finish_job(session, job.id, JobState.CANCELLED, reason=reason)
    else:
        finish_job(
            session,
            job.id,
            JobState.FAILED,
            reason=f"run {conclusion} without a job for this point: see {run.get('html_url')}",
        )


def _succeeded(wf_job: Mapping[str, Any] | None) -> bool:
    return (
        wf_job is not None and wf_job.get("status") == "completed" and wf_job.get("conclusion") == "success"
    )


def _collecting(job: SweepJob) -> bool:
    """Its own workflow job succeeded and nothing else of the run is waited for: collection is
    queued (``apply_workflow_job``), whatever the run concluded."""
    return job.run_conclusion == "success" and job.state == JobState.RUNNING and not waits_for_run(job)


def _on_eval(job: SweepJob) -> bool:
    """Its throughput succeeded and it waits on its run for its eval job only."""
    return waits_for_run(job) and job.run_conclusion == "success" and job.state == JobState.RUNNING


def _missing_job(
    job: SweepJob, own: Mapping[str, Any] | None, wf_jobs: Sequence[Mapping[str, Any]] | None
) -> bool:
    """Whether the run holds no job for what ``job`` still waits on: its eval job (a point whose
    throughput succeeded and whose eval runs apart), else its own job (``own``: the one assigned)."""
    if waits_for_run(job) and (job.run_conclusion == "success" or _succeeded(own)):
        return not any(
            (name := parse_job_name(str(w.get("name") or ""))) is not None
            and job_matches_point(name, job.point, eval_job=True)
            for w in wf_jobs or []
        )
    return own is None


def _apply_assigned(
    session: Session,
    gw: TrackingGateway | None,
    job: SweepJob,
    wf_job: dict[str, Any],
    after_commit: list[Callable[[], None]],
    settings: Settings,
) -> bool:
    """A completed workflow job already matched to ``job`` (by the run's job list)."""
    if job.state in JobState.FINAL:
        return False
    if wf_job.get("conclusion") == "success":
        if job.run_conclusion == "success":
            return False
        now = utcnow()
        job.run_conclusion, job.state, job.updated_at = "success", JobState.RUNNING, now
        job.started_at = job.started_at or now
        after_commit.append(collect_later(job.id))
        mark_report_dirty(session, job.sweep_id)
        return True
    job.run_conclusion = str(wf_job.get("conclusion"))
    fold_failure(session, job, failure_of(gw, sweep_repo(session, job), wf_job), wf_job, settings)
    after_commit.append(tick_later)
    return True


def is_label_job(session: Session, job: SweepJob) -> bool:
    sweep = session.get(Sweep, job.sweep_id)
    return sweep is not None and sweep_mode(sweep) == "label"


def sweep_repo(session: Session, job: SweepJob) -> str:
    sweep = session.get(Sweep, job.sweep_id)
    return sweep.repo if sweep is not None else ""


class LazyGateway:
    """The handler's gateway, made only when a call needs it (most job events need none)."""

    def __init__(self, ctx: HandlerContext[Session, TrackingGateway]) -> None:
        self._ctx = ctx
        self._gw: TrackingGateway | None = None

    def __getattr__(self, name: str) -> Any:
        if self._gw is None:
            self._gw = self._ctx.gateway()
        return getattr(self._gw, name)


@router.register("workflow_job")
def on_workflow_job(ctx: HandlerContext[Session, TrackingGateway]) -> None:
    wf_job = ctx.event.payload.get("workflow_job") or {}
    if not isinstance(wf_job, dict) or not apply_workflow_job(
        ctx.session, wf_job, after_commit=ctx.after_commit, gw=LazyGateway(ctx)
    ):
        raise HandlerSkipped("not a job of ours, or nothing new")


@router.register("workflow_run")
def on_workflow_run(ctx: HandlerContext[Session, TrackingGateway]) -> None:
    run = ctx.event.payload.get("workflow_run") or {}
    if not isinstance(run, dict) or "id" not in run:
        raise HandlerSkipped("no workflow_run in the payload")
    adopted = False
    for sweep in label_sweeps_for_run(ctx.session, run):
        adopted |= adopt_label_run(ctx.session, sweep, run)
    if (
        not adopted
        and run_name_in_title(str(run.get("display_title") or "")) is None
        and ctx.session.scalars(select(SweepJob.id).where(SweepJob.run_id == int(run["id"]))).first() is None
    ):
        raise HandlerSkipped("not a sweepbot run")
    if not apply_workflow_run(ctx.session, ctx.gateway(), run, after_commit=ctx.after_commit):
        raise HandlerSkipped("nothing new for our jobs")
