"""The sim's ASGI app: GitHub REST (/api/v3), OCI + Docker Hub registries, OAuth, admin API."""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from html import escape as html_escape
from typing import Any
from urllib.parse import urlencode

import jwt
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from sim import github_api, pages, render
from sim.engine import Engine
from sim.github_api import Ctx, Identity, Resp
from sim.world import SimError, SimSettings, World, iso

UNCOUNTED_OPS = {"rate-limit/get"}


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(
        json.dumps(body),
        status_code=status,
        headers=headers or {},
        media_type="application/json; charset=utf-8",
    )


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
    with world.lock:
        # injected faults answer before the operation runs and spend no budget
        pending = world.faults.fail_next.get(op) or world.faults.fail_next.get("*")
        if pending:
            status = pending.pop(0)
            headers = dict(base_headers)
            headers.update(_rate_headers(world, identity))
            if status in (403, 429):
                # GitHub sends Retry-After on some secondary limits and not on others
                if world.faults.retry_after_header:
                    headers["Retry-After"] = str(world.faults.retry_after)
                msg = (
                    "You have exceeded a secondary rate limit. "
                    "Please wait a few minutes before you try again."
                )
            else:
                msg = {502: "Server Error", 503: "Service Unavailable", 500: "Internal Server Error"}.get(
                    status, "Simulated failure"
                )
            world.record_call(op, status, "fault")
            return _json(
                status, {"message": msg, "documentation_url": "https://docs.github.com/rest"}, headers
            )
        key = identity.budget_key
        counted = key is not None and op not in UNCOUNTED_OPS
        if counted:
            assert key is not None
            b = world.budget(key)
            if b.used >= b.limit:
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
        payload = github_api.encode(resp.body)
        headers = dict(base_headers)
        headers.update(resp.headers)
        if method == "GET" and resp.status == 200:
            etag = _etag(payload, identity)
            headers["ETag"] = etag
            headers["Cache-Control"] = "private, max-age=60, s-maxage=60"
            if _etag_matches(request.headers.get("if-none-match"), etag):
                headers.update(_rate_headers(world, identity))
                world.record_call(op, 304, "not_modified")
                return Response(status_code=304, headers=headers)
        if counted:
            assert key is not None
            world.budget(key).used += 1
        headers.update(_rate_headers(world, identity))
        world.record_call(op, resp.status, "counted" if counted else "free")
        if resp.status in (204, 304) or (resp.body is None and resp.status == 302):
            return Response(status_code=resp.status, headers=headers)
        return Response(payload, status_code=resp.status, headers=headers, media_type=resp.content_type)


# -- registry --------------------------------------------------------------------------------------


def _registry_challenge(world: World, name: str) -> Response:
    realm = world.settings.base_url.rstrip("/") + "/token"
    hdr = f'Bearer realm="{realm}",service="sim-registry",scope="repository:{name}:pull"'
    return _json(
        401,
        {"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]},
        {"WWW-Authenticate": hdr, "Docker-Distribution-Api-Version": "registry/2.0"},
    )


def oci_tags(world: World, request: Request, name: str) -> Response:
    auth = request.headers.get("authorization", "")
    if not auth.lower().startswith("bearer ") or auth[7:].strip() not in world.registry_tokens:
        return _registry_challenge(world, name)
    with world.lock:
        img = world.images.get(name)
        if img is None:
            return _json(
                404,
                {
                    "errors": [
                        {
                            "code": "NAME_UNKNOWN",
                            "message": "repository name not known to registry",
                            "detail": {"name": name},
                        }
                    ]
                },
                {"Docker-Distribution-Api-Version": "registry/2.0"},
            )
        tags = sorted(img.tags)
    last = request.query_params.get("last")
    n_raw = request.query_params.get("n")
    if last:
        tags = [t for t in tags if t > last]
    headers = {"Docker-Distribution-Api-Version": "registry/2.0"}
    if n_raw is not None:
        try:
            n = int(n_raw)
        except ValueError:
            return _json(
                400,
                {
                    "errors": [
                        {
                            "code": "PAGINATION_NUMBER_INVALID",
                            "message": "invalid number of results requested",
                        }
                    ]
                },
            )
        if n == 0:
            return _json(200, {"name": name, "tags": []}, headers)
        if len(tags) > n:
            tags = tags[:n]
            headers["Link"] = f'</v2/{name}/tags/list?{urlencode({"last": tags[-1], "n": n})}>; rel="next"'
    return _json(200, {"name": name, "tags": tags}, headers)


def hub_tags(world: World, request: Request, ns: str, repo: str) -> Response:
    name = f"{ns}/{repo}"
    try:
        page = max(1, int(request.query_params.get("page", "1")))
        page_size = max(1, min(100, int(request.query_params.get("page_size", "10"))))
    except ValueError:
        return _json(400, {"message": "page and page_size must be integers", "errinfo": {}})
    with world.lock:
        img = world.images.get(name)
        if img is None:
            return _json(404, {"message": "object not found", "errinfo": {}})
        tags = sorted(img.tags.values(), key=lambda t: -t.seq)  # newest first, as Hub's default ordering
    chunk = tags[(page - 1) * page_size : page * page_size]
    if not chunk and page > 1:
        return _json(404, {"message": "object not found", "errinfo": {}})
    base = world.settings.base_url.rstrip("/") + f"/hub/v2/namespaces/{ns}/repositories/{repo}/tags"
    nxt = (
        f"{base}?{urlencode({'page': page + 1, 'page_size': page_size})}"
        if page * page_size < len(tags)
        else None
    )
    prev = f"{base}?{urlencode({'page': page - 1, 'page_size': page_size})}" if page > 1 else None
    results = []
    for t in chunk:
        pushed = datetime.fromtimestamp(t.pushed_at, UTC).isoformat().replace("+00:00", "Z")
        results.append(
            {
                "creator": 1,
                "id": int(t.digest[7:15], 16),
                "last_updated": pushed,
                "last_updater": 1,
                "last_updater_username": ns,
                "name": t.name,
                "repository": abs(hash(name)) % 10**8,
                "full_size": 10**9,
                "v2": True,
                "tag_status": "active",
                "tag_last_pulled": pushed,
                "tag_last_pushed": pushed,
                "media_type": "application/vnd.oci.image.index.v1+json",
                "content_type": "image",
                "digest": t.digest,
                "images": [
                    {
                        "architecture": "amd64",
                        "features": "",
                        "variant": None,
                        "digest": t.digest,
                        "os": "linux",
                        "os_features": "",
                        "os_version": None,
                        "size": 10**9,
                        "status": "active",
                        "last_pulled": pushed,
                        "last_pushed": pushed,
                    }
                ],
            }
        )
    return _json(200, {"count": len(tags), "next": nxt, "previous": prev, "results": results})


# -- admin -----------------------------------------------------------------------------------------


def _delivery_view(d: Any, full: bool = False) -> dict[str, Any]:
    v = {
        "id": d.id,
        "guid": d.guid,
        "event": d.event,
        "action": d.action,
        "status": d.status,
        "attempts": d.attempts,
        "response_status": d.response_status,
        "redelivery": d.redelivery,
        "duplicate_of": d.duplicate_of,
        "created_at": iso(d.created_at),
    }
    if full:
        v["payload"] = d.payload
    return v


def admin_action(world: World, action: str, body: dict[str, Any]) -> Any:
    """Every admin operation by name; the HTTP admin routes and tests share this."""
    from sim import scenario as scen

    b = body
    if action == "users":
        u = world.add_user(b["login"], type=b.get("type", "User"), name=b.get("name"), email=b.get("email"))
        if b.get("token"):
            world.add_token(b["token"], login=u.login)
        for org in b.get("orgs", []):
            world.add_org_member(org, u.login)
        return {"login": u.login, "id": u.id, "type": u.type}
    if action == "tokens":
        world.add_token(b["token"], login=b.get("login"), installation_id=b.get("installation_id"))
        return {"token": b["token"]}
    if action == "org-members":
        world.add_org_member(b["org"], b["login"], team=b.get("team"), role=b.get("role", "member"))
        return {"ok": True}
    if action == "repos":
        r = world.add_repo(
            b["full_name"],
            default_branch=b.get("default_branch", "main"),
            private=bool(b.get("private", False)),
            description=b.get("description"),
        )
        if b.get("files"):
            world.commit_files(
                r.full_name,
                r.default_branch,
                b["files"],
                b.get("message", "Initial commit"),
                author=b.get("author", r.owner),
            )
        return {"full_name": r.full_name, "id": r.id}
    if action == "custom-roles":
        world.add_custom_role(b["name"], b["base_role"])
        return {"name": b["name"], "base_role": b["base_role"]}
    if action == "delete-repo":
        world.delete_repo(b["repo"])
        return {"ok": True}
    if action == "installations":
        inst = world.add_installation(
            int(b["app_id"]), b["account"], b.get("repos", []), installation_id=b.get("installation_id")
        )
        return {"installation_id": inst.id}
    if action == "permissions":
        world.set_permission(b["repo"], b["login"], b["permission"])
        return {"ok": True}
    if action == "regressions":
        reg = world.inject_regression(
            b["repo"],
            world.resolve(world.repo(b["repo"]), b["commit"]),
            float(b.get("factor", 0.05)),
            fixed_by=b.get("fixed_by"),
            metric=str(b.get("metric", "tpot")),
        )
        return {"index": world.regressions.index(reg), **reg.__dict__}
    if action == "fix-regression":
        fixed = world.fix_regression(
            world.regressions[int(b.get("index", 0))],
            world.resolve(
                world.repo(b.get("repo") or world.regressions[int(b.get("index", 0))].repo), b["fixed_by"]
            ),
        )
        return fixed.__dict__
    if action == "commits":
        sha = world.commit_files(
            b["repo"],
            b.get("branch", "main"),
            b["files"],
            b.get("message", "Update"),
            author=b.get("author", "sim"),
        )
        return {"sha": sha}
    if action == "branches":
        repo = world.repo(b["repo"])
        sha = b.get("sha") or world.resolve(repo, b.get("from"))
        world.set_ref(b["repo"], f"refs/heads/{b['branch']}", sha, force=True, pusher=b.get("author", "sim"))
        return {"ref": f"refs/heads/{b['branch']}", "sha": sha}
    if action == "pulls":
        pr = world.open_pull(
            b["repo"],
            b["head"],
            b.get("base", "main"),
            b["title"],
            b.get("body", ""),
            user=b.get("user"),
            number=b.get("number"),
            head_repo=b.get("head_repo"),
        )
        return {"number": pr.number}
    if action == "merge":
        return {"sha": world.merge_pull(b["repo"], int(b["number"]), merger=b.get("user"))}
    if action == "close":
        world.close_pull(b["repo"], int(b["number"]), user=b.get("user"))
        return {"ok": True}
    if action == "comments":
        c = world.add_comment(b["repo"], int(b["number"]), b["user"], b["body"])
        return {"id": c.id}
    if action == "edit-comment":
        world.edit_comment(b["repo"], int(b["id"]), b["body"], user=b.get("user"))
        return {"ok": True}
    if action == "tags":
        t = world.push_tag(b["image"], b["tag"])
        return {"tag": t.name, "digest": t.digest}
    if action == "delete-tag":
        world.delete_tag(b["image"], b["tag"])
        return {"ok": True}
    if action == "retention":
        world.set_retention(b["image"], b.get("keep_nightlies"))
        return {"ok": True}
    if action == "runners":
        world.set_runners(b["label"], int(b["count"]))
        return {lbl: len(rs) for lbl, rs in world.runners.items()}
    if action == "faults":
        f = world.faults
        if "fail_next" in b:
            f.fail_next.setdefault(b.get("operation", "*"), []).extend(
                [int(b.get("status", 502))] * int(b["fail_next"])
            )
        for k in ("retry_after", "runner_lost_next", "benchmark_fail_next"):
            if k in b:
                setattr(f, k, int(b[k]))
        for k in ("retry_after_header", "forbid_permission_check"):
            if k in b:
                setattr(f, k, bool(b[k]))
        for k in ("ref_lag_s", "mergeable_delay_s"):
            if k in b:
                setattr(f, k, float(b[k]))
        if "queue_delay_s" in b:
            f.queue_delay_s = float(b["queue_delay_s"])
        if "latency_ms" in b:
            f.latency_ms[b.get("operation", "*")] = int(b["latency_ms"])
        if "dispatch_ignore_run_details" in b:
            f.dispatch_ignore_run_details = bool(b["dispatch_ignore_run_details"])
        if b.get("clear"):
            world.faults = type(f)()
        return {"ok": True}
    if action == "webhook":
        if "url" in b:
            world.settings.webhook_url = b["url"]
        if "secret" in b:
            world.settings.webhook_secret = b["secret"]
        if "drop_next" in b:
            world.drop_next_deliveries = int(b["drop_next"])
        if "duplicate" in b:
            world.duplicate_deliveries = bool(b["duplicate"])
        return {
            "url": world.settings.webhook_url,
            "drop_next": world.drop_next_deliveries,
            "duplicate": world.duplicate_deliveries,
        }
    if action == "redeliver":
        return _delivery_view(world.redeliver(b["guid"]))
    if action == "time-scale":
        world.settings.time_scale = float(b["time_scale"])
        return {"time_scale": world.settings.time_scale}
    if action == "oauth":
        if "user" in b:
            world.oauth_default_user = b["user"]
        if b.get("client_id"):
            world.oauth_clients[b["client_id"]] = b.get("client_secret", "")
        return {"user": world.oauth_default_user}
    if action == "apps":
        app = world.add_app(int(b["app_id"]), b["slug"], b["public_key_pem"], b.get("owner", "sim"))
        inst = world.add_installation(
            app.id,
            b.get("account", b.get("owner", "sim")),
            b.get("repos", []),
            installation_id=b.get("installation_id"),
        )
        return {"app_id": app.id, "installation_id": inst.id}
    if action == "files":
        # load real files (e.g. fixture configs) into a repo in one commit
        sha = world.commit_files(
            b["repo"],
            b.get("branch", "main"),
            b["files"],
            b.get("message", "Add files"),
            author=b.get("author", "sim"),
        )
        return {"sha": sha}
    if action == "nightly/load":  # the nightly regression story, on top of the loaded seed world
        from sim.nightly_scenario import NightlyRegressionStory

        story = NightlyRegressionStory(world, registry_url=b.get("registry_url"))
        status = story.load()
        world.nightly_story = story
        return status
    if action == "nightly/step":
        if world.nightly_story is None:
            raise SimError(409, "load the nightly story first (POST /_admin/nightly/load)")
        return world.nightly_story.step()
    if action == "scenario/step":
        return scen.driver(world).step()
    if action.startswith("scenario/") and action.endswith("/load"):
        return scen.load(world, action[len("scenario/") : -len("/load")], variant=b.get("variant"))
    raise SimError(404, f"unknown admin action {action!r}")


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

    from fastapi_offline import FastAPIOffline

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

    @app.get("/v2/")
    def oci_base(request: Request) -> Response:
        auth = request.headers.get("authorization", "")
        if not auth.lower().startswith("bearer ") or auth[7:].strip() not in world.registry_tokens:
            return _registry_challenge(world, "")
        return _json(200, {})

    @app.get("/v2/{name:path}/tags/list")
    def oci_list(request: Request, name: str) -> Response:
        return oci_tags(world, request, name)

    @app.get("/token")
    def registry_token(scope: str = "", service: str = "") -> Response:
        tok = secrets.token_urlsafe(24)
        with world.lock:
            world.registry_tokens.add(tok)
        return _json(
            200, {"token": tok, "access_token": tok, "expires_in": 300, "issued_at": iso(time.time())}
        )

    @app.get("/hub/v2/namespaces/{ns}/repositories/{repo}/tags")
    def hub(request: Request, ns: str, repo: str) -> Response:
        return hub_tags(world, request, ns, repo)

    @app.get("/hub/v2/repositories/{ns}/{repo}/tags")
    def hub_legacy(request: Request, ns: str, repo: str) -> Response:
        return hub_tags(world, request, ns, repo)

    @app.get("/_blobs/artifacts/{artifact_id}.zip")
    def artifact_blob(artifact_id: int) -> Response:
        art = world.artifacts.get(artifact_id)
        if art is None:
            return _json(404, {"message": "Not Found"})
        return Response(
            art.data,
            media_type="application/zip",
            headers={"Content-Disposition": f'attachment; filename="{art.name}.zip"'},
        )

    # -- OAuth web flow ----------------------------------------------------------------------------
    @app.get("/login/oauth/authorize")
    def oauth_authorize(
        request: Request, client_id: str = "", redirect_uri: str = "", state: str = "", login: str = ""
    ) -> Response:
        user = login or world.oauth_default_user
        if not user or user not in world.users:
            return HTMLResponse(
                "<h1>sim OAuth</h1><p>Pick a user: add <code>?login=NAME</code> or set "
                '<code>POST /_admin/oauth {"user": NAME}</code>.</p>',
                status_code=400,
            )
        if not redirect_uri:
            return _json(400, {"error": "redirect_uri is required"})
        code = secrets.token_hex(10)
        with world.lock:
            world.oauth_codes[code] = user
        sep = "&" if "?" in redirect_uri else "?"
        return RedirectResponse(
            f"{redirect_uri}{sep}{urlencode({'code': code, 'state': state})}", status_code=302
        )

    @app.post("/login/oauth/access_token")
    async def oauth_token(request: Request) -> Response:
        form: dict[str, Any]
        if request.headers.get("content-type", "").startswith("application/json"):
            form = await request.json()
        else:
            form = dict(await request.form())
        code = str(form.get("code", ""))
        with world.lock:
            user = world.oauth_codes.pop(code, None)
        if user is None:
            body = {
                "error": "bad_verification_code",
                "error_description": "The code passed is incorrect or expired.",
            }
        else:
            tok = "gho_" + secrets.token_hex(18)
            world.add_token(tok, login=user)
            body = {"access_token": tok, "token_type": "bearer", "scope": "read:org"}
        if "application/json" in request.headers.get("accept", ""):
            return _json(200, body)
        return Response(urlencode(body), media_type="application/x-www-form-urlencoded")

    # -- admin -------------------------------------------------------------------------------------
    @app.get("/_admin/state")
    def admin_state() -> Response:
        with world.lock:
            return _json(
                200,
                {
                    "repos": {
                        n: {
                            "refs": r.refs,
                            "pulls": {
                                k: {
                                    "state": p.state,
                                    "merged": p.merged,
                                    "merge_commit_sha": p.merge_commit_sha,
                                    "title": p.title,
                                }
                                for k, p in r.pulls.items()
                            },
                            "comments": len(r.comments),
                        }
                        for n, r in world.repos.items()
                    },
                    "images": {n: sorted(i.tags) for n, i in world.images.items()},
                    "runners": {
                        lbl: {"total": len(rs), "busy": sum(1 for r in rs if r.busy_job)}
                        for lbl, rs in world.runners.items()
                    },
                    "runs": len(world.runs),
                    "deliveries": len(world.deliveries),
                },
            )

    @app.get("/_admin/calls")
    def admin_calls() -> Response:
        return _json(200, world.call_summary())

    @app.post("/_admin/calls/reset")
    def admin_calls_reset() -> Response:
        world.reset_calls()
        return _json(200, {"ok": True})

    @app.get("/_admin/requests")
    def admin_requests() -> Response:
        with world.lock:
            return _json(200, list(world.requests))

    @app.get("/_admin/deliveries")
    def admin_deliveries(full: bool = False) -> Response:
        with world.lock:
            return _json(200, [_delivery_view(d, full) for d in world.deliveries])

    @app.get("/_admin/runs")
    def admin_runs() -> Response:
        with world.lock:
            return _json(
                200,
                [
                    {
                        "id": r.id,
                        "name": r.name,
                        "status": r.status,
                        "conclusion": r.conclusion,
                        "error": r.error,
                        "jobs": [
                            {
                                "id": j,
                                "status": world.jobs[j].status,
                                "conclusion": world.jobs[j].conclusion,
                                "runner": world.jobs[j].runner_name,
                                "result_name": world.jobs[j].point.get("result-name"),
                            }
                            for j in r.jobs
                        ],
                    }
                    for r in world.runs.values()
                ],
            )

    @app.get("/_admin/scenario")
    def admin_scenario() -> Response:
        from sim import scenario as scen

        if world.scenario is None:
            return _json(200, {"loaded": False})
        return _json(200, scen.driver(world).status())

    @app.get("/_admin/comments/{owner}/{repo}/{number}")
    def admin_comments(owner: str, repo: str, number: int) -> Response:
        with world.lock:
            r = world.repo(f"{owner}/{repo}")
            return _json(
                200,
                [
                    {
                        "id": c.id,
                        "user": c.user,
                        "body": c.body,
                        "reactions": [x.content for x in c.reactions],
                    }
                    for c in sorted(r.comments.values(), key=lambda c: c.id)
                    if c.issue_number == number
                ],
            )

    @app.post("/_admin/{action:path}")
    async def admin_post(request: Request, action: str) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            return _json(400, {"message": "admin body must be JSON"})
        try:
            result = await asyncio.to_thread(_locked_admin, world, action, body)
        except SimError as exc:
            return _json(exc.status, {"message": exc.message})
        except KeyError as exc:
            return _json(422, {"message": f"missing field {exc} for admin action {action!r}"})
        return _json(200, result)

    # -- html pages: what github.com serves at the html_url of each object ------------------------
    def page(render_page: Any, *args: Any) -> Response:
        try:
            with world.lock:
                return HTMLResponse(render_page(world, *args))
        except SimError as exc:
            return HTMLResponse(
                f"<!doctype html><title>Not Found</title><h1>404</h1><p>{html_escape(exc.message)}</p>",
                status_code=exc.status,
            )

    @app.get("/{owner}/{repo}/pull/{number}/files", response_class=HTMLResponse, include_in_schema=False)
    def pull_files_html(owner: str, repo: str, number: int) -> Response:
        return page(pages.pull_files_page, owner, repo, number)

    @app.get("/{owner}/{repo}/pull/{number}", response_class=HTMLResponse, include_in_schema=False)
    def pull_html(owner: str, repo: str, number: int) -> Response:
        return page(pages.pull_page, owner, repo, number)

    @app.get("/{owner}/{repo}/commit/{sha}", response_class=HTMLResponse, include_in_schema=False)
    def commit_html(owner: str, repo: str, sha: str) -> Response:
        return page(pages.commit_page, owner, repo, sha)

    @app.get("/{owner}/{repo}/actions/runs/{run_id}", response_class=HTMLResponse, include_in_schema=False)
    def run_html(owner: str, repo: str, run_id: int) -> Response:
        return page(pages.run_page, owner, repo, run_id)

    @app.get(
        "/{owner}/{repo}/actions/runs/{run_id}/job/{job_id}",
        response_class=HTMLResponse,
        include_in_schema=False,
    )
    def job_html(owner: str, repo: str, run_id: int, job_id: int) -> Response:
        return page(pages.job_page, owner, repo, run_id, job_id)

    @app.get("/{owner}/{repo}", response_class=HTMLResponse, include_in_schema=False)
    def repo_html(owner: str, repo: str) -> Response:
        return page(pages.repo_page, owner, repo)

    @app.get("/")
    def index() -> Response:
        s = world.settings
        return JSONResponse(
            {
                "sim": "sweepbot",
                "github_api_url": s.base_url.rstrip("/") + "/api/v3",
                "registry": s.base_url.rstrip("/") + "/v2/",
                "dockerhub": s.base_url.rstrip("/") + "/hub/v2/",
                "admin": s.base_url.rstrip("/") + "/_admin/docs",
                "api_root": render.api(world),
            }
        )

    return app


def _locked_admin(world: World, action: str, body: dict[str, Any]) -> Any:
    with world.lock:
        return admin_action(world, action, body)
