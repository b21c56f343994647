"""Routine faults under load: the seed story on a PostgreSQL and a Redis of the test's own, with
separate API, worker and beat processes and the simulated GitHub, while a steady stream of
webhooks arrives and, with the sweep in flight, the worker is SIGKILLed, Redis is restarted
(losing every queued message), PostgreSQL is restarted (crash stop), and GitHub answers 5xx and
secondary rate limits.

Afterwards: every delivery the API acknowledged (2xx) is processed exactly once in effect (one
row, done or ignored, never failed); the story's effects are all there and none doubled (one
status comment, one bump, one report, one dispatch per point); the simulator's webhooks that
failed while the database was down are redelivered (app/core/redelivery.py) and processed; the time
to recover is printed.
"""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from tests.helpers.ownservices import OwnPostgres, OwnRedis, ServiceUnavailable
from tests.helpers.signing import sign

pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def own_services(tmp_path: Path) -> Iterator[tuple[OwnPostgres, OwnRedis]]:
    import os

    try:
        pg, redis = OwnPostgres(), OwnRedis(tmp_path)
        pg.start()
        redis.start()
    except ServiceUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the fault test needs its own PostgreSQL and Redis: {exc}")
        pytest.skip(str(exc))
    try:
        yield pg, redis
    finally:
        redis.stop()
        pg.remove()


class WebhookStream:
    """Signed deliveries of an event no handler takes (``star``), ~20 a second, from a thread."""

    def __init__(self, url: str, secret: str) -> None:
        self.url, self.secret = url, secret
        self.answers: dict[str, int] = {}  # delivery id -> HTTP status (0: connection error)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="webhook-stream", daemon=True)

    def __enter__(self) -> WebhookStream:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        with httpx.Client(timeout=10) as client:
            n = 0
            while not self._stop.is_set():
                n += 1
                delivery_id = f"stream-{n:05d}-{uuid.uuid4().hex[:6]}"
                body = orjson.dumps(
                    {"action": "created", "n": n, "repository": {"full_name": "SemiAnalysisAI/InferenceX"}}
                )
                headers = {
                    "X-GitHub-Event": "star",
                    "X-GitHub-Delivery": delivery_id,
                    "Content-Type": "application/json",
                    "X-Hub-Signature-256": sign(body, self.secret),
                }
                try:
                    status = client.post(self.url, content=body, headers=headers).status_code
                except httpx.HTTPError:
                    status = 0
                self.answers[delivery_id] = status
                self._stop.wait(0.05)

    def acknowledged(self) -> set[str]:
        return {d for d, status in list(self.answers.items()) if 200 <= status < 300}


def _rows(ids: set[str]) -> dict[str, tuple[str, int]]:
    from sqlalchemy import select

    from app.db import session_scope
    from app.models import Delivery

    out: dict[str, tuple[str, int]] = {}
    with session_scope() as s:
        for delivery_id, status, attempts in s.execute(
            select(Delivery.id, Delivery.status, Delivery.attempts).where(Delivery.id.like("stream-%"))
        ):
            out[delivery_id] = (status, attempts)
    return {k: v for k, v in out.items() if k in ids}


def _final(guids: set[str]) -> set[str]:
    from sqlalchemy import select

    from app.db import session_scope
    from app.models import Delivery

    with session_scope() as s:
        return set(
            s.scalars(
                select(Delivery.id).where(Delivery.id.in_(guids), Delivery.status.in_(("done", "ignored")))
            )
        )


def _recovered(guids: set[str]) -> bool:
    return _final(guids) == guids


def _settled(ids: set[str]) -> bool:
    rows = _rows(ids)
    return len(rows) == len(ids) and all(status in ("done", "ignored") for status, _ in rows.values())


def test_routine_faults_during_a_sweep_lose_and_double_nothing(
    own_services: tuple[OwnPostgres, OwnRedis], tmp_path: Path, settings_env: pytest.MonkeyPatch
) -> None:
    from app.db import dispose_engines, session_factory
    from app.settings import Settings, reset_settings_cache
    from devstack.demo import play_story
    from devstack.launcher import SIM_CADENCE, stack
    from devstack.mergestory import sweep_mode_setup
    from sim.app import admin_action
    from sim.scenario import SeedScenario
    from sim.server import SimServer, free_port
    from sim.world import SimSettings

    pg, redis = own_services
    settings_env.setenv("SWEEPBOT_DATABASE_URL", pg.url)
    settings_env.setenv("SWEEPBOT_BROKER_URL", redis.url)
    reset_settings_cache()
    dispose_engines()
    settings = Settings(data_dir=tmp_path / "data", database_url=pg.url, broker_url=redis.url)
    extra = {
        "SWEEPBOT_QUEUE_NAME": f"faults-{uuid.uuid4().hex[:8]}",
        "SWEEPBOT_DELIVERY_LEASE_SECONDS": "10",
        "SWEEPBOT_CONSUMPTION_STALL_SECONDS": "15",
        # The worker SIGKILLed mid-tick leaves claimed jobs with no run: re-queue them in seconds.
        "SWEEPBOT_DISPATCH_LOST_GRACE_SECONDS": "8",
        # Faster than `sweepbot up`'s cadence, so recovery fits the test's time bound.
        "SWEEPBOT_REAPER_INTERVAL": "1",
        "SWEEPBOT_REAPER_GRACE_SECONDS": "3",
        "SWEEPBOT_JOB_REPAIR_INTERVAL": "2",
        "SWEEPBOT_REDELIVERY_INTERVAL": "2",
        "SWEEPBOT_LOG_LEVEL": "INFO",
    }
    timings: dict[str, float] = {}
    faults: list[str] = []

    with SimServer(settings=SimSettings(time_scale=0.001, seed=16)) as sim:
        scenario = SeedScenario(sim.world)
        repo, pr = "SemiAnalysisAI/InferenceX", 2104
        # Failed webhooks are recovered the way GitHub documents: list the hook's deliveries, ask
        # for a redelivery of each failed one (app/core/redelivery.py).
        extra["SWEEPBOT_REDELIVERY_HOOKS"] = f"{repo}:{sim.world.hook_id}"
        with stack(port=free_port(), sim=sim, settings=settings, extra_env=extra) as running:
            secret = sim.world.settings.webhook_secret
            with WebhookStream(f"{running.api_url}/webhooks/github", secret) as stream:

                def chaos() -> None:
                    """With the sweep in flight: each fault in turn, the stream running throughout."""
                    running.kill("worker", signal.SIGKILL)
                    faults.append("worker SIGKILLed")
                    time.sleep(1.0)
                    running.start_process("worker", "worker")
                    redis.restart(down_seconds=3.0)
                    faults.append("Redis restarted (queued messages lost)")
                    time.sleep(1.0)
                    pg.stop()
                    for n in range(3):  # GitHub sends while the database is down: answered 503
                        sim.world.add_comment(repo, pr, "bob-maintainer", f"looks good ({n})")
                    time.sleep(2.0)  # the sim's sender gives up after its 3 attempts
                    pg.start()
                    faults.append("PostgreSQL crash-stopped (3 webhooks sent meanwhile) and restarted")
                    admin_action(sim.world, "faults", {"operation": "*", "fail_next": 6, "status": 502})
                    admin_action(
                        sim.world,
                        "faults",
                        {"operation": "*", "fail_next": 3, "status": 403, "retry_after": 2},
                    )
                    faults.append("GitHub: 6 x 502, 3 x 403 secondary rate limit (Retry-After: 2)")
                    timings["faults_over"] = time.monotonic()

                run = play_story(
                    sim.world,
                    scenario,
                    session_factory(),
                    say=lambda line: None,
                    poll_interval=float(SIM_CADENCE["SWEEPBOT_POLL_INTERVAL"]),
                    timeout=150,
                    on_sweep_started=chaos,
                    # one dispatch per job is what this counts: the bot's own queue, not label mode
                    setup=lambda: sweep_mode_setup(sim.world, scenario, "dispatch"),
                )
                time.sleep(1.0)  # a little more stream after the story
            acknowledged = stream.acknowledged()
            with sim.world.lock:
                sim_failed = {d.guid for d in sim.world.deliveries if d.status == "failed"}
            deadline = time.monotonic() + 60
            while not (_settled(acknowledged) and _recovered(sim_failed)):
                assert time.monotonic() < deadline, (
                    f"left unprocessed: {len(acknowledged) - len(_rows(acknowledged))} acknowledged, "
                    f"{sorted(sim_failed - _final(sim_failed))} failed simulator webhooks"
                )
                time.sleep(0.5)
            timings["settled"] = time.monotonic()
            with httpx.Client(timeout=10) as client:
                ready = client.get(f"{running.api_url}/readyz")
            assert not running.dead(), f"processes died: {running.dead()} (logs in {running.log_dir})"
            assert running.log_dir is not None  # stack() always logs to files
            worker_log = (running.log_dir / "worker.log").read_text()

    assert faults and "faults_over" in timings, "the sweep never started, so no fault was injected"
    # Every acknowledged delivery: stored once and processed once in effect.
    rows = _rows(acknowledged)
    assert set(rows) == acknowledged
    assert all(status in ("done", "ignored") for status, _ in rows.values())
    refused = {d: s for d, s in stream.answers.items() if not 200 <= s < 300}
    assert all(s in (0, 503) for s in refused.values()), refused  # only "come back later", never a 500
    # The story: every effect there, none doubled (one status comment, bump, report; one sweep).
    failed = [f"{c.name}: {c.detail}" for c in run.report.checks if not c.ok]
    assert not failed, "\n".join(failed)
    jobs = run.report.summary["jobs"]
    with sim.world.lock:
        dispatched = len(sim.world.runs)
        redelivered = {d.guid for d in sim.world.deliveries if d.redelivery}
    assert jobs == {"succeeded": dispatched}, (jobs, dispatched)  # one dispatch per job, no repeat
    # The simulator's webhooks that failed while PostgreSQL was down were redelivered and processed.
    assert sim_failed, "no simulator webhook failed: the outage test did not happen"
    assert sim_failed <= redelivered and _recovered(sim_failed)
    assert ready.status_code == 200, ready.text
    broker_events = worker_log.count('"event": "broker_reconnect"') + worker_log.count(
        '"event": "broker_connection_lost"'
    )
    recover = timings["settled"] - timings["faults_over"]
    print(
        f"\nfaults: {'; '.join(faults)}\n"
        f"stream: {len(stream.answers)} sent, {len(acknowledged)} acknowledged, "
        f"{len(refused)} refused with 503/connection errors while PostgreSQL was down\n"
        f"worker broker events (connection lost / reconnect attempts): {broker_events}\n"
        f"simulator webhooks that failed: {len(sim_failed)}, all redelivered and processed\n"
        f"time to recover (last fault to every acknowledged delivery processed, story done): {recover:.1f} s"
    )
