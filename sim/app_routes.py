"""The sim app's routes besides the GitHub REST API: the OCI and Docker Hub registries, artifact
blobs, the OAuth web flow, the admin API and the HTML pages (sim.app's `create_sim_app` mounts them)."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from datetime import UTC, datetime
from html import escape as html_escape
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from sim import naming, pages, render
from sim import scenario as scen
from sim.admin import _delivery_view, _locked_admin
from sim.world import SimError, World, iso


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(
        json.dumps(body),
        status_code=status,
        headers=headers or {},
        media_type="application/json; charset=utf-8",
    )


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


def _log_registry(world: World, request: Request, image: str) -> None:
    with world.lock:
        world.registry_requests.append(
            {"path": request.url.path, "query": request.url.query, "image": image, "at": time.time()}
        )
        if len(world.registry_requests) > 20000:
            del world.registry_requests[:5000]


def registry_routes(app: FastAPI, world: World) -> None:
    @app.get("/v2/")
    def oci_base(request: Request) -> Response:
        _log_registry(world, request, "")
        auth = request.headers.get("authorization", "")
        if not auth.lower().startswith("bearer ") or auth[7:].strip() not in world.registry_tokens:
            return _registry_challenge(world, "")
        return _json(200, {})

    @app.get("/v2/{name:path}/tags/list")
    def oci_list(request: Request, name: str) -> Response:
        _log_registry(world, request, name)
        with world.lock:
            elsewhere = world.registry_redirects.get(name)
        if elsewhere is not None:  # a registry that sends its clients somewhere else
            return RedirectResponse(elsewhere, status_code=307)
        return oci_tags(world, request, name)

    @app.get("/token")
    def registry_token(request: Request, scope: str = "", service: str = "") -> Response:
        _log_registry(world, request, scope)
        tok = secrets.token_urlsafe(24)
        with world.lock:
            world.registry_tokens.add(tok)
        return _json(
            200, {"token": tok, "access_token": tok, "expires_in": 300, "issued_at": iso(time.time())}
        )

    @app.get("/hub/v2/namespaces/{ns}/repositories/{repo}/tags")
    def hub(request: Request, ns: str, repo: str) -> Response:
        _log_registry(world, request, f"{ns}/{repo}")
        return hub_tags(world, request, ns, repo)

    @app.get("/hub/v2/repositories/{ns}/{repo}/tags")
    def hub_legacy(request: Request, ns: str, repo: str) -> Response:
        _log_registry(world, request, f"{ns}/{repo}")
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


def oauth_routes(app: FastAPI, world: World) -> None:
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


def admin_read_routes(app: FastAPI, world: World) -> None:
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


def admin_routes(app: FastAPI, world: World) -> None:
    admin_read_routes(app, world)

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
                                "result_name": naming.point_identity(world.jobs[j].point),
                            }
                            for j in r.jobs
                        ],
                    }
                    for r in world.runs.values()
                ],
            )

    @app.get("/_admin/scenario")
    def admin_scenario() -> Response:
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


def page_routes(app: FastAPI, world: World) -> None:
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
