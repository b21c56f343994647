"""Webhook deliveries: GitHub keeps them and never retries a failed one; an integrator asks again."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from sim.api_common import (
    Ctx,
    Resp,
    _int,
    _repo,
    _require_write,
    route,
)
from sim.world import Repo, SimError, iso

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
