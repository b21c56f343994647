"""Image tags seen in registries (``image_tags``) and compare answers (``compare_cache``, kept
forever: ancestry never changes)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.models.tracking import CompareResult, ImageTag

log = structlog.get_logger(__name__)


def known_tags(session: Session, image_repo: str) -> list[ImageTag]:
    """Tags not known to be deleted, in the order they were first seen."""
    rows = session.scalars(
        select(ImageTag).where(ImageTag.image_repo == image_repo, ImageTag.deleted_at.is_(None))
    )
    return sorted(rows, key=lambda r: (r.seq, r.id))


def tag_row(session: Session, image_repo: str, tag: str) -> ImageTag | None:
    return session.scalar(select(ImageTag).where(ImageTag.image_repo == image_repo, ImageTag.tag == tag))


def _pushed(r: ImageTag) -> tuple[float, int]:
    ts = r.pushed_at.replace(tzinfo=r.pushed_at.tzinfo or UTC).timestamp() if r.pushed_at else 0.0
    return ts, r.seq


def record_listing(
    session: Session,
    image_repo: str,
    remote: Sequence[tuple[str, str | None, datetime | None]],
    *,
    changed: bool,
    commit_of: Callable[[str], str | None],
    now: datetime,
) -> list[ImageTag]:
    """Store a registry listing ((name, digest, pushed_at), newest first as registries list them):
    new tags numbered oldest first, vanished ones marked deleted. Returns the present tags, oldest
    pushed first."""
    rows = {r.tag: r for r in session.scalars(select(ImageTag).where(ImageTag.image_repo == image_repo))}
    next_seq = max((r.seq for r in rows.values()), default=0) + 1
    names = {name for name, _, _ in remote}
    for name, digest, pushed_at in reversed(remote):
        row = rows.get(name)
        if row is None:
            row = ImageTag(
                image_repo=image_repo,
                tag=name,
                commit_sha=commit_of(name),
                digest=digest,
                pushed_at=pushed_at,
                seq=next_seq,
                first_seen_at=now,
            )
            next_seq += 1
            session.add(row)
            rows[name] = row
        if changed:
            row.last_seen_at = now
        if row.deleted_at is not None:
            row.deleted_at = None
        if pushed_at and row.pushed_at is None:
            row.pushed_at = pushed_at
    for name, row in rows.items():
        if name not in names and row.deleted_at is None:
            row.deleted_at = now
            log.info("image_tag_deleted", image=image_repo, tag=name)
    session.flush()
    return sorted((r for r in rows.values() if r.tag in names), key=_pushed)


def cached_compare(session: Session, repo: str, base: str, head: str) -> str | None:
    cached = session.get(CompareResult, (repo, base, head))
    return cached.status if cached is not None else None


def store_compare(
    session: Session, repo: str, base: str, head: str, *, status: str, ahead: int, behind: int
) -> None:
    session.add(
        CompareResult(repo=repo, base=base, head=head, status=status, ahead_by=ahead, behind_by=behind)
    )
    session.flush()
