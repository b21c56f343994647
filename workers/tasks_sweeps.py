"""Celery tasks of the sweeps capability (thin: they call app/)."""

from __future__ import annotations

from typing import Any

from app.adapters.github import session_gateway
from workers.celery_app import celery_app


@celery_app.task(name="sweepbot.scheduler_tick")
def scheduler_tick() -> dict[str, Any]:
    from dataclasses import asdict

    from app.db import session_factory
    from app.flows.scheduler import tick

    return asdict(tick(session_factory(), session_gateway))


@celery_app.task(name="sweepbot.repair_jobs")
def repair_jobs() -> dict[str, Any]:
    from dataclasses import asdict

    from app.db import session_factory
    from app.flows.scheduler import repair_jobs as repair

    return asdict(repair(session_factory(), session_gateway))


@celery_app.task(name="sweepbot.watch_nightlies", bind=True, max_retries=8)
def watch_nightlies(self: Any) -> list[dict[str, Any]]:
    """Beat: canaries of new nightlies, change points, bisection, regression issues."""
    from app.db import session_factory
    from app.flows.nightlywatch import watch_nightlies as run
    from app.flows.routing import TransientError

    try:
        return [r.to_json() for r in run(session_factory(), session_gateway)]
    except TransientError as exc:
        raise self.retry(exc=exc, countdown=exc.retry_after or 60) from exc
