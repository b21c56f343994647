"""Evaluating one watch: refresh what may have changed, decide, act.

Six steps, each its own function: the pin at the PR head (only when the head moved), the
dependencies (conditional reads), the image's tags and the pin's presence, the nightly choice and
containment (cached compares), the decision (pure, ``app.core.readiness``), and its effects (the
bump once, the watch's state, the status comment).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import structlog
from sqlalchemy.orm import Session

from app.adapters.github.errors import NotFound
from app.adapters.permissions import PermissionGateway, permission_of
from app.adapters.registry import TagPattern, parse_image
from app.core.admission import (
    AWAITING_LINE,
    ImageAdmission,
    approval_holds,
    image_admission,
    watch_admission,
)
from app.core.bot_config import BotConfig
from app.core.payloads import DELETED_FORK, head_of
from app.core.readiness import (
    Action,
    DepView,
    Readiness,
    choose_nightly,
    decide_readiness,
    is_contained,
    stop_if_archived,
)
from app.core.recipes import AmbiguousKeyError, RecipeError, current_image
from app.core.tagcommits import resolve_tag_commits
from app.flows.repo.bot_config import bot_config
from app.flows.repo.recipe_files import RecipeReader, default_image_repo, locate_config
from app.flows.tracking.bump import bump_watch
from app.flows.tracking.ports import PullReader, TrackingGateway
from app.flows.tracking.status_comment import publish_status
from app.flows.tracking.tags import (
    TagState,
    compare_status,
    full_commit,
    image_source_of,
    refresh_tags,
    trusted_registries,
)
from app.models.tracking import Bump, Dependency, DepState, Watch, WatchState
from app.store.bumps import latest_done_bump
from app.store.watches import live_dependencies

log = structlog.get_logger(__name__)


@dataclass
class Evaluation:
    watch_id: int
    decision: Readiness
    bumped: bool = False
    message: str | None = None


@dataclass(frozen=True)
class NightlyFacts:
    """What the tags and compares say: the nightly a bump would pin, where every merge first
    shipped, and whether the pinned (or already bumped) image holds every merge commit."""

    chosen: str | None = None
    first: str | None = None
    pinned_contains: bool | None = None
    bumped_covers: bool | None = None


def _now() -> datetime:
    return datetime.now(UTC)


# ------------------------------------------------------------------------------ 1. the pin at the head


def _head(gw: RecipeReader, watch: Watch, pull: dict[str, Any] | None) -> tuple[str, str] | str:
    """(head sha, head repo) the key is read at, or why it cannot be read."""
    if pull is not None:
        head = head_of(pull, watch.repo)
        if not head.readable:
            log.info("pin_unreadable", watch_id=watch.id, reason=DELETED_FORK)
            return DELETED_FORK
        return head.sha, str(head.repo)
    branch = str(gw.get_repo(watch.repo).get("default_branch") or "main")
    ref = gw.get_ref(watch.repo, f"heads/{branch}")
    return str((ref or {}).get("object", {}).get("sha") or ""), watch.repo


def admit_image(
    gw: RecipeReader, watch: Watch, pull: dict[str, Any] | None, cfg: BotConfig
) -> ImageAdmission:
    """Which image repository the watch may track: the head's, only if the default branch pins it
    for this key or lists it under ``images:`` (app.core.admission)."""
    head_repo = parse_image(watch.pinned_image or "").image_repo
    configured = [parse_image(src.name).image_repo for src in cfg.images]
    # A watch of the bot config (no PR) reads the pin on the default branch itself.
    default = (
        head_repo
        if pull is None
        else default_image_repo(gw, watch.repo, watch.config_key, cfg, watch.config_path)
    )
    verdict = image_admission(
        key=watch.config_key, head_repo=head_repo, default_repo=default, configured=configured
    )
    log.info("image_admission", watch_id=watch.id, image_repo=verdict.image_repo, why=verdict.why)
    return verdict


def refresh_pin(
    session: Session, gw: RecipeReader, watch: Watch, pull: dict[str, Any] | None, cfg: BotConfig
) -> str | None:
    """Re-read the key's ``image:`` at the PR head, only when the head moved (files cost calls),
    and which image repository it may track (``watch.image_repo``, None when refused).

    Returns why there is no pin to bump (the key is missing, archived to ``configs/deprecated/``,
    or has no ``image:``, or its image repository is not the default branch's), else None. An
    unchanged head keeps the earlier answer for free."""
    got = _head(gw, watch, pull)
    if isinstance(got, str):
        watch.image_repo = None
        return got
    head_sha, head_repo = got
    if head_sha and head_sha == watch.head_sha:
        if watch.pinned_image and watch.image_repo:
            return None
        if watch.decision in ("blocked", "stopped") and watch.reason:
            return watch.reason  # the config problem found at this very head
    watch.image_repo = None
    try:
        loc, text = locate_config(
            gw, head_repo, head_sha or None, watch.config_key, cfg, hint=watch.config_path
        )
    except AmbiguousKeyError as exc:
        watch.head_sha, watch.pinned_image = head_sha or None, None
        return str(exc)
    watch.head_sha = head_sha or None
    if text is None or not loc.found:
        watch.pinned_image = None
        if loc.archived and loc.path:
            watch.config_path = loc.path  # where it moved: the status comment and dashboard say so
        log.warning("config_key_not_found", repo=watch.repo, key=watch.config_key, reason=loc.reason)
        return str(loc.reason)
    watch.config_path = loc.path
    try:
        watch.pinned_image = current_image(text, watch.config_key)
    except RecipeError as exc:
        log.warning("pin_unreadable", key=watch.config_key, error=str(exc))
        watch.pinned_image = None
        return f"the `image:` of config key {watch.config_key} in {loc.path} cannot be read: {exc}"
    if not watch.pinned_image:
        return f"config key {watch.config_key} in {loc.path} has no `image:` to bump"
    try:
        verdict = admit_image(gw, watch, pull, cfg)
    except ValueError as exc:
        return f"the `image:` of config key {watch.config_key} cannot be read: {exc}"
    watch.image_repo = verdict.image_repo
    return None if verdict.ok else verdict.why


# ------------------------------------------------------------------------------ 2. the dependencies


def refresh_dependency(gw: PullReader, dep: Dependency) -> bool:
    """Read the upstream PR conditionally (a 304 is free); a merged PR is final and not re-read."""
    if dep.state == DepState.MERGED and dep.merge_sha:
        return False
    try:
        got = gw.get_pull_conditional(dep.dep_repo, dep.dep_number)
    except NotFound:  # no such PR: waiting for it would wait forever (the readiness blocks)
        changed = dep.state != DepState.MISSING
        dep.state = DepState.MISSING
        if changed:
            log.warning("dependency_missing", dep=dep.ref, watch_id=dep.watch_id)
        return changed
    data = got.data if isinstance(got.data, dict) else {}
    if data.get("merged") or data.get("merged_at"):
        state = DepState.MERGED
    elif data.get("state") == "closed":
        state = DepState.CLOSED
    else:
        state = DepState.OPEN
    merge_sha = data.get("merge_commit_sha") if state == DepState.MERGED else None
    title = str(data.get("title") or "")[:400] or None
    changed = (state, merge_sha) != (dep.state, dep.merge_sha)
    dep.state, dep.merge_sha, dep.title = state, merge_sha, title
    if changed:
        dep.updated_at = _now()
        log.info("dependency_changed", dep=dep.ref, state=state, merge_sha=merge_sha)
    return changed


# ---------------------------------------------------------------- 3. tags and the pin's presence


def _tags(
    session: Session,
    watch: Watch,
    cfg: BotConfig,
    image_repo: str,
    http: httpx.Client | None,
    memo: dict[str, TagState] | None,
) -> TagState:
    """The image's tags, listed once per poll cycle (``memo``), and whether the pin still exists."""
    src = image_source_of(cfg, image_repo)
    memo_key = f"{image_repo}|{src.memo_key}"
    tags = memo.get(memo_key) if memo is not None else None
    if tags is None:
        tags = refresh_tags(
            session,
            image_repo,
            pattern=src.pattern,
            trusted=trusted_registries(cfg, [image_repo]),  # admitted from the default branch
            registry_kind=src.kind,
            registry_url=src.url,
            http=http,
        )
        if memo is not None:
            memo[memo_key] = tags
    if tags.ok:
        watch.registry_error = watch.registry_error_since = None
    else:  # the tags known so far stand in: say so on the watch, not only in a log line
        watch.registry_error = (tags.error or "the registry could not be read")[:500]
        watch.registry_error_since = watch.registry_error_since or _now()
    pinned_tag = parse_image(watch.pinned_image or "").tag
    missing = bool(tags.ok and pinned_tag and pinned_tag not in tags.names)
    if missing and watch.pinned_missing_since is None:
        watch.pinned_missing_since = _now()
        log.warning("pinned_image_deleted", repo=watch.repo, pr=watch.pr_number, image=watch.pinned_image)
    elif not missing:
        watch.pinned_missing_since = None
    return tags


# ---------------------------------------------------------------- 4. nightly choice and containment


def _upstream(cfg: BotConfig, image_repo: str, deps: Sequence[Dependency]) -> str | None:
    """The repo the image is built from: configured, or the one repo every dependency lives in."""
    repos = {d.dep_repo for d in deps}
    return image_source_of(cfg, image_repo).source_repo or (next(iter(repos)) if len(repos) == 1 else None)


def nightly_facts(
    session: Session,
    gw: TrackingGateway,
    watch: Watch,
    *,
    cfg: BotConfig,
    image_repo: str,
    tags: TagState,
    deps: Sequence[Dependency],
    bump: Bump | None,
) -> NightlyFacts:
    """Which nightly holds every merge commit (compares are cached forever, so this is free after
    the first time), and whether the pinned and the bumped image do."""
    merged = [d for d in deps if d.state == DepState.MERGED and d.merge_sha]
    upstream = _upstream(cfg, image_repo, deps)
    # Only dependencies of the repo the image is built from can be checked for containment.
    needed = [d.merge_sha for d in merged if d.dep_repo == upstream and d.merge_sha]
    if not upstream or not needed or len(merged) != len(deps):
        return NightlyFacts()
    repo: str = upstream
    pattern = TagPattern(image_source_of(cfg, image_repo).pattern)

    def contains_all(commit: str) -> bool:
        return all(is_contained(compare_status(session, gw, repo, m, commit)) for m in needed)

    def full(tag: str, short: str) -> str | None:
        return full_commit(session, gw, repo, image_repo, tag, short)

    def commit_of(image: str | None) -> str | None:
        tag = parse_image(image).tag if image else None
        captured = pattern.commit_of(tag) if tag else None
        resolved = resolve_tag_commits([(tag, captured)], full) if tag and captured else []
        return resolved[0][1] if resolved else None

    # Short-SHA tags (nightly-dev-...-75c2eef) are compared by their full upstream commit.
    choice = choose_nightly(resolve_tag_commits(tags.present, full), contains_all)
    pin_sha = commit_of(watch.pinned_image)
    pinned_contains = contains_all(pin_sha) if pin_sha else None
    bumped_sha = commit_of(bump.image) if bump is not None else None
    # False only when a dependency added after the bump is missing from the bumped image.
    bumped_covers = contains_all(bumped_sha) if bumped_sha else None
    return NightlyFacts(choice.chosen, choice.first, pinned_contains, bumped_covers)


# ------------------------------------------------------------------------------ 5. decide, 6. act


def decide(
    watch: Watch, deps: Sequence[Dependency], facts: NightlyFacts, bump: Bump | None, problem: str | None
) -> Readiness:
    merged = [d for d in deps if d.state == DepState.MERGED and d.merge_sha]
    covers = facts.bumped_covers
    if bump is not None and len(merged) < len(deps):
        covers = False  # a dependency added after the bump has not even merged yet
    decision = decide_readiness(
        key=watch.config_key,
        deps=[DepView(d.ref, d.state, d.merge_sha, d.title) for d in deps],
        image_repo=watch.image_repo,
        chosen_tag=facts.chosen,
        pinned_image=watch.pinned_image,
        pinned_contains=facts.pinned_contains,
        bumped_image=bump.image if bump is not None else None,
        bumped_covers=covers,
        config_problem=problem,
        registry_error=watch.registry_error,
    )
    return stop_if_archived(
        decision,
        key=watch.config_key,
        path=watch.config_path,
        config_problem=problem,
        bumped=bump is not None,
    )


def act(
    session: Session,
    gw: TrackingGateway,
    watch: Watch,
    decision: Readiness,
    *,
    cfg: BotConfig,
    deps: Sequence[Dependency],
    bump: Bump | None,
    pull: dict[str, Any] | None,
) -> Evaluation:
    """Apply the decision: the bump (once), then the watch's state and stored reason."""
    result = Evaluation(watch.id, decision)
    if decision.action == "bump" and decision.image:
        merged = [d for d in deps if d.state == DepState.MERGED and d.merge_sha]
        outcome = bump_watch(session, gw, watch, image=decision.image, deps=merged, config=cfg, pull=pull)
        result.bumped = outcome.state == "committed"
        result.message = outcome.message
        if outcome.state in ("committed", "already"):
            watch.state = WatchState.BUMPED
            watch.pinned_image = decision.image
            decision = Readiness("noop", outcome.message, decision.image)
        else:
            watch.state = WatchState.BLOCKED
            decision = Readiness("blocked", outcome.message, decision.image)
        result.decision = decision
    elif bump is not None and decision.action == "noop":
        watch.state = WatchState.BUMPED
    elif decision.action == "stopped":
        watch.state = WatchState.ARCHIVED
    else:
        watch.state = {"wait": WatchState.WAITING, "blocked": WatchState.BLOCKED}.get(
            decision.action, WatchState.DONE
        )
    watch.decision, watch.reason = decision.action, decision.reason
    watch.checked_at = _now()
    session.flush()
    return result


def admission_hold(gw: PermissionGateway, watch: Watch, pull: dict[str, Any] | None) -> str | None:
    """Why the watch waits for a maintainer, or None when admitted. An approval stands for the
    head it was given for: a push voids it. A watch stored before admission existed
    (``admitted_by`` NULL) is admitted when its PR's author has write access."""
    head = str(((pull or {}).get("head") or {}).get("sha") or "")
    if pull is not None and not approval_holds(approved_sha=watch.approved_sha, head_sha=head):
        log.info("watch_approval_voided", watch_id=watch.id, approved=watch.approved_sha, head=head)
        watch.admitted_by, watch.approved_sha = None, None
    if watch.admitted_by is not None:
        return None
    author = str(((pull or {}).get("user") or {}).get("login") or "")
    if pull is None or not author:
        return f"{AWAITING_LINE}: sweepbot cannot tell who wrote the dependency lines"
    verdict = watch_admission(
        body_author=author, author_role=permission_of(gw, watch.repo, author), admitted_by=None
    )
    if verdict.verdict == "admit":
        watch.admitted_by = author
        return None
    return verdict.why


def _hold(
    session: Session,
    gw: TrackingGateway,
    watch: Watch,
    why: str,
    state: str,
    publish: bool,
    *,
    action: Action = "wait",
) -> Evaluation:
    """Record why nothing is done for the watch; no dependency, registry or bump call."""
    watch.state, watch.decision, watch.reason = state, action, why
    watch.checked_at = _now()
    session.flush()
    if publish and watch.pr_number:
        publish_status(session, gw, watch.repo, watch.pr_number)
    return Evaluation(watch.id, Readiness(action, why))


def evaluate_watch(
    session: Session,
    gw: TrackingGateway,
    watch: Watch,
    *,
    pull: dict[str, Any] | None = None,
    pull_changed: bool = True,
    http: httpx.Client | None = None,
    tag_memo: dict[str, TagState] | None = None,
    publish: bool = True,
) -> Evaluation:
    """Refresh what may have changed, decide, and act (bump once; update the status comment).

    Nothing is read for a watch no writer admitted, nor for one whose image repository is not the
    default branch's (app.core.admission): it says why and waits for a maintainer or a push."""
    held = admission_hold(gw, watch, pull)
    if held is not None:
        return _hold(session, gw, watch, held, WatchState.UNAPPROVED, publish)
    cfg = bot_config(session, gw, watch.repo)
    problem = refresh_pin(session, gw, watch, pull, cfg) if pull_changed else None
    if watch.pinned_image and not watch.image_repo and problem:
        return _hold(session, gw, watch, problem, WatchState.REFUSED, publish, action="blocked")
    deps = live_dependencies(watch)
    for dep in deps:
        refresh_dependency(gw, dep)
    bump = latest_done_bump(session, watch.id)
    facts = NightlyFacts()
    if watch.image_repo:
        tags = _tags(session, watch, cfg, watch.image_repo, http, tag_memo)
        facts = nightly_facts(
            session, gw, watch, cfg=cfg, image_repo=watch.image_repo, tags=tags, deps=deps, bump=bump
        )
        merged = [d for d in deps if d.state == DepState.MERGED and d.merge_sha]
        for dep in deps:
            dep.contained_in = facts.first if dep in merged and facts.first else None
    decision = decide(watch, deps, facts, bump, problem)
    watch.chosen_tag, watch.first_containing_tag = facts.chosen, facts.first
    result = act(session, gw, watch, decision, cfg=cfg, deps=deps, bump=bump, pull=pull)
    if publish and watch.pr_number:
        publish_status(session, gw, watch.repo, watch.pr_number)
    return result


__all__ = [
    "Evaluation",
    "NightlyFacts",
    "act",
    "decide",
    "evaluate_watch",
    "nightly_facts",
    "refresh_dependency",
    "refresh_pin",
]
