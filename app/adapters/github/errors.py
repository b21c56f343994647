"""What a GitHub answer means when it is not a success: the precise exceptions callers catch.

``NotFound``, ``Gone`` (410), ``Conflict`` (422/409), ``Unauthorized`` (401), ``Forbidden`` (a 403
that is no rate limit), else ``GitHubError``; 5xx and rate
limits become ``TransientError`` (retry the task later, never drop the work), with the wait GitHub
documents (``app.core.ratelimit``).
"""

from __future__ import annotations

import time
from typing import Any, NoReturn

import structlog

from app.core import ratelimit
from app.core.routing import TransientError

log = structlog.get_logger(__name__)


class GitHubError(Exception):
    """An answer GitHub gave that is not a success, with its status and decoded body."""

    def __init__(self, status: int, message: str, data: Any = None) -> None:
        super().__init__(f"GitHub answered {status}: {message}")
        self.status = status
        self.data = data


class NotFound(GitHubError):
    """404: no such thing (or not visible to these credentials)."""


class Gone(GitHubError):
    """410: it was there and is deleted, e.g. an issue ("This issue was deleted"; GitHub answers a
    caller who may not read the repository 404 instead)."""


class Conflict(GitHubError):
    """422/409: the request was understood and refused (e.g. a non-fast-forward ref update)."""


class Unauthorized(GitHubError):
    """401: the credentials were refused."""


class Forbidden(GitHubError):
    """403 that is no rate limit: the credentials lack a permission; asking again is refused again."""


def raise_for(op: str, status: int, headers: dict[str, Any], data: Any) -> NoReturn:
    """Turn an error answer into the precise exception (rate limits read as GitHub documents them)."""
    message = data.get("message", "") if isinstance(data, dict) else str(data)[:200]
    limit = ratelimit.classify(status, headers, message, time.time())
    if limit is not None:
        log.warning(
            "github_rate_limited", operation=op, kind=limit.kind, wait=round(limit.wait), reason=limit.reason
        )
        raise TransientError(
            f"{op}: {limit.kind} rate limit ({status}, {limit.reason}): {message}",
            retry_after=limit.wait,
            rate_limited=True,
            exponential=limit.exponential,
        )
    if status >= 500:
        raise TransientError(f"{op}: GitHub answered {status}: {message}")
    if status == 401:
        raise Unauthorized(status, f"{op}: {message or 'bad credentials'}", data)
    if status == 403:
        raise Forbidden(status, f"{op}: {message or 'forbidden'}", data)
    if status == 404:
        raise NotFound(status, f"{op}: {message or 'not found'}", data)
    if status == 410:
        raise Gone(status, f"{op}: {message or 'gone'}", data)
    if status in (409, 422):
        raise Conflict(status, f"{op}: {message}", data)
    raise GitHubError(status, f"{op}: {message}", data)
