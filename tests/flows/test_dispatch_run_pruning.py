"""Rows of followed runs (dispatch_runs) are deleted once their run completed longer ago than
``SWEEPBOT_DISPATCH_RUN_RETENTION_SECONDS``, by the repair poll; never a run not completed, nor one
a job of ours still waits on in flight (its runners would be counted again through the job).

On SQLite and on PostgreSQL (the delete's NOT EXISTS is the database's to get right).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.core.clock import utcnow
from app.core.sweepspec import SweepFilters
from app.flows.scheduler.repair import repair_jobs
from app.flows.sweeps import ring
from app.flows.sweeps.request import request_sweep
from app.models.dispatchruns import DispatchRun
from app.models.sweeps import JobState, SweepJob
from tests.sweep_fakes import KEY, REPO, FakeGitHub, FakeRepair, FakeRequest

DAY = timedelta(days=1)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.services)])
def factory(
    request: pytest.FixtureRequest, settings_env: pytest.MonkeyPatch
) -> Iterator[sessionmaker[Session]]:
    from app.db import session_factory
    from app.settings import reset_settings_cache

    url = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_clean_url")
    settings_env.setenv("SWEEPBOT_DATABASE_URL", url)
    settings_env.setenv("SWEEPBOT_DISPATCH_RUN_RETENTION_SECONDS", str(7 * 24 * 3600))
    reset_settings_cache()
    settings_env.setattr(ring, "enqueue", lambda task, *args: None)
    yield session_factory()


def _run(s: Session, run_id: int, *, created: datetime, completed: datetime | None = None) -> None:
    s.add(
        DispatchRun(
            run_id=run_id,
            repo=REPO,
            runner_label="mi355x",
            run_name=f"sweepbot-run-{run_id}",
            slots=1,
            jobs_seen=[],
            jobs_done=[],
            created_at=created,
            completed_at=completed,
            completed_why="run success" if completed else None,
        )
    )


def _rows(factory: sessionmaker[Session]) -> dict[int, bool]:
    """Run id -> completed, of the rows left."""
    with factory() as s:
        return {r.run_id: r.completed_at is not None for r in s.scalars(select(DispatchRun))}


def _seed(factory: sessionmaker[Session], gh: FakeGitHub) -> tuple[datetime, int]:
    now = utcnow()
    with factory() as s:
        request_sweep(
            s, FakeRequest(gh), repo=REPO, pr_number=7, config_key=KEY, requested_by="maint",
            reason="api", filters=SweepFilters(seq="8k1k", conc=(1,)),
        )  # fmt: skip
        s.flush()
        waiting, finished, *_ = s.scalars(select(SweepJob).order_by(SweepJob.id)).all()
        _run(s, 1, created=now - 9 * DAY, completed=now - 8 * DAY)  # past the retention: goes
        _run(s, 2, created=now - 7 * DAY, completed=now - 6 * DAY)  # within it: stays
        _run(s, 3, created=now - 30 * DAY)  # never heard to complete: closed now, not deleted
        _run(s, 4, created=now - timedelta(hours=1))  # running
        _run(s, 5, created=now - 31 * DAY, completed=now - 30 * DAY)  # a job of ours still waits on it
        # run 5's job: its benchmark succeeded, the collection of its result is pending
        waiting.state, waiting.run_id, waiting.run_conclusion = JobState.RUNNING, 5, "success"
        waiting.run_name, waiting.dispatched_at = "sweepbot-run-5", now - timedelta(minutes=5)
        finished.state, finished.run_id, finished.run_name = JobState.FAILED, 1, "sweepbot-run-1"
        s.commit()
        waiting_id = waiting.id
    gh.runs[4] = {"id": 4, "status": "in_progress", "conclusion": None, "display_title": "e2e Test - x"}
    return now, waiting_id


def test_completed_runs_past_the_retention_are_pruned_and_nothing_else(
    factory: sessionmaker[Session],
) -> None:
    gh = FakeGitHub()
    _, waiting_id = _seed(factory, gh)
    result = repair_jobs(factory, lambda s: FakeRepair(gh))
    assert result.pruned == 1
    assert _rows(factory) == {2: True, 3: True, 4: False, 5: True}
    # The job collected: nothing waits on run 5 any more, and it completed long ago.
    with factory() as s:
        job = s.get(SweepJob, waiting_id)
        assert job is not None
        job.state = JobState.SUCCEEDED
        s.commit()
    again = repair_jobs(factory, lambda s: FakeRepair(gh))
    assert again.pruned == 1 and _rows(factory) == {2: True, 3: True, 4: False}
    assert repair_jobs(factory, lambda s: FakeRepair(gh)).pruned == 0
