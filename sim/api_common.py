"""The REST layer's shared parts: identities, the request context, responses, the route table
and its helpers (pagination, permission checks, error bodies). sim.github_api puts the
resource modules (sim.api_*) together.

Formerly one module; what it said:
GitHub REST operations served by the sim, one handler per operation id.

The table `ROUTES` maps (method, path template) to an operation id from the OpenAPI subset (or a
documented GitHub operation id for the few extra endpoints PyGithub needs) and a handler.
Handlers are plain functions of (ctx, path params) returning `Resp`; auth, budget, ETag,
faults and accounting are applied around them in `sim.app`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from sim.world import Repo, SimError, TokenInfo, World


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
