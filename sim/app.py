"""The sim's ASGI app: GitHub REST (/api/v3), OCI + Docker Hub registries, OAuth, admin API.

`admin_action` (sim.admin) is importable from here too.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import jwt
from fastapi import FastAPI, Request
from fastapi.responses import Response
from fastapi_offline import FastAPIOffline

from sim import github_api
from sim.admin import admin_action
from sim.app_routes import _json, admin_routes, oauth_routes, page_routes, registry_routes
from sim.engine import Engine
from sim.github_api import Ctx, Identity, Resp
from sim.world import SimError, SimSettings, World

__all__ = ["admin_action", "authenticate", "create_sim_app", "handle_github"]

UNCOUNTED_OPS = {"rate-limit/get"}


def authenticate(world: World, header: str | None, client: str) -> Identity:
    """Resolve an Authorization header to an identity (raises SimError 401 on bad credentials)."""
    if not header:
        return Identity("anonymous", login=None)
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() not in ("token", "bearer") or not value:
        raise SimError(401, "Bad credentials")
    value = value.strip()
    if value.count(".") == 2 and value.startswith("ey"):
        return _authenticate_jwt(world, value)
    info = world.tokens.get(value)
    if info is None:
        raise SimError(401, "Bad credentials")
    if info.expires_at is not None and info.expires_at < world.now():
        raise SimError(401, "Bad credentials (token expired)")
    if info.installation_id is not None:
        return Identity("installation", installation_id=info.installation_id, token=info)
    return Identity("user", login=info.login, token=info)


def _authenticate_jwt(world: World, token: str) -> Identity:
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
        app_id = int(claims["iss"])
    except (jwt.PyJWTError, KeyError, ValueError) as exc:
        raise SimError(401, "A JSON web token could not be decoded") from exc
    app = world.apps.get(app_id)
    if app is None:
        raise SimError(401, f"Integration not found for iss {app_id}")
    try:
        jwt.decode(
            token,
            app.public_key_pem,
            algorithms=["RS256"],
            leeway=60,
            options={"require": ["exp", "iat", "iss"]},
        )
    except jwt.PyJWTError as exc:
        raise SimError(401, f"'Expiration time' claim ('exp') or signature is invalid: {exc}") from exc
    if claims["exp"] - claims["iat"] > 600 + 60:
        raise SimError(401, "'Expiration time' claim ('exp') is too far in the future")
    return Identity("app", app_id=app_id)


def _etag(body: bytes, identity: Identity) -> str:
    h = hashlib.sha256(body + (identity.budget_key or "").encode()).hexdigest()[:40]
    return f'W/"{h}"'


def _etag_matches(header: str | None, etag: str) -> bool:
    if not header:
        return False
    want = etag.removeprefix("W/")
    return any(t.strip().removeprefix("W/") == want or t.strip() == "*" for t in header.split(","))


def _rate_headers(world: World, identity: Identity) -> dict[str, str]:
    key = identity.budget_key
    if key is None:
        return {}
    b = world.budget(key)
    return {
        "X-RateLimit-Limit": str(b.limit),
        "X-RateLimit-Remaining": str(max(0, b.limit - b.used)),
        "X-RateLimit-Reset": str(int(b.reset)),
        "X-RateLimit-Used": str(b.used),
        "X-RateLimit-Resource": "core",
    }


async def handle_github(world: World, request: Request, path: str) -> Response:
    method = request.method
    found = github_api.match(method, path)
    if found is None:
        status = 405 if github_api.match_any_method(path) else 404
        world.record_call(f"{method} /{path.lstrip('/')}" if status == 404 else "unknown", status, "unrouted")
        return _json(
            status,
            {
                "message": "Not Found" if status == 404 else "Method Not Allowed",
                "documentation_url": "https://docs.github.com/rest",
            },
        )
    op, handler, params = found
    fault_latency = world.faults.latency_ms.get(op, world.faults.latency_ms.get("*", 0))
    if fault_latency:
        await asyncio.sleep(fault_latency / 1000)
    raw = await request.body()
    return await asyncio.to_thread(_handle_sync, world, request, method, path, op, handler, params, raw)


def _handle_sync(
    world: World,
    request: Request,
    method: str,
    path: str,
    op: str,
    handler: github_api.Handler,
    params: dict[str, str],
    raw: bytes,
) -> Response:
    base_headers = {
        "X-GitHub-Request-Id": secrets.token_hex(8).upper(),
        "X-GitHub-Api-Version-Selected": "2022-11-28",
    }
    try:
        identity = authenticate(
            world, request.headers.get("authorization"), request.client.host if request.client else ""
        )
    except SimError as exc:
        world.record_call(op, exc.status, "unauthenticated")
        return _json(exc.status, github_api.error_body(exc), base_headers)
    _log_request(world, op, method, path, identity)
    with world.lock:
        refused = _fault(world, op, identity, base_headers)
        key = identity.budget_key
        counted = key is not None and op not in UNCOUNTED_OPS
        if refused is None and counted:
            refused = _over_budget(world, op, identity, base_headers)
        if refused is not None:
            return refused
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except json.JSONDecodeError:
                world.record_call(op, 400, "counted" if counted else "free")
                return _json(400, {"message": "Problems parsing JSON"}, base_headers)
        query = {k: v for k, v in request.query_params.items()}
        ctx = Ctx(world, identity, method, query, body, "/api/v3/" + path.lstrip("/"))
        try:
            resp = handler(ctx, params)
        except SimError as exc:
            resp = Resp(exc.status, github_api.error_body(exc), exc.headers)
        return _respond(world, request, op, identity, resp, base_headers, counted=counted)


def _log_request(world: World, op: str, method: str, path: str, identity: Identity) -> None:
    token = identity.token.token if identity.token is not None else None
    world.log_request(
        {
            "op": op,
            "method": method,
            "path": path,
            "kind": identity.kind,
            "installation_id": identity.installation_id,
            "login": identity.login,
            "app_id": identity.app_id,
            # which token, without keeping it: a test compares fingerprints
            "token_sha256": hashlib.sha256(token.encode()).hexdigest()[:16] if token else None,
        }
    )


def _fault(world: World, op: str, identity: Identity, base_headers: dict[str, str]) -> Response | None:
    """An injected fault's answer: before the operation runs, spending no budget."""
    pending = world.faults.fail_next.get(op) or world.faults.fail_next.get("*")
    if not pending:
        return None
    status = pending.pop(0)
    headers = dict(base_headers)
    headers.update(_rate_headers(world, identity))
    if status in (403, 429):
        # GitHub sends Retry-After on some secondary limits and not on others
        if world.faults.retry_after_header:
            headers["Retry-After"] = str(world.faults.retry_after)
        msg = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
    else:
        msg = {502: "Server Error", 503: "Service Unavailable", 500: "Internal Server Error"}.get(
            status, "Simulated failure"
        )
    world.record_call(op, status, "fault")
    return _json(status, {"message": msg, "documentation_url": "https://docs.github.com/rest"}, headers)


def _over_budget(world: World, op: str, identity: Identity, base_headers: dict[str, str]) -> Response | None:
    key = identity.budget_key
    assert key is not None
    b = world.budget(key)
    if b.used < b.limit:
        return None
    headers = dict(base_headers)
    headers.update(_rate_headers(world, identity))
    world.record_call(op, 403, "rejected")
    return _json(
        403,
        {
            "message": f"API rate limit exceeded for {key}.",
            "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
        },
        headers,
    )


def _respond(
    world: World,
    request: Request,
    op: str,
    identity: Identity,
    resp: Resp,
    base_headers: dict[str, str],
    *,
    counted: bool,
) -> Response:
    """The handler's answer with GitHub's headers: ETag (a matching If-None-Match is a free 304),
    the rate-limit headers, and the call counted against the identity's budget."""
    payload = github_api.encode(resp.body)
    headers = dict(base_headers)
    headers.update(resp.headers)
    if request.method == "GET" and resp.status == 200:
        etag = _etag(payload, identity)
        headers["ETag"] = etag
        headers["Cache-Control"] = "private, max-age=60, s-maxage=60"
        if _etag_matches(request.headers.get("if-none-match"), etag):
            headers.update(_rate_headers(world, identity))
            world.record_call(op, 304, "not_modified")
            return Response(status_code=304, headers=headers)
    if counted:
        key = identity.budget_key
        assert key is not None
        world.budget(key).used += 1
    headers.update(_rate_headers(world, identity))
    world.record_call(op, resp.status, "counted" if counted else "free")
    if resp.status in (204, 304) or (resp.body is None and resp.status == 302):
        return Response(status_code=resp.status, headers=headers)
    return Response(payload, status_code=resp.status, headers=headers, media_type=resp.content_type)


def create_sim_app(
    world: World | None = None, settings: SimSettings | None = None, start_engine: bool = True
) -> FastAPI:
    world = world or World(settings)
    engine = Engine(world)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if start_engine:
            engine.start()
        try:
            yield
        finally:
            engine.stop()

    # Docs assets from the installed package: the admin docs work offline too.
    app = FastAPIOffline(
        title="sweepbot sim",
        lifespan=lifespan,
        docs_url="/_admin/docs",
        redoc_url=None,
        openapi_url="/_admin/openapi.json",
        static_url="/_admin/docs-static",
    )
    app.state.world = world
    app.state.engine = engine

    @app.api_route("/api/v3/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    async def github(request: Request, path: str) -> Response:
        return await handle_github(world, request, "/" + path)

    registry_routes(app, world)
    oauth_routes(app, world)
    admin_routes(app, world)
    page_routes(app, world)  # last: `/{owner}/{repo}` would shadow the routes above
    return app
