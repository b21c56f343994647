"""Runs cancelled through the API: read as cancelled, not as the benchmark's failure (issue 19).

An outside cancel (someone on GitHub) ends the job ``cancelled`` and is not re-run: whoever
cancelled it wanted the runners back, and a bot that re-dispatched would fight them (the report
says how to run it again). The bot's own cancel is never retried either.

A cancel of the bot's that did not take is asked again at the run's next workflow_run, unless
GitHub refused it (a 4xx such as 403 "Must have admin rights to Repository."): that is kept on the
jobs and not asked again, which would only spend one refused POST per event until the run ends.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select

from app.adapters.github.errors import Forbidden
from app.core.routing import HandlerContext, TransientError
from app.core.sweepspec import SweepFilters
from app.flows.commands import operator
from app.flows.scheduler.repair import repair_jobs
from app.flows.scheduler.tick import tick
from app.flows.sweeps.cancel import cancel_sweep
from app.models import AuditEntry
from app.models.dispatchruns import DispatchRun
from app.models.sweeps import JobState, SweepJob
from tests.flows.test_scheduler import _jobs, _listed, _request, _wf_job, deliver, env
from tests.sweep_fakes import REPO, FakeCancel, FakeGitHub, FakeRepair, FakeRunTracking, FakeTick

__all__ = ["env"]


def test_a_run_cancelled_on_github_is_cancelled_not_failed_nor_retried(env: dict[str, Any]) -> None:
    gh = FakeGitHub()
    env["mp"].setattr(HandlerContext, "gateway", lambda self, actor="sweepbot": FakeRunTracking(gh))
    req = _request(env["factory"], gh, filters=SweepFilters(seq="8k1k", conc=(1,)))
    tick(env["factory"], lambda s: FakeTick(gh))
    run_id = gh.dispatches[0]["run_id"]
    jobs = _jobs(env["factory"], req.sweep.id)
    running, queued, _third = jobs
    wf_running = _wf_job(gh, run_id, running, "cancelled")
    gh.annotations[wf_running["id"]] = [
        {"annotation_level": "failure", "message": "The operation was canceled.", "path": ".github"}
    ]
    wf_queued = _wf_job(gh, run_id, queued, "cancelled")  # never started: no annotation
    gh.run_jobs[run_id] = _listed(gh, run_id, jobs, [wf_running, wf_queued])
    deliver(env["factory"], "workflow_job", {"action": "completed", "workflow_job": wf_running})
    deliver(env["factory"], "workflow_job", {"action": "completed", "workflow_job": wf_queued})
    gh.runs[run_id].update(status="completed", conclusion="cancelled")
    deliver(env["factory"], "workflow_run", {"action": "completed", "workflow_run": gh.runs[run_id]})
    by_id = {j.id: j for j in _jobs(env["factory"], req.sweep.id)}
    assert {by_id[j.id].state for j in by_id.values()} == {JobState.CANCELLED}
    assert all("cancelled on GitHub" in (j.reason or "") for j in by_id.values())
    assert "The operation was canceled." in (by_id[running.id].reason or "")
    assert all(j.attempts == 1 for j in by_id.values())  # nothing re-dispatched
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 0


def test_the_bots_own_cancel_is_not_retried(env: dict[str, Any]) -> None:
    gh = FakeGitHub()
    env["mp"].setattr(HandlerContext, "gateway", lambda self, actor="sweepbot": FakeRunTracking(gh))
    req = _request(env["factory"], gh, filters=SweepFilters(seq="8k1k", conc=(1,)))
    tick(env["factory"], lambda s: FakeTick(gh))
    run_id = gh.dispatches[0]["run_id"]
    jobs = _jobs(env["factory"], req.sweep.id)
    with env["factory"]() as s:
        cancel_sweep(s, FakeCancel(gh), req.sweep.id, actor="maint", reason="not needed")
        s.commit()
    assert gh.cancelled == [run_id]
    for job in jobs:
        deliver(
            env["factory"],
            "workflow_job",
            {"action": "completed", "workflow_job": _wf_job(gh, run_id, job, "cancelled")},
        )
    deliver(env["factory"], "workflow_run", {"action": "completed", "workflow_run": gh.runs[run_id]})
    after = _jobs(env["factory"], req.sweep.id)
    assert {j.state for j in after} == {JobState.CANCELLED}
    assert all("not needed" in (j.reason or "") for j in after)
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 0


def _running_sweep(env: dict[str, Any], gh: FakeGitHub, tp: int | None = None) -> tuple[int, int]:
    """A sweep whose one run is in progress on GitHub (its jobs running): (sweep id, run id)."""
    env["mp"].setattr(HandlerContext, "gateway", lambda self, actor="sweepbot": FakeRunTracking(gh))
    req = _request(env["factory"], gh, filters=SweepFilters(seq="8k1k", conc=(1,), tp=tp))
    tick(env["factory"], lambda s: FakeTick(gh))
    run_id = gh.dispatches[0]["run_id"]
    gh.runs[run_id]["status"] = "in_progress"
    deliver(env["factory"], "workflow_run", {"action": "in_progress", "workflow_run": dict(gh.runs[run_id])})
    assert {j.state for j in _jobs(env["factory"], req.sweep.id)} == {JobState.RUNNING}
    return req.sweep.id, run_id


def _refusal(run_id: int) -> Forbidden:
    """What the gateway raises for GitHub's real answer (tests/fixtures/github/replay/
    WorkflowRun.test_cancel.txt: 403 "Must have admin rights to Repository.")."""
    said = "Must have admin rights to Repository."
    return Forbidden(
        403,
        f"actions/cancel-workflow-run: run {run_id} of {REPO} was not cancelled ({said}): "
        "the bot's credentials need write access to Actions there",
        {"message": said},
    )


def _cancel(env: dict[str, Any], gh: FakeGitHub, sweep_id: int, how: str) -> list[str]:
    """Cancel the sweep as a command does (the flow calls GitHub), or as the dashboard does (the
    database now, the runs by the worker's ``sweepbot.cancel_runs`` task)."""
    with env["factory"]() as s:
        if how == "command":
            cancel_sweep(s, FakeCancel(gh), sweep_id, actor="maint", reason="not needed")
            s.commit()
            entry = s.scalars(select(AuditEntry).where(AuditEntry.action == "sweep.cancel")).one()
            assert entry.outcome == "failed"
            return list((entry.detail or {})["errors"])
        stop = operator.cancel_sweep(s, sweep_id, actor="op")
        s.commit()
    with env["factory"]() as s:
        errors = operator.stop_runs(FakeCancel(gh), stop.repo, list(stop.run_ids), s)
        s.commit()
    return errors


def _events_while_it_runs(env: dict[str, Any], gh: FakeGitHub, run_id: int, times: int = 3) -> None:
    """The run goes on: its workflow_run events arrive (webhooks, redeliveries) and the repair
    poll runs, as many times."""
    for _ in range(times):
        deliver(
            env["factory"], "workflow_run", {"action": "in_progress", "workflow_run": dict(gh.runs[run_id])}
        )
        repair_jobs(env["factory"], lambda s: FakeRepair(gh))


@pytest.mark.parametrize("how", ["command", "dashboard"])
def test_a_cancel_github_refuses_is_not_asked_again(env: dict[str, Any], how: str) -> None:
    gh = FakeGitHub()
    sweep_id, run_id = _running_sweep(env, gh)
    gh.cancel_errors = [_refusal(run_id) for _ in range(10)]
    errors = _cancel(env, gh, sweep_id, how)
    # shown where the cancel's outcome is shown: the sweep.cancel audit entry, the task's result
    assert len(errors) == 1 and "Must have admin rights to Repository." in errors[0]
    assert errors[0].endswith("(refused: not asked again)")
    assert gh.cancel_posts == [run_id]
    _events_while_it_runs(env, gh, run_id)
    assert gh.cancel_posts == [run_id]  # before: one more refused POST per workflow_run event
    jobs = _jobs(env["factory"], sweep_id)
    assert {j.state for j in jobs} == {JobState.CANCELLED}
    assert all("Must have admin rights" in (j.run_cancel_refused or "") for j in jobs)
    # The run ends on its own: its runners are free, the jobs stay cancelled.
    gh.runs[run_id].update(status="completed", conclusion="success")
    deliver(env["factory"], "workflow_run", {"action": "completed", "workflow_run": dict(gh.runs[run_id])})
    with env["factory"]() as s:
        row = s.get(DispatchRun, run_id)
        assert row is not None and row.completed_at is not None
    assert {j.state for j in _jobs(env["factory"], sweep_id)} == {JobState.CANCELLED}
    assert gh.cancel_posts == [run_id]


@pytest.mark.parametrize(
    "failure",
    [
        TransientError("actions/cancel-workflow-run: GitHub answered 502: Server Error"),
        TransientError(
            "actions/cancel-workflow-run: secondary rate limit (403, retry-after): You have exceeded "
            "a secondary rate limit",
            retry_after=60,
            rate_limited=True,
        ),
    ],
    ids=["5xx", "rate-limit"],
)
def test_a_cancel_that_failed_transiently_is_asked_again(env: dict[str, Any], failure: Exception) -> None:
    gh = FakeGitHub()
    sweep_id, run_id = _running_sweep(env, gh)
    gh.cancel_errors = [failure]
    errors = _cancel(env, gh, sweep_id, "command")
    assert len(errors) == 1 and "not asked again" not in errors[0]
    assert all(j.run_cancel_refused is None for j in _jobs(env["factory"], sweep_id))
    _events_while_it_runs(env, gh, run_id, times=1)
    assert gh.cancel_posts == [run_id, run_id] and gh.cancelled == [run_id]  # the second took
    assert gh.runs[run_id]["conclusion"] == "cancelled"


def _past_the_timeout(env: dict[str, Any], sweep_id: int) -> None:
    """Every job of the sweep was dispatched longer ago than SWEEPBOT_JOB_TIMEOUT_SECONDS (6 h)."""
    with env["factory"]() as s:
        for job in s.scalars(select(SweepJob).where(SweepJob.sweep_id == sweep_id)):
            job.dispatched_at = datetime.now(UTC) - timedelta(hours=7)
        s.commit()


@pytest.mark.parametrize(
    "failure",
    [
        TransientError("actions/cancel-workflow-run: GitHub answered 502: Server Error"),
        TransientError(
            "actions/cancel-workflow-run: secondary rate limit (403, retry-after): You have exceeded "
            "a secondary rate limit",
            retry_after=60,
            rate_limited=True,
        ),
    ],
    ids=["5xx", "rate-limit"],
)
def test_a_timed_out_jobs_cancel_that_failed_transiently_is_asked_again(
    env: dict[str, Any], failure: Exception
) -> None:
    gh = FakeGitHub()
    sweep_id, run_id = _running_sweep(env, gh, tp=4)  # one job of ours in the run
    _past_the_timeout(env, sweep_id)
    gh.cancel_errors = [failure]
    repair_jobs(env["factory"], lambda s: FakeRepair(gh))
    assert gh.cancel_posts == [run_id] and gh.cancelled == []
    assert {j.state for j in _jobs(env["factory"], sweep_id)} == {JobState.RUNNING}  # still in flight
    repair_jobs(env["factory"], lambda s: FakeRepair(gh))  # the next repair poll asks again
    assert gh.cancel_posts == [run_id, run_id] and gh.cancelled == [run_id]  # before: never asked again
    jobs = _jobs(env["factory"], sweep_id)
    assert {j.state for j in jobs} == {JobState.FAILED}
    assert all((j.reason or "").startswith("timed out") and j.run_cancel_refused is None for j in jobs)
    _events_while_it_runs(env, gh, run_id)
    assert gh.cancel_posts == [run_id, run_id]


def test_the_jobs_of_one_timed_out_run_ask_its_cancel_once_per_poll(env: dict[str, Any]) -> None:
    gh = FakeGitHub()
    sweep_id, run_id = _running_sweep(env, gh)  # three jobs of ours in the run
    _past_the_timeout(env, sweep_id)
    gh.cancel_errors = [TransientError("actions/cancel-workflow-run: GitHub answered 502: Server Error")]
    repair_jobs(env["factory"], lambda s: FakeRepair(gh))
    assert gh.cancel_posts == [run_id]  # before: one POST per job, each asking the same run
    assert {j.state for j in _jobs(env["factory"], sweep_id)} == {JobState.RUNNING}
    repair_jobs(env["factory"], lambda s: FakeRepair(gh))
    assert gh.cancel_posts == [run_id, run_id] and gh.cancelled == [run_id]
    assert {j.state for j in _jobs(env["factory"], sweep_id)} == {JobState.FAILED}


def test_a_timed_out_jobs_cancel_github_refuses_is_not_asked_again(env: dict[str, Any]) -> None:
    gh = FakeGitHub()
    sweep_id, run_id = _running_sweep(env, gh)
    _past_the_timeout(env, sweep_id)
    gh.cancel_errors = [_refusal(run_id) for _ in range(10)]
    repair_jobs(env["factory"], lambda s: FakeRepair(gh))
    jobs = _jobs(env["factory"], sweep_id)
    assert {j.state for j in jobs} == {JobState.FAILED}
    assert all("Must have admin rights" in (j.run_cancel_refused or "") for j in jobs)
    _events_while_it_runs(env, gh, run_id)
    assert gh.cancel_posts == [run_id]  # before: one refused POST per timed-out job of the run
