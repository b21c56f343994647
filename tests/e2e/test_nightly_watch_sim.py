"""The nightly regression watch end to end against the simulator (time-scaled runners, polling).

A regression is injected at one upstream vLLM commit; nightlies appear one by one and in a burst;
the watch measures them in idle runner time, finds the change point, bisects the retained
nightlies of the burst, names the first bad nightly and the commit range, opens one issue, notes
the watch pinned after it, and closes the issue when a fix lands. A real sweep requested while
canaries run is never delayed by them (checked from the scheduler's job records and audit log).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.core.sweepspec import SweepFilters
from app.flows.repo.bench_repo import clear_capacity_cache
from app.flows.scheduler.repair import repair_jobs
from app.flows.scheduler.tick import tick
from app.flows.sweeps import ring
from app.flows.sweeps.request import request_sweep
from app.models.core import AuditEntry
from app.models.nightly import CanaryState, NightlyCanary, NightlyRegression, RegressionState
from app.models.sweeps import CANARY_REASON, JobState, Sweep, SweepJob
from app.models.tracking import Watch
from sim.app import admin_action
from sim.nightly_scenario import KEY, PERF_PR, NightlyRegressionStory
from sim.scenario import BENCH_REPO, IMAGE, VLLM_REPO, SeedScenario
from sim.server import SimServer
from sim.world import SimSettings


@pytest.fixture
def bot(db_session: Session, settings_env: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    from app.adapters.github.gateway import gateway
    from app.db import session_factory
    from app.flows.repo.bot_config import read_bot_config
    from app.settings import get_settings, reset_settings_cache

    with SimServer(settings=SimSettings(time_scale=0.001, seed=5)) as sim:
        SeedScenario(sim.world).load()
        story = NightlyRegressionStory(sim.world, registry_url=f"{sim.url}/hub")
        story.load()
        for name, value in {
            "SWEEPBOT_GITHUB_API_URL": sim.github_api_url,
            "SWEEPBOT_GITHUB_TOKEN": "sim-token",
            # the simulator's registry is on loopback: only an operator-configured origin may be
            "SWEEPBOT_REGISTRY_URLS": f"docker.io={sim.url}/hub",
            "SWEEPBOT_GITHUB_SECONDS_BETWEEN_REQUESTS": "0",
            "SWEEPBOT_GITHUB_SECONDS_BETWEEN_WRITES": "0",
        }.items():
            settings_env.setenv(name, value)
        reset_settings_cache()
        clear_capacity_cache()
        settings_env.setattr(ring, "enqueue", lambda task, *args: None)
        import app.adapters.queue

        settings_env.setattr(app.adapters.queue, "enqueue", lambda task, *args, **kw: None)
        factory = session_factory()

        def gw(s: Session) -> Any:
            return gateway(get_settings(), s)

        with factory() as s:
            cfg = read_bot_config(s, gw(s), BENCH_REPO)
            s.commit()
        assert cfg.watch_nightlies.keys[0].conc == [4, 64]
        yield {
            "sim": sim,
            "world": sim.world,
            "story": story,
            "factory": factory,
            "gw": gw,
            "ticks": [],
        }


def _drive(bot: dict[str, Any], until: float = 60.0) -> None:
    """Tick, repair and collect until no job is open (the worker's and beat's part)."""
    from app.flows.results.collect import collect_job

    factory: sessionmaker[Session] = bot["factory"]
    deadline = time.monotonic() + until
    while time.monotonic() < deadline:
        began = datetime.now(UTC)
        tick(factory, bot["gw"])
        bot["ticks"].append((began, datetime.now(UTC)))
        repair_jobs(factory, bot["gw"])
        with factory() as s:
            ids = [
                j.id
                for j in s.scalars(select(SweepJob).where(SweepJob.state.notin_(JobState.FINAL))).all()
                if j.run_conclusion == "success"
            ]
            open_jobs = s.scalars(select(SweepJob.id).where(SweepJob.state.notin_(JobState.FINAL))).all()
        for job_id in ids:
            with factory() as s:
                collect_job(s, bot["gw"](s), job_id)
                s.commit()
        if not open_jobs:
            return
        time.sleep(0.01)
    raise AssertionError("jobs did not finish in time")


def _watch(bot: dict[str, Any]) -> list[Any]:
    from app.flows.nightly.watch import watch_nightlies

    reports = watch_nightlies(bot["factory"], bot["gw"])
    assert all(r.error is None for r in reports), [r.error for r in reports]
    return reports


def _cycle(bot: dict[str, Any], rounds: int = 1) -> None:
    """The beat's watch pass, then the runners until idle; repeated for bisection rounds."""
    for _ in range(rounds):
        _watch(bot)
        _drive(bot)
    _watch(bot)


def _aware(dt: datetime | None) -> datetime | None:
    return dt.replace(tzinfo=UTC) if dt is not None and dt.tzinfo is None else dt


def test_a_regression_at_one_upstream_commit_is_found_bisected_reported_and_closed(
    bot: dict[str, Any],
) -> None:
    world = bot["world"]
    story: NightlyRegressionStory = bot["story"]
    factory: sessionmaker[Session] = bot["factory"]

    def play(prefix: str) -> None:
        while story.position < len(story.steps) and story.steps[story.position].name.startswith(prefix):
            story.step()
            _cycle(bot)

    # 1. nightlies one by one: each gets its canary (the first pass measures the newest seed nightly)
    _cycle(bot)
    play("good-nightly-")

    # 2. a burst of five nightlies in one poll; the regression lands in the third one's commits
    assert story.step()["step"] == "burst-with-regression"
    burst: list[str] = story.facts["burst"]
    bad_commit: str = story.facts["bad_commit"]
    first_bad_tag = story.facts["first_bad_tag"]
    _watch(bot)  # queues the canary of the newest nightly of the burst
    tick(factory, bot["gw"])
    deadline = time.monotonic() + 10
    while not any(j.status == "in_progress" for j in world.jobs.values()) and time.monotonic() < deadline:
        time.sleep(0.01)
    # a real sweep arrives while that canary runs: it must not wait for it
    with factory() as s:
        real = request_sweep(
            s,
            bot["gw"](s),
            repo=BENCH_REPO,
            pr_number=2104,
            config_key=KEY,
            requested_by="carol-writer",
            reason="command",
            filters=SweepFilters(seq="8k1k"),
        )
        s.commit()
    _drive(bot)

    # 3. more bad nightlies one by one; a watch pinned after the first bad nightly
    play("bad-nightly-")
    with factory() as s:
        s.add(
            Watch(
                repo=BENCH_REPO,
                pr_number=2104,
                config_key=KEY,
                source="body",
                state="waiting",
                image_repo=IMAGE,
                pinned_image=f"{IMAGE}:nightly-{burst[3]}",
            )
        )
        s.commit()
    _cycle(bot, rounds=4)  # bisection rounds: each measures one retained nightly of the burst

    with factory() as s:
        regs = s.scalars(select(NightlyRegression)).all()
        assert len(regs) == 1, [(r.last_good_tag, r.first_bad_tag, r.state) for r in regs]
        reg = regs[0]
        assert reg.state == RegressionState.OPEN, reg.reason
        assert reg.first_bad_tag == first_bad_tag
        assert reg.last_good_tag == story.facts["last_good_tag"] == f"nightly-{burst[1]}"
        assert 1 <= reg.bisect_runs <= 3  # log2 of the five burst nightlies, rounded up
        # the commit range between the last good and the first bad nightly, from the compare API
        assert [c["sha"] for c in reg.commits or []][-1] == burst[2]
        assert bad_commit in {c["sha"] for c in reg.commits or []}
        assert PERF_PR in (reg.pulls or []) and 50101 not in (reg.pulls or [])
        # the PRs come from the commits' associated-pulls answers, the whole range read (paged)
        assert reg.commits_total == len(reg.commits or [])
        looked_up = sum(
            n
            for (op, status, _), n in world.calls.items()
            if op == "repos/list-pull-requests-associated-with-commit" and status == 200
        )
        assert looked_up >= len(reg.commits or [])
        assert {f["metric"] for f in reg.series} >= {"mean_tpot_ms"}
        issue_number = reg.issue_number
        bisected = s.scalars(select(NightlyCanary).where(NightlyCanary.purpose == "bisect")).all()
        assert bisected and all(c.tag in {f"nightly-{t}" for t in burst} for c in bisected)
        assert all(c.state == CanaryState.MEASURED for c in bisected)
    assert issue_number is not None
    issues = [i for i in world.repo(BENCH_REPO).issues.values()]
    assert len(issues) == 1 and issues[0].number == issue_number and issues[0].state == "open"
    body = issues[0].body
    assert f"first bad nightly: `{first_bad_tag}`" in body
    assert f"{reg.bisect_runs} bisection canary(ies) measured" in body
    assert f"{VLLM_REPO}#{PERF_PR}" in body and "xychart-beta" in body
    assert "<!-- sweepbot:nightly-regression:" in body
    notes = [c for c in world.repo(BENCH_REPO).comments.values() if "sweepbot:regression-note:" in c.body]
    assert len(notes) == 1 and notes[0].issue_number == 2104 and first_bad_tag in notes[0].body

    # 3b. a maintainer deletes the issue (GitHub then answers its number 410 Gone): the next pass
    # does not fail on it; no issue holds the marker, so one is opened again and remembered
    admin_action(world, "delete-issue", {"repo": BENCH_REPO, "number": issue_number})
    _watch(bot)
    with factory() as s:
        reg = s.scalars(select(NightlyRegression)).one()
        assert reg.issue_number is not None and reg.issue_number != issue_number
        reopened = s.scalars(select(AuditEntry).where(AuditEntry.action == "nightly.issue_open")).all()
        assert [(e.target, (e.detail or {}).get("replaces")) for e in reopened] == [
            (f"{BENCH_REPO}#{issue_number}", None),
            (f"{BENCH_REPO}#{reg.issue_number}", issue_number),
        ]
        issue_number = reg.issue_number
    issues = list(world.repo(BENCH_REPO).issues.values())
    assert [i.number for i in issues] == [issue_number] and issues[0].body == body  # the same report
    _watch(bot)  # and from then on that issue is the one edited: no third
    assert [i.number for i in world.repo(BENCH_REPO).issues.values()] == [issue_number]

    # 4. the fix lands upstream; later nightlies recover and the issue is closed (still one issue)
    play("fix")
    play("fixed-nightly-")
    assert story.position == len(story.steps)
    with factory() as s:
        reg = s.scalars(select(NightlyRegression)).one()
        assert reg.state == RegressionState.RECOVERED and reg.recovered_tag == story.facts["recovered_tag"]
    issues = list(world.repo(BENCH_REPO).issues.values())
    assert len(issues) == 1 and issues[0].state == "closed" and "**Recovered**" in issues[0].body
    notes = [c for c in world.repo(BENCH_REPO).comments.values() if "sweepbot:regression-note:" in c.body]
    assert len(notes) == 1

    # every canary branch was deleted once its sweep was done
    assert [r for r in world.repo(BENCH_REPO).refs if "sweepbot/canary/" in r] == []

    # 5. canaries never delayed the real sweep's jobs (the scheduler's records)
    _assert_canaries_never_delayed_real_work(bot, real.sweep.id)

    # 6. the dashboard's nightly-series page: the chart, the regression, the budget
    from fastapi.testclient import TestClient

    from app.web.main import create_app

    with TestClient(create_app()) as client:
        index = client.get("/nightlies")
        assert index.status_code == 200 and KEY in index.text and "runner-hours" in index.text
        page = client.get(f"/nightlies/{BENCH_REPO}/{KEY}")
        assert page.status_code == 200, page.text
        assert 'id="nightly-mean_tpot_ms"' in page.text and "recovered" in page.text
        assert first_bad_tag[:15] in page.text
        api = client.get(f"/api/nightlies/{BENCH_REPO}/{KEY}").json()
        assert api["regressions"][0]["first_bad"] == first_bad_tag
        assert api["budget"]["used_hours"] > 0 and api["budget"]["budget_hours"] is None
        assert "nightly canary" in client.get("/sweeps").text


def _assert_canaries_never_delayed_real_work(bot: dict[str, Any], real_sweep: int) -> None:
    """No canary held a runner while a job of the real sweep waited, past the tick that saw it waiting.

    The real side comes from the scheduler's records (the sweep's creation in the audit log, each
    job's dispatch time); the canaries' runner occupancy from the runs the scheduler dispatched for
    them (audit ``sweep.dispatch``), as the simulated fleet ran them (start to completion or cancel).
    """
    factory: sessionmaker[Session] = bot["factory"]
    world = bot["world"]
    ticks: list[tuple[datetime, datetime]] = bot["ticks"]
    with factory() as s:
        real_jobs = s.scalars(select(SweepJob).where(SweepJob.sweep_id == real_sweep)).all()
        assert real_jobs and {j.state for j in real_jobs} == {JobState.SUCCEEDED}
        created = next(
            _aware(a.at)
            for a in s.scalars(select(AuditEntry).where(AuditEntry.action == "sweep.create"))
            if (a.detail or {}).get("sweep") == real_sweep
        )
        canary_sweeps = set(s.scalars(select(Sweep.id).where(Sweep.reason == CANARY_REASON)).all())
        canary_runs = [
            int((a.detail or {})["run_id"])
            for a in s.scalars(select(AuditEntry).where(AuditEntry.action == "sweep.dispatch"))
            if (a.detail or {}).get("sweep") in canary_sweeps and (a.detail or {}).get("run_id")
        ]
        preempts = s.scalars(select(AuditEntry).where(AuditEntry.action == "canary.preempt")).all()
    assert created is not None and canary_runs
    busy: list[tuple[float, float]] = []
    with world.lock:
        for run_id in canary_runs:
            for jid in world.runs[run_id].jobs:
                job = world.jobs[jid]
                if job.started_at is not None:
                    busy.append((job.started_at, job.completed_at or time.time()))
    first = min((t for t in ticks if t[0] >= created), key=lambda t: t[0])  # the first tick after it queued
    seen = first[1]
    if any(b[0] <= first[0].timestamp() < b[1] for b in busy):  # a canary still ran then: preempted
        assert preempts, "the canary running when the real sweep arrived was not preempted"
    for job in real_jobs:
        released = _aware(job.dispatched_at)
        assert released is not None
        window = (seen.timestamp(), released.timestamp())
        overlapping = [b for b in busy if b[0] < window[1] and b[1] > window[0]]
        assert not overlapping, f"job {job.id} waited while a canary held a runner: {overlapping}"
