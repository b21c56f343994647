"""Ring the broker for follow-up work once a transaction commits (a tick, a collect).

The database already holds the work, so a lost ring only delays it (the periodic tick and the
repair poll catch up). Tests replace ``enqueue`` here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.adapters.queue import enqueue


def ring(task: str, *args: Any) -> None:
    enqueue(task, *args)


def tick_later() -> None:
    """After-commit callback: a runner may be free, tick now instead of at the next beat."""
    ring("sweepbot.scheduler_tick")


def collect_later(job_id: int) -> Callable[[], None]:
    return lambda: ring("sweepbot.collect_job", job_id)
