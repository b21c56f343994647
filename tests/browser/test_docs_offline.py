"""/docs renders in Chromium with every request outside the server blocked: the API
docs' assets come from the installed package, not a CDN."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy.orm import Session

from tests.browser.test_dashboard_browser import ARGS, CHROMIUM, _need_chromium

pytestmark = pytest.mark.browser


@pytest.fixture
def api_url(db_session: Session, settings_env: pytest.MonkeyPatch) -> Iterator[str]:
    _need_chromium()
    import uvicorn

    from app.web.main import create_app
    from sim.server import free_port

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(), host="127.0.0.1", port=port, log_level="warning", access_log=False)
    )
    thread = threading.Thread(target=server.run, name="docs-under-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the API server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def test_api_docs_render_offline(api_url: str) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        try:
            context = browser.new_context()
            blocked: list[str] = []
            problems: list[str] = []

            def offline(route: Any) -> None:
                if route.request.url.startswith(api_url):
                    route.continue_()
                else:  # the internet is not there: a CDN asset would fail here
                    blocked.append(route.request.url)
                    route.abort()

            context.route("**/*", offline)
            page = context.new_page()
            page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
            page.on("requestfailed", lambda req: problems.append(f"requestfailed: {req.url}"))

            docs = page.goto(api_url + "/docs")
            assert docs is not None and docs.status == 200
            title = page.wait_for_selector(".swagger-ui .info .title", timeout=20000)
            assert title is not None and "sweepbot" in title.inner_text()
            # the operations are listed, so the OpenAPI document itself was read and understood
            page.wait_for_selector(".opblock-summary-path", timeout=20000)
            assert page.locator(".opblock-summary-path").count() > 5
            assert page.locator(".swagger-ui .errors-wrapper").count() == 0

            # ReDoc would fetch its logo from the vendor's CDN whatever the asset source: not served
            redoc = page.goto(api_url + "/redoc")
            assert redoc is not None and redoc.status == 404
            assert blocked == [] and problems == [], (blocked, problems)
            context.close()
        finally:
            browser.close()
