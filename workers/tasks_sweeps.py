"""Celery tasks of the sweeps capability (thin: they call app/)."""

from __future__ import annotations

from typing import Any

from app.github import session_gateway
from workers.celery_app import celery_app


@celery_app.task(name="sweepbot.scheduler_tick")
def scheduler_tick() -> dict[str, Any]:
    from dataclasses import asdict

    from app.db import session_factory
    from app.scheduler import tick

    return asdict(tick(session_factory(), session_gateway))


@celery_app.task(name="sweepbot.repair_jobs")
def repair_jobs() -> dict[str, Any]:
    from dataclasses import asdict

    from app.db import session_factory
    from app.scheduler import repair_jobs as repair

    return asdict(repair(session_factory(), session_gateway))
