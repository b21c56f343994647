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
from app.store.auditspool import AuditSpool

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
    spool: AuditSpool | None = None,
    **fields: Any,
) -> None:
    """Record in a transaction of its own, retried across a short database outage.

    When the outage outlasts the retries, the row goes to ``spool`` (a local file, drained by the
    next audit write that reaches the database), or without one into the caller's transaction.
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
            break
        except DBAPIError as exc:
            if wait is not None:
                sleep(wait)
                continue
            log.error("audit_outside_failed", action=fields.get("action"), error=str(exc)[:200])
            if spool is None:
                record(session, **fields)
            else:
                spool.put(fields)  # the caller's transaction would be rolled back by the outage
            return
    if spool is not None and spool.pending():
        try:
            with Session(bind) as own:
                spool.drain(own)
        except DBAPIError as exc:
            log.warning("audit_spool_drain_failed", error=str(exc)[:200])  # the next write retries
