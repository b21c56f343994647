"""The embedded broker (kombu's SQLAlchemy transport) keeps no consumed message: the transport
only marks a taken message ``visible = false``, and beat's ``sweepbot.purge_broker`` deletes
those rows (``app.adapters.broker.purge_consumed``), never one still waiting."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from kombu import Connection

from app.adapters import broker
from app.adapters.queue import enqueue
from app.settings import reset_settings_cache
from tests.flows.test_ingest_worker import Stack, _stop, api_stack, statuses
from tests.helpers.wait import wait_for


def _rows(path: Path) -> dict[bool, int]:
    """Rows of the transport's message table by ``visible``."""
    with sqlite3.connect(path, timeout=30) as db:
        found = dict(db.execute("SELECT visible, count(*) FROM kombu_message GROUP BY visible").fetchall())
    return {True: int(found.get(1, 0)), False: int(found.get(0, 0))}


def test_consumed_messages_are_deleted_and_waiting_ones_kept(tmp_path: Path) -> None:
    path = tmp_path / "broker.sqlite3"
    url = f"sqla+sqlite:///{path}"
    with Connection(url) as conn:
        queue = conn.SimpleQueue("q")
        for i in range(25):
            queue.put({"i": i})
        for i in range(20):
            message = queue.get(timeout=5)
            assert message.payload == {"i": i}
            message.ack()
        assert _rows(path) == {True: 5, False: 20}  # the transport keeps what it handed out
        assert broker.purge_consumed(url) == 20
        assert _rows(path) == {True: 5, False: 0}
        assert [queue.get(timeout=5).payload["i"] for _ in range(5)] == [20, 21, 22, 23, 24]
        queue.close()


def test_beat_purges_only_a_sql_broker(settings_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    settings_env.setenv("SWEEPBOT_BROKER_URL", f"sqla+sqlite:///{tmp_path / 'b.sqlite3'}")
    reset_settings_cache()
    embedded = broker.make_celery()
    entry = embedded.conf.beat_schedule["purge-broker"]
    assert entry["task"] == "sweepbot.purge_broker"
    assert entry["options"]["queue"] == broker.periodic_queue(embedded.conf.task_default_queue)
    settings_env.setenv("SWEEPBOT_BROKER_URL", "redis://127.0.0.1:6379/0")
    reset_settings_cache()
    assert "purge-broker" not in broker.make_celery().conf.beat_schedule  # Redis deletes what it delivers
    assert broker.purge_consumed("redis://127.0.0.1:6379/0") == 0


@pytest.fixture
def embedded(settings_env: pytest.MonkeyPatch, tmp_path: Path, sqlite_url: str) -> Iterator[Stack]:
    broker_url = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    with api_stack(settings_env, tmp_path, sqlite_url, broker_url) as running:
        yield running


def test_after_a_real_worker_consumed_n_messages_the_table_holds_none_of_them(embedded: Stack) -> None:
    path = embedded.tmp / "broker.sqlite3"
    worker = embedded.start_worker()
    try:
        n = 12
        for i in range(n):
            body = json.dumps({"repository": {"full_name": "o/r"}, "i": i}).encode()
            assert embedded.post("push", body, f"p-{i}") == 202
        wait_for(
            lambda: len(statuses()) == n and all(s in ("done", "ignored") for s in statuses().values()),
            "the worker to finish every delivery",
            90,
        )
        consumed = _rows(path)[False]
        assert consumed >= 1  # the control: the doorbell's messages were consumed and kept
        enqueue("sweepbot.purge_broker")  # what beat sends every minute
        wait_for(lambda: _rows(path) == {True: 0, False: 0}, "the purge to delete the consumed rows", 60)
    finally:
        _stop(worker)
