"""PR comment commands, the flow: the grammar is ``app.core.commands`` (parsing, ``/help``).

The handler runs on ``issue_comment`` ``created`` only (an edited comment does not run again),
on pull requests only, never for the bot itself or other bots. It reacts on receipt, checks the
permission (write, maintain or admin) for anything that spends runner time or changes files,
runs the command, and answers in one reply per triggering comment (hidden marker with the comment
id, looked up before creating, so a redelivery neither re-runs nor re-posts). Every command,
allowed or refused, is written to the audit log. What it asks of GitHub is ``CommandGateway``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
from sqlalchemy.orm import Session

from app.adapters import queue
from app.adapters.github.errors import GitHubError
from app.adapters.permissions import WRITE_ROLES, can_write
from app.core.approval import bind_approval
from app.core.commands import Command, help_text, is_bot, parse_commands, reply_marker
from app.core.deprefs import parse_dependency_refs
from app.core.inert import code
from app.core.routing import HandlerContext, HandlerSkipped, Router, TransientError
from app.core.sweepspec import SweepFilters
from app.flows.repo.changelog_mode import ChangelogGateway, changelog_filters
from app.flows.repo.recipe_files import target_keys
from app.flows.results.reports import pr_status_text
from app.flows.sweeps.cancel import cancel_pr_sweeps
from app.flows.sweeps.fork_approval import ApprovalGateway, approve_pr
from app.flows.sweeps.request import RequestGateway, request_sweep
from app.flows.tracking import watches as tracking
from app.flows.tracking.ports import TrackingGateway
from app.settings import get_settings
from app.store.audit import record
from app.store.heads import heads_seen, parse_time

log = structlog.get_logger(__name__)

router = Router()  # this capability's webhook handlers (app/flows/ingest/handlers.py composes them)


class CommandGateway(TrackingGateway, RequestGateway, ApprovalGateway, ChangelogGateway, Protocol):
    """The GitHub the commands use: the reply (reaction, marker lookup, upsert), the author's
    permission, and what the commands they run ask for (a sweep, an approval, dependencies)."""

    def add_reaction(self, repo: str, comment_id: int, content: str) -> Any: ...

    def find_comment(self, repo: str, number: int, marker: str) -> dict[str, Any] | None: ...

    def upsert_comment(self, repo: str, number: int, marker: str, body: str) -> dict[str, Any]: ...


@dataclass
class HandleOutcome:
    status: str  # "ignored" | "answered" | "already-answered"
    reason: str = ""
    reply: str | None = None
    results: list[tuple[str, str]] = field(default_factory=list)  # (command, outcome)


def sweep_filters(cmd: Command) -> SweepFilters | None:
    """The scheduler's ``SweepFilters`` from the /sweep options (None when no filter is given)."""
    conc = cmd.options.get("conc") or {}
    if not any(k in cmd.options for k in ("seq", "conc", "tp", "evals")):
        return None
    return SweepFilters(
        seq=cmd.options.get("seq"),
        conc=tuple(conc["list"]) if "list" in conc else None,
        conc_range=tuple(conc["range"]) if "range" in conc else None,
        tp=cmd.options.get("tp"),
        evals=cmd.options.get("evals", "default"),
    )


@dataclass(frozen=True)
class Where:
    """The pull request a comment is on, and who wrote it."""

    repo: str
    number: int
    login: str
    comment: Mapping[str, Any] = field(default_factory=dict)


def _pr_config_keys(session: Session, gw: CommandGateway, at: Where) -> list[str]:
    pull = gw.get_pull(at.repo, at.number)
    return list(target_keys(gw, at.repo, pull, tracking.bot_config(session, gw, at.repo)))


def _sweep(session: Session, gw: CommandGateway, cmd: Command, at: Where) -> str:
    keys = [cmd.options["config"]] if "config" in cmd.options else _pr_config_keys(session, gw, at)
    if not keys:
        raise ValueError(
            "I could not tell which config key this PR is about: name it, e.g. "
            "`/sweep config=minimaxm3-fp4-mi355x-vllm`"
        )
    replies = []
    for key in keys:
        filters = changelog_filters(
            session, gw, at.repo, at.number, key, sweep_filters(cmd), explicit="evals" in cmd.options
        )
        req = request_sweep(
            session,
            gw,
            repo=at.repo,
            pr_number=at.number,
            config_key=key,
            requested_by=at.login,
            reason="command",
            filters=filters,
            priority=cmd.options.get("priority", "normal"),
        )
        replies.append(str(req.reply))
    return "\n\n".join(replies)


def _cancel(session: Session, gw: CommandGateway, cmd: Command, at: Where) -> str:
    got = cancel_pr_sweeps(
        session, gw, repo=at.repo, pr_number=at.number, actor=at.login, reason=f"/sweep cancel by @{at.login}"
    )
    ids = ", ".join(f"#{s.id}" for s in got)
    return f"Cancelled sweep(s) {ids}." if got else "No open sweep on this PR: nothing to cancel."


def _approve(session: Session, gw: CommandGateway, cmd: Command, at: Where) -> str:
    current = str(gw.get_pull(at.repo, at.number)["head"]["sha"])
    binding = bind_approval(
        comment_at=parse_time(at.comment.get("created_at")),
        seen=heads_seen(session, at.repo, at.number),
        current_head=current,
        explicit_sha=cmd.options.get("sha"),
    )
    log.info("approval_bound", head_sha=binding.sha, current_head=current, reason=binding.reason)
    if binding.sha is None:
        raise ValueError(binding.reason)
    return str(
        approve_pr(session, gw, repo=at.repo, pr_number=at.number, head_sha=binding.sha, approver=at.login)
    )


def _depends_on(session: Session, gw: CommandGateway, cmd: Command, at: Where) -> str:
    refs = parse_dependency_refs("\n".join(f"Depends-On: {r}" for r in cmd.refs))
    fn = tracking.drop_dependencies if cmd.sub == "drop" else tracking.add_dependencies
    return str(fn(session, gw, repo=at.repo, pr_number=at.number, refs=refs, actor=at.login))


def _depends_approve(session: Session, gw: CommandGateway, cmd: Command, at: Where) -> str:
    return tracking.approve_watches(
        session,
        gw,
        repo=at.repo,
        pr_number=at.number,
        approver=at.login,
        comment_at=parse_time(at.comment.get("created_at")),
        explicit_sha=cmd.options.get("sha"),
    )


def _status(session: Session, gw: CommandGateway, cmd: Command, at: Where) -> str:
    return pr_status_text(session, repo=at.repo, pr_number=at.number)


def _bump(session: Session, gw: CommandGateway, cmd: Command, at: Where) -> str:
    return str(tracking.request_bump(session, gw, repo=at.repo, pr_number=at.number, actor=at.login))


def _help(session: Session, gw: CommandGateway, cmd: Command, at: Where) -> str:
    return help_text()


# What runs each command of the grammar (``Command.words``); a test checks the two agree.
RUNNERS = {
    "/help": _help,
    "/sweep": _sweep,
    "/sweep status": _status,
    "/sweep cancel": _cancel,
    "/sweep approve": _approve,
    "/depends-on": _depends_on,
    "/depends-on drop": _depends_on,
    "/depends-on approve": _depends_approve,
    "/bump": _bump,
}


def _run_command(session: Session, gw: CommandGateway, cmd: Command, at: Where) -> str:
    """Execute one allowed command; return the reply text (domain errors raise ValueError)."""
    run = RUNNERS.get(cmd.words)
    if run is None:
        raise ValueError(f"{cmd.words} is not implemented")
    return run(session, gw, cmd, at)


@dataclass
class _Reply:
    """The sections of the one reply, and whether a refusal line closes it."""

    sections: list[str] = field(default_factory=list)
    role: str | None = None  # asked once, only when a command needs it
    short_refusal: bool = False  # a read-only user's rejected commands get one short line, no echo


def _one(
    session: Session, gw: CommandGateway, cmd: Command, at: Where, reply: _Reply
) -> tuple[str, dict[str, Any]]:
    """Check, run and answer one command; its audit outcome and detail."""
    detail: dict[str, Any] = {"line": cmd.line[:500], "comment_id": int(at.comment["id"])}
    allowed = True
    if cmd.needs_write or cmd.error is not None:
        if reply.role is None:
            allowed, reply.role = can_write(gw, at.repo, at.login)
        allowed = reply.role in WRITE_ROLES
    if cmd.error is not None:
        detail["error"] = cmd.error
        if allowed:
            reply.sections.append(f"❌ {code(cmd.line)}\n\n{cmd.error}")
        else:
            reply.short_refusal = True
        return "rejected", detail
    if not allowed:
        detail["reason"] = f"{at.login} has {reply.role} permission; {cmd.words} needs write"
        detail["role"] = reply.role
        reply.short_refusal = True
        return "refused", detail
    try:
        with session.begin_nested():
            text = _run_command(session, gw, cmd, at)
    except TransientError:
        raise
    except (ValueError, LookupError, GitHubError) as exc:
        reply.sections.append(f"❌ {code(cmd.line)}\n\n{exc}")
        detail["error"] = str(exc)
        return "failed", detail
    reply.sections.append(f"✅ {code(cmd.line)}\n\n{text}" if cmd.name != "help" else text)
    return "ok", detail


def _refusal_line(at: Where, role: str | None) -> str:
    # Nothing of the comment is echoed: a user who may not run these commands cannot use the
    # bot's replies to post text, ping people or fill the thread.
    has = (
        f"@{at.login} has no permission on {at.repo} that GitHub reports to the bot"
        if role == "none"
        else f"@{at.login} has `{role}` permission on {at.repo}"
    )
    return f"⛔ {has}; this needs write, maintain or admin permission. Ask a maintainer to run it."


def _commands_of(payload: Mapping[str, Any], bot_login: str) -> tuple[list[Command], str]:
    """The comment's commands, or none and why it is ignored."""
    if payload.get("action") != "created":
        return [], "only new comments run commands (an edit does not run again)"
    comment = payload.get("comment") or {}
    if not (payload.get("issue") or {}).get("pull_request"):
        return [], "commands run on pull requests only"
    user = comment.get("user") or payload.get("sender") or {}
    if is_bot(user, bot_login) or is_bot(payload.get("sender"), bot_login):
        return [], "comment by a bot"
    commands = parse_commands(str(comment.get("body") or ""))
    return commands, "" if commands else "no command in the comment"


def handle_comment(
    session: Session,
    gw: CommandGateway,
    payload: Mapping[str, Any],
    *,
    bot_login: str,
    delivery_id: str | None = None,
) -> HandleOutcome:
    """Process one ``issue_comment`` payload (action ``created``)."""
    commands, why_not = _commands_of(payload, bot_login)
    if not commands:
        return HandleOutcome("ignored", why_not)
    comment = payload.get("comment") or {}
    user = comment.get("user") or payload.get("sender") or {}
    at = Where(
        str((payload.get("repository") or {}).get("full_name")),
        int((payload.get("issue") or {})["number"]),
        str(user.get("login")),
        comment,
    )
    marker = reply_marker(int(comment["id"]))
    try:
        gw.add_reaction(at.repo, int(comment["id"]), "eyes")
    except GitHubError as exc:  # a reaction is a courtesy: never lose the command over it
        log.warning("reaction_failed", error=str(exc))
    if gw.find_comment(at.repo, at.number, marker) is not None:
        return HandleOutcome("already-answered", "this comment was answered before (redelivery)")
    outcome, reply = HandleOutcome("answered"), _Reply()
    for cmd in commands:
        state, detail = _one(session, gw, cmd, at, reply)
        record(
            session,
            actor=at.login,
            action=f"command.{cmd.name}" + (f".{cmd.sub}" if cmd.sub else ""),
            target=f"{at.repo}#{at.number}",
            outcome=state,
            detail=detail,
            delivery_id=delivery_id,
        )
        outcome.results.append((cmd.words, state))
    if reply.short_refusal:
        reply.sections.append(_refusal_line(at, reply.role))
    body = "\n\n---\n\n".join(reply.sections) + f"\n\n{marker}"
    gw.upsert_comment(at.repo, at.number, marker, body)
    outcome.reply = body
    return outcome


# Commands after which queued jobs may be releasable (or runners freed): ring the scheduler.
TICKING = frozenset({"/sweep", "/sweep cancel", "/sweep approve", "/bump"})


def _tick() -> None:
    queue.enqueue("sweepbot.scheduler_tick")


@router.register("issue_comment", "created")
def on_issue_comment_created(ctx: HandlerContext[Session, CommandGateway]) -> None:
    payload = ctx.event.payload
    body = str((payload.get("comment") or {}).get("body") or "")
    if "/" not in body:  # cheap exit before building a gateway
        raise HandlerSkipped("no command in the comment")
    gw = ctx.gateway(ctx.event.sender or "sweepbot")
    result = handle_comment(
        ctx.session, gw, payload, bot_login=get_settings().bot_login, delivery_id=ctx.event.delivery_id
    )
    if result.status != "answered":
        raise HandlerSkipped(result.reason)
    if not any(words in TICKING for words, state in result.results if state == "ok"):
        return  # nothing the scheduler needs to look at (help, status, dependencies)
    ctx.after_commit.append(_tick)
