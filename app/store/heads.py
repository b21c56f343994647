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
from app.flows.routing import HandlerContext, HandlerSkipped, router
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


def _received_at(session: Session, delivery_id: str | None) -> datetime | None:
    from app.models import Delivery

    if delivery_id is None:
        return None
    at = session.scalar(select(Delivery.received_at).where(Delivery.id == delivery_id))
    return _aware(at) if at is not None else None


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def on_pull_request_head(ctx: HandlerContext) -> None:
    pr = ctx.event.payload.get("pull_request")
    repo = ctx.event.repo
    if not repo or not isinstance(pr, dict):
        raise HandlerSkipped("no repository or pull_request in the payload")
    sha = str((pr.get("head") or {}).get("sha") or "")
    number = pr.get("number")
    if not sha or not isinstance(number, int):
        raise HandlerSkipped("no head sha or number")
    # When the bot received the event, never the payload's updated_at: that can predate the push
    # (it moves for other reasons too), and an early stamp would date a new head before a comment
    # written about the old one. A late stamp only ever makes the bot refuse and ask for the sha.
    at = _received_at(ctx.session, ctx.event.delivery_id) or datetime.now(UTC)
    if not record_head(
        ctx.session,
        repo=repo,
        pr_number=number,
        sha=sha,
        at=at,
        source=str(ctx.event.action),
        delivery_id=ctx.event.delivery_id,
    ):
        raise HandlerSkipped("head already recorded")


for _action in ("opened", "reopened", "synchronize"):
    router.register("pull_request", _action)(on_pull_request_head)
