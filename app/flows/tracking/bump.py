"""The image pin bump: one atomic commit (config line + perf-changelog entry) via the Git Data API.

Blobs -> tree -> commit -> ref update *without force*. Onto the recipe PR's branch when it lives
in the same repo (and the bot config allows it); otherwise onto the deterministic branch
``sweepbot/bump/<key>`` with one bump PR per config key, updated in place, superseded ones closed.
Exactly once: a stored ``Bump`` row is looked up first, the file content is compared before
committing (a crash after the ref update is noticed as "already pinned"), and a non-fast-forward
ref update is refused by GitHub rather than overwriting anyone's work.

This module loads the facts, asks ``app.core.bumpplan.plan_bump`` what to do, and applies the plan.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

import structlog
from sqlalchemy.orm import Session

from app.adapters.github.errors import Conflict, GitHubError, NotFound
from app.adapters.registry import parse_image
from app.core.admission import bump_image_allowed
from app.core.bot_config import BotConfig
from app.core.bumpplan import (
    BUMP_BLOCKED_MARKER,
    BUMP_BRANCH_PREFIX,
    BUMP_PR_MARKER,
    DONE_STATES,
    SKIP_SWEEP,
    Adopt,
    AlreadyPinned,
    Blocked,
    BumpFacts,
    BumpPlan,
    Commit,
    ConfigAt,
    HeadCommit,
    Mode,
    Refusal,
    RefuseHumanPush,
    bump_branch,
    canonical_pr_link,
    changelog_flags_for,
    commit_message,
    first_line,
    head_is_own_bump,
    link_fix_subject,
    must_inspect_head,
    needs_changelog,
    plan_bump,
    refusal_holds,
    without_skip_sweep,
)
from app.core.recipes import changelog_description_for_bump
from app.core.routing import TransientError
from app.flows.repo.recipe_files import default_image_repo, locate_config, read_master_configs, read_recipes
from app.flows.tracking.bump_pr import (
    close_superseded,
    ensure_bump_pr,
    fix_entry_link,
    previous_entry_to_replace,
    tell_bump_pr,
)
from app.flows.tracking.bump_sweep import request_bump_sweep
from app.flows.tracking.ports import BumpGateway
from app.models.tracking import Bump, Dependency, Watch
from app.store.bumps import blocked_bump, bump_for, last_own_bump, record_bump

__all__ = [
    "BUMP_BLOCKED_MARKER",
    "BUMP_BRANCH_PREFIX",
    "BUMP_PR_MARKER",
    "DONE_STATES",
    "SKIP_SWEEP",
    "BumpOutcome",
    "PushRefused",
    "bump_branch",
    "bump_watch",
    "canonical_pr_link",
    "changelog_flags_for",
    "commit_message",
    "link_fix_subject",
    "locate_config",
    "read_master_configs",
    "without_skip_sweep",
]

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class BumpOutcome:
    state: Literal["committed", "already", "blocked"]
    message: str
    commit_sha: str | None = None
    branch: str | None = None
    bump_pr_number: int | None = None


class PushRefused(Exception):
    """GitHub refused the bot's push to the recipe PR's branch (branch protection, no access)."""


@dataclass(frozen=True)
class _Ctx:
    """One bump attempt: the watch, the image, where it goes, and what the commit carries."""

    watch: Watch
    image: str
    config: BotConfig
    pull: dict[str, Any] | None
    mode: Mode
    branch: str
    pr_link: str | None  # the recipe PR (named in the bump PR's body)
    description: list[str]


def _branch_head(gw: BumpGateway, repo: str, branch: str) -> str | None:
    """The branch's head commit, read conditionally (an unchanged branch costs no rate limit)."""
    try:
        got = gw.get_conditional("git/get-ref", f"/repos/{repo}/git/ref/heads/{branch}")
    except NotFound:
        return None
    data = got.data if isinstance(got.data, dict) else {}
    return str((data.get("object") or {}).get("sha") or "") or None


def _default_branch(gw: BumpGateway, repo: str) -> str:
    got = gw.get_conditional("repos/get", f"/repos/{repo}")
    data = got.data if isinstance(got.data, dict) else {}
    return str(data.get("default_branch") or "main")


def _target(
    gw: BumpGateway, watch: Watch, pull: dict[str, Any] | None, cfg: BotConfig, *, allow_pr_branch: bool
) -> tuple[Mode, str, str | None]:
    """(mode, branch, branch head or None): the recipe PR's branch when it is in the same repo and
    the config allows it; otherwise the deterministic bump branch of the key."""
    if allow_pr_branch and pull is not None and cfg.bump.mode == "auto" and pull.get("state") == "open":
        head = pull.get("head") or {}
        head_repo = str((head.get("repo") or {}).get("full_name") or "")
        if head_repo == watch.repo and head.get("ref"):
            branch = str(head["ref"])
            return "pr_branch", branch, _branch_head(gw, watch.repo, branch)
    branch = bump_branch(watch.config_key)
    return "bump_pr", branch, _branch_head(gw, watch.repo, branch)


def bump_watch(
    session: Session,
    gw: BumpGateway,
    watch: Watch,
    *,
    image: str,
    deps: list[Dependency],
    config: BotConfig,
    pull: dict[str, Any] | None = None,
) -> BumpOutcome:
    """Bump ``watch.config_key`` to ``image`` once. Returns what happened and a one-line message.

    When GitHub refuses the push to the recipe PR's branch (protected, or the bot may not push
    there), the bump goes to the key's bump PR instead."""
    done = bump_for(session, watch.id, image)
    if done is not None and done.state == "committed" and (done.detail or {}).get("link_pending"):
        # A crash or a moved branch left the bump PR's entry saying XXX: fix it first.
        fix_entry_link(session, gw, watch, config, done)
    if done is not None and done.state in DONE_STATES:
        state: Literal["committed", "already"] = "already" if done.state == "already" else "committed"
        log.info("bump_done_before", repo=watch.repo, key=watch.config_key, image=image, state=done.state)
        return BumpOutcome(
            state, f"already bumped to {image}", done.commit_sha, done.branch, done.bump_pr_number
        )
    pr_link = str(pull.get("html_url")) if pull is not None and pull.get("html_url") else None
    dep_refs = [f"{d.ref}@{d.merge_sha}" if d.merge_sha else d.ref for d in deps]
    description = changelog_description_for_bump(image, dep_refs)

    def attempt(*, allow_pr_branch: bool) -> BumpOutcome:
        mode, branch, head = _target(gw, watch, pull, config, allow_pr_branch=allow_pr_branch)
        ctx = _Ctx(watch, image, config, pull, mode, branch, pr_link, description)
        facts = load_facts(session, gw, ctx, head)
        return apply_plan(session, gw, ctx, facts, plan_bump(facts))

    try:
        return attempt(allow_pr_branch=True)
    except PushRefused as exc:
        log.warning("pr_branch_push_refused", repo=watch.repo, key=watch.config_key, error=str(exc))
        outcome = attempt(allow_pr_branch=False)
        note = f"GitHub refused sweepbot's push to the recipe branch ({exc}), so "
        return replace(outcome, message=note + outcome.message)


def _untrusted_image(gw: BumpGateway, watch: Watch, image: str, config: BotConfig) -> str | None:
    """Defence in depth at the write: the image repository must be the key's on the default
    branch or one listed under ``images:`` (app.core.admission), whatever the watch says."""
    try:
        repo = parse_image(image).image_repo
        configured = [parse_image(src.name).image_repo for src in config.images]
    except ValueError as exc:
        return f"refused to pin {image!r}: {exc}"
    default = default_image_repo(gw, watch.repo, watch.config_key, config, watch.config_path)
    return bump_image_allowed(repo, default_repo=default, configured=configured)


# ------------------------------------------------------------------------------------------ facts


def _start(gw: BumpGateway, ctx: _Ctx, head: str | None) -> str:
    repo = ctx.watch.repo
    if ctx.mode == "pr_branch" and head is None:
        raise TransientError(f"branch {ctx.branch} of {repo} vanished while bumping")
    if head is not None:
        return head
    default = _default_branch(gw, repo)
    start = _branch_head(gw, repo, default) or ""
    if not start:
        raise TransientError(f"default branch {default} of {repo} not found")
    return start


def _head_commit(gw: BumpGateway, ctx: _Ctx, sha: str) -> HeadCommit:
    """The head commit to judge; sweepbot's link fix on top is looked through to its bump commit."""
    repo, key = ctx.watch.repo, ctx.watch.config_key
    commit = gw.get_commit(repo, sha)
    if first_line(str(commit.get("message") or "")).startswith(link_fix_subject(key, ctx.image)):
        # Our link fix landed but its record was rolled back: the bump commit is its parent.
        commit = gw.get_commit(repo, str(((commit.get("parents") or [{}])[0]).get("sha") or ""))
    parent = str(((commit.get("parents") or [{}])[0]).get("sha") or "") or None
    return HeadCommit(sha, first_line(str(commit.get("message") or "")), parent)


def _text(gw: BumpGateway, repo: str, path: str, ref: str) -> str | None:
    got = gw.get_file(repo, path, ref=ref)
    return got[0] if got else None


def load_facts(session: Session, gw: BumpGateway, ctx: _Ctx, head: str | None) -> BumpFacts:
    """What plan_bump needs, read in the order it needs it: nothing past what decides the plan."""
    watch, repo, key = ctx.watch, ctx.watch.repo, ctx.watch.config_key
    start = _start(gw, ctx, head)
    refused = blocked_bump(session, watch.id, ctx.image)
    last = last_own_bump(session, repo, key, ctx.branch)
    facts = BumpFacts(
        repo=repo,
        key=key,
        image=ctx.image,
        mode=ctx.mode,
        branch=ctx.branch,
        start_sha=start,
        exists=head is not None,
        refusal=Refusal(
            refused.branch,
            (refused.detail or {}).get("start_sha"),
            str((refused.detail or {}).get("reason") or "blocked"),
        )
        if refused is not None
        else None,
        last_own_sha=last.commit_sha if last is not None else None,
        description=tuple(ctx.description),
        entry_link=ctx.pr_link if ctx.mode == "pr_branch" else None,
        skip_sweep=ctx.config.sweep.mode == "dispatch",
        changelog_path=ctx.config.bump.changelog,
    )
    if refusal_holds(facts):
        return facts  # same head as the refused attempt: no file reads, no comment
    adopting = False
    if must_inspect_head(facts):
        facts = replace(facts, head=_head_commit(gw, ctx, start))
        if not head_is_own_bump(facts):
            return facts
        adopting = True
    loc, text = locate_config(gw, repo, start, key, ctx.config, hint=watch.config_path)
    facts = replace(facts, config=ConfigAt(loc.path, text if loc.found else None, loc.reason))
    path = ctx.config.bump.changelog
    if adopting:
        parent = facts.head.parent if facts.head else None
        before = _text(gw, repo, path, parent) if parent else None
        after = _text(gw, repo, path, start)
        return replace(facts, changelog=after or "", changelog_before=before if after is not None else None)
    if not needs_changelog(facts):
        return facts
    recipes, missing = read_recipes(gw, repo, start, text or "", key)
    facts = replace(facts, recipes=recipes, missing_recipes=missing)
    changelog = _text(gw, repo, path, start) or ""
    previous = None
    if facts.exists and ctx.mode == "bump_pr" and last is not None:
        previous = previous_entry_to_replace(gw, repo, changelog, last)
    return replace(facts, changelog=changelog, previous_entry=previous)


# ------------------------------------------------------------------------------------------ effects


def apply_plan(session: Session, gw: BumpGateway, ctx: _Ctx, facts: BumpFacts, plan: BumpPlan) -> BumpOutcome:
    """Carry out the plan: the only place a bump writes."""
    key, branch = ctx.watch.config_key, ctx.branch
    if isinstance(plan, Blocked):
        if not plan.record:
            return BumpOutcome("blocked", plan.reason, branch=branch)
        return _blocked(session, ctx, facts.start_sha, plan.reason)
    if isinstance(plan, RefuseHumanPush):
        tell_bump_pr(gw, ctx.watch, branch, plan.reason)
        return _blocked(session, ctx, facts.start_sha, plan.reason)
    if isinstance(plan, AlreadyPinned):
        row = _record(
            session,
            ctx,
            old_image=ctx.watch.pinned_image,
            path=plan.path,
            sha=facts.start_sha,
            state="already",
        )
        if ctx.config.bump.request_sweep:
            request_bump_sweep(session, gw, ctx.watch, None, bump=row, changelog=ctx.config.bump.changelog)
        return BumpOutcome(
            "already", f"`{key}` already pins {ctx.image} on `{branch}`", facts.start_sha, branch
        )
    if isinstance(plan, Adopt):
        log.info(
            "bump_adopted", repo=ctx.watch.repo, key=key, image=ctx.image, branch=branch, commit=plan.sha
        )
        return _land(
            session,
            gw,
            ctx,
            old_image=ctx.watch.pinned_image,
            path=plan.path,
            sha=plan.sha,
            start_sha=plan.parent,
            entry=plan.entry,
        )
    return _commit(session, gw, ctx, facts, plan)


def _commit(session: Session, gw: BumpGateway, ctx: _Ctx, facts: BumpFacts, plan: Commit) -> BumpOutcome:
    repo, start = ctx.watch.repo, facts.start_sha
    old_image = ctx.watch.pinned_image
    refused = _untrusted_image(gw, ctx.watch, ctx.image, ctx.config)
    if refused is not None:
        log.warning("bump_image_refused", repo=repo, key=ctx.watch.config_key, image=ctx.image, why=refused)
        return _blocked(session, ctx, start, refused)
    base_tree = str(gw.get_commit(repo, start)["tree"]["sha"])
    blobs = {path: gw.create_blob(repo, text) for path, text in plan.files.items()}
    tree = gw.create_tree(repo, base_tree, blobs)
    sha = str(gw.create_commit(repo, plan.message, tree, [start])["sha"])
    try:
        if facts.exists:
            gw.update_ref(repo, f"heads/{ctx.branch}", sha, force=False)
        else:
            gw.create_ref(repo, f"heads/{ctx.branch}", sha)
    except Conflict as exc:
        # The branch moved under us (a human push): never force. Say so; the next check decides again
        # from the new head (on the recipe branch: a commit on top; on the bump branch: blocked).
        reason = (
            f"`{ctx.branch}` moved while sweepbot was committing the bump (someone pushed to it); sweepbot "
            "did not force the push and will look again at the next check"
        )
        log.warning("bump_ref_moved", repo=repo, key=ctx.watch.config_key, branch=ctx.branch, error=str(exc))
        return _blocked(session, ctx, start, reason)
    except NotFound:
        raise
    except GitHubError as exc:
        if ctx.mode == "pr_branch" and exc.status == 403:
            raise PushRefused(str(exc)) from exc
        raise
    recipes = sorted(p for p in plan.files if p not in (plan.path, ctx.config.bump.changelog))
    return _land(
        session,
        gw,
        ctx,
        old_image=old_image,
        path=plan.path,
        sha=sha,
        start_sha=start,
        entry=plan.entry,
        recipes=recipes,
    )


def _land(
    session: Session,
    gw: BumpGateway,
    ctx: _Ctx,
    *,
    old_image: str | None,
    path: str | None,
    sha: str,
    start_sha: str,
    entry: str,
    recipes: list[str] | None = None,
) -> BumpOutcome:
    """The commit is on the branch: record it, open or update the bump PR, close superseded ones,
    and queue the sweep. ``recipes``: the srt-slurm recipes the commit also edits."""
    watch, key, branch, mode = ctx.watch, ctx.watch.config_key, ctx.branch, ctx.mode
    detail: dict[str, Any] = {"start_sha": start_sha, "changelog_entry": entry}
    if recipes:
        detail["recipes"] = recipes
    bump = _record(session, ctx, old_image=old_image, path=path, sha=sha, state="committed", detail=detail)
    log.info(
        "bump_committed", repo=watch.repo, key=key, image=ctx.image, branch=branch, commit=sha, mode=mode
    )
    number = ctx.pull.get("number") if mode == "pr_branch" and ctx.pull is not None else None
    if mode == "bump_pr":
        number = ensure_bump_pr(gw, watch, branch, ctx.image, ctx.description, ctx.pr_link, recipes or ())
        bump.bump_pr_number = number
        # Before anything else (sweep, status comment): the entry must link this very PR.
        fix_entry_link(session, gw, watch, ctx.config, bump)
    close_superseded(session, gw, watch, keep=bump)
    if ctx.config.bump.request_sweep:
        request_bump_sweep(
            session,
            gw,
            watch,
            int(number) if number else None,
            bump=bump,
            changelog=ctx.config.bump.changelog,
        )
    session.flush()
    where = f"bump PR #{number}" if mode == "bump_pr" else f"`{branch}`"
    return BumpOutcome(
        "committed",
        f"bumped `{key}` to {ctx.image} in {sha[:7]} on {where}",
        sha,
        branch,
        int(number) if mode == "bump_pr" and number else None,
    )


def _record(
    session: Session,
    ctx: _Ctx,
    *,
    old_image: str | None,
    path: str | None,
    sha: str,
    state: str,
    detail: dict[str, Any] | None = None,
) -> Bump:
    return record_bump(
        session,
        ctx.watch,
        ctx.image,
        old_image=old_image,
        path=path,
        mode=ctx.mode,
        branch=ctx.branch,
        sha=sha,
        state=state,
        detail=detail,
    )


def _blocked(session: Session, ctx: _Ctx, start_sha: str, reason: str) -> BumpOutcome:
    watch = ctx.watch
    log.warning("bump_blocked", repo=watch.repo, key=watch.config_key, image=ctx.image, reason=reason)
    detail = {"reason": reason, "start_sha": start_sha}
    _record(
        session,
        ctx,
        old_image=watch.pinned_image,
        path=watch.config_path,
        sha=start_sha,
        state="blocked",
        detail=detail,
    )
    return BumpOutcome("blocked", reason, branch=ctx.branch)
