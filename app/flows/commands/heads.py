"""Record the head a pull request is at, from its ``pull_request`` events (app/store/heads.py
keeps the record; ``/sweep approve`` binds to it)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.orm import Session

from app.core.routing import HandlerContext, HandlerSkipped, Router
from app.store.heads import received_at, record_head

router = Router()  # this capability's webhook handlers (app/flows/ingest/handlers.py composes them)


def on_pull_request_head(ctx: HandlerContext[Session, object]) -> None:  # needs no GitHub
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
    at = received_at(ctx.session, ctx.event.delivery_id) or datetime.now(UTC)
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
