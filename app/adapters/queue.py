"""Ring the broker's doorbell. The database already holds the work, so a broker that is down
only delays it: the beat reaper (deliveries) and the periodic ticks (jobs, watches) catch up."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

from app.adapters.broker import send_task

log = structlog.get_logger(__name__)


def enqueue(task_name: str, *args: Any, countdown: float | None = None, argsrepr: str | None = None) -> bool:
    """Send ``task_name``; return False (and log) instead of raising when the broker is unreachable."""
    try:
        send_task(task_name, list(args), countdown=countdown, argsrepr=argsrepr)
    except Exception as exc:  # kombu raises several types for an unreachable broker
        log.warning("enqueue_failed", task=task_name, error=f"{exc.__class__.__name__}: {exc}")
        return False
    return True


class Doorbell:
    """Rings for stored deliveries off the request path, many ids per message.

    A background thread drains what accumulated and sends one ``sweepbot.process_deliveries``
    task per chunk. A publish costs about 0.3 ms of CPU whatever it carries (Celery and kombu),
    so the thread rests ``linger`` after each send and a chunk holds up to 100 ids: at 6,000
    deliveries/s that is 60 messages/s, about 3 us of the API's CPU per delivery (with 50 ids and
    20 ms it was 120/s and about 10 us; bench/ingest.py). A lone delivery is rung at once. If the
    broker is down the ids are handed to ``on_unsent`` (the API records them in the database, so
    the reaper rings them at once instead of taking them for messages still waiting in the queue);
    they are already stored, and the reaper re-enqueues them once the broker is back.
    """

    def __init__(
        self, on_unsent: Callable[[list[str]], None] | None = None, chunk: int = 100, linger: float = 0.05
    ) -> None:
        self._on_unsent = on_unsent
        self._chunk = chunk
        # After a send the thread rests this long, so a burst's ids share messages: a ring while
        # it rests wakes no thread (cheap for the API), and a lone delivery is not delayed at all.
        self._linger = linger
        self._ids: queue.SimpleQueue[list[str]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def ring_many(self, delivery_ids: list[str]) -> None:
        """Ring for a group of deliveries at once (the API's group commit rings per commit)."""
        if not delivery_ids:
            return
        self._ids.put(delivery_ids)
        if self._thread is None or not self._thread.is_alive():
            with self._lock:
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(target=self._run, name="doorbell", daemon=True)
                    self._thread.start()

    def _run(self) -> None:
        while True:
            pending = list(self._ids.get())
            # Everything that waits goes in this round: taking one chunk per rest would cap the
            # doorbell at chunk / linger ids per second (2,000/s), below what the API stores.
            while True:
                try:
                    pending.extend(self._ids.get_nowait())
                except queue.Empty:
                    break
            for start in range(0, len(pending), self._chunk):
                batch = pending[start : start + self._chunk]
                # The send time rides along: workers record it as how far the queue has moved.
                sent_at = time.time()
                shown = f"[<{len(batch)} delivery ids>, {sent_at}]"
                if not enqueue("sweepbot.process_deliveries", batch, sent_at, argsrepr=shown):
                    self._not_enqueued(batch)
            time.sleep(self._linger)

    def _not_enqueued(self, delivery_ids: list[str]) -> None:
        if self._on_unsent is None:
            log.warning("doorbell_not_rung", count=len(delivery_ids))
            return
        try:
            self._on_unsent(delivery_ids)
        except Exception as exc:  # the database is down too: the reaper's stall rule catches them later
            log.warning(
                "mark_not_enqueued_failed", count=len(delivery_ids), error=f"{exc.__class__.__name__}: {exc}"
            )
