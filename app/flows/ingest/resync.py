"""Adopt a repository that already has work in it (``sweepbot resync``).

A bot installed on a busy repository, or one that was down while deliveries failed (GitHub never
resends them by itself, and redelivery may be off), has missed ``pull_request`` and
``issue_comment`` deliveries. This flow reads what GitHub holds now and runs it through the very
handlers a delivery runs (``app.flows.ingest.handlers.composed``), as the delivery GitHub would have
sent, so the trust rules apply unchanged:

- every open PR as ``pull_request`` ``opened`` by its author: dependency lines count only when the
  author is a writer (docs/security.md; an edit by someone else while the bot was away cannot be
  told apart, so the author is the one who vouches);
- every comment of it that holds a command the bot has not answered (no reply marker of the bot
  on the thread) as ``issue_comment`` ``created`` by its writer;
- the repository's recent workflow runs as ``workflow_run`` (the run tracking skips runs that
  are not the bot's).

The handlers are idempotent (look-before-create on the bot's hidden markers: the status comment,
the sticky report, the replies), so a second resync changes nothing. Each PR commits on its own:
one PR's failure is reported and the others go on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.commands import parse_commands, reply_marker
from app.core.routing import Event, GatewayFactory, HandlerContext, HandlerSkipped, Router
from app.flows.ingest.deliveries import delivery_gateways
from app.flows.ingest.handlers import composed
from app.models.core import AuditEntry
from app.settings import get_settings
from app.store.audit import record

log = structlog.get_logger(__name__)

ADOPTED = "repo.resync"  # the audit action that says a repository was adopted (once per database)
RUNS_LIMIT = 100  # the most recent runs read (the repair poll follows older in-flight jobs)


class ResyncGateway(Protocol):
    def list_pulls(
        self, repo: str, *, state: str = "open", head: str | None = None, base: str | None = None
    ) -> list[dict[str, Any]]: ...

    def list_comments(self, repo: str, number: int) -> list[dict[str, Any]]: ...

    def list_workflow_runs(
        self, repo: str, workflow: str | None = None, **params: Any
    ) -> list[dict[str, Any]]: ...


@dataclass
class ResyncSummary:
    repo: str
    pulls: int = 0
    comments: int = 0
    runs: int = 0
    handled: int = 0  # events some handler acted on
    errors: list[str] = field(default_factory=list)


def _unanswered_commands(comments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The comments holding a command with no reply of the bot (its marker) on the thread."""
    bodies = "\n".join(str(c.get("body") or "") for c in comments)
    return [
        c
        for c in comments
        if c.get("id") is not None
        and parse_commands(str(c.get("body") or ""))
        and reply_marker(int(c["id"])) not in bodies
    ]


Gateways = Callable[[Session, Event], GatewayFactory[Any]]
"""The handlers' gateway factory for one event (ingest's ``delivery_gateways`` by default)."""


def _run_handlers(
    session: Session, router: Router, event: Event, gateways: GatewayFactory[Any]
) -> tuple[bool, list[Callable[[], None]]]:
    ctx: HandlerContext[Session, Any] = HandlerContext(session=session, event=event, gateways=gateways)
    did = False
    for handler in router.handlers_for(event.name, event.action):
        try:
            handler(ctx)
            did = True
        except HandlerSkipped as skip:
            log.info("resync_handler_skipped", handler=handler.__qualname__, reason=str(skip))
    return did, ctx.after_commit


def _events_of_pull(repo: str, pull: dict[str, Any], comments: list[dict[str, Any]]) -> list[Event]:
    number = int(pull["number"])
    repository = {"full_name": repo}
    author = pull.get("user") or {}
    out = [
        Event(
            delivery_id=f"resync:{repo}#{number}",
            name="pull_request",
            action="opened",
            payload={"action": "opened", "pull_request": pull, "repository": repository, "sender": author},
        )
    ]
    for c in _unanswered_commands(comments):
        user = c.get("user") or {}
        out.append(
            Event(
                delivery_id=f"resync:{repo}#{number}:c{c['id']}",
                name="issue_comment",
                action="created",
                payload={
                    "action": "created",
                    "issue": {"number": number, "pull_request": {"url": pull.get("url") or ""}},
                    "comment": c,
                    "repository": repository,
                    "sender": user,
                },
            )
        )
    return out


def _settle(
    session: Session,
    summary: ResyncSummary,
    what: str,
    events: list[Event],
    router: Router,
    gateways: Gateways,
) -> str:
    """Run one unit's events and commit it (or roll it back and record why)."""
    handled, callbacks = 0, []
    try:
        for event in events:
            did, after = _run_handlers(session, router, event, gateways(session, event))
            handled += int(did)
            callbacks += after
        session.commit()
    except Exception as exc:  # one PR's failure must not stop the adoption of the others
        session.rollback()
        log.exception("resync_failed", what=what)
        summary.errors.append(f"{what}: {exc.__class__.__name__}: {exc}")
        return f"{what}: failed ({exc.__class__.__name__}: {exc})"
    for callback in callbacks:
        try:
            callback()
        except Exception:
            log.exception("resync_after_commit_failed")
    summary.handled += handled
    return f"{what}: {handled} of {len(events)} event(s) acted on"


def resync_repo(
    session: Session,
    gw: ResyncGateway,
    repo: str,
    *,
    gateways: Gateways = delivery_gateways,
    router: Router | None = None,
    progress: Callable[[str], None] = lambda line: None,
) -> ResyncSummary:
    """Converge the database to ``repo``'s open PRs, their unanswered commands and recent runs,
    through the handlers a delivery runs (``router``: the composed application's by default).
    ``gw`` lists; ``gateways`` gives each event's handlers their gateway; ``progress`` gets one
    line per PR and one for the runs."""
    router = router or composed(tuple(get_settings().extra_handler_modules))
    summary = ResyncSummary(repo=repo)
    pulls = gw.list_pulls(repo, state="open")
    progress(f"{repo}: {len(pulls)} open PR(s)")
    for pull in sorted(pulls, key=lambda p: int(p["number"])):
        number = int(pull["number"])
        events = _events_of_pull(repo, pull, gw.list_comments(repo, number))
        summary.pulls += 1
        summary.comments += len(events) - 1
        progress(_settle(session, summary, f"{repo}#{number}", events, router, gateways))
    runs = gw.list_workflow_runs(repo, limit=RUNS_LIMIT)
    run_events = [
        Event(
            delivery_id=f"resync:{repo}:run{r['id']}",
            name="workflow_run",
            action="completed" if r.get("status") == "completed" else "in_progress",
            payload={
                "action": "completed" if r.get("status") == "completed" else "in_progress",
                "workflow_run": r,
                "repository": {"full_name": repo},
            },
        )
        for r in runs
        if isinstance(r, dict) and "id" in r
    ]
    summary.runs = len(run_events)
    before, failed = summary.handled, len(summary.errors)
    for event in run_events:  # each run on its own: one run's failure does not undo the others
        _settle(
            session, summary, f"{repo} run {event.payload['workflow_run']['id']}", [event], router, gateways
        )
    progress(
        f"{repo}: {len(run_events)} recent run(s), {summary.handled - before} acted on, "
        f"{len(summary.errors) - failed} failed"
    )
    return summary


def adopted(session: Session, repo: str) -> bool:
    return (
        session.scalars(
            select(AuditEntry.id).where(AuditEntry.action == ADOPTED, AuditEntry.target == repo)
        ).first()
        is not None
    )


def record_adopted(session: Session, summary: ResyncSummary, actor: str) -> None:
    record(
        session,
        actor=actor,
        action=ADOPTED,
        target=summary.repo,
        outcome="ok" if not summary.errors else "partial",
        detail={
            "pulls": summary.pulls,
            "comments": summary.comments,
            "runs": summary.runs,
            "errors": summary.errors[:20],
        },
    )
    session.commit()


def adopt_once(session: Session, gw: ResyncGateway, repo: str) -> ResyncSummary | None:
    """The first start's resync of ``repo`` (``SWEEPBOT_RESYNC_REPOS``): done once per database,
    remembered in the audit log; None when it was done before (by this or ``sweepbot resync``)."""
    if adopted(session, repo):
        log.info("resync_skipped", repo=repo, why="adopted before")
        return None
    summary = resync_repo(session, gw, repo, progress=lambda line: log.info("resync_progress", line=line))
    record_adopted(session, summary, "sweepbot")
    return summary
