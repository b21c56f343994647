"""The bump PR side of a bump: one open bump PR per config key (look before create, updated in
place), superseded ones closed with a comment, a comment when sweepbot stops updating one, and the
follow-up commit that writes the bump PR's own link into its changelog entry."""

from __future__ import annotations

from collections.abc import Sequence

import structlog
from sqlalchemy.orm import Session

from app.adapters.github.errors import Conflict
from app.core.bot_config import BotConfig
from app.core.bumpplan import (
    BUMP_BLOCKED_MARKER,
    BUMP_PR_MARKER,
    SKIP_SWEEP,
    bump_subject,
    canonical_pr_link,
    link_fix_subject,
)
from app.core.githubtext import bump_pr_text, link_fix_commit_message
from app.core.recipes import PENDING_PR_LINK, RecipeError, replace_pending_link
from app.flows.tracking.ports import BumpGateway, BumpPrGateway
from app.flows.tracking.status_comment import publish_status
from app.models.tracking import Bump, Watch
from app.store.bumps import committed_bump_prs

log = structlog.get_logger(__name__)


def tell_bump_pr(gw: BumpPrGateway, watch: Watch, branch: str, reason: str) -> None:
    """Say on the open bump PR why sweepbot stopped updating it (one comment, edited in place)."""
    owner = watch.repo.split("/", 1)[0]
    for pr in gw.list_pulls(watch.repo, state="open", head=f"{owner}:{branch}"):
        gw.upsert_comment(
            watch.repo,
            int(pr["number"]),
            BUMP_BLOCKED_MARKER,
            f"{BUMP_BLOCKED_MARKER}\n**sweepbot paused this bump PR:** {reason}.",
        )


def ensure_bump_pr(
    gw: BumpPrGateway,
    watch: Watch,
    branch: str,
    image: str,
    description: Sequence[str],
    pr_link: str | None,
    recipes: Sequence[str] = (),
) -> int:
    """The one open bump PR of this key (look before create); its title follows the newest image.
    Title and body in English and Simplified Chinese (app.core.githubtext)."""
    owner = watch.repo.split("/", 1)[0]
    text = bump_pr_text(
        marker=BUMP_PR_MARKER,
        subject=bump_subject(watch.config_key, image),
        key=watch.config_key,
        image=image,
        description=description,
        recipe_pr=pr_link,
        recipes=recipes,
    )
    title, body = text.title, text.body
    existing = gw.list_pulls(watch.repo, state="open", head=f"{owner}:{branch}")
    if existing:
        pr = existing[0]
        if pr.get("title") != title or pr.get("body") != body:
            gw.update_pull(watch.repo, int(pr["number"]), title=title, body=body)
        return int(pr["number"])
    default = str(gw.get_repo(watch.repo).get("default_branch") or "main")
    return int(gw.create_pull(watch.repo, title=title, head=branch, base=default, body=body)["number"])


def previous_entry_to_replace(gw: BumpPrGateway, repo: str, changelog: str, last: Bump | None) -> str | None:
    """An open bump PR updated in place carries one changelog entry: the previous bump's entry is
    replaced, unless that bump PR was merged (then its entry is history and stays)."""
    if last is None:
        return None
    entry = str((last.detail or {}).get("changelog_entry") or "")
    if not entry or not changelog.endswith(entry):
        return None
    if last.bump_pr_number:
        pr = gw.get_pull(repo, int(last.bump_pr_number))
        if pr.get("merged") or pr.get("merged_at"):
            return None
    return entry


def close_superseded(session: Session, gw: BumpPrGateway, watch: Watch, keep: Bump) -> None:
    """Close older open bump PRs of the same key (one bump PR per key), with a comment saying why."""
    affected: set[int] = set()
    for row in committed_bump_prs(session, watch.repo, watch.config_key, except_id=keep.id):
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
            log.info("bump_pr_superseded", repo=watch.repo, pr=row.bump_pr_number, by=keep.bump_pr_number)
        row.state = "superseded"
        other = session.get(Watch, row.watch_id)
        if other is not None and other.id != watch.id and other.pr_number:
            affected.add(other.pr_number)
    session.flush()
    for number in sorted(affected):  # their recipe PRs' status comments now say "superseded"
        publish_status(session, gw, watch.repo, number)


def fix_entry_link(session: Session, gw: BumpGateway, watch: Watch, config: BotConfig, bump: Bump) -> bool:
    """Replace the XXX pr-link of the bump PR's changelog entry with the PR's own link, in one more
    commit on the bump branch (never forced). Returns True when the entry now links the PR.

    Idempotent: the pending state lives on the Bump row (``link_pending``), so a crash, a 5xx or a
    moved branch leaves it pending and the next check of the watch finishes it.
    """
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
    # This commit touches the changelog too, but only its link: it never starts a sweep of its own
    # (as the repo's utils/merge_with_reuse.sh canonicalizes the link with [skip-sweep]); in label
    # mode the run already made stays reusable, its head being still among the PR's commits.
    message = link_fix_commit_message(
        subject=f"{link_fix_subject(watch.config_key, bump.image)} {SKIP_SWEEP}",
        key=watch.config_key,
        image=bump.image,
        link=link,
    )
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
