"""Webhook ingest: the thin route in front of the pure checks in ``app.core.delivery``.

Nothing slow happens in the request: read (capped), check, store, commit, answer; the broker is
rung after the response is sent.
"""

from __future__ import annotations

import structlog
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError

from app.adapters.queue import Doorbell
from app.core.delivery import WebhookRejected, check_declared_length, parse_delivery, too_large
from app.flows.ingest import mark_not_enqueued
from app.settings import get_settings
from app.web.groupcommit import group_commit

log = structlog.get_logger(__name__)

DB_OUTAGE_RETRY_AFTER = 30  # seconds; a restart of the database takes about that
# A doorbell that could not ring records it, so the reaper rings those deliveries at once.
doorbell = Doorbell(on_unsent=mark_not_enqueued)


async def read_capped(request: Request, limit: int) -> bytes:
    """Read the body, refusing (413) before reading it whole when it is over ``limit``."""
    check_declared_length(request.headers.get("content-length"), limit)
    chunks: list[bytes] = []
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _error(status: int, error: str, message: str) -> JSONResponse:
    return JSONResponse({"error": error, "message": message}, status_code=status)


router = APIRouter()


@router.post("/webhooks/github", tags=["webhooks"], summary="Receive a GitHub webhook delivery")
async def receive(request: Request) -> JSONResponse:
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
        doorbell.ring(incoming.id)
    if incoming.event == "ping":
        return JSONResponse({"status": "pong", "delivery": incoming.id}, status_code=200)
    return JSONResponse({"status": "accepted", "delivery": incoming.id}, status_code=202)
