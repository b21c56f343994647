"""The retention pass: history older than its retention setting is deleted, in bounded batches.

A year of running must cost nothing: finished deliveries (4.2 MiB per 1,000; a full bench run
leaves 7,687 job webhooks), audit rows and redelivery requests would otherwise grow without end.
Each batch is one short transaction (``DELETE ... WHERE id IN (SELECT id ... LIMIT n)``), so a
first pass over a year of backlog never holds a lock for long nor blocks the webhook path; a pass
stops after ``max_batches`` per table and the next one (``SWEEPBOT_RETENTION_INTERVAL``) goes on.

- deliveries: finished ones (done, ignored, failed) received before the cutoff; the
  ``workflow_job``/``workflow_run`` ones sooner (``SWEEPBOT_JOB_EVENT_RETENTION_SECONDS``). A
  delivery still pending is never deleted, whatever its age.
- audit rows: older than ``SWEEPBOT_AUDIT_RETENTION_SECONDS``.
- redelivery requests: once GitHub can no longer redeliver them (twice its horizon).
- dispatch runs: already pruned by the repair poll (``SWEEPBOT_DISPATCH_RUN_RETENTION_SECONDS``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog
from sqlalchemy import ColumnElement, delete, select
from sqlalchemy.orm import Session

from app.models import AuditEntry, Delivery
from app.models.core import DeliveryStatus
from app.models.redelivery import RedeliveryRequest
from app.settings import Settings

log = structlog.get_logger(__name__)

JOB_EVENTS = ("workflow_job", "workflow_run")


@dataclass(frozen=True)
class Rule:
    """One kind of history: its table's key column and which rows are past their retention."""

    name: str
    key: Any  # the primary-key column the batch selects
    expired: ColumnElement[bool]


def rules(settings: Settings, now: datetime) -> list[Rule]:
    def before(seconds: float) -> datetime:
        return now - timedelta(seconds=seconds)

    finished = Delivery.status.in_(DeliveryStatus.FINAL)
    return [
        Rule(
            "job_events",
            Delivery.id,
            finished
            & Delivery.event.in_(JOB_EVENTS)
            & (Delivery.received_at < before(settings.job_event_retention_seconds)),
        ),
        Rule(
            "deliveries",
            Delivery.id,
            finished & (Delivery.received_at < before(settings.delivery_retention_seconds)),
        ),
        Rule("audit", AuditEntry.id, AuditEntry.at < before(settings.audit_retention_seconds)),
        Rule(
            "redelivery_requests",
            RedeliveryRequest.guid,
            RedeliveryRequest.requested_at < before(2 * settings.redelivery_horizon_seconds),
        ),
    ]


def delete_batch(session: Session, rule: Rule, batch: int) -> int:
    """Delete up to ``batch`` expired rows of one kind; how many went."""
    ids = select(rule.key).where(rule.expired).limit(batch).scalar_subquery()
    table = rule.key.class_
    done = session.execute(
        delete(table).where(rule.key.in_(ids)).execution_options(synchronize_session=False)
    )
    return int(done.rowcount)  # type: ignore[attr-defined]  # a CursorResult for DELETE


def prune_history(
    sessions: Callable[[], Session], settings: Settings, now: datetime, *, max_batches: int = 20
) -> dict[str, int]:
    """One retention pass: per kind, batches of ``SWEEPBOT_RETENTION_BATCH_SIZE`` rows, each
    committed on its own, until none is left or ``max_batches`` ran. Rows deleted, by kind."""
    batch = settings.retention_batch_size
    out: dict[str, int] = {}
    for rule in rules(settings, now):
        total = 0
        for _ in range(max_batches):
            with sessions() as session, session.begin():
                gone = delete_batch(session, rule, batch)
            total += gone
            if gone < batch:
                break
        out[rule.name] = total
    if any(out.values()):
        log.info("history_pruned", **out)
    return out
