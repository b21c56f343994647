"""The image pin bump: one atomic commit (config line + perf-changelog entry) via the Git Data API.

Blobs -> tree -> commit -> ref update *without force*. Onto the recipe PR's branch when it lives
in the same repo (and the bot config allows it); otherwise onto the deterministic branch
``sweepbot/bump/<key>`` with one bump PR per config key, updated in place, superseded ones closed.
Exactly once: a stored ``Bump`` row is looked up first, the file content is compared before
committing (a crash after the ref update is noticed as "already pinned"), and a non-fast-forward
ref update is refused by GitHub rather than overwriting anyone's work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.botconfig import BotConfig
from app.models.tracking import Bump, Dependency, Watch

log = structlog.get_logger(__name__)

BUMP_BRANCH_PREFIX = "sweepbot/bump/"
BUMP_PR_MARKER = "<!-- sweepbot:bump-pr -->"


@dataclass(frozen=True)
class BumpOutcome:
    state: Literal["committed", "already", "blocked"]
    message: str
    commit_sha: str | None = None
    branch: str | None = None
    bump_pr_number: int | None = None


def bump_branch(key: str) -> str:
    return f"{BUMP_BRANCH_PREFIX}{key}"


def commit_message(key: str, image: str, description: list[str], pr_link: str | None) -> str:
    """Subject, the changelog's description lines, and the changelog fields as trailers."""
    body = "\n".join(f"- {line}" for line in description)
    return f"Bump {key} image to {image}\n\n{body}\n\nconfig-keys: {key}\npr-link: {pr_link or 'XXX'}\n"


# ------------------------------------------------------------------------------ locating the config


def read_master_configs(
    gw: Any, repo: str, ref: str | None, cfg: BotConfig, *, archived: bool = False
) -> dict[str, str]:
    """Master configs ({path: text}) in the configured dirs (``.github/configs``, ``configs``)."""
    from app.recipes import is_master_config_path

    files: dict[str, str] = {}
    dirs = [d.rstrip("/") for d in cfg.bump.config_dirs]
    if archived:
        dirs = [f"{d}/deprecated" for d in dirs]
    for directory in dirs:
        for entry in gw.list_dir(repo, directory, ref=ref):
            path = str(entry.get("path") or f"{directory}/{entry.get('name')}")
            if entry.get("type") == "file" and is_master_config_path(path):
                got = gw.get_file(repo, path, ref=ref)
                if got is not None:
                    files[path] = got[0]
    return files


def locate_config(
    gw: Any, repo: str, ref: str | None, key: str, cfg: BotConfig, hint: str | None = None
) -> tuple[Any, str | None]:
    """(KeyLocation, text of the file holding ``key``); the last known path is tried first."""
    from app.recipes import locate_key

    if hint:
        got = gw.get_file(repo, hint, ref=ref)
        if got is not None:
            loc = locate_key({hint: got[0]}, key)
            if loc.found:
                return loc, got[0]
    files = read_master_configs(gw, repo, ref, cfg)
    loc = locate_key(files, key)
    if loc.found and loc.path:
        return loc, files[loc.path]
    # Only now look at the archive: it explains a missing key instead of editing a dead copy.
    archived = read_master_configs(gw, repo, ref, cfg, archived=True)
    if archived:
        loc = locate_key({**files, **archived}, key)
    return loc, None


# ------------------------------------------------------------------------------------------ the bump


def _target(gw: Any, watch: Watch, pull: dict[str, Any] | None, cfg: BotConfig) -> tuple[str, str, bool]:
    """(mode, branch, branch_exists) — the recipe PR's branch when same-repo and allowed."""
    if pull is not None and cfg.bump.mode == "auto" and pull.get("state") == "open":
        head = pull.get("head") or {}
        head_repo = str((head.get("repo") or {}).get("full_name") or "")
        if head_repo == watch.repo and head.get("ref"):
            return "pr_branch", str(head["ref"]), True
    branch = bump_branch(watch.config_key)
    return "bump_pr", branch, gw.get_ref(watch.repo, f"heads/{branch}") is not None


def bump_watch(
    session: Session,
    gw: Any,
    watch: Watch,
    *,
    image: str,
    deps: list[Dependency],
    config: BotConfig,
    pull: dict[str, Any] | None = None,
) -> BumpOutcome:
    """Bump ``watch.config_key`` to ``image`` once. Returns what happened and a one-line message."""
    from app.github import Conflict
    from app.recipes import (
        RecipeError,
        append_changelog,
        changelog_description_for_bump,
        set_image,
    )
    from app.routing import TransientError

    done = session.scalar(select(Bump).where(Bump.watch_id == watch.id, Bump.image == image))
    if done is not None and done.state in ("committed", "already"):
        state: Literal["committed", "already"] = "committed" if done.state == "committed" else "already"
        return BumpOutcome(
            state, f"already bumped to {image}", done.commit_sha, done.branch, done.bump_pr_number
        )
    repo, key = watch.repo, watch.config_key
    mode, branch, exists = _target(gw, watch, pull, config)

    last_ours = session.scalar(
        select(Bump)
        .where(Bump.repo == repo, Bump.config_key == key, Bump.branch == branch, Bump.commit_sha.is_not(None))
        .order_by(Bump.id.desc())
    )
    if exists:
        ref = gw.get_ref(repo, f"heads/{branch}")
        start_sha = str((ref or {}).get("object", {}).get("sha") or "")
        if not start_sha:
            raise TransientError(f"branch {branch} of {repo} vanished while bumping")
        if mode == "bump_pr" and (last_ours is None or last_ours.commit_sha != start_sha):
            return _blocked(
                session,
                watch,
                image,
                mode,
                branch,
                start_sha,
                f"someone pushed to `{branch}` since sweepbot's last commit; sweepbot will not "
                "overwrite it (delete the branch to let sweepbot recreate it)",
            )
    else:
        default = str(gw.get_repo(repo).get("default_branch") or "main")
        ref = gw.get_ref(repo, f"heads/{default}")
        start_sha = str((ref or {}).get("object", {}).get("sha") or "")
        if not start_sha:
            raise TransientError(f"default branch {default} of {repo} not found")

    blocked = session.scalar(
        select(Bump).where(Bump.watch_id == watch.id, Bump.image == image, Bump.state == "blocked")
    )
    if blocked is not None and (blocked.detail or {}).get("start_sha") == start_sha:
        # Same branch head as the refused attempt: the reason still holds; do not re-read files.
        return BumpOutcome("blocked", str((blocked.detail or {}).get("reason") or "blocked"))

    loc, text = locate_config(gw, repo, start_sha, key, config, hint=watch.config_path)
    if text is None or not loc.found:
        return _blocked(session, watch, image, mode, branch, start_sha, loc.reason)
    try:
        new_text = set_image(text, key, image)
    except RecipeError as exc:
        return _blocked(session, watch, image, mode, branch, start_sha, str(exc))
    old_image = watch.pinned_image
    if new_text == text:
        log.info("bump_already_pinned", repo=repo, key=key, image=image, branch=branch)
        row = _record(session, watch, image, old_image, loc.path, mode, branch, start_sha, None, "already")
        _request_sweep(session, gw, watch, None, bump=row)
        return BumpOutcome("already", f"`{key}` already pins {image} on `{branch}`", start_sha, branch)

    pr_link = str(pull.get("html_url")) if pull is not None and pull.get("html_url") else None
    dep_refs = [f"{d.ref}@{d.merge_sha}" if d.merge_sha else d.ref for d in deps]
    description = changelog_description_for_bump(image, dep_refs)
    changelog_path = config.bump.changelog
    current = gw.get_file(repo, changelog_path, ref=start_sha)
    try:
        new_changelog = append_changelog(
            current[0] if current else "", config_keys=[key], description=description, pr_link=pr_link
        )
    except RecipeError as exc:
        return _blocked(session, watch, image, mode, branch, start_sha, str(exc))

    base_tree = str(gw.get_commit(repo, start_sha)["tree"]["sha"])
    blobs = {
        str(loc.path): gw.create_blob(repo, new_text),
        changelog_path: gw.create_blob(repo, new_changelog),
    }
    tree = gw.create_tree(repo, base_tree, blobs)
    commit = gw.create_commit(repo, commit_message(key, image, description, pr_link), tree, [start_sha])
    sha = str(commit["sha"])
    try:
        if exists:
            gw.update_ref(repo, f"heads/{branch}", sha, force=False)
        else:
            gw.create_ref(repo, f"heads/{branch}", sha)
    except Conflict as exc:
        # The branch moved under us (a human push): never force; re-read and decide again later.
        raise TransientError(f"branch {branch} moved while bumping {key}; will retry: {exc}") from exc
    bump = _record(session, watch, image, old_image, loc.path, mode, branch, sha, None, "committed")
    log.info("bump_committed", repo=repo, key=key, image=image, branch=branch, commit=sha, mode=mode)

    number = pull.get("number") if mode == "pr_branch" and pull is not None else None
    if mode == "bump_pr":
        number = _ensure_bump_pr(gw, watch, branch, image, description, pr_link)
        bump.bump_pr_number = number
    _close_superseded(session, gw, watch, keep=bump)
    _request_sweep(session, gw, watch, int(number) if number else None, bump=bump)
    session.flush()
    where = f"bump PR #{number}" if mode == "bump_pr" else f"`{branch}`"
    return BumpOutcome(
        "committed",
        f"bumped `{key}` to {image} in {sha[:7]} on {where}",
        sha,
        branch,
        int(number) if mode == "bump_pr" and number else None,
    )


def _record(
    session: Session,
    watch: Watch,
    image: str,
    old_image: str | None,
    path: str | None,
    mode: str,
    branch: str,
    sha: str,
    pr_number: int | None,
    state: str,
    detail: dict[str, Any] | None = None,
) -> Bump:
    row = session.scalar(select(Bump).where(Bump.watch_id == watch.id, Bump.image == image))
    if row is None:
        row = Bump(
            watch_id=watch.id,
            repo=watch.repo,
            config_key=watch.config_key,
            image=image,
            sweep_requested=False,
        )
        session.add(row)
    row.old_image, row.config_path, row.mode, row.branch = old_image, path, mode, branch
    row.commit_sha = sha if state in ("committed", "already") else None
    row.bump_pr_number, row.state, row.detail = pr_number, state, detail
    session.flush()
    return row


def _blocked(
    session: Session, watch: Watch, image: str, mode: str, branch: str, start_sha: str, reason: str
) -> BumpOutcome:
    log.warning("bump_blocked", repo=watch.repo, key=watch.config_key, image=image, reason=reason)
    _record(
        session,
        watch,
        image,
        watch.pinned_image,
        watch.config_path,
        mode,
        branch,
        start_sha,
        None,
        "blocked",
        {"reason": reason, "start_sha": start_sha},
    )
    return BumpOutcome("blocked", reason, branch=branch)


def _ensure_bump_pr(
    gw: Any, watch: Watch, branch: str, image: str, description: list[str], pr_link: str | None
) -> int:
    """The one open bump PR of this key (look before create); its title follows the newest image."""
    owner = watch.repo.split("/", 1)[0]
    title = f"Bump {watch.config_key} image to {image}"
    body = "\n".join(
        [
            BUMP_PR_MARKER,
            f"sweepbot bumps `{watch.config_key}` to `{image}`.",
            "",
            *[f"- {line}" for line in description],
        ]
        + (["", f"Recipe PR: {pr_link}"] if pr_link else [])
    )
    existing = gw.list_pulls(watch.repo, state="open", head=f"{owner}:{branch}")
    if existing:
        pr = existing[0]
        if pr.get("title") != title or pr.get("body") != body:
            gw.update_pull(watch.repo, int(pr["number"]), title=title, body=body)
        return int(pr["number"])
    default = str(gw.get_repo(watch.repo).get("default_branch") or "main")
    return int(gw.create_pull(watch.repo, title=title, head=branch, base=default, body=body)["number"])


def _close_superseded(session: Session, gw: Any, watch: Watch, keep: Bump) -> None:
    """Close older open bump PRs of the same key (one bump PR per key), with a comment saying why."""
    older = session.scalars(
        select(Bump).where(
            Bump.repo == watch.repo,
            Bump.config_key == watch.config_key,
            Bump.bump_pr_number.is_not(None),
            Bump.id != keep.id,
            Bump.state == "committed",
        )
    )
    for row in older:
        if row.bump_pr_number == keep.bump_pr_number:
            continue
        pr = gw.get_pull(watch.repo, int(row.bump_pr_number or 0))
        if pr.get("state") == "open":
            where = f"#{keep.bump_pr_number}" if keep.bump_pr_number else f"`{keep.branch}`"
            gw.create_comment(
                watch.repo,
                int(row.bump_pr_number or 0),
                f"Superseded by {where}, which bumps `{watch.config_key}` to `{keep.image}`.",
            )
            gw.update_pull(watch.repo, int(row.bump_pr_number or 0), state="closed")
        row.state = "superseded"


def _request_sweep(
    session: Session, gw: Any, watch: Watch, pr_number: int | None, bump: Bump | None = None
) -> None:
    """Queue the sweep of the bumped key (reason "bump"); the scheduler owns sweeps."""
    number = pr_number or watch.pr_number
    if not number:
        return
    try:
        from app.scheduler import request_sweep
    except ImportError:
        log.warning(
            "sweep_not_requested", reason="app.scheduler.request_sweep is not available", key=watch.config_key
        )
        return
    request_sweep(
        session,
        gw,
        repo=watch.repo,
        pr_number=int(number),
        config_key=watch.config_key,
        requested_by="sweepbot",
        reason="bump",
    )
    if bump is not None:
        bump.sweep_requested = True
