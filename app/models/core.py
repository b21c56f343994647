"""Core tables: webhook deliveries, the audit log, and the conditional-request cache."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Index, Integer, LargeBinary, String, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base


class DeliveryStatus:
    RECEIVED = "received"  # stored, not yet handed to the broker
    QUEUED = "queued"  # handed to the broker
    PROCESSING = "processing"  # claimed by a worker (lease in ``lease_until``)
    RETRY = "retry"  # transient failure, waiting for its backoff
    DONE = "done"
    IGNORED = "ignored"
    FAILED = "failed"

    PENDING = (RECEIVED, QUEUED, RETRY)
    FINAL = (DONE, IGNORED, FAILED)


class Delivery(Base):
    __tablename__ = "deliveries"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)  # X-GitHub-Delivery
    event: Mapped[str] = mapped_column(String(64), index=True)
    action: Mapped[str | None] = mapped_column(String(64))
    repo: Mapped[str | None] = mapped_column(String(200), index=True)
    status: Mapped[str] = mapped_column(String(16), default=DeliveryStatus.RECEIVED, index=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text)
    body: Mapped[bytes] = mapped_column(LargeBinary)  # the raw JSON payload as verified
    body_bytes: Mapped[int] = mapped_column(Integer)
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    enqueued_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    next_attempt_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    worker: Mapped[str | None] = mapped_column(String(200))

    __table_args__ = (Index("ix_deliveries_status_received", "status", "received_at"),)


class AuditEntry(Base):
    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    # Set in Python too: SQLite's CURRENT_TIMESTAMP has one-second resolution.
    at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), default=lambda: datetime.now(UTC), index=True
    )
    actor: Mapped[str] = mapped_column(String(200), index=True)  # GitHub login, operator, or "sweepbot"
    # Who caused it, when someone else made it: a bot write after a maintainer's command.
    caused_by: Mapped[str | None] = mapped_column(String(200), index=True)
    action: Mapped[str] = mapped_column(String(100), index=True)  # e.g. command.sweep, github.create_comment
    target: Mapped[str | None] = mapped_column(String(400))  # e.g. owner/repo#12
    outcome: Mapped[str] = mapped_column(String(32))  # ok, refused, failed, noop
    detail: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    delivery_id: Mapped[str | None] = mapped_column(String(64), index=True)


class HttpCacheEntry(Base):
    """ETag and body of a GET, so the next poll can ask ``If-None-Match`` (a 304 is free)."""

    __tablename__ = "http_cache"

    key: Mapped[str] = mapped_column(String(500), primary_key=True)  # method + url
    etag: Mapped[str | None] = mapped_column(String(200))
    last_modified: Mapped[str | None] = mapped_column(String(100))
    body: Mapped[str] = mapped_column(Text)
    fetched_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Heartbeat(Base):
    """Last sign of life of a worker or beat process, shown on the dashboard."""

    __tablename__ = "heartbeats"

    name: Mapped[str] = mapped_column(String(200), primary_key=True)  # e.g. worker@host:pid, beat
    kind: Mapped[str] = mapped_column(String(32))
    seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
