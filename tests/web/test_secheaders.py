"""The dashboard and API docs send security headers; the webhook route does not need them."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.settings import reset_settings_cache


@pytest.fixture
def client(sqlite_url: str, settings_env: pytest.MonkeyPatch) -> Iterator[TestClient]:
    from app.web.main import create_app

    settings_env.setenv("SWEEPBOT_DATABASE_URL", sqlite_url)
    settings_env.setenv("SWEEPBOT_WEBHOOK_SECRETS", "s")
    settings_env.setenv("SWEEPBOT_BROKER_URL", "redis://127.0.0.1:1/0")
    settings_env.setenv("SWEEPBOT_GITHUB_API_URL", "http://127.0.0.1:9/api/v3")
    reset_settings_cache()
    with TestClient(create_app()) as c:
        yield c


@pytest.mark.parametrize(
    "path", ["/", "/sweeps", "/deliveries", "/audit", "/login", "/api/overview", "/nope"]
)
def test_dashboard_pages_send_a_strict_policy(client: TestClient, path: str) -> None:
    resp = client.get(path)
    csp = resp.headers["content-security-policy"]
    assert "script-src 'self';" in csp and "style-src 'self';" in csp and "unsafe-inline" not in csp
    assert "frame-ancestors 'none'" in csp and "object-src 'none'" in csp
    assert resp.headers["x-frame-options"] == "DENY"
    assert resp.headers["x-content-type-options"] == "nosniff"
    assert resp.headers["referrer-policy"] == "strict-origin-when-cross-origin"


def test_the_dashboard_has_nothing_inline_the_policy_would_refuse(client: TestClient) -> None:
    page = client.get("/").text
    assert "<script>" not in page and "<style" not in page and " style=" not in page
    assert not re.search(r"<[^>]*\son[a-z]+=", page)  # no inline event handlers


def test_api_docs_still_render_under_their_policy(client: TestClient) -> None:
    resp = client.get("/docs")
    assert resp.status_code == 200
    csp = resp.headers["content-security-policy"]
    assert "'unsafe-inline'" in csp and "frame-ancestors 'none'" in csp  # Swagger UI's inline start-up


def test_webhook_answers_carry_no_browser_headers(client: TestClient) -> None:
    resp = client.post("/webhooks/github", content=b"{}")
    assert resp.status_code == 400 and "content-security-policy" not in resp.headers
