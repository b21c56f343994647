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

from app.core.routing import TransientError
from app.flows.botconfig import BotConfig
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


def link_fix_subject(key: str, image: str) -> str:
    """Subject of the follow-up commit that writes the bump PR's own link into its changelog entry."""
    return f"Link the {key} bump to {image} in perf-changelog to its PR"


def canonical_pr_link(repo: str, number: int) -> str:
    """The only link the repo's changelog gate accepts for an entry merged with PR ``number``."""
    return f"https://github.com/{repo}/pull/{int(number)}"


def changelog_flags_for(master_text: str, key: str) -> Any:
    """Changelog fields a bump of ``key`` needs: ``scenario-type`` when the key has scenarios other
    than plain fixed-seq-len (the repo's gate plans only fixed-seq-len without it; 67 entries at
    InferenceX HEAD carry it), listing the key's scenario kinds in the repo's order."""
    from app.core.recipes import NO_FLAGS, SCENARIO_TYPES, EntryFlags, parse_master
    from app.core.recipes.master import scenario_kinds

    entry = parse_master(master_text).get(key)
    kinds = scenario_kinds(entry) if isinstance(entry, dict) else frozenset()
    if not kinds or kinds == {"fixed-seq-len"}:
        return NO_FLAGS
    return EntryFlags(scenario_type=tuple(k for k in SCENARIO_TYPES if k in kinds))


SKIP_SWEEP = "[skip-sweep]"  # run-sweep.yml skips a PR's benchmark setup when the head commit says so


def without_skip_sweep(subject: str) -> str:
    return subject.removesuffix(f" {SKIP_SWEEP}")


def commit_message(
    key: str, image: str, description: list[str], pr_link: str | None, *, skip_sweep: bool = False
) -> str:
    """Subject, the changelog's description lines, and the changelog fields as trailers.

    ``skip_sweep`` (sweep mode ``dispatch``): the subject ends in ``[skip-sweep]``, so the repo's
    own run-sweep.yml does not run the sweep the bot's queue already runs.
    """
    body = "\n".join(f"- {line}" for line in description)
    subject = f"Bump {key} image to {image}" + (f" {SKIP_SWEEP}" if skip_sweep else "")
    return f"{subject}\n\n{body}\n\nconfig-keys: {key}\npr-link: {pr_link or 'XXX'}\n"


# ------------------------------------------------------------------------------ locating the config


def read_master_configs(
    gw: Any, repo: str, ref: str | None, cfg: BotConfig, *, archived: bool = False
) -> dict[str, str]:
    """Master configs ({path: text}) in the configured dirs (``.github/configs``, ``configs``)."""
    from app.core.recipes import is_master_config_path

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
    from app.core.recipes import locate_key

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

# Bumps that happened (a superseded bump happened too: its key was bumped by a newer one).
DONE_STATES = ("committed", "already", "superseded")
BUMP_BLOCKED_MARKER = "<!-- sweepbot:bump-blocked -->"


class PushRefused(Exception):
    """GitHub refused the bot's push to the recipe PR's branch (branch protection, no access)."""


def _branch_head(gw: Any, repo: str, branch: str) -> str | None:
    """The branch's head commit, read conditionally (an unchanged branch costs no rate limit)."""
    from app.adapters.github import NotFound

    try:
        got = gw.get_conditional("git/get-ref", f"/repos/{repo}/git/ref/heads/{branch}")
    except NotFound:
        return None
    data = got.data if isinstance(got.data, dict) else {}
    return str((data.get("object") or {}).get("sha") or "") or None


def _default_branch(gw: Any, repo: str) -> str:
    got = gw.get_conditional("repos/get", f"/repos/{repo}")
    data = got.data if isinstance(got.data, dict) else {}
    return str(data.get("default_branch") or "main")


def _target(
    gw: Any, watch: Watch, pull: dict[str, Any] | None, cfg: BotConfig, *, allow_pr_branch: bool = True
) -> tuple[str, str, str | None]:
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
    gw: Any,
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
    done = session.scalar(select(Bump).where(Bump.watch_id == watch.id, Bump.image == image))
    if done is not None and done.state == "committed" and (done.detail or {}).get("link_pending"):
        # A crash or a moved branch left the bump PR's entry saying XXX: fix it first.
        _fix_entry_link(session, gw, watch, config, done)
    if done is not None and done.state in DONE_STATES:
        state: Literal["committed", "already"] = "already" if done.state == "already" else "committed"
        return BumpOutcome(
            state, f"already bumped to {image}", done.commit_sha, done.branch, done.bump_pr_number
        )

    def attempt(*, allow_pr_branch: bool) -> BumpOutcome:
        mode, branch, head = _target(gw, watch, pull, config, allow_pr_branch=allow_pr_branch)
        return _bump_onto(
            session,
            gw,
            watch,
            image=image,
            deps=deps,
            config=config,
            pull=pull,
            mode=mode,
            branch=branch,
            head=head,
        )

    try:
        return attempt(allow_pr_branch=True)
    except PushRefused as exc:
        log.warning("pr_branch_push_refused", repo=watch.repo, key=watch.config_key, error=str(exc))
        outcome = attempt(allow_pr_branch=False)
        note = f"GitHub refused sweepbot's push to the recipe branch ({exc}), so "
        return BumpOutcome(
            outcome.state,
            note + outcome.message,
            outcome.commit_sha,
            outcome.branch,
            outcome.bump_pr_number,
        )


def _bump_onto(
    session: Session,
    gw: Any,
    watch: Watch,
    *,
    image: str,
    deps: list[Dependency],
    config: BotConfig,
    pull: dict[str, Any] | None,
    mode: str,
    branch: str,
    head: str | None,
) -> BumpOutcome:
    from app.adapters.github import Conflict, GitHubError, NotFound
    from app.core.recipes import (
        RecipeError,
        append_changelog,
        changelog_description_for_bump,
        set_image,
    )

    repo, key = watch.repo, watch.config_key
    exists = head is not None
    if mode == "pr_branch" and head is None:
        raise TransientError(f"branch {branch} of {repo} vanished while bumping")
    if head is not None:
        start_sha = head
    else:
        default = _default_branch(gw, repo)
        start_sha = _branch_head(gw, repo, default) or ""
        if not start_sha:
            raise TransientError(f"default branch {default} of {repo} not found")

    blocked = session.scalar(
        select(Bump).where(Bump.watch_id == watch.id, Bump.image == image, Bump.state == "blocked")
    )
    if (
        blocked is not None
        and (blocked.detail or {}).get("start_sha") == start_sha
        and blocked.branch == branch
    ):
        # Same branch head as the refused attempt: the reason still holds; no file reads, no comment.
        return BumpOutcome("blocked", str((blocked.detail or {}).get("reason") or "blocked"), branch=branch)

    last_ours = session.scalar(
        select(Bump)
        .where(
            Bump.repo == repo,
            Bump.config_key == key,
            Bump.branch == branch,
            Bump.commit_sha.is_not(None),
            Bump.state.in_(DONE_STATES),
        )
        .order_by(Bump.id.desc())
    )
    # The recipe PR, named in the bump PR's body. The changelog entry links the PR it is merged
    # with: the recipe PR when committing onto it; in a bump PR the bump PR itself, which has no
    # number yet, so the entry says XXX until _fix_entry_link writes the link (the repo's gate
    # accepts only the PR's own link or XXX on a PR).
    pr_link = str(pull.get("html_url")) if pull is not None and pull.get("html_url") else None
    entry_link = pr_link if mode == "pr_branch" else None
    dep_refs = [f"{d.ref}@{d.merge_sha}" if d.merge_sha else d.ref for d in deps]
    description = changelog_description_for_bump(image, dep_refs)
    changelog_path = config.bump.changelog
    if exists and mode == "bump_pr" and (last_ours is None or last_ours.commit_sha != start_sha):
        head_commit = gw.get_commit(repo, start_sha)
        message = str(head_commit.get("message") or "")
        if without_skip_sweep(message.split("\n", 1)[0]).startswith(link_fix_subject(key, image)):
            # Our link fix landed but its record was rolled back: the bump commit is its parent.
            head_commit = gw.get_commit(repo, str(((head_commit.get("parents") or [{}])[0]).get("sha") or ""))
            message = str(head_commit.get("message") or "")
        if without_skip_sweep(message.split("\n", 1)[0]) == f"Bump {key} image to {image}":
            # sweepbot's own commit whose record a failed task rolled back (the ref moved, then
            # creating the PR answered 502): adopt it and finish, rather than call it a human push.
            parent = str(((head_commit.get("parents") or [{}])[0]).get("sha") or "")
            loc, _text = locate_config(gw, repo, start_sha, key, config, hint=watch.config_path)
            before = gw.get_file(repo, changelog_path, ref=parent) if parent else None
            after = gw.get_file(repo, changelog_path, ref=start_sha)
            entry = after[0][len(before[0]) :] if before and after and after[0].startswith(before[0]) else ""
            log.info("bump_adopted", repo=repo, key=key, image=image, branch=branch, commit=start_sha)
            return _land(
                session, gw, watch, config, pull, image=image, old_image=watch.pinned_image,
                path=loc.path, mode=mode, branch=branch, sha=start_sha, start_sha=parent,
                description=description, pr_link=pr_link, entry=entry,
            )  # fmt: skip
        # The bump branch is sweepbot's alone; a human commit on it is never overwritten.
        reason = (
            f"someone pushed to `{branch}` since sweepbot's last commit "
            f"(its head is now `{start_sha[:7]}`); sweepbot will not overwrite it. Merge or close the "
            f"bump PR and delete `{branch}` to let sweepbot bump `{key}` to `{image}` again"
        )
        _tell_bump_pr(gw, watch, branch, reason)
        return _blocked(session, watch, image, mode, branch, start_sha, reason)

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
        if config.bump.request_sweep:
            _request_sweep(session, gw, watch, None, bump=row)
        return BumpOutcome("already", f"`{key}` already pins {image} on `{branch}`", start_sha, branch)

    current = gw.get_file(repo, changelog_path, ref=start_sha)
    old_changelog = current[0] if current else ""
    if exists and mode == "bump_pr" and last_ours is not None:
        old_changelog = _without_previous_entry(gw, repo, old_changelog, last_ours)
    try:
        new_changelog = append_changelog(
            old_changelog,
            config_keys=[key],
            description=description,
            pr_link=entry_link,
            flags=changelog_flags_for(text, key),
        )
    except RecipeError as exc:
        return _blocked(session, watch, image, mode, branch, start_sha, str(exc))

    base_tree = str(gw.get_commit(repo, start_sha)["tree"]["sha"])
    blobs = {
        str(loc.path): gw.create_blob(repo, new_text),
        changelog_path: gw.create_blob(repo, new_changelog),
    }
    tree = gw.create_tree(repo, base_tree, blobs)
    message = commit_message(key, image, description, entry_link, skip_sweep=config.sweep.mode == "dispatch")
    commit = gw.create_commit(repo, message, tree, [start_sha])
    sha = str(commit["sha"])
    try:
        if exists:
            gw.update_ref(repo, f"heads/{branch}", sha, force=False)
        else:
            gw.create_ref(repo, f"heads/{branch}", sha)
    except Conflict as exc:
        # The branch moved under us (a human push): never force. Say so; the next check decides again
        # from the new head (on the recipe branch: a commit on top; on the bump branch: blocked).
        reason = (
            f"`{branch}` moved while sweepbot was committing the bump (someone pushed to it); sweepbot "
            "did not force the push and will look again at the next check"
        )
        log.warning("bump_ref_moved", repo=repo, key=key, branch=branch, error=str(exc))
        return _blocked(session, watch, image, mode, branch, start_sha, reason)
    except NotFound:
        raise
    except GitHubError as exc:
        if mode == "pr_branch" and exc.status == 403:
            raise PushRefused(str(exc)) from exc
        raise
    return _land(
        session, gw, watch, config, pull, image=image, old_image=old_image, path=loc.path, mode=mode,
        branch=branch, sha=sha, start_sha=start_sha, description=description, pr_link=pr_link,
        entry=new_changelog[len(old_changelog) :],
    )  # fmt: skip


def _land(
    session: Session,
    gw: Any,
    watch: Watch,
    config: BotConfig,
    pull: dict[str, Any] | None,
    *,
    image: str,
    old_image: str | None,
    path: str | None,
    mode: str,
    branch: str,
    sha: str,
    start_sha: str,
    description: list[str],
    pr_link: str | None,
    entry: str,
) -> BumpOutcome:
    """The commit is on the branch: record it, open or update the bump PR, close superseded ones,
    and queue the sweep."""
    repo, key = watch.repo, watch.config_key
    bump = _record(
        session,
        watch,
        image,
        old_image,
        path,
        mode,
        branch,
        sha,
        None,
        "committed",
        {"start_sha": start_sha, "changelog_entry": entry},
    )
    log.info("bump_committed", repo=repo, key=key, image=image, branch=branch, commit=sha, mode=mode)

    number = pull.get("number") if mode == "pr_branch" and pull is not None else None
    if mode == "bump_pr":
        number = _ensure_bump_pr(gw, watch, branch, image, description, pr_link)
        bump.bump_pr_number = number
        # Before anything else (sweep, status comment): the entry must link this very PR.
        _fix_entry_link(session, gw, watch, config, bump)
    _close_superseded(session, gw, watch, keep=bump)
    if config.bump.request_sweep:
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


def _fix_entry_link(session: Session, gw: Any, watch: Watch, config: BotConfig, bump: Bump) -> bool:
    """Replace the XXX pr-link of the bump PR's changelog entry with the PR's own link, in one more
    commit on the bump branch (never forced). Returns True when the entry now links the PR.

    Idempotent: the pending state lives on the Bump row (``link_pending``), so a crash, a 5xx or a
    moved branch leaves it pending and the next check of the watch finishes it.
    """
    from app.adapters.github import Conflict
    from app.core.recipes import PENDING_PR_LINK, RecipeError, replace_pending_link

    detail = dict(bump.detail or {})
    entry = str(detail.get("changelog_entry") or "")
    if not bump.bump_pr_number or not bump.commit_sha or f"pr-link: {PENDING_PR_LINK}" not in entry:
        if detail.get("link_pending"):
            detail["link_pending"] = False
            bump.detail = detail
        return f"pr-link: {PENDING_PR_LINK}" not in entry
    repo, path = watch.repo, config.bump.changelog
    link = canonical_pr_link(repo, int(bump.bump_pr_number))
    detail["link_pending"] = True
    bump.detail = detail
    session.flush()
    got = gw.get_file(repo, path, ref=bump.commit_sha)
    try:
        fixed, new_entry = replace_pending_link(got[0] if got else "", entry, link)
    except RecipeError as exc:
        log.warning("bump_link_not_fixed", repo=repo, key=watch.config_key, reason=str(exc))
        return False
    base_tree = str(gw.get_commit(repo, bump.commit_sha)["tree"]["sha"])
    tree = gw.create_tree(repo, base_tree, {path: gw.create_blob(repo, fixed)})
    # This commit touches the changelog too: in dispatch mode it must not start the repo's sweep.
    skip = f" {SKIP_SWEEP}" if config.sweep.mode == "dispatch" else ""
    message = f"{link_fix_subject(watch.config_key, bump.image)}{skip}\n\npr-link: {link}\n"
    commit = gw.create_commit(repo, message, tree, [bump.commit_sha])
    try:
        gw.update_ref(repo, f"heads/{bump.branch}", str(commit["sha"]), force=False)
    except Conflict as exc:
        log.warning("bump_link_branch_moved", repo=repo, key=watch.config_key, error=str(exc))
        return False
    bump.commit_sha = str(commit["sha"])
    bump.detail = {**detail, "changelog_entry": new_entry, "link_pending": False, "pr_link": link}
    session.flush()
    log.info(
        "bump_link_fixed", repo=repo, key=watch.config_key, pr=bump.bump_pr_number, commit=bump.commit_sha
    )
    return True


def _without_previous_entry(gw: Any, repo: str, changelog: str, last: Bump) -> str:
    """An open bump PR updated in place carries one changelog entry: the previous bump's entry is
    replaced, unless that bump PR was merged (then its entry is history and stays)."""
    entry = str((last.detail or {}).get("changelog_entry") or "")
    if not entry or not changelog.endswith(entry):
        return changelog
    if last.bump_pr_number:
        pr = gw.get_pull(repo, int(last.bump_pr_number))
        if pr.get("merged") or pr.get("merged_at"):
            return changelog
    return changelog[: len(changelog) - len(entry)]


def _tell_bump_pr(gw: Any, watch: Watch, branch: str, reason: str) -> None:
    """Say on the open bump PR why sweepbot stopped updating it (one comment, edited in place)."""
    owner = watch.repo.split("/", 1)[0]
    for pr in gw.list_pulls(watch.repo, state="open", head=f"{owner}:{branch}"):
        gw.upsert_comment(
            watch.repo,
            int(pr["number"]),
            BUMP_BLOCKED_MARKER,
            f"{BUMP_BLOCKED_MARKER}\n**sweepbot paused this bump PR:** {reason}.",
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
    affected: set[int] = set()
    for row in list(older):
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
        other = session.get(Watch, row.watch_id)
        if other is not None and other.id != watch.id and other.pr_number:
            affected.add(other.pr_number)
    session.flush()
    from app.flows.tracking import publish_status

    for number in sorted(affected):  # their recipe PRs' status comments now say "superseded"
        publish_status(session, gw, watch.repo, number)


def _request_sweep(
    session: Session, gw: Any, watch: Watch, pr_number: int | None, bump: Bump | None = None
) -> None:
    """Queue the sweep of the bumped key (reason "bump"); the scheduler owns sweeps."""
    number = pr_number or watch.pr_number
    if not number:
        return
    try:
        from app.flows.scheduler import request_sweep
    except ImportError:
        log.warning(
            "sweep_not_requested",
            reason="app.flows.scheduler.request_sweep is not available",
            key=watch.config_key,
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
