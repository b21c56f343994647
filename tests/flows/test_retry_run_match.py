"""A lost runner's retry, when dispatches answer with no run id: its run is found by its own name.

The race the dispatch-mode story hit under load: the retry of a lost point went out under the same
run name (``sweepbot-<sweep>-<job>``) as the run it retried, and GitHub listed the retry's run only
later. The lookup by title then took the first run for the retry (the point ran again and again),
and a late event of the first run was adopted by the retry. Here GitHub lists every run late (after
the next dispatch), deterministically.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.core.routing import Event, HandlerContext, HandlerSkipped
from app.core.runmatch import attempt_run_name, match_run, run_fits_dispatch, run_name_in_title
from app.flows.repo.bench_repo import clear_capacity_cache
from app.flows.scheduler.run_tracking import on_workflow_job, on_workflow_run
from app.flows.scheduler.tick import tick
from app.flows.sweeps import ring
from app.models.sweeps import JobState, SweepJob
from tests.sweep_fakes import FakeGitHub, FakeRunTracking, FakeTick, request_8k1k


@pytest.fixture
def env(db_session: Session, settings_env: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    from app.db import session_factory
    from app.settings import reset_settings_cache

    settings_env.setenv("SWEEPBOT_RUNNER_CAPACITY", "mi355x=32")
    settings_env.setenv("SWEEPBOT_INFRA_RETRY_LIMIT", "3")
    reset_settings_cache()
    clear_capacity_cache()
    settings_env.setattr(ring, "enqueue", lambda task, *args: None)
    yield {"factory": session_factory(), "mp": settings_env}


class ListedLate(FakeTick):
    """GitHub lists a dispatch's run only once the next dispatch went out (``gh.hidden``)."""

    def dispatch_workflow(
        self, repo: str, workflow: str, ref: str, inputs: dict[str, str]
    ) -> dict[str, Any] | None:
        answer = super().dispatch_workflow(repo, workflow, ref, inputs)
        run_id = self.gh.dispatches[-1]["run_id"]
        self.gh.runs[run_id]["created_at"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.gh.hidden.add(run_id)  # type: ignore[attr-defined]
        return answer

    def list_workflow_runs(
        self, repo: str, workflow: str | None = None, **params: Any
    ) -> list[dict[str, Any]]:
        hidden = self.gh.hidden  # type: ignore[attr-defined]
        return [r for r in super().list_workflow_runs(repo, workflow, **params) if r["id"] not in hidden]


def _deliver(factory: sessionmaker[Session], gh: FakeGitHub, event: str, payload: dict[str, Any]) -> None:
    with factory() as s:
        ctx: HandlerContext[Session, Any] = HandlerContext(
            session=s, event=Event("d", event, payload.get("action"), payload)
        )
        handler = on_workflow_job if event == "workflow_job" else on_workflow_run
        with contextlib.suppress(HandlerSkipped):
            handler(ctx)
        s.commit()


def _job(factory: sessionmaker[Session], job_id: int) -> SweepJob:
    with factory() as s:
        job = s.get(SweepJob, job_id)
        assert job is not None
        return job


_wf_ids = iter(range(70_000, 80_000))


def _wf_job(run_id: int, job: SweepJob, status: str, conclusion: str | None = None) -> dict[str, Any]:
    from sim.runs import job_name

    return {
        "id": next(_wf_ids),
        "run_id": run_id,
        "name": job_name("single-node /", job.point),
        "status": status,
        "conclusion": conclusion,
        "steps": [{"name": "Launch job script", "conclusion": "cancelled" if conclusion else None}],
    }


def _lost_job_event(gh: FakeGitHub, run_id: int, jobs: list[SweepJob]) -> dict[str, Any]:
    """``jobs[0]``'s runner is lost in ``run_id``. The run lists, in matrix order, the key's 1k1k
    points at that conc first (e2e-tests.yml selects by conc only; same job names), then ours."""
    lost = _wf_job(run_id, jobs[0], "completed", "failure")
    gh.annotations[int(lost["id"])] = [
        {
            "annotation_level": "failure",
            "message": "The self-hosted runner: mi355x-amds_01 lost communication with the server.",
        }
    ]
    twins = [_wf_job(run_id, j, "queued") for j in jobs]
    gh.run_jobs[run_id] = [*twins, lost, *(_wf_job(run_id, j, "in_progress") for j in jobs[1:])]
    return lost


@pytest.mark.parametrize("refunded", [False, True], ids=["retry", "refunded-retry-same-name"])
def test_a_retry_never_takes_the_run_it_retries_nor_its_late_events(
    env: dict[str, Any], refunded: bool
) -> None:
    """``refunded``: the retry's attempt was given back (as a refunded dispatch is), so it goes out
    under the first run's very name: only the run's binding and creation time tell them apart."""
    factory = env["factory"]
    gh = FakeGitHub(return_details=False)
    gh.hidden = set()  # type: ignore[attr-defined]
    env["mp"].setattr(HandlerContext, "gateway", lambda self, actor="sweepbot": FakeRunTracking(gh))
    request_8k1k(factory, gh, 512)
    tick(factory, lambda s: ListedLate(gh))
    with factory() as s:
        jobs = list(s.scalars(select(SweepJob).order_by(SweepJob.id)).all())
    first_run = gh.dispatches[0]["run_id"]
    assert jobs and all(j.run_id is None for j in jobs)  # not listed yet
    # GitHub lists the first run now: its in-progress event binds it by name
    gh.hidden.discard(first_run)  # type: ignore[attr-defined]
    gh.runs[first_run]["status"] = "in_progress"
    _deliver(factory, gh, "workflow_run", {"action": "in_progress", "workflow_run": dict(gh.runs[first_run])})
    lost = _job(factory, jobs[0].id)
    assert lost.run_id == first_run and lost.state == JobState.RUNNING
    # its runner is lost, the run completes: the point is re-queued and retried
    _deliver(
        factory,
        gh,
        "workflow_job",
        {"action": "completed", "workflow_job": _lost_job_event(gh, first_run, [lost, *jobs[1:]])},
    )
    assert _job(factory, lost.id).state == JobState.QUEUED
    gh.runs[first_run].update(status="completed", conclusion="failure")
    completed = {"action": "completed", "workflow_run": dict(gh.runs[first_run])}
    _deliver(factory, gh, "workflow_run", completed)
    if refunded:
        with factory() as s:
            refund = s.get(SweepJob, lost.id)
            assert refund is not None
            refund.attempts = 0
            s.commit()
    assert tick(factory, lambda s: ListedLate(gh)).dispatched_runs == 1
    retry_run = gh.dispatches[-1]["run_id"]
    assert retry_run != first_run
    retried = _job(factory, lost.id)
    # the lookup by title did not take the first run (listed, same sweep, same group) for the retry
    assert retried.state == JobState.DISPATCHED and retried.run_id is None, retried.run_id
    # a late (redelivered) event of the first run is not adopted by the retry
    _deliver(factory, gh, "workflow_run", completed)
    late = _job(factory, lost.id)
    assert (late.state, late.run_id, late.attempts) == (JobState.DISPATCHED, None, retried.attempts)
    first_title = gh.runs[first_run]["display_title"]
    retry_title = gh.runs[retry_run]["display_title"]
    if not refunded:  # the retry's run carries a name of its own
        assert retry_title == f"{first_title}-a2"
        assert (
            run_name_in_title(retry_title) == retried.run_name == attempt_run_name(jobs[0].run_name or "", 2)
        )
    # the retry's run is listed at last: its own event binds it
    gh.hidden.discard(retry_run)  # type: ignore[attr-defined]
    gh.runs[retry_run]["status"] = "in_progress"
    _deliver(factory, gh, "workflow_run", {"action": "in_progress", "workflow_run": dict(gh.runs[retry_run])})
    bound = _job(factory, lost.id)
    assert bound.run_id == retry_run and bound.state == JobState.RUNNING
    assert bound.attempts == (1 if refunded else 2)
    assert len(gh.dispatches) == 2  # measured by the retry's run only: no third dispatch


def test_a_run_under_the_same_name_fits_a_dispatch_only_when_unbound_and_created_after_it() -> None:
    claimed = datetime(2026, 12, 2, 7, 0, tzinfo=UTC)
    title = "e2e Test - sweepbot-1-2"
    run: dict[str, Any] = {"id": 5, "display_title": title, "created_at": "2026-12-02T07:00:05Z"}
    assert run_fits_dispatch(run, claimed_at=claimed) is None
    assert "bound" in (run_fits_dispatch(run, claimed_at=claimed, bound={5}) or "")
    older = {**run, "id": 4, "created_at": "2026-12-02T06:55:00Z"}
    assert "before the dispatch" in (run_fits_dispatch(older, claimed_at=claimed) or "")
    # GitHub's clock a little behind ours is still this dispatch's run
    skewed = {**run, "created_at": (claimed - timedelta(seconds=10)).strftime("%Y-%m-%dT%H:%M:%SZ")}
    assert run_fits_dispatch(skewed, claimed_at=claimed) is None
    # the newest fitting run, never an older one that merely carries the title
    found = match_run([older, run], display_title=title, claimed_at=claimed, bound={4})
    assert found.run is run
    none = match_run([older], display_title=title, claimed_at=claimed)
    assert none.run is None and "before the dispatch" in none.reason
    assert attempt_run_name("sweepbot-1-2", 1) == "sweepbot-1-2"
    assert attempt_run_name("sweepbot-1-2", 3) == "sweepbot-1-2-a3"
    assert run_name_in_title("e2e Test - sweepbot-1-2-a3") == "sweepbot-1-2-a3"
