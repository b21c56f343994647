"""Webhook ingest: a plain ASGI route in front of the FastAPI app, around the pure checks in
``app.core.delivery``.

``POST /webhooks/github`` is answered here, before FastAPI's routing, dependency injection and
middleware (``EdgeFirstAPI``; the callers are GitHub's senders, not browsers; the route is
documented in the OpenAPI spec all the same). Nothing slow happens in the request: read
(capped), check, store, commit, answer; the broker is rung by a background thread, once per commit.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson
import structlog
from fastapi import FastAPI
from sqlalchemy.exc import SQLAlchemyError
from starlette.types import Receive, Scope, Send

from app.adapters.queue import Doorbell
from app.core.delivery import (
    IncomingDelivery,
    WebhookRejected,
    check_declared_length,
    parse_delivery,
    too_large,
)
from app.flows.ingest.deliveries import RowsRefused, StoreUnavailable, mark_not_enqueued
from app.settings import get_settings
from app.web.groupcommit import GroupCommit

log = structlog.get_logger(__name__)

PATH = "/webhooks/github"
DB_OUTAGE_RETRY_AFTER = 30  # seconds; a restart of the database takes about that
# A doorbell that could not ring records it, so the reaper rings those deliveries at once.
doorbell = Doorbell(on_unsent=mark_not_enqueued)
group_commit = GroupCommit(on_stored=doorbell.ring_many)  # rings once per commit

Answer = tuple[int, dict[str, Any], list[tuple[bytes, bytes]]]


class ClientGone(Exception):
    """The sender disconnected before its body arrived: there is no one to answer."""


async def serve(scope: Scope, receive: Receive, send: Send) -> None:
    """Answer one HTTP request for ``PATH`` (``EdgeFirstAPI`` routes it here)."""
    if scope["method"] != "POST":
        answer: Answer = (405, {"detail": "Method Not Allowed"}, [(b"allow", b"POST")])
    else:
        try:
            answer = await receive_delivery(scope["headers"], receive)
        except ClientGone:
            return
    status, body, extra = answer
    content = orjson.dumps(body)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(content)).encode()),
        *extra,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": content})


class EdgeFirstAPI(FastAPI):
    """The FastAPI app, with the webhook route answered before any of FastAPI's own layers.

    A webhook skips Starlette's error and exception middleware and FastAPI's body-limit and
    telemetry layers (telemetry alone looks up three OpenTelemetry providers per request): ~6%
    of the API's CPU per delivery (py-spy, bench/ingest.py). Everything else is served by FastAPI
    as usual. It adds no state, so ``edge_first`` can give an app built elsewhere
    (fastapi_offline builds its own) this class.
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == PATH:
            await serve(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)


# The headers the edge reads; ASGI servers hand names over in lower case.
_READ = frozenset(
    (b"content-length", b"content-type", b"x-github-delivery", b"x-github-event", b"x-hub-signature-256")
)


def _headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    # Latin-1 is what HTTP/1.1 carries (Starlette decodes the same way): a non-ASCII signature
    # reaches verify_signature and is refused there with a reason.
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in raw if k in _READ}


async def read_capped(receive: Receive, declared: str | None, limit: int) -> bytes:
    """Read the body, refusing (413) before reading it whole when it is over ``limit``."""
    check_declared_length(declared, limit)
    chunks: list[bytes] = []
    total = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        total += len(chunk)
        if total > limit:
            raise too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def receive_delivery(raw_headers: Iterable[tuple[bytes, bytes]], receive: Receive) -> Answer:
    """Check, store and commit one delivery; the answer to send (status, JSON body, headers)."""
    settings = get_settings()
    headers = _headers(raw_headers)
    try:
        body = await read_capped(receive, headers.get("content-length"), settings.max_webhook_bytes)
        incoming = parse_delivery(headers, body, settings.secret_values)
    except WebhookRejected as exc:
        log.info(
            "webhook_rejected",
            status=exc.status,
            error=exc.error,
            delivery_id=headers.get("x-github-delivery"),
        )
        return exc.status, {"error": exc.error, "message": exc.message}, []
    return await _store(incoming)


async def _store(incoming: IncomingDelivery) -> Answer:
    try:
        stored = await group_commit.submit(incoming)
    except RowsRefused as exc:
        # This delivery's row alone: the others of its group commit were written without it.
        log.warning(
            "webhook_unstorable", delivery_id=incoming.id, event_name=incoming.event, error=str(exc)[:300]
        )
        message = f"the database refused a value of this delivery, nothing was kept: {str(exc)[:200]}"
        return 400, {"error": "unstorable_field", "message": message}, []
    except (SQLAlchemyError, StoreUnavailable, OSError) as exc:
        # Nothing was stored: GitHub marks the delivery failed and redelivery recovery (or the
        # sender's own retry) brings it back once the database is.
        log.warning(
            "webhook_store_unavailable",
            delivery_id=incoming.id,
            event_name=incoming.event,
            error=f"{exc.__class__.__name__}: {str(exc)[:300]}",
        )
        message = (
            "the delivery could not be stored because the database is unreachable; "
            f"nothing was kept, send it again in {DB_OUTAGE_RETRY_AFTER} seconds"
        )
        retry = [(b"retry-after", str(DB_OUTAGE_RETRY_AFTER).encode())]
        return 503, {"error": "database_unavailable", "message": message}, retry
    if not stored.created:
        return 200, {"status": "duplicate", "delivery": incoming.id}, []
    if incoming.event == "ping":
        return 200, {"status": "pong", "delivery": incoming.id}, []
    return 202, {"status": "accepted", "delivery": incoming.id}, []


def edge_first(api: FastAPI) -> EdgeFirstAPI:
    """``api`` with the webhook route answered in front of it and documented in its spec."""
    api.__class__ = EdgeFirstAPI  # only __call__ differs: same instance, routes and middleware
    document(api)
    return api  # type: ignore[return-value]  # mypy does not follow the __class__ assignment


def document(api: FastAPI) -> None:
    """Document the webhook route (served by ``EdgeFirstAPI``, not a FastAPI route) in the spec."""
    build = api.openapi

    def openapi() -> dict[str, Any]:
        spec = build()
        spec.setdefault("paths", {})[PATH] = {"post": _OPERATION}
        return spec

    api.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to extend the spec


def _json(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {}}}


_OPERATION: dict[str, Any] = {
    "tags": ["webhooks"],
    "summary": "Receive a GitHub webhook delivery",
    "description": (
        "Signed with X-Hub-Signature-256 (HMAC-SHA256 with a configured secret); answered only "
        "after the delivery is committed to the database."
    ),
    "operationId": "receive_webhook",
    "responses": {
        "202": _json("Stored; a worker will process it"),
        "200": _json("A redelivery of a stored delivery (nothing changed), or a ping"),
        "400": _json(
            "Malformed headers, signature or body, JSON nested too deep, or a value the database cannot "
            "store (a NUL character, an action or repository name over its column's length)"
        ),
        "401": _json("Missing or wrong signature"),
        "413": _json("Body over the configured cap"),
        "503": _json("The database is unreachable; nothing was stored (see Retry-After)"),
    },
}
