"""Nightly regression watch tables: canary measurements of nightlies, and regressions found in them.

Keep in step with migrations/versions/0005_nightly.py (a test compares them).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Float, Index, Integer, String, Text, UniqueConstraint, func
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base


class CanaryState:
    PLANNED = "planned"  # chosen for measurement; the canary branch and sweep are made next
    QUEUED = "queued"  # its sweep exists (it runs in idle runner time)
    MEASURED = "measured"
    FAILED = "failed"  # the sweep ended without a result for every point
    SKIPPED = "skipped"  # seen but not measured (a newer nightly came in the same poll): bisectable
    GONE = "gone"  # deleted by the registry before it was measured

    OPEN = (PLANNED, QUEUED)


class RegressionState:
    NARROWING = "narrowing"  # measuring retained nightlies between the last good and first bad one
    OPEN = "open"  # first bad nightly named, issue open
    RECOVERED = "recovered"  # a later nightly is back at the old level; issue closed

    ACTIVE = (NARROWING, OPEN)


class NightlyCanary(Base):
    """One nightly of one watched key: is it measured, by which sweep, and why."""

    __tablename__ = "nightly_canaries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    repo: Mapped[str] = mapped_column(String(200))  # the benchmark repo
    config_key: Mapped[str] = mapped_column(String(200))
    image_repo: Mapped[str] = mapped_column(String(300))
    tag: Mapped[str] = mapped_column(String(300))
    image: Mapped[str] = mapped_column(String(400))
    commit_sha: Mapped[str | None] = mapped_column(String(64))  # the upstream commit it was built from
    pushed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    tag_seq: Mapped[int] = mapped_column(Integer, default=0)  # discovery order (ties of pushed_at)
    purpose: Mapped[str] = mapped_column(String(16))  # new | bisect | first
    state: Mapped[str] = mapped_column(String(16), default=CanaryState.PLANNED)
    reason: Mapped[str | None] = mapped_column(Text)
    sweep_id: Mapped[int | None] = mapped_column(Integer, index=True)
    branch: Mapped[str | None] = mapped_column(String(300))
    branch_sha: Mapped[str | None] = mapped_column(String(64))
    preempted_hours: Mapped[float] = mapped_column(Float, default=0.0)  # runner time lost to preemption
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    measured_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        UniqueConstraint("repo", "config_key", "tag", name="uq_nightly_canaries_key_tag"),
        Index("ix_nightly_canaries_repo_key", "repo", "config_key"),
    )


class NightlyRegression(Base):
    """A change for the worse between two nightlies of one key; one GitHub issue each."""

    __tablename__ = "nightly_regressions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    repo: Mapped[str] = mapped_column(String(200))
    config_key: Mapped[str] = mapped_column(String(200))
    image_repo: Mapped[str] = mapped_column(String(300))
    state: Mapped[str] = mapped_column(String(16), default=RegressionState.NARROWING)
    last_good_tag: Mapped[str] = mapped_column(String(300))
    first_bad_tag: Mapped[str] = mapped_column(String(300))
    last_good_sha: Mapped[str | None] = mapped_column(String(64))
    first_bad_sha: Mapped[str | None] = mapped_column(String(64))
    # Every series that moved at this change: [{result_name, metric, before, after, change, p}]
    series: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    bisect_runs: Mapped[int] = mapped_column(Integer, default=0)
    source_repo: Mapped[str | None] = mapped_column(String(200))
    commits: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)  # [{sha, title}]
    # the compare API's total_commits; more than len(commits) when the range was longer than read
    commits_total: Mapped[int | None] = mapped_column(Integer)
    pulls: Mapped[list[int] | None] = mapped_column(JSON)
    compare_url: Mapped[str | None] = mapped_column(String(500))
    issue_repo: Mapped[str | None] = mapped_column(String(200))
    issue_number: Mapped[int | None] = mapped_column(Integer)
    recovered_tag: Mapped[str | None] = mapped_column(String(300))
    noted_watches: Mapped[list[int] | None] = mapped_column(JSON)
    reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    closed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (Index("ix_nightly_regressions_repo_key", "repo", "config_key"),)
