"""Celery tasks of the tracking capability (thin: they call app/)."""

from __future__ import annotations

from typing import Any

import structlog
from celery.signals import worker_ready

from app.adapters import queue
from app.adapters.github.gateway import session_gateway
from app.core.routing import TransientError
from app.db import session_scope
from app.flows.ingest.resync import adopt_once
from app.flows.tracking.watches import check_watch as run_check
from app.flows.tracking.watches import poll_watches as run_poll
from app.settings import get_settings
from workers.celery_app import celery_app

log = structlog.get_logger(__name__)


@worker_ready.connect
def _adopt_on_first_start(**_: object) -> None:
    """With credentials, adopt ``SWEEPBOT_RESYNC_REPOS`` (each once per database, app.flows.ingest.resync)."""
    settings = get_settings()
    if settings.has_github_credentials and settings.resync_repos:
        queue.enqueue("sweepbot.resync_first_start")


@celery_app.task(name="sweepbot.resync_first_start")
def resync_first_start() -> dict[str, str]:
    out = {}
    for repo in get_settings().resync_repos:
        with session_scope() as session:
            summary = adopt_once(session, session_gateway(session, repo=repo), repo)
        out[repo] = (
            "adopted before" if summary is None else f"{summary.pulls} PR(s), {len(summary.errors)} failed"
        )
        log.info("resync_first_start", repo=repo, outcome=out[repo])
    return out


@celery_app.task(name="sweepbot.poll_watches")
def poll_watches() -> dict[str, int]:
    """Beat: one poll cycle over every active watch (each watch committed on its own)."""
    with session_scope() as session:
        return run_poll(session, commit=True)


@celery_app.task(name="sweepbot.check_watch", bind=True, max_retries=8)
def check_watch(self: Any, watch_id: int) -> str | None:
    """Re-evaluate one watch now (after a command, or a redelivered event)."""
    try:
        with session_scope() as session:
            result = run_check(session, int(watch_id))
            return result.decision.action if result is not None else None
    except TransientError as exc:
        raise self.retry(exc=exc, countdown=exc.delay(self.request.retries + 1, 30)) from exc
