"""Crawl the dashboard in Chromium and check every link: internal pages render (200, no console
errors), and every outbound link (PRs, commits, runs, the bump diff) answers 200.

Requests to anything but the loopback hosts given are aborted and reported, so a page that
reaches for a CDN or a real github.com link fails the crawl.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

# Pages that are not content: signing out ends the crawl's session; sign-in pages redirect out.
SKIP_PATHS = ("/logout", "/login/oauth", "/auth/")


@dataclass
class CrawlResult:
    pages: list[str] = field(default_factory=list)
    outbound: dict[str, int] = field(default_factory=dict)  # url -> status
    problems: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    external: list[str] = field(default_factory=list)  # rel="external": published sources, not checked


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def crawl(browser: Any, start: str, allowed_outbound: list[str], max_pages: int = 80) -> CrawlResult:
    """Breadth-first over the dashboard's own pages from ``start``; outbound links must point
    at one of ``allowed_outbound`` origins (the simulator) and answer 200."""
    result = CrawlResult()
    home = _origin(start)
    allowed = {home, *(_origin(u) for u in allowed_outbound)}
    context = browser.new_context()

    def guard(route: Any) -> None:
        if _origin(route.request.url) in allowed:
            route.continue_()
        else:
            result.blocked.append(route.request.url)
            route.abort()

    context.route("**/*", guard)
    page = context.new_page()
    page.on(
        "console",
        lambda m: result.problems.append(f"console.{m.type}: {m.text}") if m.type == "error" else None,
    )
    page.on("pageerror", lambda exc: result.problems.append(f"pageerror: {exc}"))
    queue: deque[str] = deque([start])
    seen = {start}
    outbound: set[str] = set()
    try:
        while queue and len(result.pages) < max_pages:
            url = queue.popleft()
            response = page.goto(url)
            status = response.status if response is not None else 0
            if status != 200:
                result.problems.append(f"{url}: HTTP {status}")
                continue
            result.pages.append(url)
            links = page.eval_on_selector_all(
                "a[href]", "els => els.map(e => [e.getAttribute('href'), e.getAttribute('rel') || ''])"
            )
            for href, rel in links:
                if "external" in rel.split():
                    result.external.append(href)  # a real published document: offline, not fetched
                    continue
                if not href or href.startswith(("#", "mailto:", "javascript:", "data:")):
                    continue
                absolute, _ = urldefrag(urljoin(url, href))
                if _origin(absolute) == home:
                    path = urlsplit(absolute).path
                    # /login?next=<every page> is one page, crawled once
                    key = path if path == "/login" else absolute
                    if any(path.startswith(p) for p in SKIP_PATHS) or key in seen:
                        continue
                    seen.add(key)
                    queue.append(absolute)
                else:
                    outbound.add(absolute)
        for url in sorted(outbound):
            if _origin(url) not in allowed:
                result.problems.append(f"outbound link outside the simulator: {url}")
                continue
            answer = context.request.get(url)
            result.outbound[url] = answer.status
            if answer.status != 200:
                result.problems.append(f"outbound {url}: HTTP {answer.status}")
    finally:
        context.close()
    return result
