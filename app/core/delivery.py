"""A GitHub webhook delivery, checked (pure: headers, bytes and secrets in, a typed result out).

``parse_delivery`` validates the headers, the signature and the body and returns an
``IncomingDelivery``, or raises ``WebhookRejected`` carrying the HTTP status, a short error code
and a message saying what was wrong. No I/O happens here: the web edge reads the body (capped,
``check_declared_length`` first) and stores the result.
"""

from __future__ import annotations

import hmac
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

import orjson

from app.core import lazyjson, safejson

_DELIVERY_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
_EVENT = re.compile(r"^[a-z_]{1,64}$")
_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")
# The columns the envelope's strings are stored in (``deliveries.action``, ``deliveries.repo``;
# tests/web/test_poisoned_batch.py holds them to the model): a longer string, or one with a NUL
# (PostgreSQL text cannot hold U+0000), would be refused by the database, and with it every
# delivery sharing its group commit.
ACTION_MAX = 64
REPO_MAX = 200


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
    payload: bytes  # the JSON payload as verified (form bodies are unwrapped)


def check_declared_length(declared: str | None, limit: int) -> None:
    """Refuse (413) a body whose ``Content-Length`` is over ``limit`` before any of it is read."""
    if declared is None:
        return
    if not (declared.isascii() and declared.isdigit()):  # "١٢".isdigit() is True
        raise WebhookRejected(400, "bad_content_length", "Content-Length is not a number")
    if int(declared) > limit:
        raise WebhookRejected(413, "too_large", f"body of {declared} bytes is over the {limit}-byte cap")


def too_large(limit: int) -> WebhookRejected:
    """The rejection for a body that turned out longer than ``limit`` while it was read."""
    return WebhookRejected(413, "too_large", f"body is over the {limit}-byte cap")


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
    # What hexdigest() writes, and nothing else (fromhex alone takes upper case and spaces too).
    given = bytes.fromhex(digest) if _HEX_DIGEST.fullmatch(digest) else b""
    matched = False
    for secret in secrets:  # no early exit: the time taken does not reveal which secret matched
        # One-shot C HMAC, compared as bytes: no HMAC object and no hex string per request.
        matched |= hmac.compare_digest(hmac.digest(secret, body, "sha256"), given)
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
    raw = _payload_bytes(h.get("content-type", "application/json"), body)
    action, repo = _envelope(raw)
    _check_storable("action", action, ACTION_MAX)
    _check_storable("repository.full_name", repo, REPO_MAX)
    return IncomingDelivery(
        id=delivery_id,
        event=event,
        action=action,
        repo=repo,
        payload=raw,
    )


def _check_storable(field: str, value: str | None, limit: int) -> None:
    """Refuse (400) an envelope string the ``deliveries`` row could not hold."""
    if value is None:
        return
    if len(value) > limit:
        raise WebhookRejected(
            400, "unstorable_field", f"{field} is {len(value)} characters long; at most {limit} are stored"
        )
    if "\x00" in value:
        raise WebhookRejected(
            400, "unstorable_field", f"{field} contains a NUL character (\\u0000), which cannot be stored"
        )


def _payload_bytes(content_type_header: str, body: bytes) -> bytes:
    content_type = content_type_header.split(";")[0].strip().lower()
    if content_type in ("application/json", ""):
        return body
    if content_type == "application/x-www-form-urlencoded":
        form = urllib.parse.parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        if "payload" not in form:
            raise WebhookRejected(400, "malformed_body", "form-encoded delivery has no 'payload' field")
        return form["payload"][0].encode()
    raise WebhookRejected(
        400,
        "unsupported_content_type",
        f"content type {content_type!r} is not application/json or form-encoded",
    )


def _envelope(raw: bytes) -> tuple[str | None, str | None]:
    """Check ``raw`` is a JSON object orjson would parse, nested at most ``safejson.MAX_DEPTH``
    (the worker's json stops near 1,000 levels, orjson at 1,024), and read its ``action`` and
    ``repository.full_name``; the body is stored as bytes, so it is not built in Python here."""
    try:
        action, repo = lazyjson.object_strings(raw, _ENVELOPE)
    except safejson.JSONLimitError as exc:
        raise WebhookRejected(400, "too_deep", f"body refused: {exc}") from exc
    except lazyjson.NotAnObject as exc:
        raise WebhookRejected(400, "malformed_body", str(exc)) from exc
    except orjson.JSONDecodeError as exc:
        raise WebhookRejected(400, "malformed_body", f"body is not valid JSON: {exc}") from exc
    return action, repo


_ENVELOPE = (("action",), ("repository", "full_name"))
