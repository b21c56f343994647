"""Ring the broker's doorbell. The database already holds the work, so a broker that is down
only delays it: the beat reaper (deliveries) and the periodic ticks (jobs, watches) catch up."""

from __future__ import annotations

from typing import Any

import structlog

log = structlog.get_logger(__name__)


def enqueue(task_name: str, *args: Any, countdown: float | None = None) -> bool:
    """Send ``task_name``; return False (and log) instead of raising when the broker is unreachable."""
    from workers.celery_app import current_celery

    try:
        current_celery().send_task(task_name, args=list(args), countdown=countdown)
    except Exception as exc:  # kombu raises several types for an unreachable broker
        log.warning("enqueue_failed", task=task_name, error=f"{exc.__class__.__name__}: {exc}")
        return False
    return True
