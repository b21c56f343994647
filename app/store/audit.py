"""The audit log: who did what (and who caused it), when, with what outcome.

``record`` writes in the caller's transaction (a command and its audit row stand or fall
together). ``record_outside`` is for what cannot be undone, a write GitHub has already
accepted: it commits on its own connection, so a rollback of the caller's transaction (a
database restart mid-task, a later error) does not erase the trace of a write that happened.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import structlog
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError
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


# A database restart takes a few seconds; past this the row goes in the caller's transaction.
OUTSIDE_RETRY_DELAYS = (0.2, 0.5, 1.0, 2.0, 4.0, 8.0)


def record_outside(
    session: Session,
    *,
    sleep: Callable[[float], None] = time.sleep,
    delays: tuple[float, ...] = OUTSIDE_RETRY_DELAYS,
    **fields: Any,
) -> None:
    """Record in a transaction of its own, retried across a short database outage.

    Falls back to the caller's transaction when a second connection would not be independent:
    a session bound to a connection (tests' nested transactions) or SQLite, whose single writer
    the caller may already hold (a second writer would wait on it forever).
    """
    bind = session.get_bind()
    if not isinstance(bind, Engine) or bind.dialect.name == "sqlite":
        record(session, **fields)
        return
    for wait in (*delays, None):
        try:
            with Session(bind) as own:
                record(own, **fields)
                own.commit()
            return
        except DBAPIError as exc:
            if wait is None:
                log.error("audit_outside_failed", action=fields.get("action"), error=str(exc)[:200])
                record(session, **fields)
                return
            sleep(wait)
