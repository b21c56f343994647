"""``app.store.jobs.requeue``: a job back in the queue forgets its run, and a refunded dispatch
gives its attempt back (never below zero). The job is a plain ORM object: no database needed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.core.clock import utcnow
from app.models.sweeps import JobState, SweepJob
from app.store.jobs import requeue

STAMP = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _dispatched(attempts: int) -> SweepJob:
    return SweepJob(
        state=JobState.DISPATCHED,
        reason="dispatched",
        claim="tick-token",
        attempts=attempts,
        run_id=99,
        run_url="https://github.com/o/r/actions/runs/99",
        run_name="sweepbot-1-2",
        run_conclusion="failure",
        run_cancel_refused="403 refused",
        dispatched_at=STAMP,
        started_at=STAMP,
        finished_at=STAMP,
        updated_at=STAMP,
    )


def _forgotten(job: SweepJob) -> dict[str, object]:
    return {
        "claim": job.claim,
        "run_id": job.run_id,
        "run_url": job.run_url,
        "run_name": job.run_name,
        "run_conclusion": job.run_conclusion,
        "run_cancel_refused": job.run_cancel_refused,
        "dispatched_at": job.dispatched_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
    }


@pytest.mark.parametrize("refund", [False, True], ids=["plain", "refund"])
def test_a_requeued_job_is_queued_with_its_reason_and_forgets_its_run(refund: bool) -> None:
    job = _dispatched(attempts=2)
    before = utcnow()
    requeue(job, "GitHub answered 502", refund=refund)
    assert (job.state, job.reason) == (JobState.QUEUED, "GitHub answered 502")
    assert _forgotten(job) == dict.fromkeys(_forgotten(job))  # every run field None, not "" or kept
    assert job.updated_at is not None and before <= job.updated_at <= utcnow()


@pytest.mark.parametrize(
    ("attempts", "refund", "after"),
    [
        (2, False, 2),  # a real run that failed keeps its attempt used
        (2, True, 1),  # a dispatch that never ran gives it back
        (1, True, 0),  # down to zero ...
        (0, True, 0),  # ... and never below
    ],
)
def test_only_a_refund_gives_the_attempt_back_and_never_below_zero(
    attempts: int, refund: bool, after: int
) -> None:
    job = _dispatched(attempts=attempts)
    requeue(job, "lost dispatch", refund=refund)
    assert job.attempts == after


def test_refund_is_off_by_default() -> None:
    job = _dispatched(attempts=3)
    requeue(job, "preempted")
    assert job.attempts == 3
