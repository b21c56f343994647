"""What is in flight on a label: a retry's siblings, and the jobs the overcommit lets wait (issue 19).

A retry re-dispatches the whole conc group (test-config selects by conc only): once the retried
job finished, the run's other jobs (points whose results we have) still hold runners. The bot
follows every run it dispatched until GitHub says the run completed, and counts those jobs.
``SWEEPBOT_RUNNER_OVERCOMMIT`` decides how many jobs may wait in GitHub's queue for a runner:
auto (the default) lets a group out once one of its jobs can start, 0 never more than runners.
"""

from __future__ import annotations

from typing import Any

from app.core.routing import HandlerContext
from app.core.sweepspec import SweepFilters
from app.flows.scheduler.repair import repair_jobs
from app.flows.scheduler.tick import tick
from app.flows.sweeps.job_finish import finish_job
from app.models.sweeps import JobState, SweepJob
from app.store.jobs import inflight_slots, requeue
from tests.flows.test_scheduler import _jobs, _request, _wf_job, deliver, env
from tests.sweep_fakes import FakeGitHub, FakeRepair, FakeRunTracking, FakeTick

__all__ = ["env"]


def _held(env: dict[str, Any]) -> int:
    with env["factory"]() as s:
        return inflight_slots(s, "mi355x")


def _job(wf: dict[str, Any], status: str, conclusion: str | None = None) -> dict[str, Any]:
    return {**wf, "status": status, "conclusion": conclusion, "labels": ["mi355x"]}


def test_a_retrys_run_holds_runners_until_its_siblings_finish(env: dict[str, Any]) -> None:
    from app.settings import reset_settings_cache

    # the strict hold: the second sweep's group waits for its whole width (with the default auto
    # overcommit it would go out at the first runner the siblings free)
    env["mp"].setenv("SWEEPBOT_RUNNER_OVERCOMMIT", "0")
    gh = FakeGitHub()
    env["mp"].setattr(HandlerContext, "gateway", lambda self, actor="sweepbot": FakeRunTracking(gh))
    req = _request(env["factory"], gh, filters=SweepFilters(conc=(1,)))
    jobs = sorted(_jobs(env["factory"], req.sweep.id), key=lambda j: j.id)
    width = jobs[0].slots
    assert width == len(jobs) > 1  # one dispatch runs every point of the conc
    env["mp"].setenv("SWEEPBOT_RUNNER_CAPACITY", f"mi355x={width}")
    reset_settings_cache()
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 1
    first = gh.dispatches[0]["run_id"]
    retried = jobs[-1]
    gh.run_jobs[first] = [
        _wf_job(gh, first, j, "failure", lost=True)
        if j.id == retried.id
        else _wf_job(gh, first, j, "success")
        for j in jobs
    ]
    for wf in gh.run_jobs[first]:
        deliver(
            env["factory"],
            "workflow_job",
            {"action": "completed", "workflow_job": {**wf, "labels": ["mi355x"]}},
        )
    assert {j.id: j.state for j in _jobs(env["factory"], req.sweep.id)}[retried.id] == JobState.QUEUED
    assert _held(env) == 0  # every job of the first run completed
    assert (
        tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 1
    )  # the retry: the whole group again
    second = gh.dispatches[-1]["run_id"]
    again = [_wf_job(gh, second, j, None, "queued") for j in jobs]
    gh.run_jobs[second] = again
    for wf in again:
        deliver(env["factory"], "workflow_job", {"action": "queued", "workflow_job": _job(wf, "queued")})
    assert _held(env) == width
    # the retried point's own job finishes first; its siblings (results we have) still run
    deliver(
        env["factory"],
        "workflow_job",
        {"action": "completed", "workflow_job": _job(again[-1], "completed", "success")},
    )
    assert {j.id: j.state for j in _jobs(env["factory"], req.sweep.id)}[retried.id] == JobState.RUNNING
    assert _held(env) == width - 1
    # a second sweep's dispatch of the same width must wait for them
    other = _request(env["factory"], gh, pr=8, filters=SweepFilters(conc=(1,)))
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 0
    for wf in again[:-1]:
        deliver(
            env["factory"],
            "workflow_job",
            {"action": "completed", "workflow_job": _job(wf, "completed", "success")},
        )
    assert _held(env) == 0
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 1
    assert {j.state for j in _jobs(env["factory"], other.sweep.id)} == {JobState.DISPATCHED}


def test_a_lost_sibling_event_is_freed_when_the_run_completes_even_by_the_repair_poll(
    env: dict[str, Any],
) -> None:
    """The siblings' completions never arrived (GitHub does not retry deliveries): the run stays
    counted until GitHub says it completed, which the repair poll reads when the webhook is lost."""
    from app.settings import reset_settings_cache

    gh = FakeGitHub()
    env["mp"].setattr(HandlerContext, "gateway", lambda self, actor="sweepbot": FakeRunTracking(gh))
    req = _request(env["factory"], gh, filters=SweepFilters(conc=(1,)))
    jobs = sorted(_jobs(env["factory"], req.sweep.id), key=lambda j: j.id)
    width = jobs[0].slots
    env["mp"].setenv("SWEEPBOT_RUNNER_CAPACITY", f"mi355x={width}")
    reset_settings_cache()
    tick(env["factory"], lambda s: FakeTick(gh))
    run_id = gh.dispatches[0]["run_id"]
    ours = [_wf_job(gh, run_id, j, "success") for j in jobs]
    gh.run_jobs[run_id] = ours
    for wf in ours:  # every job of ours is done, then the sweep's jobs are collected
        deliver(
            env["factory"],
            "workflow_job",
            {"action": "completed", "workflow_job": {**wf, "labels": ["mi355x"]}},
        )
    assert _held(env) == 0
    # the retry's run of a same-width group: the retried job alone is reported, then nothing
    with env["factory"]() as s:
        job = s.get(SweepJob, jobs[0].id)
        assert job is not None
        for other in jobs[1:]:
            finish_job(s, other.id, JobState.SUCCEEDED)
        requeue(job, "infrastructure failure, retry 1/2: test")
        s.commit()
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 1
    second = gh.dispatches[-1]["run_id"]
    own = _wf_job(gh, second, jobs[0], "success")
    gh.run_jobs[second] = [own] + [_wf_job(gh, second, j, None, "in_progress") for j in jobs[1:]]
    deliver(
        env["factory"], "workflow_job", {"action": "completed", "workflow_job": {**own, "labels": ["mi355x"]}}
    )
    assert _held(env) == width - 1  # siblings never reported: still counted
    gh.runs[second].update(status="completed", conclusion="success")  # its webhook is lost too
    repair_jobs(env["factory"], lambda s: FakeRepair(gh))
    assert _held(env) == 0


def test_overcommit_lets_a_group_out_when_that_many_of_its_jobs_would_wait_on_github(
    env: dict[str, Any],
) -> None:
    """SWEEPBOT_RUNNER_OVERCOMMIT: 0 keeps a group until its whole width is free; N lets it out
    when at most N of its jobs would wait in GitHub's queue for a runner."""
    from app.settings import reset_settings_cache

    gh = FakeGitHub()
    first = _request(env["factory"], gh, filters=SweepFilters(conc=(1,)))
    width = _jobs(env["factory"], first.sweep.id)[0].slots
    assert width > 1
    env["mp"].setenv("SWEEPBOT_RUNNER_CAPACITY", f"mi355x={width + 1}")  # one runner left after it
    reset_settings_cache()
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 1
    second = _request(env["factory"], gh, pr=8, filters=SweepFilters(conc=(1,)))
    for overcommit, released in ((0, 0), (width - 2, 0), (width - 1, 1)):
        env["mp"].setenv("SWEEPBOT_RUNNER_OVERCOMMIT", str(overcommit))
        reset_settings_cache()
        assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == released, overcommit
    assert {j.state for j in _jobs(env["factory"], second.sweep.id)} == {JobState.DISPATCHED}


def test_auto_overcommit_lets_a_group_out_at_one_free_runner_and_nothing_at_none(
    env: dict[str, Any],
) -> None:
    """The default (auto): a group goes out once one of its jobs can start on a free runner, the
    rest waiting in GitHub's queue; with no runner free nothing goes, not even a one-job group."""
    from app.settings import reset_settings_cache

    gh = FakeGitHub()
    env["mp"].setattr(HandlerContext, "gateway", lambda self, actor="sweepbot": FakeRunTracking(gh))
    first = _request(env["factory"], gh, filters=SweepFilters(conc=(1,)))
    jobs = sorted(_jobs(env["factory"], first.sweep.id), key=lambda j: j.id)
    width = jobs[0].slots
    assert width > 2
    env["mp"].setenv("SWEEPBOT_RUNNER_CAPACITY", f"mi355x={width}")
    reset_settings_cache()
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 1
    wide = _request(env["factory"], gh, pr=8, filters=SweepFilters(conc=(1,)))
    narrow = _request(env["factory"], gh, pr=9, filters=SweepFilters(conc=(1024,), evals="none"))
    assert [j.slots for j in _jobs(env["factory"], narrow.sweep.id)] == [1]
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 0  # no runner free
    run_id = gh.dispatches[0]["run_id"]
    gh.run_jobs[run_id] = [_wf_job(gh, run_id, j, "success") for j in jobs]
    done = {**gh.run_jobs[run_id][0], "labels": ["mi355x"]}
    deliver(env["factory"], "workflow_job", {"action": "completed", "workflow_job": done})
    assert _held(env) == width - 1  # one runner free
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 1
    assert {j.state for j in _jobs(env["factory"], wide.sweep.id)} == {JobState.DISPATCHED}
    assert _held(env) == 2 * width - 1  # width - 1 of its jobs wait on GitHub for a runner
    assert {j.state for j in _jobs(env["factory"], narrow.sweep.id)} == {JobState.QUEUED}
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 0
