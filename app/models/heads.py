"""What the bot saw of pull-request heads: one row per head SHA a PR was seen at, and when.

``/sweep approve`` binds to the head current when the comment was written (see app/core/approval.py);
these rows are the record it binds against. Keep in step with migrations/versions/0006_pr_heads.py.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base


class PullHead(Base):
    __tablename__ = "pr_heads"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    repo: Mapped[str] = mapped_column(String(200))
    pr_number: Mapped[int] = mapped_column(Integer)
    head_sha: Mapped[str] = mapped_column(String(64))
    # When the PR got this head, as GitHub stamped the event (``pull_request.updated_at``), else
    # when the bot received it.
    seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    source: Mapped[str] = mapped_column(String(32))  # opened, reopened, synchronize ...
    delivery_id: Mapped[str | None] = mapped_column(String(64))

    __table_args__ = (Index("ix_pr_heads_pr", "repo", "pr_number", "seen_at"),)
