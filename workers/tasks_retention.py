"""Celery task of the retention pass (thin: it calls app/)."""

from __future__ import annotations

from datetime import UTC, datetime

from app.db import session_factory
from app.flows.ingest.retention import prune_history
from app.settings import get_settings
from workers.celery_app import celery_app


@celery_app.task(name="sweepbot.prune_history")
def prune_history_task() -> dict[str, int]:
    """Beat: delete history past its retention (deliveries, job events, audit rows), in batches."""
    return prune_history(session_factory(), get_settings(), datetime.now(UTC))
