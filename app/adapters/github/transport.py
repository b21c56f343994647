"""One REST call through PyGithub, and the PyGithub client the bot builds.

PyGithub does the HTTP work (auth, base URL, pacing, in-place retries of idempotent calls on
5xx); ``request`` counts every call, decodes the JSON and classifies errors (``errors.raise_for``).
"""

from __future__ import annotations

import json
from typing import Any

from github import Auth, Github, GithubException
from github.GithubException import RateLimitExceededExceedsMaxWait
from github.Requester import Requester
from urllib3.util.retry import Retry

from app.adapters.github.errors import raise_for
from app.core.routing import TransientError
from app.metrics import GITHUB_CALLS
from app.settings import Settings


def request(
    requester: Any,
    op: str,
    verb: str,
    path: str,
    *,
    params: dict[str, Any] | None = None,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any], Any]:
    """One REST call through a PyGithub requester: counted, decoded, errors classified."""
    try:
        status, resp_headers, output = requester.requestJson(
            verb, path, parameters=params, headers=headers, input=body
        )
    except RateLimitExceededExceedsMaxWait as exc:  # only from a retry layer that would wait too long
        GITHUB_CALLS.labels(operation=op, status=str(exc.status)).inc()
        raise TransientError(
            f"{op}: rate limited ({exc.status})", retry_after=exc.wait, rate_limited=True
        ) from exc
    except GithubException as exc:
        # A retry layer may raise for a 403 that is not a rate limit ("Resource not accessible by
        # integration"): classify it like any answer, so a permanent refusal is not retried.
        GITHUB_CALLS.labels(operation=op, status=str(exc.status)).inc()
        raise_for(op, exc.status, dict(exc.headers or {}), exc.data)
    except OSError as exc:  # connection refused, reset, timeout, retries exhausted on 5xx
        GITHUB_CALLS.labels(operation=op, status="error").inc()
        raise TransientError(f"{op}: {exc.__class__.__name__}: {exc}") from exc
    GITHUB_CALLS.labels(operation=op, status=str(status)).inc()
    data: Any = None
    if output:
        try:
            data = json.loads(output)
        except ValueError:
            data = output
    if status >= 400:
        raise_for(op, status, resp_headers, data)
    return status, resp_headers, data


def _retry(settings: Settings) -> Retry:
    # Only idempotent methods are retried in place, and only on 5xx (GithubRetry would also retry
    # POST — a POST that failed with a 502 may still have created its comment — and would sleep on
    # rate limits). A rate limit is never slept on inside a call: it comes back as an answer,
    # becomes a TransientError with GitHub's documented wait, and the task is retried then.
    return Retry(
        total=settings.github_max_retries,
        backoff_factor=0.2,
        status_forcelist=[500, 502, 503, 504],
        allowed_methods=Retry.DEFAULT_ALLOWED_METHODS,
        respect_retry_after_header=False,
        raise_on_status=False,
    )


def github_client(settings: Settings, auth: Auth.Auth | None) -> Github:
    """PyGithub configured from the settings: base URL, timeout, in-place retries, pacing."""
    return Github(
        auth=auth,
        base_url=settings.github_api_url.rstrip("/"),
        timeout=int(settings.github_timeout_seconds),
        retry=_retry(settings),
        per_page=100,
        seconds_between_requests=settings.github_seconds_between_requests,
        seconds_between_writes=settings.github_seconds_between_writes,
    )


def make_requester(settings: Settings) -> Requester:
    """A plain requester for these settings' token (tests and tools that need PyGithub itself)."""
    token = settings.github_token.get_secret_value() if settings.github_token is not None else None
    return github_client(settings, Auth.Token(token) if token else None).requester
