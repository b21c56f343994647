"""Is the delivery queue moving, and is a waiting delivery still in it? (pure: times in, decisions out)

The broker is a FIFO doorbell: deliveries are rung in the order they were stored. Each message
carries the time it was pushed; workers record two things when they start on one
(``QueueProgress``): when they did (``consumed_at``), and how far the queue has moved
(``position``: the newest push time consumed, less a small slack). From these:

- a delivery enqueued *after* ``position`` is still waiting behind the ones being worked on: the
  reaper leaves it alone (re-enqueueing it would only add copies to the backlog);
- a delivery enqueued at or before ``position`` and still not taken was lost (a broker restart
  without persistence, a killed worker's prefetch): the reaper rings it again;
- when nothing has been consumed for ``stall`` while work waits, the queue itself is stuck or was
  emptied: everything waiting that long is rung again, and ``/readyz`` says not ready.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

# A delivery is stored a moment before the doorbell message carrying it is sent (and a burst's
# ids may go out in the next message): only an enqueue this much older than a consumed message
# counts as "behind" it.
QUEUE_ORDER_SLACK = timedelta(seconds=2)


def queue_position(sent_at: datetime) -> datetime:
    """How far the queue has moved once a message pushed at ``sent_at`` is consumed."""
    return sent_at - QUEUE_ORDER_SLACK


@dataclass(frozen=True)
class QueueProgress:
    consumed_at: datetime | None  # when a worker last started on deliveries
    position: datetime | None  # the newest enqueue time among what it started


@dataclass(frozen=True)
class Verdict:
    yes: bool
    reason: str


def stalled(progress: QueueProgress, now: datetime, stall: timedelta) -> bool:
    return progress.consumed_at is None or progress.consumed_at < now - stall


def ring_cutoff(
    *, now: datetime, progress: QueueProgress, grace: timedelta, stall: timedelta
) -> datetime | None:
    """Pending deliveries enqueued at or before this time were lost; None: only unrung ones were.

    Two reasons, as one cutoff (both say "enqueued at or before X"): workers took later ones
    (``position``, but never anything rung in the last ``grace``), or nothing was consumed for
    ``stall`` (then whatever has waited that long).
    """
    cutoffs = []
    if progress.position is not None:
        cutoffs.append(min(progress.position, now - grace))
    if stalled(progress, now, stall):
        cutoffs.append(now - max(stall, grace))
    return max(cutoffs) if cutoffs else None


def needs_ring(
    enqueued_at: datetime | None,
    *,
    now: datetime,
    progress: QueueProgress,
    grace: timedelta,
    stall: timedelta,
) -> Verdict:
    """Should the reaper enqueue this pending delivery again? (``ring_cutoff``, explained)"""
    if enqueued_at is None:
        return Verdict(True, "never enqueued")
    cutoff = ring_cutoff(now=now, progress=progress, grace=grace, stall=stall)
    if cutoff is None or enqueued_at > cutoff:
        if enqueued_at >= now - grace:
            return Verdict(False, "enqueued moments ago")
        return Verdict(False, "still waiting in the queue behind the deliveries being worked on")
    if progress.position is not None and enqueued_at <= progress.position:
        return Verdict(True, "workers already took later deliveries: this one's message was lost")
    return Verdict(True, "nothing consumed for a while: the queue is stuck or was emptied")


def readiness(
    oldest_waiting_at: datetime | None, *, now: datetime, progress: QueueProgress, stall: timedelta
) -> Verdict:
    """Ready unless work has waited longer than ``stall`` and no worker consumed anything in that time."""
    if oldest_waiting_at is None or oldest_waiting_at >= now - stall:
        return Verdict(True, "no delivery has waited long")
    if not stalled(progress, now, stall):
        return Verdict(True, "workers are consuming")
    waited = (now - oldest_waiting_at).total_seconds()
    last = (
        "never"
        if progress.consumed_at is None
        else f"{(now - progress.consumed_at).total_seconds():.0f} s ago"
    )
    return Verdict(
        False,
        f"deliveries have waited {waited:.0f} s and no worker consumed one since {last}: "
        "check the workers and the broker",
    )
