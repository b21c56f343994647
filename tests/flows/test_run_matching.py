"""A workflow job is ours only in the run we dispatched for it, at its matrix position (issue 19).

e2e-tests.yml names a job without its seq-len, so the 1k1k and 8k1k points of one conc and tp share
a name. A retry re-dispatches the whole conc group: the new run holds the retried point and its
siblings (which already succeeded in the first run), under the same names. Only the retried
point's own job of the new run may be taken for it.
"""

from __future__ import annotations

from typing import Any

from app.core.routing import HandlerContext
from app.core.sweepspec import SweepFilters
from app.flows.scheduler.tick import tick
from app.models.sweeps import JobState, SweepJob
from tests.flows.test_scheduler import _jobs, _request, _wf_job, deliver, env
from tests.sweep_fakes import FakeGitHub, FakeRunTracking, FakeTick

__all__ = ["env"]


def _same_name_pair(jobs: list[SweepJob]) -> tuple[SweepJob, SweepJob]:
    """A 1k1k point and the 8k1k point of the same tp (one job name in e2e-tests.yml)."""
    by_tp: dict[int, dict[str, SweepJob]] = {}
    for job in jobs:
        by_tp.setdefault(job.tp, {})[job.seq] = job
    pair = next(p for p in by_tp.values() if {"1k1k", "8k1k"} <= set(p))
    return pair["1k1k"], pair["8k1k"]


def _run_jobs(gh: FakeGitHub, run_id: int, jobs: list[SweepJob]) -> list[dict[str, Any]]:
    """The run's benchmark jobs in matrix order (the repo's order: seq-len major, our ids follow it)."""
    return [_wf_job(gh, run_id, j, None, "queued") for j in sorted(jobs, key=lambda j: j.id)]


def test_a_retried_points_sibling_in_the_new_run_is_not_taken_for_it(env: dict[str, Any]) -> None:
    from app.settings import reset_settings_cache

    env["mp"].setenv("SWEEPBOT_RUNNER_CAPACITY", "mi355x=20")
    reset_settings_cache()
    gh = FakeGitHub()
    env["mp"].setattr(HandlerContext, "gateway", lambda self, actor="sweepbot": FakeRunTracking(gh))
    req = _request(env["factory"], gh, filters=SweepFilters(conc=(1,)))
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 1
    first = gh.dispatches[0]["run_id"]
    jobs = _jobs(env["factory"], req.sweep.id)
    sibling, retried = _same_name_pair(jobs)
    ordered = sorted(jobs, key=lambda j: j.id)
    # every point succeeds but one, whose runner is lost (an infrastructure failure: retried)
    gh.run_jobs[first] = [
        _wf_job(gh, first, j, "failure", lost=True)
        if j.id == retried.id
        else _wf_job(gh, first, j, "success")
        for j in ordered
    ]
    for wf in gh.run_jobs[first]:
        deliver(env["factory"], "workflow_job", {"action": "completed", "workflow_job": wf})
    states = {j.id: j.state for j in _jobs(env["factory"], req.sweep.id)}
    assert states[retried.id] == JobState.QUEUED and states[sibling.id] == JobState.RUNNING
    # the retry: the whole conc again
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 1
    second = gh.dispatches[-1]["run_id"]
    gh.run_jobs[second] = _run_jobs(gh, second, ordered)
    sibling_again = gh.run_jobs[second][ordered.index(sibling)]
    deliver(
        env["factory"],
        "workflow_job",
        {
            "action": "completed",
            "workflow_job": {**sibling_again, "status": "completed", "conclusion": "success"},
        },
    )
    after = {j.id: j for j in _jobs(env["factory"], req.sweep.id)}
    assert after[retried.id].state == JobState.DISPATCHED and after[retried.id].run_conclusion is None
    own = gh.run_jobs[second][ordered.index(retried)]
    deliver(
        env["factory"],
        "workflow_job",
        {"action": "completed", "workflow_job": {**own, "status": "completed", "conclusion": "success"}},
    )
    after = {j.id: j for j in _jobs(env["factory"], req.sweep.id)}
    assert (after[retried.id].state, after[retried.id].run_conclusion) == (JobState.RUNNING, "success")
    assert after[retried.id].run_id == second
