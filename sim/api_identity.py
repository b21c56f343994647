"""Users, organisations, the rate limit, GitHub Apps and installations."""

from __future__ import annotations

from typing import Any

from sim import render
from sim.api_common import (
    Ctx,
    Resp,
    _int,
    route,
)
from sim.world import SimError, World, iso

# -- meta ------------------------------------------------------------------------------------------


@route("GET", "/rate_limit", "rate-limit/get")
def rate_limit(ctx: Ctx, p: dict[str, str]) -> Resp:
    key = ctx.identity.budget_key or "anon:"
    b = ctx.world.budget(key)
    core = {"limit": b.limit, "remaining": max(0, b.limit - b.used), "reset": int(b.reset), "used": b.used}
    other = {"limit": 30, "remaining": 30, "reset": int(b.reset), "used": 0}
    return Resp(
        200,
        {
            "rate": core,
            "resources": {
                "core": core,
                "search": other,
                "graphql": dict(core),
                "integration_manifest": dict(other),
            },
        },
    )


@route("GET", "/user", "users/get-authenticated")
def get_authenticated_user(ctx: Ctx, p: dict[str, str]) -> Resp:
    if ctx.identity.kind != "user" or not ctx.identity.login:
        raise SimError(
            401 if ctx.identity.kind == "anonymous" else 403,
            "Requires authentication"
            if ctx.identity.kind == "anonymous"
            else "Resource not accessible by integration",
        )
    u = ctx.world.user(ctx.identity.login)
    d = render.user(ctx.world, u.login)
    d.update(
        {
            "name": u.name,
            "email": u.email,
            "company": None,
            "blog": "",
            "location": None,
            "hireable": None,
            "bio": None,
            "public_repos": 0,
            "public_gists": 0,
            "followers": 0,
            "following": 0,
            "created_at": iso(0),
            "updated_at": iso(0),
            "twitter_username": None,
        }
    )
    return Resp(200, d)


@route("GET", "/users/{username}", "users/get-by-username")
def get_user(ctx: Ctx, p: dict[str, str]) -> Resp:
    u = ctx.world.user(p["username"])
    d = render.user(ctx.world, u.login)
    d.update({"name": u.name, "email": u.email})
    return Resp(200, d)


@route("GET", "/orgs/{org}/members/{username}", "orgs/check-membership-for-user")
def org_member(ctx: Ctx, p: dict[str, str]) -> Resp:
    org = ctx.world.orgs.get(p["org"])
    if org is None or p["username"] not in org["members"]:
        return Resp(404, {"message": "Not Found"})
    return Resp(204)


@route("GET", "/orgs/{org}/teams/{team_slug}/memberships/{username}", "teams/get-membership-for-user-in-org")
def team_membership(ctx: Ctx, p: dict[str, str]) -> Resp:
    org = ctx.world.orgs.get(p["org"])
    team = (org or {}).get("teams", {}).get(p["team_slug"])
    if not team or p["username"] not in team:
        raise SimError(404, "Not Found")
    url = (
        f"{render.api(ctx.world)}/organizations/{p['org']}/team/{p['team_slug']}/memberships/{p['username']}"
    )
    return Resp(200, {"url": url, "role": team[p["username"]], "state": "active"})


@route("GET", "/repos/{owner}/{repo}/installation", "apps/get-repo-installation")
def repo_installation(ctx: Ctx, p: dict[str, str]) -> Resp:
    if ctx.identity.kind != "app":
        raise SimError(401, "A JSON web token could not be decoded")
    repo = ctx.world.repo(f"{p['owner']}/{p['repo']}")
    inst = ctx.world.installations.get(repo.installation_id or 0)
    if inst is None or inst.app_id != ctx.identity.app_id:
        raise SimError(404, "Not Found")
    return Resp(200, installation_obj(ctx.world, inst.id))


def installation_obj(world: World, inst_id: int) -> dict[str, Any]:
    inst = world.installations[inst_id]
    app = world.apps[inst.app_id]
    a = render.api(world)
    account = render.user(world, inst.account)
    return {
        "id": inst.id,
        "account": account,
        "repository_selection": "selected",
        "access_tokens_url": f"{a}/app/installations/{inst.id}/access_tokens",
        "repositories_url": f"{a}/installation/repositories",
        "html_url": f"{render.html(world)}/organizations/{inst.account}/settings/installations/{inst.id}",
        "app_id": app.id,
        "app_slug": app.slug,
        "target_id": account["id"],
        "target_type": account["type"],
        "permissions": {
            "contents": "write",
            "pull_requests": "write",
            "issues": "write",
            "actions": "write",
            "metadata": "read",
        },
        "events": ["pull_request", "issue_comment", "push", "workflow_run", "workflow_job"],
        "created_at": iso(inst.created_at),
        "updated_at": iso(inst.created_at),
        "single_file_name": None,
        "has_multiple_single_files": False,
        "single_file_paths": [],
        "suspended_by": None,
        "suspended_at": None,
    }


@route("GET", "/app", "apps/get-authenticated")
def get_app(ctx: Ctx, p: dict[str, str]) -> Resp:
    if ctx.identity.kind != "app" or ctx.identity.app_id is None:
        raise SimError(401, "A JSON web token could not be decoded")
    app = ctx.world.apps[ctx.identity.app_id]
    return Resp(
        200,
        {
            "id": app.id,
            "slug": app.slug,
            "node_id": render.node_id("A_", app.id),
            "name": app.name,
            "owner": render.user(ctx.world, app.owner),
            "description": None,
            "external_url": render.html(ctx.world),
            "html_url": f"{render.html(ctx.world)}/apps/{app.slug}",
            "created_at": iso(0),
            "updated_at": iso(0),
            "permissions": {},
            "events": [],
        },
    )


@route("GET", "/app/installations", "apps/list-installations")
def list_installations(ctx: Ctx, p: dict[str, str]) -> Resp:
    if ctx.identity.kind != "app" or ctx.identity.app_id is None:
        raise SimError(401, "A JSON web token could not be decoded")
    mine = sorted(i for i, inst in ctx.world.installations.items() if inst.app_id == ctx.identity.app_id)
    return Resp(200, [installation_obj(ctx.world, i) for i in mine])


@route("POST", "/app/installations/{installation_id}/access_tokens", "apps/create-installation-access-token")
def create_installation_token(ctx: Ctx, p: dict[str, str]) -> Resp:
    if ctx.identity.kind != "app":
        raise SimError(401, "A JSON web token could not be decoded")
    inst_id = _int(p["installation_id"], "installation_id")
    inst = ctx.world.installations.get(inst_id)
    if inst is None or inst.app_id != ctx.identity.app_id:
        raise SimError(404, "Not Found")
    tok = ctx.world.issue_installation_token(inst_id)
    repos = [
        render.rest_repository(ctx.world, ctx.world.repos[r]) for r in inst.repos if r in ctx.world.repos
    ]
    return Resp(
        201,
        {
            "token": tok.token,
            "expires_at": iso(tok.expires_at or 0),
            "permissions": installation_obj(ctx.world, inst_id)["permissions"],
            "repository_selection": "selected",
            "repositories": repos,
        },
    )
