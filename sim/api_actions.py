"""Actions: workflows, dispatch, runs, jobs, check-run annotations, artifacts; GHCR package versions."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from sim import render, render_actions
from sim.api_common import (
    Ctx,
    Resp,
    _body,
    _int,
    _repo,
    _require_auth,
    _require_write,
    paginate,
    route,
)
from sim.world import SimError, iso

# -- actions ---------------------------------------------------------------------------------------


@route("GET", "/repos/{owner}/{repo}/actions/workflows", "actions/list-repo-workflows")
def list_workflows(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    return paginate(
        ctx,
        [render_actions.workflow_obj(ctx.world, repo, w.id) for w in repo.workflows.values()],
        wrap="workflows",
    )


@route("GET", "/repos/{owner}/{repo}/actions/workflows/{workflow_id}", "actions/get-workflow")
def get_workflow(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    wf = ctx.world.workflow(repo.full_name, p["workflow_id"])
    return Resp(200, render_actions.workflow_obj(ctx.world, repo, wf.id))


@route(
    "POST",
    "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches",
    "actions/create-workflow-dispatch",
)
def dispatch(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_write(ctx, repo)
    b = _body(ctx)
    if not isinstance(b.get("ref"), str):
        raise SimError(422, 'Invalid request.\n\n"ref" is required.')
    inputs = b.get("inputs") or {}
    if not isinstance(inputs, dict):
        raise SimError(422, "inputs must be an object")
    if len(inputs) > 25:
        raise SimError(422, "you may only define up to 25 `inputs` for a `workflow_dispatch` event")
    run = ctx.world.dispatch(
        repo.full_name, p["workflow_id"], b["ref"], inputs, ctx.identity.actor(ctx.world)
    )
    if b.get("return_run_details") and not ctx.world.faults.dispatch_ignore_run_details:
        return Resp(
            200,
            {
                "workflow_run_id": run.id,
                "run_url": f"{render.api(ctx.world)}/repos/{repo.full_name}/actions/runs/{run.id}",
                "html_url": f"{render.html(ctx.world)}/{repo.full_name}/actions/runs/{run.id}",
            },
        )
    return Resp(204)


def _created_range(value: str) -> tuple[float, float]:
    """GitHub's ``created`` filter (search date syntax): ``>=T``, ``>T``, ``<=T``, ``<T`` or ``A..B``."""

    def ts(text: str) -> float:
        text = text.strip()
        if text == "*":
            return float("inf")
        try:
            when = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError as exc:
            raise SimError(422, f"created {value!r} is not a date or date-time range") from exc
        return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()

    for op, lo_hi in ((">=", "lo"), ("<=", "hi"), (">", "lo+"), ("<", "hi-")):
        if value.startswith(op):
            t = ts(value[len(op) :])
            return {
                "lo": (t, math.inf),
                "hi": (-math.inf, t),
                "lo+": (t + 1, math.inf),
                "hi-": (-math.inf, t - 1),
            }[lo_hi]
    if ".." in value:
        a, _, b = value.partition("..")
        return (-math.inf if a.strip() == "*" else ts(a), ts(b))
    t = ts(value)
    return t, t + 86400 if "T" not in value else t  # a bare date is that whole day


def _filter_runs(ctx: Ctx, runs: list[Any]) -> list[Any]:
    q = ctx.query
    created = _created_range(q["created"]) if q.get("created") else None
    out = []
    for r in runs:
        if created is not None and not created[0] <= r.created_at <= created[1]:
            continue
        if q.get("branch") and r.head_branch != q["branch"]:
            continue
        if q.get("event") and q["event"] != r.event:
            continue
        if q.get("head_sha") and r.head_sha != q["head_sha"]:
            continue
        if q.get("actor") and r.actor != q["actor"]:
            continue
        status = q.get("status")
        if status and status not in (r.status, r.conclusion):
            continue
        out.append(r)
    return sorted(out, key=lambda r: r.id, reverse=True)


@route("GET", "/repos/{owner}/{repo}/actions/runs", "actions/list-workflow-runs-for-repo")
def list_runs(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    runs = _filter_runs(ctx, [r for r in ctx.world.runs.values() if r.repo == repo.full_name])
    return paginate(ctx, [render_actions.rest_workflow_run(ctx.world, r) for r in runs], wrap="workflow_runs")


@route("GET", "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/runs", "actions/list-workflow-runs")
def list_workflow_runs(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    wf = ctx.world.workflow(repo.full_name, p["workflow_id"])
    runs = _filter_runs(
        ctx, [r for r in ctx.world.runs.values() if r.repo == repo.full_name and r.workflow_id == wf.id]
    )
    return paginate(ctx, [render_actions.rest_workflow_run(ctx.world, r) for r in runs], wrap="workflow_runs")


def _run(ctx: Ctx, p: dict[str, str]) -> Any:
    repo = _repo(ctx, p)
    run = ctx.world.runs.get(_int(p["run_id"], "run_id"))
    if run is None or run.repo != repo.full_name:
        raise SimError(404, "Not Found")
    return run


@route("GET", "/repos/{owner}/{repo}/actions/runs/{run_id}", "actions/get-workflow-run")
def get_run(ctx: Ctx, p: dict[str, str]) -> Resp:
    return Resp(200, render_actions.rest_workflow_run(ctx.world, _run(ctx, p)))


@route("GET", "/repos/{owner}/{repo}/actions/runs/{run_id}/jobs", "actions/list-jobs-for-workflow-run")
def list_jobs(ctx: Ctx, p: dict[str, str]) -> Resp:
    run = _run(ctx, p)
    jobs = [ctx.world.jobs[j] for j in run.jobs]
    if ctx.query.get("filter", "latest") not in ("latest", "all"):
        raise SimError(422, "filter must be latest or all")
    return paginate(ctx, [render_actions.rest_job(ctx.world, j) for j in jobs], wrap="jobs")


@route("GET", "/repos/{owner}/{repo}/check-runs/{check_run_id}/annotations", "checks/list-annotations")
def check_run_annotations(ctx: Ctx, p: dict[str, str]) -> Resp:
    # A workflow job's check run has the job's id; GitHub answers a plain array.
    repo = _repo(ctx, p)
    job = ctx.world.jobs.get(_int(p["check_run_id"], "check_run_id"))
    if job is None or ctx.world.runs[job.run_id].repo != repo.full_name:
        raise SimError(404, "Not Found")
    return paginate(ctx, list(job.annotations))


@route("POST", "/repos/{owner}/{repo}/actions/runs/{run_id}/cancel", "actions/cancel-workflow-run")
def cancel_run(ctx: Ctx, p: dict[str, str]) -> Resp:
    run = _run(ctx, p)
    _require_write(ctx, ctx.world.repo(run.repo))
    ctx.world.cancel_run(run.id)
    return Resp(202, {})


@route("GET", "/repos/{owner}/{repo}/actions/runs/{run_id}/artifacts", "actions/list-workflow-run-artifacts")
def run_artifacts(ctx: Ctx, p: dict[str, str]) -> Resp:
    run = _run(ctx, p)
    name = ctx.query.get("name")
    arts = [a for a in ctx.world.artifacts.values() if a.run_id == run.id and (not name or a.name == name)]
    return paginate(ctx, [render_actions.artifact(ctx.world, a) for a in arts], wrap="artifacts")


@route("GET", "/repos/{owner}/{repo}/actions/artifacts", "actions/list-artifacts-for-repo")
def repo_artifacts(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    name = ctx.query.get("name")
    arts = [
        a
        for a in ctx.world.artifacts.values()
        if ctx.world.runs[a.run_id].repo == repo.full_name and (not name or a.name == name)
    ]
    arts.sort(key=lambda a: a.id, reverse=True)
    return paginate(ctx, [render_actions.artifact(ctx.world, a) for a in arts], wrap="artifacts")


def _artifact(ctx: Ctx, p: dict[str, str]) -> Any:
    repo = _repo(ctx, p)
    art = ctx.world.artifacts.get(_int(p["artifact_id"], "artifact_id"))
    if art is None or ctx.world.runs[art.run_id].repo != repo.full_name:
        raise SimError(404, "Not Found")
    return art


@route("GET", "/repos/{owner}/{repo}/actions/artifacts/{artifact_id}", "actions/get-artifact")
def get_artifact(ctx: Ctx, p: dict[str, str]) -> Resp:
    return Resp(200, render_actions.artifact(ctx.world, _artifact(ctx, p)))


@route(
    "GET",
    "/repos/{owner}/{repo}/actions/artifacts/{artifact_id}/{archive_format}",
    "actions/download-artifact",
)
def download_artifact(ctx: Ctx, p: dict[str, str]) -> Resp:
    _require_auth(ctx)
    art = _artifact(ctx, p)
    if p["archive_format"] != "zip":
        raise SimError(404, "Not Found (archive_format must be zip)")
    loc = f"{render.html(ctx.world)}/_blobs/artifacts/{art.id}.zip"
    return Resp(302, None, {"Location": loc})


# -- packages (GHCR tags through the REST API) -----------------------------------------------------


def _package_versions(ctx: Ctx, owner: str, package_type: str, name: str) -> Resp:
    if package_type != "container":
        raise SimError(404, "Package not found.")
    image = ctx.world.images.get(f"{owner}/{name}")
    if image is None:
        raise SimError(404, "Package not found.")
    by_digest: dict[str, list[Any]] = {}
    for t in image.tags.values():
        by_digest.setdefault(t.digest, []).append(t)
    out = []
    for digest, tags in sorted(by_digest.items(), key=lambda kv: -max(t.seq for t in kv[1])):
        vid = int(digest[7:15], 16)
        pushed = max(t.pushed_at for t in tags)
        out.append(
            {
                "id": vid,
                "name": digest,
                "url": f"{render.api(ctx.world)}/orgs/{owner}/packages/container/{name}/versions/{vid}",
                "package_html_url": f"{render.html(ctx.world)}/orgs/{owner}/packages/container/package/"
                f"{name}",
                "created_at": iso(pushed),
                "updated_at": iso(pushed),
                "html_url": f"{render.html(ctx.world)}/orgs/{owner}/packages/container/{name}/{vid}",
                "metadata": {
                    "package_type": "container",
                    "container": {"tags": [t.name for t in sorted(tags, key=lambda t: t.seq)]},
                },
            }
        )
    return paginate(ctx, out)


@route(
    "GET",
    "/orgs/{org}/packages/{package_type}/{package_name}/versions",
    "packages/get-all-package-versions-for-package-owned-by-org",
)
def org_package_versions(ctx: Ctx, p: dict[str, str]) -> Resp:
    return _package_versions(ctx, p["org"], p["package_type"], p["package_name"])


@route(
    "GET",
    "/users/{username}/packages/{package_type}/{package_name}/versions",
    "packages/get-all-package-versions-for-package-owned-by-user",
)
def user_package_versions(ctx: Ctx, p: dict[str, str]) -> Resp:
    return _package_versions(ctx, p["username"], p["package_type"], p["package_name"])


@route(
    "GET",
    "/user/packages/{package_type}/{package_name}/versions",
    "packages/get-all-package-versions-for-package-owned-by-authenticated-user",
)
def own_package_versions(ctx: Ctx, p: dict[str, str]) -> Resp:
    _require_auth(ctx)
    return _package_versions(ctx, ctx.identity.actor(ctx.world), p["package_type"], p["package_name"])
