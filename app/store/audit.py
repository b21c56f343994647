"""The audit log: who did what (and who caused it), when, with what outcome.

``record`` writes in the caller's transaction (a command and its audit row stand or fall
together). ``record_outside`` is for what cannot be undone, a write GitHub has already
accepted: it commits on its own connection, so a rollback of the caller's transaction (a
database restart mid-task, a later error) does not erase the trace of a write that happened.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Mark:
    """Where ``record_outside`` put a row, so ``settle_outside`` can give it its outcome."""

    entry_id: int | None = None  # committed on a connection of its own
    entry: AuditEntry | None = None  # in the caller's transaction (SQLite, a connection-bound session)
    spool_id: str | None = None  # in the local spool (the database was down)


def record_outside(
    session: Session,
    *,
    sleep: Callable[[float], None] = time.sleep,
    delays: tuple[float, ...] = OUTSIDE_RETRY_DELAYS,
    spool: AuditSpool | None = None,
    **fields: Any,
) -> Mark:
    """Record in a transaction of its own, retried across a short database outage.

    When the outage outlasts the retries, the row goes to ``spool`` (a local file, drained by the
    next audit write that reaches the database), or without one into the caller's transaction.
    Falls back to the caller's transaction when a second connection would not be independent:
    a session bound to a connection (tests' nested transactions) or SQLite, whose single writer
    the caller may already hold (a second writer would wait on it forever).
    """
    bind = session.get_bind()
    if not isinstance(bind, Engine) or bind.dialect.name == "sqlite":
        return Mark(entry=record(session, **fields))
    mark: Mark | None = None
    for wait in (*delays, None):
        try:
            with Session(bind) as own:
                entry = record(own, **fields)
                own.commit()
                mark = Mark(entry_id=entry.id)
            break
        except DBAPIError as exc:
            if wait is not None:
                sleep(wait)
                continue
            log.error("audit_outside_failed", action=fields.get("action"), error=str(exc)[:200])
            if spool is None:
                return Mark(entry=record(session, **fields))
            # The caller's transaction would be rolled back by the outage: the spool keeps it.
            return Mark(spool_id=spool.put(fields))
    if spool is not None and spool.pending():
        try:
            with Session(bind) as own:
                spool.drain(own)
        except DBAPIError as exc:
            log.warning("audit_spool_drain_failed", error=str(exc)[:200])  # the next write retries
    assert mark is not None
    return mark


def settle_outside(
    session: Session,
    mark: Mark,
    *,
    outcome: str,
    detail: dict[str, Any],
    spool: AuditSpool | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Give a row ``record_outside`` wrote ahead of a GitHub write the write's outcome and detail.

    When the database cannot take the update, the row keeps its ``pending`` outcome: it still
    says the write was sent, only not how it ended (logged as ``audit_settle_failed``)."""
    if mark.entry is not None:
        mark.entry.outcome, mark.entry.detail = outcome, {**(mark.entry.detail or {}), **detail}
        return
    if mark.spool_id is not None and spool is not None:
        spool.settle(mark.spool_id, outcome, detail)
        return
    bind = session.get_bind()
    for wait in (*OUTSIDE_RETRY_DELAYS[:3], None):
        try:
            with Session(bind) as own:
                entry = own.get(AuditEntry, mark.entry_id)
                if entry is not None:
                    entry.outcome, entry.detail = outcome, {**(entry.detail or {}), **detail}
                    own.commit()
            return
        except DBAPIError as exc:
            if wait is None:
                log.error("audit_settle_failed", entry=mark.entry_id, outcome=outcome, error=str(exc)[:200])
                return
            sleep(wait)
