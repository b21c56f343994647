"""Celery tasks of the sweeps capability (thin: they call app/)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from workers.celery_app import celery_app


def _gateway(session: Session) -> Any:
    from app.github import gateway
    from app.settings import get_settings

    return gateway(get_settings(), session)


@celery_app.task(name="sweepbot.scheduler_tick")
def scheduler_tick() -> dict[str, Any]:
    from dataclasses import asdict

    from app.db import session_factory
    from app.scheduler import tick

    return asdict(tick(session_factory(), _gateway))


@celery_app.task(name="sweepbot.repair_jobs")
def repair_jobs() -> dict[str, Any]:
    from dataclasses import asdict

    from app.db import session_factory
    from app.scheduler import repair_jobs as repair

    return asdict(repair(session_factory(), _gateway))
