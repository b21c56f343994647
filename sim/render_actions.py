"""JSON shapes of Actions objects: workflows, runs, jobs, artifacts (REST and webhook payloads)."""

from __future__ import annotations

from typing import Any

from sim.models import Job, Repo, Run, iso
from sim.render import api, html, node_id, repo_lite, user
from sim.world_state import WorldState as World


def workflow_obj(world: World, repo: Repo, workflow_id: int) -> dict[str, Any]:
    wf = next(w for w in repo.workflows.values() if w.id == workflow_id)
    u = f"{api(world)}/repos/{repo.full_name}"
    return {
        "id": wf.id,
        "node_id": node_id("W_", wf.id),
        "name": wf.name,
        "path": wf.path,
        "state": "active",
        "created_at": iso(repo.created_at),
        "updated_at": iso(repo.created_at),
        "url": f"{u}/actions/workflows/{wf.id}",
        "html_url": f"{html(world)}/{repo.full_name}/blob/{repo.default_branch}/{wf.path}",
        "badge_url": f"{html(world)}/{repo.full_name}/workflows/{wf.name}/badge.svg",
    }


def hook_workflow(world: World, repo: Repo, workflow_id: int) -> dict[str, Any]:
    return workflow_obj(world, repo, workflow_id)


def _run_common(world: World, run: Run) -> dict[str, Any]:
    repo = world.repo(run.repo)
    u = f"{api(world)}/repos/{repo.full_name}"
    wf = next(w for w in repo.workflows.values() if w.id == run.workflow_id)
    c = repo.objects.commits[run.head_sha]
    return {
        "id": run.id,
        "name": wf.name,
        "node_id": node_id("WFR_", run.id),
        "head_branch": run.head_branch,
        "head_sha": run.head_sha,
        "path": wf.path,
        "display_title": run.name,
        "run_number": run.run_number,
        "event": run.event,
        "status": run.status,
        "conclusion": run.conclusion,
        "workflow_id": run.workflow_id,
        "check_suite_id": run.id + 7,
        "check_suite_node_id": node_id("CS_", run.id),
        "url": f"{u}/actions/runs/{run.id}",
        "html_url": f"{html(world)}/{repo.full_name}/actions/runs/{run.id}",
        "pull_requests": run_pulls(world, repo, run),
        "created_at": iso(run.created_at),
        "updated_at": iso(run.updated_at),
        "actor": user(world, run.actor),
        "triggering_actor": user(world, run.actor),
        "run_attempt": 1,
        "run_started_at": iso(run.run_started_at or run.created_at),
        "jobs_url": f"{u}/actions/runs/{run.id}/jobs",
        "logs_url": f"{u}/actions/runs/{run.id}/logs",
        "check_suite_url": f"{u}/check-suites/{run.id + 7}",
        "artifacts_url": f"{u}/actions/runs/{run.id}/artifacts",
        "cancel_url": f"{u}/actions/runs/{run.id}/cancel",
        "rerun_url": f"{u}/actions/runs/{run.id}/rerun",
        "previous_attempt_url": None,
        "workflow_url": f"{u}/actions/workflows/{run.workflow_id}",
        "head_commit": {
            "id": run.head_sha,
            "tree_id": c.tree,
            "message": c.message,
            "timestamp": iso(c.committer.date),
            "author": {"name": c.author.name, "email": c.author.email},
            "committer": {"name": c.committer.name, "email": c.committer.email},
        },
        "repository": repo_lite(world, repo),
        "head_repository": repo_lite(world, repo),
    }


def hook_workflow_run(world: World, run: Run) -> dict[str, Any]:
    return _run_common(world, run)


def rest_workflow_run(world: World, run: Run) -> dict[str, Any]:
    d = _run_common(world, run)
    d["referenced_workflows"] = []
    return d


def _job_common(world: World, job: Job) -> dict[str, Any]:
    run = world.runs[job.run_id]
    repo = world.repo(run.repo)
    u = f"{api(world)}/repos/{repo.full_name}"
    wf = next(w for w in repo.workflows.values() if w.id == run.workflow_id)
    return {
        "id": job.id,
        "run_id": run.id,
        "run_url": f"{u}/actions/runs/{run.id}",
        "run_attempt": 1,
        "node_id": node_id("J_", job.id),
        "head_sha": run.head_sha,
        "head_branch": run.head_branch,
        "url": f"{u}/actions/jobs/{job.id}",
        "html_url": f"{html(world)}/{repo.full_name}/actions/runs/{run.id}/job/{job.id}",
        "status": job.status,
        "conclusion": job.conclusion,
        "created_at": iso(job.created_at),
        "started_at": iso(job.started_at or job.created_at),
        "completed_at": iso(job.completed_at) if job.completed_at else None,
        "name": job.name,
        "steps": list(job.steps),
        "check_run_url": f"{u}/check-runs/{job.id}",
        "labels": list(job.labels)
        or (["self-hosted", job.label] if job.label else []),  # a job GitHub failed unexpanded: none
        "runner_id": job.runner_id,
        "runner_name": job.runner_name,
        "runner_group_id": 1 if job.runner_name else None,
        "runner_group_name": "Default" if job.runner_name else None,
        "workflow_name": wf.name,
    }


def hook_workflow_job(world: World, job: Job) -> dict[str, Any]:
    d = _job_common(world, job)
    if job.status == "queued":
        d["started_at"] = iso(job.created_at)
    return d


def rest_job(world: World, job: Job) -> dict[str, Any]:
    return _job_common(world, job)


def run_pulls(world: World, repo: Any, run: Any) -> list[dict[str, Any]]:
    """A run's `pull_requests`: for a same-repo pull_request run, the PR (number, head, base)."""
    if run.event != "pull_request" or run.pr_number is None:
        return []
    pr = repo.pulls.get(run.pr_number)
    if pr is None or pr.head_repo != repo.full_name:
        return []  # GitHub leaves it empty for a fork's head
    u = f"{api(world)}/repos/{repo.full_name}"
    lite = {"id": repo.id, "url": u, "name": repo.name}
    return [
        {
            "id": pr.id,
            "number": pr.number,
            "url": f"{u}/pulls/{pr.number}",
            "head": {"ref": pr.head_ref, "sha": run.head_sha, "repo": lite},
            "base": {"ref": pr.base_ref, "sha": world.repo_base_sha(pr), "repo": lite},
        }
    ]


def artifact(world: World, art: Any) -> dict[str, Any]:
    run = world.runs[art.run_id]
    u = f"{api(world)}/repos/{run.repo}"
    return {
        "id": art.id,
        "node_id": node_id("A_", art.id),
        "name": art.name,
        "size_in_bytes": len(art.data),
        "url": f"{u}/actions/artifacts/{art.id}",
        "archive_download_url": f"{u}/actions/artifacts/{art.id}/zip",
        "expired": False,
        "created_at": iso(art.created_at),
        "expires_at": iso(art.created_at + 90 * 86400),
        "updated_at": iso(art.created_at),
        "digest": None,
        "workflow_run": {
            "id": run.id,
            "repository_id": world.repo(run.repo).id,
            "head_repository_id": world.repo(run.repo).id,
            "head_branch": run.head_branch,
            "head_sha": run.head_sha,
        },
    }
