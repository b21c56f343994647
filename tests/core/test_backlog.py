"""The delivery backlog: reaper de-duplication, batched re-enqueue, the consumption heartbeat,
/readyz and /metrics on it, periodic work off the delivery queue, broker reconnects as events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.core.backlog import QueueProgress, needs_ring, readiness, ring_cutoff

SECRET = "backlog-secret"
T = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
GRACE, STALL = timedelta(seconds=20), timedelta(seconds=120)


def _s(seconds: float) -> datetime:
    return T + timedelta(seconds=seconds)


# ------------------------------------------------------------------------------------------ pure


@pytest.mark.parametrize(
    ("enqueued", "consumed", "position", "ring", "why"),
    [
        (None, None, None, True, "never enqueued"),
        (-5, None, None, False, "moments ago"),
        (-60, -1, -90, False, "still waiting"),  # behind what the workers are on
        (-60, -1, -50, True, "lost"),  # workers already took later deliveries
        (-60, -200, -90, False, "still waiting"),  # stalled, but not for long enough
        (-300, -200, -400, True, "stuck"),  # nothing consumed for 200 s, waited 300 s
        (-300, None, None, True, "stuck"),  # never consumed at all
        (-10, -1, 0, False, "moments ago"),  # rung 10 s ago: never again within the grace
    ],
)
def test_needs_ring(
    enqueued: float | None, consumed: float | None, position: float | None, ring: bool, why: str
) -> None:
    progress = QueueProgress(
        consumed_at=_s(consumed) if consumed is not None else None,
        position=_s(position) if position is not None else None,
    )
    verdict = needs_ring(
        _s(enqueued) if enqueued is not None else None, now=T, progress=progress, grace=GRACE, stall=STALL
    )
    assert verdict.yes is ring and why in verdict.reason, verdict
    cutoff = ring_cutoff(now=T, progress=progress, grace=GRACE, stall=STALL)
    if enqueued is not None:
        assert (cutoff is not None and _s(enqueued) <= cutoff) is ring


def test_readiness() -> None:
    moving = QueueProgress(consumed_at=_s(-5), position=_s(-30))
    stuck = QueueProgress(consumed_at=_s(-300), position=_s(-400))
    assert readiness(None, now=T, progress=stuck, stall=STALL).yes
    assert readiness(_s(-60), now=T, progress=stuck, stall=STALL).yes  # not waited long yet
    assert readiness(_s(-600), now=T, progress=moving, stall=STALL).yes  # a long backlog, draining
    verdict = readiness(_s(-600), now=T, progress=stuck, stall=STALL)
    assert not verdict.yes and "waited 600 s" in verdict.reason and "300 s ago" in verdict.reason
    assert "never" in readiness(_s(-600), now=T, progress=QueueProgress(None, None), stall=STALL).reason


# ----------------------------------------------------------------------------- with the database


# ------------------------------------------------------------------------------ celery and logs
