"""The repair poll reads runs with one conditional listing per repository, under the budget."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.budget import RateSnapshot
from app.flows.repo.bench_repo import clear_capacity_cache
from app.flows.scheduler import run_poll as runpoll
from app.flows.scheduler.repair import repair_jobs
from app.flows.scheduler.tick import tick
from app.flows.sweeps import ring
from app.models.sweeps import JobState, SweepJob
from tests.sweep_fakes import FakeGitHub, FakeRepair, FakeTick, request_8k1k


@pytest.fixture
def env(db_session: Session, settings_env: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    from app.db import session_factory
    from app.settings import reset_settings_cache

    settings_env.setenv("SWEEPBOT_RUNNER_CAPACITY", "mi355x=32")
    reset_settings_cache()
    clear_capacity_cache()
    enqueued: list[tuple[str, tuple[Any, ...]]] = []
    settings_env.setattr(ring, "enqueue", lambda task, *args: enqueued.append((task, args)))
    yield {"factory": session_factory(), "enqueued": enqueued}


def _dispatched(env: dict[str, Any], gh: FakeGitHub) -> list[SweepJob]:
    factory = env["factory"]
    request_8k1k(factory, gh, 256, 512)
    tick(factory, lambda s: FakeTick(gh))
    with factory() as s:
        return list(s.scalars(select(SweepJob).order_by(SweepJob.id)).all())


def test_one_listing_per_poll_not_one_read_per_job(env: dict[str, Any]) -> None:
    gh = FakeGitHub()
    jobs = _dispatched(env, gh)
    runs = {j.run_id for j in jobs}
    assert len(runs) >= 2 and None not in runs
    for run in gh.runs.values():
        run["status"] = "in_progress"
    res = repair_jobs(env["factory"], lambda s: FakeRepair(gh))
    assert res.updated == len(runs) and gh.run_reads == 0 and len(gh.listings) == 1
    op, _path, params, changed = gh.listings[0]
    assert op == "actions/list-workflow-runs" and params["event"] == "workflow_dispatch"
    assert params["created"].startswith(">=") and changed
    with env["factory"]() as s:
        assert {j.state for j in s.scalars(select(SweepJob)).all()} == {JobState.RUNNING}
    # nothing moved: the same request, answered "not modified", nothing applied
    res = repair_jobs(env["factory"], lambda s: FakeRepair(gh))
    assert res.updated == 0 and gh.listings[-1][3] is False and gh.listings[-1][2] == params
    # one run finished: only that job is folded in (collection rung), still one listing
    first = jobs[0]
    assert first.run_id is not None
    gh.runs[first.run_id].update(status="completed", conclusion="success")
    res = repair_jobs(env["factory"], lambda s: FakeRepair(gh))
    assert res.updated == 1 and len(gh.listings) == 3 and gh.run_reads == 0
    assert ("sweepbot.collect_job", (first.id,)) in env["enqueued"]


def test_a_low_budget_holds_the_poll_back_and_the_dashboard_says_so(env: dict[str, Any]) -> None:
    from app.settings import get_settings
    from app.web.dashboard.data.overview import github_budget

    gh = FakeGitHub()
    _dispatched(env, gh)
    now = time.time()
    with env["factory"]() as s:
        # cap 2500 (50% of 5000), 2450 used: under the reserve
        runpoll.note_rate(s, RateSnapshot(5000, 2550, now + 1800, now))
        s.commit()
    for run in gh.runs.values():
        run["status"] = "in_progress"
    res = repair_jobs(env["factory"], lambda s: FakeRepair(gh))
    assert res.updated == 0 and gh.listings == []
    with env["factory"]() as s:
        shown = github_budget(s, get_settings())
        state = runpoll.load_budget(s)
    assert shown.mode == "webhooks_only" and shown.cap == 2500 and shown.spent == 2450
    assert state.decision is not None and state.decision["mode"] == "webhooks_only"
    assert "webhooks only" in (shown.reason or "")


def test_a_dispatch_whose_run_is_not_listed_yet_is_requeued_only_past_the_grace(
    env: dict[str, Any],
) -> None:
    """A dispatch answered without a run id leaves a run GitHub may list a little later: a complete
    listing without it re-queues the job only once the grace period has passed (re-queueing sooner
    would dispatch the same point twice)."""
    from datetime import timedelta

    from app.settings import get_settings

    class RunNotListedYet(FakeTick):
        def dispatch_workflow(
            self, repo: str, workflow: str, ref: str, inputs: dict[str, str]
        ) -> dict[str, Any] | None:
            answer = super().dispatch_workflow(repo, workflow, ref, inputs)
            self.gh.runs.clear()  # GitHub does not list the dispatch's run yet
            return answer

    gh = FakeGitHub(return_details=False)
    factory = env["factory"]
    request_8k1k(factory, gh, 256, 512)
    tick(factory, lambda s: RunNotListedYet(gh))
    with factory() as s:
        jobs = list(s.scalars(select(SweepJob)).all())
    assert jobs and all(j.state == JobState.DISPATCHED and j.run_id is None for j in jobs)
    res = repair_jobs(env["factory"], lambda s: FakeRepair(gh))
    assert res.requeued == 0
    with env["factory"]() as s:
        assert {j.state for j in s.scalars(select(SweepJob)).all()} == {JobState.DISPATCHED}
        grace = get_settings().dispatch_lost_grace_seconds
        for j in s.scalars(select(SweepJob)).all():
            assert j.dispatched_at is not None
            j.dispatched_at = j.dispatched_at - timedelta(seconds=grace + 1)
        s.commit()
    res = repair_jobs(env["factory"], lambda s: FakeRepair(gh))
    assert res.requeued == len(jobs)
    with env["factory"]() as s:
        assert {j.state for j in s.scalars(select(SweepJob)).all()} == {JobState.QUEUED}


def test_dispatches_github_refused_with_a_5xx_do_not_use_up_the_jobs_retries(
    env: dict[str, Any],
) -> None:
    """A dispatch that never reached a runner (GitHub answered 502) is sent again at the next tick
    without counting as a try: after more such refusals than the retry budget, the job's first real
    run failing for an infrastructure reason is still retried."""
    from app.core.routing import TransientError
    from app.flows.scheduler.run_tracking import retry_or_fail
    from app.settings import get_settings

    settings = get_settings()
    refusals = settings.infra_retry_limit + 2

    class FlakyDispatch(FakeTick):
        def dispatch_workflow(
            self, repo: str, workflow: str, ref: str, inputs: dict[str, str]
        ) -> dict[str, Any] | None:
            if len(refused) < refusals:
                refused.append(inputs["test-name"])
                raise TransientError("GitHub answered 502")
            return super().dispatch_workflow(repo, workflow, ref, inputs)

    refused: list[str] = []
    gh = FakeGitHub()
    factory = env["factory"]
    request_8k1k(factory, gh, 512)
    for _ in range(refusals + 1):
        tick(factory, lambda s: FlakyDispatch(gh))
    assert len(refused) == refusals and len(gh.dispatches) >= 1
    with factory() as s:
        jobs = list(s.scalars(select(SweepJob)).all())
        assert jobs and all(j.state == JobState.DISPATCHED for j in jobs)
        assert retry_or_fail(s, jobs[0], "the runner lost communication", settings) == "requeued"
