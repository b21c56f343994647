"""Bump records (table ``bumps``): one row per watch and image, looked up before anything is written."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.bumpplan import DONE_STATES
from app.core.readiness import BUMP_HAPPENED
from app.models.tracking import Bump, Watch


def bump_for(session: Session, watch_id: int, image: str) -> Bump | None:
    return session.scalar(select(Bump).where(Bump.watch_id == watch_id, Bump.image == image))


def latest_done_bump(session: Session, watch_id: int) -> Bump | None:
    """The newest bump of the watch that happened (committed, already pinned, or superseded since)."""
    return session.scalar(
        select(Bump).where(Bump.watch_id == watch_id, Bump.state.in_(DONE_STATES)).order_by(Bump.id.desc())
    )


def blocked_bump(session: Session, watch_id: int, image: str) -> Bump | None:
    return session.scalar(
        select(Bump).where(Bump.watch_id == watch_id, Bump.image == image, Bump.state == "blocked")
    )


def last_own_bump(session: Session, repo: str, key: str, branch: str) -> Bump | None:
    """sweepbot's newest recorded commit of ``key`` on ``branch`` (any watch of the key)."""
    return session.scalar(
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


def committed_bump_prs(session: Session, repo: str, key: str, *, except_id: int) -> list[Bump]:
    """Other committed bumps of ``key`` that opened a bump PR (candidates to close as superseded)."""
    return list(
        session.scalars(
            select(Bump).where(
                Bump.repo == repo,
                Bump.config_key == key,
                Bump.bump_pr_number.is_not(None),
                Bump.id != except_id,
                Bump.state == "committed",
            )
        )
    )


def happened_images(session: Session) -> dict[int, str]:
    """watch id -> image of its newest bump that happened (committed or already pinned)."""
    out: dict[int, str] = {}
    for b in session.scalars(select(Bump).where(Bump.state.in_(BUMP_HAPPENED)).order_by(Bump.id)):
        out[b.watch_id] = b.image  # the newest wins
    return out


def record_bump(
    session: Session,
    watch: Watch,
    image: str,
    *,
    old_image: str | None,
    path: str | None,
    mode: str,
    branch: str,
    sha: str,
    state: str,
    detail: dict[str, Any] | None = None,
) -> Bump:
    """Create or update the watch's row for ``image`` (look before create)."""
    row = bump_for(session, watch.id, image)
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
    row.commit_sha = sha if state in BUMP_HAPPENED else None
    row.bump_pr_number, row.state, row.detail = None, state, detail
    session.flush()
    return row
