"""Beat as a thread of the worker, for the single-node embedded stack (``sweepbot worker --beat``).

Celery's own ``worker -B`` forks beat into a process of its own, which costs as much resident
memory as the worker it was forked from; a thread costs about one thread's stack. The schedule
is the same one ``sweepbot beat`` runs (``app.adapters.broker``), kept in the same file.
Only one beat may run against a broker: ``sweepbot up`` embeds it only where it runs the only
worker (the embedded SQLite stack); with PostgreSQL and Redis it starts ``sweepbot beat``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from celery import Celery, bootsteps
from celery.beat import EmbeddedService


class ThreadedBeat(bootsteps.StartStopStep):
    """Worker bootstep: start beat's service in a thread with the worker, stop it with the worker."""

    label = "ThreadedBeat"

    def create(self, w: Any) -> Any:
        # A thread wakes at least once a second (Celery's own choice for threads), so it stops
        # within a second of the worker's shutdown.
        return EmbeddedService(w.app, thread=True)


def embed_beat(app: Celery, schedule: Path) -> None:
    """Run beat inside every worker ``app`` starts from now on (one worker: one beat)."""
    app.conf.beat_schedule_filename = str(schedule)
    app.steps["worker"].add(ThreadedBeat)
