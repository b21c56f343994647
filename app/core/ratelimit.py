"""GitHub's rate-limit answers, read the way GitHub documents them (pure: no I/O, no clock of its own).

GitHub's guidance ("Rate limits for the REST API", "Best practices for using the REST API"):

1. ``Retry-After`` present: do not retry before that many seconds;
2. else ``x-ratelimit-remaining: 0``: a primary limit, do not retry before ``x-ratelimit-reset``;
3. else (a secondary limit with no hint): wait at least one minute, and if it keeps failing, wait
   an exponentially increasing time between retries.

A 403 is only a rate limit when one of those signals is there (or the message says so); otherwise
it is a permission refusal, which must not be retried as if it were transient.

Every wait is a task retry at a later time, never a worker sleeping on it: the caller turns a
``RateLimit`` into a ``TransientError`` and the task/delivery is re-scheduled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

SECONDARY_MIN_WAIT = 60.0  # "wait for at least one minute before retrying"
MAX_WAIT = 3600.0  # a primary limit resets within the hour; nothing waits longer


@dataclass(frozen=True)
class RateLimit:
    kind: Literal["primary", "secondary"]
    wait: float  # seconds before the first retry
    exponential: bool  # True: no hint from GitHub, so repeated hits double the wait
    reason: str  # which signal decided, for the log line


@dataclass(frozen=True)
class RateHeaders:
    """GitHub's rate-limit headers of one answer, read once (the poll budget and the retry
    classification both take them from here); a header absent or unreadable is None."""

    limit: int | None
    remaining: int | None
    reset: float | None  # epoch seconds
    retry_after: float | None  # seconds
    resource: str  # x-ratelimit-resource ("core", "search", ...)


def _number(value: Any) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):  # an HTTP date in Retry-After: GitHub sends seconds, treat as absent
        return None


def _whole(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def read_headers(headers: Mapping[str, Any]) -> RateHeaders:
    h = {str(k).lower(): v for k, v in headers.items()}
    return RateHeaders(
        limit=_whole(h.get("x-ratelimit-limit")),
        remaining=_whole(h.get("x-ratelimit-remaining")),
        reset=_number(h.get("x-ratelimit-reset")),
        retry_after=_number(h.get("retry-after")),
        resource=str(h.get("x-ratelimit-resource") or "core"),
    )


def classify(status: int, headers: Mapping[str, Any], message: str, now: float) -> RateLimit | None:
    """The rate limit this answer reports, or ``None`` when it is not one."""
    if status not in (403, 429):
        return None
    h = read_headers(headers)
    text = message.lower()
    mentions = "rate limit" in text or "abuse" in text
    if h.retry_after is not None:
        kind: Literal["primary", "secondary"] = "primary" if h.remaining == 0 else "secondary"
        return RateLimit(kind, min(MAX_WAIT, max(0.0, h.retry_after)), False, "retry-after header")
    if h.remaining == 0:
        wait = (h.reset - now + 1.0) if h.reset is not None else SECONDARY_MIN_WAIT
        return RateLimit("primary", min(MAX_WAIT, max(1.0, wait)), False, "x-ratelimit-remaining is 0")
    if status == 429 or mentions:
        return RateLimit("secondary", SECONDARY_MIN_WAIT, True, "secondary limit without retry-after")
    return None


def backoff(wait: float, exponential: bool, attempt: int) -> float:
    """The wait before retry number ``attempt`` (1 = the first retry) of a rate-limited call.

    Without a hint from GitHub the wait doubles on each repeated hit (60, 120, 240 s ...), capped.
    """
    if not exponential:
        return wait
    return min(MAX_WAIT, wait * 2 ** max(0, attempt - 1))
