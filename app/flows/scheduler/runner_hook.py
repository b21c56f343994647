"""The priority controller inside the service: each ``workflow_job`` delivery of a repository with
the label contract on updates that repository's facts (``runner_controller`` row, locked), and the
controller reconciles at once (``app.flows.scheduler.runner_control.reconcile``); the plan's view
is stored for
the dashboard's fleet page. The fair share's PR of a job is the PR of our sweep that dispatched its
run, when there is one (the repo's own label-driven runs share one bucket until a PR is known).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.clock import utcnow
from app.core.routing import HandlerContext, HandlerSkipped, Router
from app.core.schedplan import Plan, SnapJob, SnapRunner
from app.flows.scheduler.runner_control import (
    ControllerConfig,
    MemoryFacts,
    RunnerGateway,
    VariableGateway,
    apply_workflow_job,
    contract_on_cached,
    reconcile,
)
from app.models.runnerctl import RunnerController
from app.models.sweeps import Sweep, SweepJob
from app.settings import get_settings

router = Router()


class ControllerGateway(RunnerGateway, VariableGateway, Protocol):
    """What the controller's handler uses: the runners API and the contract variable."""


def _t(value: datetime) -> str:
    return value.isoformat()


def _d(value: str) -> datetime:
    return datetime.fromisoformat(value)


def facts_to_json(f: MemoryFacts) -> dict[str, Any]:
    return {
        "jobs": [[j.id, j.run_id, j.pr, list(j.labels), _t(j.created_at), j.status] for j in f.jobs.values()],
        "started": [[k, r, _t(at)] for k, (r, at) in f.started.items()],
        "runners": [[r.id, r.name, list(r.labels), r.status, r.busy] for r in f.runners.values()],
        "listed_at": _t(f.listed_at) if f.listed_at else None,
        # the fallback listing's own clock (without it every delivery listed the queued runs again)
        "queued_listed_at": _t(f.queued_listed_at) if f.queued_listed_at else None,
        "labelled_at": [[k, j, _t(at)] for k, (j, at) in f.labelled_at.items()],
        "usage": [[k, h, _t(at)] for k, (h, at) in f.usage.items()],
        "avoid": {k: sorted(v) for k, v in f.avoid.items()},
        "reported": sorted(f.reported)[-5000:],
    }


def facts_from_json(d: dict[str, Any]) -> MemoryFacts:
    f = MemoryFacts()
    f.jobs = {j[0]: SnapJob(j[0], j[1], j[2], tuple(j[3]), _d(j[4]), j[5]) for j in d.get("jobs", [])}
    f.started = {k: (r, _d(at)) for k, r, at in d.get("started", [])}
    f.runners = {r[0]: SnapRunner(r[0], r[1], tuple(r[2]), r[3], r[4]) for r in d.get("runners", [])}
    f.listed_at = _d(d["listed_at"]) if d.get("listed_at") else None
    f.queued_listed_at = _d(d["queued_listed_at"]) if d.get("queued_listed_at") else None
    f.stale = f.listed_at is None
    f.labelled_at = {k: (j, _d(at)) for k, j, at in d.get("labelled_at", [])}
    f.usage = {k: (h, _d(at)) for k, h, at in d.get("usage", [])}
    f.avoid = {k: set(v) for k, v in d.get("avoid", {}).items()}
    f.reported = set(d.get("reported", []))
    return f


def plan_view(facts: MemoryFacts, plan: Plan) -> dict[str, Any]:
    """The fleet page's data: each runner, its labels, the job it holds and why; the queue."""
    held = {a.runner_id: a for a in plan.assignments}
    holding = {r: j for j, (r, _) in facts.started.items()}
    runners = []
    for r in sorted(facts.runners.values(), key=lambda x: x.name):
        a = held.get(r.id)
        job = a.job_id if a else holding.get(r.id)
        why = a.why if a else ("running it" if r.id in holding else "")
        runners.append(
            {
                "id": r.id,
                "name": r.name,
                "labels": list(r.labels),
                "status": r.status,
                "busy": r.busy,
                "job": job,
                "why": why,
            }
        )
    queue = [
        {
            "job": e.job_id,
            "pr": e.pr,
            "effective": round(e.priority.total, 3),
            "parts": e.priority.parts(),
            "score": e.priority.score,
            "aging": e.priority.aging,
            "fair": e.priority.fair,
            "canary": e.priority.canary,
            "runner": e.runner_id,
            "why": e.why,
        }
        for e in plan.queue
    ]
    notices = [{"job": n.job_id, "run": n.run_id, "text": n.text, "why": n.why} for n in plan.notices]
    return {"runners": runners, "queue": queue, "notices": notices}


def _pr_of_run(session: Session, run_id: int) -> int | None:
    return session.scalars(
        select(Sweep.pr_number).join(SweepJob, SweepJob.sweep_id == Sweep.id).where(SweepJob.run_id == run_id)
    ).first()


def handle(
    session: Session, gw: ControllerGateway, repo: str, payload: dict[str, Any], now: datetime
) -> Plan:
    row = session.get(RunnerController, repo, with_for_update=True)
    facts = facts_from_json(row.facts) if row else MemoryFacts()
    run_id = int((payload.get("workflow_job") or {}).get("run_id") or 0)
    apply_workflow_job(facts, payload, now, _pr_of_run(session, run_id) if run_id else None)
    result = reconcile(facts, gw, ControllerConfig(repo), now)
    # no plan made (nothing idle could change): the fleet's runners as now, the last queue shown
    view = plan_view(facts, result.plan)
    if not result.planned and row is not None and isinstance(row.view, dict):
        view["queue"] = row.view.get("queue", [])
    if row is None:
        session.add(RunnerController(repo=repo, facts=facts_to_json(facts), view=view, updated_at=now))
    else:
        row.facts, row.view, row.updated_at = facts_to_json(facts), view, now
    return result.plan


@router.register("workflow_job")
def on_gpu_job(ctx: HandlerContext[Session, ControllerGateway]) -> None:
    repo = str((ctx.event.payload.get("repository") or {}).get("full_name") or "")
    if not repo:
        raise HandlerSkipped("no repository in the payload")
    if repo not in get_settings().runner_controller_repos:
        raise HandlerSkipped(f"{repo}: not in SWEEPBOT_RUNNER_CONTROLLER_REPOS")
    gw = ctx.gateway()
    if not contract_on_cached(gw, repo):
        raise HandlerSkipped(f"{repo}: PRIORITY_SCHEDULER_ENABLED is not true; GitHub's FIFO places its jobs")
    handle(ctx.session, gw, repo, dict(ctx.event.payload), utcnow())
