"""Redelivery of webhook deliveries GitHub failed to send (owned by app/flows/ingest/redelivery.py)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, DateTime, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base


class RedeliveryRequest(Base):
    """One GUID the bot asked GitHub to redeliver: remembered so it is never asked twice."""

    __tablename__ = "redelivery_requests"

    guid: Mapped[str] = mapped_column(String(64), primary_key=True)  # X-GitHub-Delivery
    hook: Mapped[str] = mapped_column(String(220))  # "app" or "owner/repo:hook_id"
    github_delivery_id: Mapped[int] = mapped_column(BigInteger)  # the failed attempt asked about
    event: Mapped[str] = mapped_column(String(64))
    action: Mapped[str | None] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))  # asking -> requested | refused
    failure: Mapped[str | None] = mapped_column(Text)  # GitHub's status of the failed attempt
    error: Mapped[str | None] = mapped_column(Text)  # why GitHub refused the redelivery
    requested_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class RedeliveryScan(Base):
    """Where each hook's scan of GitHub's delivery list stands (see app/core/redelivery.py)."""

    __tablename__ = "redelivery_scans"

    hook: Mapped[str] = mapped_column(String(220), primary_key=True)
    watermark: Mapped[int | None] = mapped_column(BigInteger)
    resume_cursor: Mapped[str | None] = mapped_column(String(200))
    pending_top: Mapped[int | None] = mapped_column(BigInteger)
    scanned_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
