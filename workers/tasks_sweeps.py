"""Celery tasks of the sweeps capability (thin: they call app/)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from app.adapters.github.gateway import session_gateway
from app.core.routing import TransientError
from app.db import session_factory
from app.flows.nightly.watch import watch_nightlies as run_nightly_watch
from app.flows.scheduler.repair import repair_jobs as repair
from app.flows.scheduler.tick import tick
from workers.celery_app import celery_app


@celery_app.task(name="sweepbot.scheduler_tick")
def scheduler_tick() -> dict[str, Any]:
    return asdict(tick(session_factory(), session_gateway))


@celery_app.task(name="sweepbot.repair_jobs")
def repair_jobs() -> dict[str, Any]:
    return asdict(repair(session_factory(), session_gateway))


@celery_app.task(name="sweepbot.watch_nightlies", bind=True, max_retries=8)
def watch_nightlies(self: Any) -> list[dict[str, Any]]:
    """Beat: canaries of new nightlies, change points, bisection, regression issues."""
    try:
        return [r.to_json() for r in run_nightly_watch(session_factory(), session_gateway)]
    except TransientError as exc:
        raise self.retry(exc=exc, countdown=exc.retry_after or 60) from exc
