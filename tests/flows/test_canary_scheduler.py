"""Canary sweeps in the scheduler: idle runners only, preempted by real work, within the budget."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.adapters.github.errors import Forbidden
from app.core.recipes import expand_points, parse_master
from app.core.sweepspec import SweepFilters
from app.flows.repo.bench_repo import clear_capacity_cache
from app.flows.scheduler.tick import tick
from app.flows.sweeps import ring
from app.flows.sweeps.create import create_sweep
from app.flows.sweeps.job_finish import finish_job
from app.flows.sweeps.request import request_sweep
from app.models.core import AuditEntry
from app.models.dispatchruns import DispatchRun
from app.models.sweeps import CANARY_PRIORITY, CANARY_REASON, JobState, SweepJob
from app.models.tracking import BotConfigRecord
from app.store.jobs import inflight_slots
from tests.sweep_fakes import (
    KEY,
    REPO,
    FakeCancel,
    FakeGitHub,
    FakeRequest,
    FakeTick,
    bench_files,
    runs_complete,
)


@pytest.fixture
def env(db_session: Session, settings_env: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    from app.db import session_factory
    from app.settings import reset_settings_cache

    settings_env.setenv("SWEEPBOT_RUNNER_CAPACITY", "mi355x=4")
    # These rules are about slots on a 4-runner label; the default test-config dispatch runs both
    # seq-lens of the fixture key at a conc (6-8 slots). A template that also names {seq} (in a
    # declared input) keeps one dispatch per (seq, conc), as these scenarios were written for.
    settings_env.setenv(
        "SWEEPBOT_DISPATCH_INPUTS",
        '{"generate-cli-command": "test-config --config-files {config_file} --config-keys {key} --conc {conc}'
        '{evals}", "ref": "{head_sha}", "test-name": "{run_name}", "pr-labels-json": "[\\"{seq}\\"]"}',
    )
    reset_settings_cache()
    clear_capacity_cache()
    settings_env.setattr(ring, "enqueue", lambda task, *args: None)
    yield {"factory": session_factory(), "mp": settings_env}


def _canary(factory: sessionmaker[Session], gh: FakeGitHub, tag: str, conc: tuple[int, ...] = (4, 64)) -> int:
    master = parse_master(bench_files()[".github/configs/amd-master.yaml"])
    points = expand_points(master, KEY, seq="8k1k", conc=list(conc), tp=4)
    with factory() as s:
        sweep, created, superseded = create_sweep(
            s,
            FakeCancel(gh),
            repo=REPO,
            pr_number=0,
            head_sha="c" * 40,
            head_ref=f"sweepbot/canary/{KEY}/{tag}",
            base_ref="main",
            head_repo=REPO,
            is_fork=False,
            config_key=KEY,
            config_path=".github/configs/amd-master.yaml",
            image=f"vllm/vllm-openai-rocm:{tag}",
            fingerprint="f" * 64,
            points=[p.to_json() for p in points],
            requested_by="sweepbot",
            reason=CANARY_REASON,
            priority=CANARY_PRIORITY,
            supersede=False,
        )
        s.commit()
        assert created and superseded == []
        return sweep.id


def _real(factory: sessionmaker[Session], gh: FakeGitHub, conc: tuple[int, ...]) -> int:
    with factory() as s:
        req = request_sweep(
            s,
            FakeRequest(gh),
            repo=REPO,
            pr_number=7,
            config_key=KEY,
            requested_by="maint",
            reason="command",
            filters=SweepFilters(seq="8k1k", conc=conc, tp=4),
        )
        s.commit()
        return req.sweep.id


def _states(factory: sessionmaker[Session], sweep_id: int) -> list[str]:
    with factory() as s:
        return [
            j.state
            for j in s.scalars(select(SweepJob).where(SweepJob.sweep_id == sweep_id).order_by(SweepJob.id))
        ]


def test_a_canary_runs_on_an_idle_label_and_two_canaries_do_not_supersede_each_other(
    env: dict[str, Any],
) -> None:
    gh = FakeGitHub()
    a = _canary(env["factory"], gh, "nightly-" + "1" * 40)
    b = _canary(env["factory"], gh, "nightly-" + "2" * 40)
    res = tick(env["factory"], lambda s: FakeTick(gh))
    assert res.dispatched_runs == 4  # conc 4 and 64 of each canary: 4 runners
    assert set(_states(env["factory"], a)) == set(_states(env["factory"], b)) == {JobState.DISPATCHED}
    assert all(d["ref"].startswith("sweepbot/canary/") for d in gh.dispatches)


def test_a_canary_waits_while_real_work_waits(env: dict[str, Any]) -> None:
    from app.settings import reset_settings_cache

    # The strict hold: real work is held at the label's runners, so the plan reaches the canary and
    # says why it waits (with the default auto overcommit real work takes the label past its
    # runners and the plan stops before the canary: test_a_canary_never_joins_real_work_waiting_on_github).
    env["mp"].setenv("SWEEPBOT_RUNNER_OVERCOMMIT", "0")
    reset_settings_cache()
    gh = FakeGitHub()
    real = _real(env["factory"], gh, (4, 8, 16, 32, 64))  # more runner slots than the label has
    canary = _canary(env["factory"], gh, "nightly-" + "1" * 40)
    res = tick(env["factory"], lambda s: FakeTick(gh))
    assert res.dispatched_runs >= 1
    assert JobState.QUEUED in _states(env["factory"], real)
    assert _states(env["factory"], canary) == [JobState.QUEUED, JobState.QUEUED]
    assert any("canary waits" in h and "real work queued" in h for h in res.held)
    # runners free up: the waiting real jobs take them; the canary goes only once none waits
    while JobState.QUEUED in _states(env["factory"], real):
        with env["factory"]() as s:
            for job in s.scalars(
                select(SweepJob).where(SweepJob.sweep_id == real, SweepJob.state == JobState.DISPATCHED)
            ):
                finish_job(s, job.id, JobState.SUCCEEDED)
            s.commit()
        runs_complete(env["factory"], gh, real)
        res = tick(env["factory"], lambda s: FakeTick(gh))
        if JobState.QUEUED in _states(env["factory"], real):
            assert _states(env["factory"], canary) == [JobState.QUEUED, JobState.QUEUED]
    with env["factory"]() as s:
        for job in s.scalars(
            select(SweepJob).where(SweepJob.sweep_id == real, SweepJob.state == JobState.DISPATCHED)
        ):
            finish_job(s, job.id, JobState.SUCCEEDED)
        s.commit()
    runs_complete(env["factory"], gh, real)
    tick(env["factory"], lambda s: FakeTick(gh))
    assert _states(env["factory"], canary) == [JobState.DISPATCHED, JobState.DISPATCHED]


@pytest.mark.parametrize("overcommit", ["auto", "3"])
def test_a_canary_never_joins_real_work_waiting_on_github(env: dict[str, Any], overcommit: str) -> None:
    """Overcommitted real work is all out of the bot's queue, some of it waiting in GitHub's for a
    runner: no runner is idle, so the canary waits (the jobs the overcommit lets wait are real work's)."""
    from app.settings import reset_settings_cache

    env["mp"].setenv("SWEEPBOT_RUNNER_OVERCOMMIT", overcommit)
    reset_settings_cache()
    gh = FakeGitHub()
    real = _real(env["factory"], gh, (4, 8))
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 2
    assert set(_states(env["factory"], real)) == {JobState.DISPATCHED}
    with env["factory"]() as s:
        assert inflight_slots(s, "mi355x") > 4  # more in flight than the 4 runners
    canary = _canary(env["factory"], gh, "nightly-" + "1" * 40)
    res = tick(env["factory"], lambda s: FakeTick(gh))
    assert res.dispatched_runs == 0 and _states(env["factory"], canary) == [JobState.QUEUED] * 2
    if overcommit == "auto":  # no runner free: nothing could go, the plan reaches no sweep
        assert res.held == []
    else:  # room for 3 waiting on GitHub, the canary is reached and says why it waits
        assert any("slot(s) needed, 0 free on mi355x" in h for h in res.held), res.held
    with env["factory"]() as s:
        for job in s.scalars(select(SweepJob).where(SweepJob.sweep_id == real)):
            finish_job(s, job.id, JobState.SUCCEEDED)
        s.commit()
    runs_complete(env["factory"], gh, real)
    tick(env["factory"], lambda s: FakeTick(gh))
    assert _states(env["factory"], canary) == [JobState.DISPATCHED] * 2


def test_real_work_preempts_running_canaries(env: dict[str, Any]) -> None:
    gh = FakeGitHub()
    c1 = _canary(env["factory"], gh, "nightly-" + "1" * 40)
    c2 = _canary(env["factory"], gh, "nightly-" + "2" * 40)
    tick(env["factory"], lambda s: FakeTick(gh))
    assert _states(env["factory"], c1) + _states(env["factory"], c2) == [JobState.DISPATCHED] * 4
    order = [d["run_id"] for d in gh.dispatches]  # dispatch order: the newest last
    real = _real(env["factory"], gh, (64,))
    with env["factory"]() as s:
        slots = s.scalars(select(SweepJob.slots).where(SweepJob.sweep_id == real)).first()
    assert slots is not None and 1 < slots < 4  # the conc-64 dispatch of the key occupies `slots` runners
    res = tick(env["factory"], lambda s: FakeTick(gh))
    # as many canary runs cancelled as the real dispatch needs, the real sweep released in the same tick
    assert len(gh.cancelled) == slots and set(gh.cancelled) <= set(order)
    assert _states(env["factory"], real) == [JobState.DISPATCHED]
    states = _states(env["factory"], c1) + _states(env["factory"], c2)
    assert states.count(JobState.QUEUED) == slots and states.count(JobState.DISPATCHED) == 4 - slots
    assert res.dispatched_runs == 1
    with env["factory"]() as s:
        audits = s.scalars(select(AuditEntry).where(AuditEntry.action == "canary.preempt")).all()
        assert len(audits) == slots
        requeued = s.scalars(select(SweepJob).where(SweepJob.state == JobState.QUEUED)).all()
        assert all("preempted by real work" in (j.reason or "") for j in requeued)
        assert all(j.attempts == 0 and j.run_id is None for j in requeued)
        assert inflight_slots(s, "mi355x") == 4
    # the preempted canaries wait until the real run is done, then run again
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 0
    with env["factory"]() as s:
        for job in s.scalars(select(SweepJob).where(SweepJob.sweep_id == real)):
            finish_job(s, job.id, JobState.SUCCEEDED)
        s.commit()
    # its filtered-out points hold their runners until GitHub says the run completed
    early = tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs
    runs_complete(env["factory"], gh, real)
    assert early < slots and early + tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == slots


def test_the_weekly_budget_holds_canaries(env: dict[str, Any]) -> None:
    gh = FakeGitHub()
    with env["factory"]() as s:
        s.add(
            BotConfigRecord(
                repo=REPO,
                ok=True,
                present=True,
                config={"version": 1, "watch-nightlies": {"keys": [], "budget-runner-hours-per-week": 1.0}},
            )
        )
        s.commit()
    done = _canary(env["factory"], gh, "nightly-" + "1" * 40, conc=(4,))
    tick(env["factory"], lambda s: FakeTick(gh))
    with env["factory"]() as s:
        job = s.scalars(select(SweepJob).where(SweepJob.sweep_id == done)).one()
        job.dispatched_at = datetime.now(UTC) - timedelta(hours=1, minutes=10)
        s.commit()
        finish_job(s, job.id, JobState.SUCCEEDED)
        s.commit()
    waiting = _canary(env["factory"], gh, "nightly-" + "2" * 40, conc=(4,))
    res = tick(env["factory"], lambda s: FakeTick(gh))
    assert _states(env["factory"], waiting) == [JobState.QUEUED]
    assert any("canary budget" in h and "of 1.0 runner-hours" in h for h in res.held)
    # real work is not bound by the canary budget
    _real(env["factory"], gh, (8,))
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 1


def test_a_preempted_canary_whose_cancel_github_refuses_keeps_its_runners(env: dict[str, Any]) -> None:
    """GitHub refused to cancel the run (403 "Must have admin rights to Repository."): the run goes
    on, so its runners stay counted until GitHub says it completed, and the refusal is kept."""
    gh = FakeGitHub()
    _canary(env["factory"], gh, "nightly-" + "1" * 40)
    _canary(env["factory"], gh, "nightly-" + "2" * 40)
    tick(env["factory"], lambda s: FakeTick(gh))
    real = _real(env["factory"], gh, (64,))
    gh.cancel_errors = [
        Forbidden(403, f"run {i} was not cancelled", {"message": "Must have admin rights to Repository."})
        for i in range(10)
    ]
    res = tick(env["factory"], lambda s: FakeTick(gh))
    refused = [int(e.split()[1].rstrip(":")) for e in res.errors]
    assert refused and set(refused) == set(gh.cancel_posts) and not gh.cancelled
    assert all(e.endswith("(refused: not asked again)") for e in res.errors)
    with env["factory"]() as s:
        rows = {r.run_id: r for r in s.scalars(select(DispatchRun).where(DispatchRun.run_id.in_(refused)))}
        assert {rid: r.completed_at for rid, r in rows.items()} == dict.fromkeys(refused)  # still held
        audits = s.scalars(select(AuditEntry).where(AuditEntry.action == "canary.preempt_failed")).all()
        assert sorted((a.detail or {})["run_id"] for a in audits) == sorted(refused)
        assert all(a.outcome == "failed" for a in audits)
        assert all(str((a.detail or {})["error"]).endswith("(refused: not asked again)") for a in audits)
        assert inflight_slots(s, "mi355x") >= 4  # the canary runs still hold the label's 4 runners
    # the requeued canaries do not go out onto those runners, and the refused runs are not asked again
    assert tick(env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 0
    assert sorted(gh.cancel_posts) == sorted(refused)
    assert _states(env["factory"], real) == [JobState.DISPATCHED]
