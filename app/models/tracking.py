"""Tracking tables: watches, their upstream dependencies, image tags seen, the compare cache,
bumps, sticky status comments and the per-repo bot config (with its error, for the dashboard).

Keep ``migrations/versions/0002_tracking.py`` (and ``0017_watch_approval.py``) in step with this
module (a test compares them).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.db import Base


class WatchState:
    WAITING = "waiting"  # some dependency is open, or no nightly contains them all yet
    BLOCKED = "blocked"  # a dependency closed unmerged, a key archived, a human-owned branch...
    BUMPED = "bumped"  # the bump happened (exactly once)
    DONE = "done"  # nothing left to do (pin already contains everything)
    CLOSED = "closed"  # the recipe PR was closed or merged: no more polling
    # The key moved to configs/deprecated/ (sweep generation no longer reads it): no more polling
    # until a push to the PR brings the key back (pull_request events still re-check it).
    ARCHIVED = "archived"
    # Its dependency lines were written by someone without write access: nothing is polled until
    # a maintainer approves it (``/depends-on approve``; app.core.admission).
    UNAPPROVED = "unapproved"
    # The PR points the key at an image repository the default branch does not pin or list: no
    # watch (nothing polled) until a push brings a trusted one back (pull_request events re-check).
    REFUSED = "refused"

    ACTIVE = (WAITING, BLOCKED)


class DepState:
    OPEN = "open"
    MERGED = "merged"
    CLOSED = "closed"  # closed without merging
    UNKNOWN = "unknown"  # not fetched yet
    MISSING = "missing"  # GitHub answers 404: no such PR (or one the bot cannot see)


class Watch(Base):
    """A config key of a repo (usually via a recipe PR) waiting on upstream PRs to ship in an image."""

    __tablename__ = "watches"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    repo: Mapped[str] = mapped_column(String(200), index=True)  # the benchmark repo
    pr_number: Mapped[int] = mapped_column(Integer, default=0)  # 0: declared by the bot config only
    config_key: Mapped[str] = mapped_column(String(200))
    config_path: Mapped[str | None] = mapped_column(String(400))
    source: Mapped[str] = mapped_column(String(16))  # body | command | config
    state: Mapped[str] = mapped_column(String(16), default=WatchState.WAITING, index=True)
    image_repo: Mapped[str | None] = mapped_column(String(300))  # e.g. vllm/vllm-openai-rocm
    pinned_image: Mapped[str | None] = mapped_column(String(400))  # the key's image: at the PR head
    pinned_missing_since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    registry_error: Mapped[str | None] = mapped_column(Text)  # the last tag listing failed: why
    registry_error_since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    chosen_tag: Mapped[str | None] = mapped_column(String(300))
    first_containing_tag: Mapped[str | None] = mapped_column(String(300))
    decision: Mapped[str | None] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)
    head_sha: Mapped[str | None] = mapped_column(String(64))
    # Who made the dependency lines count: the writer who wrote them, the maintainer who approved
    # (with the head they reviewed), or ``config``/``command``; None: waits for a maintainer.
    admitted_by: Mapped[str | None] = mapped_column(String(200))
    approved_sha: Mapped[str | None] = mapped_column(String(64))
    body_changed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))  # unadmitted edit
    checked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())

    dependencies: Mapped[list[Dependency]] = relationship(
        back_populates="watch", cascade="all, delete-orphan", order_by="Dependency.id"
    )

    __table_args__ = (UniqueConstraint("repo", "pr_number", "config_key", name="uq_watches_repo_pr_key"),)


class Dependency(Base):
    """One upstream PR a watch waits for. ``dropped`` keeps the row (and who dropped it) for history."""

    __tablename__ = "watch_dependencies"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    watch_id: Mapped[int] = mapped_column(ForeignKey("watches.id", ondelete="CASCADE"), index=True)
    dep_repo: Mapped[str] = mapped_column(String(200))
    dep_number: Mapped[int] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(String(16))  # body | command | config
    state: Mapped[str] = mapped_column(String(16), default=DepState.UNKNOWN)
    merge_sha: Mapped[str | None] = mapped_column(String(64))
    title: Mapped[str | None] = mapped_column(String(400))
    contained_in: Mapped[str | None] = mapped_column(String(300))  # oldest nightly holding the merge
    dropped: Mapped[bool] = mapped_column(Boolean, default=False)
    dropped_by: Mapped[str | None] = mapped_column(String(200))
    added_by: Mapped[str | None] = mapped_column(String(200))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())

    watch: Mapped[Watch] = relationship(back_populates="dependencies")

    __table_args__ = (
        UniqueConstraint("watch_id", "dep_repo", "dep_number", name="uq_watch_dependencies_watch_dep"),
    )

    @property
    def ref(self) -> str:
        return f"{self.dep_repo}#{self.dep_number}"


class ImageTag(Base):
    """Every tag of a watched image repository seen in its registry; ``deleted_at`` when it vanished."""

    __tablename__ = "image_tags"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    image_repo: Mapped[str] = mapped_column(String(300), index=True)
    tag: Mapped[str] = mapped_column(String(300))
    commit_sha: Mapped[str | None] = mapped_column(String(64))  # from the tag pattern's capture
    digest: Mapped[str | None] = mapped_column(String(100))
    pushed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))  # from the registry
    seq: Mapped[int] = mapped_column(Integer, default=0)  # discovery order (fallback ordering)
    first_seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    last_seen_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    deleted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (UniqueConstraint("image_repo", "tag", name="uq_image_tags_image_tag"),)


class CompareResult(Base):
    """GitHub compare answers. Ancestry never changes, so an answer is cached forever."""

    __tablename__ = "compare_cache"

    repo: Mapped[str] = mapped_column(String(200), primary_key=True)
    base: Mapped[str] = mapped_column(String(64), primary_key=True)
    head: Mapped[str] = mapped_column(String(64), primary_key=True)
    status: Mapped[str] = mapped_column(String(16))  # ahead | identical | behind | diverged
    ahead_by: Mapped[int] = mapped_column(Integer, default=0)
    behind_by: Mapped[int] = mapped_column(Integer, default=0)
    fetched_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Bump(Base):
    """A bump of a watch's pin: stored before and after the commit so it happens exactly once."""

    __tablename__ = "bumps"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    watch_id: Mapped[int] = mapped_column(ForeignKey("watches.id", ondelete="CASCADE"), index=True)
    repo: Mapped[str] = mapped_column(String(200))
    config_key: Mapped[str] = mapped_column(String(200), index=True)
    image: Mapped[str] = mapped_column(String(400))
    old_image: Mapped[str | None] = mapped_column(String(400))
    config_path: Mapped[str | None] = mapped_column(String(400))
    mode: Mapped[str] = mapped_column(String(16))  # pr_branch | bump_pr
    branch: Mapped[str | None] = mapped_column(String(300))
    commit_sha: Mapped[str | None] = mapped_column(String(64))
    bump_pr_number: Mapped[int | None] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16))  # committed | blocked | superseded | already
    detail: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    sweep_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())

    __table_args__ = (UniqueConstraint("watch_id", "image", name="uq_bumps_watch_image"),)


class StatusComment(Base):
    """The sticky status comment of a recipe PR; the body hash skips unchanged edits for free."""

    __tablename__ = "status_comments"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    repo: Mapped[str] = mapped_column(String(200))
    pr_number: Mapped[int] = mapped_column(Integer)
    comment_id: Mapped[int | None] = mapped_column(Integer)
    body_sha: Mapped[str | None] = mapped_column(String(64))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())

    __table_args__ = (UniqueConstraint("repo", "pr_number", name="uq_status_comments_repo_pr"),)


class BotConfigRecord(Base):
    """The last `.github/sweepbot.yml` read from a repo's default branch, or why it was refused."""

    __tablename__ = "bot_configs"

    repo: Mapped[str] = mapped_column(String(200), primary_key=True)
    ok: Mapped[bool] = mapped_column(Boolean)
    present: Mapped[bool] = mapped_column(Boolean)
    blob_sha: Mapped[str | None] = mapped_column(String(64))
    config: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    error: Mapped[str | None] = mapped_column(Text)
    read_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
