"""The sticky status comment on a recipe PR: build each watch's view, render it (pure,
``app.core.watchstatus``) and write it only when its text changed."""

from __future__ import annotations

import hashlib
from typing import Any, cast

import structlog
from sqlalchemy.orm import Session

from app.adapters.github.errors import NotFound
from app.core.chosen_nightly import label_nightlies
from app.core.readiness import Action, DepView, Readiness
from app.core.watchstatus import STATUS_MARKER, WatchView, render_status
from app.flows.tracking.ports import StatusGateway
from app.models.tracking import Bump, Watch, WatchState
from app.store import watches as watch_store
from app.store.bumps import latest_done_bump

log = structlog.get_logger(__name__)

ACTIONS = ("wait", "bump", "noop", "blocked", "stopped")


def bump_line(bump: Bump | None) -> str | None:
    """What the status comment says about the watch's bump."""
    if bump is None:
        return None
    if bump.state == "superseded":
        return (
            f"bumped `{bump.config_key}` to `{bump.image}` in PR #{bump.bump_pr_number}, since superseded "
            "by a newer bump of this key (that PR was closed)"
        )
    if bump.state == "committed":
        where = f"PR #{bump.bump_pr_number}" if bump.bump_pr_number else f"branch `{bump.branch}`"
        return (
            f"bumped `{bump.config_key}` to `{bump.image}` in commit `{(bump.commit_sha or '')[:7]}` "
            f"on {where}" + ("; sweep requested" if bump.sweep_requested else "")
        )
    if bump.state == "already":
        return f"the pin is already `{bump.image}` on the branch"
    return None


def dep_views(watch: Watch) -> list[DepView]:
    return [DepView(d.ref, d.state, d.merge_sha, d.title) for d in watch_store.live_dependencies(watch)]


def watch_view(session: Session, watch: Watch) -> WatchView:
    bump = latest_done_bump(session, watch.id)
    decision: Readiness | None = None
    if watch.decision in ACTIONS:
        decision = Readiness(cast(Action, watch.decision), watch.reason or "")
    labels = label_nightlies(
        pinned_image=watch.pinned_image,
        newest_tag=watch.chosen_tag,
        bumped_image=bump.image if bump is not None and bump.state in ("committed", "already") else None,
    )
    return WatchView(
        key=watch.config_key,
        deps=dep_views(watch),
        image_repo=watch.image_repo,
        pinned_image=watch.pinned_image,
        pinned_missing=watch.pinned_missing_since is not None,
        chosen_tag=labels.chosen,
        first_tag=watch.first_containing_tag,
        decision=decision,
        bump_line=bump_line(bump),
        dropped=tuple(d.ref for d in watch.dependencies if d.dropped),
        bumped=labels.bumped,
        newest_containing=labels.newest_containing,
        held=watch.reason if watch.state in (WatchState.UNAPPROVED, WatchState.REFUSED) else None,
    )


def publish_status(session: Session, gw: StatusGateway, repo: str, pr_number: int) -> bool:
    """Create or edit the sticky status comment; no call at all when its text did not change."""
    watches = [w for w in watch_store.watches_for_pr(session, repo, pr_number) if w.dependencies]
    if not watches:
        return False
    body = render_status([watch_view(session, w) for w in watches])
    digest = hashlib.sha256(body.encode()).hexdigest()
    rec = watch_store.status_record(session, repo, pr_number)
    if rec is not None and rec.body_sha == digest:
        return False
    comment: dict[str, Any] | None = None
    if rec is not None and rec.comment_id:
        try:
            comment = gw.update_comment(repo, rec.comment_id, body)
        except NotFound:
            comment = None
    if comment is None:
        comment = gw.upsert_comment(repo, pr_number, STATUS_MARKER, body)
    watch_store.save_status_record(
        session, rec, repo, pr_number, comment_id=int(comment["id"]), digest=digest
    )
    log.info("status_published", repo=repo, pr=pr_number, watches=len(watches))
    return True
