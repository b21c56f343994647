"""A bounded fuzz of the webhook edge: hostile headers and bodies never give a 5xx or an unhandled
exception, and nothing is stored unless the answer said it was."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from app.core import safejson
from app.core.delivery import WebhookRejected, parse_delivery
from app.db import session_scope
from app.models import Delivery
from app.settings import reset_settings_cache
from tests.helpers.signing import sign

SECRET = "fuzz-secret"

HEADER_TEXT = st.one_of(
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=255), max_size=80),
    st.sampled_from(["sha256=", "sha256=" + "0" * 64, "sha256=é", "١٢", "-1", "99999999999999999999", ""]),
)
JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def _body(draw_kind: str, value: object, depth: int, raw: bytes) -> bytes:
    if draw_kind == "json":
        return json.dumps(value).encode()
    if draw_kind == "deep":
        return b'{"a":' + b"[" * depth + b"]" * depth + b"}"
    return raw


BODIES = st.builds(
    _body,
    st.sampled_from(["json", "deep", "raw"]),
    JSON_VALUE,
    st.integers(min_value=1, max_value=1100),
    st.binary(max_size=200),
)


@pytest.fixture
def client(sqlite_url: str, settings_env: pytest.MonkeyPatch) -> Iterator[TestClient]:
    from app.web.main import create_app

    settings_env.setenv("SWEEPBOT_DATABASE_URL", sqlite_url)
    settings_env.setenv("SWEEPBOT_WEBHOOK_SECRETS", SECRET)
    settings_env.setenv("SWEEPBOT_BROKER_URL", "redis://127.0.0.1:1/0")
    settings_env.setenv("SWEEPBOT_GITHUB_API_URL", "http://127.0.0.1:9/api/v3")
    settings_env.setenv("SWEEPBOT_MAX_WEBHOOK_BYTES", "20000")
    reset_settings_cache()
    with TestClient(create_app(), raise_server_exceptions=True) as c:
        yield c


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=BODIES,
    signed=st.booleans(),
    event=st.one_of(st.sampled_from(["push", "issue_comment", "ping", "star"]), HEADER_TEXT),
    delivery=st.one_of(st.uuids().map(str), HEADER_TEXT),
    signature=HEADER_TEXT,
    content_type=st.sampled_from(["application/json", "application/x-www-form-urlencoded", "text/plain", ""]),
)
def test_the_edge_never_fails_and_stores_only_what_it_acknowledges(
    client: TestClient,
    body: bytes,
    signed: bool,
    event: str,
    delivery: str,
    signature: str,
    content_type: str,
) -> None:
    headers = {
        "X-GitHub-Event": event.encode(),
        "X-GitHub-Delivery": delivery.encode(),
        "Content-Type": content_type,
        "X-Hub-Signature-256": (sign(body, SECRET) if signed else signature).encode(),
    }
    with session_scope() as s:
        before = int(s.execute(select(func.count()).select_from(Delivery)).scalar_one())
    resp = client.post("/webhooks/github", content=body, headers=headers)
    assert resp.status_code < 500, resp.text
    assert set(resp.json()) >= ({"error", "message"} if resp.status_code >= 400 else {"status"})
    with session_scope() as s:
        after = int(s.execute(select(func.count()).select_from(Delivery)).scalar_one())
    if resp.status_code >= 400 or resp.json()["status"] == "duplicate":
        assert after == before
    else:
        assert after == before + 1


@settings(max_examples=200, deadline=None)
@given(
    headers=st.dictionaries(
        st.sampled_from(["X-GitHub-Event", "X-GitHub-Delivery", "X-Hub-Signature-256", "Content-Type"]),
        HEADER_TEXT,
    ),
    body=BODIES,
)
def test_parse_delivery_raises_only_webhook_rejected(headers: dict[str, str], body: bytes) -> None:
    try:
        parse_delivery(headers, body, [SECRET.encode()])
    except WebhookRejected as exc:
        assert 400 <= exc.status < 500 and exc.message


def _depth(value: object) -> int:
    """The reference: nesting depth by walking the parsed value."""
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


NESTED = st.recursive(
    st.none() | st.integers() | st.text(alphabet='[]{}"\\/ab\n', max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\x', max_size=4), inner)
    ),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(value=NESTED, limit=st.integers(min_value=0, max_value=8))
def test_nesting_read_from_the_bytes_matches_a_walk(value: object, limit: int) -> None:
    # Strings full of brackets, quotes and backslashes must not count as nesting.
    for raw in (json.dumps(value).encode(), json.dumps(value, ensure_ascii=False, indent=1).encode()):
        assert safejson.nesting_over(raw, limit) == (_depth(value) > limit), raw
