"""Webhook ingest: the pure checks (signature, headers, body) and the thin FastAPI route.

The pure part takes bytes and headers and returns an ``IncomingDelivery`` or raises a
``WebhookRejected`` that carries the HTTP status and a message saying what was wrong.
Nothing slow happens in the request: store, commit, answer; the broker is rung after the
response is sent.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
import structlog
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError

from app.core import safejson

log = structlog.get_logger(__name__)

_DELIVERY_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
_EVENT = re.compile(r"^[a-z_]{1,64}$")
DB_OUTAGE_RETRY_AFTER = 30  # seconds; a restart of the database takes about that


class WebhookRejected(Exception):
    def __init__(self, status: int, error: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message


@dataclass(frozen=True)
class IncomingDelivery:
    id: str
    event: str
    action: str | None
    repo: str | None
    payload: bytes  # canonical JSON bytes of the payload (form bodies are unwrapped)


def verify_signature(body: bytes, header: str | None, secrets: list[bytes]) -> None:
    """Check ``X-Hub-Signature-256`` against every configured secret in constant time."""
    if not header:
        raise WebhookRejected(
            401, "missing_signature", "X-Hub-Signature-256 is missing: configure the webhook secret on GitHub"
        )
    if not header.isascii():
        # hmac.compare_digest raises TypeError on non-ASCII text: refuse it as malformed instead.
        raise WebhookRejected(
            400, "malformed_signature", "X-Hub-Signature-256 must be ASCII: sha256=<64 hex digits>"
        )
    algo, _, digest = header.partition("=")
    if algo != "sha256" or not digest:
        raise WebhookRejected(401, "bad_signature", "X-Hub-Signature-256 must look like sha256=<hex>")
    if not secrets:
        raise WebhookRejected(
            401,
            "no_secret_configured",
            "this server has no webhook secret configured (SWEEPBOT_WEBHOOK_SECRETS)",
        )
    matched = False
    for secret in secrets:  # no early exit: the time taken does not reveal which secret matched
        expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
        matched |= hmac.compare_digest(expected, digest)
    if not matched:
        raise WebhookRejected(
            401, "bad_signature", "signature does not match the body with any configured secret"
        )


def parse_delivery(
    headers: Mapping[str, str], body: bytes, secrets: list[bytes], *, verify: bool = True
) -> IncomingDelivery:
    """Validate headers, signature and body; ``headers`` keys are matched case-insensitively."""
    h = {k.lower(): v for k, v in headers.items()}
    delivery_id = h.get("x-github-delivery", "")
    event = h.get("x-github-event", "")
    if not delivery_id or not _DELIVERY_ID.match(delivery_id):
        raise WebhookRejected(400, "missing_header", "X-GitHub-Delivery is missing or not a delivery id")
    if not event or not _EVENT.match(event):
        raise WebhookRejected(400, "missing_header", "X-GitHub-Event is missing or not an event name")
    if verify:
        verify_signature(body, h.get("x-hub-signature-256"), secrets)
    content_type = h.get("content-type", "application/json").split(";")[0].strip().lower()
    if content_type == "application/x-www-form-urlencoded":
        form = urllib.parse.parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        if "payload" not in form:
            raise WebhookRejected(400, "malformed_body", "form-encoded delivery has no 'payload' field")
        raw = form["payload"][0].encode()
    elif content_type in ("application/json", ""):
        raw = body
    else:
        raise WebhookRejected(
            400,
            "unsupported_content_type",
            f"content type {content_type!r} is not application/json or form-encoded",
        )
    try:
        payload = orjson.loads(raw)  # several times faster than json.loads on the hot path
    except orjson.JSONDecodeError as exc:
        raise WebhookRejected(400, "malformed_body", f"body is not valid JSON: {exc}") from exc
    try:
        # orjson accepts 1,023 levels but the worker's json stops near 1,000: refuse at the edge.
        safejson.check_depth(raw, payload)
    except safejson.JSONLimitError as exc:
        raise WebhookRejected(400, "too_deep", f"body refused: {exc}") from exc
    if not isinstance(payload, dict):
        raise WebhookRejected(400, "malformed_body", "payload must be a JSON object")
    action = payload.get("action")
    repo_obj = payload.get("repository")
    repo = repo_obj.get("full_name") if isinstance(repo_obj, dict) else None
    return IncomingDelivery(
        id=delivery_id,
        event=event,
        action=action if isinstance(action, str) else None,
        repo=repo if isinstance(repo, str) else None,
        payload=raw,
    )


async def read_capped(request: Request, limit: int) -> bytes:
    """Read the body, refusing (413) before reading it whole when it is over ``limit``."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not (declared.isascii() and declared.isdigit()):  # "١٢".isdigit() is True
            raise WebhookRejected(400, "bad_content_length", "Content-Length is not a number")
        if int(declared) > limit:
            raise WebhookRejected(413, "too_large", f"body of {declared} bytes is over the {limit}-byte cap")
    chunks: list[bytes] = []
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise WebhookRejected(413, "too_large", f"body is over the {limit}-byte cap")
        chunks.append(chunk)
    return b"".join(chunks)


def _error(status: int, error: str, message: str) -> JSONResponse:
    return JSONResponse({"error": error, "message": message}, status_code=status)


router = APIRouter()


@router.post("/webhooks/github", tags=["webhooks"], summary="Receive a GitHub webhook delivery")
async def receive(request: Request) -> JSONResponse:
    from app.settings import get_settings
    from app.web.groupcommit import group_commit

    settings = get_settings()
    try:
        body = await read_capped(request, settings.max_webhook_bytes)
        incoming = parse_delivery(request.headers, body, settings.secret_values)
    except WebhookRejected as exc:
        log.info(
            "webhook_rejected",
            status=exc.status,
            error=exc.error,
            delivery_id=request.headers.get("x-github-delivery"),
        )
        return _error(exc.status, exc.error, exc.message)
    try:
        stored = await group_commit.submit(incoming)
    except (SQLAlchemyError, OSError) as exc:
        # Nothing was stored: GitHub marks the delivery failed and redelivery recovery (or the
        # sender's own retry) brings it back once the database is.
        log.warning(
            "webhook_store_unavailable",
            delivery_id=incoming.id,
            event_name=incoming.event,
            error=f"{exc.__class__.__name__}: {str(exc)[:300]}",
        )
        response = _error(
            503,
            "database_unavailable",
            "the delivery could not be stored because the database is unreachable; "
            f"nothing was kept, send it again in {DB_OUTAGE_RETRY_AFTER} seconds",
        )
        response.headers["Retry-After"] = str(DB_OUTAGE_RETRY_AFTER)
        return response
    if not stored.created:
        return JSONResponse({"status": "duplicate", "delivery": incoming.id}, status_code=200)
    if stored.enqueue:
        from app.adapters.queue import doorbell

        doorbell.ring(incoming.id)
    if incoming.event == "ping":
        return JSONResponse({"status": "pong", "delivery": incoming.id}, status_code=200)
    return JSONResponse({"status": "accepted", "delivery": incoming.id}, status_code=202)


def describe(payload: dict[str, Any]) -> str:
    """A one-line label for logs and the dashboard."""
    repo = (payload.get("repository") or {}).get("full_name", "?")
    number = (payload.get("pull_request") or payload.get("issue") or {}).get("number")
    return f"{repo}#{number}" if number else str(repo)
