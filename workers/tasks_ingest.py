"""Celery tasks of ingest: process a delivery, reap the forgotten ones, heartbeats."""

from __future__ import annotations

import structlog
from celery import Task
from celery.signals import worker_process_init, worker_ready

from app.adapters import broker
from app.adapters.github.gateway import session_gateway
from app.db import dispose_engines, session_scope
from app.flows.ingest import deliveries as ingest
from app.flows.ingest.redelivery import recover
from app.settings import get_settings
from workers.celery_app import celery_app

log = structlog.get_logger(__name__)


@worker_process_init.connect
def _fresh_connections(**_: object) -> None:
    # A forked worker must not reuse the parent's pooled database connections.
    dispose_engines()


@worker_ready.connect
def _announce(sender: object = None, **_: object) -> None:
    consumer = getattr(sender, "task_consumer", None)
    queues = sorted(q.name for q in getattr(consumer, "queues", []) or [])
    log.info("worker_ready", worker=ingest.worker_name(), queues=queues)
    with session_scope() as session:
        ingest.beat(session, f"worker@{ingest.worker_name()}", "worker")


@celery_app.task(name="sweepbot.process_delivery", bind=True, acks_late=True)
def process_delivery(self: Task, delivery_id: str) -> str:
    """One delivery: a retry's countdown message or a replay (out of queue order)."""
    with session_scope() as session:
        ingest.record_consumption(session, [delivery_id], sent_at=None)
    return ingest.process_delivery(delivery_id)


@celery_app.task(name="sweepbot.process_deliveries", acks_late=True)
def process_deliveries(delivery_ids: list[str], sent_at: float | None = None) -> dict[str, str]:
    """The API's batched doorbell and the reaper's batches: each id is claimed on its own, so a
    batch is as safe as singles."""
    with session_scope() as session:
        ingest.record_consumption(session, list(delivery_ids), sent_at=sent_at)
    return {delivery_id: ingest.process_delivery(delivery_id) for delivery_id in delivery_ids}


@celery_app.task(name="sweepbot.reap_deliveries")
def reap_deliveries() -> int:
    return len(ingest.reap())


@celery_app.task(name="sweepbot.purge_broker")
def purge_broker() -> int:
    """The embedded broker's consumed messages, deleted (beat runs it only for that broker)."""
    return broker.purge_consumed(get_settings().broker_url)


@celery_app.task(name="sweepbot.beat_heartbeat")
def beat_heartbeat() -> None:
    # Only beat schedules this task, so running it proves beat, the broker and a worker are alive.
    with session_scope() as session:
        ingest.beat(session, "beat", "beat")
        ingest.beat(session, f"worker@{ingest.worker_name()}", "worker")


@celery_app.task(name="sweepbot.recover_deliveries")
def recover_deliveries() -> dict[str, int]:
    """Beat: ask GitHub again for deliveries it failed to send that the bot never stored."""
    settings = get_settings()
    with session_scope() as session:
        reports = recover(session, session_gateway(session), settings)
    return {r.hook: r.requested for r in reports}
