"""The pure ingest checks: signatures, headers, bodies (no I/O)."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable

import pytest

from app.core.delivery import WebhookRejected, parse_delivery, verify_signature
from tests.helpers.signing import headers_for, sign

BODY = json.dumps({"action": "opened", "repository": {"full_name": "o/r"}}).encode()


def test_signature_accepts_any_configured_secret() -> None:
    for secret in ("old", "new"):
        verify_signature(BODY, sign(BODY, secret), [b"old", b"new"])


@pytest.mark.parametrize(
    ("header", "error"),
    [
        (None, "missing_signature"),
        ("", "missing_signature"),
        ("sha1=abc", "bad_signature"),
        ("sha256=", "bad_signature"),
        (sign(BODY, "wrong"), "bad_signature"),
    ],
)
def test_signature_rejections(header: str | None, error: str) -> None:
    with pytest.raises(WebhookRejected) as info:
        verify_signature(BODY, header, [b"s3cret"])
    assert info.value.status == 401
    assert info.value.error == error


def test_no_secret_configured_is_refused() -> None:
    with pytest.raises(WebhookRejected) as info:
        verify_signature(BODY, sign(BODY, "x"), [])
    assert info.value.status == 401 and "SWEEPBOT_WEBHOOK_SECRETS" in info.value.message


def test_parse_json_delivery() -> None:
    d = parse_delivery(headers_for("pull_request", BODY, "s", "abc-1"), BODY, [b"s"])
    assert (d.id, d.event, d.action, d.repo) == ("abc-1", "pull_request", "opened", "o/r")
    assert d.payload == BODY


def test_parse_form_encoded_delivery_signed_over_the_form_body() -> None:
    form = urllib.parse.urlencode({"payload": BODY.decode()}).encode()
    headers = headers_for("pull_request", form, "s", content_type="application/x-www-form-urlencoded")
    d = parse_delivery(headers, form, [b"s"])
    assert json.loads(d.payload) == json.loads(BODY)


# What a test does to a delivery's headers and body on the way in.
Mutation = Callable[[dict[str, str], bytes], tuple[dict[str, str], bytes]]


@pytest.mark.parametrize(
    ("mutate", "status", "error"),
    [
        (lambda h, b: ({k: v for k, v in h.items() if k != "X-GitHub-Delivery"}, b), 400, "missing_header"),
        (lambda h, b: ({k: v for k, v in h.items() if k != "X-GitHub-Event"}, b), 400, "missing_header"),
        (lambda h, b: ({**h, "X-GitHub-Delivery": "../../etc"}, b), 400, "missing_header"),
        (lambda h, b: (h, b[:-5]), 401, "bad_signature"),  # truncated in transit: signature no longer matches
        (lambda h, b: ({**h, "X-Hub-Signature-256": sign(b[:-5], "s")}, b[:-5]), 400, "malformed_body"),
        (
            lambda h, b: ({**h, "X-Hub-Signature-256": sign(b"not json", "s")}, b"not json"),
            400,
            "malformed_body",
        ),
        (lambda h, b: ({**h, "X-Hub-Signature-256": sign(b"[1]", "s")}, b"[1]"), 400, "malformed_body"),
        (lambda h, b: ({**h, "Content-Type": "text/plain"}, b), 400, "unsupported_content_type"),
    ],
)
def test_parse_rejections(mutate: Mutation, status: int, error: str) -> None:
    headers, body = mutate(headers_for("pull_request", BODY, "s"), BODY)
    with pytest.raises(WebhookRejected) as info:
        parse_delivery(headers, body, [b"s"])
    assert (info.value.status, info.value.error) == (status, error)
    assert info.value.message
