"""The gateway's plumbing every resource family calls through.

- routing a call to its credentials and slot, minting a new installation token after a 401;
- plain ``dict`` results (the REST JSON), so callers and their fakes stay tiny;
- conditional GETs with a persistent ETag cache (a 304 costs no rate limit);
- waiting out GitHub's visibility lag after our own writes (``app.core.consistency``);
- an audit entry for every write; the primary rate limit as the last answer told it.

Writes are not retried blindly inside a call (a POST that timed out may have happened); callers
make them idempotent by looking before creating, and the task is retried.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog
from github.Requester import Requester
from sqlalchemy.orm import Session

from app.adapters.ghslots import SlotTimeout
from app.adapters.github.credentials import Credentials, FixedCredentials
from app.adapters.github.errors import Conflict, GitHubError, NotFound, Unauthorized
from app.adapters.github.transport import request
from app.core import budget, consistency
from app.core.routing import TransientError
from app.models import HttpCacheEntry

log = structlog.get_logger(__name__)


def quote_segment(part: str) -> str:
    """One path segment (a workflow file, a user name, a ref) with every reserved character escaped."""
    return urllib.parse.quote(part, safe="")


@dataclass
class Conditional:
    data: Any
    changed: bool  # False when the server answered 304 and ``data`` came from the cache
    etag: str | None


class WriteAudit(Protocol):
    """The audit trail of GitHub writes: a row written ahead of each write (so a crash between
    GitHub accepting it and our bookkeeping still leaves a trace), then given the write's outcome."""

    def before(self, action: str, target: str) -> object: ...

    def after(self, mark: object, outcome: str, detail: dict[str, Any]) -> None: ...


class GatewayBase:
    """The calls every resource family makes through (``_get``, ``_write``, ``_paginate``...)."""

    def __init__(
        self,
        requester: Requester | Credentials,
        *,
        cache_session: Session | None = None,
        audit: WriteAudit | None = None,
        installation_id: int | None = None,
        consistency_delays: tuple[float, ...] = consistency.DELAYS,
    ) -> None:
        self._credentials: Credentials = (
            requester if hasattr(requester, "route") else FixedCredentials(requester)  # type: ignore[assignment]
        )
        self._installation_hint = installation_id
        self._cache_session = cache_session
        self._audit = audit
        self._consistency_delays = consistency_delays
        self._written: set[tuple[str, str]] = set()  # (repo, ref or sha) this gateway just wrote
        # The primary rate limit as the last answer's X-RateLimit-* headers told it (app.core.budget).
        self.last_rate: budget.RateSnapshot | None = None

    def _call(
        self,
        op: str,
        verb: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, Any], Any]:
        try:
            key, requester = self._credentials.route(path, self._installation_hint)
        except SlotTimeout as exc:  # the App's own calls (installation look-up, minting) queued too long
            raise TransientError(f"{op}: {exc}") from exc
        try:
            with self._credentials.slot(key):
                answer = request(requester, op, verb, path, params=params, body=body, headers=headers)
                self.last_rate = budget.parse_rate_headers(answer[1], time.time()) or self.last_rate
                return answer
        except SlotTimeout as exc:
            raise TransientError(f"{op}: {exc}") from exc
        except Unauthorized as exc:
            if not key.startswith("inst:"):
                raise  # a configured token that is wrong stays wrong: say so, do not retry
            # An installation token GitHub no longer accepts (revoked, clock skew): mint anew
            # on the retry instead of failing the work.
            self._credentials.refused(key)
            raise TransientError(f"{op}: credentials refused (401); retrying with a new token") from exc

    def _eventually(self, op: str, call: Callable[[], Any]) -> Any:
        """``call``, retried a few times after a short delay while GitHub may not yet show what
        this work just wrote (a 404/422 that ``consistency.is_visibility_lag`` recognises)."""
        delays = list(self._consistency_delays)
        while True:
            try:
                return call()
            except (NotFound, Conflict) as exc:
                if not delays or not consistency.is_visibility_lag(op, exc.status, exc.data):
                    raise
                wait = delays.pop(0)
                log.info("github_visibility_lag", operation=op, status=exc.status, retry_in=wait)
                time.sleep(wait)

    def _get(self, op: str, path: str, params: dict[str, Any] | None = None) -> Any:
        return self._call(op, "GET", path, params=params)[2]

    def _write(self, op: str, verb: str, path: str, body: Any = None, target: str = "") -> Any:
        if self._audit is None:
            return self._call(op, verb, path, body=body)[2]
        mark = self._audit.before(f"github.{op}", target or path)
        try:
            status, _headers, data = self._call(op, verb, path, body=body)
        except Exception as exc:
            # Refused (a 4xx: some are the state we wanted, a 409 "already done") or failed (5xx,
            # timeout: GitHub may have taken it); the row says which, with GitHub's words.
            answered = exc.status if isinstance(exc, GitHubError) else None
            outcome = "refused" if answered is not None and answered < 500 else "failed"
            self._audit.after(mark, outcome, {"status": answered, "path": path, "error": str(exc)[:300]})
            raise
        detail: dict[str, Any] = {"status": status, "path": path}
        if isinstance(data, dict):
            for key in ("id", "number", "sha", "html_url", "ref"):
                if key in data:
                    detail[key] = data[key]
        self._audit.after(mark, "ok", detail)
        return data

    def _paginate(
        self,
        op: str,
        path: str,
        params: dict[str, Any] | None = None,
        key: str | None = None,
        limit: int = 2000,
    ) -> Iterator[dict[str, Any]]:
        params = dict(params or {})
        params.setdefault("per_page", 100)
        page = 1
        seen = 0
        while True:
            params["page"] = page
            data = self._get(op, path, params)
            items = data.get(key, []) if key and isinstance(data, dict) else data
            if not items:
                return
            for item in items:
                yield item
                seen += 1
                if seen >= limit:
                    return
            if len(items) < params["per_page"]:
                return
            page += 1

    def get_conditional(self, op: str, path: str, params: dict[str, Any] | None = None) -> Conditional:
        """GET with ``If-None-Match`` from the persistent cache; a 304 is free of rate limit."""
        key = f"GET {path}?{urllib.parse.urlencode(sorted((params or {}).items()))}"[:500]
        cached = self._cache_session.get(HttpCacheEntry, key) if self._cache_session is not None else None
        headers = {"If-None-Match": cached.etag} if cached is not None and cached.etag else {}
        status, resp_headers, data = self._call(op, "GET", path, params=params, headers=headers)
        if status == 304 and cached is not None:
            return Conditional(json.loads(cached.body), False, cached.etag)
        etag = {k.lower(): v for k, v in resp_headers.items()}.get("etag")
        if self._cache_session is not None:
            if cached is None:
                cached = HttpCacheEntry(key=key, body="")
                self._cache_session.add(cached)
            cached.etag = etag
            cached.body = json.dumps(data)
            cached.fetched_at = datetime.now(UTC)
        return Conditional(data, True, etag)

    def rate_limit(self) -> dict[str, Any]:
        return self._get("rate-limit/get", "/rate_limit")
