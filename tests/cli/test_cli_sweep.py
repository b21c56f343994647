"""`sweepbot sweep create|status|cancel`, `sweepbot queue` and `sweepbot report` through typer's
CliRunner, on a migrated SQLite database and an in-process simulated GitHub with the seed story."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session
from typer.testing import CliRunner, Result

from app.core.sweepspec import point_order
from app.flows.repo.bench_repo import clear_capacity_cache
from app.flows.scheduler.repair import repair_jobs
from app.flows.scheduler.tick import tick
from app.flows.sweeps import ring
from sim.scenario import BENCH_REPO, RECIPE_BRANCH, SeedScenario
from sim.server import SimServer
from sim.world import SimSettings
from tests.helpers.wait import wait_for

KEY = "minimaxm3-fp4-mi355x-vllm"
PR = 2104


@contextmanager
def _sim(settings_env: pytest.MonkeyPatch, time_scale: float) -> Iterator[Any]:
    from app.adapters.permissions import clear_cache
    from app.settings import reset_settings_cache

    with SimServer(settings=SimSettings(time_scale=time_scale, seed=11)) as sim:
        SeedScenario(sim.world).load()
        settings_env.setenv("SWEEPBOT_GITHUB_API_URL", sim.github_api_url)
        # The simulator's registry is on loopback: only an operator-configured origin may be.
        settings_env.setenv("SWEEPBOT_REGISTRY_URLS", f"docker.io={sim.url}/hub,ghcr.io={sim.url}")
        settings_env.setenv("SWEEPBOT_GITHUB_TOKEN", "sim-token")
        settings_env.setenv("SWEEPBOT_GITHUB_SECONDS_BETWEEN_REQUESTS", "0")
        settings_env.setenv("SWEEPBOT_GITHUB_SECONDS_BETWEEN_WRITES", "0")
        reset_settings_cache()
        clear_capacity_cache()
        clear_cache()
        yield sim.world
        clear_cache()


@pytest.fixture
def rung(settings_env: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...]]]:
    """Tasks the code under test enqueued (the broker is not part of these tests)."""

    calls: list[tuple[str, tuple[Any, ...]]] = []
    settings_env.setattr(ring, "enqueue", lambda task, *args: calls.append((task, args)))
    return calls


@pytest.fixture
def slow_world(db_session: Session, settings_env: pytest.MonkeyPatch) -> Iterator[Any]:
    """Benchmark jobs take tens of seconds: runs stay in flight for the whole test."""
    with _sim(settings_env, 0.05) as world:
        yield world


@pytest.fixture
def fast_world(db_session: Session, settings_env: pytest.MonkeyPatch) -> Iterator[Any]:
    """Benchmark jobs finish in a fraction of a second."""
    with _sim(settings_env, 0.0002) as world:
        yield world


def cli(*args: str) -> Result:
    from app.cli import cli as app

    return CliRunner().invoke(app, list(args))


def _gw(session: Session) -> Any:
    from app.adapters.github.gateway import gateway
    from app.settings import get_settings

    return gateway(get_settings(), session)


def _factory() -> Any:
    from app.db import session_factory

    return session_factory()


def _create(*extra: str) -> Result:
    return cli("sweep", "create", "--repo", BENCH_REPO, "--pr", str(PR), "--key", KEY, *extra)


def test_create_then_status_lists_points_in_ascending_conc(
    slow_world: Any, db_session: Session, rung: list[Any]
) -> None:
    from app.models.sweeps import Sweep, SweepJob

    out = _create("--conc", "32,64,128")
    assert out.exit_code == 0, out.output
    assert "Sweep 1 queued" in out.output and "3 point(s), conc 32, 64, 128" in out.output
    assert "on `mi355x` (9 runner(s)" in out.output and "runners.yaml" in out.output
    assert ("sweepbot.scheduler_tick", ()) in rung  # the sweep starts without waiting for beat

    jobs = db_session.scalars(select(SweepJob).order_by(SweepJob.id)).all()
    # Release order is fixed at creation: largest conc first.
    assert [(j.conc, j.position) for j in jobs] == [(32, 2), (64, 1), (128, 0)]
    sweep = db_session.scalars(select(Sweep)).one()
    assert sweep.requested_by == "cli" and sweep.reason == "api" and sweep.state == "active"

    js = cli("sweep", "status", "1", "--json")
    assert js.exit_code == 0, js.output
    data = json.loads(js.output)
    assert (data["id"], data["repo"], data["pr"], data["config_key"]) == (1, BENCH_REPO, PR, KEY)
    assert (data["state"], data["done"], data["total"], data["counts"]) == ("active", 0, 3, {"queued": 3})
    assert [j["conc"] for j in data["jobs"]] == [32, 64, 128]
    assert [j["position"] for j in data["jobs"]] == [2, 1, 0]
    assert data["head_sha"] == slow_world.pull_head_sha(slow_world.pull(BENCH_REPO, PR))

    text = cli("sweep", "status", "1")
    assert text.exit_code == 0, text.output
    assert "sweep 1" in text.output and f"{BENCH_REPO}#{PR}" in text.output and "(0/3 done)" in text.output
    rows = [ln for ln in text.output.splitlines() if "queued" in ln and "│" in ln]
    assert [int(r.split("│")[4]) for r in rows] == [32, 64, 128]  # the conc column, top to bottom

    # The same request again converges on the open sweep.
    again = _create("--conc", "32,64,128")
    assert again.exit_code == 0 and "Sweep 1 is already queued" in again.output
    assert len(db_session.scalars(select(Sweep)).all()) == 1


def test_tick_releases_largest_conc_first_and_status_follows(
    slow_world: Any, db_session: Session, rung: list[Any]
) -> None:

    assert _create("--conc", "1,2,4,8,16,32,64,128,256,512").exit_code == 0
    res = tick(_factory(), _gw)
    # nine runners, one slot per dispatch: the evaluated points' (512, 32) eval-only jobs would be
    # e2e-tests.yml's `eval /`, which the real file never expands (get-jobs never sets EVALS), so
    # they hold no runner: nine dispatches fill them
    assert res.dispatched_runs == 9
    data = json.loads(cli("sweep", "status", "1", "--json").output)
    by_conc = {j["conc"]: j for j in data["jobs"]}
    assert [j["conc"] for j in data["jobs"]] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    assert {c for c in by_conc if by_conc[c]["state"] == "queued"} == {1}  # the shortest waits
    assert all(by_conc[c]["state"] == "dispatched" and by_conc[c]["run_url"] for c in by_conc if c > 1)


def test_create_errors_exit_2_with_the_fix(slow_world: Any, db_session: Session, rung: list[Any]) -> None:
    typo = cli("sweep", "create", "--repo", BENCH_REPO, "--pr", str(PR), "--key", "minimaxm3-fp4-mi355x-vlm")
    assert typo.exit_code == 2 and "did you mean" in typo.output
    bad_conc = _create("--conc", "4..x")
    assert bad_conc.exit_code == 2 and "32,64" in bad_conc.output and "4..256" in bad_conc.output
    no_match = _create("--conc", "3000..4000")
    assert no_match.exit_code == 2 and "matches none" in no_match.output
    no_pr = cli("sweep", "create", "--repo", BENCH_REPO, "--pr", "9999", "--key", KEY)
    assert no_pr.exit_code == 2 and "9999" in no_pr.output and "Traceback" not in no_pr.output
    bad_repo = cli("sweep", "create", "--repo", "not-a-repo", "--pr", "1", "--key", KEY)
    assert bad_repo.exit_code == 2 and "OWNER/NAME" in bad_repo.output
    bad_prio = _create("--priority", "urgent")
    assert bad_prio.exit_code == 2 and "priority" in bad_prio.output
    for cmd in (("sweep", "status", "42"), ("sweep", "cancel", "42"), ("report", "42")):
        got = cli(*cmd)
        assert got.exit_code == 2 and "sweep 42 does not exist" in got.output, cmd
    from app.models.sweeps import Sweep

    assert db_session.scalars(select(Sweep)).all() == []


def _sim_open_jobs(world: Any) -> list[Any]:
    with world.lock:
        return [j for j in world.jobs.values() if j.status != "completed"]


def test_cancel_cancels_queued_jobs_and_running_runs(
    slow_world: Any, db_session: Session, rung: list[Any]
) -> None:
    from app.models.core import AuditEntry
    from app.models.sweeps import SweepJob

    assert _create("--seq", "8k1k").exit_code == 0
    tick(_factory(), _gw)
    wait_for(
        lambda: sum(j.status == "in_progress" for j in _sim_open_jobs(slow_world)) == 9, "9 running jobs"
    )
    repair_jobs(_factory(), _gw)  # the poll fallback sees the runs in progress
    db_session.expire_all()
    states = sorted(j.state for j in db_session.scalars(select(SweepJob)))
    # 9 runs for 9 runners, largest conc first: the evaluated points' (512, 32) eval-only jobs would
    # be e2e-tests.yml's `eval /`, which the real file never expands, so their dispatches count
    # none: 9 points running, 1 queued, no runner idle
    assert states == ["queued"] * 1 + ["running"] * 9

    out = cli("sweep", "cancel", "1", "--reason", "wrong image")
    assert out.exit_code == 0, out.output
    assert out.output.strip().splitlines()[-1] == "sweep 1: cancelled"  # after the audit log lines
    db_session.expire_all()
    assert {j.state for j in db_session.scalars(select(SweepJob))} == {"cancelled"}
    wait_for(lambda: not _sim_open_jobs(slow_world), "the sim to stop the cancelled runs", 5)
    with slow_world.lock:
        assert {r.conclusion for r in slow_world.runs.values()} == {"cancelled"}
        assert len(slow_world.runs) == 9
    audit = db_session.scalars(select(AuditEntry).where(AuditEntry.action == "sweep.cancel")).one()
    assert audit.actor == "cli" and audit.outcome == "ok" and audit.detail is not None
    assert len(audit.detail["runs_cancelled"]) == 9 and audit.detail["reason"] == "wrong image"
    assert tick(_factory(), _gw).dispatched_runs == 0
    # Cancelling again is a no-op that still answers.
    again = cli("sweep", "cancel", "1")
    assert again.exit_code == 0 and "cancelled" in again.output


def test_queue_shows_busy_free_queued_and_progress(
    slow_world: Any, db_session: Session, rung: list[Any]
) -> None:

    from app.core.bot_config import parse_bot_config
    from app.models.tracking import BotConfigRecord

    # the bot's own queue is what this shows: the repo dispatches (label mode would hand the full
    # sweep below to the repo's run-sweep.yml)
    cfg = parse_bot_config("sweep:\n  mode: dispatch\n").model_dump(mode="json", by_alias=True)
    db_session.add(BotConfigRecord(repo=BENCH_REPO, ok=True, present=True, config=cfg))
    db_session.commit()
    empty = cli("queue")
    assert empty.exit_code == 0 and "No runner label has work." in empty.output
    # A second recipe PR from another branch of the same repo.
    head = slow_world.repo(BENCH_REPO).refs[f"refs/heads/{RECIPE_BRANCH}"]
    slow_world.set_ref(BENCH_REPO, "refs/heads/second-recipe", head, pusher="carol-writer")
    second = slow_world.open_pull(BENCH_REPO, "second-recipe", "main", "second", user="carol-writer")
    assert _create("--seq", "8k1k").exit_code == 0
    other = cli("sweep", "create", "--repo", BENCH_REPO, "--pr", str(second.number), "--key", KEY)
    assert other.exit_code == 0, other.output
    tick(_factory(), _gw)

    js = cli("queue", "--json")
    assert js.exit_code == 0, js.output
    (label,) = json.loads(js.output)
    assert (label["label"], label["capacity"], label["busy"], label["free"]) == ("mi355x", 9, 9, 0)
    assert label["queued"] == 11 and not label["paused"]
    sweeps = {s["pr"]: s for s in label["sweeps"]}
    assert set(sweeps) == {PR, second.number}
    # Round-robin: nine dispatches (the evaluated points' `eval /` jobs never expand in the real
    # file: no runner of their own) split 5 / 4 between the two PRs.
    assert sorted(s["running"] for s in sweeps.values()) == [4, 5]
    assert all(s["total"] == 10 and s["done"] == 0 for s in sweeps.values())

    text = cli("queue")
    assert text.exit_code == 0, text.output
    assert "mi355x: 9 busy / 0 free / 11 queued (capacity 9" in text.output
    assert f"{BENCH_REPO}#{PR}" in text.output and f"#{second.number}" in text.output
    assert text.output.count("0/10") == 2


def test_report_prints_the_comment_markdown(fast_world: Any, db_session: Session, rung: list[Any]) -> None:
    from app.flows.results.collect import collect_job
    from app.models.sweeps import SweepJob

    assert _create("--conc", "32,64").exit_code == 0
    running = cli("report", "1")
    assert running.exit_code == 0, running.output
    assert "**Running**" in running.output and "0/2 points done" in running.output

    tick(_factory(), _gw)
    wait_for(lambda: len(fast_world.runs) == 2 and not _sim_open_jobs(fast_world), "the two runs")
    repair_jobs(_factory(), _gw)
    db_session.expire_all()
    for job in db_session.scalars(select(SweepJob).where(SweepJob.run_conclusion == "success")).all():
        collect_job(db_session, _gw(db_session), job.id)
    db_session.commit()

    out = cli("report", "1")
    assert out.exit_code == 0, out.output
    body = out.output
    assert body.startswith(f"### sweepbot: `{KEY}` — vLLM vs ATOM")
    assert "**Finished**: 2 points (2 succeeded)" in body
    assert "| conc | vLLM | ATOM ref | gap | verdict |" in body
    assert "16.74 ms" in body and "25.00 ms" in body
    assert 'x-axis "conc" [32, 64]' in body and "xychart-beta" in body
    assert f"<!-- sweepbot:report key={KEY} -->" in body
    # Released 64 first, listed 32 first: the Runs table reads as a curve.
    runs = [ln for ln in body.splitlines() if ln.startswith(("| 32 | 8k1k", "| 64 | 8k1k"))]
    assert [r.split("|")[1].strip() for r in runs] == ["32", "64"] and all(
        "/actions/runs/" in r for r in runs
    )


def test_point_order_is_largest_conc_first_ties_in_repo_order() -> None:

    points = [
        {"conc": 1, "tp": 8},
        {"conc": 64, "tp": 8},
        {"conc": 1, "tp": 4},
        {"conc": 64, "tp": 4},
        {"conc": 8, "tp": 4},
    ]
    # position per point: conc 64 (tp 8, then tp 4), conc 8, then conc 1 (tp 8, then tp 4)
    assert point_order(points) == [3, 0, 4, 1, 2]
    assert point_order([]) == []
