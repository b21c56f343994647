"""The audit log: who did what (and who caused it), when, with what outcome. Written in the
caller's transaction."""

from __future__ import annotations

from typing import Any

import structlog
from sqlalchemy.orm import Session

from app.models import AuditEntry

log = structlog.get_logger(__name__)


def record(
    session: Session,
    *,
    actor: str,
    action: str,
    target: str | None = None,
    outcome: str = "ok",
    detail: dict[str, Any] | None = None,
    delivery_id: str | None = None,
    caused_by: str | None = None,
) -> AuditEntry:
    """``actor`` made the change; ``caused_by`` (when different) is whose action led to it."""
    if caused_by == actor:
        caused_by = None
    entry = AuditEntry(
        actor=actor,
        action=action,
        target=target,
        outcome=outcome,
        detail=detail,
        delivery_id=delivery_id,
        caused_by=caused_by,
    )
    session.add(entry)
    log.info(
        "audit",
        actor=actor,
        caused_by=caused_by,
        action=action,
        target=target,
        outcome=outcome,
        delivery_id=delivery_id,
    )
    return entry
