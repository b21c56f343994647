"""Eval results end to end through the simulator: the bot dispatches e2e-tests.yml, the sim runs it as
the real file does (throughput jobs with `run-eval: false`, and a separate eval-only job under
`multi-node eval /` uploading the `eval_` artifact), and the bot collects both.

The real file's single-node `eval /` job never expands (get-jobs writes `eval-config=$EVALS` and
never sets EVALS; sim/getjobs.py): a single-node eval point keeps its throughput result and ends
saying why it has no eval, an eval-only point fails with that reason, and neither is dispatched
again. With a fixed workflow (`SeedScenario(evals_assigned=True)`) the `eval /` job runs.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.adapters.github.gateway import gateway
from app.adapters.permissions import clear_cache
from app.core.sweepspec import SweepFilters
from app.db import session_factory
from app.flows.repo.bench_repo import clear_capacity_cache
from app.flows.results.collect import collect_job
from app.flows.results.reports import render_report
from app.flows.scheduler.repair import repair_jobs
from app.flows.scheduler.tick import tick
from app.flows.sweeps import ring
from app.flows.sweeps.request import request_sweep
from app.models.results import EvalResult, Result
from app.models.sweeps import JobState, SweepJob
from app.settings import get_settings, reset_settings_cache
from sim.scenario import BENCH_REPO, MASTER_PATH, RECIPE_BRANCH, SeedScenario, runner_counts, runner_nodes
from sim.server import SimServer
from sim.world import SimSettings, World
from tests.helpers.wait import wait_for
from tests.recipe_helpers import fixture_text

PR = 2104
SINGLE_KEY = "minimaxm3-fp4-mi355x-vllm"
RUNNERS_PATH = ".github/configs/runners.yaml"
MULTI_KEY = "qwen3.5-fp8-mi355x-sglang-disagg"  # one disaggregated 1P+1D row, conc 8..128, 8k1k


def _top_level_entry(text: str, key: str) -> str:
    """A master config's top-level entry, verbatim (up to the next top-level key)."""
    m = re.search(rf"^{re.escape(key)}:\n(?:[ #\n].*\n|\n)*", text, re.M)
    assert m is not None, key
    return m.group(0)


@pytest.fixture(params=[False], ids=["real-workflow"])
def world(
    request: pytest.FixtureRequest, db_session: Session, settings_env: pytest.MonkeyPatch
) -> Iterator[World]:
    with SimServer(settings=SimSettings(time_scale=0.0002, seed=5)) as sim:
        SeedScenario(sim.world, evals_assigned=request.param).load()
        # the PR branch also carries the repo's real multi-node key (amd-master.yaml at 843c6254)
        current = (sim.world.read_file(BENCH_REPO, MASTER_PATH, RECIPE_BRANCH) or b"").decode()
        entry = _top_level_entry(fixture_text("amd-master.head.yaml"), MULTI_KEY)
        runners = fixture_text("runners.yaml")  # the real one: it has the mi355x-disagg nodes
        sim.world.commit_files(
            BENCH_REPO,
            RECIPE_BRANCH,
            {MASTER_PATH: current.rstrip("\n") + "\n\n" + entry, RUNNERS_PATH: runners},
            "add a disagg key",
        )
        sim.world.runner_nodes["mi355x-disagg"] = runner_nodes(runners)["mi355x-disagg"]
        sim.world.set_runners("mi355x-disagg", runner_counts(runners)["mi355x-disagg"])
        settings_env.setenv("SWEEPBOT_GITHUB_API_URL", sim.github_api_url)
        # The simulator's registry is on loopback: only an operator-configured origin may be.
        settings_env.setenv("SWEEPBOT_REGISTRY_URLS", f"docker.io={sim.url}/hub,ghcr.io={sim.url}")
        settings_env.setenv("SWEEPBOT_GITHUB_TOKEN", "sim-token")
        settings_env.setenv("SWEEPBOT_GITHUB_SECONDS_BETWEEN_REQUESTS", "0")
        settings_env.setenv("SWEEPBOT_GITHUB_SECONDS_BETWEEN_WRITES", "0")
        reset_settings_cache()
        clear_capacity_cache()
        clear_cache()
        settings_env.setattr(ring, "enqueue", lambda task, *args: None)
        yield sim.world
        clear_cache()


def _gw(session: Session) -> Any:
    return gateway(get_settings(), session)


def _sweep(db_session: Session, key: str, filters: SweepFilters) -> int:
    req = request_sweep(
        db_session,
        _gw(db_session),
        repo=BENCH_REPO,
        pr_number=PR,
        config_key=key,
        requested_by="carol-writer",
        reason="command",
        filters=filters,
    )
    db_session.commit()
    return int(req.sweep.id)


def _run_and_collect(db_session: Session, world: World, sweep_id: int) -> list[SweepJob]:
    factory = session_factory()
    deadline = time.monotonic() + 60
    while True:
        tick(factory, _gw)
        wait_for(lambda: all(r.status == "completed" for r in world.runs.values()), "the runs", 30)
        repair_jobs(factory, _gw)
        db_session.expire_all()
        jobs = db_session.scalars(select(SweepJob).where(SweepJob.sweep_id == sweep_id)).all()
        for job in jobs:
            if job.run_conclusion == "success" and job.state not in JobState.FINAL:
                collect_job(db_session, _gw(db_session), job.id)
        db_session.commit()
        if all(j.state in JobState.FINAL for j in jobs):
            return list(jobs)
        assert time.monotonic() < deadline, [(j.id, j.state, j.reason) for j in jobs]


def _run_jobs(world: World) -> list[str]:
    with world.lock:
        return [world.jobs[j].name for run in world.runs.values() for j in run.jobs]


def _dispatches(world: World) -> int:
    with world.lock:
        return sum(1 for r in world.runs.values() if r.event == "workflow_dispatch")


EVAL_JOB = "eval / p50 | minimaxm3 fp4 mi355x vllm TP4    c64 | eval-only"
THROUGHPUT = [
    "single-node / p50 | minimaxm3 fp4 mi355x vllm TP4    c32",
    "single-node / p50 | minimaxm3 fp4 mi355x vllm TP4    c64",
]


def test_a_single_node_eval_point_keeps_its_throughput_and_says_why_it_has_no_eval(
    world: World, db_session: Session
) -> None:
    sweep_id = _sweep(db_session, SINGLE_KEY, SweepFilters(seq="8k1k", conc=(32, 64)))
    jobs = _run_and_collect(db_session, world, sweep_id)
    assert {j.state for j in jobs} == {JobState.SUCCEEDED}, [(j.state, j.reason) for j in jobs]
    # the generator marks after `--conc 32 64`: of 32 and 64 (both >= 16) the median and the highest
    # are 64; conc 32 is dispatched --no-evals. GitHub fails `eval /` unexpanded in both runs.
    evaluated = next(j for j in jobs if j.point.get("run-eval"))
    assert evaluated.conc == 64
    assert sorted(n for n in _run_jobs(world) if n != "get-jobs") == ["eval /", "eval /", *THROUGHPUT]
    results = db_session.scalars(select(Result).where(Result.sweep_id == sweep_id)).all()
    assert len(results) == 2  # both throughput results, the evaluated point's too
    assert not db_session.scalars(select(EvalResult).where(EvalResult.sweep_id == sweep_id)).all()
    reason = evaluated.reason or ""
    assert reason.startswith(
        "eval not run: e2e-tests.yml's `eval /` job could not evaluate its matrix, so GitHub created "
        "none of its jobs; at InferenceX 843c6254 get-jobs writes `eval-config=$EVALS` and never sets "
        "`EVALS`. A workflow defect, not retried"
    ), reason
    assert "not retried" in reason and "/sweep evals=none" in reason
    assert "GitHub said: `Error when evaluating 'strategy' for job 'test-sweep-evals'." in reason
    assert next(j for j in jobs if j.conc == 32).reason is None
    # not dispatched again: one run per conc group, one attempt each
    assert _dispatches(world) == 2 and {j.attempts for j in jobs} == {1}
    report = render_report(db_session, sweep_id)
    assert "> [!WARNING]\n> 1 of 1 eval points: eval not run: e2e-tests.yml's `eval /` job" in report


def test_eval_only_points_end_failed_with_the_reason_and_are_not_retried(
    world: World, db_session: Session
) -> None:
    sweep_id = _sweep(db_session, SINGLE_KEY, SweepFilters(seq="8k1k", conc=(32, 64, 512), evals="only"))
    jobs = _run_and_collect(db_session, world, sweep_id)
    # evals=only: the eval points of `--conc 32 64 512` alone (512 and the median, 64), each eval-only
    assert sorted(j.conc for j in jobs) == [64, 512] and all(j.point.get("eval-only") for j in jobs)
    assert {j.state for j in jobs} == {JobState.FAILED}
    for job in jobs:
        assert (job.reason or "").startswith("eval not run: e2e-tests.yml's `eval /` job"), job.reason
        assert "infrastructure" not in (job.reason or "") and "benchmark" not in (job.reason or "")
        assert job.attempts == 1
    assert _dispatches(world) == 2  # one per conc group; nothing re-dispatched
    assert sorted(n for n in _run_jobs(world) if n != "get-jobs") == ["eval /", "eval /"]
    repair_jobs(session_factory(), _gw)  # a later repair poll changes nothing
    tick(session_factory(), _gw)
    db_session.expire_all()
    assert _dispatches(world) == 2


@pytest.mark.parametrize("world", [True], ids=["evals-assigned"], indirect=True)
def test_with_a_fixed_workflow_the_eval_is_collected_from_its_eval_only_job(
    world: World, db_session: Session
) -> None:
    sweep_id = _sweep(db_session, SINGLE_KEY, SweepFilters(seq="8k1k", conc=(32, 64)))
    jobs = _run_and_collect(db_session, world, sweep_id)
    assert {j.state for j in jobs} == {JobState.SUCCEEDED}, [(j.state, j.reason) for j in jobs]
    assert sorted(n for n in _run_jobs(world) if n != "get-jobs") == [EVAL_JOB, *THROUGHPUT]
    evaluated = next(j for j in jobs if j.point.get("run-eval"))
    assert evaluated.reason is None
    scores = db_session.scalars(select(EvalResult).where(EvalResult.job_id == evaluated.id)).all()
    assert scores and {s.task for s in scores} == {"gsm8k"}
    with world.lock:
        eval_job = next(j for j in world.jobs.values() if j.name.startswith("eval / "))
        uploaded = {a.name for a in world.artifacts.values() if a.run_id == eval_job.run_id}
    assert any(name.startswith("eval_minimaxm3_8k1k_") for name in uploaded)
    assert all((s.artifact_name or "").startswith("eval_minimaxm3_8k1k_") for s in scores)
    # the simulated repo's own gate (its utils/evals/thresholds.yaml, read when the sweep was planned)
    report = render_report(db_session, sweep_id)
    assert "Against the repo's own gate: `utils/evals/thresholds.yaml` at `" in report
    task_line = next(line for line in report.splitlines() if line.startswith("- **gsm8k**:"))
    assert "threshold 0.9 (default.gsm8k): **" in task_line, task_line  # minimaxm3: no own entry


def test_a_multi_node_row_and_its_eval_are_collected(world: World, db_session: Session) -> None:
    sweep_id = _sweep(db_session, MULTI_KEY, SweepFilters(seq="8k1k"))
    jobs = _run_and_collect(db_session, world, sweep_id)
    assert len(jobs) == 1 and jobs[0].state == JobState.SUCCEEDED, [(j.state, j.reason) for j in jobs]
    point = jobs[0].point
    assert point.get("run-eval") and point.get("eval-conc") == 128
    names = [n for n in _run_jobs(world) if n != "get-jobs"]
    body = "p50 | qwen3.5 fp8 mi355x-disagg sgl-disagg 1P (TP4) x 1D (TP8)    c8x16x32x64x128"
    # the real file assigns MULTI_EVAL: its multi-node eval runs (only `eval /` fails unexpanded)
    assert names == [f"multi-node / {body}", f"multi-node eval / {body} | eval-only", "eval /"]
    results = db_session.scalars(select(Result).where(Result.job_id == jobs[0].id)).all()
    # one engine runs the row's whole conc list: one result per conc (its agg_ file each)
    assert sorted(r.conc for r in results) == [8, 16, 32, 64, 128]
    scores = db_session.scalars(select(EvalResult).where(EvalResult.job_id == jobs[0].id)).all()
    assert scores and {s.task for s in scores} == {"gsm8k"}
    assert all(s.conc == 128 for s in scores)
