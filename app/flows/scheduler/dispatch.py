"""Sending one claimed dispatch to GitHub, checked against the workflow the repo declares."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.adapters.github.errors import GitHubError
from app.core.clock import utcnow
from app.core.routing import TransientError
from app.core.runmatch import match_run
from app.core.sweepspec import (
    SweepError,
    dispatch_eval_flags,
    render_dispatch,
    row_concs,
)
from app.core.workflows import (
    WorkflowFileError,
    dispatch_problems,
    dispatch_title,
    parse_workflow,
    workflow_path,
)
from app.flows.sweeps.fork_approval import ApprovalGateway, void_stale_approval
from app.flows.sweeps.job_finish import finish_job
from app.models.sweeps import JobState, Sweep, SweepJob
from app.settings import Settings, SettingsError
from app.store.audit import record
from app.store.dispatchruns import follow_run, followed
from app.store.jobs import requeue
from app.store.reports import mark_report_dirty

log = structlog.get_logger(__name__)

BOT = "sweepbot"


class DispatchGateway(ApprovalGateway, Protocol):
    """What sending a dispatch uses: the workflow file, the dispatch, the run lookup (and get_pull)."""

    def get_file(self, repo: str, path: str, ref: str | None = None) -> tuple[str, str] | None: ...
    def dispatch_workflow(
        self, repo: str, workflow: str, ref: str, inputs: dict[str, str]
    ) -> dict[str, Any] | None: ...
    def list_workflow_runs(
        self, repo: str, workflow: str | None = None, **params: Any
    ) -> list[dict[str, Any]]: ...


@dataclass
class TickResult:
    dispatched_jobs: int = 0
    dispatched_runs: int = 0
    reused: int = 0
    voided: int = 0  # fork approvals voided by a new head sha
    failed: int = 0
    skipped_labels: list[str] = field(default_factory=list)  # locked by another tick, or paused
    errors: list[str] = field(default_factory=list)
    preempted: list[tuple[str, int]] = field(default_factory=list)  # canary runs to cancel (repo, run id)
    held: list[str] = field(default_factory=list)  # why a canary was not released (one per label)


@dataclass
class Claimed:
    sweep_id: int
    repo: str
    pr_number: int
    is_fork: bool
    approved_sha: str | None
    head_sha: str
    head_ref: str
    base_ref: str
    config_key: str
    run_name: str
    job_ids: list[int]
    seq: str
    conc: int
    tp: int
    token: str = ""  # this claim's token: only jobs still holding it are dispatched
    config_file: str = ""  # repo path of the master file holding the key


def workflow_name(settings: Settings) -> str | None:
    # A templated workflow file cannot be named without a point: search all of the repo's runs.
    return None if "{" in settings.dispatch_workflow else settings.dispatch_workflow


WORKFLOW_CACHE_SECONDS = 60.0


_workflow_cache: dict[tuple[str, str, str], tuple[float, Any]] = {}


def workflow_spec(gw: DispatchGateway, repo: str, workflow: str, ref: str) -> Any:
    """The target workflow as declared at ``ref`` (app.core.workflows.WorkflowSpec); SweepError if unusable.

    Cached for a minute per (repo, workflow, ref): a tick dispatching ten groups reads it once.
    """
    key = (repo, workflow, ref)
    hit = _workflow_cache.get(key)
    if hit is not None and time.monotonic() - hit[0] < WORKFLOW_CACHE_SECONDS:
        return hit[1]
    try:
        path = workflow_path(workflow)
        got = gw.get_file(repo, path, ref=ref)
        if got is None:
            raise SweepError(
                f"{repo} has no {path} at {ref}: set SWEEPBOT_DISPATCH_WORKFLOW to a workflow the repo has"
            )
        spec = parse_workflow(got[0], path)
    except WorkflowFileError as exc:
        raise SweepError(str(exc)) from exc
    _workflow_cache[key] = (time.monotonic(), spec)
    return spec


def check_dispatch(gw: DispatchGateway, repo: str, workflow: str, ref: str, inputs: dict[str, str]) -> str:
    """Validate ``inputs`` against the workflow's declared dispatch inputs; the run's expected title."""
    spec = workflow_spec(gw, repo, workflow, ref)
    problems = dispatch_problems(spec, inputs)
    if problems:
        raise SweepError(f"{workflow} at {ref} would refuse this dispatch: " + "; ".join(problems))
    return str(dispatch_title(spec, inputs))


def find_run(
    session: Session,
    gw: DispatchGateway,
    repo: str,
    workflow: str | None,
    title: str,
    claimed_at: datetime | None,
) -> dict[str, Any] | None:
    """Our dispatched run by its ``display_title`` (runmatch.match_run): never a run an earlier
    dispatch is bound to (one we follow), nor one created before this dispatch was claimed."""
    runs = gw.list_workflow_runs(repo, workflow, event="workflow_dispatch", limit=200)
    titled = [int(r["id"]) for r in runs if r.get("display_title") == title and isinstance(r.get("id"), int)]
    found = match_run(runs, display_title=title, claimed_at=claimed_at, bound=followed(session, titled))
    log.info("run_lookup", title=title, how=found.how, reason=found.reason)
    return dict(found.run) if found.run is not None else None


def dispatch_claim(
    session: Session, gw: DispatchGateway, claim: Claimed, settings: Settings, result: TickResult
) -> None:
    """Send one claimed dispatch, outside the claim's transaction; record its run (or why not)."""
    jobs = list(session.scalars(select(SweepJob).where(SweepJob.id.in_(claim.job_ids))).all())
    sweep = session.get(Sweep, claim.sweep_id)
    if sweep is None or any(j.state != JobState.DISPATCHED or j.claim != claim.token for j in jobs):
        # Cancelled between claim and dispatch, or cancelled, retried and claimed again by another
        # tick (which holds a newer token and dispatches it): nothing to send.
        return
    target = f"{claim.repo}#{claim.pr_number}"
    # Re-check just before the dispatch: a fork's approval binds the exact head sha.
    if claim.is_fork and void_stale_approval(session, gw, sweep, jobs, claim.approved_sha, claim.head_sha):
        result.voided += 1
        return
    try:
        workflow, ref, inputs = _render(claim, sweep, jobs, settings)
        # Checked against the workflow as the repo declares it at that ref, before any runner
        # time is asked for (GitHub would answer 422; a clear reason is better).
        title = check_dispatch(gw, claim.repo, workflow, ref, inputs)
    except (SweepError, SettingsError) as exc:
        _fail(
            session,
            jobs,
            target,
            result,
            f"cannot dispatch: {exc}",
            outcome="refused",
            detail={"sweep": claim.sweep_id, "jobs": claim.job_ids, "error": str(exc)},
        )
        return
    detail: dict[str, Any] = {
        "sweep": claim.sweep_id,
        "jobs": claim.job_ids,
        "run_name": claim.run_name,
        "workflow": workflow,
        "ref": ref,
        "inputs": inputs,
        "title": title,
    }
    try:
        claimed_at = min((j.dispatched_at for j in jobs if j.dispatched_at is not None), default=None)
        run = _send(
            gw,
            claim.repo,
            workflow,
            ref,
            inputs,
            lambda: find_run(session, gw, claim.repo, workflow, title, claimed_at),
        )
    except TransientError as exc:  # nothing sent, or sent and not found: the next tick sends it
        for job in jobs:
            requeue(job, f"dispatch failed, will retry: {exc}", refund=True)
        record(
            session,
            actor=BOT,
            action="sweep.dispatch",
            target=target,
            outcome="failed",
            detail={**detail, "error": str(exc)},
        )
        result.errors.append(str(exc))
        mark_report_dirty(session, claim.sweep_id)
        return
    except GitHubError as exc:
        _fail(
            session,
            jobs,
            target,
            result,
            f"dispatch refused: {exc}",
            outcome="failed",
            detail={**detail, "error": str(exc)},
        )
        return
    _record_run(session, jobs, run, target, detail, claim.repo)
    result.dispatched_runs += 1
    result.dispatched_jobs += len(jobs)
    mark_report_dirty(session, claim.sweep_id)


def _record_run(
    session: Session,
    jobs: Sequence[SweepJob],
    run: dict[str, Any] | None,
    target: str,
    detail: dict[str, Any],
    repo: str,
) -> None:
    """The dispatch went out: its run on every job (when known; else the repair poll finds it by name)."""
    now = utcnow()
    for job in jobs:
        if run is not None:
            job.run_id = int(run["workflow_run_id"])
            job.run_url = str(run.get("html_url") or run.get("run_url") or "") or None
        job.updated_at = now
    if run is not None and jobs:
        follow_run(session, jobs, int(run["workflow_run_id"]), repo)
    record(
        session,
        actor=BOT,
        action="sweep.dispatch",
        target=target,
        detail={**detail, "run_id": run.get("workflow_run_id") if run else None},
    )


def _render(
    claim: Claimed, sweep: Sweep, jobs: Sequence[SweepJob], settings: Settings
) -> tuple[str, str, dict[str, str]]:
    return render_dispatch(
        settings,
        key=claim.config_key,
        seq=claim.seq,
        conc=claim.conc,
        tp=claim.tp,
        head_sha=claim.head_sha,
        head_ref=claim.base_ref if claim.is_fork else claim.head_ref,
        base_ref=claim.base_ref,
        run_name=claim.run_name,
        pr=claim.pr_number,
        config_file=claim.config_file,
        evals=dispatch_eval_flags(
            [j.point for j in jobs if isinstance(j.point, dict)],
            str((sweep.filters or {}).get("evals") or "default"),
        ),
        concs=row_concs([j.point for j in jobs]),
    )


def _send(
    gw: DispatchGateway,
    repo: str,
    workflow: str,
    ref: str,
    inputs: dict[str, str],
    lookup: Callable[[], dict[str, Any] | None],
) -> dict[str, Any] | None:
    """POST the dispatch; its run as {workflow_run_id, html_url}, or None when it cannot be found yet.

    TransientError: the POST failed and no run with our title exists (safe to send again).
    """
    try:
        run = gw.dispatch_workflow(repo, workflow, ref, inputs)
        if run is not None:
            return run
        found = lookup()  # no run details in the answer: find it by title (``find_run``)
    except TransientError:
        # The POST may or may not have happened: look for the run before sending again.
        try:
            found = lookup()
        except TransientError:
            found = None
        if found is None:
            raise
    return {"workflow_run_id": found["id"], "html_url": found.get("html_url")} if found else None


def _fail(
    session: Session,
    jobs: Sequence[SweepJob],
    target: str,
    result: TickResult,
    reason: str,
    *,
    outcome: str,
    detail: dict[str, Any],
) -> None:
    for job in jobs:
        finish_job(session, job.id, JobState.FAILED, reason=reason)
    record(session, actor=BOT, action="sweep.dispatch", target=target, outcome=outcome, detail=detail)
    result.failed += len(jobs)
    result.errors.append(str(detail.get("error")))
