"""The priority controller's state per repository: its facts (jobs from workflow_job deliveries,
runners as last seen, PRs' recent runner-time, infrastructure failures) and the last plan's view
(the dashboard's fleet page). One row per repository, locked while a delivery updates it. Keep in
step with migrations/versions/0022_runner_controller.py.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, DateTime, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base


class RunnerController(Base):
    __tablename__ = "runner_controller"

    repo: Mapped[str] = mapped_column(String(200), primary_key=True)
    facts: Mapped[dict[str, object]] = mapped_column(JSON)
    view: Mapped[dict[str, object]] = mapped_column(JSON)  # the last plan: runners and the queue
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
