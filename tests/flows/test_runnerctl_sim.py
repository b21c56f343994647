"""The priority controller against the simulated GitHub with PRIORITY_SCHEDULER_ENABLED=true: the
real templates' ``runs-on`` asks for ``ci-job-<score>-<token>`` labels, so no runner takes a GPU
job until the bot (``app.flows.scheduler.runner_hook.handle``, fed the sim's ``workflow_job`` deliveries) adds
that job's labels to an idle runner through the sim's runners API."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.core.schedlabels import is_identifying
from app.core.sweepspec import SweepFilters
from app.flows.repo.bench_repo import clear_capacity_cache
from app.flows.scheduler.repair import repair_jobs
from app.flows.scheduler.runner_control import contract_on, reset_contract_cache
from app.flows.scheduler.runner_hook import handle
from app.flows.scheduler.tick import tick
from app.flows.sweeps import ring
from app.flows.sweeps.job_finish import finish_job
from app.flows.sweeps.request import request_sweep
from app.models.sweeps import JobState, SweepJob
from sim.scenario import SeedScenario
from sim.server import SimServer
from sim.world import SimSettings

KEY = "minimaxm3-fp4-mi355x-vllm"
REPO = "SemiAnalysisAI/InferenceX"


class Recorder:
    """The bot's gateway, every runner-label write recorded with the sim runner's state at that moment."""

    def __init__(self, inner: Any, sim: SimServer) -> None:
        self.inner, self.sim = inner, sim
        self.added: list[tuple[str, list[str]]] = []  # (runner name, labels)
        self.removed_from_busy: list[tuple[str, str]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _runner(self, runner_id: int) -> Any:
        with self.sim.world.lock:
            return next(r for r in self.sim.world.all_runners() if r.id == runner_id)

    def add_runner_labels(self, repo: str, runner_id: int, labels: list[str]) -> list[str]:
        self.added.append((self._runner(runner_id).name, list(labels)))
        return list(self.inner.add_runner_labels(repo, runner_id, labels))

    def remove_runner_label(self, repo: str, runner_id: int, name: str) -> list[str] | None:
        runner = self._runner(runner_id)
        if runner.busy_job is not None:
            self.removed_from_busy.append((runner.name, name))
        return self.inner.remove_runner_label(repo, runner_id, name)


@pytest.fixture
def bot(db_session: Session, settings_env: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    from app.adapters.github.gateway import gateway
    from app.db import session_factory
    from app.settings import get_settings, reset_settings_cache

    with SimServer(settings=SimSettings(time_scale=0.0002, seed=3)) as sim:
        SeedScenario(sim.world).load()
        sim.world.set_variable(REPO, "PRIORITY_SCHEDULER_ENABLED", "true")
        settings_env.setenv("SWEEPBOT_GITHUB_API_URL", sim.github_api_url)
        settings_env.setenv("SWEEPBOT_REGISTRY_URLS", f"docker.io={sim.url}/hub,ghcr.io={sim.url}")
        settings_env.setenv("SWEEPBOT_GITHUB_TOKEN", "sim-token")
        settings_env.setenv("SWEEPBOT_RUNNER_CONTROLLER_REPOS", REPO)
        reset_settings_cache()
        clear_capacity_cache()
        reset_contract_cache()
        settings_env.setattr(ring, "enqueue", lambda task, *args: None)
        try:
            yield {"sim": sim, "factory": session_factory(), "gw": lambda s: gateway(get_settings(), s)}
        finally:
            # process-wide caches: the contract seen on for this repo would leave every later
            # tick of the worker unheld (tests/flows/test_scheduler.py then over-dispatches)
            reset_contract_cache()
            clear_capacity_cache()


@pytest.mark.timeout(120)
def test_gpu_jobs_run_only_where_the_bot_labelled_them(bot: dict[str, Any]) -> None:
    sim: SimServer = bot["sim"]
    factory: sessionmaker[Session] = bot["factory"]
    with factory() as s:
        assert contract_on(bot["gw"](s), REPO)
        req = request_sweep(
            s,
            bot["gw"](s),
            repo=REPO,
            pr_number=2104,
            config_key=KEY,
            requested_by="carol-writer",
            reason="command",
            filters=SweepFilters(seq="8k1k", conc=(4, 8)),
        )
        s.commit()
    seen = 0
    recorders: list[Recorder] = []
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline, "the sweep did not finish"
        tick(factory, bot["gw"])
        repair_jobs(factory, bot["gw"])
        with sim.world.lock:
            fresh = [d.payload for d in sim.world.deliveries[seen:] if d.event == "workflow_job"]
            seen = len(sim.world.deliveries)
        with factory() as s:
            gw = Recorder(bot["gw"](s), sim)
            recorders.append(gw)
            for payload in fresh or [{"action": "tick", "workflow_job": {}}]:
                handle(s, gw, REPO, payload, datetime.now(UTC))
                s.commit()
            open_jobs = s.scalars(select(SweepJob).where(SweepJob.sweep_id == req.sweep.id)).all()
            for job in open_jobs:
                if job.state not in JobState.FINAL and job.run_conclusion == "success":
                    finish_job(s, job.id, JobState.SUCCEEDED)
            s.commit()
            if open_jobs and all(j.state in JobState.FINAL for j in open_jobs):
                break
        time.sleep(0.02)
    added = [a for r in recorders for a in r.added]
    with sim.world.lock:
        gpu = [
            j for j in sim.world.jobs.values() if j.labels and any(x.startswith("ci-job-") for x in j.labels)
        ]
        runners = {r.name: r for r in sim.world.all_runners()}
        # labels naming a job or a lease; ``ci-attempt-<n>`` / ``nodes:<n>`` alone admit no job and
        # stay for the next one (app/core/schedlabels.py, app/core/schedplan.py ``_cleanups``)
        leftover = {
            n: [x for x in r.custom_labels if is_identifying(x)]
            for n, r in runners.items()
            if any(is_identifying(x) for x in r.custom_labels)
        }
        started = [
            d.payload["workflow_job"]
            for d in sim.world.deliveries
            if d.event == "workflow_job" and d.action == "in_progress"
        ]
    assert gpu, "with the variable on, the templates' runs-on asks for ci-job- labels"
    ran = [j for j in started if any(x.startswith("ci-job-") for x in j["labels"])]
    assert ran and len(ran) >= len({j.id for j in gpu if j.status == "completed"})
    for job in ran:
        label = next(x for x in job["labels"] if x.startswith("ci-job-"))
        assert (job["runner_name"], label) in {(n, x) for n, ls in added for x in ls}, (
            f"job {job['id']} ran on {job['runner_name']}, not a runner the bot labelled with {label}"
        )
    assert not leftover, f"scheduling labels left on idle runners: {leftover}"
    assert not [x for r in recorders for x in r.removed_from_busy], "a running job's runner was touched"
    with factory() as s:
        states = {j.state for j in s.scalars(select(SweepJob).where(SweepJob.sweep_id == req.sweep.id))}
    assert states == {JobState.SUCCEEDED}
