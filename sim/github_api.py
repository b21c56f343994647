"""GitHub REST operations served by the sim, one handler per operation id.

The table `ROUTES` maps (method, path template) to an operation id from the OpenAPI subset (or a
documented GitHub operation id for the few extra endpoints PyGithub needs) and a handler.
Handlers are plain functions of (ctx, path params) returning `Resp`; auth, budget, ETag,
faults and accounting are applied around them in `sim.app`.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urlencode

from sim import render, render_actions, render_git
from sim.gitgraph import GitError
from sim.world import REACTIONS, Repo, SimError, TokenInfo, World, iso


@dataclass
class Identity:
    kind: str  # "user" | "installation" | "app" | "anonymous"
    login: str | None = None
    installation_id: int | None = None
    app_id: int | None = None
    token: TokenInfo | None = None

    @property
    def budget_key(self) -> str | None:
        if self.kind == "user":
            return f"user:{self.login}"
        if self.kind == "installation":
            return f"inst:{self.installation_id}"
        if self.kind == "anonymous":
            return "anon:"
        return None  # app JWT calls have their own, unmetered-here budget

    def actor(self, world: World) -> str:
        if self.kind == "installation" and self.installation_id in world.installations:
            app = world.apps[world.installations[self.installation_id].app_id]
            return f"{app.slug}[bot]"
        return self.login or "ghost"


@dataclass
class Ctx:
    world: World
    identity: Identity
    method: str
    query: dict[str, str]
    body: Any
    raw_path: str


@dataclass
class Resp:
    status: int
    body: Any = None  # JSON-able, bytes, or None
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json; charset=utf-8"


Handler = Callable[[Ctx, dict[str, str]], Resp]
ROUTES: list[tuple[str, re.Pattern[str], str, Handler]] = []
_GREEDY = {"path", "ref", "basehead"}


def route(method: str, template: str, op: str) -> Callable[[Handler], Handler]:
    def deco(fn: Handler) -> Handler:
        pattern = (
            "^"
            + re.sub(
                r"\{(\w+)\}",
                lambda m: f"(?P<{m.group(1)}>.+)" if m.group(1) in _GREEDY else f"(?P<{m.group(1)}>[^/]+)",
                template,
            )
            + "$"
        )
        ROUTES.append((method, re.compile(pattern), op, fn))
        return fn

    return deco


def match(method: str, path: str) -> tuple[str, Handler, dict[str, str]] | None:
    for m, pat, op, fn in ROUTES:
        if m != method:
            continue
        mo = pat.match(path)
        if mo:
            return op, fn, mo.groupdict()
    return None


def match_any_method(path: str) -> bool:
    return any(pat.match(path) for _, pat, _, _ in ROUTES)


# -- helpers ---------------------------------------------------------------------------------------


def _repo(ctx: Ctx, p: dict[str, str]) -> Repo:
    repo = ctx.world.repo(f"{p['owner']}/{p['repo']}")
    if repo.private and not _can_read(ctx, repo):
        raise SimError(404, "Not Found")
    return repo


def _can_read(ctx: Ctx, repo: Repo) -> bool:
    ident = ctx.identity
    if ident.kind == "installation":
        inst = ctx.world.installations.get(ident.installation_id or 0)
        return bool(inst and repo.full_name in inst.repos)
    if ident.kind == "user" and ident.login:
        return ctx.world.permission(repo.full_name, ident.login) != "none"
    return False


def _require_write(ctx: Ctx, repo: Repo) -> None:
    ident = ctx.identity
    if ident.kind == "installation":
        inst = ctx.world.installations.get(ident.installation_id or 0)
        if inst and repo.full_name in inst.repos:
            return
        raise SimError(403, "Resource not accessible by integration")
    if ident.kind == "user" and ident.login:
        if ctx.world.permission(repo.full_name, ident.login) in ("admin", "maintain", "write"):
            return
        raise SimError(403, f"Permission to {repo.full_name} denied to {ident.login}.")
    raise SimError(401, "Requires authentication")


def _require_auth(ctx: Ctx) -> None:
    if ctx.identity.kind not in ("user", "installation"):
        raise SimError(401, "Requires authentication")


def _body(ctx: Ctx) -> dict[str, Any]:
    if ctx.body is None:
        return {}
    if not isinstance(ctx.body, dict):
        raise SimError(400, "Problems parsing JSON")
    return ctx.body


def _int(value: str, what: str) -> int:
    try:
        return int(value)
    except ValueError as exc:
        raise SimError(404, f"Not Found ({what} must be an integer)") from exc


def paginate(ctx: Ctx, items: list[Any], wrap: str | None = None, total: int | None = None) -> Resp:
    try:
        per_page = max(1, min(100, int(ctx.query.get("per_page", "30"))))
        page = max(1, int(ctx.query.get("page", "1")))
    except ValueError as exc:
        raise SimError(422, "per_page and page must be integers") from exc
    chunk = items[(page - 1) * per_page : page * per_page]
    last = max(1, -(-len(items) // per_page))
    base = ctx.world.settings.base_url.rstrip("/") + ctx.raw_path
    links = []

    def link(n: int, rel: str) -> str:
        q = dict(ctx.query)
        q.update({"per_page": str(per_page), "page": str(n)})
        return f'<{base}?{urlencode(q)}>; rel="{rel}"'

    if page < last:
        links += [link(page + 1, "next"), link(last, "last")]
    if page > 1:
        links += [link(1, "first"), link(page - 1, "prev")]
    headers = {"Link": ", ".join(links)} if links else {}
    body: Any = (
        chunk if wrap is None else {"total_count": len(items) if total is None else total, wrap: chunk}
    )
    return Resp(200, body, headers)


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


# -- repos and contents ----------------------------------------------------------------------------


@route("GET", "/repos/{owner}/{repo}", "repos/get")
def get_repo(ctx: Ctx, p: dict[str, str]) -> Resp:
    return Resp(200, render.rest_repository(ctx.world, _repo(ctx, p)))


@route("GET", "/repos/{owner}/{repo}/contents/{path}", "repos/get-content")
def get_content(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    ref = ctx.query.get("ref") or repo.default_branch
    sha = ctx.world.resolve(repo, ref)
    path = p["path"].strip("/")
    entry = repo.objects.lookup(repo.objects.commits[sha].tree, path)
    if entry is None:
        raise SimError(404, "Not Found")
    if entry.type == "tree":
        return Resp(200, render_git.content_dir(ctx.world, repo, path, entry.sha, ref))
    return Resp(200, render_git.content_file(ctx.world, repo, path, entry.sha, ref))


@route("GET", "/repos/{owner}/{repo}/contents", "repos/get-content")
def get_root_content(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    ref = ctx.query.get("ref") or repo.default_branch
    sha = ctx.world.resolve(repo, ref)
    return Resp(200, render_git.content_dir(ctx.world, repo, "", repo.objects.commits[sha].tree, ref))


@route("PUT", "/repos/{owner}/{repo}/contents/{path}", "repos/create-or-update-file-contents")
def put_content(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_write(ctx, repo)
    b = _body(ctx)
    if "message" not in b or "content" not in b:
        raise SimError(422, 'Invalid request.\n\n"message" and "content" are required.')
    branch = b.get("branch") or repo.default_branch
    path = p["path"].strip("/")
    head = repo.refs.get(f"refs/heads/{branch}")
    existing = repo.objects.lookup(repo.objects.commits[head].tree, path) if head else None
    if existing is not None and b.get("sha") != existing.sha:
        raise SimError(409, f"{path} does not match {b.get('sha') or 'the missing sha'}")
    if existing is None and b.get("sha"):
        raise SimError(422, "sha given for a file that does not exist")
    try:
        data = base64.b64decode(b["content"], validate=False)
    except ValueError as exc:
        raise SimError(422, "content is not valid Base64") from exc
    author = ctx.identity.actor(ctx.world)
    sha = ctx.world.commit_files(repo.full_name, branch, {path: data}, b["message"], author=author)
    entry = repo.objects.lookup(repo.objects.commits[sha].tree, path)
    assert entry is not None
    content = render_git.content_file(ctx.world, repo, path, entry.sha, branch)
    content.pop("encoding")
    content.pop("content")
    return Resp(
        201 if existing is None else 200,
        {"content": content, "commit": render_git.git_commit(ctx.world, repo, sha)},
    )


@route("GET", "/repos/{owner}/{repo}/compare/{basehead}", "repos/compare-commits")
def compare_commits(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    if "..." not in p["basehead"]:
        raise SimError(404, "Not Found")
    base, _, head = p["basehead"].partition("...")
    b, h, cmp = ctx.world.compare(repo.full_name, base, head)
    store = repo.objects
    files = render.diff_files(ctx.world, repo, store, cmp.merge_base or b, h) if cmp.merge_base else []
    u = render.html(ctx.world) + f"/{repo.full_name}"
    try:
        per_page = max(1, min(250, int(ctx.query.get("per_page", "250"))))
        page = max(1, int(ctx.query.get("page", "1")))
    except ValueError as exc:
        raise SimError(422, "per_page and page must be integers") from exc
    shown = cmp.commits[(page - 1) * per_page : page * per_page]
    body = {
        "url": f"{render.api(ctx.world)}/repos/{repo.full_name}/compare/{base}...{head}",
        "html_url": f"{u}/compare/{base}...{head}",
        "permalink_url": f"{u}/compare/{b[:7]}...{h[:7]}",
        "diff_url": f"{u}/compare/{base}...{head}.diff",
        "patch_url": f"{u}/compare/{base}...{head}.patch",
        "base_commit": render_git.rest_commit(ctx.world, repo, b),
        "merge_base_commit": render_git.rest_commit(ctx.world, repo, cmp.merge_base or b),
        "status": cmp.status,
        "ahead_by": cmp.ahead_by,
        "behind_by": cmp.behind_by,
        "total_commits": len(cmp.commits),
        "commits": [render_git.rest_commit(ctx.world, repo, c) for c in shown],
        "files": files[:300],
    }
    return Resp(200, body)


@route(
    "GET",
    "/repos/{owner}/{repo}/collaborators/{username}/permission",
    "repos/get-collaborator-permission-level",
)
def collaborator_permission(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    ident = ctx.identity
    if ctx.world.faults.forbid_permission_check or (
        ident.kind == "user"
        and ident.login
        and ctx.world.permission(repo.full_name, ident.login) not in ("admin", "maintain", "write")
    ):
        raise SimError(403, "Must have push access to view repository collaborators.")
    if p["username"] not in ctx.world.users:
        raise SimError(404, f"{p['username']} is not a user")
    role = ctx.world.role(repo.full_name, p["username"])
    perm = ctx.world.base_role(role)  # a custom role grants its base role's permissions
    # the legacy `permission` field folds maintain into write and triage into read, as GitHub does
    legacy = {"maintain": "write", "triage": "read"}.get(perm, perm)
    u = render.user(ctx.world, p["username"])
    u["permissions"] = {
        "admin": perm == "admin",
        "maintain": perm in ("admin", "maintain"),
        "push": perm in ("admin", "maintain", "write"),
        "triage": perm in ("admin", "maintain", "write", "triage"),
        "pull": perm != "none",
    }
    u["role_name"] = role
    return Resp(200, {"permission": legacy, "role_name": role, "user": u})


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


# -- webhook deliveries (GitHub keeps them 3 days and never retries a failed one) -------------------


def _delivery_item(d: Any) -> dict[str, Any]:
    return {
        "id": d.id,
        "guid": d.guid,
        "delivered_at": iso(d.delivered_at or d.created_at),
        "redelivery": d.redelivery,
        "duration": round(d.duration, 3),
        "status": d.status_text,
        "status_code": d.response_status or 0,
        "event": d.event,
        "action": d.action,
        "installation_id": d.installation_id,
        "repository_id": d.repository_id,
        "throttled_at": None,
    }


def _cursor_page(ctx: Ctx, items: list[Any]) -> Resp:
    """Cursor paging as GitHub does it for deliveries: ``cursor`` names the first item of the page
    and the ``Link`` header carries the next page's cursor (no page numbers)."""
    try:
        per_page = max(1, min(100, int(ctx.query.get("per_page", "30"))))
    except ValueError as exc:
        raise SimError(422, "per_page must be an integer") from exc
    status = ctx.query.get("status")
    if status in ("success", "failure"):
        # classified by status_code as documented: a failure to connect (code 0) is in neither
        low, high = (200, 399) if status == "success" else (400, 599)
        items = [d for d in items if low <= (d.response_status or 0) <= high]
    start = 0
    cursor = ctx.query.get("cursor")
    if cursor:
        try:
            first = int(cursor.removeprefix("v1_"))
        except ValueError as exc:
            raise SimError(400, "Bad Request: invalid cursor") from exc
        start = next((i for i, d in enumerate(items) if d.id <= first), len(items))
    chunk = items[start : start + per_page]
    headers = {}
    if start + per_page < len(items):
        q = dict(ctx.query)
        q.update({"per_page": str(per_page), "cursor": f"v1_{items[start + per_page].id}"})
        base = ctx.world.settings.base_url.rstrip("/") + ctx.raw_path
        headers["Link"] = f'<{base}?{urlencode(q)}>; rel="next"'
    return Resp(200, [_delivery_item(d) for d in chunk], headers)


def _require_app(ctx: Ctx) -> None:
    if ctx.identity.kind != "app":
        raise SimError(401, "A JSON web token could not be decoded")


@route("GET", "/app/hook/deliveries", "apps/list-webhook-deliveries")
def app_hook_deliveries(ctx: Ctx, p: dict[str, str]) -> Resp:
    _require_app(ctx)
    return _cursor_page(ctx, ctx.world.hook_deliveries(app=True))


@route("GET", "/app/hook/deliveries/{delivery_id}", "apps/get-webhook-delivery")
def app_hook_delivery(ctx: Ctx, p: dict[str, str]) -> Resp:
    _require_app(ctx)
    wanted = _int(p["delivery_id"], "delivery_id")
    found = next((d for d in ctx.world.hook_deliveries(app=True) if d.id == wanted), None)
    if found is None:
        raise SimError(404, "Not Found")
    item = _delivery_item(found)
    item["url"] = ctx.world.settings.webhook_url
    item["request"] = {"headers": {"X-GitHub-Event": found.event}, "payload": found.payload}
    item["response"] = {"headers": {}, "payload": None}
    return Resp(200, item)


@route("POST", "/app/hook/deliveries/{delivery_id}/attempts", "apps/redeliver-webhook-delivery")
def app_redeliver(ctx: Ctx, p: dict[str, str]) -> Resp:
    _require_app(ctx)
    wanted = _int(p["delivery_id"], "delivery_id")
    if not any(d.id == wanted for d in ctx.world.hook_deliveries(app=True)):
        raise SimError(404, "Not Found")
    ctx.world.redeliver_id(wanted)
    return Resp(202, {})


def _repo_hook(ctx: Ctx, p: dict[str, str]) -> Repo:
    repo = _repo(ctx, p)
    _require_write(ctx, repo)  # reading a repository's hooks needs admin:repo_hook / write here
    if _int(p["hook_id"], "hook_id") != ctx.world.hook_id:
        raise SimError(404, "Not Found")
    return repo


@route("GET", "/repos/{owner}/{repo}/hooks/{hook_id}/deliveries", "repos/list-webhook-deliveries")
def repo_hook_deliveries(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo_hook(ctx, p)
    return _cursor_page(ctx, ctx.world.hook_deliveries(repo=repo.full_name))


@route(
    "POST",
    "/repos/{owner}/{repo}/hooks/{hook_id}/deliveries/{delivery_id}/attempts",
    "repos/redeliver-webhook-delivery",
)
def repo_redeliver(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo_hook(ctx, p)
    wanted = _int(p["delivery_id"], "delivery_id")
    if not any(d.id == wanted for d in ctx.world.hook_deliveries(repo=repo.full_name)):
        raise SimError(404, "Not Found")
    ctx.world.redeliver_id(wanted)
    return Resp(202, {})


# -- git data --------------------------------------------------------------------------------------


@route("POST", "/repos/{owner}/{repo}/git/blobs", "git/create-blob")
def create_blob(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_write(ctx, repo)
    b = _body(ctx)
    if not isinstance(b.get("content"), str):
        raise SimError(422, 'Invalid request.\n\n"content" is required and must be a string.')
    enc = b.get("encoding", "utf-8")
    if enc == "base64":
        data = base64.b64decode(b["content"])
    elif enc in ("utf-8", "utf8"):
        data = b["content"].encode()
    else:
        raise SimError(422, "encoding must be utf-8 or base64")
    sha = repo.objects.put_blob(data)
    return Resp(201, {"url": f"{render.api(ctx.world)}/repos/{repo.full_name}/git/blobs/{sha}", "sha": sha})


@route("GET", "/repos/{owner}/{repo}/git/blobs/{file_sha}", "git/get-blob")
def get_blob(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    data = repo.objects.blobs.get(p["file_sha"])
    if data is None:
        raise SimError(404, "Not Found")
    return Resp(
        200,
        {
            "sha": p["file_sha"],
            "node_id": render.node_id("B_", p["file_sha"]),
            "size": len(data),
            "url": f"{render.api(ctx.world)}/repos/{repo.full_name}/git/blobs/{p['file_sha']}",
            "content": base64.encodebytes(data).decode(),
            "encoding": "base64",
        },
    )


@route("POST", "/repos/{owner}/{repo}/git/trees", "git/create-tree")
def create_tree(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_write(ctx, repo)
    b = _body(ctx)
    items = b.get("tree")
    if not isinstance(items, list):
        raise SimError(422, 'Invalid request.\n\n"tree" is required and must be an array.')
    files: dict[str, tuple[str, str]] = {}
    base = b.get("base_tree")
    if base:
        if base not in repo.objects.trees:
            raise SimError(422, f"base_tree {base} is not a tree")
        files = repo.objects.flatten(base)
    try:
        for it in items:
            path, mode = it.get("path"), it.get("mode", "100644")
            if not path or mode not in ("100644", "100755", "040000", "160000", "120000"):
                raise SimError(422, f"tree entry needs a path and a valid mode, got {it!r}")
            if "content" in it and it["content"] is not None:
                files[path] = (mode, repo.objects.put_blob(str(it["content"]).encode()))
            elif it.get("sha") is None:
                for k in [k for k in files if k == path or k.startswith(path + "/")]:
                    del files[k]
            elif mode == "040000" or it.get("type") == "tree":
                if it["sha"] not in repo.objects.trees:
                    raise SimError(422, f"tree.sha {it['sha']} is not a valid tree")
                for k in [k for k in files if k == path or k.startswith(path + "/")]:
                    del files[k]
                for sub, v in repo.objects.flatten(it["sha"]).items():
                    files[f"{path}/{sub}"] = v
            else:
                if it["sha"] not in repo.objects.blobs:
                    raise SimError(422, f"tree.sha {it['sha']} is not a valid blob")
                files[path] = (mode, it["sha"])
        sha = repo.objects.build_tree(files)
    except GitError as exc:
        raise SimError(422, str(exc)) from exc
    return Resp(201, render_git.git_tree(ctx.world, repo, sha))


@route("GET", "/repos/{owner}/{repo}/git/trees/{tree_sha}", "git/get-tree")
def get_tree(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    sha = p["tree_sha"]
    if sha not in repo.objects.trees:
        try:
            commit = ctx.world.resolve(repo, sha)
        except SimError as exc:
            raise SimError(404, "Not Found") from exc
        sha = repo.objects.commits[commit].tree
    recursive = ctx.query.get("recursive") not in (None, "", "0", "false")
    return Resp(200, render_git.git_tree(ctx.world, repo, sha, recursive))


@route("POST", "/repos/{owner}/{repo}/git/commits", "git/create-commit")
def create_commit(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_write(ctx, repo)
    b = _body(ctx)
    if not isinstance(b.get("message"), str) or not isinstance(b.get("tree"), str):
        raise SimError(422, 'Invalid request.\n\n"message" and "tree" are required.')
    parents = b.get("parents") or []
    sig = ctx.world.signature(ctx.identity.actor(ctx.world))
    for role in ("author", "committer"):
        if isinstance(b.get(role), dict) and b[role].get("name") and b[role].get("email"):
            from sim.gitgraph import Signature

            s = Signature(b[role]["name"], b[role]["email"], sig.date)
            sig = s if role == "author" else sig
    try:
        sha = repo.objects.put_commit(b["tree"], list(parents), sig, sig, b["message"])
    except GitError as exc:
        raise SimError(422, str(exc)) from exc
    return Resp(201, render_git.git_commit(ctx.world, repo, sha))


@route("GET", "/repos/{owner}/{repo}/git/commits/{commit_sha}", "git/get-commit")
def get_commit(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    if p["commit_sha"] not in repo.objects.commits:
        raise SimError(404, "Not Found")
    return Resp(200, render_git.git_commit(ctx.world, repo, p["commit_sha"]))


@route(
    "GET",
    "/repos/{owner}/{repo}/commits/{commit_sha}/pulls",
    "repos/list-pull-requests-associated-with-commit",
)
def commit_pulls(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    sha = ctx.world.resolve(repo, p["commit_sha"])
    pulls = ctx.world.pulls_with_commit(repo.full_name, sha)
    return paginate(ctx, [render.pull_request_simple(ctx.world, repo, pr) for pr in pulls])


@route("GET", "/repos/{owner}/{repo}/commits/{ref}", "repos/get-commit")
def get_repo_commit(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    sha = ctx.world.resolve(repo, p["ref"])
    d = render_git.rest_commit(ctx.world, repo, sha)
    parents = repo.objects.commits[sha].parents
    d["files"] = render.diff_files(ctx.world, repo, repo.objects, parents[0], sha) if parents else []
    return Resp(200, d)


@route("GET", "/repos/{owner}/{repo}/git/ref/{ref}", "git/get-ref")
def get_ref(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    ref = "refs/" + p["ref"]
    if ref not in repo.refs or not ctx.world.ref_visible(repo, ref):
        raise SimError(404, "Not Found")
    return Resp(200, render_git.git_ref(ctx.world, repo, ref))


@route("GET", "/repos/{owner}/{repo}/git/refs/{ref}", "git/get-ref")
def get_ref_legacy(ctx: Ctx, p: dict[str, str]) -> Resp:
    # PyGithub's get_git_ref() still calls the legacy plural path; GitHub serves it too
    return get_ref(ctx, p)


@route("GET", "/repos/{owner}/{repo}/git/matching-refs/{ref}", "git/list-matching-refs")
def matching_refs(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    prefix = "refs/" + p["ref"]
    refs = sorted(r for r in repo.refs if r.startswith(prefix))
    return paginate(ctx, [render_git.git_ref(ctx.world, repo, r) for r in refs])


@route("GET", "/repos/{owner}/{repo}/git/matching-refs", "git/list-matching-refs")
def all_refs(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    return paginate(ctx, [render_git.git_ref(ctx.world, repo, r) for r in sorted(repo.refs)])


@route("GET", "/repos/{owner}/{repo}/git/refs", "git/list-matching-refs")
def list_refs(ctx: Ctx, p: dict[str, str]) -> Resp:
    return all_refs(ctx, p)


@route("POST", "/repos/{owner}/{repo}/git/refs", "git/create-ref")
def create_ref(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_write(ctx, repo)
    b = _body(ctx)
    ref, sha = b.get("ref"), b.get("sha")
    if not isinstance(ref, str) or not ref.startswith("refs/") or ref.count("/") < 2:
        raise SimError(422, "Reference name must start with 'refs/' and have at least two slashes.")
    if not isinstance(sha, str):
        raise SimError(422, 'Invalid request.\n\n"sha" is required.')
    ctx.world.set_ref(repo.full_name, ref, sha, create=True, pusher=ctx.identity.actor(ctx.world))
    lag = ctx.world.faults.ref_lag_s
    if lag > 0:  # eventual consistency: the new ref is not visible to the next calls for a moment
        import time as _time

        repo.ref_visible_at[ref] = _time.monotonic() + lag * ctx.world.settings.time_scale
    return Resp(201, render_git.git_ref(ctx.world, repo, ref))


@route("PATCH", "/repos/{owner}/{repo}/git/refs/{ref}", "git/update-ref")
def update_ref(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_write(ctx, repo)
    b = _body(ctx)
    ref = "refs/" + p["ref"]
    if ref not in repo.refs:
        raise SimError(422, "Reference does not exist")
    if not isinstance(b.get("sha"), str):
        raise SimError(422, 'Invalid request.\n\n"sha" is required.')
    ctx.world.set_ref(
        repo.full_name, ref, b["sha"], force=bool(b.get("force")), pusher=ctx.identity.actor(ctx.world)
    )
    return Resp(200, render_git.git_ref(ctx.world, repo, ref))


@route("DELETE", "/repos/{owner}/{repo}/git/refs/{ref}", "git/delete-ref")
def delete_ref(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_write(ctx, repo)
    ctx.world.delete_ref(repo.full_name, "refs/" + p["ref"])
    return Resp(204)


# -- pulls -----------------------------------------------------------------------------------------


@route("GET", "/repos/{owner}/{repo}/pulls", "pulls/list")
def list_pulls(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    state = ctx.query.get("state", "open")
    if state not in ("open", "closed", "all"):
        raise SimError(422, "state must be open, closed or all")
    head, base = ctx.query.get("head"), ctx.query.get("base")
    pulls = []
    for pr in repo.pulls.values():
        if state != "all" and pr.state != state:
            continue
        if base and pr.base_ref != base:
            continue
        if head:
            owner, _, branch = head.partition(":")
            hrepo = ctx.world.repos.get(pr.head_repo)
            if not branch or not hrepo or hrepo.owner != owner or pr.head_ref != branch:
                continue
        pulls.append(pr)
    direction = ctx.query.get("direction", "desc")
    pulls.sort(
        key=lambda x: x.created_at if ctx.query.get("sort", "created") == "created" else x.updated_at,
        reverse=direction == "desc",
    )
    if direction == "desc":
        pulls.sort(key=lambda x: x.number, reverse=True)
    return paginate(ctx, [render.pull_request_simple(ctx.world, repo, pr) for pr in pulls])


@route("POST", "/repos/{owner}/{repo}/pulls", "pulls/create")
def create_pull(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_auth(ctx)
    b = _body(ctx)
    for k in ("head", "base"):
        if not isinstance(b.get(k), str):
            raise SimError(422, f'Invalid request.\n\n"{k}" is required.')
    if not b.get("title"):
        raise SimError(422, 'Invalid request.\n\n"title" is required.')
    head_ref = "refs/heads/" + str(b["head"]).rpartition(":")[2]
    if head_ref in repo.refs and not ctx.world.ref_visible(repo, head_ref):
        # what GitHub answers when the branch pushed a moment ago is not visible yet
        raise SimError(
            422, "Validation Failed", [{"resource": "PullRequest", "field": "head", "code": "invalid"}]
        )
    pr = ctx.world.open_pull(
        repo.full_name,
        b["head"],
        b["base"],
        b["title"],
        b.get("body") or "",
        user=ctx.identity.actor(ctx.world),
    )
    return Resp(201, render.pull_request(ctx.world, repo, pr))


@route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}", "pulls/get")
def get_pull(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    pr = ctx.world.pull(repo.full_name, _int(p["pull_number"], "pull_number"))
    return Resp(200, render.pull_request(ctx.world, repo, pr))


@route("PATCH", "/repos/{owner}/{repo}/pulls/{pull_number}", "pulls/update")
def update_pull(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    n = _int(p["pull_number"], "pull_number")
    pr = ctx.world.pull(repo.full_name, n)
    actor = ctx.identity.actor(ctx.world)
    if actor != pr.user:
        _require_write(ctx, repo)
    b = _body(ctx)
    if b.get("state") not in (None, "open", "closed"):
        raise SimError(422, "state must be open or closed")
    ctx.world.update_pull(
        repo.full_name, n, title=b.get("title"), body=b.get("body"), state=b.get("state"), user=actor
    )
    return Resp(200, render.pull_request(ctx.world, repo, pr))


@route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/files", "pulls/list-files")
def pull_files(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    pr = ctx.world.pull(repo.full_name, _int(p["pull_number"], "pull_number"))
    return paginate(ctx, render.changed_files(ctx.world, repo, pr))


@route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/merge", "pulls/check-if-merged")
def check_merged(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    pr = ctx.world.pull(repo.full_name, _int(p["pull_number"], "pull_number"))
    return Resp(204) if pr.merged else Resp(404)  # documented without a body


@route("PUT", "/repos/{owner}/{repo}/pulls/{pull_number}/merge", "pulls/merge")
def merge_pull(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_write(ctx, repo)
    b = _body(ctx)
    sha = ctx.world.merge_pull(
        repo.full_name,
        _int(p["pull_number"], "pull_number"),
        merger=ctx.identity.actor(ctx.world),
        commit_title=b.get("commit_title"),
        sha=b.get("sha"),
    )
    return Resp(200, {"sha": sha, "merged": True, "message": "Pull Request successfully merged"})


# -- issues ----------------------------------------------------------------------------------------


@route("GET", "/repos/{owner}/{repo}/issues", "issues/list-for-repo")
def list_issues(ctx: Ctx, p: dict[str, str]) -> Resp:
    # As GitHub: pull requests are issues too (they carry `pull_request`); newest first by default.
    repo = _repo(ctx, p)
    state = ctx.query.get("state", "open")
    if state not in ("open", "closed", "all"):
        raise SimError(422, "state must be open, closed or all")
    creator = ctx.query.get("creator")
    items: list[tuple[float, int, dict[str, Any]]] = []
    for issue in repo.issues.values():
        items.append((issue.created_at, issue.number, render.rest_issue(ctx.world, repo, issue)))
    for pr in repo.pulls.values():
        items.append((pr.created_at, pr.number, render.hook_issue(ctx.world, repo, pr)))
    rows = [
        d
        for _, _, d in sorted(items, key=lambda t: (t[0], t[1]), reverse=ctx.query.get("direction") != "asc")
    ]
    if state != "all":
        rows = [d for d in rows if d["state"] == state]
    if creator:
        rows = [d for d in rows if d["user"]["login"] == creator]
    return paginate(ctx, rows)


@route("POST", "/repos/{owner}/{repo}/issues", "issues/create")
def create_issue(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_auth(ctx)
    b = _body(ctx)
    title = b.get("title")
    if not isinstance(title, str) or not title.strip():
        raise SimError(
            422, "Validation Failed", [{"resource": "Issue", "code": "missing_field", "field": "title"}]
        )
    body = b.get("body") or ""
    if not isinstance(body, str) or len(body) > 65536:
        raise SimError(422, "body must be a string of at most 65536 characters")
    labels = [str(x) for x in b.get("labels") or [] if isinstance(x, str)]
    issue = ctx.world.open_issue(repo.full_name, title, body, ctx.identity.actor(ctx.world), labels)
    url = f"{render.api(ctx.world)}/repos/{repo.full_name}/issues/{issue.number}"
    return Resp(201, render.rest_issue(ctx.world, repo, issue), {"Location": url})


@route("GET", "/repos/{owner}/{repo}/issues/{issue_number}", "issues/get")
def get_issue(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    n = _int(p["issue_number"], "issue_number")
    if n in repo.pulls:
        return Resp(200, render.hook_issue(ctx.world, repo, repo.pulls[n]))
    return Resp(200, render.rest_issue(ctx.world, repo, ctx.world.issue(repo.full_name, n)))


@route("PATCH", "/repos/{owner}/{repo}/issues/{issue_number}", "issues/update")
def update_issue(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_auth(ctx)
    n = _int(p["issue_number"], "issue_number")
    issue = ctx.world.issue(repo.full_name, n)
    if issue.user != ctx.identity.actor(ctx.world):
        _require_write(ctx, repo)
    b = _body(ctx)
    body = b.get("body")
    if body is not None and (not isinstance(body, str) or len(body) > 65536):
        raise SimError(422, "body must be a string of at most 65536 characters")
    fields = {k: b.get(k) for k in ("title", "body", "state", "state_reason") if k in b}
    issue = ctx.world.update_issue(repo.full_name, n, **fields)
    return Resp(200, render.rest_issue(ctx.world, repo, issue))


# -- issue comments and reactions ------------------------------------------------------------------


@route("GET", "/repos/{owner}/{repo}/issues/{issue_number}/comments", "issues/list-comments")
def list_comments(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    n = _int(p["issue_number"], "issue_number")
    if n not in repo.pulls:
        raise SimError(404, "Not Found")
    since = ctx.query.get("since")
    comments = sorted((c for c in repo.comments.values() if c.issue_number == n), key=lambda c: c.id)
    if since:
        comments = [c for c in comments if iso(c.updated_at) >= since]
    return paginate(ctx, [render.rest_comment(ctx.world, repo, c) for c in comments])


@route("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments", "issues/create-comment")
def create_comment(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_auth(ctx)
    b = _body(ctx)
    if not isinstance(b.get("body"), str) or not b["body"]:
        raise SimError(422, 'Invalid request.\n\n"body" is required.')
    if len(b["body"]) > 65536:
        raise SimError(422, "Body is too long (maximum is 65536 characters)")
    c = ctx.world.add_comment(
        repo.full_name, _int(p["issue_number"], "issue_number"), ctx.identity.actor(ctx.world), b["body"]
    )
    url = f"{render.api(ctx.world)}/repos/{repo.full_name}/issues/comments/{c.id}"
    return Resp(201, render.rest_comment(ctx.world, repo, c), {"Location": url})


@route("GET", "/repos/{owner}/{repo}/issues/comments/{comment_id}", "issues/get-comment")
def get_comment(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    c = ctx.world.comment(repo.full_name, _int(p["comment_id"], "comment_id"))
    return Resp(200, render.rest_comment(ctx.world, repo, c))


@route("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}", "issues/update-comment")
def update_comment(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_auth(ctx)
    cid = _int(p["comment_id"], "comment_id")
    c = ctx.world.comment(repo.full_name, cid)
    actor = ctx.identity.actor(ctx.world)
    if c.user != actor:
        _require_write(ctx, repo)
    b = _body(ctx)
    if not isinstance(b.get("body"), str):
        raise SimError(422, 'Invalid request.\n\n"body" is required.')
    ctx.world.edit_comment(repo.full_name, cid, b["body"], user=actor)
    return Resp(200, render.rest_comment(ctx.world, repo, c))


@route(
    "GET", "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions", "reactions/list-for-issue-comment"
)
def list_reactions(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    c = ctx.world.comment(repo.full_name, _int(p["comment_id"], "comment_id"))
    content = ctx.query.get("content")
    rs = [r for r in c.reactions if content is None or r.content == content]
    return paginate(ctx, [render.reaction(ctx.world, r) for r in rs])


@route(
    "POST",
    "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions",
    "reactions/create-for-issue-comment",
)
def create_reaction(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_auth(ctx)
    b = _body(ctx)
    if b.get("content") not in REACTIONS:
        raise SimError(422, f"content must be one of {', '.join(REACTIONS)}")
    r, created = ctx.world.add_reaction(
        repo.full_name, _int(p["comment_id"], "comment_id"), ctx.identity.actor(ctx.world), b["content"]
    )
    return Resp(201 if created else 200, render.reaction(ctx.world, r))


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


@route("POST", "/repos/{owner}/{repo}/issues/{issue_number}/labels", "issues/add-labels")
def add_labels(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_write(ctx, repo)
    b = _body(ctx)
    labels = b.get("labels")
    if not isinstance(labels, list) or not all(isinstance(x, str) and x for x in labels):
        raise SimError(422, "Invalid request.\n\nFor 'labels', an array of label names is required.")
    names = ctx.world.add_labels(
        repo.full_name, _int(p["issue_number"], "issue_number"), labels, ctx.identity.actor(ctx.world)
    )
    return Resp(200, [render.label(ctx.world, repo, n) for n in names])


@route("DELETE", "/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}", "issues/remove-label")
def remove_label(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_write(ctx, repo)
    names = ctx.world.remove_label(
        repo.full_name,
        _int(p["issue_number"], "issue_number"),
        unquote(p["name"]),
        ctx.identity.actor(ctx.world),
    )
    return Resp(200, [render.label(ctx.world, repo, n) for n in names])


@route("GET", "/repos/{owner}/{repo}/issues/{issue_number}/labels", "issues/list-labels-on-issue")
def list_labels(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    pr = ctx.world.pull(repo.full_name, _int(p["issue_number"], "issue_number"))
    return paginate(ctx, [render.label(ctx.world, repo, n) for n in pr.labels])


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


def error_body(exc: SimError) -> dict[str, Any]:
    body: dict[str, Any] = {
        "message": exc.message,
        "documentation_url": "https://docs.github.com/rest",
        "status": str(exc.status),
    }
    if exc.errors:
        body["errors"] = exc.errors
    return body


def encode(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, bytes):
        return body
    return json.dumps(body).encode()
