"""Celery tasks of the tracking capability (thin: they call app/)."""

from __future__ import annotations

from typing import Any

from app.core.routing import TransientError
from app.db import session_scope
from app.flows.tracking import check_watch as run_check
from app.flows.tracking import poll_watches as run_poll
from workers.celery_app import celery_app


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
