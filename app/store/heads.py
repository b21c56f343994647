"""Record the heads pull requests are seen at (from ``pull_request`` events), and read them back.

The record is what ``/sweep approve`` binds to (app/core/approval.py). Sweeps are not used as
sightings: their head is read from the API some time after their ``created_at``, so it can be
newer than that stamp says, which is the one error that would approve an unreviewed push.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.approval import HeadSeen
from app.models import Delivery
from app.models.heads import PullHead

log = structlog.get_logger(__name__)


def parse_time(value: Any) -> datetime | None:
    """GitHub's ISO 8601 timestamps ("2026-12-01T09:00:00Z"), timezone-aware; None when unusable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def record_head(
    session: Session,
    *,
    repo: str,
    pr_number: int,
    sha: str,
    at: datetime,
    source: str,
    delivery_id: str | None = None,
) -> bool:
    """Store one sighting (a redelivery of the same event adds nothing); True when new."""
    known = session.scalars(
        select(PullHead.id).where(
            PullHead.repo == repo,
            PullHead.pr_number == pr_number,
            PullHead.head_sha == sha,
            PullHead.seen_at == at,
        )
    ).first()
    if known is not None:
        return False
    session.add(
        PullHead(
            repo=repo, pr_number=pr_number, head_sha=sha, seen_at=at, source=source, delivery_id=delivery_id
        )
    )
    log.info("pr_head_recorded", repo=repo, pr_number=pr_number, head_sha=sha, source=source)
    return True


def heads_seen(session: Session, repo: str, pr_number: int) -> list[HeadSeen]:
    """Every head the bot saw the PR at, with when it learned of it."""
    return [
        HeadSeen(sha, _aware(at))
        for sha, at in session.execute(
            select(PullHead.head_sha, PullHead.seen_at).where(
                PullHead.repo == repo, PullHead.pr_number == pr_number
            )
        )
    ]


def received_at(session: Session, delivery_id: str | None) -> datetime | None:
    """When the bot stored the delivery (None without one)."""
    if delivery_id is None:
        return None
    at = session.scalar(select(Delivery.received_at).where(Delivery.id == delivery_id))
    return _aware(at) if at is not None else None


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
