"""Ingest with a real Celery worker process: on the embedded default and on Postgres + Redis.

Proves the delivery guarantees end to end: every real payload ends done/ignored, a worker
SIGKILLed mid-task still completes the delivery exactly once, and a delivery that arrives while
the broker is unreachable is processed once the reaper runs with the broker back.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.core.clock import aware, utcnow
from app.db import session_scope
from app.models import Delivery
from tests.conftest import ROOT
from tests.helpers.signing import fixture_payloads, headers_for
from tests.helpers.wait import wait_for

SECRET = "worker-test-secret"


@dataclass
class Stack:
    env: dict[str, str]
    client: TestClient
    tmp: Path

    def start_worker(self, pool: str = "solo") -> subprocess.Popen[bytes]:
        log = open(self.tmp / f"worker-{time.monotonic_ns()}.log", "wb")  # noqa: SIM115
        return subprocess.Popen(
            [sys.executable, "-m", "app", "worker", "--pool", pool, "--concurrency", "1"],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def post(self, event: str, body: bytes, delivery_id: str) -> int:
        return self.client.post(
            "/webhooks/github", content=body, headers=headers_for(event, body, SECRET, delivery_id)
        ).status_code


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def statuses() -> dict[str, str]:
    with session_scope() as s:
        return {d.id: d.status for d in s.execute(select(Delivery)).scalars()}


@pytest.fixture(params=["embedded", pytest.param("services", marks=pytest.mark.services)])
def stack(
    request: pytest.FixtureRequest, settings_env: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Stack]:
    if request.param == "services":
        db_url = request.getfixturevalue("pg_clean_url")
        broker = request.getfixturevalue("redis_url")
    else:
        db_url = request.getfixturevalue("sqlite_url")
        broker = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    with api_stack(settings_env, tmp_path, db_url, broker) as running:
        yield running


@contextmanager
def api_stack(settings_env: pytest.MonkeyPatch, tmp_path: Path, db_url: str, broker: str) -> Iterator[Stack]:
    """The API in this process on ``db_url`` and ``broker``, and what a worker process needs."""
    from app.settings import reset_settings_cache
    from app.web.main import create_app

    values = {
        "SWEEPBOT_DATABASE_URL": db_url,
        "SWEEPBOT_BROKER_URL": broker,
        "SWEEPBOT_WEBHOOK_SECRETS": SECRET,
        "SWEEPBOT_EXTRA_HANDLER_MODULES": "tests.slow_handler",
        "SWEEPBOT_DELIVERY_LEASE_SECONDS": "3",
        "SWEEPBOT_GITHUB_API_URL": "http://127.0.0.1:9/api/v3",
        "SWEEPBOT_LOG_LEVEL": "WARNING",
        # A queue of its own: other test runs sharing this Redis never take our messages.
        "SWEEPBOT_QUEUE_NAME": f"sweepbot-test-{uuid.uuid4().hex[:8]}",
    }
    for key, value in values.items():
        settings_env.setenv(key, value)
    reset_settings_cache()
    env = {**os.environ, **values, "PYTHONPATH": str(ROOT)}
    with TestClient(create_app()) as client:
        yield Stack(env=env, client=client, tmp=tmp_path)


def test_fixture_payloads_processed_by_a_real_worker(stack: Stack, fixtures_dir: Path) -> None:
    worker = stack.start_worker()
    try:
        expected = {}
        for n, (event, path) in enumerate(fixture_payloads(fixtures_dir)):
            delivery_id = f"w-{n}"
            assert stack.post(event, path.read_bytes(), delivery_id) in (200, 202)
            expected[delivery_id] = event
        wait_for(
            lambda: all(s in ("done", "ignored", "failed") for s in statuses().values()),
            "every delivery to finish",
            90,
        )
        final = statuses()
        assert set(final) == set(expected)
        assert all(s in ("done", "ignored") for s in final.values()), final
    finally:
        _stop(worker)


def _lease_over(delivery_id: str) -> bool:
    with session_scope() as s:
        row = s.get(Delivery, delivery_id)
        lease = aware(row.lease_until) if row is not None else None
        return lease is not None and lease < utcnow()


def test_worker_killed_mid_task_still_completes_once(stack: Stack) -> None:
    from app.flows.ingest.deliveries import reap

    effects = stack.tmp / "effects.txt"
    body = json.dumps({"effects": str(effects), "sleep": 30}).encode()
    worker = stack.start_worker()
    try:
        assert stack.post("sweepbot_test", body, "kill-1") == 202
        wait_for(lambda: Path(str(effects) + ".started").exists(), "the handler to start", 60)
        os.killpg(worker.pid, signal.SIGKILL)  # mid-task: the handler is sleeping
        worker.wait(timeout=10)
        assert statuses()["kill-1"] == "processing"
    finally:
        _stop(worker)
    worker = stack.start_worker()
    try:
        # The lease is a wall-clock contract between processes (the dead worker wrote it): wait
        # until the database says it ran out, not a fixed time.
        wait_for(lambda: _lease_over("kill-1"), "the dead worker's lease to run out", 15, every=0.1)
        assert reap(grace_seconds=0) == ["kill-1"]
        wait_for(lambda: statuses()["kill-1"] == "done", "the delivery to complete", 60)
        assert effects.read_text().splitlines() == ["kill-1"]
        with session_scope() as s:
            assert s.get_one(Delivery, "kill-1").attempts == 2
    finally:
        _stop(worker)


def test_broker_unreachable_then_reaped(stack: Stack, settings_env: pytest.MonkeyPatch) -> None:
    from app.flows.ingest.deliveries import reap
    from app.settings import reset_settings_cache

    effects = stack.tmp / "effects.txt"
    body = json.dumps({"effects": str(effects), "sleep": 0}).encode()
    good_broker = stack.env["SWEEPBOT_BROKER_URL"]
    settings_env.setenv("SWEEPBOT_BROKER_URL", "redis://127.0.0.1:1/0")  # nothing listens there
    reset_settings_cache()
    started = time.monotonic()
    assert stack.post("sweepbot_test", body, "nobroker-1") == 202
    assert time.monotonic() - started < 10
    assert statuses()["nobroker-1"] == "received"

    def unrung() -> bool:  # the doorbell's failed ring is recorded, so the reaper takes it at once
        with session_scope() as s:
            return s.get_one(Delivery, "nobroker-1").enqueued_at is None

    wait_for(unrung, "the doorbell to record that it could not ring", 15)
    # The broker is back: the reaper (normally on beat) re-enqueues, a worker processes it once.
    settings_env.setenv("SWEEPBOT_BROKER_URL", good_broker)
    reset_settings_cache()
    worker = stack.start_worker()
    try:
        assert reap(grace_seconds=0) == ["nobroker-1"]
        wait_for(lambda: statuses()["nobroker-1"] == "done", "the reaped delivery to complete", 60)
        assert effects.read_text().splitlines() == ["nobroker-1"]
    finally:
        _stop(worker)
