"""Regression tests for hostile input at the webhook edge and a database outage behind it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.core import safejson
from app.core.delivery import WebhookRejected, check_declared_length, parse_delivery, verify_signature
from app.db import session_scope
from app.models import Delivery
from app.settings import reset_settings_cache
from tests.helpers.signing import headers_for, sign

SECRET = "edge-secret"
BODY = json.dumps({"action": "opened", "repository": {"full_name": "o/r"}}).encode()


def _app_client(settings_env: pytest.MonkeyPatch, database_url: str) -> TestClient:
    from app.web.main import create_app

    settings_env.setenv("SWEEPBOT_DATABASE_URL", database_url)
    settings_env.setenv("SWEEPBOT_WEBHOOK_SECRETS", SECRET)
    settings_env.setenv("SWEEPBOT_BROKER_URL", "redis://127.0.0.1:1/0")
    settings_env.setenv("SWEEPBOT_GITHUB_API_URL", "http://127.0.0.1:9/api/v3")
    reset_settings_cache()
    return TestClient(create_app())


@pytest.fixture
def client(sqlite_url: str, settings_env: pytest.MonkeyPatch) -> Iterator[TestClient]:
    with _app_client(settings_env, sqlite_url) as c:
        yield c


def _stored() -> int:
    with session_scope() as s:
        return int(s.execute(select(func.count()).select_from(Delivery)).scalar_one())


@pytest.mark.parametrize("header", ["sha256=é" + "0" * 63, "sha256=" + "٣" * 64, "shä256=00"])
def test_non_ascii_signature_is_a_400_not_a_crash(header: str) -> None:
    with pytest.raises(WebhookRejected) as info:
        verify_signature(BODY, header, [b"s"])
    assert (info.value.status, info.value.error) == (400, "malformed_signature")
    assert "ASCII" in info.value.message


def test_non_ascii_signature_over_http_is_400_and_stores_nothing(client: TestClient) -> None:
    headers: dict[str, str | bytes] = dict(headers_for("pull_request", BODY, SECRET))
    headers["X-Hub-Signature-256"] = "sha256=\xe9\xe9".encode("latin-1")  # raw bytes on the wire
    resp = client.post("/webhooks/github", content=BODY, headers=headers)
    assert resp.status_code == 400, resp.text
    assert resp.json()["error"] == "malformed_signature"
    assert _stored() == 0


def test_non_ascii_digits_in_content_length_are_refused() -> None:
    # "١٢".isdigit() is True and int("١٢") == 12: a check by isdigit() alone would trust it.
    with pytest.raises(WebhookRejected) as info:
        check_declared_length("١٢", 1024)
    assert (info.value.status, info.value.error) == (400, "bad_content_length")


@pytest.mark.parametrize("depth", [65, 1000, 1023])
def test_deep_json_is_refused_at_the_edge_with_a_reason(depth: int, client: TestClient) -> None:
    body = b'{"action":"opened","x":' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"
    assert depth - 1 < 1024  # orjson alone would have accepted it (its limit is 1024)
    with pytest.raises(WebhookRejected) as info:
        parse_delivery(headers_for("pull_request", body, "s"), body, [b"s"])
    assert (info.value.status, info.value.error) == (400, "too_deep")
    assert "64 levels" in info.value.message
    resp = client.post("/webhooks/github", content=body, headers=headers_for("pull_request", body, SECRET))
    assert resp.status_code == 400 and resp.json()["error"] == "too_deep"
    assert _stored() == 0


def test_real_payloads_are_well_within_the_depth_limit(fixtures_dir: Path) -> None:
    for path in (fixtures_dir / "github" / "webhooks").glob("*/*.json"):
        raw = path.read_bytes()
        safejson.check_depth(raw, json.loads(raw))  # raises when over


def test_safejson_limits() -> None:
    assert safejson.loads(b'{"a": [1, {"b": 2}]}') == {"a": [1, {"b": 2}]}
    with pytest.raises(safejson.JSONLimitError, match="integer longer than 30 digits"):
        safejson.loads(b'{"conc": ' + b"9" * 400 + b"}", max_int_digits=30)
    with pytest.raises(safejson.JSONLimitError, match="deeper than 5 levels"):
        safejson.loads(b"[[[[[[1]]]]]]", max_depth=5)
    assert safejson.loads(b"[[[[[1]]]]]", max_depth=5) == [[[[[1]]]]]
    with pytest.raises(ValueError):
        safejson.loads(b"{nope")
    wide = b"[" + b",".join([b"[1]"] * 500) + b"]"  # many brackets, shallow: accepted
    assert len(safejson.loads(wide, max_depth=3)) == 500


def test_database_outage_answers_503_json_with_retry_after(settings_env: pytest.MonkeyPatch) -> None:
    # Nothing listens on port 1: every connection attempt fails the way a stopped PostgreSQL does.
    with _app_client(settings_env, "postgresql+psycopg://postgres@127.0.0.1:1/test") as c:
        resp = c.post("/webhooks/github", content=BODY, headers=headers_for("pull_request", BODY, SECRET))
    assert resp.status_code == 503, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    assert resp.json()["error"] == "database_unavailable"
    assert "database" in resp.json()["message"]
    assert int(resp.headers["Retry-After"]) > 0


def test_signature_helper_still_accepts_the_real_format() -> None:
    verify_signature(BODY, sign(BODY, "s"), [b"s"])


def _hex(body: bytes, secret: str) -> str:
    return sign(body, secret).removeprefix("sha256=")


@pytest.mark.parametrize(
    "header",
    [
        "sha256=" + _hex(BODY, "s").upper(),  # the digest GitHub sends is lower-case hex
        "sha256=" + " ".join(_hex(BODY, "s")[i : i + 2] for i in range(0, 64, 2)),
        "sha256=" + _hex(BODY, "s")[:-2],
        "sha256=" + _hex(BODY, "s") + "00",
        "sha256=" + _hex(BODY, "other"),
    ],
)
def test_only_the_exact_lower_case_digest_of_a_configured_secret_is_accepted(header: str) -> None:
    with pytest.raises(WebhookRejected) as info:
        verify_signature(BODY, header, [b"s", b"t"])
    assert (info.value.status, info.value.error) == (401, "bad_signature")
    verify_signature(BODY, "sha256=" + _hex(BODY, "t"), [b"s", b"t"])  # the second secret matches
