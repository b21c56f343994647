"""The delivery backlog against a database: reaper de-duplication, batched re-enqueue, the
consumption heartbeat, /readyz and /metrics on it, periodic work off the delivery queue, broker
reconnects as events (the pure rules are in tests/core/test_backlog.py)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from app.db import session_scope
from app.flows.ingest.deliveries import reap, record_consumption
from app.models import Delivery
from app.settings import reset_settings_cache
from tests.helpers.signing import headers_for

SECRET = "backlog-secret"
T = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
GRACE, STALL = timedelta(seconds=20), timedelta(seconds=120)


@pytest.fixture
def client(sqlite_url: str, settings_env: pytest.MonkeyPatch) -> Iterator[TestClient]:
    from app.web.main import create_app

    settings_env.setenv("SWEEPBOT_DATABASE_URL", sqlite_url)
    settings_env.setenv("SWEEPBOT_WEBHOOK_SECRETS", SECRET)
    settings_env.setenv("SWEEPBOT_BROKER_URL", "redis://127.0.0.1:1/0")
    settings_env.setenv("SWEEPBOT_GITHUB_API_URL", "http://127.0.0.1:9/api/v3")
    settings_env.setenv("SWEEPBOT_CONSUMPTION_STALL_SECONDS", "120")
    reset_settings_cache()
    with TestClient(create_app()) as c:
        yield c


@pytest.fixture
def sent(settings_env: pytest.MonkeyPatch) -> list[tuple[str, list[str]]]:
    import app.adapters.queue

    messages: list[tuple[str, list[str]]] = []

    def fake_enqueue(name: str, *args: Any, **kw: Any) -> bool:
        messages.append((name, list(args[0]) if args and isinstance(args[0], list) else list(args)))
        return True

    settings_env.setattr(app.adapters.queue, "enqueue", fake_enqueue)
    return messages


def _burst(client: TestClient, sent: list[tuple[str, list[str]]], n: int, prefix: str = "b") -> list[str]:
    ids = []
    for i in range(n):
        body = json.dumps({"action": "created", "n": i, "repository": {"full_name": "o/r"}}).encode()
        delivery_id = f"{prefix}-{i:04d}"
        resp = client.post(
            "/webhooks/github", content=body, headers=headers_for("star", body, SECRET, delivery_id)
        )
        assert resp.status_code == 202
        ids.append(delivery_id)
    # Let the API's doorbell thread ring them all (into the fake broker), then forget its messages:
    # the tests count what the reaper sends.
    deadline = time.monotonic() + 20
    while {i for _, batch in list(sent) for i in batch} < set(ids):
        assert time.monotonic() < deadline, "the doorbell never rang"
        time.sleep(0.02)
    sent.clear()
    return ids


def _age(ids: list[str], seconds: float, *, enqueued: bool = True) -> None:
    """Make deliveries look ``seconds`` old (stored and rung then)."""
    t = datetime.now(UTC) - timedelta(seconds=seconds)
    with session_scope() as s:
        values: dict[str, Any] = {"received_at": t}
        values["enqueued_at"] = t if enqueued else None
        s.execute(update(Delivery).where(Delivery.id.in_(ids)).values(**values))


def _consume(ids: list[str], sent_seconds_ago: float) -> None:
    """A worker starts on ``ids`` (and claims them), from a message pushed that long ago."""
    with session_scope() as s:
        record_consumption(s, ids, sent_at=time.time() - sent_seconds_ago)
        s.execute(update(Delivery).where(Delivery.id.in_(ids)).values(status="processing", lease_until=None))
        s.execute(
            update(Delivery)
            .where(Delivery.id.in_(ids))
            .values(lease_until=datetime.now(UTC) + timedelta(seconds=300))
        )


def test_a_backlog_being_drained_is_not_re_enqueued(
    client: TestClient, sent: list[tuple[str, list[str]]]
) -> None:
    """The defect: every reaper run re-enqueued every delivery still waiting (up to 5 copies)."""
    ids = _burst(client, sent, 120)
    for n, delivery_id in enumerate(ids):  # rung one after another over the last two minutes
        _age([delivery_id], 120 - n)
    _consume(ids[:10], 110)  # the workers are on the first ten
    for _ in range(5):  # five reaper runs while the rest waits its turn
        assert reap(grace_seconds=20) == []
    assert sent == []


def test_lost_messages_are_re_enqueued_once_in_batches(
    client: TestClient, sent: list[tuple[str, list[str]]]
) -> None:
    ids = _burst(client, sent, 130, prefix="l")
    _age(ids[:120], 100)  # rung 100 s ago ...
    _age(ids[120:121], 30)  # ... this one later ...
    _age(ids[121:], 25)  # ... and these after it (still waiting behind it)
    _consume(ids[120:121], 30)  # a worker took a later one: the first 120 messages are gone
    assert sorted(reap(grace_seconds=20)) == sorted(ids[:120])
    assert [name for name, _ in sent] == ["sweepbot.process_deliveries"] * 3  # 50 + 50 + 20
    assert [len(batch) for _, batch in sent] == [50, 50, 20]
    assert reap(grace_seconds=20) == []  # just rung: not again (no copies pile up)


def test_a_stalled_queue_is_rung_again_after_the_stall(
    client: TestClient, sent: list[tuple[str, list[str]]]
) -> None:
    ids = _burst(client, sent, 3, prefix="s")
    _age(ids, 60)
    assert reap(grace_seconds=20) == []  # no consumption yet, but not stalled for long
    _age(ids, 200)
    assert sorted(reap(grace_seconds=20)) == ids  # Redis lost them all: nothing will ever come


def test_readyz_not_ready_while_work_waits_unconsumed_and_metrics_show_the_age(
    client: TestClient, sent: list[tuple[str, list[str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.adapters.broker

    monkeypatch.setattr(app.adapters.broker, "broker_health", lambda: {"ok": True})  # the broker is fine
    ids = _burst(client, sent, 2, prefix="r")
    assert client.get("/readyz").status_code == 200
    _age(ids, 400)
    ready = client.get("/readyz")
    assert ready.status_code == 503, ready.json()
    assert (
        not ready.json()["consumption"]["ok"]
        and "no worker consumed" in ready.json()["consumption"]["reason"]
    )
    metrics = client.get("/metrics").text
    (line,) = [
        x for x in metrics.splitlines() if x.startswith("sweepbot_oldest_unprocessed_delivery_age_seconds ")
    ]
    assert 399 <= float(line.split()[1]) < 500
    _consume(ids[:1], 400)  # a worker consumes again: ready, even though the backlog is old
    assert client.get("/readyz").status_code == 200
    assert "sweepbot_delivery_consumed_age_seconds" in client.get("/metrics").text


def test_a_doorbell_that_could_not_ring_is_reaped_at_once(client: TestClient, sent: list[Any]) -> None:
    from app.flows.ingest.deliveries import mark_not_enqueued

    (delivery_id,) = _burst(client, sent, 1, prefix="n")
    _age([delivery_id], 25)
    assert reap(grace_seconds=20) == []  # rung 25 s ago as far as the database knows
    mark_not_enqueued([delivery_id])  # what the doorbell records when the broker refused it
    assert reap(grace_seconds=20) == [delivery_id]


def test_celery_rides_out_broker_restarts_and_keeps_periodic_work_apart(
    settings_env: pytest.MonkeyPatch,
) -> None:
    from workers.celery_app import PERIODIC_TASKS, make_celery, periodic_queue

    settings_env.setenv("SWEEPBOT_BROKER_URL", "redis://127.0.0.1:6379/0")
    settings_env.setenv("SWEEPBOT_QUEUE_NAME", "q1")
    reset_settings_cache()
    conf = make_celery().conf
    assert conf.broker_connection_max_retries is None  # forever (0 would mean: never retry)
    assert conf.broker_connection_retry and conf.broker_connection_retry_on_startup
    assert conf.worker_cancel_long_running_tasks_on_connection_loss
    for entry in conf.beat_schedule.values():
        assert entry["options"]["queue"] == periodic_queue("q1") == "q1.periodic"
        assert entry["options"]["expires"] > 0
        assert entry["task"] in PERIODIC_TASKS
    assert conf.task_routes["sweepbot.scheduler_tick"] == {"queue": "q1.periodic"}
    assert "sweepbot.process_deliveries" not in conf.task_routes  # deliveries stay on q1


def test_broker_messages_become_structured_events(capsys: pytest.CaptureFixture[str]) -> None:
    from app.logging import broker_event, configure

    message = (
        "consumer: Cannot connect to redis://:hunter2@127.0.0.1:6390/0: Error 111 connecting to "
        "127.0.0.1:6390. Connection refused..\nTrying again in 4.00 seconds... (2/None)\n"
    )
    assert broker_event(message) == {
        "event": "broker_reconnect",
        "attempt": 2,
        "max_attempts": None,
        "retry_in_seconds": 4.0,
        "broker": "redis://**@127.0.0.1:6390/0",
        "error": "Error 111 connecting to 127.0.0.1:6390. Connection refused.",
    }
    lost = broker_event("consumer: Connection to broker lost. Trying to re-establish the connection...")
    assert lost is not None and lost["event"] == "broker_connection_lost"
    configure("INFO", True)
    logging.getLogger("celery.worker.consumer.consumer").error(message)
    line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert line["event"] == "broker_reconnect" and line["attempt"] == 2 and "hunter2" not in json.dumps(line)
    assert line["logger"] == "celery.worker.consumer.consumer" and line["level"] == "error"


def test_an_old_message_consumed_after_its_reap_does_not_make_the_backlog_look_lost(
    client: TestClient, sent: list[tuple[str, list[str]]]
) -> None:
    """Seen in the fault test: the position came from the database's enqueue time, which the
    reaper rewrites, so an old message consumed after a re-ring moved it to "now" and every
    delivery still waiting was rung again, over and over."""
    ids = _burst(client, sent, 40, prefix="c")
    _age(ids[:1], 60)
    _age(ids[1:], 20)  # waiting behind the first
    assert reap(grace_seconds=10) == []  # never consumed, not stalled long: nothing
    with session_scope() as s:  # the reaper re-rang the first one (its enqueue time is now)
        s.execute(update(Delivery).where(Delivery.id == ids[0]).values(enqueued_at=datetime.now(UTC)))
    _consume(ids[:1], 60)  # ... and then its original, 60 s old doorbell message is consumed
    assert reap(grace_seconds=10) == []  # the 39 others are still waiting, not lost
