"""The dashboard in a real browser (Playwright driving the machine's Chromium).

The app is served by uvicorn on a loopback port, its GitHub pointed at the sim (seed scenario
loaded: org SemiAnalysisAI, maintainers, OAuth), and its database seeded with the recipe story.
Screenshots of every page land in tests/output/browser/ (gitignored).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session

from tests.browser.seed import CONCS, KEY, Seeded, seed

CHROMIUM = Path("/usr/bin/chromium")
OUTPUT = Path(__file__).resolve().parent.parent / "output" / "browser"
TOKEN = "browser-operator-token"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.browser


@dataclass
class Served:
    url: str
    seeded: Seeded
    session: Session


def _need_chromium() -> None:
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is missing: apt-get install -y chromium"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + " (CI=true: a missing browser is a failure)")
        pytest.skip(message)


@pytest.fixture
def served(db_session: Session, settings_env: pytest.MonkeyPatch) -> Iterator[Served]:
    _need_chromium()
    import uvicorn

    from app.settings import reset_settings_cache
    from sim.server import SimServer, free_port

    with SimServer() as sim:
        httpx.post(f"{sim.url}/_admin/scenario/seed/load", timeout=10).raise_for_status()
        httpx.post(
            f"{sim.url}/_admin/oauth",
            json={"user": "alice-admin", "client_id": "dash-client", "client_secret": "dash-secret"},
            timeout=10,
        ).raise_for_status()
        settings_env.setenv("SWEEPBOT_OPERATOR_TOKENS", TOKEN)
        settings_env.setenv("SWEEPBOT_RUNNER_CAPACITY", "mi355x=9")
        settings_env.setenv("SWEEPBOT_GITHUB_API_URL", sim.github_api_url)
        settings_env.setenv("SWEEPBOT_GITHUB_TOKEN", "sim-token")
        settings_env.setenv("SWEEPBOT_OAUTH_BASE_URL", sim.url)
        settings_env.setenv("SWEEPBOT_OAUTH_CLIENT_ID", "dash-client")
        settings_env.setenv("SWEEPBOT_OAUTH_CLIENT_SECRET", "dash-secret")
        settings_env.setenv("SWEEPBOT_OAUTH_ALLOWED_ORG", "SemiAnalysisAI")
        reset_settings_cache()
        seeded = seed(db_session)
        from app.web.main import create_app

        port = free_port()
        server = uvicorn.Server(
            uvicorn.Config(create_app(), host="127.0.0.1", port=port, log_level="warning", access_log=False)
        )
        thread = threading.Thread(target=server.run, name="dashboard-under-test", daemon=True)
        thread.start()
        deadline = time.monotonic() + 15
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the dashboard server did not start"
            time.sleep(0.02)
        try:
            yield Served(f"http://127.0.0.1:{port}", seeded, db_session)
        finally:
            server.should_exit = True
            thread.join(10)


@pytest.fixture
def browser() -> Iterator[Any]:
    _need_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


def _watch_console(page: Any) -> list[str]:
    problems: list[str] = []
    page.on(
        "console",
        lambda msg: problems.append(f"console.{msg.type}: {msg.text}") if msg.type == "error" else None,
    )
    page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
    page.on("requestfailed", lambda req: problems.append(f"requestfailed: {req.url}"))
    return problems


def test_every_page_renders_without_console_errors(served: Served, browser: Any) -> None:
    OUTPUT.mkdir(parents=True, exist_ok=True)
    s = served.seeded
    page = browser.new_page(viewport={"width": 1360, "height": 900})
    problems = _watch_console(page)
    pages = {
        "overview": ("/", "Overview"),
        "watches": ("/watches", "Watches"),
        "sweeps": ("/sweeps", "Sweeps"),
        "sweep": (f"/sweeps/{s.active_sweep}", f"Sweep {s.active_sweep}"),
        "results-index": ("/results", "Results"),
        "results": (f"/results/{KEY}", f"Results: {KEY}"),
        "deliveries": ("/deliveries", "Deliveries"),
        "delivery": (f"/deliveries/{s.delivery_failed}", f"Delivery {s.delivery_failed}"),
        "audit": ("/audit", "Audit log"),
        "login": ("/login", "Sign in"),
    }
    for name, (path, heading) in pages.items():
        resp = page.goto(served.url + path)
        assert resp is not None and resp.status == 200, path
        page.wait_for_load_state("networkidle")
        assert page.locator("h1").inner_text() == heading
        assert page.evaluate("typeof htmx") == "object", f"{path}: htmx did not load"
        page.screenshot(path=str(OUTPUT / f"{name}.png"), full_page=True)
    assert problems == []


def test_results_chart_has_the_expected_points(served: Served, browser: Any) -> None:
    page = browser.new_page(viewport={"width": 1360, "height": 900})
    problems = _watch_console(page)
    page.goto(f"{served.url}/results/{KEY}")
    recipe = page.locator("#chart-tpot g.series[data-series='recipe'] g.pt")
    ref = page.locator("#chart-tpot g.series[data-series='atom-minimaxm3-mxfp4-mi355x-tp4-8k1k'] g.pt")
    assert [int(float(x)) for x in recipe.evaluate_all("els => els.map(e => e.dataset.x)")] == CONCS
    assert [float(x) for x in ref.evaluate_all("els => els.map(e => e.dataset.x)")] == [4, 8, 16, 32, 64]
    assert [float(y) for y in ref.evaluate_all("els => els.map(e => e.dataset.y)")] == [
        7.5,
        8.78,
        11.73,
        16.74,
        25.0,
    ]
    # Every charted recipe value is in the table beside the chart.
    ys = recipe.evaluate_all("els => els.map(e => parseFloat(e.dataset.y))")
    table = page.locator("table.chart-data").first.inner_text()
    for conc, y in zip(CONCS, ys, strict=True):
        if conc in (4, 8, 16, 32, 64):
            assert f"{y:.2f}" in table
    # Markers are drawn (visible), and the throughput chart has both curves.
    box = recipe.first.bounding_box()
    assert box is not None and box["width"] > 3
    assert page.locator("#chart-tput g.series").count() == 2
    assert page.locator("#chart-images g.series").count() >= 1
    page.locator("#chart-tpot").screenshot(path=str(OUTPUT / "chart-tpot.png"))
    assert problems == []


def _fetch(page: Any, url: str, headers: dict[str, str] | None = None) -> int:
    return int(
        page.evaluate(
            """async ([url, headers]) => {
        const r = await fetch(url, {method: 'POST', credentials: 'same-origin', headers});
        return r.status; }""",
            [url, headers or {}],
        )
    )


def test_cancel_sweep_operator_only_with_csrf_and_audited(served: Served, browser: Any) -> None:
    OUTPUT.mkdir(parents=True, exist_ok=True)
    s = served.seeded
    cancel = f"{served.url}/api/sweeps/{s.active_sweep}/cancel"

    # Without an identity: no action buttons, and a direct POST is refused with 401.
    anon = browser.new_context().new_page()
    anon.goto(f"{served.url}/sweeps/{s.active_sweep}")
    assert anon.locator("button", has_text="cancel sweep").count() == 0
    assert _fetch(anon, cancel) == 401

    # Sign in with GitHub through the sim (org SemiAnalysisAI), then try without the CSRF token.
    page = browser.new_context().new_page()
    problems = _watch_console(page)
    page.goto(f"{served.url}/login?next=/sweeps/{s.active_sweep}")
    page.get_by_role("link", name="Sign in with GitHub").click()
    page.wait_for_url(f"{served.url}/sweeps/{s.active_sweep}")
    assert "alice-admin" in page.locator(".who").inner_text()
    assert _fetch(page, cancel) == 403  # signed in, but no CSRF token
    assert _fetch(page, cancel, {"X-CSRF-Token": "forged"}) == 403
    assert page.locator(".state", has_text="active").count() >= 1

    # The real button: htmx posts with the token header; the confirm dialog is accepted.
    page.on("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="cancel sweep").click()
    page.locator(".flash.ok").wait_for()
    assert f"sweep {s.active_sweep} cancelled" in page.locator(".flash.ok").inner_text()
    page.screenshot(path=str(OUTPUT / "sweep-cancelled.png"), full_page=True)
    page.reload()
    assert page.locator("p .state", has_text="cancelled").count() == 1

    page.goto(f"{served.url}/audit?action=dashboard.")
    rows = page.locator("table.audit tbody tr")
    texts = rows.all_inner_texts()
    assert any("alice-admin" in t and "dashboard.cancel_sweep" in t and "ok" in t for t in texts), texts
    assert sum("dashboard.refused" in t for t in texts) == 2
    page.screenshot(path=str(OUTPUT / "audit-after-cancel.png"), full_page=True)
    # The only console noise allowed: the browser reporting the two refused (403) fetches above.
    assert (
        problems
        == ["console.error: Failed to load resource: the server responded with a status of 403 (Forbidden)"]
        * 2
    )


PHONE = {"width": 390, "height": 844}


def test_the_pages_fit_a_phone_and_wide_tables_scroll_in_their_box(served: Served, browser: Any) -> None:
    OUTPUT.mkdir(parents=True, exist_ok=True)
    s = served.seeded
    page = browser.new_page(viewport=PHONE)
    for name, path in {
        "overview": "/",
        "sweeps": "/sweeps",
        "sweep": f"/sweeps/{s.active_sweep}",
        "results": f"/results/{KEY}",
        "audit": "/audit?group=sweep",
        "watches": "/watches",
    }.items():
        resp = page.goto(served.url + path)
        assert resp is not None and resp.status == 200, path
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(OUTPUT / f"phone-{name}.png"), full_page=True)
        wide = page.evaluate("document.documentElement.scrollWidth")
        assert wide <= PHONE["width"], f"{path}: the page is {wide}px wide on a {PHONE['width']}px phone"
    page.goto(served.url + f"/sweeps/{s.active_sweep}")
    jobs = page.locator("table.jobs")
    box_width, content_width = jobs.evaluate("t => [t.clientWidth, t.scrollWidth]")
    assert box_width <= PHONE["width"] and content_width > box_width, "the jobs table scrolls inside its box"
