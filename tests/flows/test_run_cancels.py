"""Runs cancelled through the API: read as cancelled, not as the benchmark's failure (issue 19).

An outside cancel (someone on GitHub) ends the job ``cancelled`` and is not re-run: whoever
cancelled it wanted the runners back, and a bot that re-dispatched would fight them (the report
says how to run it again). The bot's own cancel is never retried either.
"""

from __future__ import annotations

import contextlib
from typing import Any

from app.core.routing import HandlerContext, HandlerSkipped
from app.core.sweepspec import SweepFilters
from app.flows.runtracking import on_workflow_job, on_workflow_run
from app.flows.sweepcancel import cancel_sweep
from app.flows.tick import tick
from app.models.sweeps import JobState
from tests.flows.test_scheduler import _ctx, _jobs, _request, _wf_job, env
from tests.sweep_fakes import FakeCancel, FakeGitHub, FakeRunTracking, FakeTick

__all__ = ["env"]


def _deliver(env: dict[str, Any], event: str, payload: dict[str, Any]) -> None:
    with env["factory"]() as s:
        handler = on_workflow_job if event == "workflow_job" else on_workflow_run
        ctx = _ctx(s, event, payload)
        with contextlib.suppress(HandlerSkipped):
            handler(ctx)
        s.commit()
    for callback in ctx.after_commit:
        callback()


def test_a_run_cancelled_on_github_is_cancelled_not_failed_nor_retried(env: dict[str, Any]) -> None:
    gh = FakeGitHub()
    env["mp"].setattr(HandlerContext, "gateway", lambda self, actor="sweepbot": FakeRunTracking(gh))
    req = _request(env["factory"], gh, filters=SweepFilters(seq="8k1k", conc=(1,)))
    tick(env["factory"], lambda s: FakeTick(gh))
    run_id = gh.dispatches[0]["run_id"]
    running, queued, _third = _jobs(env["factory"], req.sweep.id)
    wf_running = _wf_job(gh, run_id, running, "cancelled")
    gh.annotations[wf_running["id"]] = [
        {"annotation_level": "failure", "message": "The operation was canceled.", "path": ".github"}
    ]
    _deliver(env, "workflow_job", {"action": "completed", "workflow_job": wf_running})
    wf_queued = _wf_job(gh, run_id, queued, "cancelled")  # never started: no annotation
    _deliver(env, "workflow_job", {"action": "completed", "workflow_job": wf_queued})
    gh.run_jobs[run_id] = [wf_running, wf_queued]
    gh.runs[run_id].update(status="completed", conclusion="cancelled")
    _deliver(env, "workflow_run", {"action": "completed", "workflow_run": gh.runs[run_id]})
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
        _deliver(
            env,
            "workflow_job",
            {"action": "completed", "workflow_job": _wf_job(gh, run_id, job, "cancelled")},
        )
    _deliver(env, "workflow_run", {"action": "completed", "workflow_run": gh.runs[run_id]})
    after = _jobs(env["factory"], req.sweep.id)
    assert {j.state for j in after} == {JobState.CANCELLED}
    assert all("not needed" in (j.reason or "") for j in after)
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 0
