"""Self-hosted runners (list, one, add and remove custom labels; the repo's and the organisation's
endpoints) and repository Actions variables, as GitHub documents them."""

from __future__ import annotations

from typing import Any

from sim.api_common import Ctx, Resp, _body, _int, _repo, _require_auth, _require_write, paginate, route
from sim.models import Runner
from sim.world import SimError, World, iso


def runner_obj(world: World, r: Runner) -> dict[str, Any]:
    return {
        "id": r.id,
        "name": r.name,
        "os": "linux",
        "status": r.status,
        "busy": r.busy_job is not None,
        "ephemeral": False,
        "labels": [
            {"id": i + 1, "name": name, "type": kind} for i, (name, kind) in enumerate(world.runner_labels(r))
        ],
    }


def _labels_obj(world: World, r: Runner) -> dict[str, Any]:
    labels = [{"id": i + 1, "name": n, "type": t} for i, (n, t) in enumerate(world.runner_labels(r))]
    return {"total_count": len(labels), "labels": labels}


def _org(ctx: Ctx, p: dict[str, str]) -> None:
    _require_auth(ctx)
    if p["org"] not in ctx.world.orgs and not any(r.owner == p["org"] for r in ctx.world.repos.values()):
        raise SimError(404, "Not Found")


def _org_write(ctx: Ctx, p: dict[str, str]) -> None:
    _org(ctx, p)
    repos = [r for r in ctx.world.repos.values() if r.owner == p["org"]]
    if not repos:
        raise SimError(404, "Not Found")
    _require_write(ctx, repos[0])


def _listing(ctx: Ctx) -> Resp:
    items = [runner_obj(ctx.world, r) for r in ctx.world.all_runners()]
    return paginate(ctx, items, wrap="runners", total=len(items))


@route("GET", "/repos/{owner}/{repo}/actions/runners", "actions/list-self-hosted-runners-for-repo")
def list_repo_runners(ctx: Ctx, p: dict[str, str]) -> Resp:
    _require_auth(ctx)
    _repo(ctx, p)
    return _listing(ctx)


@route("GET", "/orgs/{org}/actions/runners", "actions/list-self-hosted-runners-for-org")
def list_org_runners(ctx: Ctx, p: dict[str, str]) -> Resp:
    _org(ctx, p)
    return _listing(ctx)


@route("GET", "/repos/{owner}/{repo}/actions/runners/{runner_id}", "actions/get-self-hosted-runner-for-repo")
def get_repo_runner(ctx: Ctx, p: dict[str, str]) -> Resp:
    _require_auth(ctx)
    _repo(ctx, p)
    return Resp(200, runner_obj(ctx.world, ctx.world.runner_by_id(_int(p["runner_id"], "runner_id"))))


def _add(ctx: Ctx, runner_id: str) -> Resp:
    names = _body(ctx).get("labels")
    if not isinstance(names, list) or not names or len(names) > 100:
        raise SimError(422, "Invalid request.\n\nInvalid input: object is missing required key: labels.")
    r = ctx.world.add_runner_labels(_int(runner_id, "runner_id"), names)
    return Resp(200, _labels_obj(ctx.world, r))


def _remove(ctx: Ctx, runner_id: str, name: str) -> Resp:
    r = ctx.world.remove_runner_label(_int(runner_id, "runner_id"), name)
    return Resp(200, _labels_obj(ctx.world, r))


@route(
    "POST",
    "/repos/{owner}/{repo}/actions/runners/{runner_id}/labels",
    "actions/add-custom-labels-to-self-hosted-runner-for-repo",
)
def add_repo_labels(ctx: Ctx, p: dict[str, str]) -> Resp:
    _require_write(ctx, _repo(ctx, p))
    return _add(ctx, p["runner_id"])


@route(
    "DELETE",
    "/repos/{owner}/{repo}/actions/runners/{runner_id}/labels/{name}",
    "actions/remove-custom-label-from-self-hosted-runner-for-repo",
)
def remove_repo_label(ctx: Ctx, p: dict[str, str]) -> Resp:
    _require_write(ctx, _repo(ctx, p))
    return _remove(ctx, p["runner_id"], p["name"])


@route(
    "POST",
    "/orgs/{org}/actions/runners/{runner_id}/labels",
    "actions/add-custom-labels-to-self-hosted-runner-for-org",
)
def add_org_labels(ctx: Ctx, p: dict[str, str]) -> Resp:
    _org_write(ctx, p)
    return _add(ctx, p["runner_id"])


@route(
    "DELETE",
    "/orgs/{org}/actions/runners/{runner_id}/labels/{name}",
    "actions/remove-custom-label-from-self-hosted-runner-for-org",
)
def remove_org_label(ctx: Ctx, p: dict[str, str]) -> Resp:
    _org_write(ctx, p)
    return _remove(ctx, p["runner_id"], p["name"])


@route("GET", "/repos/{owner}/{repo}/actions/variables/{name}", "actions/get-repo-variable")
def get_repo_variable(ctx: Ctx, p: dict[str, str]) -> Resp:
    _require_auth(ctx)
    repo = _repo(ctx, p)
    values = ctx.world.variables(repo.full_name)
    key = next((k for k in values if k.upper() == p["name"].upper()), None)
    if key is None:
        raise SimError(404, "Not Found")
    stamp = iso(ctx.world.now())
    return Resp(200, {"name": key, "value": values[key], "created_at": stamp, "updated_at": stamp})
