"""Requesting a sweep: plan a config key's points at the PR's head, queue them, and say what happens next."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.clock import aware
from app.core.dispatchjobs import DispatchJobs, plan_dispatch_jobs, with_dispatch_marks
from app.core.recipes import parse_master, recipe_fingerprint
from app.core.recipes.errors import RecipeError
from app.core.recipes.evals import parse_eval_mode, plan_with_evals
from app.core.recipes.master import get_entry
from app.core.recipes.matrix import Hardware
from app.core.recipes.scripts import script_candidates
from app.core.seqlen import SEQ_HINT, is_seq_filter
from app.core.sweepspec import (
    KEY_RE,
    SHA_RE,
    SweepError,
    SweepFilters,
    display_key,
    group_fields,
    point_conc,
    pr_heads,
    validate_repo,
)
from app.core.sweepway import SweepWay, choose_way, targeted_filters
from app.flows.repo.bench_repo import (
    RepoFiles,
    callers_of,
    eval_thresholds_at,
    label_capacity,
    runners_hardware_at,
    workflow_prediction_at,
)
from app.flows.repo.recipe_files import locate, read_master_configs
from app.flows.sweeps.cancel import CancelGateway
from app.flows.sweeps.create import create_sweep
from app.flows.sweeps.label_runs import LabelGateway, note_way, sweep_settings, trigger_label_run
from app.models.sweeps import PRIORITIES, JobState, Sweep, SweepJob, SweepState
from app.settings import get_settings

log = structlog.get_logger(__name__)


@dataclass
class SweepPlan:
    points: list[dict[str, Any]]
    runner_label: str
    capacity: int
    capacity_source: str
    jobs_ahead: int  # queued or in-flight slots on that label before this sweep
    expected_wait_seconds: float | None  # None when no finished job tells how long one takes
    reused: int = 0


@dataclass
class SweepRequest:
    sweep: Sweep
    plan: SweepPlan
    created: bool  # False when an identical active sweep was returned instead
    reply: str
    superseded: list[int] = field(default_factory=list)


class RequestGateway(RepoFiles, LabelGateway, CancelGateway, Protocol):
    """What requesting a sweep uses: the PR, the repo's files, its label (label mode), and run
    cancels (a superseded sweep's runs)."""

    def get_pull(self, repo: str, number: int) -> dict[str, Any]: ...


def priority_value(priority: str | int) -> int:
    if isinstance(priority, int):
        return priority
    if priority not in PRIORITIES:
        raise SweepError(f"priority {priority!r} is not one of {', '.join(PRIORITIES)}")
    return PRIORITIES[priority]


def request_sweep(
    session: Session,
    gw: RequestGateway,
    *,
    repo: str,
    pr_number: int,
    config_key: str,
    requested_by: str,
    reason: str,
    filters: SweepFilters | None = None,
    priority: str | int = "normal",
) -> SweepRequest:
    """Plan ``config_key`` at the PR's head and queue one job per point (see module docstring)."""
    _check_request(repo, config_key, reason, filters)
    prio = priority_value(priority)
    filters = filters or SweepFilters()
    pr = gw.get_pull(repo, pr_number)
    if pr.get("state") != "open":
        raise SweepError(f"{repo}#{pr_number} is {pr.get('state')}: sweeps run on open pull requests only")
    head_sha, head_ref, head_repo, base_ref, is_fork = pr_heads(pr, repo)
    if not SHA_RE.match(head_sha):
        raise SweepError(f"{repo}#{pr_number} has no usable head sha")
    # The PR's files live at its head sha (a fork's commits are reachable from the base repo).
    files = read_master_configs(gw, repo, head_sha)
    path = locate(files, config_key)
    # the dispatch runs the workflow as it is at the dispatched branch (a fork's: the base's)
    prediction = workflow_prediction_at(gw, repo, base_ref if is_fork else head_sha)
    try:
        master = parse_master(files[path])
        entry = get_entry(master, config_key)
        hardware = runners_hardware_at(gw, repo, head_sha, path)
        rows, matrix = _plan_points(master, config_key, filters, callers_of(prediction), hardware)
    except RecipeError as exc:
        raise SweepError(str(exc)) from exc
    way = sweep_way(session, gw, repo, pr, filters, is_fork, head_sha)
    sweep, created, superseded = create_sweep(
        session,
        gw,
        mode=way.mode,
        repo=repo,
        pr_number=pr_number,
        head_sha=head_sha,
        head_ref=head_ref,
        base_ref=base_ref,
        head_repo=head_repo,
        is_fork=is_fork,
        config_key=config_key,
        config_path=path,
        image=str(rows[0]["image"]) if rows else "",
        fingerprint=_fingerprint(gw, repo, head_sha, entry),
        points=rows,
        requested_by=requested_by,
        reason=reason,
        filters=filters,
        priority=prio,
        matrix=matrix,
        unexpanded=prediction,
    )
    if created:  # the gate its eval jobs apply: validate_scores.py runs in the head's checkout
        sweep.eval_thresholds = eval_thresholds_at(gw, repo, head_sha)
        note_way(sweep, way)
    if way.mode == "label":  # also for a replay: the trigger is idempotent (labelruns)
        trigger_label_run(session, gw, sweep, pr, sweep_settings(session, repo).label, way)
    plan = plan_for(session, gw, sweep)
    return SweepRequest(
        sweep=sweep, plan=plan, created=created, reply=reply_text(sweep, plan, created), superseded=superseded
    )


def _check_request(repo: str, config_key: str, reason: str, filters: SweepFilters | None) -> None:
    validate_repo(repo)
    if not KEY_RE.match(config_key):
        raise SweepError(f"config key {config_key!r} is malformed: use letters, digits, '.', '_' and '-'")
    if reason not in ("command", "bump", "api"):
        raise SweepError(f"reason {reason!r} must be command, bump or api")
    if filters is not None and filters.seq is not None and not is_seq_filter(filters.seq):
        raise SweepError(f"seq={filters.seq!r} is not a sequence-length name: {SEQ_HINT}")


def _plan_points(
    master: dict[str, Any],
    config_key: str,
    filters: SweepFilters,
    unexpanded: frozenset[str] = frozenset(),
    hardware: Hardware | None = None,
) -> tuple[list[dict[str, Any]], DispatchJobs]:
    """The sweep's points (with the repo's eval marks) and what its dispatches' runs hold
    (``unexpanded``: the workflow's matrix jobs GitHub never expands; ``hardware``: runners.yaml's
    `hardware:` at the head, which sizes a DRAM-offload point's `total-cpu-dram-gb` as the
    generator does).

    RecipeError when the master file cannot plan the key; SweepError when the filters match nothing.
    """
    mode = parse_eval_mode(filters.evals)
    rows = plan_with_evals(
        master,
        config_key,
        seq=filters.seq,
        conc=list(filters.conc) if filters.conc else None,
        tp=filters.tp,
        mode=mode,
        hardware=hardware,
    )
    if filters.conc_range is not None:
        lo, hi = filters.conc_range
        kept = [r for r in rows if lo <= point_conc(r) <= hi]
        if not kept:
            raise SweepError(
                f"conc={lo}..{hi} matches none of {config_key}'s "
                f"{'eval ' if mode.value == 'only' else ''}conc values "
                f"({', '.join(str(c) for c in sorted({point_conc(r) for r in rows}))})"
            )
        rows = kept
    log.info(
        "sweep_planned",
        key=config_key,
        points=len(rows),
        evals=sum(1 for r in rows if r.get("run-eval")),
        eval_mode=mode.value,
        why="eval points per the repo's documented selection (8k1k, highest and median conc per TP)",
    )
    # Slots per dispatch: every job the workflow's command creates for that group (every point of
    # the key at that conc, at every seq-len and tp, and the eval jobs the generator marks on that
    # slice), and each point's place among the run's jobs of its name (app.core.dispatchjobs).
    fields = group_fields(get_settings())
    jobs = plan_dispatch_jobs(master, config_key, rows, fields, mode.value, unexpanded, hardware)
    # tracked and collected with the picks the repo makes for each dispatch's own command
    return with_dispatch_marks(rows, jobs), jobs


def _fingerprint(gw: RepoFiles, repo: str, head_sha: str, entry: Any) -> str:
    """The recipe's fingerprint: its entry plus the benchmark script it runs (when the repo has it)."""
    script_text = None
    for candidate in script_candidates(entry):
        got = gw.get_file(repo, candidate, ref=head_sha)
        if got is not None:
            script_text = got[0]
            break
    return str(recipe_fingerprint(entry, script_text))


def sweep_way(
    session: Session,
    gw: RepoFiles,
    repo: str,
    pr: dict[str, Any],
    filters: SweepFilters,
    is_fork: bool,
    head_sha: str,
) -> SweepWay:
    """Label or dispatch for this sweep (app.core.sweepway); reads the label workflow's file only
    when label mode could apply."""
    cfg = sweep_settings(session, repo)
    targeted = targeted_filters(filters.seq, filters.conc, filters.conc_range, filters.tp)
    mode = parse_eval_mode(filters.evals)
    has_workflow = False
    if cfg.mode == "label" and targeted is None and not is_fork:
        has_workflow = gw.get_file(repo, f".github/workflows/{cfg.workflow}", ref=head_sha) is not None
    labels = [str(lb.get("name")) for lb in pr.get("labels") or [] if isinstance(lb, dict)]
    way = choose_way(
        configured=cfg.mode,
        has_label_workflow=has_workflow,
        targeted=targeted,
        is_fork=is_fork,
        eval_mode=mode,
        primary=cfg.label,
        pr_labels=labels,
        workflow=cfg.workflow,
    )
    log.info("sweep_way", repo=repo, pr=pr.get("number"), mode=way.mode, why=way.why)
    return way


def plan_for(session: Session, gw: RepoFiles | None, sweep: Sweep) -> SweepPlan:
    jobs = session.scalars(
        select(SweepJob).where(SweepJob.sweep_id == sweep.id).order_by(SweepJob.position)
    ).all()
    label = jobs[0].runner_label if jobs else ""
    capacity, source = label_capacity(gw, label, sweep.repo)
    ahead_rows = session.execute(
        select(func.count())
        .select_from(SweepJob)
        .join(Sweep, Sweep.id == SweepJob.sweep_id)
        .where(
            SweepJob.runner_label == label,
            SweepJob.sweep_id != sweep.id,
            SweepJob.state.in_((JobState.QUEUED, *JobState.IN_FLIGHT)),
            Sweep.state == SweepState.ACTIVE,
            Sweep.priority <= sweep.priority,
        )
    ).scalar_one()
    durations = [
        (aware(j.finished_at) - aware(j.started_at)).total_seconds()  # type: ignore[operator]
        for j in session.scalars(
            select(SweepJob)
            .where(
                SweepJob.runner_label == label,
                SweepJob.state == JobState.SUCCEEDED,
                SweepJob.started_at.is_not(None),
                SweepJob.finished_at.is_not(None),
            )
            .order_by(SweepJob.id.desc())
            .limit(50)
        )
    ]
    wait = None
    if durations:
        avg = sum(durations) / len(durations)
        wait = (int(ahead_rows) // max(1, capacity)) * avg
    return SweepPlan(
        points=[j.point for j in sorted(jobs, key=display_key)],
        runner_label=label,
        capacity=capacity,
        capacity_source=source,
        jobs_ahead=int(ahead_rows),
        expected_wait_seconds=wait,
        reused=sum(1 for j in jobs if j.state == JobState.REUSED),
    )


def fmt_seconds(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def reply_text(sweep: Sweep, plan: SweepPlan, created: bool) -> str:
    concs = sorted({point_conc(p) for p in plan.points})
    head = (
        (f"Sweep {sweep.id} queued" if created else f"Sweep {sweep.id} is already queued for this head")
        + f" for `{sweep.config_key}` at `{sweep.head_sha[:7]}`: {len(plan.points)} point(s), conc "
        + ", ".join(str(c) for c in concs)
        + f", on `{plan.runner_label}` "
        + f"({plan.capacity} runner(s), {plan.capacity_source})."
    )
    lines = [head]
    if plan.reused:
        lines.append(f"{plan.reused} point(s) reuse stored results for the same image and recipe.")
    if plan.jobs_ahead:
        wait = (
            f", expected wait about {fmt_seconds(plan.expected_wait_seconds)}"
            if plan.expected_wait_seconds is not None
            else ""
        )
        lines.append(f"{plan.jobs_ahead} job(s) ahead on `{plan.runner_label}`{wait}.")
    else:
        lines.append("No jobs ahead: it starts on the next scheduler tick.")
    if sweep.state == SweepState.AWAITING_APPROVAL:
        lines.append(
            f"This PR comes from a fork: a maintainer must comment `/sweep approve` for head "
            f"`{sweep.head_sha[:7]}` before anything runs (a new push needs a new approval)."
        )
    return "\n".join(lines)
