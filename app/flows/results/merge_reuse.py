"""Reuse at merge and after it: the facts app.core.sweepreuse and app.core.publication judge.

* A label-driven sweep's run completes, or someone comments ``/reuse-sweep-run``: the PR's runs,
  commits, artifacts and comments are read and ``decide_reuse`` says whether the report offers
  the line for a maintainer to post, or confirms an authorization and what main will do.
* The PR merges: the merge commit is kept on the sweep, with the decision the push to main is
  expected to follow.
* main's run-sweep.yml push run for that commit completes: ``classify_publication`` says whether
  reuse was taken and the results published, or which of the runbook's cases to recover by.

Everything is kept in the sweep's filters JSON (``reuse``, ``merge_sha``, ``publication``) and the
sticky report shows it (the report flush makes no call of its own).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Protocol

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.publication import GPU_CALLERS, Publication, PublicationFacts, classify_publication
from app.core.routing import HandlerContext, HandlerSkipped, Router
from app.core.sweepreuse import COMMAND, ReuseDecision, ReuseFacts, decide_reuse
from app.flows.results.recovery_pr import RecoveryGateway, continue_recovery, open_recovery_pr
from app.flows.sweeps.label_runs import sweep_settings
from app.models.sweeps import Sweep
from app.settings import get_settings
from app.store.audit import record
from app.store.reports import mark_report_dirty
from app.store.sweeps import sweep_mode

log = structlog.get_logger(__name__)
router = Router()
MAX_RUNS = 10  # a PR's newest runs whose artifacts are listed (one call each)


class MergeGateway(RecoveryGateway, Protocol):
    def get_pull(self, repo: str, number: int) -> dict[str, Any]: ...
    def list_pull_commits(self, repo: str, number: int) -> list[dict[str, Any]]: ...
    def list_workflow_runs(
        self, repo: str, workflow: str | None = None, **params: Any
    ) -> list[dict[str, Any]]: ...
    def list_run_artifacts(self, repo: str, run_id: int) -> list[dict[str, Any]]: ...
    def list_run_jobs(self, repo: str, run_id: int) -> list[dict[str, Any]]: ...


def latest_label_sweep(session: Session, repo: str, pr_number: int) -> Sweep | None:
    """The PR's newest sweep that went by label (the one whose run can be reused)."""
    rows = session.scalars(
        select(Sweep)
        .where(Sweep.repo == repo, Sweep.pr_number == pr_number)
        .order_by(Sweep.id.desc())
        .limit(20)
    )
    return next((s for s in rows if sweep_mode(s) == "label"), None)


def _names(gw: MergeGateway, repo: str, run_id: int) -> list[str]:
    return [str(a.get("name")) for a in gw.list_run_artifacts(repo, run_id) if not a.get("expired")]


def _note(sweep: Sweep, **changes: Any) -> None:
    sweep.filters = {**(sweep.filters or {}), **changes}


def reuse_facts(session: Session, gw: MergeGateway, repo: str, pr: dict[str, Any]) -> ReuseFacts:
    """The PR as the repo's finder reads it: labels, commits, its run-sweep.yml pull_request runs
    (the newest ``MAX_RUNS``, each with its unexpired artifact names), its comments."""
    cfg = sweep_settings(session, repo)
    number = int(pr["number"])
    commits = [str(c.get("sha")) for c in gw.list_pull_commits(repo, number)]
    head_ref = str((pr.get("head") or {}).get("ref") or "")
    listed = gw.list_workflow_runs(repo, cfg.workflow, event="pull_request", branch=head_ref, limit=100)
    runs = [
        r
        for r in listed
        if number in {p.get("number") for p in r.get("pull_requests") or []} or r.get("head_sha") in commits
    ]
    runs = sorted(runs, key=lambda r: int(r["id"]), reverse=True)[:MAX_RUNS]
    artifacts = {int(r["id"]): _names(gw, repo, int(r["id"])) for r in runs if r.get("status") == "completed"}
    return ReuseFacts(
        workflow_path=f".github/workflows/{cfg.workflow}",
        labels=[str(lb.get("name")) for lb in pr.get("labels") or [] if isinstance(lb, dict)],
        commits=commits,
        runs=runs,
        artifacts=artifacts,
        comments=gw.list_comments(repo, number),
        bot_login=get_settings().bot_login,
    )


def refresh_reuse(session: Session, gw: MergeGateway, repo: str, pr_number: int) -> ReuseDecision | None:
    """Judge the PR's reuse at merge again and keep the answer on its label sweep (None: no such sweep)."""
    sweep = latest_label_sweep(session, repo, pr_number)
    if sweep is None:
        return None
    pr = gw.get_pull(repo, pr_number)
    decision = decide_reuse(reuse_facts(session, gw, repo, pr))
    runs = {str(rid): why for rid, why in decision.per_run.items()}  # JSON keys are strings
    kept = {**asdict(decision), "per_run": runs, "line": decision.line}
    if pr.get("merged") and (sweep.filters or {}).get("merge_sha") != pr.get("merge_commit_sha"):
        _note(sweep, merge_sha=pr.get("merge_commit_sha"))
    if (sweep.filters or {}).get("reuse") != kept:
        _note(sweep, reuse=kept)
        mark_report_dirty(session, sweep.id)
    log.info("reuse_refreshed", repo=repo, pr=pr_number, kind=decision.kind, why=decision.why)
    return decision


def merge_sweeps(session: Session, repo: str, sha: str) -> list[Sweep]:
    """Label sweeps of a PR merged as ``sha`` (kept at merge)."""
    rows = session.scalars(select(Sweep).where(Sweep.repo == repo).order_by(Sweep.id.desc()).limit(200))
    return [s for s in rows if (s.filters or {}).get("merge_sha") == sha]


def follow_main(session: Session, gw: MergeGateway, repo: str, run: dict[str, Any]) -> Publication | None:
    """main's push run for a merge commit the bot knows: reuse taken, published, or which recovery."""
    sweeps = merge_sweeps(session, repo, str(run.get("head_sha") or ""))
    if not sweeps:
        return None
    sweep = sweeps[0]
    reuse = dict((sweep.filters or {}).get("reuse") or {})
    expected = reuse.get("run_id") if reuse.get("kind") == "authorized" else None
    candidate = reuse.get("best_run")
    rid = int(run["id"])
    jobs = gw.list_run_jobs(repo, rid) if run.get("status") == "completed" else []
    merge_names = _names(gw, repo, rid) if jobs else []
    reused = bool(jobs) and expected is not None and _no_gpu_ran(jobs)
    source_names = _names(gw, repo, int(expected)) if reused and expected is not None else merge_names
    cfg = sweep_settings(session, repo)
    pub = classify_publication(
        PublicationFacts(
            repo=repo,
            pr_number=sweep.pr_number,
            run=run,
            jobs=jobs,
            merge_artifacts=merge_names,
            expected_source=int(expected) if expected is not None else None,
            source_artifacts=source_names,
            recovery_source=int(candidate) if candidate is not None else None,
            recovery_source_sha=str(reuse.get("best_sha") or ""),
            label=cfg.label,
        )
    )
    kept = {**asdict(pub), "run_url": run.get("html_url")}
    if (sweep.filters or {}).get("publication") != kept:
        _note(sweep, publication=kept)
        mark_report_dirty(session, sweep.id)
        record(
            session,
            actor="sweepbot",
            action="sweep.publication",
            target=f"{repo}#{sweep.pr_number}",
            outcome="ok" if not pub.needs_human else "needs_human",
            detail={"sweep": sweep.id, "kind": pub.kind, "run_id": rid, "why": pub.why},
        )
    log.info("main_run_followed", repo=repo, pr=sweep.pr_number, kind=pub.kind, why=pub.why)
    open_recovery_pr(session, gw, sweep, kept)
    return pub


def _no_gpu_ran(jobs: list[dict[str, Any]]) -> bool:
    return all(
        j.get("conclusion") == "skipped" for j in jobs if str(j.get("name") or "").startswith(GPU_CALLERS)
    )


# -------------------------------------------------------------------------------------- handlers


@router.register("workflow_run", "completed")
def on_sweep_run_completed(ctx: HandlerContext[Session, MergeGateway]) -> None:
    run = ctx.event.payload.get("workflow_run") or {}
    repo = ctx.event.repo
    if not repo or not isinstance(run, dict) or "id" not in run:
        raise HandlerSkipped("no workflow_run in the payload")
    workflow = sweep_settings(ctx.session, repo).workflow
    if not str(run.get("path") or "").endswith("/" + workflow):
        raise HandlerSkipped(f"not a {workflow} run")
    if run.get("event") == "push":
        if follow_main(ctx.session, ctx.gateway(), repo, run) is None:
            raise HandlerSkipped("not the merge commit of a PR the bot swept")
        return
    numbers = {
        int(p["number"]) for p in run.get("pull_requests") or [] if isinstance(p, dict) and p.get("number")
    }
    if not numbers:
        numbers = {
            s.pr_number
            for s in ctx.session.scalars(select(Sweep).where(Sweep.head_sha == run.get("head_sha")))
        }
    done = [n for n in sorted(numbers) if refresh_reuse(ctx.session, ctx.gateway(), repo, n) is not None]
    if not done:
        raise HandlerSkipped("no label sweep on the run's PR")


@router.register("issue_comment")
def on_reuse_comment(ctx: HandlerContext[Session, MergeGateway]) -> None:
    payload = ctx.event.payload
    body = str((payload.get("comment") or {}).get("body") or "")
    issue = payload.get("issue") or {}
    if COMMAND not in body or not issue.get("pull_request") or not ctx.event.repo:
        raise HandlerSkipped(f"no {COMMAND} on a pull request")
    author = (payload.get("comment") or {}).get("user") or {}
    if author.get("type") == "Bot" or author.get("login") == get_settings().bot_login:
        raise HandlerSkipped("a bot's comment (the report's offer) authorizes nothing")
    number = int(issue["number"])
    record(  # the bot reads a maintainer's authorization; it never posts one
        ctx.session,
        actor=str(ctx.event.sender or ""),
        action="command.reuse-sweep-run",
        target=f"{ctx.event.repo}#{number}",
        detail={"comment": (payload.get("comment") or {}).get("id")},
    )
    recovering = recovery_sweep(ctx.session, ctx.event.repo, number)
    if recovering is not None:
        continue_recovery(ctx.session, ctx.gateway(), recovering)
        return
    if refresh_reuse(ctx.session, ctx.gateway(), ctx.event.repo, number) is None:
        raise HandlerSkipped("no label sweep on this PR")


def recovery_sweep(session: Session, repo: str, number: int) -> Sweep | None:
    """The merged PR's sweep whose recovery PR is ``number``."""
    rows = session.scalars(select(Sweep).where(Sweep.repo == repo).order_by(Sweep.id.desc()).limit(500))
    return next(
        (s for s in rows if ((s.filters or {}).get("recovery_pr") or {}).get("number") == number), None
    )


@router.register("pull_request", "closed")
def on_merged(ctx: HandlerContext[Session, MergeGateway]) -> None:
    pr = ctx.event.payload.get("pull_request") or {}
    if not pr.get("merged") or not ctx.event.repo:
        raise HandlerSkipped("closed without merge")
    sweep = latest_label_sweep(ctx.session, ctx.event.repo, int(pr["number"]))
    if sweep is None:
        raise HandlerSkipped("no label sweep on this PR")
    _note(sweep, merge_sha=pr.get("merge_commit_sha"))
    gw = ctx.gateway()
    refresh_reuse(ctx.session, gw, ctx.event.repo, int(pr["number"]))
    follow_merge(ctx.session, gw, ctx.event.repo, str(pr.get("merge_commit_sha") or ""))


def follow_merge(session: Session, gw: MergeGateway, repo: str, merge_sha: str) -> Publication | None:
    """main's push run for ``merge_sha`` if GitHub already has one (its workflow_run delivery may
    have come before the PR's `closed`): followed at once."""
    if not merge_sha:
        return None
    workflow = sweep_settings(session, repo).workflow
    runs = gw.list_workflow_runs(repo, workflow, event="push", head_sha=merge_sha, limit=10)
    newest = max(runs, key=lambda r: int(r["id"]), default=None)
    return follow_main(session, gw, repo, newest) if newest is not None else None
