"""A point that also runs an eval is collected when its run completes, not when its throughput job does.

e2e-tests.yml (tests/fixtures/inferencex/workflows, the real file) runs a `run-eval` row as two
jobs: `single-node /` with `run-eval: false` (throughput only) and `eval /` with `eval-only: true`,
which uploads the `eval_` artifact. Collecting at the throughput job's success raced the eval job:
the scale bench's 8k1k eval points failed with "no artifact eval_... in the run" whenever the eval
job ended later. The run completes only when both jobs have.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.recipes import expand_points, parse_master
from app.core.routing import HandlerContext
from app.core.sweepspec import SweepFilters
from app.flows.repo.bench_repo import clear_capacity_cache
from app.flows.scheduler.repair import repair_jobs
from app.flows.scheduler.tick import tick
from app.flows.sweeps import ring
from app.flows.sweeps.request import request_sweep
from app.models.sweeps import JobState, Sweep, SweepJob
from tests.flows.test_scheduler import deliver
from tests.sweep_fakes import (
    KEY,
    REPO,
    FakeGitHub,
    FakeRepair,
    FakeRequest,
    FakeRunTracking,
    FakeTick,
    bench_files,
)

ENV = dict[str, Any]


@pytest.fixture
def env(db_session: Session, settings_env: pytest.MonkeyPatch) -> Iterator[ENV]:
    from app.db import session_factory
    from app.settings import reset_settings_cache

    settings_env.setenv("SWEEPBOT_RUNNER_CAPACITY", "mi355x=16")
    reset_settings_cache()
    clear_capacity_cache()
    enqueued: list[tuple[str, tuple[Any, ...]]] = []
    settings_env.setattr(ring, "enqueue", lambda task, *args: enqueued.append((task, args)))
    gh = FakeGitHub()
    settings_env.setattr(HandlerContext, "gateway", lambda self, actor="sweepbot": FakeRunTracking(gh))
    yield {"factory": session_factory(), "enqueued": enqueued, "gh": gh}


def _success(run_id: int, job: SweepJob, caller: str) -> dict[str, Any]:
    from sim.runs import job_name

    point = dict(job.point) | ({"run-eval": True, "eval-only": True} if caller == "eval /" else {})
    return {
        "action": "completed",
        "workflow_job": {
            "id": hash((run_id, job.id, caller)) % 10**9,
            "run_id": run_id,
            "name": job_name(caller, point),
            "status": "completed",
            "conclusion": "success",
            "steps": [],
            "runner_name": "mi355x-amds_01",
        },
    }


def _listed(run_id: int, jobs: list[SweepJob]) -> list[dict[str, Any]]:
    """The run's jobs as GitHub lists them (matrix order): the key's 1k1k points at the conc run
    too (test-config selects by conc only), first and under the same names as their 8k1k ones;
    then ours, then the eval jobs."""
    from sim.runs import job_name

    master = parse_master(bench_files()[".github/configs/amd-master.yaml"])
    twins = [
        {
            "id": 10**9 + i,
            "run_id": run_id,
            "name": job_name("single-node /", p.to_json()),
            "status": "queued",
        }
        for i, p in enumerate(expand_points(master, KEY, seq="1k1k", conc=[jobs[0].conc]))
        if p.result_name not in {j.result_name for j in jobs}  # unless the sweep has them too
    ]
    ours = [_success(run_id, j, "single-node /")["workflow_job"] for j in jobs]
    evals = [_success(run_id, j, "eval /")["workflow_job"] for j in jobs if j.point.get("run-eval")]
    return twins + ours + evals


def _collects(env: ENV) -> set[int]:
    return {int(args[0]) for task, args in env["enqueued"] if task == "sweepbot.collect_job"}


def _one_evaluated_point_done(env: ENV) -> tuple[SweepJob, int]:
    """A sweep's eval point and a plain point of one dispatch whose throughput jobs succeeded:
    the plain one is collected at once; the evaluated one (and its run id) waits."""
    factory, gh = env["factory"], env["gh"]
    with factory() as s:
        req = request_sweep(
            s,
            FakeRequest(gh),
            repo=REPO,
            pr_number=7,
            config_key=KEY,
            requested_by="maint",
            reason="command",
            filters=SweepFilters(),
        )
        s.commit()
    with factory() as s:
        jobs = list(s.scalars(select(SweepJob).where(SweepJob.sweep_id == req.sweep.id)).all())
    # the generator marks every 8k1k row of a dispatch's conc (groups span TPs): the plain point of
    # that dispatch is a 1k1k one (1k1k never runs an eval)
    evaluated = next(j for j in jobs if j.point.get("run-eval"))
    plain = next(j for j in jobs if j.conc == evaluated.conc and not j.point.get("run-eval"))
    tick(factory, lambda s: FakeTick(gh))
    with factory() as s:
        sent = s.get(SweepJob, evaluated.id)
        assert sent is not None and sent.run_id is not None
        run_id = sent.run_id
    gh.runs[run_id] |= {"status": "in_progress"}
    gh.run_jobs[run_id] = _listed(run_id, [j for j in jobs if j.conc == evaluated.conc])
    for job in (evaluated, plain):
        deliver(factory, "workflow_job", _success(run_id, job, "single-node /"))
    assert plain.id in _collects(env) and evaluated.id not in _collects(env)
    with factory() as s:
        waiting = s.get(SweepJob, evaluated.id)
        assert (
            waiting is not None and waiting.state == JobState.RUNNING and waiting.run_conclusion == "success"
        )
    return evaluated, run_id


def test_an_evaluated_point_is_collected_once_its_run_completes(env: ENV) -> None:
    factory, gh = env["factory"], env["gh"]
    evaluated, run_id = _one_evaluated_point_done(env)
    repair_jobs(factory, lambda s: FakeRepair(gh))  # the repair poll does not collect it early either
    assert evaluated.id not in _collects(env)
    deliver(factory, "workflow_job", _success(run_id, evaluated, "eval /"))
    run = {"id": run_id, "name": gh.runs[run_id]["name"], "status": "completed", "conclusion": "success"}
    deliver(factory, "workflow_run", {"action": "completed", "workflow_run": run})
    assert evaluated.id in _collects(env)


def test_the_repair_poll_collects_it_when_the_run_completed_event_was_lost(env: ENV) -> None:
    factory, gh = env["factory"], env["gh"]
    evaluated, run_id = _one_evaluated_point_done(env)
    repair_jobs(factory, lambda s: FakeRepair(gh))
    assert evaluated.id not in _collects(env)  # its run is still in progress
    gh.runs[run_id] |= {"status": "completed", "conclusion": "success"}  # the webhook never came
    repair_jobs(factory, lambda s: FakeRepair(gh))
    assert evaluated.id in _collects(env)


def test_a_lost_runner_under_its_eval_job_retries_the_point(env: ENV) -> None:
    factory, gh = env["factory"], env["gh"]
    evaluated, run_id = _one_evaluated_point_done(env)
    throughput = _success(run_id, evaluated, "single-node /")["workflow_job"]
    lost = _success(run_id, evaluated, "eval /")["workflow_job"] | {"conclusion": "failure"}
    gh.annotations[lost["id"]] = [
        {
            "annotation_level": "failure",
            "message": "The self-hosted runner: mi355x-amds_08 lost communication with the server.",
            "path": ".github",
        }
    ]
    gh.run_jobs[run_id] = [throughput, lost]
    deliver(factory, "workflow_job", {"action": "completed", "workflow_job": lost})  # GitHub sends it
    run = {"id": run_id, "name": gh.runs[run_id]["name"], "status": "completed", "conclusion": "failure"}
    deliver(factory, "workflow_run", {"action": "completed", "workflow_run": run})
    with factory() as s:
        job = s.get(SweepJob, evaluated.id)
        assert job is not None and job.state == JobState.QUEUED  # retried, not failed for "no eval_ artifact"
        assert "infrastructure failure, retry 1/" in (job.reason or "") and "lost communication" in (
            job.reason or ""
        )
    assert evaluated.id not in _collects(env)


# The real e2e-tests.yml's `eval /` job never expands (get-jobs writes `eval-config=$EVALS` and
# never sets EVALS): GitHub lists it failed, without steps or runner, its reason in its annotation.
STRATEGY_ERROR = (
    "Error when evaluating 'strategy' for job 'test-sweep-evals'. .github/workflows/e2e-tests.yml "
    "(Line: 636, Col: 25): Error parsing fromJson,.github/workflows/e2e-tests.yml (Line: 636, Col: 25): "
    "Error reading JToken from JsonReader. Path '', line 0, position 0.,.github/workflows/e2e-tests.yml "
    "(Line: 636, Col: 25): Unexpected value ''"
)


def _unexpanded(gh: FakeGitHub, run_id: int, message: str = STRATEGY_ERROR) -> dict[str, Any]:
    job_id = run_id * 10 + 9
    job: dict[str, Any] = {
        "id": job_id,
        "run_id": run_id,
        "name": "eval /",
        "status": "completed",
        "conclusion": "failure",
        "steps": [],
        "labels": [],
        "runner_name": None,
    }
    gh.annotations[job_id] = [{"annotation_level": "failure", "message": message, "path": ".github"}]
    return job


def _completed(env: ENV, run_id: int, conclusion: str = "failure") -> None:
    gh = env["gh"]
    gh.runs[run_id] |= {"status": "completed", "conclusion": conclusion}
    run = {"id": run_id, "name": gh.runs[run_id]["name"], "status": "completed", "conclusion": conclusion}
    deliver(env["factory"], "workflow_run", {"action": "completed", "workflow_run": run})


def _fixed_workflow(gh: FakeGitHub) -> None:
    """e2e-tests.yml with `eval-config` written from a variable the script sets: nothing predicted."""
    path = ".github/workflows/e2e-tests.yml"
    gh.files[path] = gh.files[path].replace('echo "eval-config=$EVALS"', 'echo "eval-config=$SINGLE"')


def _run_without_eval_jobs(env: ENV) -> tuple[SweepJob, int]:
    """An evaluated point whose throughput succeeded, its run listing no `eval /` job but the
    caller GitHub failed unexpanded (with its annotation)."""
    factory, gh = env["factory"], env["gh"]
    evaluated, run_id = _one_evaluated_point_done(env)
    with factory() as s:
        group = s.scalars(select(SweepJob).where(SweepJob.run_id == run_id)).all()
        gh.run_jobs[run_id] = [_success(run_id, j, "single-node /")["workflow_job"] for j in group]
    for job in group:  # every throughput job of the dispatch (its 1k1k points too) reported success
        deliver(factory, "workflow_job", _success(run_id, job, "single-node /"))
    gh.run_jobs[run_id].append(_unexpanded(gh, run_id))
    return evaluated, run_id


def _eval_not_run(env: ENV, evaluated: SweepJob, run_id: int) -> str:
    """The run completes: the point is collected for its throughput, not redispatched; its reason."""
    factory, gh = env["factory"], env["gh"]
    dispatched = len(gh.dispatches)
    _completed(env, run_id)
    assert evaluated.id in _collects(env)  # its throughput result is collected as usual
    with factory() as s:
        job = s.get(SweepJob, evaluated.id)
        assert job is not None and job.state == JobState.RUNNING and job.attempts == 1
        reason = job.reason or ""
    assert reason.startswith("eval not run: e2e-tests.yml's `eval /` job could not evaluate its matrix")
    assert "never sets `EVALS`" in reason and "not retried" in reason and "/sweep evals=none" in reason
    tick(factory, lambda s: FakeTick(gh))
    assert _redispatched(gh, run_id, dispatched) == []  # its dispatch is not sent again
    return reason


def test_an_eval_job_the_workflow_file_foresaw_is_concluded_without_reading_github(env: ENV) -> None:
    """At 843c6254 the sweep's plan read e2e-tests.yml (`eval-config=$EVALS`, EVALS never set):
    the run's completion concludes its eval points with neither the job list nor an annotation."""
    gh = env["gh"]
    evaluated, run_id = _run_without_eval_jobs(env)
    with env["factory"]() as s:
        sweep = s.get(Sweep, evaluated.sweep_id)
        assert sweep is not None and sweep.unexpanded is not None
        assert sweep.unexpanded["callers"]["eval /"]["job"] == "test-sweep-evals"
    gh.job_lists.clear()
    reason = _eval_not_run(env, evaluated, run_id)
    assert gh.job_lists == [] and gh.annotation_reads == []
    assert "Read from .github/workflows/e2e-tests.yml at `aaaaaaaaaaaa` when the sweep was planned" in reason
    assert "GitHub said" not in reason


@pytest.mark.parametrize("why", ["fixed workflow", "stored before the prediction"])
def test_an_eval_job_nobody_foresaw_is_read_from_its_annotation(env: ENV, why: str) -> None:
    """The file at the ref predicted nothing (or the sweep predates the prediction), yet GitHub
    failed `eval /` unexpanded: the run's jobs and the caller's annotation are read, as before."""
    factory, gh = env["factory"], env["gh"]
    if why == "fixed workflow":
        _fixed_workflow(gh)
    evaluated, run_id = _run_without_eval_jobs(env)
    if why != "fixed workflow":
        with factory() as s:
            sweep = s.get(Sweep, evaluated.sweep_id)
            assert sweep is not None
            sweep.unexpanded = None
            s.commit()
    gh.job_lists.clear()
    reason = _eval_not_run(env, evaluated, run_id)
    assert gh.job_lists == [run_id] and gh.annotation_reads == [run_id * 10 + 9]
    assert f"GitHub said: `{STRATEGY_ERROR}`" in reason


def _redispatched(gh: FakeGitHub, run_id: int, since: int) -> list[int]:
    """Runs dispatched after ``since`` with the same command as ``run_id``'s (a retry of it)."""
    command = next(d["inputs"]["generate-cli-command"] for d in gh.dispatches if d["run_id"] == run_id)
    return [d["run_id"] for d in gh.dispatches[since:] if d["inputs"]["generate-cli-command"] == command]


def _eval_only_run(env: ENV) -> tuple[list[int], int]:
    factory, gh = env["factory"], env["gh"]
    with factory() as s:
        req = request_sweep(
            s,
            FakeRequest(gh),
            repo=REPO,
            pr_number=7,
            config_key=KEY,
            requested_by="maint",
            reason="command",
            filters=SweepFilters(seq="8k1k", evals="only"),
        )
        s.commit()
    tick(factory, lambda s: FakeTick(gh))
    with factory() as s:
        jobs = list(s.scalars(select(SweepJob).where(SweepJob.sweep_id == req.sweep.id)).all())
    assert jobs and all(j.point.get("eval-only") for j in jobs)
    run_id = next(int(j.run_id) for j in jobs if j.run_id is not None)
    return [j.id for j in jobs if j.run_id == run_id], run_id


def test_eval_only_points_whose_job_github_never_created_fail_with_the_reason(env: ENV) -> None:
    factory, gh = env["factory"], env["gh"]
    ids, run_id = _eval_only_run(env)
    gh.run_jobs[run_id] = [_unexpanded(gh, run_id)]
    dispatched = len(gh.dispatches)
    _completed(env, run_id)
    assert gh.job_lists == [] and gh.annotation_reads == []  # foreseen: the file said so at planning
    with factory() as s:
        for job_id in ids:
            job = s.get(SweepJob, job_id)
            assert job is not None and job.run_id == run_id
            assert job.state == JobState.FAILED and job.attempts == 1
            assert (job.reason or "").startswith("eval not run: e2e-tests.yml's `eval /` job")
    tick(factory, lambda s: FakeTick(gh))
    repair_jobs(factory, lambda s: FakeRepair(gh))
    assert _redispatched(gh, run_id, dispatched) == []
    with factory() as s:
        assert all((s.get(SweepJob, i) or SweepJob()).state == JobState.FAILED for i in ids)


def test_another_failure_of_a_job_without_steps_is_not_taken_for_the_defect(env: ENV) -> None:
    factory, gh = env["factory"], env["gh"]
    _fixed_workflow(gh)  # not foreseen: the annotation is read, and says something else
    ids, run_id = _eval_only_run(env)
    gh.run_jobs[run_id] = [
        _unexpanded(gh, run_id, "The job was not started because recent account payments failed.")
    ]
    _completed(env, run_id)
    with factory() as s:
        job = s.get(SweepJob, ids[0])
        assert job is not None and job.state == JobState.FAILED
        assert (job.reason or "").startswith("run failure without a job for this point")


def test_a_job_github_could_not_evaluate_is_a_workflow_defect_not_retried(env: ENV) -> None:
    factory, gh = env["factory"], env["gh"]
    ids, run_id = _eval_only_run(env)
    with factory() as s:
        job = s.get(SweepJob, ids[0])
        assert job is not None
        failed = _success(run_id, job, "eval /")["workflow_job"] | {"conclusion": "failure"}
    said = (
        "Error when evaluating 'with' for job 'test-sweep-evals'. "
        ".github/workflows/e2e-tests.yml (Line: 640, Col: 23)"
    )
    gh.annotations[failed["id"]] = [{"annotation_level": "failure", "message": said, "path": ".github"}]
    deliver(factory, "workflow_job", {"action": "completed", "workflow_job": failed})
    with factory() as s:
        job = s.get(SweepJob, ids[0])
        assert job is not None and job.state == JobState.FAILED and job.attempts == 1
        assert (job.reason or "").startswith(f"workflow defect, not retried (fix the workflow): {said}")
