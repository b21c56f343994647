"""No job is dispatched twice and capacity holds when many ticks run at once on PostgreSQL."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from sqlalchemy import select

from app.core.sweepspec import SweepFilters
from app.flows.scheduler.tick import tick
from app.flows.sweeps import ring
from app.flows.sweeps.job_finish import finish_job
from app.flows.sweeps.request import request_sweep
from app.models.sweeps import JobState, SweepJob
from app.store.jobs import inflight_slots
from tests.sweep_fakes import KEY, REPO, FakeGitHub, FakeRequest, FakeTick, runs_complete


@pytest.mark.services
@pytest.mark.parametrize("overcommit", ["0", "auto"])
def test_concurrent_ticks_never_double_dispatch(
    pg_clean_url: str, settings_env: pytest.MonkeyPatch, overcommit: str
) -> None:
    from app.db import session_factory
    from app.settings import reset_settings_cache

    settings_env.setenv("SWEEPBOT_DATABASE_URL", pg_clean_url)
    settings_env.setenv("SWEEPBOT_RUNNER_CAPACITY", "mi355x=7")
    settings_env.setenv("SWEEPBOT_RUNNER_OVERCOMMIT", overcommit)
    # {tp} in the template: one point per dispatch, so many small claims race for the slots
    # (the repo CLI has no --tp; a declared input carrying {tp} narrows the groups just the same)
    settings_env.setenv(
        "SWEEPBOT_DISPATCH_INPUTS",
        '{"generate-cli-command": "test-config --config-files {config_file} --config-keys {key} '
        '--conc {conc}", "ref": "{head_sha}", "test-name": "{run_name}", "pr-labels-json": "[\\"tp{tp}\\"]"}',
    )
    reset_settings_cache()
    settings_env.setattr(ring, "enqueue", lambda task, *args: None)
    factory = session_factory()
    gh = FakeGitHub()
    with factory() as s:
        for pr in (1, 2, 3):
            request_sweep(
                s,
                FakeRequest(gh),
                repo=REPO,
                pr_number=pr,
                config_key=KEY,
                requested_by="maint",
                reason="api",
                filters=SweepFilters(seq="8k1k"),
            )
        s.commit()

    def inflight() -> int:
        with factory() as s:
            return inflight_slots(s, "mi355x")

    with factory() as s:
        widest = max(s.scalars(select(SweepJob.slots)).all())
    # 0: never more in flight than runners. auto: a group goes out only while a runner is free, so
    # at most the widest group less one over them; two ticks that both saw the last free runner
    # (no label lock) would put two groups over.
    bound = 7 if overcommit == "0" else 7 - 1 + widest

    for _round in range(4):
        barrier = threading.Barrier(8)
        errors: list[BaseException] = []

        def worker(barrier: threading.Barrier = barrier, errors: list[BaseException] = errors) -> None:
            try:
                barrier.wait(timeout=10)
                tick(factory, lambda s: FakeTick(gh))
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors
        assert inflight() <= bound
        runs_per_job = Counter(d["inputs"]["test-name"] for d in gh.dispatches)
        assert max(runs_per_job.values()) == 1, "a run name was dispatched twice"
        with factory() as s:  # finish what is in flight so the next round races again
            for job in s.scalars(select(SweepJob).where(SweepJob.state == JobState.DISPATCHED)).all():
                finish_job(s, job.id, JobState.SUCCEEDED)
            sweep_ids = sorted({j.sweep_id for j in s.scalars(select(SweepJob))})
            s.commit()
        for sweep_id in sweep_ids:  # GitHub says their runs completed: the filtered-out points too
            runs_complete(factory, gh, sweep_id)
    with factory() as s:
        dispatched = s.scalars(select(SweepJob).where(SweepJob.state == JobState.SUCCEEDED)).all()
        assert all(j.attempts == 1 for j in dispatched)
    names = Counter(d["inputs"]["test-name"] for d in gh.dispatches)
    # each (conc, tp) dispatch runs both seq-lens of the key, so a round fits two or three
    assert {j.run_name for j in dispatched} == set(names) and len(dispatched) >= 4 * 2


@pytest.mark.services
def test_identical_requests_at_once_create_one_sweep(
    pg_clean_url: str, settings_env: pytest.MonkeyPatch
) -> None:
    from app.db import session_factory
    from app.models.sweeps import Sweep
    from app.settings import reset_settings_cache

    settings_env.setenv("SWEEPBOT_DATABASE_URL", pg_clean_url)
    reset_settings_cache()
    settings_env.setattr(ring, "enqueue", lambda task, *args: None)
    factory = session_factory()
    gh = FakeGitHub()
    barrier = threading.Barrier(6)
    errors: list[BaseException] = []

    def request() -> None:
        try:
            with factory() as s:
                barrier.wait(timeout=10)
                request_sweep(
                    s, FakeRequest(gh), repo=REPO, pr_number=9, config_key=KEY, requested_by="maint",
                    reason="command", filters=SweepFilters(seq="8k1k"),
                )  # fmt: skip
                s.commit()
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=request) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    with factory() as s:
        sweeps = s.scalars(select(Sweep).where(Sweep.pr_number == 9)).all()
    assert len(sweeps) == 1, [(x.id, x.state) for x in sweeps]


@pytest.mark.services
def test_sticky_comment_upserts_at_once_create_one_comment(
    pg_clean_url: str, settings_env: pytest.MonkeyPatch
) -> None:
    from sqlalchemy import create_engine
    from sqlalchemy.orm import sessionmaker

    from app.adapters.github.gateway import GitHubGateway
    from sim.server import SimServer
    from sim.world import SimSettings

    engine = create_engine(pg_clean_url)
    factory = sessionmaker(bind=engine)
    with SimServer(settings=SimSettings(time_scale=0.0002)) as sim:
        from github import Auth, Github

        from sim.scenario import SeedScenario

        SeedScenario(sim.world).load()
        barrier = threading.Barrier(4)
        errors: list[BaseException] = []

        def upsert(n: int) -> None:
            try:
                gh = Github(auth=Auth.Token("sim-token"), base_url=sim.github_api_url,
                            seconds_between_requests=0, seconds_between_writes=0)  # fmt: skip
                with factory() as s:
                    gw = GitHubGateway(gh.requester, cache_session=s)
                    barrier.wait(timeout=10)
                    gw.upsert_comment("SemiAnalysisAI/InferenceX", 2104, "<!-- sweepbot:race -->", f"v{n}")
                    s.commit()
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=upsert, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors
        found = [
            c
            for c in sim.world.repo("SemiAnalysisAI/InferenceX").comments.values()
            if "sweepbot:race" in c.body
        ]
        assert len(found) == 1
    engine.dispose()
