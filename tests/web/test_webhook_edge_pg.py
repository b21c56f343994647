"""The webhook edge on PostgreSQL: the plain ASGI route and the prepared batched insert of the
group commit store exactly what they acknowledge, ring the doorbell once per commit, and keep
the guarantees of the slower path (duplicates, ping, lz4 bodies, an outage answered 503)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, text

from app.core.delivery import IncomingDelivery
from app.db import session_scope
from app.flows.ingest.deliveries import delivery_rows
from app.models import Delivery
from app.settings import reset_settings_cache
from app.web import groupcommit, webhooks
from tests.helpers.signing import fixture_payloads, headers_for

SECRET = "pg-edge-secret"


@pytest.fixture
def rung(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    calls: list[list[str]] = []
    monkeypatch.setattr(webhooks.group_commit, "on_stored", calls.append)
    return calls


@pytest.fixture
def client(
    pg_clean_url: str, settings_env: pytest.MonkeyPatch, rung: list[list[str]]
) -> Iterator[TestClient]:
    from app.web.main import create_app

    settings_env.setenv("SWEEPBOT_DATABASE_URL", pg_clean_url)
    settings_env.setenv("SWEEPBOT_WEBHOOK_SECRETS", SECRET)
    settings_env.setenv("SWEEPBOT_BROKER_URL", "redis://127.0.0.1:1/0")
    settings_env.setenv("SWEEPBOT_GITHUB_API_URL", "http://127.0.0.1:9/api/v3")
    reset_settings_cache()
    with TestClient(create_app()) as c:
        yield c


def test_the_prepared_insert_stores_the_rows_delivery_rows_describes(
    pg_clean_url: str, settings_env: pytest.MonkeyPatch
) -> None:
    # The PostgreSQL path sends five arrays and derives the other columns in SQL; the SQLite path
    # (store_batch) inserts delivery_rows as they are. Both must store the same rows.
    settings_env.setenv("SWEEPBOT_DATABASE_URL", pg_clean_url)
    reset_settings_cache()
    items = [
        IncomingDelivery("r-push", "push", None, "o/r", b'{"ref": "refs/heads/main"}'),
        IncomingDelivery("r-ping", "ping", None, None, b'{"zen": "x"}'),
        IncomingDelivery("r-comment", "issue_comment", "created", "o/r", b'{"action": "created"}'),
        IncomingDelivery("r-push", "push", None, "o/r", b'{"ref": "again"}'),  # repeated in the batch
    ]
    insert, close = groupcommit.writer_for(pg_clean_url)

    async def write() -> list[Any]:
        try:
            return await insert(items)
        finally:
            assert close is not None
            await close()

    before = datetime.now(UTC)
    outcomes = asyncio.run(write())
    assert [o.created for o in outcomes] == [True, True, True, False]
    with session_scope() as s:
        stored = {d.id: d for d in s.execute(select(Delivery)).scalars()}
    assert set(stored) == {"r-push", "r-ping", "r-comment"}
    t = stored["r-push"].received_at
    assert before <= t <= datetime.now(UTC)
    for row in delivery_rows(items, t):
        d = stored[row["id"]]
        assert {column: getattr(d, column) for column in row} == {**row, "body": d.body}, row["id"]
        assert bytes(d.body) == row["body"]


def test_real_payloads_are_stored_byte_for_byte_and_duplicates_change_nothing(
    client: TestClient, fixtures_dir: Path, rung: list[list[str]]
) -> None:
    sent: dict[str, bytes] = {}
    for i, (event, path) in enumerate(fixture_payloads(fixtures_dir)):
        body = path.read_bytes()
        delivery_id = f"pg-{i}"
        resp = client.post(
            "/webhooks/github", content=body, headers=headers_for(event, body, SECRET, delivery_id)
        )
        assert resp.status_code == (200 if event == "ping" else 202), resp.text
        assert resp.headers["content-type"] == "application/json"
        sent[delivery_id] = body
        again = client.post(
            "/webhooks/github", content=body, headers=headers_for(event, body, SECRET, delivery_id)
        )
        assert (again.status_code, again.json()["status"]) == (200, "duplicate")
    with session_scope() as s:
        stored = {d.id: d for d in s.execute(select(Delivery)).scalars()}
        assert {k: bytes(v.body) for k, v in stored.items()} == sent
        for d in stored.values():
            assert d.body_bytes == len(sent[d.id])
            assert d.status == ("done" if d.event == "ping" else "received")
            assert (d.enqueued_at is None) == (d.event == "ping")
        compression = s.execute(text("SELECT DISTINCT pg_column_compression(body) FROM deliveries")).scalars()
        assert set(compression) <= {"lz4", None}  # None: stored inline, too small to compress
    rung_ids = [i for ids in rung for i in ids]
    assert sorted(rung_ids) == sorted(k for k, v in stored.items() if v.event != "ping")  # each once


def test_a_burst_shares_commits_and_every_request_is_answered(
    pg_clean_url: str, settings_env: pytest.MonkeyPatch
) -> None:
    settings_env.setenv("SWEEPBOT_DATABASE_URL", pg_clean_url)
    reset_settings_cache()
    rings: list[list[str]] = []
    commit = groupcommit.GroupCommit(on_stored=rings.append)
    items = [
        IncomingDelivery(f"b-{i % 40}", "push", None, "o/r", json.dumps({"i": i}).encode()) for i in range(60)
    ]

    async def burst() -> list[Any]:
        return list(await asyncio.gather(*(commit.submit(item) for item in items)))

    results = asyncio.run(burst())
    assert sum(r.created for r in results) == 40  # 20 of the 60 repeat an id already sent
    assert len(rings) < 60 and sorted(i for ids in rings for i in ids) == sorted({i.id for i in items})


def test_webhook_route_is_documented_and_other_methods_refused(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert spec["paths"]["/webhooks/github"]["post"]["summary"] == "Receive a GitHub webhook delivery"
    resp = client.get("/webhooks/github")
    assert resp.status_code == 405 and resp.headers["allow"] == "POST"


def test_a_database_that_goes_away_answers_503_then_recovers(
    client: TestClient, pg_clean_url: str, rung: list[list[str]]
) -> None:
    body = b'{"zen": "x", "repository": {"full_name": "o/r"}}'
    assert (
        client.post("/webhooks/github", content=body, headers=headers_for("push", body, SECRET)).status_code
        == 202
    )
    # Kill the writer's connection from the server side, the way a database restart does.
    with session_scope() as s:
        s.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        )
    resp = client.post("/webhooks/github", content=body, headers=headers_for("push", body, SECRET))
    assert resp.status_code == 503 and int(resp.headers["retry-after"]) > 0
    assert resp.json()["error"] == "database_unavailable"
    # The next delivery opens a new connection and is stored.
    resp = client.post("/webhooks/github", content=body, headers=headers_for("push", body, SECRET, "after-1"))
    assert resp.status_code == 202, resp.text
    with session_scope() as s:
        assert s.get(Delivery, "after-1") is not None
