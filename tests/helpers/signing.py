"""Sign and send webhook deliveries the way GitHub does."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from pathlib import Path
from typing import Any


def sign(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def headers_for(
    event: str,
    body: bytes,
    secret: str | None,
    delivery_id: str | None = None,
    content_type: str = "application/json",
) -> dict[str, str]:
    headers = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery_id or str(uuid.uuid4()),
        "Content-Type": content_type,
        "User-Agent": "GitHub-Hookshot/test",
    }
    if secret is not None:
        headers["X-Hub-Signature-256"] = sign(body, secret)
    return headers


def fixture_payloads(fixtures: Path) -> list[tuple[str, Path]]:
    """(event, path) for every payload under fixtures/github/webhooks/<event>/."""
    root = fixtures / "github" / "webhooks"
    return sorted((p.parent.name, p) for p in root.glob("*/*.json"))


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())
