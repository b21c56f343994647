"""Upstream dependency tracking: watches of recipe PRs, their dependencies, polling, commands.

The pieces live apart: references and readiness are pure (``app.core.deprefs``,
``app.core.readiness``, ``app.core.watchstatus``), queries are in ``app.store.watches`` /
``bumps`` / ``tags``, evaluating a watch is ``app.flows.tracking.evaluate``, the bump
``app.flows.tracking.bump``.
This module is the entry points: the ``pull_request`` and ``push`` handlers (on this module's
``router``, composed by ``app/flows/ingest/handlers.py``), the beat's poll, the ``/depends-on`` and
``/bump`` commands, and ``deps_status`` for the CLI.

Cost rule: a poll cycle in which nothing changed makes no rate-limited GitHub call. Dependency
and recipe PRs are read with ``If-None-Match``; compare answers are cached forever; the status
comment is only written when its text changed; files are only read when a head moved.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import httpx
import structlog
from sqlalchemy.orm import Session

from app.adapters.github.errors import NotFound
from app.adapters.permissions import permission_of
from app.core.admission import WatchAdmission, body_author_of, watch_admission
from app.core.approval import bind_approval, unchanged_since
from app.core.bot_config import CONFIG_PATH, BotConfig
from app.core.chosen_nightly import label_nightlies
from app.core.clock import utcnow
from app.core.deprefs import DepRef, parse_config_keys, parse_dependency_refs, parse_refs_list
from app.core.readiness import DepView, Readiness, decide_readiness, search_containing
from app.core.routing import HandlerContext, HandlerSkipped, Router, TransientError
from app.core.watchstatus import STATUS_MARKER, WatchView, render_status
from app.flows.repo.bot_config import bot_config, read_bot_config
from app.flows.repo.recipe_files import target_keys
from app.flows.tracking.evaluate import Evaluation, evaluate_watch
from app.flows.tracking.ports import TrackingGateway
from app.flows.tracking.status_comment import publish_status
from app.flows.tracking.tags import TagState, _image_source, refresh_tags
from app.models.tracking import Watch, WatchState
from app.store.audit import record
from app.store.bumps import happened_images
from app.store.heads import heads_seen
from app.store.watches import (
    active_watches,
    all_watches,
    ensure_watch,
    sync_dependencies,
    watches_for_pr,
)
from app.store.watches import drop_dependencies as mark_dropped

__all__ = [
    "STATUS_MARKER",
    "DepRef",
    "DepView",
    "Evaluation",
    "Readiness",
    "WatchView",
    "_image_source",
    "add_dependencies",
    "approve_watches",
    "apply_config_watches",
    "bot_config",
    "check_watch",
    "decide_readiness",
    "deps_status",
    "drop_dependencies",
    "evaluate_watch",
    "handle_pull_request",
    "handle_push",
    "parse_config_keys",
    "parse_dependency_refs",
    "parse_refs_list",
    "poll_watches",
    "publish_status",
    "refresh_tags",
    "render_status",
    "request_bump",
    "search_containing",
    "target_keys",
]

log = structlog.get_logger(__name__)


def _default_gateway(session: Session) -> TrackingGateway:
    # The dashboard imports this module (through nightlywatch) and never polls: the gateway, and
    # PyGithub with it (~30 MB resident), loads where a poll runs (bench/memory.py).
    from app.adapters.github.gateway import session_gateway  # lazy: PyGithub only where polls run

    return session_gateway(session)


router = Router()  # this capability's webhook handlers (app/flows/ingest/handlers.py composes them)

# ================================================================================= PR / push flows


def admit_body(
    session: Session,
    gw: TrackingGateway,
    watch: Watch,
    refs: list[DepRef],
    *,
    author: str,
    role: str,
) -> WatchAdmission:
    """Apply the PR body's dependency lines to the watch as far as their author may
    (app.core.admission): a writer's count, a non-writer's wait for a maintainer, and never
    change a watch admitted before."""
    verdict = watch_admission(body_author=author, author_role=role, admitted_by=watch.admitted_by)
    log.info("watch_admission", watch_id=watch.id, verdict=verdict.verdict, why=verdict.why)
    if verdict.verdict == "keep":
        return verdict
    added, removed = sync_dependencies(session, watch, refs, source="body", actor=author, authoritative=True)
    if verdict.verdict == "admit":
        watch.admitted_by = author
        if watch.state == WatchState.UNAPPROVED:
            watch.state = WatchState.WAITING
    elif added or removed or watch.body_changed_at is None:
        # What a maintainer approves must be what they read: an approval written before this
        # change is refused (app.flows.tracking.watches.approve_watches).
        watch.body_changed_at = utcnow()
    return verdict


def handle_pull_request(
    session: Session,
    gw: TrackingGateway,
    repo: str,
    action: str,
    pull: dict[str, Any],
    actor: str | None = None,
    *,
    body_changed: bool = True,
) -> list[Evaluation]:
    """pull_request opened/edited/synchronize/reopened/closed. ``actor`` is the event's sender
    (the author of an ``edited`` event's body change, ``body_changed``)."""
    number = int(pull["number"])
    watches = watches_for_pr(session, repo, number)
    if action == "closed":
        if not watches:
            raise HandlerSkipped("no watch on this PR")
        for w in watches:
            if w.state != WatchState.CLOSED:
                w.state, w.reason = WatchState.CLOSED, "the recipe PR was closed"
        session.flush()
        return []
    refs = parse_dependency_refs(str(pull.get("body") or ""), default_repo=None)
    if not refs and not any(w.dependencies for w in watches):
        raise HandlerSkipped("the PR declares no upstream dependencies")
    cfg = bot_config(session, gw, repo)
    if refs and (not watches or action in ("opened", "reopened", "edited")):
        keys = target_keys(gw, repo, pull, cfg)
        if not keys and not watches:
            log.warning("no_target_keys", repo=repo, pr=number)
        for key in keys:
            if key not in {w.config_key for w in watches}:
                watches.append(ensure_watch(session, repo, number, key, "body"))
    author = body_author_of(
        action,
        pr_author=str((pull.get("user") or {}).get("login") or ""),
        sender=actor,
        body_changed=body_changed,
    )
    role = permission_of(gw, repo, author) if author else "none"
    for w in watches:
        admit_body(session, gw, w, refs, author=author or "unknown", role=role)
        if action == "reopened" and w.state == WatchState.CLOSED:
            w.state = WatchState.WAITING
    evals = [evaluate_watch(session, gw, w, pull=pull, publish=False) for w in watches]
    publish_status(session, gw, repo, number)
    return evals


def poll_watches(
    session: Session,
    gw: TrackingGateway | None = None,
    *,
    http: httpx.Client | None = None,
    commit: bool = False,
) -> dict[str, int]:
    """One poll cycle over active watches (beat). Each recipe PR and dependency is read with
    ``If-None-Match``: when nothing changed, the cycle costs no rate-limited call."""
    gw = gw or _default_gateway(session)
    watches = active_watches(session)
    memo: dict[str, TagState] = {}
    counts = {"watches": len(watches), "bumped": 0, "errors": 0}
    pulls: dict[tuple[str, int], tuple[dict[str, Any], bool]] = {}
    for watch in watches:
        try:
            pull, changed = None, True
            if watch.pr_number:
                key = (watch.repo, watch.pr_number)
                if key not in pulls:
                    got = gw.get_pull_conditional(watch.repo, watch.pr_number)
                    pulls[key] = (got.data, got.changed)
                pull, changed = pulls[key]
                if pull.get("state") == "closed":
                    watch.state, watch.reason = WatchState.CLOSED, "the recipe PR was closed"
                    continue
            result = evaluate_watch(
                session,
                gw,
                watch,
                pull=pull,
                pull_changed=changed or not watch.pinned_image,
                http=http,
                tag_memo=memo,
            )
            counts["bumped"] += int(result.bumped)
            if commit:
                session.commit()
        except Exception as exc:
            counts["errors"] += 1
            log.exception("watch_check_failed", watch=watch.id, error=str(exc))
            if commit:
                session.rollback()
            elif not isinstance(exc, TransientError):
                raise
    return counts


def check_watch(
    session: Session, watch_id: int, gw: TrackingGateway | None = None, *, http: httpx.Client | None = None
) -> Evaluation | None:
    watch = session.get(Watch, watch_id)
    if watch is None:
        return None
    gw = gw or _default_gateway(session)
    pull = None
    changed = True
    if watch.pr_number:
        got = gw.get_pull_conditional(watch.repo, watch.pr_number)
        pull, changed = got.data, got.changed
    return evaluate_watch(
        session, gw, watch, pull=pull, pull_changed=changed or not watch.pinned_image, http=http
    )


def apply_config_watches(session: Session, gw: TrackingGateway, repo: str, cfg: BotConfig) -> list[Watch]:
    """Watches declared in `.github/sweepbot.yml` (source ``config``)."""
    out = []
    for spec in cfg.watches:
        watch = ensure_watch(session, repo, spec.pr or 0, spec.config_key, "config")
        watch.admitted_by = watch.admitted_by or "config"  # the default branch's bot config
        refs = [DepRef.parse(r) for r in spec.depends_on]
        sync_dependencies(session, watch, refs, source="config", actor="config", authoritative=True)
        out.append(watch)
    return out


def handle_push(session: Session, gw: TrackingGateway, payload: dict[str, Any]) -> list[Watch]:
    """A push to the default branch that touches the bot config re-reads it (default branch only)."""
    repo_info = payload.get("repository") or {}
    repo = str(repo_info.get("full_name") or "")
    default = str(repo_info.get("default_branch") or repo_info.get("master_branch") or "main")
    if payload.get("ref") != f"refs/heads/{default}":
        raise HandlerSkipped("not a push to the default branch")
    touched = {
        p
        for c in payload.get("commits") or []
        for k in ("added", "modified", "removed")
        for p in c.get(k) or []
    }
    # A push payload lists at most 20 commits: past that, the file list is incomplete, so re-read.
    listed = payload.get("commits") or []
    if listed and len(listed) < 20 and CONFIG_PATH not in touched:
        raise HandlerSkipped(f"{CONFIG_PATH} not touched")
    cfg = read_bot_config(session, gw, repo, default_branch=default)
    return apply_config_watches(session, gw, repo, cfg)


# ======================================================= command entry points (app.flows.commands.comments)


def _pr_watches_or_create(
    session: Session, gw: TrackingGateway, repo: str, pr_number: int
) -> tuple[list[Watch], dict[str, Any]]:
    pull = gw.get_pull(repo, pr_number)
    watches = watches_for_pr(session, repo, pr_number)
    if not watches:
        cfg = bot_config(session, gw, repo)
        watches = [
            ensure_watch(session, repo, pr_number, k, "command") for k in target_keys(gw, repo, pull, cfg)
        ]
    return watches, pull


def _summary(evals: Sequence[Evaluation], watches: Sequence[Watch]) -> str:
    parts = []
    for w, e in zip(watches, evals, strict=False):
        parts.append(f"`{w.config_key}`: {e.message or e.decision.reason}")
    return "; ".join(parts)


def _refuse_missing(gw: TrackingGateway, refs: list[DepRef]) -> None:
    """A reference GitHub answers 404 for would be waited on forever: refuse the command
    (``ValueError``: the reply says what was wrong and how to fix it; nothing is added)."""
    missing = []
    for ref in refs:
        try:
            gw.get_pull(ref.repo, ref.number)
        except NotFound:
            missing.append(str(ref))
    if missing:
        raise ValueError(
            f"{', '.join(missing)}: no such pull request (GitHub answers 404 Not Found), so it could "
            "never merge. Check the repository and number (an issue number is not a pull request) "
            "and run the command again; nothing was added."
        )


def add_dependencies(
    session: Session, gw: TrackingGateway, *, repo: str, pr_number: int, refs: list[DepRef], actor: str
) -> str:
    """``/depends-on A B``: add, re-evaluate now, and say what happens next."""
    if not refs:
        return "No dependency given: write `/depends-on owner/repo#N` (e.g. vllm-project/vllm#47269)."
    _refuse_missing(gw, refs)
    watches, pull = _pr_watches_or_create(session, gw, repo, pr_number)
    if not watches:
        return (
            "I could not tell which config key this PR is about: name it in the PR body with "
            "`Config-Key: <key>` and run the command again."
        )
    added: list[str] = []
    for w in watches:
        w.admitted_by = w.admitted_by or actor  # /depends-on needs write: the writer admits it
        if w.state == WatchState.UNAPPROVED:
            w.state = WatchState.WAITING
        a, _ = sync_dependencies(session, w, refs, source="command", actor=actor)
        added += [x for x in a if x not in added]
        if w.state in (WatchState.CLOSED, WatchState.DONE):
            w.state = WatchState.WAITING
    evals = [evaluate_watch(session, gw, w, pull=pull, publish=False) for w in watches]
    publish_status(session, gw, repo, pr_number)
    head = (
        f"Added {', '.join(added)}." if added else "Already tracked: " + ", ".join(str(r) for r in refs) + "."
    )
    return f"{head} {_summary(evals, watches)}"


def drop_dependencies(
    session: Session, gw: TrackingGateway, *, repo: str, pr_number: int, refs: list[DepRef], actor: str
) -> str:
    """``/depends-on drop A``: stop waiting for A, re-evaluate now (the bump may happen right away)."""
    if not refs:
        return "No dependency given: write `/depends-on drop owner/repo#N`."
    watches = watches_for_pr(session, repo, pr_number)
    dropped = mark_dropped(watches, refs, actor)
    if not dropped:
        return f"{', '.join(str(r) for r in refs)} is not a tracked dependency of this PR; nothing dropped."
    session.flush()
    pull = gw.get_pull(repo, pr_number)
    active = [w for w in watches if w.state != WatchState.CLOSED]
    evals = [evaluate_watch(session, gw, w, pull=pull, publish=False) for w in active]
    publish_status(session, gw, repo, pr_number)
    return f"Dropped {', '.join(dropped)}. {_summary(evals, active)}"


def approve_watches(
    session: Session,
    gw: TrackingGateway,
    *,
    repo: str,
    pr_number: int,
    approver: str,
    comment_at: datetime | None,
    explicit_sha: str | None = None,
) -> str:
    """``/depends-on approve [sha]`` (write access, checked by the command handler): the PR's
    dependency lines count from now on, for the head the maintainer reviewed (bound as
    ``/sweep approve`` is, app.core.approval) and the body as it was when they wrote the comment."""
    pull = gw.get_pull(repo, pr_number)
    current = str((pull.get("head") or {}).get("sha") or "")
    binding = bind_approval(
        comment_at=comment_at,
        seen=heads_seen(session, repo, pr_number),
        current_head=current,
        explicit_sha=explicit_sha,
        command="/depends-on approve",
    )
    log.info("watch_approval_bound", head_sha=binding.sha, current_head=current, reason=binding.reason)
    if binding.sha is None:
        raise ValueError(binding.reason)
    waiting = [w for w in watches_for_pr(session, repo, pr_number) if w.admitted_by is None]
    if not waiting:
        return "Nothing to approve: no watch of this PR waits for a maintainer."
    if not all(unchanged_since(w.body_changed_at, comment_at) for w in waiting):
        raise ValueError(
            "The PR's dependency lines changed after your comment (or I cannot tell when you wrote "
            "it): read them again and approve again."
        )
    for w in waiting:
        w.admitted_by, w.approved_sha = approver, binding.sha
        w.state = WatchState.WAITING
    record(
        session,
        actor=approver,
        action="watch.approve",
        target=f"{repo}#{pr_number}",
        detail={"head_sha": binding.sha, "watches": [w.id for w in waiting]},
    )
    evals = [evaluate_watch(session, gw, w, pull=pull, publish=False) for w in waiting]
    publish_status(session, gw, repo, pr_number)
    return f"Approved by @{approver} for `{binding.sha[:12]}`: this PR's dependency lines count. " + _summary(
        evals, waiting
    )


def request_bump(session: Session, gw: TrackingGateway, *, repo: str, pr_number: int, actor: str) -> str:
    """``/bump``: check readiness now and bump if ready; else say what it waits for."""
    watches, pull = _pr_watches_or_create(session, gw, repo, pr_number)
    if not watches:
        return (
            "Nothing to bump: this PR declares no upstream dependency and names no config key "
            "(add `Depends-On: owner/repo#N` to the body or use `/depends-on`)."
        )
    for w in watches:
        w.admitted_by = w.admitted_by or actor  # /bump needs write: the writer admits the watch
    evals = [evaluate_watch(session, gw, w, pull=pull, publish=False) for w in watches]
    publish_status(session, gw, repo, pr_number)
    return _summary(evals, watches)


def deps_status(session: Session) -> list[dict[str, Any]]:
    """Every watch with its dependencies and chosen nightly (CLI, dashboard). Once a bump has
    happened the chosen nightly is the pinned one; a newer one containing everything is listed
    apart (``newest_containing``), never as chosen."""
    bumped = happened_images(session)
    out = []
    for w in all_watches(session):
        labels = label_nightlies(
            pinned_image=w.pinned_image, newest_tag=w.chosen_tag, bumped_image=bumped.get(w.id)
        )
        out.append(
            {
                "id": w.id,
                "repo": w.repo,
                "pr": w.pr_number or None,
                "config_key": w.config_key,
                "state": w.state,
                "decision": w.decision,
                "reason": w.reason,
                "image_repo": w.image_repo,
                "admitted_by": w.admitted_by,  # None: waits for a maintainer (app.core.admission)
                "approved_sha": w.approved_sha,
                "pinned_image": w.pinned_image,
                "pinned_deleted": w.pinned_missing_since is not None,
                "chosen_nightly": labels.chosen,
                "bumped": labels.bumped,
                "newest_containing": labels.newest_containing,
                "first_containing": w.first_containing_tag,
                "dependencies": [
                    {
                        "ref": d.ref,
                        "state": d.state,
                        "merge_sha": d.merge_sha,
                        "dropped": d.dropped,
                        "contained_in": d.contained_in,
                        "source": d.source,
                    }
                    for d in w.dependencies
                ],
            }
        )
    return out


# ============================================================================================ handlers


def on_pull_request(ctx: HandlerContext[Session, TrackingGateway]) -> None:
    payload = ctx.event.payload
    repo = ctx.event.repo
    pull = payload.get("pull_request")
    if not repo or not isinstance(pull, dict):
        raise HandlerSkipped("no repository or pull_request in the payload")
    changes = payload.get("changes")
    handle_pull_request(
        ctx.session,
        ctx.gateway(),
        repo,
        str(ctx.event.action),
        pull,
        ctx.event.sender,
        body_changed=isinstance(changes, dict) and "body" in changes,
    )


for _action in ("opened", "edited", "synchronize", "reopened", "closed"):
    router.register("pull_request", _action)(on_pull_request)


@router.register("push")
def on_push(ctx: HandlerContext[Session, TrackingGateway]) -> None:
    handle_push(ctx.session, ctx.gateway(), ctx.event.payload)
