"""Celery tasks of the results capability (thin: they call app/)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from app.adapters.github.gateway import session_gateway
from app.adapters.queue import enqueue
from app.core.routing import TransientError
from app.db import session_factory, session_scope
from app.flows.results.collect import collect_job as collect
from app.flows.results.reports import flush_reports as flush
from workers.celery_app import celery_app


@celery_app.task(name="sweepbot.collect_job", bind=True, max_retries=8)
def collect_job(self: Any, job_id: int) -> dict[str, Any]:
    try:
        with session_scope() as session:
            outcome = collect(session, session_gateway(session), job_id)
    except TransientError as exc:
        attempt = self.request.retries + 1
        raise self.retry(
            exc=exc, countdown=exc.delay(attempt, min(300, 5 * 2**self.request.retries))
        ) from exc
    enqueue("sweepbot.flush_reports")
    enqueue("sweepbot.scheduler_tick")  # a runner is free again
    return asdict(outcome)


@celery_app.task(name="sweepbot.flush_reports")
def flush_reports() -> int:
    return flush(session_factory(), session_gateway)
