"""Scheduler rules against a fake gateway on SQLite: planning, capacity, order, cancel, fork, tracking."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest
from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from app.core.recipes import expand_points, parse_master
from app.core.routing import Event, HandlerContext, HandlerSkipped
from app.core.sweepspec import SweepError, SweepFilters, group_fields, render_dispatch
from app.flows.repo.bench_repo import clear_capacity_cache
from app.flows.scheduler import dispatch
from app.flows.scheduler import tick as tick_flow
from app.flows.scheduler.dispatch import TickResult
from app.flows.scheduler.repair import repair_jobs
from app.flows.scheduler.run_tracking import on_workflow_job, on_workflow_run
from app.flows.scheduler.tick import tick
from app.flows.sweeps import ring
from app.flows.sweeps.cancel import (
    cancel_sweep,
    on_pull_request_synchronize,
    retry_job,
    retry_sweep,
    set_label_paused,
)
from app.flows.sweeps.fork_approval import approve_pr
from app.flows.sweeps.job_finish import finish_job
from app.flows.sweeps.request import SweepRequest, request_sweep
from app.flows.sweeps.views import sweep_summary
from app.models.dispatchruns import DispatchRun
from app.models.sweeps import JobState, Sweep, SweepJob, SweepState
from app.store import reuse, runnerlabels
from app.store.jobs import inflight_slots
from tests.sweep_fakes import (
    KEY,
    REPO,
    SHA2,
    FakeApproval,
    FakeCancel,
    FakeDispatch,
    FakeGitHub,
    FakeRepair,
    FakeRequest,
    FakeRunTracking,
    FakeTick,
    bench_files,
    runs_complete,
)


@pytest.fixture
def env(db_session: Session, settings_env: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    from app.db import session_factory
    from app.settings import reset_settings_cache

    settings_env.setenv("SWEEPBOT_RUNNER_CAPACITY", "mi355x=4")
    reset_settings_cache()
    clear_capacity_cache()
    enqueued: list[tuple[str, tuple[Any, ...]]] = []
    settings_env.setattr(ring, "enqueue", lambda task, *args: enqueued.append((task, args)))
    yield {"factory": session_factory(), "enqueued": enqueued, "mp": settings_env}


def _request(factory: sessionmaker[Session], gh: FakeGitHub, pr: int = 7, **kw: Any) -> SweepRequest:
    with factory() as s:
        req = request_sweep(
            s,
            FakeRequest(gh),
            repo=REPO,
            pr_number=pr,
            config_key=KEY,
            requested_by="maint",
            reason="command",
            **kw,
        )
        s.commit()
        return req


def _jobs(factory: sessionmaker[Session], sweep_id: int | None = None) -> list[SweepJob]:
    with factory() as s:
        q = select(SweepJob).order_by(SweepJob.id)
        if sweep_id is not None:
            q = q.where(SweepJob.sweep_id == sweep_id)
        return list(s.scalars(q).all())


def _inflight(factory: sessionmaker[Session]) -> int:
    with factory() as s:
        return inflight_slots(s, "mi355x")


def test_one_job_per_point_and_groups(env: dict[str, Any]) -> None:
    gh = FakeGitHub()
    req = _request(env["factory"], gh, filters=SweepFilters(seq="8k1k"))
    master = parse_master(bench_files()[".github/configs/amd-master.yaml"])
    expected = expand_points(master, KEY, seq="8k1k")
    jobs = _jobs(env["factory"], req.sweep.id)
    assert [j.result_name for j in jobs] == [p.result_name for p in expected]
    assert req.created and req.plan.capacity == 4 and req.plan.capacity_source == "settings"
    assert len(expected) == 28 and ": 28 point(s), conc " in req.reply
    # conc 1 at 8k1k: three points (tp8, tp8 ep8, tp4) share one dispatch; test-config selects
    # by key and conc only, so that dispatch also runs the key's three 1k1k points: six slots
    conc1 = [j for j in jobs if j.conc == 1]
    assert (
        len(conc1) == 3
        and {j.group_key for j in conc1} == {"conc=1"}
        and {j.slots for j in conc1} == {len([p for p in expand_points(master, KEY) if p.conc == 1])} == {6}
    )


def test_replay_converges_and_new_request_supersedes(env: dict[str, Any]) -> None:
    gh = FakeGitHub()
    first = _request(env["factory"], gh, filters=SweepFilters(seq="8k1k", conc=(32, 64)))
    again = _request(env["factory"], gh, filters=SweepFilters(seq="8k1k", conc=(32, 64)))
    assert again.sweep.id == first.sweep.id and not again.created
    other = _request(env["factory"], gh, filters=SweepFilters(seq="8k1k", conc_range=(4, 8)))
    assert other.superseded == [first.sweep.id]
    with env["factory"]() as s:
        old = s.get(Sweep, first.sweep.id)
        assert old is not None and old.state == SweepState.SUPERSEDED and old.superseded_by == other.sweep.id
    assert {j.state for j in _jobs(env["factory"], first.sweep.id)} == {JobState.CANCELLED}
    assert {j.conc for j in _jobs(env["factory"], other.sweep.id)} == {4, 8}


def test_bad_requests_say_the_fix(env: dict[str, Any]) -> None:
    gh = FakeGitHub()
    with pytest.raises(SweepError, match="did you mean"), env["factory"]() as s:
        request_sweep(
            s,
            FakeRequest(gh),
            repo=REPO,
            pr_number=1,
            config_key="minimaxm3-fp4-mi355x-vlm",
            requested_by="maint",
            reason="command",
        )
    with pytest.raises(SweepError, match="conc"):
        _request(env["factory"], gh, filters=SweepFilters(seq="8k1k", conc_range=(3000, 4000)))
    with pytest.raises(SweepError, match="priority"):
        _request(env["factory"], gh, priority="urgent")


def test_tick_never_exceeds_capacity_and_frees_on_finish(env: dict[str, Any]) -> None:
    from app.settings import reset_settings_cache

    env["mp"].setenv("SWEEPBOT_RUNNER_CAPACITY", "mi355x=11")
    # the strict hold (never more in flight than runners); the default auto overcommit lets a group
    # out at one free runner: tests/flows/test_run_holds.py
    env["mp"].setenv("SWEEPBOT_RUNNER_OVERCOMMIT", "0")
    reset_settings_cache()
    gh = FakeGitHub()
    req = _request(env["factory"], gh, filters=SweepFilters(seq="8k1k"))
    res = tick(env["factory"], lambda s: FakeTick(gh))
    assert res.dispatched_runs >= 1 and _inflight(env["factory"]) <= 11
    # largest conc first: conc 512 and 256 (5 points each over both seq-lens) take 10 of the 11
    # runners, and no later group fits the last one: both hold eval points of the generator's
    # selection (512 for both dp-attn groups, 256 the dp-attn one's median), but their eval jobs
    # would be `eval /`'s, which GitHub never expands in the real e2e-tests.yml (get-jobs never
    # sets EVALS), so they hold no runner. The command is the repo CLI's test-config for the key's
    # own master file.
    cmd = f"test-config --config-files .github/configs/amd-master.yaml --config-keys {KEY} --conc"
    assert [d["inputs"]["generate-cli-command"] for d in gh.dispatches] == [
        f"{cmd} 512",
        f"{cmd} 256",
    ]
    assert gh.dispatches[0]["ref"] == "recipe-branch" and gh.dispatches[0]["inputs"]["ref"] == "a" * 40
    with env["factory"]() as s:
        slots = {j.conc: j.slots for j in _jobs(env["factory"], req.sweep.id) if j.conc in (256, 512)}
    assert slots == {512: 5, 256: 5} and _inflight(env["factory"]) == 10
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 0
    with env["factory"]() as s:
        for job in _jobs(env["factory"], req.sweep.id):
            if job.state == JobState.DISPATCHED:
                finish_job(s, job.id, JobState.SUCCEEDED)
        s.commit()
    # the filtered-out 1k1k points of those runs hold their runners until GitHub says the runs completed
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 0
    runs_complete(env["factory"], gh, req.sweep.id)
    tick(env["factory"], lambda s: FakeTick(gh))
    assert len(gh.dispatches) >= 3 and _inflight(env["factory"]) <= 11


def test_a_runner_is_free_when_github_says_its_job_finished_not_when_collected(env: dict[str, Any]) -> None:
    """Issue 19: each workflow job that completes frees its runner at once, while collection of its
    result runs alongside (the job stays `running` until the result is stored)."""
    from app.settings import reset_settings_cache

    env["mp"].setenv("SWEEPBOT_RUNNER_CAPACITY", "mi355x=6")
    reset_settings_cache()
    gh = FakeGitHub()
    env["mp"].setattr(HandlerContext, "gateway", lambda self, actor="sweepbot": FakeRunTracking(gh))
    # every point of the key, no eval job: a dispatch's jobs are all ours
    req = _request(env["factory"], gh, filters=SweepFilters(evals="none"))
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 2  # conc 1024 + 512: 1 + 5
    assert _inflight(env["factory"]) == 6
    runs = [d["run_id"] for d in gh.dispatches]
    by_run = {r: [j for j in _jobs(env["factory"], req.sweep.id) if j.run_id == r] for r in runs}
    assert [len(by_run[r]) for r in runs] == [1, 5]
    for run_id in runs:  # the run's job list, in matrix order: several points share a job name
        gh.run_jobs[run_id] = [_wf_job(gh, run_id, j, "success") for j in by_run[run_id]]
    done = gh.run_jobs[runs[0]] + gh.run_jobs[runs[1]][:4]  # one job of conc 512 still runs
    after: list[Any] = []
    with env["factory"]() as s:
        for wf in done:
            ctx = _ctx(s, "workflow_job", {"action": "completed", "workflow_job": wf})
            on_workflow_job(ctx)
            after += ctx.after_commit
        s.commit()
    for callback in after:
        callback()
    finished = [j.id for j in by_run[runs[0]] + by_run[runs[1]][:4]]
    states = {j.id: (j.state, j.run_conclusion) for j in _jobs(env["factory"], req.sweep.id)}
    assert {states[i] for i in finished} == {(JobState.RUNNING, "success")}  # not collected yet
    assert _inflight(env["factory"]) == 1
    # Five runners are free: the next dispatch (conc 256, five slots) goes out now.
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 1
    assert gh.dispatches[-1]["inputs"]["generate-cli-command"].split("--conc ")[1].startswith("256")
    assert _inflight(env["factory"]) == 6
    # Collection was only asked for, alongside; storing the results frees no further runner. (A
    # point that also runs an eval waits for its run to complete: tests/flows/test_eval_collect.py.)
    collects = sorted(args[0] for task, args in env["enqueued"] if task == "sweepbot.collect_job")
    assert collects == sorted(finished)
    with env["factory"]() as s:
        for job_id in finished:
            finish_job(s, job_id, JobState.SUCCEEDED)
        s.commit()
    assert _inflight(env["factory"]) == 6


def test_capacity_from_runners_yaml_when_not_configured(env: dict[str, Any]) -> None:
    from app.settings import reset_settings_cache

    env["mp"].delenv("SWEEPBOT_RUNNER_CAPACITY")
    env["mp"].setenv("SWEEPBOT_RUNNER_OVERCOMMIT", "0")  # strict: what is in flight shows the capacity
    reset_settings_cache()
    gh = FakeGitHub()
    req = _request(env["factory"], gh, filters=SweepFilters(seq="8k1k"))
    assert req.plan.capacity == 9 and "runners.yaml" in req.plan.capacity_source
    tick(env["factory"], lambda s: FakeTick(gh))
    assert 0 < _inflight(env["factory"]) <= 9


def test_paused_label_releases_nothing(env: dict[str, Any]) -> None:
    gh = FakeGitHub()
    _request(env["factory"], gh, filters=SweepFilters(seq="8k1k"))
    with env["factory"]() as s:
        set_label_paused(s, "mi355x", True, actor="ops")
        s.commit()
    res = tick(env["factory"], lambda s: FakeTick(gh))
    assert gh.dispatches == [] and "mi355x" in res.skipped_labels
    with env["factory"]() as s:
        set_label_paused(s, "mi355x", False, actor="ops")
        s.commit()
    # conc 512 needs 5 runners of the 4: wider than the label, it runs alone
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 1


def test_priority_then_round_robin(env: dict[str, Any]) -> None:
    from app.settings import reset_settings_cache

    env["mp"].setenv("SWEEPBOT_RUNNER_CAPACITY", "mi355x=3")
    reset_settings_cache()
    gh = FakeGitHub()
    filters = SweepFilters(seq="8k1k", conc=(1, 2, 4))
    a = _request(env["factory"], gh, pr=1, filters=filters)
    b = _request(env["factory"], gh, pr=2, filters=filters)
    c = _request(env["factory"], gh, pr=3, filters=filters, priority="high")
    tick(env["factory"], lambda s: FakeTick(gh))
    # capacity 3 = one 3-slot dispatch: the high-priority sweep goes first
    assert [d["inputs"]["test-name"].split("-")[1] for d in gh.dispatches] == [str(c.sweep.id)]
    order = []
    for _ in range(8):
        with env["factory"]() as s:
            for job in s.scalars(select(SweepJob).where(SweepJob.state == JobState.DISPATCHED)).all():
                finish_job(s, job.id, JobState.SUCCEEDED)
            s.commit()
        for sweep in (a, b, c):
            runs_complete(env["factory"], gh, sweep.sweep.id)
        before = len(gh.dispatches)
        tick(env["factory"], lambda s: FakeTick(gh))
        order += [int(d["inputs"]["test-name"].split("-")[1]) for d in gh.dispatches[before:]]
    # c drains first (priority), then a and b alternate
    assert order[:2] == [c.sweep.id, c.sweep.id]
    assert order[2:8] == [a.sweep.id, b.sweep.id] * 3


def test_cancel_leaves_no_queued_or_running_job(env: dict[str, Any]) -> None:
    gh = FakeGitHub()
    req = _request(env["factory"], gh, filters=SweepFilters(seq="8k1k"))
    tick(env["factory"], lambda s: FakeTick(gh))
    with env["factory"]() as s:
        cancel_sweep(s, FakeCancel(gh), req.sweep.id, actor="maint", reason="no longer needed")
        s.commit()
    states = {j.state for j in _jobs(env["factory"], req.sweep.id)}
    assert states == {JobState.CANCELLED}
    assert gh.cancelled == [d["run_id"] for d in gh.dispatches]
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 0


def test_fork_waits_for_approval_and_a_new_push_voids_it(env: dict[str, Any]) -> None:
    gh = FakeGitHub(fork=True)
    req = _request(env["factory"], gh, filters=SweepFilters(seq="8k1k", conc=(64,)))
    assert req.sweep.state == SweepState.AWAITING_APPROVAL and "/sweep approve" in req.reply
    tick(env["factory"], lambda s: FakeTick(gh))
    assert gh.dispatches == []
    with env["factory"]() as s:
        refused = approve_pr(s, FakeApproval(gh), repo=REPO, pr_number=7, head_sha=None, approver="outsider")
        assert "needs write" in refused
        ok = approve_pr(s, FakeApproval(gh), repo=REPO, pr_number=7, head_sha=None, approver="maint")
        s.commit()
    assert "Approved" in ok
    gh.head_sha = SHA2  # a push lands after the approval, before the dispatch
    res = tick(env["factory"], lambda s: FakeTick(gh))
    assert gh.dispatches == [] and res.voided == 1
    with env["factory"]() as s:
        sweep = s.get(Sweep, req.sweep.id)
        assert (
            sweep is not None and sweep.state == SweepState.AWAITING_APPROVAL and sweep.approved_sha is None
        )
        stale = approve_pr(s, FakeApproval(gh), repo=REPO, pr_number=7, head_sha="a" * 40, approver="maint")
        assert "head is now" in stale
    assert {j.state for j in _jobs(env["factory"], req.sweep.id)} == {JobState.QUEUED}


def test_fork_dispatch_after_approval_uses_base_branch(env: dict[str, Any]) -> None:
    gh = FakeGitHub(fork=True)
    _request(env["factory"], gh, filters=SweepFilters(seq="8k1k", conc=(64,)))
    with env["factory"]() as s:
        approve_pr(s, FakeApproval(gh), repo=REPO, pr_number=7, head_sha="a" * 40, approver="maint")
        s.commit()
    tick(env["factory"], lambda s: FakeTick(gh))
    assert len(gh.dispatches) == 1 and gh.dispatches[0]["ref"] == "main"
    assert gh.dispatches[0]["inputs"]["ref"] == "a" * 40


def test_dispatch_falls_back_to_the_run_name(env: dict[str, Any]) -> None:
    gh = FakeGitHub(return_details=False)
    req = _request(env["factory"], gh, filters=SweepFilters(seq="8k1k", conc=(64,)))
    tick(env["factory"], lambda s: FakeTick(gh))
    jobs = _jobs(env["factory"], req.sweep.id)
    assert {j.run_id for j in jobs} == {gh.dispatches[0]["run_id"]}
    assert jobs[0].run_name == f"sweepbot-{req.sweep.id}-{jobs[0].id}"


def test_reused_point_is_never_dispatched(env: dict[str, Any]) -> None:
    gh = FakeGitHub()

    class Stored:
        id = 1
        run_url = "https://github.test/run/1"

    reused_name: list[str] = []

    def fake_reusable(session: Session, *, image: str, fingerprint: str, result_name: str, **_: Any) -> Any:
        return Stored() if reused_name and result_name == reused_name[0] else None

    env["mp"].setattr(reuse, "reusable_for_point", fake_reusable)
    master = parse_master(bench_files()[".github/configs/amd-master.yaml"])
    point = next(p for p in expand_points(master, KEY, seq="8k1k", conc=[256]))
    reused_name.append(point.result_name)
    req = _request(env["factory"], gh, filters=SweepFilters(seq="8k1k", conc=(256,)))
    assert req.plan.reused == 1
    jobs = {j.result_name: j for j in _jobs(env["factory"], req.sweep.id)}
    assert jobs[point.result_name].state == JobState.REUSED
    assert jobs[point.result_name].result_url == "https://github.test/run/1"


_wf_ids = iter(range(50_000, 60_000))


def _wf_job(
    gh: FakeGitHub,
    run_id: int,
    job: SweepJob,
    conclusion: str | None,
    status: str = "completed",
    lost: bool = False,
) -> dict[str, Any]:
    """A workflow_job as GitHub sends it: the real job name; a failure's reason in annotations."""
    from sim.runs import job_name

    job_id = next(_wf_ids)
    steps = [{"name": "Launch job script", "conclusion": "cancelled" if lost else conclusion}]
    steps.append({"name": "Complete job", "conclusion": "success"})
    if conclusion == "failure":
        message = (
            "The self-hosted runner: mi355x-amds_01 lost communication with the server. Verify the machine "
            "is running and has a healthy network connection."
            if lost
            else "Process completed with exit code 1."
        )
        gh.annotations[job_id] = [{"annotation_level": "failure", "message": message, "path": ".github"}]
    return {
        "id": job_id,
        "run_id": run_id,
        "name": job_name("single-node /", job.point),
        "status": status,
        "conclusion": conclusion,
        "steps": steps,
        "runner_name": "mi355x-amds_01",
        "html_url": "https://github.test/job",
    }


def _listed(
    gh: FakeGitHub, run_id: int, jobs: list[SweepJob], own: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """A run's jobs as GitHub lists them (matrix order) for an 8k1k sweep of KEY: the run also
    runs the key's 1k1k points at that conc (test-config selects by conc only), first and under
    the same names as ``jobs`` (e2e-tests.yml's names carry no seq-len); then ``own``, ours."""
    return [_wf_job(gh, run_id, j, None, "queued") for j in jobs] + own


def _ctx(session: Session, event: str, payload: dict[str, Any]) -> HandlerContext:
    return HandlerContext(session=session, event=Event("d1", event, payload.get("action"), payload))


def deliver(factory: sessionmaker[Session], event: str, payload: dict[str, Any]) -> None:
    """A ``workflow_job`` or ``workflow_run`` delivery through its handler, committed, then what the
    handler left to run after the commit (an event no job of ours takes is skipped, as ingest does)."""
    with factory() as s:
        handler = on_workflow_job if event == "workflow_job" else on_workflow_run
        ctx = _ctx(s, event, payload)
        with contextlib.suppress(HandlerSkipped):
            handler(ctx)
        s.commit()
    for callback in ctx.after_commit:
        callback()


def test_tracking_success_infra_retry_and_benchmark_failure(env: dict[str, Any]) -> None:
    env["mp"].setenv("SWEEPBOT_INFRA_RETRY_LIMIT", "1")
    # strict hold: the retry waits until the run's filtered-out points free their runners (with the
    # default auto overcommit it would go out at the first free runner, its jobs waiting on GitHub)
    env["mp"].setenv("SWEEPBOT_RUNNER_OVERCOMMIT", "0")
    from app.settings import reset_settings_cache

    reset_settings_cache()
    gh = FakeGitHub()
    env["mp"].setattr(HandlerContext, "gateway", lambda self, actor="sweepbot": FakeRunTracking(gh))
    req = _request(env["factory"], gh, filters=SweepFilters(seq="8k1k", conc=(1,)))
    tick(env["factory"], lambda s: FakeTick(gh))
    jobs = _jobs(env["factory"], req.sweep.id)
    run_id = gh.dispatches[0]["run_id"]
    ok, lost, bad = jobs
    started = _wf_job(gh, run_id, ok, None, "in_progress")
    finished = [
        {**started, "status": "completed", "conclusion": "success"},
        _wf_job(gh, run_id, lost, "failure", lost=True),
        _wf_job(gh, run_id, bad, "failure"),
    ]
    gh.run_jobs[run_id] = _listed(gh, run_id, jobs, finished)
    with env["factory"]() as s:
        for payload in (
            {"action": "in_progress", "workflow_job": started},
            *({"action": "completed", "workflow_job": wf} for wf in finished),
        ):
            ctx = _ctx(s, "workflow_job", payload)
            on_workflow_job(ctx)
            for cb in ctx.after_commit:
                cb()
        s.commit()
    by_id = {j.id: j for j in _jobs(env["factory"], req.sweep.id)}
    assert by_id[ok.id].state == JobState.RUNNING and by_id[ok.id].run_conclusion == "success"
    assert ("sweepbot.collect_job", (ok.id,)) in env["enqueued"]
    assert by_id[lost.id].state == JobState.QUEUED and "lost communication" in (by_id[lost.id].reason or "")
    assert by_id[bad.id].state == JobState.FAILED and (by_id[bad.id].reason or "").startswith(
        "benchmark failure: failed in step 'Launch job script': Process completed with exit code 1."
    )
    # the succeeded job only waits for collection, so its runner is free; the run's filtered-out
    # 1k1k points hold theirs until GitHub says the run completed: then the retry goes out
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 0
    runs_complete(env["factory"], gh, req.sweep.id, conclusion="failure")
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 1
    with env["factory"]() as s:
        finish_job(s, ok.id, JobState.SUCCEEDED, result_url="r1")
        s.commit()
    retry_run = gh.dispatches[-1]["run_id"]
    assert retry_run != run_id
    # the retry's run holds the whole conc again: the 1k1k points, then ok, lost and bad
    lost_again = _wf_job(gh, retry_run, lost, "failure", lost=True)
    siblings = [_wf_job(gh, retry_run, j, None, "queued") for j in (ok, bad)]
    gh.run_jobs[retry_run] = _listed(gh, retry_run, jobs, [siblings[0], lost_again, siblings[1]])
    with env["factory"]() as s:
        on_workflow_job(_ctx(s, "workflow_job", {"action": "completed", "workflow_job": lost_again}))
        s.commit()
        sweep = s.get(Sweep, req.sweep.id)
        assert sweep is not None and sweep.state == SweepState.DONE
    assert {j.id: j.state for j in _jobs(env["factory"], req.sweep.id)}[lost.id] == JobState.FAILED


def test_run_level_startup_failure_is_retried(env: dict[str, Any]) -> None:
    gh = FakeGitHub()
    env["mp"].setattr(HandlerContext, "gateway", lambda self, actor="sweepbot": FakeRunTracking(gh))
    req = _request(env["factory"], gh, filters=SweepFilters(seq="8k1k", conc=(256,)))
    tick(env["factory"], lambda s: FakeTick(gh))
    run_id = gh.dispatches[0]["run_id"]
    with env["factory"]() as s:
        on_workflow_run(
            _ctx(
                s,
                "workflow_run",
                {
                    "action": "completed",
                    "workflow_run": {
                        "id": run_id,
                        "name": gh.runs[run_id]["name"],
                        "status": "completed",
                        "conclusion": "startup_failure",
                    },
                },
            )
        )
        s.commit()
    assert {j.state for j in _jobs(env["factory"], req.sweep.id)} == {JobState.QUEUED}


def test_repair_adopts_runs_and_fails_timeouts(env: dict[str, Any]) -> None:
    gh = FakeGitHub()
    req = _request(env["factory"], gh, filters=SweepFilters(seq="8k1k", conc=(256, 512)))
    tick(env["factory"], lambda s: FakeTick(gh))
    first = next(j for j in _jobs(env["factory"], req.sweep.id) if j.run_name)
    # a crash lost the recorded run id (the job's and the followed run's: one transaction writes
    # both, app.flows.scheduler.dispatch._record_run); the run itself is in progress
    with env["factory"]() as s:
        job = s.get(SweepJob, first.id)
        assert job is not None
        s.execute(delete(DispatchRun).where(DispatchRun.run_id == job.run_id))
        job.run_id = None
        s.commit()
    run_id = next(d["run_id"] for d in gh.dispatches if d["inputs"]["test-name"] == first.run_name)
    gh.runs[run_id]["status"] = "in_progress"
    res = repair_jobs(env["factory"], lambda s: FakeRepair(gh))
    adopted = next(j for j in _jobs(env["factory"], req.sweep.id) if j.id == first.id)
    assert res.updated >= 1 and adopted.run_id == run_id and adopted.state == JobState.RUNNING
    # stuck past the timeout: failed with the reason, run cancelled
    with env["factory"]() as s:
        job = s.get(SweepJob, first.id)
        assert job is not None
        job.dispatched_at = datetime.now(UTC) - timedelta(hours=7)
        s.commit()
    res = repair_jobs(env["factory"], lambda s: FakeRepair(gh))
    timed = next(j for j in _jobs(env["factory"], req.sweep.id) if j.id == first.id)
    assert res.timed_out == 1 and timed.state == JobState.FAILED and "timed out" in (timed.reason or "")
    assert run_id in gh.cancelled


def test_push_supersedes_and_cancels_runs(env: dict[str, Any]) -> None:
    gh = FakeGitHub()
    env["mp"].setattr(HandlerContext, "gateway", lambda self, actor="sweepbot": FakeRunTracking(gh))
    req = _request(env["factory"], gh, filters=SweepFilters(seq="8k1k"))
    tick(env["factory"], lambda s: FakeTick(gh))
    with env["factory"]() as s:
        on_pull_request_synchronize(
            _ctx(
                s,
                "pull_request",
                {
                    "action": "synchronize",
                    "repository": {"full_name": REPO},
                    "sender": {"login": "carol"},
                    "pull_request": {"number": 7, "head": {"sha": SHA2}},
                },
            )
        )
        s.commit()
        sweep = s.get(Sweep, req.sweep.id)
        assert sweep is not None and sweep.state == SweepState.SUPERSEDED
    assert {j.state for j in _jobs(env["factory"], req.sweep.id)} == {JobState.CANCELLED}
    assert gh.cancelled == [d["run_id"] for d in gh.dispatches]


def test_retry_and_summary(env: dict[str, Any]) -> None:
    gh = FakeGitHub()
    req = _request(env["factory"], gh, filters=SweepFilters(seq="8k1k", conc=(512,)))
    with env["factory"]() as s:
        cancel_sweep(s, FakeCancel(gh), req.sweep.id, actor="maint", reason="oops")
        s.commit()
    with env["factory"]() as s:
        retry_sweep(s, req.sweep.id, actor="maint")
        s.commit()
        summary = sweep_summary(s, req.sweep.id)
    assert summary["state"] == SweepState.ACTIVE and summary["counts"] == {"queued": summary["total"]}
    with env["factory"]() as s, pytest.raises(SweepError, match="only failed or cancelled"):
        retry_job(s, summary["jobs"][0]["id"], actor="maint")


def test_dispatch_template_is_validated(env: dict[str, Any]) -> None:
    from app.core.sweepspec import DispatchTemplateError
    from app.settings import get_settings, reset_settings_cache

    settings = get_settings()
    render = partial(
        render_dispatch,
        seq="8k1k",
        conc=64,
        tp=4,
        head_sha="a" * 40,
        head_ref="b",
        base_ref="main",
        run_name="sweepbot-1-2",
        pr=1,
    )
    with pytest.raises(SweepError, match="config key"):
        render(settings, key="k; rm -rf /")
    env["mp"].setenv("SWEEPBOT_DISPATCH_INPUTS", '{"cmd": "{key} {secret}"}')
    reset_settings_cache()
    with pytest.raises(DispatchTemplateError, match="secret"):
        render(get_settings(), key="k")
    env["mp"].setenv(
        "SWEEPBOT_DISPATCH_INPUTS", '{"cmd": "--conc {conc} --tp {tp}", "test-name": "{run_name}"}'
    )
    reset_settings_cache()
    assert group_fields(get_settings()) == ("conc", "tp")
    env["mp"].setenv(
        "SWEEPBOT_DISPATCH_INPUTS", '{"cmd": "--seq {seq} --conc {conc}", "test-name": "{run_name}"}'
    )
    reset_settings_cache()
    assert group_fields(get_settings()) == ("seq", "conc")
    # the default template is the repo CLI's test-config, so a bad command is refused before dispatch
    env["mp"].setenv(
        "SWEEPBOT_DISPATCH_INPUTS",
        '{"generate-cli-command": "test-config --config-keys {key} --seq-lens {seq} --conc {conc}"}',
    )
    reset_settings_cache()
    with pytest.raises(SweepError, match="--config-files"):
        render(get_settings(), key="k")


def test_stale_claim_is_not_dispatched_after_cancel_retry_and_reclaim(env: dict[str, Any]) -> None:
    # Tick A claims and commits, then stalls before its GitHub call. Meanwhile the sweep is
    # cancelled, retried and claimed again by tick B, which dispatches. A's late dispatch must
    # see that the jobs now carry B's claim and send nothing: one run per job.
    from app.settings import get_settings

    gh = FakeGitHub()
    req = _request(env["factory"], gh, filters=SweepFilters(seq="8k1k", conc=(64,)))
    label = _jobs(env["factory"], req.sweep.id)[0].runner_label
    runnerlabels.ensure_label(env["factory"], label)
    stale = TickResult()
    with env["factory"]() as s:
        claims = tick_flow._claim_label(s, FakeTick(gh), label, REPO, stale)
        s.commit()
    assert claims
    with env["factory"]() as s:
        cancel_sweep(s, FakeCancel(gh), req.sweep.id, actor="maint", reason="oops")
        retry_sweep(s, req.sweep.id, actor="maint")
        s.commit()
    fresh = tick(env["factory"], lambda s: FakeTick(gh))
    assert fresh.dispatched_runs == len(claims) and len(gh.dispatches) == len(claims)
    for claim in claims:
        with env["factory"]() as s:
            dispatch.dispatch_claim(s, FakeDispatch(gh), claim, get_settings(), stale)
            s.commit()
    assert len(gh.dispatches) == len(claims) and stale.dispatched_runs == 0


def test_eval_modes_shape_the_sweep_and_its_dispatch(env: dict[str, Any]) -> None:
    gh = FakeGitHub()
    default = _request(env["factory"], gh, filters=SweepFilters(seq="8k1k"))
    marks = {(j.tp, j.conc) for j in _jobs(env["factory"], default.sweep.id) if j.point["run-eval"]}
    # the generator's picks per dispatch: every 8k1k row at 128, 256 and 512 (the dp-attn groups'
    # highest and median of 16 and up; a dispatch's command marks its whole conc slice)
    assert marks == {(4, 128), (8, 128), (8, 256), (8, 512)}
    only = _request(env["factory"], gh, filters=SweepFilters(seq="8k1k", evals="only"))
    assert only.sweep.id != default.sweep.id  # another eval mode is another sweep
    jobs = _jobs(env["factory"], only.sweep.id)
    assert {(j.tp, j.conc) for j in jobs} == marks
    assert all(j.point["eval-only"] for j in jobs)
    tick(env["factory"], lambda s: FakeTick(gh))
    assert gh.dispatches and all(
        d["inputs"]["generate-cli-command"].endswith(" --evals-only") for d in gh.dispatches
    )
    every = _request(env["factory"], gh, filters=SweepFilters(seq="8k1k", evals="all"))
    assert len(_jobs(env["factory"], every.sweep.id)) == 28
    assert SweepFilters(evals="all").describe() == "evals=all"


def test_a_throughput_result_alone_is_not_reused_for_an_eval_point(env: dict[str, Any]) -> None:
    from app.models.results import EvalResult, Result

    gh = FakeGitHub()
    first = _request(env["factory"], gh, filters=SweepFilters(seq="8k1k"))
    jobs = _jobs(env["factory"], first.sweep.id)
    with env["factory"]() as s:
        for j in jobs:  # every point measured for throughput, none evaluated
            s.add(
                Result(
                    result_name=j.result_name,
                    config_key=KEY,
                    image=first.sweep.image,
                    fingerprint=first.sweep.fingerprint,
                    conc=j.conc,
                    tp=j.tp,
                    pp=1,
                    ep=1,
                    schema="raw",
                )
            )
        s.commit()
    again = _request(env["factory"], gh, pr=8, filters=SweepFilters(seq="8k1k"))
    states = {(j.tp, j.conc): (j.state, j.point["run-eval"]) for j in _jobs(env["factory"], again.sweep.id)}
    assert all(st == JobState.REUSED for st, ev in states.values() if not ev)
    assert all(st == JobState.QUEUED for st, ev in states.values() if ev)  # the eval still has to run
    only = _request(env["factory"], gh, pr=9, filters=SweepFilters(seq="8k1k", evals="only"))
    assert {j.state for j in _jobs(env["factory"], only.sweep.id)} == {JobState.QUEUED}
    eval_job = next(j for j in jobs if j.point["run-eval"])
    with env["factory"]() as s:
        s.add(
            EvalResult(
                result_name=eval_job.result_name,
                config_key=KEY,
                image=first.sweep.image,
                fingerprint=first.sweep.fingerprint,
                conc=eval_job.conc,
                tp=eval_job.tp,
                task="gsm8k",
                metric="exact_match",
                filter="strict-match",
                score=0.94,
                stderr=0.0066,
                n=1319,
            )
        )
        s.commit()
    later = _request(env["factory"], gh, pr=10, filters=SweepFilters(seq="8k1k", evals="only"))
    reused = [j.result_name for j in _jobs(env["factory"], later.sweep.id) if j.state == JobState.REUSED]
    assert reused == [eval_job.result_name]


def test_with_the_label_contract_on_every_dispatch_goes_out_when_asked(env: dict[str, Any]) -> None:
    """PRIORITY_SCHEDULER_ENABLED=true: no dispatch-time hold (the controller places the jobs at
    GitHub); without it, the same sweep is held to the label's capacity."""
    from app.flows.scheduler.runner_control import reset_contract_cache
    from app.settings import reset_settings_cache

    env["mp"].setenv("SWEEPBOT_RUNNER_OVERCOMMIT", "0")
    reset_settings_cache()
    reset_contract_cache()
    held = FakeGitHub()
    first = _request(env["factory"], held, filters=SweepFilters(seq="8k1k"))
    tick(env["factory"], lambda s: FakeTick(held))
    assert [j for j in _jobs(env["factory"], first.sweep.id) if j.state == JobState.QUEUED], "held"
    reset_contract_cache()
    on = FakeGitHub()
    on.variables["PRIORITY_SCHEDULER_ENABLED"] = "true"
    req = _request(env["factory"], on, pr=8, filters=SweepFilters(seq="8k1k"))
    tick(env["factory"], lambda s: FakeTick(on))
    reset_contract_cache()
    queued = [j for j in _jobs(env["factory"], req.sweep.id) if j.state == JobState.QUEUED]
    assert on.dispatches and not queued, "every point of the sweep went out at once"
