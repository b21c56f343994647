"""The scheduler against the simulated GitHub + runner fleet (polling only, no webhooks)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.core.sweepspec import SweepFilters
from app.flows.repo.bench_repo import clear_capacity_cache
from app.flows.scheduler.repair import repair_jobs
from app.flows.scheduler.tick import tick
from app.flows.sweeps import ring
from app.flows.sweeps.cancel import cancel_sweep
from app.flows.sweeps.job_finish import finish_job
from app.flows.sweeps.request import SweepRequest, request_sweep
from app.models.sweeps import JobState, SweepJob
from app.store import reuse
from sim.naming import point_identity
from sim.scenario import SeedScenario
from sim.server import SimServer
from sim.world import SimSettings

KEY = "minimaxm3-fp4-mi355x-vllm"


@pytest.fixture
def bot(db_session: Session, settings_env: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    from app.adapters.github.gateway import gateway
    from app.db import session_factory
    from app.settings import get_settings, reset_settings_cache

    with SimServer(settings=SimSettings(time_scale=0.0002, seed=3)) as sim:
        facts = SeedScenario(sim.world).load()
        settings_env.setenv("SWEEPBOT_GITHUB_API_URL", sim.github_api_url)
        # The simulator's registry is on loopback: only an operator-configured origin may be.
        settings_env.setenv("SWEEPBOT_REGISTRY_URLS", f"docker.io={sim.url}/hub,ghcr.io={sim.url}")
        settings_env.setenv("SWEEPBOT_GITHUB_TOKEN", "sim-token")
        reset_settings_cache()
        clear_capacity_cache()
        settings_env.setattr(ring, "enqueue", lambda task, *args: None)
        yield {
            "sim": sim,
            "factory": session_factory(),
            "gw": lambda s: gateway(get_settings(), s),
            "repo": "SemiAnalysisAI/InferenceX",
            "pr": 2104,
            "facts": facts,
        }


def _sim_in_flight(sim: SimServer, label: str) -> int:
    with sim.world.lock:
        return sum(1 for j in sim.world.jobs.values() if j.label == label and j.status != "completed")


def _sim_peak(sim: SimServer, label: str) -> int:
    """The most jobs of ``label`` that were ever running at once, from the sim's workflow_job events
    (exact, where sampling between ticks can miss short jobs on a loaded machine)."""
    busy = peak = 0
    with sim.world.lock:
        for d in sim.world.deliveries:
            job = d.payload.get("workflow_job") if d.event == "workflow_job" else None
            if job is None or label not in job["labels"]:
                continue
            if d.action == "in_progress":
                busy += 1
            elif d.action == "completed" and job["runner_name"]:
                busy -= 1
            peak = max(peak, busy)
    return peak


def _drive(bot: dict[str, Any], until: float = 20.0, collect: bool = True) -> int:
    """Tick + repair until nothing is open; 'collect' successful runs. Returns peak sim in-flight."""
    factory: sessionmaker[Session] = bot["factory"]
    peak = 0
    deadline = time.monotonic() + until
    while time.monotonic() < deadline:
        tick(factory, bot["gw"])
        peak = max(peak, _sim_peak(bot["sim"], "mi355x"))
        repair_jobs(factory, bot["gw"])
        with factory() as s:
            open_jobs = s.scalars(select(SweepJob).where(SweepJob.state.notin_(JobState.FINAL))).all()
            for job in open_jobs:
                if collect and job.run_conclusion == "success":  # stands in for the results capability
                    finish_job(s, job.id, JobState.SUCCEEDED)
            s.commit()
            if not open_jobs:
                return peak
        time.sleep(0.02)
    raise AssertionError("sweep did not finish in time")


def _request(bot: dict[str, Any], s: Any, conc: tuple[int, ...]) -> SweepRequest:
    """A maintainer's 8k1k sweep of the recipe PR at the given concurrencies."""
    return request_sweep(
        s,
        bot["gw"](s),
        repo=bot["repo"],
        pr_number=bot["pr"],
        config_key=KEY,
        requested_by="carol-writer",
        reason="command",
        filters=SweepFilters(seq="8k1k", conc=conc),
    )


def test_full_sweep_on_the_sim_respects_capacity(bot: dict[str, Any]) -> None:
    factory = bot["factory"]
    with factory() as s:
        req = request_sweep(
            s,
            bot["gw"](s),
            repo=bot["repo"],
            pr_number=bot["pr"],
            config_key=KEY,
            requested_by="carol-writer",
            reason="command",
            filters=SweepFilters(seq="8k1k"),
        )
        s.commit()
    assert req.plan.capacity == 9 and "runners.yaml" in req.plan.capacity_source
    peak = _drive(bot)
    assert 0 < peak <= 9
    with factory() as s:
        jobs = s.scalars(select(SweepJob).where(SweepJob.sweep_id == req.sweep.id)).all()
        assert {j.state for j in jobs} == {JobState.SUCCEEDED}
        names = {j.result_name for j in jobs}
    with bot["sim"].world.lock:
        ran = [j.point for j in bot["sim"].world.jobs.values() if j.point]
    throughput = [point_identity(p) for p in ran if not p.get("eval-only")]
    assert set(throughput) == names and len(throughput) == len(names)  # every point ran exactly once
    # ... and no eval-only job ran: the real e2e-tests.yml's `eval /` matrix never expands, each run
    # has that caller's failed job instead (tests/sim/test_eval_matrix.py)
    with factory() as s:
        evaluated = {
            j.result_name
            for j in s.scalars(select(SweepJob).where(SweepJob.sweep_id == req.sweep.id))
            if j.point.get("run-eval")
        }
    assert evaluated and not [p for p in ran if p["eval-only"]]
    with bot["sim"].world.lock:
        assert {j.conclusion for j in bot["sim"].world.jobs.values() if j.name == "eval /"} == {"failure"}


def test_cancel_and_reuse_on_the_sim(bot: dict[str, Any], settings_env: pytest.MonkeyPatch) -> None:
    factory = bot["factory"]
    skipped: set[str] = set()

    class Stored:
        id = 9
        run_url = "https://sim/run/9"

    settings_env.setattr(
        reuse,
        "reusable_for_point",
        lambda session, *, image, fingerprint, result_name, **_: Stored() if result_name in skipped else None,
    )
    with factory() as s:
        plan = _request(bot, s, (64,))
        s.rollback()  # only to learn the points' names
    skipped.add(plan.plan.points[0]["result-name"])
    with factory() as s:
        req = _request(bot, s, (1, 64))
        s.commit()
    tick(factory, bot["gw"])
    with factory() as s:
        cancel_sweep(s, bot["gw"](s), req.sweep.id, actor="alice-admin", reason="test")
        s.commit()
        states = {j.state for j in s.scalars(select(SweepJob).where(SweepJob.sweep_id == req.sweep.id)).all()}
    assert states <= {JobState.CANCELLED, JobState.REUSED} and JobState.REUSED in states
    deadline = time.monotonic() + 5
    while _sim_in_flight(bot["sim"], "mi355x") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _sim_in_flight(bot["sim"], "mi355x") == 0
    with bot["sim"].world.lock:
        ran = {point_identity(j.point) for j in bot["sim"].world.jobs.values() if j.point}
    assert not (ran & skipped)


def test_runner_lost_is_retried_on_the_sim(bot: dict[str, Any]) -> None:
    factory = bot["factory"]
    bot["sim"].world.faults.runner_lost_next = 1
    with factory() as s:
        req = _request(bot, s, (32,))
        s.commit()
    _drive(bot)
    with factory() as s:
        jobs = s.scalars(select(SweepJob).where(SweepJob.sweep_id == req.sweep.id)).all()
        assert {j.state for j in jobs} == {JobState.SUCCEEDED}
        assert max(j.attempts for j in jobs) == 2


@pytest.mark.parametrize(
    ("key", "label", "conc"),
    [
        ("dsv4-fp4-mi355x-atom-disagg", "mi355x", ()),
        # f8f9b66's entry spells KV offload `offloading: none|cpu`: a tp's two items are two jobs
        ("kimik2.5-fp4-mi355x-vllm-agentic", "mi355x", (32, 40)),
    ],
    ids=["multi-node", "agentic"],
)
def test_sweep_of_a_multinode_or_agentic_key_runs_and_tracks_every_row(
    bot: dict[str, Any], key: str, label: str, conc: tuple[int, ...]
) -> None:
    factory = bot["factory"]
    with factory() as s:
        req = request_sweep(
            s,
            bot["gw"](s),
            repo=bot["repo"],
            pr_number=bot["pr"],
            config_key=key,
            requested_by="carol-writer",
            reason="command",
            filters=SweepFilters(evals="none", conc=conc),
        )
        s.commit()
        planned = [j.point for j in s.scalars(select(SweepJob).where(SweepJob.sweep_id == req.sweep.id))]
    assert planned and all(p["runner"] == label for p in planned)
    _drive(bot)
    with factory() as s:
        jobs = s.scalars(select(SweepJob).where(SweepJob.sweep_id == req.sweep.id)).all()
        assert {j.state for j in jobs} == {JobState.SUCCEEDED}, [(j.state, j.reason) for j in jobs]
        names = {j.result_name for j in jobs}
    with bot["sim"].world.lock:
        ran = [point_identity(j.point) for j in bot["sim"].world.jobs.values() if j.point]
    assert set(ran) == names and len(ran) == len(names)
    with bot["sim"].world.lock:
        commands = [str(r.inputs["generate-cli-command"]) for r in bot["sim"].world.runs.values()]
    if key.endswith("-agentic"):  # agentic points have no seq-len; the dispatch leaves it out
        assert all("--seq-lens" not in c for c in commands)
    else:  # a multi-node row runs its whole conc list on one engine; test-config cannot pick one
        # topology by conc, so the key's rows go out in one dispatch with the union of their lists
        assert len(commands) == 1 and "--conc 4 8 16 32 64 128 256 512 768 1024 2048" in commands[0]
