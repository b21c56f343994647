"""GitHub's own status as the dashboard shows it: the ``/rate_limit`` answer, fetched by a worker.

The answer is kept in the shared HTTP cache (every API replica reads the same row); asking for it
does not count against the rate limit. The dashboard only reads the row and, when it is old,
queues ``sweepbot.refresh_rate_limit``: a page view never waits for GitHub.
"""

from __future__ import annotations

from typing import Any, Protocol

import structlog

log = structlog.get_logger(__name__)

RATE_LIMIT_PATH = "/rate_limit"
RATE_LIMIT_KEY = f"GET {RATE_LIMIT_PATH}?"  # the gateway's cache key of a GET without parameters


class ConditionalGateway(Protocol):
    def get_conditional(self, op: str, path: str, params: dict[str, Any] | None = None) -> Any: ...


def refresh_rate_limit(gw: ConditionalGateway) -> None:
    """Fetch ``/rate_limit`` into the shared cache (the caller commits the session the gateway uses)."""
    gw.get_conditional("rate-limit/get", RATE_LIMIT_PATH)
    log.info("rate_limit_refreshed")
